"""Recording many dispatches into one kp Sequence, submitted once and replayable.

    with ev.record() as step:      # ops inside are recorded, not run
        y = ev.matmul(x, w)
        z = ev.add(y, b)
    # leaving the block submits the whole sequence once
    step.run()                     # replays it (one submit) with the same tensors

Push constants are captured at record time, so a replay repeats exactly what was recorded; per-step
scalars that change between replays belong in a device buffer that the kernels read.

Buffers planned by lifetime (the default with reuse): inside a recording a device-only tensor gets a
planned Buffer (runtime/tensor.py: no device memory yet) and its dispatches a Deferred algorithm; the
recording notes when each such tensor is allocated and when it dies (a clock that ticks at both). When the
recording ends, plan_buffers places them, largest first, each in the smallest buffer so far whose tensors'
lifetimes are disjoint from its own (else a new buffer of its size), then the dispatches get their kp
algorithms and the barrier plan below runs over the placed buffers (so a tensor's writer waits for the
readers of the dead tensor that had its buffer before, as with the free pool). Knowing every lifetime
first keeps a big buffer for the big allocation to come instead of handing it to a smaller one on the way
(bench/results/record_memory-lavapipe.txt). Of equal buffers the plan takes the one whose last tensor died
longest before (the free pool's first in, first out below), which leaves fewer barriers. A tensor that an
eager dispatch or a transfer touches during the recording gets a buffer of its own at once (pinned). Kill
switch: EVERMIND_VK_DISABLE_RECORD_PLAN=1 (the free pool below, as it allocates).

Buffer reuse inside a recording (what PyTorch's caching allocator does, in recording order): the Program
keeps the device buffers its operations bind, not the Tensor objects. When a device-only tensor that was
allocated inside the recording dies there (a temporary of an op, a saved activation the tape dropped after
its backward used it), its buffer joins the recording's free pool, and a later `empty()` in the same
recording takes the smallest free buffer that holds it and is at most REUSE_MAX_RATIO times its size
instead of allocating; of several such, the one freed longest ago (first in, first out: its last readers
and writers are the likeliest to be behind a barrier already, so the new writer needs none for them;
the 23.7M LM's step, recorded with an NVIDIA GPU's kernel choices, has 343 barriers for 539 dispatches
against 397 when the last freed buffer was taken). That is safe on replay because the barrier plan below keeps kp's global
compute/transfer -> compute barrier (ci/patches/0002) before every dispatch that writes a buffer read or
written since the last barrier: it runs after the earlier readers and writers of a reused buffer have finished
(WAR and WAW as well as RAW). Never handed out again: host-visible tensors, buffers an
upload or download touched, tensors allocated before the recording or in `device.eager()`, buffers an
eager dispatch wrote during the recording (pinned), tensors still alive when the recording ends. A tensor
allocated inside the recording keeps no state from one replay to the next once its buffer is shared: its
first operation in the step must write it (every op output does). Kill switch:
EVERMIND_VK_DISABLE_RECORD_REUSE=1.

Barriers only where a dependency needs one: the barrier of patch 0002 drains the device before every
dispatch, so a launch that fills a fraction of the device (the last wave of a matmul, AdamW over a small
tensor) leaves it idle. A recording knows which buffers each dispatch reads and writes (the access
qualifier of each binding in the kernel's interface) and keeps the barrier (ci/patches/0009) only before a
dispatch that reads or writes a buffer written, or writes a buffer read, since the last barrier (RAW, WAW,
WAR); the first dispatch of a program always has it (it orders the program after earlier submits). An
upload counts as a write of its buffer and a download as a read (each also records its own barrier for
that buffer). Buffers are compared by identity, so views and reused buffers are covered. A dispatch may
name the byte range a binding reads and writes (kernels.dispatch's `writes`: the chunk partials of a split
product, each in its own rows of one workspace): dispatches that touch disjoint ranges of one buffer need
no barrier between them; a binding without a range covers its whole buffer. Kill switch:
EVERMIND_VK_DISABLE_BARRIER_ELISION=1 (a barrier before every dispatch, as before). With elision on,
the profiler's per-kernel times of dispatches that overlap are split at the timestamps between them.
"""
from __future__ import annotations


import bisect

from . import knobs
from .device import get_device
from .tensor import Buffer, _new_buffer, record_plan_enabled, record_reuse_enabled
from ..errors import EvermindError

# A free buffer serves an allocation up to this many times smaller (best fit). Measured on lavapipe
# (bench/record_memory.py --config mid, f32): peak 121.0 MiB with exact sizes only, 113.0 with 2, 111.9 with 4,
# 112.1 with any: weight gradients fit freed activation buffers.
REUSE_MAX_RATIO = 2


def plan_buffers(sizes, lifetimes) -> tuple[list[int], list[int]]:
    """Buffers for allocations known in advance: allocation i takes sizes[i] bytes from lifetimes[i][0] to
    lifetimes[i][1] (clock ticks, end exclusive; None: to the end). Greedy by size: the largest allocation
    first, each into the smallest buffer planned so far that holds it and whose allocations' lifetimes do
    not overlap its own (of several that size, the one whose allocation before it ended longest before it
    starts), else into a new buffer of its size. Returns (buffer index per allocation, each
    buffer's size). Two allocations share a buffer only if their lifetimes are disjoint."""
    inf = float("inf")
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], lifetimes[i][0]))
    bsize: list[int] = []  # per buffer: its size (the first, largest, allocation's)
    spans: list[list] = []  # per buffer: its allocations' (start, end), sorted by start
    home = [0] * len(sizes)
    by_size: list[tuple[int, int]] = []  # (size, buffer), ascending
    for i in order:
        n, (s0, e0) = sizes[i], lifetimes[i]
        e0 = inf if e0 is None else e0
        pick, gap = None, None
        for size, b in by_size[bisect.bisect_left(by_size, (n, -1)):]:
            if pick is not None and size > bsize[pick]:
                break
            sp = spans[b]
            k = bisect.bisect_left(sp, (s0, -inf))
            if (k == 0 or sp[k - 1][1] <= s0) and (k == len(sp) or e0 <= sp[k][0]):
                # of equal sizes, the one whose previous tensor died longest before (its readers are the
                # likeliest behind a barrier already, as the free pool's first in, first out)
                g = s0 - sp[k - 1][1] if k else inf
                if pick is None or g > gap:
                    pick, gap = b, g
        if pick is None:
            pick = len(bsize)
            bsize.append(n)
            spans.append([])
            bisect.insort(by_size, (n, pick))
        bisect.insort(spans[pick], (s0, e0))
        home[i] = pick
    return home, bsize


def barrier_elision_enabled() -> bool:
    """Whether recordings drop barriers between dispatches that touch disjoint data
    (EVERMIND_VK_DISABLE_BARRIER_ELISION=1 turns it off)."""
    return not knobs.get("EVERMIND_VK_DISABLE_BARRIER_ELISION")


def _meets(done, rng) -> bool:
    """Whether byte range rng (None: a whole buffer) meets any of `done` (None entries: the whole buffer)."""
    return any(r is None or rng is None or (r[0] < rng[1] and rng[0] < r[1]) for r in done)


class BarrierPlan:
    """Which dispatches of a recording need the barrier before them (see the module doc)."""

    def __init__(self, elide: bool):
        self.elide = elide
        self.written: dict = {}  # buffer -> byte ranges [lo, hi) written since the last barrier (None: all of it)
        self.read: dict = {}  # buffer -> byte ranges read since the last barrier
        self.barriers = 0  # placed so far (the program's first dispatch always gets one)
        self.dispatches = 0

    def dispatch(self, touches) -> bool:
        """A dispatch binding (buffer, access[, byte range]) entries, access "r", "w" or "rw": whether it needs
        the barrier. A range (lo, hi) is all the binding reads and writes of the buffer; None or none given:
        the whole buffer."""
        ts = [(t[0], t[1], t[2] if len(t) > 2 else None) for t in touches]
        self.dispatches += 1
        need = (not self.elide or self.barriers == 0
                or any(_meets(self.written.get(b, ()), r) for b, a, r in ts)                  # RAW, WAW
                or any(_meets(self.read.get(b, ()), r) for b, a, r in ts if "w" in a))       # WAR
        if need:
            self.barriers += 1
            self.written, self.read = {}, {}
        for b, a, r in ts:
            for kind, seen in (("w", self.written), ("r", self.read)):
                if kind in a:
                    seen.setdefault(b, []).append(r)
        return need

    def transfer(self, buf, access: str) -> None:
        """An upload ("w") or download ("r") of buf: later dispatches touching it wait for it."""
        (self.written if access == "w" else self.read).setdefault(buf, []).append(None)


class Program:
    """A recorded sequence of dispatches and transfers (made by record()) that run() replays without
    Python-side work per op."""

    def __init__(self, device):
        self.device = device
        self._ops = []
        self._keep = []  # algorithms and device buffers (never Tensors) the sequence uses stay alive with it
        self._labels = []  # per op: the kernel variant's name, or "upload" / "download" (the profiler's rows)
        self._shapes = []  # per op: its launch's sizes (kernels.launch_shape), "" for transfers
        self._seq = None
        self.reuse = record_reuse_enabled()
        self.plan = self.reuse and record_plan_enabled()
        self._free: dict[int, list] = {}  # byte size -> buffers of tensors that died in this recording
        self.buffers_reused = 0  # allocations of this recording served from the free pool (or by the plan)
        self.barrier_plan = BarrierPlan(barrier_elision_enabled())
        self._clock = 0  # planned: ticks at each allocation and release
        self._planned: list = []  # planned: [Buffer, allocated at, released at (None: alive)]
        self._index: dict = {}  # planned: id(Buffer) -> its row of _planned
        self._touches: list = []  # planned: per op, (touches, transfer): the barrier plan runs when placed
        self.planned_bytes = 0  # planned: the bytes of the buffers the plan allocated when the recording ended

    def _planned_alloc(self, buf) -> None:
        """A planned buffer (tensor.Buffer with no kp yet) for a tensor allocated now."""
        self._clock += 1
        self._index[id(buf)] = len(self._planned)
        self._planned.append([buf, self._clock, None])

    def _place_alone(self, buf) -> None:
        """A planned buffer that must exist now (an eager dispatch or a transfer touches it): a buffer of
        its own, pinned (never shared: its state must survive replays)."""
        row = self._planned[self._index.pop(id(buf))]
        row[2] = "alone"
        buf.pinned = True
        buf.place(_new_buffer(self.device, buf.nbytes // 4, False, scope=None))

    def _place(self) -> None:
        """The recording is over: give each planned buffer its home (plan_buffers over their lifetimes)."""
        rows = [r for r in self._planned if r[2] != "alone"]
        self._planned, self._index = [], {}
        if not rows:
            return
        home, sizes = plan_buffers([r[0].nbytes for r in rows], [(r[1], r[2]) for r in rows])
        real = [_new_buffer(self.device, n // 4, False, scope=None) for n in sizes]
        self.planned_bytes = sum(sizes)
        for r, h in zip(rows, home):
            r[0].place(real[h])
        self.buffers_reused += len(rows) - len(real)

    def _take(self, nbytes: int):
        """The smallest free buffer of this recording's pool that holds nbytes and is at most REUSE_MAX_RATIO
        times as big, or None. (A kernel takes its sizes from push constants, never from the buffer's
        size, so a tensor may sit in a bigger buffer; Tensor.words is its own size.)"""
        free = self._free.get(nbytes)
        if not free:
            fits = [n for n, bufs in self._free.items() if bufs and nbytes < n <= REUSE_MAX_RATIO * nbytes]
            if not fits:
                return None
            free = self._free[min(fits)]
        self.buffers_reused += 1
        return free.pop(0)  # the longest free: its last users are the likeliest behind a barrier already

    def _release(self, buf) -> None:
        """A tensor allocated in this recording died: its buffer is free for the rest of the recording
        (planned: its lifetime ends now)."""
        if self._seq is None and self.device.recording is self:
            if not self.plan:
                self._free.setdefault(buf.nbytes, []).append(buf)
            elif id(buf) in self._index:
                self._clock += 1
                self._planned[self._index[id(buf)]][2] = self._clock

    def _append(self, op, keep, label: str = "", touches=None, transfer: str = "", shape: str = "") -> None:
        """Add a kp operation; `keep` (its algorithm or tensor) lives as long as the program; `label`
        names it (the kernel variant) and `shape` its sizes, for the profiler. A dispatch gives `touches`,
        its (buffer, access) pairs; a transfer gives its buffer as `keep` and `transfer` "w" (upload) or
        "r" (download)."""
        if self._seq is not None:
            raise EvermindError("this Program is already recorded")
        if self.plan:  # the buffers are not placed yet: barriers once they are (_end_reuse)
            self._touches.append((touches, transfer))
        elif touches is not None:
            op.barrier = self.barrier_plan.dispatch(touches)
        elif transfer:
            self.barrier_plan.transfer(keep, transfer)
        self._ops.append(op)
        self._keep.append(keep)
        self._labels.append(label or type(op).__name__)
        self._shapes.append(shape)

    @property
    def labels(self) -> list[str]:
        """What each recorded operation is, in order: a kernel variant's name, "upload" or "download"."""
        return list(self._labels)

    @property
    def shapes(self) -> list[str]:
        """Each recorded operation's launch sizes (kernels.launch_shape; "" for uploads and downloads)."""
        return list(self._shapes)

    def __len__(self) -> int:
        return len(self._ops)

    def _end_reuse(self) -> None:
        """The recording is over: the pool's buffers are held by the operations that bound them (or freed);
        planned, each buffer gets its home, the dispatches their kp algorithms and the barrier plan runs over
        the homes (the buffers the kernels really share)."""
        self._free = {}
        self.reuse = False
        if not self.plan:
            return
        self.plan = False
        self._place()
        algos: dict = {}
        for i, (op, (touches, transfer)) in enumerate(zip(self._ops, self._touches)):
            if isinstance(op, tuple):  # (device.Deferred, push words): its algorithm now its buffers exist
                self._ops[i], self._keep[i] = self.device.deferred_dispatch(op[0], op[1], algos)
                op = self._ops[i]
            if touches is not None:
                op.barrier = self.barrier_plan.dispatch([(t[0].real,) + tuple(t[1:]) for t in touches])
            elif transfer:
                self.barrier_plan.transfer(self._keep[i].real, transfer)
        self._touches = []

    def _finish(self) -> None:
        self._end_reuse()
        seq = self.device.manager.sequence()
        for op in self._ops:
            seq.record(op)
        self._seq = seq

    def run(self) -> None:
        """Submit the recorded sequence once."""
        if self._seq is None:
            raise EvermindError("Program.run() before its recording finished")
        if self._ops:
            self._seq.eval()
            self.device.submits += 1


class record:
    """Context manager: record the dispatches of the ops inside into one Program (see module doc)."""

    def __init__(self, device=None, run: bool = True):
        self.device = get_device(device)
        self.run = run
        self.program = Program(self.device)

    def __enter__(self) -> Program:
        if self.device.recording is not None:
            raise EvermindError("record() blocks do not nest")
        self.device.recording = self.program
        return self.program

    def __exit__(self, exc_type, exc, tb) -> None:
        self.device.recording = None
        self.program._end_reuse()
        if exc_type is None:
            self.program._finish()
            if self.run:
                self.program.run()
