"""Tensor: a shaped, typed buffer on a Vulkan device.

Every tensor is a kp uint32 tensor holding the elements' raw bytes (kp 0.9.0 has no float16 tensor
type; f16 elements are read in shaders through 16-bit storage). Tensors made from host data are
host-visible (kp 'device' type: a device buffer plus a host staging buffer); op outputs are
device-only (kp 'storage' type: no staging), read back through a copy kernel when asked.
"""
from __future__ import annotations

import itertools
import math
import operator
import weakref

import numpy as np

from ..errors import DeviceError, EvermindError, ShapeError, UnsupportedError
from . import dtypes, knobs
from .device import get_device, kp_module
from .kernels import copy_words, fill_words

_uids = itertools.count(1)


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        dims = tuple(shape)
    except TypeError as e:
        raise ShapeError(f"bad shape {shape!r}: want a tuple of integers") from e
    out = []
    for s in dims:
        if isinstance(s, (bool, np.bool_)):
            raise ShapeError(f"bad shape {shape!r}: dimension {s!r} is a bool")
        try:
            out.append(operator.index(s))  # integers only: 3.5 or "3" is an error, never truncated
        except TypeError as e:
            raise ShapeError(f"bad shape {shape!r}: dimension {s!r} is not an integer") from e
    out = tuple(out)
    if any(s < 0 for s in out):
        raise ShapeError(f"negative dimension in shape {out}")
    return out


class Buffer:
    """One device allocation (a kp tensor) and its share of the device's memory accounting: counted from its
    creation until its last holder lets go (the tensors on it, a recorded Program that binds it, a
    recording's free pool), so memory_allocated() is what is really allocated on the device.

    scope: the Program whose recording allocated it (a weak reference), or None; holders: how many tensors
    of that recording have had it (more than one: the recording reused it); pinned: touched by an eager
    dispatch while its recording was paused (state set up once), so it never returns to the pool.

    A planned buffer (kp_tensor None: a recording that plans its buffers by lifetime, runtime/program.py)
    is a tensor's place in that plan: it allocates nothing and counts nothing until the recording places it
    in `home`, a real Buffer (then kp is home's kp), shared with the planned buffers whose tensors' lifetimes
    in the recording do not overlap its own."""
    __slots__ = ("kp", "nbytes", "scope", "holders", "pinned", "home", "__weakref__")

    def __init__(self, device, kp_tensor, nbytes: int, scope=None):
        self.kp, self.nbytes, self.scope, self.holders, self.pinned = kp_tensor, nbytes, scope, 0, False
        self.home = None
        if kp_tensor is not None:
            device._track_allocation(nbytes)
            weakref.finalize(self, device._track_release, nbytes)

    def place(self, home: "Buffer") -> None:
        """A planned buffer lives in `home` from now on (which it keeps alive)."""
        self.home, self.kp = home, home.kp

    @property
    def real(self) -> "Buffer":
        """The Buffer that holds the elements: home for a placed planned buffer, else this one."""
        return self.home if self.home is not None else self


def _back_to_pool(program_ref, buf: Buffer) -> None:
    """A recording-scoped tensor died: its buffer may serve a later allocation of the same recording."""
    program = program_ref()
    if program is not None and not buf.pinned:
        program._release(buf)


class Tensor:
    """A shaped, typed buffer on a Vulkan device (f32, f16, i32 or u32), made by tensor(), empty() or
    zeros() or returned by ops. numpy() copies it to the host; operators, .T, .sum() and indexing run
    device ops (see evermind_vk.ops.methods)."""

    def __init__(self, device, shape, dtype: str, kp_tensor, host_visible: bool, base: "Tensor | None" = None,
                 buffer: Buffer | None = None):
        self.device = device
        self.shape = _shape(shape)
        self.dtype = dtype
        self.host_visible = host_visible
        # A view (reshape) shares its base's uid, so the cached kp Algorithms bound to the buffer serve it
        # too (a view made per call, as in a generation loop, would otherwise build a pipeline per call).
        # It keeps its base alive; the base's finalizer drops the algorithms once every view is gone.
        self._base = base
        if base is not None:
            self.uid = base.uid
            self._buffer = base._buffer
        else:
            self.uid = next(_uids)
            weakref.finalize(self, device.forget, self.uid)
            # the kp buffer's size is whole 32-bit words
            self._buffer = buffer or Buffer(device, kp_tensor, 4 * dtypes.words(self.numel, dtype))

    # -- facts ----------------------------------------------------------------------------------
    @property
    def kp(self):
        """The kp tensor holding the elements (None for a tensor of a recording that plans its buffers, until
        the recording places them: runtime/program.py)."""
        return self._buffer.kp

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes the elements take (numel * itemsize)."""
        return self.numel * dtypes.DTYPES[self.dtype].itemsize

    @property
    def words(self) -> int:
        """32-bit words the elements occupy in the buffer."""
        return dtypes.words(self.numel, self.dtype)

    def __len__(self) -> int:
        """The size of the first dimension (TypeError for a 0-D tensor, as PyTorch and numpy)."""
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        kind = "host-visible" if self.host_visible else "device-only"
        return (f"Tensor(shape={self.shape}, dtype={self.dtype}, device='{self.device.index}: "
                f"{self.device.info.name}', {kind})")

    def __array__(self, dtype=None, copy=None):
        """np.asarray(t): a host copy (always a copy: the elements live on the device)."""
        if copy is False:
            raise ValueError("a Tensor's elements live on the device: np.asarray needs a copy")
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    # + - * @, unary -, .T, .sum(), indexing and iteration: installed by evermind_vk.ops at import
    # (ops/methods.py; the runtime layer cannot import ops); they run eagerly (or are recorded inside
    # record()) like the functions ev.add, ev.mul, ev.matmul, ev.ops.transpose, ev.ops.sum_dim, ev.ops.index.

    def reshape(self, *shape) -> "Tensor":
        """The same buffer under another shape (no copy)."""
        shape = _shape(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
        if math.prod(shape) != self.numel:
            raise ShapeError(f"cannot reshape {self.shape} ({self.numel} elements) to {shape}")
        return Tensor(self.device, shape, self.dtype, self.kp, self.host_visible, base=self._base or self)

    # -- host transfer --------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A host copy of the elements, shaped, in the tensor's numpy dtype."""
        kp = kp_module()
        src = self
        if not self.host_visible:
            src = empty(self.shape, self.dtype, self.device, host_visible=True)
            copy_words(self, src)
        self.device.run_ops([kp.OpTensorSyncLocal([src.kp])])
        raw = np.array(src.kp.data(), dtype=np.uint32, copy=True).tobytes()
        return np.frombuffer(raw[: self.nbytes], dtype=dtypes.DTYPES[self.dtype]).reshape(self.shape).copy()

    def read_staging(self) -> np.ndarray:
        """The host-visible tensor's staging memory as it is now (no transfer; see Device.sync_local)."""
        if not self.host_visible:
            raise EvermindError("read_staging needs a host-visible tensor")
        raw = np.array(self.kp.data(), dtype=np.uint32, copy=True).tobytes()
        return np.frombuffer(raw[: self.nbytes], dtype=dtypes.DTYPES[self.dtype]).reshape(self.shape).copy()

    def copy_(self, data) -> "Tensor":
        """Overwrite the elements with host data of the same shape (host-visible tensors only)."""
        if not self.host_visible:
            raise EvermindError("copy_ needs a host-visible tensor (made by ev.tensor or host_visible=True)")
        arr = _as_array(data, self.dtype)
        if arr.shape != self.shape:
            raise ShapeError(f"copy_ of shape {arr.shape} into a tensor of shape {self.shape}")
        self.write_staging(arr)
        self.device.upload(self)
        return self

    def write_staging(self, data) -> None:
        """Write host data into the staging memory only (no transfer); `device.upload` moves it."""
        if not self.host_visible:
            raise EvermindError("write_staging needs a host-visible tensor")
        arr = _as_array(data, self.dtype)
        if arr.size != self.numel:
            raise ShapeError(f"{arr.size} elements for a tensor of {self.numel}")
        self.kp.data()[:] = _to_words(arr, self.words)


def _as_array(data, dtype: str | None) -> np.ndarray:
    if dtype is None:
        try:
            arr = np.asarray(data)
        except (ValueError, OverflowError) as e:  # ragged lists, ints past int64
            raise UnsupportedError(f"cannot make a tensor from {type(data).__name__}: {e}") from e
        if not isinstance(data, np.ndarray):  # Python scalars / lists: float -> f32, int -> i32
            if arr.dtype.kind == "f":
                arr = arr.astype(np.float32)
            elif arr.dtype.kind in "iub" and arr.dtype != np.uint32:
                if arr.dtype.kind in "iu" and arr.size and (int(arr.min()) < -2**31 or int(arr.max()) >= 2**31):
                    raise UnsupportedError(f"integers [{int(arr.min())}, {int(arr.max())}] do not fit i32 "
                                           "(refused rather than wrapped; pass a numpy array of the dtype you want)")
                arr = arr.astype(np.int32)
        if isinstance(data, np.ndarray) and arr.dtype.kind in "iu" and arr.dtype.itemsize != 4:
            arr = _narrowed(arr)  # int64 ids and the like: to i32 (u32 for unsigned), range-checked
        dtypes.canonical(arr.dtype)  # raises UnsupportedError for float64, bool, ...
        return np.ascontiguousarray(arr)
    target = dtypes.DTYPES[dtypes.canonical(dtype)]
    try:
        arr = np.asarray(data)
    except (ValueError, OverflowError) as e:  # ragged lists, ints past int64
        raise UnsupportedError(f"cannot make a {dtype} tensor from {type(data).__name__}: {e}") from e
    if arr.dtype.kind not in "biuf":
        raise UnsupportedError(f"cannot make a {dtype} tensor from {arr.dtype} data (integers past 64 bits, "
                               "strings, objects?)")
    if arr.dtype.kind == "f" and target.kind in "iu":
        raise UnsupportedError(f"will not cast floating data ({arr.dtype}) to {dtype}: round it first")
    if arr.dtype.kind in "iu" and target.kind in "iu" and arr.size:
        info = np.iinfo(target)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise UnsupportedError(f"values [{lo}, {hi}] do not fit {dtype} [{info.min}, {info.max}] "
                                   "(refused rather than wrapped)")
    return np.ascontiguousarray(arr.astype(target))


def _narrowed(arr: np.ndarray) -> np.ndarray:
    """A numpy integer array of another width as i32 (signed) or u32 (unsigned); values outside that
    range raise UnsupportedError naming it (refused rather than wrapped)."""
    target = np.dtype(np.int32 if arr.dtype.kind == "i" else np.uint32)
    if arr.size:
        info, lo, hi = np.iinfo(target), int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise UnsupportedError(f"{arr.dtype} values [{lo}, {hi}] are outside the {dtypes.canonical(target)} "
                                   f"range [{info.min}, {info.max}] (refused rather than wrapped)")
    return arr.astype(target)


def _allocate(dev, host_words: np.ndarray, kind, nbytes: int):
    """A kp tensor from host words; out of memory is a DeviceError (ci/patches/0006 makes kp raise)."""
    try:
        return dev.manager.tensor_t(host_words, kind)
    except RuntimeError as e:
        raise DeviceError(f"could not allocate a tensor of {nbytes:,} bytes on {dev.info.name}: {e}") from e


def _to_words(arr: np.ndarray, n_words: int) -> np.ndarray:
    raw = arr.tobytes()
    raw += b"\0" * (4 * n_words - len(raw))
    return np.frombuffer(raw, dtype=np.uint32)


def _check_size(device, nbytes: int) -> None:
    limit = device.info.max_storage_buffer_range
    if nbytes > limit:
        raise UnsupportedError(f"a tensor of {nbytes} bytes exceeds {device.info.name}'s "
                               f"maxStorageBufferRange ({limit} bytes)")


def tensor(data, dtype=None, device=None) -> Tensor:
    """Upload host data (numpy array, list or scalar) to a new host-visible tensor."""
    arr = _as_array(data, dtype)
    name = dtypes.canonical(arr.dtype)
    dev = get_device(device)
    _check_size(dev, arr.nbytes)
    kp = kp_module()
    t = _allocate(dev, _to_words(arr, dtypes.words(arr.size, name)).copy(), kp.TensorTypes.device, arr.nbytes)
    dev.run_ops([kp.OpTensorSyncDevice([t])])
    return Tensor(dev, arr.shape, name, t, host_visible=True)


def empty(shape, dtype="f32", device=None, host_visible: bool = False) -> Tensor:
    """A new tensor with undefined contents (device-only unless host_visible; inside an `arena`, the
    arena's tensor for this allocation)."""
    name = dtypes.canonical(dtype)
    dev = get_device(device)
    shape = _shape(shape)
    pool = getattr(dev, "arena", None)
    if pool is not None and not host_visible:
        return pool.take(shape, name)
    return _new(dev, shape, name, host_visible, scoped=True)


def record_plan_enabled() -> bool:
    """Whether a recording with reuse plans its buffers by lifetime when it ends (runtime/program.py)
    instead of placing each allocation in a dead tensor's buffer as it comes (EVERMIND_VK_DISABLE_RECORD_PLAN=1)."""
    return not knobs.get("EVERMIND_VK_DISABLE_RECORD_PLAN")


def record_reuse_enabled() -> bool:
    """Whether a recording hands the buffers of its dead device-only tensors to its later allocations
    (EVERMIND_VK_DISABLE_RECORD_REUSE=1 turns it off: every allocation of a recording is then a new buffer)."""
    return not knobs.get("EVERMIND_VK_DISABLE_RECORD_REUSE")


def _new(dev, shape, name, host_visible, scoped: bool = False) -> Tensor:
    n_words = dtypes.words(math.prod(shape), name)
    _check_size(dev, 4 * n_words)
    prog = dev.recording if scoped and not host_visible else None
    if prog is not None and prog.reuse:
        # Inside a recording: planned (a place the recording assigns a real buffer when it ends, by lifetime),
        # or (PyTorch's caching allocator, in recording order) a buffer whose tensor died earlier in this
        # recording, free from here on since the barrier plan orders a dispatch that writes it after its
        # earlier readers and writers (runtime/program.py), replays too.
        scope = weakref.ref(prog)
        if prog.plan:
            buf = Buffer(dev, None, 4 * n_words, scope)
            prog._planned_alloc(buf)
        else:
            buf = prog._take(4 * n_words) or _new_buffer(dev, n_words, False, scope)
        buf.holders += 1
        t = Tensor(dev, shape, name, buf.kp, host_visible=False, buffer=buf)
        weakref.finalize(t, _back_to_pool, buf.scope, buf)
        return t
    buf = _new_buffer(dev, n_words, host_visible)
    return Tensor(dev, shape, name, buf.kp, host_visible=host_visible, buffer=buf)


def _new_buffer(dev, n_words: int, host_visible: bool, scope=None) -> Buffer:
    kp = kp_module()
    kind = kp.TensorTypes.device if host_visible else kp.TensorTypes.storage
    try:
        host = np.zeros(n_words, dtype=np.uint32)  # kp 0.9.0 creates tensors from host data only
    except MemoryError as e:
        raise DeviceError(f"out of host memory staging a tensor of {4 * n_words:,} bytes") from e
    return Buffer(dev, _allocate(dev, host, kind, 4 * n_words), 4 * n_words, scope)


def zeros(shape, dtype="f32", device=None, host_visible: bool = False) -> Tensor:
    """A new tensor of zeros (device-only unless host_visible)."""
    t = empty(shape, dtype, device, host_visible)
    fill_words(t, 0)
    return t


class arena:
    """Reuse device-only tensors across iterations of a loop that allocates the same sequence each time:

        pool = arena(device)
        for token in ...:
            with pool:              # the n-th empty() of a (shape, dtype) gets the same tensor as last time
                logits = model.step(...)
            read logits here        # before the next iteration overwrites it

    Tensors keep their uid, so the device's cached kp Algorithms (one pipeline each) are reused instead
    of built again per iteration, which dominates small per-token work on lavapipe. No two allocations
    of one iteration share a tensor; anything kept past the iteration must be copied."""

    def __init__(self, device=None):
        self.device = get_device(device)
        self._pool: dict[tuple, list] = {}
        self._used: dict[tuple, int] = {}

    def take(self, shape: tuple, dtype: str) -> Tensor:
        """The arena's tensor for the next allocation of (shape, dtype) in this iteration (made on first
        use)."""
        key = (shape, dtype)
        i = self._used.get(key, 0)
        self._used[key] = i + 1
        lst = self._pool.setdefault(key, [])
        if i == len(lst):
            lst.append(_new(self.device, shape, dtype, False))
        return lst[i]

    def __enter__(self) -> "arena":
        if getattr(self.device, "arena", None) is not None:
            raise EvermindError("arena blocks do not nest")
        self._used = {}
        self.device.arena = self
        return self

    def __exit__(self, *exc) -> None:
        self.device.arena = None
