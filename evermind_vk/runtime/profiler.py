"""GPU time per kernel variant of a recorded Program, from Vulkan timestamps.

    with ev.record() as step:
        ...
    print(ev.profile(step))          # runs the program `repeats` times (side effects included)

kp latches one timestamp before the first command and one after each recorded operation of a sequence
made with `manager.sequence(0, n)`; consecutive differences are each operation's GPU time (every
dispatch waits for the previous one: ci/patches/0002 records a compute barrier before each). Ticks are
turned into nanoseconds with the device's timestampPeriod (ci/patches/0007). Host time is the wall
time of `Program.run()` (one submit and its wait) measured separately, without timestamps.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..errors import DeviceError, EvermindError


@dataclass(frozen=True)
class ProfileRow:
    """One row of a Profile: a kernel variant (or upload / download), its count per run, time and share."""
    name: str  # a kernel variant's name, or "upload" / "download"
    count: int  # operations of this name in one run of the program
    total_ms: float  # their GPU time per run (median over repeats)
    percent: float  # of the step's GPU time


@dataclass
class Profile:
    """The result of profile(): per-kernel rows, GPU and host time per run, per-operation times and launch
    shapes."""
    rows: list  # ProfileRow, largest total first
    gpu_ms: float  # sum of the operations' GPU time per run
    host_ms: float  # median wall time of one Program.run()
    repeats: int
    device: str
    per_op_ms: list = field(default_factory=list)  # (name, ms) per operation, in program order
    serialized: bool = False  # timed with a barrier before every dispatch (profile(serialize=True))
    shapes: list = field(default_factory=list)  # per operation, in program order: its launch sizes

    def by_shape(self) -> list:
        """ProfileRows per (kernel variant, launch sizes), largest total first: which products of a step
        cost what (the sizes as runtime/kernels.launch_shape writes them)."""
        keyed = ((f"{name}  {shape}" if shape else name, ms) for (name, ms), shape in zip(self.per_op_ms, self.shapes))
        return _rows(keyed, self.gpu_ms)

    def table(self, by: str = "variant", top: int | None = None) -> str:
        """The rows per kernel variant (by="variant") or per variant and launch sizes (by="shape"),
        the `top` largest only when given, then the GPU total and the host time."""
        if by not in ("variant", "shape"):
            raise EvermindError(f"Profile.table: by must be 'variant' or 'shape', got {by!r}")
        rows = self.rows if by == "variant" else self.by_shape()
        shown = rows[:top] if top is not None else rows
        head = "kernel variant" if by == "variant" else "kernel variant  launch sizes"
        w = max([len(head)] + [len(r.name) for r in shown])
        lines = [f"{head:<{w}}  {'count':>6}  {'total ms':>10}  {'% step':>7}"]
        for r in shown:
            lines.append(f"{r.name:<{w}}  {r.count:>6}  {r.total_ms:>10.3f}  {r.percent:>6.1f}%")
        if len(shown) < len(rows):
            rest = rows[len(shown):]
            lines.append(f"{f'({len(rest)} more)':<{w}}  {sum(r.count for r in rest):>6}  "
                         f"{sum(r.total_ms for r in rest):>10.3f}  {sum(r.percent for r in rest):>6.1f}%")
        lines.append(f"{'GPU total':<{w}}  {sum(r.count for r in rows):>6}  {self.gpu_ms:>10.3f}  {100.0:>6.1f}%"
                     + ("  (serialized: a barrier before every dispatch)" if self.serialized else ""))
        lines.append(f"host time per step: {self.host_ms:.3f} ms (median of {self.repeats} runs, one submit each) "
                     f"on {self.device}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _rows(named_ms, gpu: float) -> list:
    """ProfileRows from (name, ms) per operation: count and total per name, largest total first."""
    groups: dict[str, list] = {}
    for name, ms in named_ms:
        g = groups.setdefault(name, [0, 0.0])
        g[0] += 1
        g[1] += ms
    rows = [ProfileRow(n, c, t, 100.0 * t / gpu if gpu > 0 else 0.0) for n, (c, t) in groups.items()]
    rows.sort(key=lambda r: (-r.total_ms, r.name))
    return rows


def _median(xs: list) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def profile(program, repeats: int = 3, serialize: bool = False) -> Profile:
    """Run a recorded Program `repeats` times with timestamps and `repeats` times plain, and return the
    GPU time per kernel variant (count, total ms, % of the step) and the host time per step.
    The program's effects happen 2 x repeats times (a training step trains).

    A recording drops the barrier before dispatches that do not depend on the ones since the last barrier
    (runtime/program.py), so neighbours may overlap and a timestamp interval may hold parts of several.
    serialize=True times a copy of the sequence with a barrier before every dispatch: clean per-kernel
    times whose sum is the step without overlap (the host time is always the program as recorded)."""
    if repeats < 1:
        raise EvermindError(f"profile: repeats must be >= 1, got {repeats}")
    if program._seq is None:
        raise EvermindError("profile() of a Program whose recording has not finished")
    dev = program.device
    ops, labels = program._ops, program.labels
    if not ops:
        raise EvermindError("profile() of an empty Program")
    props = dev.manager.get_device_properties()
    if not props.get("timestamps_supported"):
        raise DeviceError(f"{dev.info.name} does not support timestamps on compute queues")
    if "timestamp_period" not in props:
        raise DeviceError("kp lacks the timestamp period (ci/patches/0007); rebuild it with `bash ci/setup.sh`")
    period_ns = float(props["timestamp_period"])
    seq = dev.manager.sequence(0, len(ops) + 1)
    for op in ops:
        if serialize and hasattr(op, "barrier"):
            kept, op.barrier = op.barrier, True
            seq.record(op)  # kp records the command now: the flag is read here
            op.barrier = kept
        else:
            seq.record(op)
    per_op_runs = []
    for _ in range(repeats):
        seq.eval()
        dev.submits += 1
        ts = seq.get_timestamps()
        if len(ts) != len(ops) + 1:
            raise DeviceError(f"got {len(ts)} timestamps for {len(ops)} operations")
        per_op_runs.append([(ts[i + 1] - ts[i]) * period_ns / 1e6 for i in range(len(ops))])
    del seq
    host = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        program.run()
        host.append((time.perf_counter() - t0) * 1e3)
    per_op = [_median([run[i] for run in per_op_runs]) for i in range(len(ops))]
    gpu = sum(per_op)
    return Profile(rows=_rows(zip(labels, per_op), gpu), gpu_ms=gpu, host_ms=_median(host), repeats=repeats,
                   device=dev.info.name, per_op_ms=list(zip(labels, per_op)), serialized=serialize, shapes=program.shapes)
