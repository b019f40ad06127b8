"""Data-parallel training on torch.distributed's gloo backend (the optional `dist` extra).

World: who this process is (rank, world size, the rendezvous address), read from torchrun's variables
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK) or given; `spawn` is the `--nproc` launcher
(N child processes with those variables, one device each).

DataParallel: what `Trainer(model, world=world)` adds. Every rank builds the same global batch of
N·B rows and trains on rows r·B..(r+1)·B-1 with the trainer's micro-batch program (forward, backward
seeded with the rank's share of the global batch's target tokens, added into host-visible gradient
buffers); the buffers are downloaded and summed across ranks on the host in ~25 MB buckets (one
recorded download and one asynchronous all_reduce per bucket: downloading and packing bucket i+1
overlap the all-reduce of bucket i, which gloo runs on its own threads; writing bucket i back
overlaps the later ones), so every rank holds the gradient of the global batch's
mean loss; the apply program uploads them, clips the global norm and steps AdamW, identically on every
rank. A recorded step cannot wait on the host in the middle, so a data-parallel step is three submits
(micro -> download; host all-reduce; apply) instead of one.

ZeRO-1 (zero=True): the parameters are partitioned among the ranks (by parameter, balanced by numel);
a rank keeps AdamW moments for its share only, steps it, and broadcasts the updated values (one
broadcast per owner rank). Checkpoints gather the moments on rank 0, which alone writes files.

torch is imported inside functions: `import evermind_vk` never needs it.

Launcher limits (`spawn`, `--nproc`): torch (the `dist` extra) is checked before any rank starts; at
most one rank per GPU, or, with no GPU (lavapipe) or every rank on one EVERMIND_VK_DEVICE, one per CPU
core; a rank's error line goes to the launcher (RANK_ERROR_ENV), which reports the failure once.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta

import numpy as np

from ..errors import ConfigError, DistributedError, UnsupportedError
from ..runtime import devices, empty, knobs, record
from ..runtime.kernels import copy_words
from .data import IGNORE

BUCKET_BYTES = 25 * 2 ** 20  # PyTorch DDP's default bucket size
DEFAULT_TIMEOUT = knobs.knob("EVERMIND_VK_DIST_TIMEOUT").default  # seconds a collective waits for a peer (60)
RANK_ERROR_ENV = "EVERMIND_VK_RANK_ERROR_FILE"  # where a launched rank writes its one-line error for the launcher
_RANK_ERROR_MAX = 4096


def _dist():
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        raise UnsupportedError("data-parallel training needs torch (the `dist` extra: "
                               "pip install 'evermind-vk[dist]')") from e
    if not dist.is_available() or not dist.is_gloo_available():
        raise UnsupportedError("this torch build lacks torch.distributed with the gloo backend")
    return torch, dist


def _env_int(name: str, env) -> int:
    v = env.get(name)
    if v is None or not v.strip().lstrip("-").isdigit():
        raise ConfigError(f"{name}={v!r}: data-parallel training needs it set to an integer "
                          "(torchrun and `evermind-vk train --nproc N` set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)")
    return int(v)


class World:
    """One process of a data-parallel job: rank in [0, size), the rendezvous (master_addr:master_port,
    rank 0 listens), the device slot local_rank, and the collective timeout in seconds."""

    def __init__(self, rank: int, size: int, master_addr: str = "127.0.0.1", master_port: int = 29500,
                 local_rank: int | None = None, timeout: float = DEFAULT_TIMEOUT):
        if size < 1 or not 0 <= rank < size:
            raise ConfigError(f"rank {rank} of world size {size}: need 0 <= rank < size")
        if not 0 < master_port < 65536:
            raise ConfigError(f"MASTER_PORT {master_port} is not a TCP port")
        if not timeout > 0:
            raise ConfigError(f"collective timeout must be > 0 seconds, got {timeout!r}")
        self.rank, self.size = int(rank), int(size)
        self.master_addr, self.master_port = master_addr, int(master_port)
        self.local_rank = self.rank if local_rank is None else int(local_rank)
        self.timeout = float(timeout)
        self._initialised = False

    @classmethod
    def from_env(cls, env=None, timeout: float | None = None) -> "World":
        """From torchrun's variables RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK optional);
        the timeout from EVERMIND_VK_DIST_TIMEOUT (seconds) unless given."""
        env = os.environ if env is None else env
        if timeout is None:
            timeout = knobs.get("EVERMIND_VK_DIST_TIMEOUT", env)
        addr = env.get("MASTER_ADDR", "").strip()
        if not addr:
            raise ConfigError("MASTER_ADDR is not set (the address rank 0 listens on)")
        local = env.get("LOCAL_RANK")
        return cls(_env_int("RANK", env), _env_int("WORLD_SIZE", env), addr, _env_int("MASTER_PORT", env),
                   None if local is None else _env_int("LOCAL_RANK", env), timeout)

    def __repr__(self) -> str:
        return f"World(rank={self.rank}, size={self.size}, {self.master_addr}:{self.master_port})"

    def init(self) -> None:
        """Join the process group (blocks until all ranks have joined, or the timeout)."""
        if self._initialised:
            return
        _, dist = _dist()
        if dist.is_initialized():
            if dist.get_rank() != self.rank or dist.get_world_size() != self.size:
                raise DistributedError(f"a process group (rank {dist.get_rank()} of {dist.get_world_size()}) "
                                       f"exists already, not {self}")
        else:
            try:
                dist.init_process_group("gloo", init_method=f"tcp://{self.master_addr}:{self.master_port}",
                                        rank=self.rank, world_size=self.size, timeout=timedelta(seconds=self.timeout))
            except Exception as e:  # noqa: BLE001 - torch raises several types here; one typed error out
                raise DistributedError(f"rank {self.rank}/{self.size}: could not join the process group at "
                                       f"{self.master_addr}:{self.master_port} within {self.timeout:g}s: "
                                       f"{_first_line(e)}") from e
        self._initialised = True
        _destroy_at_exit()

    def close(self) -> None:
        """Leave the process group: destroy it (joins gloo's worker threads). Every exit path does this
        (an atexit hook registered by init), since exiting with the group alive can abort the process."""
        if self._initialised:
            _destroy_process_group()
            self._initialised = False

    def device(self):
        """This rank's device selector: EVERMIND_VK_DEVICE if set (e.g. 0 for ranks sharing one GPU),
        else round_robin_device(local_rank)."""
        env = knobs.get("EVERMIND_VK_DEVICE")
        return env if env else round_robin_device(self.local_rank)


_EXIT_HOOK = []


def _destroy_process_group() -> None:
    _, dist = _dist()
    if dist.is_initialized():
        dist.destroy_process_group()


def _destroy_at_exit() -> None:
    """Destroy the process group at interpreter exit, before finalization (once per process).

    Gloo's worker threads hold the last reference to a finished collective's work (its tensors, which
    point back to Python objects) for a moment after wait() returns; a rank that exits right after its
    last collective (rank 1 after the final weight-hash all_gather, while rank 0 still saves) can reach
    Py_Finalize while a worker drops that reference. Dropping it takes the GIL, a finalizing interpreter
    ends the thread with pthread_exit, the unwind crosses a noexcept destructor and the rank dies with
    "terminate called without an active exception" (SIGABRT). destroy_process_group joins the workers
    (without the GIL) while the interpreter is alive. atexit runs on a normal end, sys.exit, an uncaught
    exception and after a handled SIGINT/SIGTERM; SIGKILL skips it (and finalization, so no abort)."""
    if not _EXIT_HOOK:
        atexit.register(_destroy_process_group)
        _EXIT_HOOK.append(True)


def round_robin_device(local_rank: int) -> int:
    """The device index of slot local_rank: round-robin over the GPUs, or over every device (lavapipe)
    when there is none (a GPU host also lists lavapipe: a rank there would be the slowest by far)."""
    listing = devices()
    gpus = [d.index for d in listing if d.type != "cpu"] or [d.index for d in listing]
    return gpus[local_rank % len(gpus)]


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0] if s else ''}"


class DataParallel:
    """The data-parallel side of a Trainer (see the module doc); made by Trainer(world=...)."""

    def __init__(self, trainer, world: World, zero: bool = False, bucket_bytes: int = BUCKET_BYTES):
        if bucket_bytes < 4:
            raise ConfigError(f"bucket_bytes must be >= 4, got {bucket_bytes}")
        world.init()
        self.trainer, self.world, self.zero = trainer, world, bool(zero)
        self.rank, self.size = world.rank, world.size
        self.bucket_bytes = int(bucket_bytes)
        self._download: dict = {}  # names -> recorded program downloading the gradient buffers
        self._owner: dict | None = None  # ZeRO: parameter name -> owning rank
        self._stage: dict = {}  # ZeRO: host-visible copies of parameters for the broadcast
        self._pull = self._push = None
        self._pp_key = None
        # host-clock seconds per phase, summed over steps (bench/dp_bench.py reads them)
        self.timing = {"steps": 0, "download_s": 0.0, "allreduce_s": 0.0, "broadcast_s": 0.0, "agree_s": 0.0}

    # -- collectives, every failure one typed error ---------------------------------------------
    def _fail(self, what: str, e: BaseException) -> DistributedError:
        return DistributedError(f"rank {self.rank}/{self.size}: {what} failed ({_first_line(e)}); another rank "
                                f"probably died or stalled past the {self.world.timeout:g}s timeout")

    def _call(self, what, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except DistributedError:
            raise
        except Exception as e:  # noqa: BLE001 - gloo raises RuntimeError / DistBackendError subclasses
            raise self._fail(what, e) from e

    # -- batch sharding ---------------------------------------------------------------------------
    def shard(self, inp: np.ndarray, tgt: np.ndarray, rows: int, seq_len: int):
        """Rows rank·rows..(rank+1)·rows-1 of a global batch (flattened [size·rows·seq_len]) and their
        count of target tokens (the loss ignores padding targets)."""
        lo, hi = self.rank * rows * seq_len, (self.rank + 1) * rows * seq_len
        i, t = inp[lo:hi], tgt[lo:hi]
        return i, t, int(np.count_nonzero(t != IGNORE))

    # -- gradient all-reduce --------------------------------------------------------------------
    def buckets(self, names) -> list[list[str]]:
        """The names, in order, cut into consecutive buckets of at most bucket_bytes (a bigger parameter
        is a bucket of its own)."""
        acc = self.trainer._acc
        out, cur, size = [], [], 0
        for n in names:
            b = acc[n].nbytes
            if cur and size + b > self.bucket_bytes:
                out.append(cur)
                cur, size = [], 0
            cur.append(n)
            size += b
        if cur:
            out.append(cur)
        return out

    def all_reduce_grads(self, names, local_loss: float) -> float:
        """Sum the gradient buffers (each rank's share of the global-batch mean gradient) across ranks,
        in place; returns the global batch's mean loss (sum of the ranks' token-weighted losses)."""
        torch, dist = _dist()
        names = tuple(names)
        acc = self.trainer._acc
        dev = self.trainer.model.device
        t0 = time.perf_counter()
        progs = self._download.get(names)
        if progs is None:  # one recorded download per bucket
            progs = []
            for bucket in self.buckets(names):
                with record(dev, run=False) as rec:
                    for n in bucket:
                        dev.sync_local(acc[n])
                progs.append((bucket, rec))
            self._download[names] = progs
        works, t_down = [], 0.0
        for k, (bucket, prog) in enumerate(progs):
            # bucket k's download and packing run while the all-reduces of buckets < k are in flight
            # (gloo works on its own threads)
            td = time.perf_counter()
            prog.run()
            t_down += time.perf_counter() - td
            parts = [acc[n].read_staging().ravel() for n in bucket]
            if k == len(progs) - 1:
                parts.append(np.array([local_loss], np.float32))  # the loss rides along in the last bucket
            flat = torch.from_numpy(np.concatenate(parts))
            works.append((self._call(f"all_reduce of gradient bucket {k}", dist.all_reduce, flat,
                                     op=dist.ReduceOp.SUM, async_op=True), flat, bucket))
        loss = None
        for k, (work, flat, bucket) in enumerate(works):
            self._call(f"all_reduce of gradient bucket {k}", work.wait)
            arr, off = flat.numpy(), 0
            for n in bucket:
                g = acc[n]
                g.write_staging(arr[off:off + g.numel])
                off += g.numel
            if k == len(works) - 1:
                loss = float(arr[off])
        t2 = time.perf_counter()
        self.timing["download_s"] += t_down
        self.timing["allreduce_s"] += t2 - t0 - t_down
        self.timing["steps"] += 1
        return loss

    def agree(self, stop: bool, timed_out: bool, sig) -> tuple[bool, bool, int | None]:
        """Every rank's stop wishes (a time limit passed, a signal came) combined, so all stop together."""
        torch, dist = _dist()
        t0 = time.perf_counter()
        flags = torch.tensor([int(bool(stop) or sig is not None), int(bool(timed_out)), int(sig or 0)],
                             dtype=torch.int64)
        self._call("agreeing on whether to stop", dist.all_reduce, flags, op=dist.ReduceOp.MAX)
        self.timing["agree_s"] += time.perf_counter() - t0
        s, t, g = (int(x) for x in flags)
        return bool(s), bool(t), (g or None)

    def sum_floats(self, values, what: str = "summing evaluation totals") -> list[float]:
        """The element-wise sum of a few float64 numbers over the ranks (every rank must call it)."""
        torch, dist = _dist()
        t = torch.tensor([float(v) for v in values], dtype=torch.float64)
        self._call(what, dist.all_reduce, t, op=dist.ReduceOp.SUM)
        return [float(x) for x in t]

    # -- ZeRO-1 ---------------------------------------------------------------------------------
    def owners(self) -> dict:
        """Parameter name -> owning rank: greedy by numel (largest first, to the least-loaded rank; ties
        by name and rank), the same on every rank. Fixed once moments exist."""
        params = self.trainer.optimizer.params
        if self._owner is not None and set(self._owner) == set(params):
            return self._owner
        if self._owner is not None and self.trainer.optimizer.state:
            raise UnsupportedError("ZeRO: the parameter set changed after optimizer state was sharded "
                                   "(add LoRA adapters before the first data-parallel train call)")
        load = [0] * self.size
        owner = {}
        for n in sorted(params, key=lambda n: (-params[n].numel, n)):
            r = min(range(self.size), key=lambda i: (load[i], i))
            owner[n] = r
            load[r] += params[n].numel
        self._owner = owner
        return owner

    def owned(self, grads: dict) -> dict:
        """The gradients of the parameters this rank steps (all of them without ZeRO)."""
        if not self.zero:
            return grads
        own = self.owners()
        return {n: g for n, g in grads.items() if own[n] == self.rank}

    def drop_foreign_state(self) -> None:
        """ZeRO: free the moments of parameters another rank owns (after a resume loaded them all)."""
        if self.zero:
            own = self.owners()
            opt = self.trainer.optimizer
            for n in [n for n in opt.state if own.get(n, self.rank) != self.rank]:
                del opt.state[n]

    def broadcast_params(self, names) -> None:
        """ZeRO: each owner's freshly stepped parameters to every other rank (one broadcast per owner)."""
        if not self.zero or self.size == 1:
            return
        torch, dist = _dist()
        t0 = time.perf_counter()
        names = tuple(names)
        own = self.owners()
        params = self.trainer.model.parameters()
        dev = self.trainer.model.device
        if self._pp_key != names:
            for n in names:
                if n not in self._stage:
                    self._stage[n] = empty(params[n].shape, "f32", dev, host_visible=True)
            with record(dev, run=False) as rec:
                for n in names:
                    if own[n] == self.rank:
                        copy_words(params[n], self._stage[n])
                        dev.sync_local(self._stage[n])
            self._pull = rec
            with record(dev, run=False) as rec:
                for n in names:
                    if own[n] != self.rank:
                        dev.upload(self._stage[n])
                        copy_words(self._stage[n], params[n])
            self._push = rec
            self._pp_key = names
        self._pull.run()
        works = []
        for r in range(self.size):
            mine = [n for n in names if own[n] == r]
            if not mine:
                continue
            if r == self.rank:
                flat = torch.from_numpy(np.concatenate([self._stage[n].read_staging().ravel() for n in mine]))
            else:
                flat = torch.empty(sum(params[n].numel for n in mine), dtype=torch.float32)
            works.append((self._call(f"broadcast of rank {r}'s parameters", dist.broadcast, flat, src=r,
                                     async_op=True), flat, mine, r))
        for work, flat, mine, r in works:
            self._call(f"broadcast of rank {r}'s parameters", work.wait)
            if r != self.rank:
                arr, off = flat.numpy(), 0
                for n in mine:
                    self._stage[n].write_staging(arr[off:off + params[n].numel])
                    off += params[n].numel
        self._push.run()
        self.timing["broadcast_s"] += time.perf_counter() - t0

    def optimizer_state_bytes(self) -> int:
        """Bytes of AdamW moments this rank holds (two f32 tensors per stepped parameter)."""
        return sum(m.nbytes + v.nbytes for m, v in self.trainer.optimizer.state.values())

    def gather_optimizer_state(self, sd: dict) -> dict | None:
        """ZeRO: the full optimizer state dict on rank 0 (None elsewhere); every rank must call it."""
        if not self.zero or self.size == 1:
            return sd if self.rank == 0 else None
        _, dist = _dist()
        parts = [None] * self.size if self.rank == 0 else None
        self._call("gathering optimizer state for a checkpoint", dist.gather_object, sd["state"], parts, dst=0)
        if self.rank != 0:
            return None
        state = {}
        for p in parts:
            state.update(p)
        return {**sd, "state": state}

    # -- consistency ----------------------------------------------------------------------------
    def weights_hash(self) -> str:
        """sha256 of this rank's weights (replicas must agree)."""
        h = hashlib.sha256()
        for n, a in sorted(self.trainer.model.state_dict().items()):
            h.update(n.encode())
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()

    def check_identical(self) -> str:
        """Compare the ranks' weight hashes (all_gather); DistributedError naming the ranks that differ."""
        _, dist = _dist()
        mine = self.weights_hash()
        hashes = [None] * self.size
        self._call("comparing weight hashes", dist.all_gather_object, hashes, mine)
        bad = [r for r, h in enumerate(hashes) if h != hashes[0]]
        if bad:
            raise DistributedError(f"ranks {bad} hold other weights than rank 0 after step "
                                   f"{self.trainer.global_step}: the replicas diverged")
        return mine


# -- the --nproc launcher -----------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the usual bind-to-0 trick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child before exec: no orphaned ranks if the launcher is killed
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spawn(argv: list[str], nproc: int, log_dir: str | None = None, env=None, grace: float = 5.0) -> int:
    """Run `python -m evermind_vk <argv>` as nproc ranks on this host (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR=127.0.0.1, a free MASTER_PORT; EVERMIND_VK_DEVICE round_robin_device(rank) unless set). Rank 0's output passes through; rank r's goes to log_dir/rank{r}.log. The ranks run in
    a session of their own: SIGINT/SIGTERM to the launcher are forwarded once to each (a terminal's
    Ctrl-C reaches them once, so they stop together and save), and they die with the launcher. When a
    rank fails the others get `grace` seconds to fail on their own (DistributedError), then SIGKILL,
    and DistributedError names the rank. Returns 0, or the exit code every rank ended with after a
    forwarded signal (128 + the signal)."""
    if nproc < 1:
        raise ConfigError(f"--nproc must be >= 1, got {nproc}")
    base = dict(os.environ if env is None else env)
    pick = not knobs.get("EVERMIND_VK_DEVICE", base)
    check_nproc(nproc, shared_device=not pick)
    _dist()  # the `dist` extra, before any rank is started
    port = free_port()
    stop_wait = knobs.get("EVERMIND_VK_DIST_TIMEOUT", base)
    procs, logs, forwarded = [], [], []
    errors_dir = tempfile.mkdtemp(prefix="evermind-vk-ranks-")

    def forward(signum, frame):
        forwarded.append(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, forward)
    try:
        for r in range(nproc):
            e = dict(base, RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port))
            e[RANK_ERROR_ENV] = _error_file(errors_dir, r)
            if pick:
                e["EVERMIND_VK_DEVICE"] = str(round_robin_device(r))
            out = err = None
            if r > 0:
                if log_dir is not None:
                    os.makedirs(log_dir, exist_ok=True)
                    f = open(os.path.join(log_dir, f"rank{r}.log"), "w")
                    logs.append(f)
                    out = err = f
                else:
                    out = err = subprocess.DEVNULL
            procs.append(subprocess.Popen([sys.executable, "-m", "evermind_vk", *argv], env=e, stdout=out,
                                          stderr=err, start_new_session=True, preexec_fn=_die_with_parent))
        return _watch(procs, grace, log_dir, forwarded, stop_wait, errors_dir)
    except BaseException:
        _stop(procs, grace)
        raise
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        for f in logs:
            f.close()
        shutil.rmtree(errors_dir, ignore_errors=True)


def check_nproc(nproc: int, shared_device: bool = False) -> None:
    """ConfigError unless nproc ranks fit this host: one per GPU, or one per CPU core when there is no GPU
    (every rank on lavapipe) or every rank shares one device (EVERMIND_VK_DEVICE set)."""
    cores = os.cpu_count() or 1
    gpus = [] if shared_device else [d for d in devices() if d.type != "cpu"]
    if gpus:
        if nproc > len(gpus):
            raise ConfigError(f"--nproc {nproc}: more ranks than the {len(gpus)} GPU(s) here (one rank per GPU; "
                              f"set EVERMIND_VK_DEVICE to share one device among up to {cores} ranks)")
    elif nproc > cores:
        why = "every rank on EVERMIND_VK_DEVICE" if shared_device else "no GPU: every rank runs on lavapipe"
        raise ConfigError(f"--nproc {nproc}: more ranks than the {cores} CPU cores here ({why})")


def _error_file(errors_dir: str, rank: int) -> str:
    return os.path.join(errors_dir, f"rank{rank}.error")


def _rank_error(errors_dir, rank: int) -> str:
    """The one-line error rank wrote (RANK_ERROR_ENV), at most _RANK_ERROR_MAX bytes, or ""."""
    if errors_dir is None:
        return ""
    try:
        with open(_error_file(errors_dir, rank), "rb") as f:
            return " ".join(f.read(_RANK_ERROR_MAX).decode("utf-8", "replace").split())
    except OSError:
        return ""


def _describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with code {rc}"


def _stop(procs, grace: float) -> None:
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in alive:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _watch(procs, grace: float, log_dir, forwarded: list, stop_wait: float, errors_dir=None) -> int:
    """Wait for every rank; on the first failure let the others end on their own for `grace` seconds
    (`stop_wait` after a forwarded signal: they are saving), then kill the rest."""
    while True:
        codes = {r: p.returncode for r, p in enumerate(procs) if p.poll() is not None}
        failed = [r for r, c in codes.items() if c != 0]
        if len(codes) == len(procs) and not failed:
            return 0
        if failed:
            break
        time.sleep(0.05)
    first = failed[0]
    deadline = time.monotonic() + (stop_wait if forwarded else grace)
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    final = {p.returncode for p in procs}
    if forwarded and len(final) == 1 and codes[first] > 128:  # all stopped on the signal (and saved)
        return codes[first]
    _stop(procs, 0.0)
    where = f" (its output: {log_dir}/rank{first}.log)" if log_dir and first > 0 else ""
    said = _rank_error(errors_dir, first)
    raise DistributedError(f"rank {first} of {len(procs)} {_describe_exit(codes[first])}{where}"
                           f"{': ' + said if said else ''}; stopped the other ranks")
