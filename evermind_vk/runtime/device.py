"""Vulkan devices through (patched) kp: listing, choosing, capabilities, algorithm cache, submission.

A Device owns one kp.Manager. Features a kernel needs (16-bit storage, float16 arithmetic,
cooperative matrices, the memory model) are enabled at device creation whenever the device reports
them (ci/patches/0003); `Device.caps` says which are on after the kill switches below.

Kill switches (set to 1 to treat the feature as absent; makes feature bugs bisectable):
  EVERMIND_VK_DISABLE_F16      16-bit storage and float16 arithmetic
  EVERMIND_VK_DISABLE_COOPMAT  cooperative matrices (both kinds)
  EVERMIND_VK_DISABLE_COOPMAT2 VK_NV_cooperative_matrix2 only (the cm2 matmuls; cm stays)
  EVERMIND_VK_DISABLE_SUBGROUP_BROADCAST  subgroupBroadcast in subgroups of 8 (flag sb: the v4 matmuls,
                                        the row kernels' and reductions' workgroup sums)
  EVERMIND_VK_DISABLE_SUBGROUP_ARITHMETIC  subgroupAdd / subgroupMax in subgroups of 8 (flag sa: the CPU
                                        attention rows' final combine)
  EVERMIND_VK_DISABLE_SHARED_PIPELINES  build a pipeline per tensor set, as stock kp does
                                        (instead of once per variant, ci/patches/0008)
Device choice: argument, else EVERMIND_VK_DEVICE (an index or a name substring), else device 0.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import numpy as np

from ..errors import DeviceError, EvermindError
from . import knobs

KILL_SWITCHES = {
    "EVERMIND_VK_DISABLE_F16": ("storage_buffer_16bit_access", "shader_float16"),
    "EVERMIND_VK_DISABLE_COOPMAT": ("cooperative_matrix", "cooperative_matrix2"),
    "EVERMIND_VK_DISABLE_COOPMAT2": ("cooperative_matrix2",),
    "EVERMIND_VK_DISABLE_SUBGROUP_BROADCAST": ("subgroup_broadcast_8",),
    "EVERMIND_VK_DISABLE_SUBGROUP_ARITHMETIC": ("subgroup_arithmetic_8",),
}
FEATURES = ("shader_int16", "shader_int64", "storage_buffer_16bit_access", "shader_float16",
            "vulkan_memory_model", "vulkan_memory_model_device_scope", "cooperative_matrix", "cooperative_matrix2")
# VK_KHR_cooperative_matrix shape (M, N, K, A, B, C, Result, scope): FLOAT16 = 0, FLOAT32 = 1, SUBGROUP = 3.
COOPMAT_F16_F32 = (16, 16, 16, 0, 0, 1, 1, 3)
# Capability keys of the storage-buffer binding limits, named as DeviceInfo's fields.
BINDING_LIMITS = ("max_per_stage_descriptor_storage_buffers", "max_descriptor_set_storage_buffers",
                  "max_per_stage_resources")
DEVICE_TYPES = {0: "other", 1: "integrated_gpu", 2: "discrete_gpu", 3: "virtual_gpu", 4: "cpu"}


def kp_module():
    """The kp (Kompute) module, checked to be the patched build this package needs (DeviceError otherwise)."""
    try:
        import kp
    except ImportError as e:  # pragma: no cover - setup problem
        raise DeviceError(f"kp (Kompute) is not importable ({e}); run `bash ci/setup.sh`") from e
    if not (all(hasattr(kp.Manager, f) for f in ("get_device_capabilities", "algorithm_sharing"))
            and hasattr(kp.OpAlgoDispatch, "barrier")):
        raise DeviceError(
            f"kp {getattr(kp, '__version__', '?')} lacks evermind-vk's patches (barriers, device features, shared pipelines, "
            "barrier switch); "
            "build it with `bash ci/setup.sh`")
    return kp


def _switched_off() -> set[str]:
    off: set[str] = set()
    for var, feats in KILL_SWITCHES.items():
        if knobs.get(var):
            off.update(feats)
    return off


@dataclass(frozen=True)
class DeviceInfo:
    """What one Vulkan device offers (features after kill switches)."""
    index: int
    name: str
    type: str
    subgroup_size: int
    shared_memory: int
    max_push_constants: int
    max_storage_buffer_range: int
    features: dict = field(default_factory=dict)
    cooperative_matrix_shapes: tuple = ()
    # Storage-buffer binding limits (ci/patches/0003; runtime.select.bindings.max_bindings combines them).
    max_per_stage_descriptor_storage_buffers: int = field(kw_only=True)
    max_descriptor_set_storage_buffers: int = field(kw_only=True)
    max_per_stage_resources: int = field(kw_only=True)
    # Streaming multiprocessors / compute units (ci/patches/0010; 0: the device does not say): split-K
    # planning (runtime.select.matmul.wave_split).
    multiprocessors: int = field(kw_only=True, default=0)
    # VK_NV_cooperative_matrix2 (ci/patches/0011): the flexible shapes of its matrices (runtime.select.features.device_errors
    # checks the cm2 tiles against them); empty without it.
    cooperative_matrix_flexible_shapes: tuple = field(kw_only=True, default=())
    # Bytes of the largest device-local memory heap (ci/patches/0012; 0: the device lists none): the
    # capacity check (train.capacity) on GPUs.
    device_memory: int = field(kw_only=True, default=0)

    @property
    def f16(self) -> bool:
        """Whether 16-bit storage buffers are usable (f16 tensors in kernels)."""
        return bool(self.features.get("storage_buffer_16bit_access"))

    @property
    def coopmat(self) -> bool:
        """Whether the device has (usable) cooperative matrices."""
        return bool(self.features.get("cooperative_matrix"))

    @staticmethod
    def from_caps(index: int, caps: dict) -> "DeviceInfo":
        """A DeviceInfo from kp's capability dict, features switched off by their environment variables
        dropped."""
        off = _switched_off()
        feats = {f: bool(caps.get(f)) and f not in off for f in FEATURES}
        shapes = tuple(tuple(s) for s in caps.get("cooperative_matrix_shapes", ())) if feats["cooperative_matrix"] else ()
        # Derived: the coopmat shape our kernels use (16x16x16, f16 A/B, f32 C/result, subgroup scope),
        # and the subgroup size they assume.
        feats["coopmat_f16_16x16x16_f32"] = COOPMAT_F16_F32 in shapes
        feats["subgroup_size_32"] = int(caps["subgroup_size"]) == 32
        # subgroupBroadcast (GL_KHR_shader_subgroup_ballot) in subgroups of 8, as flag sb uses it: kp does
        # not report a device's subgroup operations, so it is taken as present on CPU devices with subgroups of 8
        # (lavapipe on 256-bit vectors, which reports the ballot operations).
        feats["subgroup_broadcast_8"] = (int(caps["subgroup_size"]) == 8 and caps["device_type"] == 4
                                         and "subgroup_broadcast_8" not in off)
        # subgroupAdd / subgroupMax (GL_KHR_shader_subgroup_arithmetic) in subgroups of 8, as flag sa uses them:
        # taken as present on the same devices, for the same reason (lavapipe reports the arithmetic operations).
        feats["subgroup_arithmetic_8"] = (int(caps["subgroup_size"]) == 8 and caps["device_type"] == 4
                                          and "subgroup_arithmetic_8" not in off)
        flexible = tuple(tuple(s) for s in caps.get("cooperative_matrix_flexible_shapes", ())) \
            if feats["cooperative_matrix2"] else ()
        missing = [k for k in BINDING_LIMITS if k not in caps]
        if missing:
            raise DeviceError(f"kp lacks the binding limits {', '.join(missing)} (ci/patches/0003); "
                              "rebuild it with `bash ci/setup.sh`")
        if "multiprocessors" not in caps:
            raise DeviceError("kp lacks the multiprocessor count (ci/patches/0010); rebuild it with `bash ci/setup.sh`")
        if "device_local_memory" not in caps:
            raise DeviceError("kp lacks the device memory size (ci/patches/0012); rebuild it with `bash ci/setup.sh`")
        return DeviceInfo(
            index=index, name=caps["device_name"], type=DEVICE_TYPES.get(caps["device_type"], "other"),
            subgroup_size=int(caps["subgroup_size"]), shared_memory=int(caps["max_compute_shared_memory_size"]),
            max_push_constants=int(caps["max_push_constants_size"]),
            max_storage_buffer_range=int(caps["max_storage_buffer_range"]),
            features=feats, cooperative_matrix_shapes=shapes, multiprocessors=int(caps["multiprocessors"]),
            cooperative_matrix_flexible_shapes=flexible, device_memory=int(caps["device_local_memory"]),
            **{k: int(caps[k]) for k in BINDING_LIMITS})


_lock = threading.Lock()
_devices: dict[int, "Device"] = {}
_listing: list[DeviceInfo] | None = None


def _manager(index: int):
    kp = kp_module()
    try:
        return kp.Manager(index)
    except RuntimeError as e:
        raise DeviceError(f"could not open Vulkan device {index}: {e}") from e


def devices() -> list[DeviceInfo]:
    """All Vulkan devices with their capabilities (features each one supports)."""
    global _listing
    with _lock:
        if _listing is None:
            mgr = _devices[min(_devices)].manager if _devices else None
            if mgr is None:
                kp = kp_module()
                try:
                    mgr = kp.Manager()
                except RuntimeError as e:
                    raise DeviceError(
                        f"no usable Vulkan device ({e}); on a machine without a GPU install lavapipe "
                        "(Debian: mesa-vulkan-drivers)") from e
            _listing = [DeviceInfo.from_caps(i, c) for i, c in enumerate(mgr.list_device_capabilities())]
        return list(_listing)


def _resolve_index(spec) -> int:
    listing = devices()
    if isinstance(spec, bool):
        raise DeviceError(f"bad device selector {spec!r}")
    if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().lstrip("-").isdigit()):
        idx = int(spec)
        if not 0 <= idx < len(listing):
            raise DeviceError(f"no Vulkan device {idx}: found {len(listing)} "
                              f"({', '.join(f'{d.index}: {d.name}' for d in listing)})")
        return idx
    if isinstance(spec, str):
        hits = [d for d in listing if spec.lower() in d.name.lower()]
        if not hits:
            raise DeviceError(f"no Vulkan device whose name contains {spec!r}; found: "
                              + ", ".join(f"{d.index}: {d.name}" for d in listing))
        return hits[0].index
    raise DeviceError(f"bad device selector {spec!r}: give an index, a name substring or a Device")


def get_device(device=None) -> "Device":
    """The Device for an argument (Device, index or name substring), else EVERMIND_VK_DEVICE, else 0."""
    if isinstance(device, Device):
        return device
    if device is None:
        env = knobs.get("EVERMIND_VK_DEVICE")
        device = env if env else 0
    idx = _resolve_index(device)
    with _lock:
        if idx not in _devices:
            _devices[idx] = Device(idx)
        return _devices[idx]


@dataclass(frozen=True, eq=False)
class Deferred:
    """A dispatch's algorithm inside a recording that plans its buffers, before it places them: the variant,
    the Buffers of its tensors in binding order, its workgroups and SPIR-V (Device.deferred_dispatch makes it)."""
    variant: object
    buffers: tuple
    groups: tuple
    spirv: bytes


class Device:
    """One opened Vulkan device: a kp.Manager, its enabled capabilities, and a cache of kp Algorithms
    (one per kernel variant, tensor set and workgroup count)."""

    def __init__(self, index: int):
        self.index = index
        self.manager = _manager(index)
        self.info = DeviceInfo.from_caps(index, self.manager.get_device_capabilities())
        self._algorithms: dict[tuple, object] = {}
        self._by_tensor: dict[int, set] = {}
        # One source algorithm per variant (its shader module, layouts and pipeline, bound to a placeholder
        # buffer and never dispatched); every tensor set's algorithm shares its pipeline (ci/patches/0008).
        self.share_pipelines = not knobs.get("EVERMIND_VK_DISABLE_SHARED_PIPELINES")
        self._pipelines: dict[str, object] = {}
        self._placeholder = None
        self.pipelines_built = 0  # pipelines created on this device (the profiler and tests read it)
        self._eager = self.manager.sequence()
        self.recording = None  # the Program being recorded, if any
        self._paused = None  # the Program whose recording an eager() block interrupts
        self.submits = 0  # sequences submitted (eager dispatches, uploads, downloads, replays)
        # Device memory held by live buffers (bytes; staging copies not counted): tensors hold theirs, a
        # recorded Program holds every buffer it binds, a recording's free pool holds reusable ones.
        self._allocated = self._peak_allocated = 0

    def __repr__(self) -> str:
        return f"Device({self.index}, {self.info.name!r})"

    @property
    def caps(self) -> dict:
        """The device's feature flags (a copy of info.features)."""
        return dict(self.info.features)

    def has(self, feature: str) -> bool:
        """Whether the device has (and has not switched off) a feature."""
        return bool(self.info.features.get(feature))

    # -- algorithms --------------------------------------------------------------------------
    def algorithm(self, variant, tensors, groups: tuple, spirv: bytes):
        """The cached kp Algorithm of a kernel variant bound to these tensors and workgroup counts (built
        on first use). A tensor whose recording plans its buffers and has not placed them yet (no kp):
        inside that recording a Deferred (the algorithm is made when the recording ends); in an eager()
        block inside it, the tensor gets a buffer of its own now (program.Program._place_alone)."""
        pending = [t._buffer for t in tensors if t._buffer.kp is None]
        if pending:
            if self.recording is not None:
                return Deferred(variant, tuple(t._buffer for t in tensors), groups, spirv)
            for buf in pending:
                if buf.kp is None:  # a tensor bound twice is placed once
                    self._place_now(buf)
        key = (variant.name, tuple(t.uid for t in tensors), groups)
        algo = self._algorithms.get(key)
        if algo is None:
            algo = self._make(variant, [t.kp for t in tensors], groups, spirv)
            self._algorithms[key] = algo
            for t in tensors:
                self._by_tensor.setdefault(t.uid, set()).add(key)
        return algo

    def _make(self, variant, kp_tensors, groups: tuple, spirv: bytes):
        """A kp Algorithm of a variant over kp tensors (sharing the variant's pipeline unless switched off)."""
        if self.share_pipelines:
            return self.manager.algorithm_sharing(self._pipeline(variant, len(kp_tensors), spirv), kp_tensors,
                                                  list(groups))
        return self._build(variant, kp_tensors, groups, spirv)

    def deferred_dispatch(self, d: "Deferred", push_words, cache: dict):
        """The recorded dispatch of a Deferred once its buffers are placed: (kp op, what the program keeps);
        cache: (variant, kp tensors, groups) -> algorithm, shared by one program's dispatches."""
        kps = [b.kp for b in d.buffers]
        key = (d.variant.name, tuple(id(k) for k in kps), d.groups)
        algo = cache.get(key)
        if algo is None:
            algo = cache[key] = self._make(d.variant, kps, d.groups, d.spirv)
        return kp_module().OpAlgoDispatch(algo, push_words), (algo, tuple(b.real for b in d.buffers))

    @staticmethod
    def _place_now(buf) -> None:
        """A planned buffer that a transfer or an eager dispatch needs now: its own buffer."""
        prog = buf.scope() if buf.scope is not None else None
        if prog is None:
            raise EvermindError("a tensor of a planned recording that was never placed (its recording is gone)")
        prog._place_alone(buf)

    def _build(self, variant, kp_tensors, groups, spirv: bytes):
        """A kp Algorithm with its own shader module and pipeline (built now)."""
        spec = np.array([v for _, v in variant.spec_constants], dtype=np.uint32)
        push = np.zeros(max(1, len(variant.push_constants)), dtype=np.uint32)
        # kp 0.9.0 picks the push-constant type from the spec-constant dtype: both are uint32 here.
        algo = self.manager.algorithm(kp_tensors, spirv, list(groups), spec, push)
        self.pipelines_built += 1
        return algo

    def _pipeline(self, variant, n_bindings: int, spirv: bytes):
        """The variant's source algorithm: its pipeline is built on first use, once per device."""
        src = self._pipelines.get(variant.name)
        if src is None:
            if self._placeholder is None:
                self._placeholder = self.manager.tensor_t(np.zeros(4, dtype=np.uint32), kp_module().TensorTypes.storage)
            src = self._build(variant, [self._placeholder] * n_bindings, (1, 1, 1), spirv)
            self._pipelines[variant.name] = src
        return src
    def forget(self, uid: int) -> None:
        """Drop cached algorithms bound to a tensor that is gone."""
        for key in self._by_tensor.pop(uid, ()):
            self._algorithms.pop(key, None)

    # -- submission --------------------------------------------------------------------------
    def _record_or_run(self, op, keep, label: str = "", touches=None, transfer: str = "", shape: str = "") -> None:
        """Append a kp operation to the recording (keeping `keep` alive with it), or submit it now."""
        if self.recording is not None:
            self.recording._append(op, keep, label, touches, transfer, shape)
        else:
            self._eager.eval(op)
            self.submits += 1

    def submit(self, algo, push_words: np.ndarray, label: str = "", tensors=(), access=None, shape: str = "",
               ranges=None) -> None:
        """Dispatch (or record) algo; a recording keeps it and the device buffers of `tensors` alive.
        access: per tensor "r", "w" or "rw" (the bindings' qualifiers; default "rw"), for the recording's
        barrier plan (runtime/program.py); ranges: per tensor the byte range [lo, hi) that is all a written
        binding touches, or None (all of it); shape: the launch's sizes, for the profiler."""
        if self.recording is None:
            if self._paused is not None:
                self._pin(tensors)
            self._record_or_run(kp_module().OpAlgoDispatch(algo, push_words), None, label)
        else:
            access = access or ("rw",) * len(tensors)
            op = (algo, push_words) if isinstance(algo, Deferred) else kp_module().OpAlgoDispatch(algo, push_words)
            self._record_or_run(op, (algo, tuple(t._buffer for t in tensors)), label,
                                touches=[(t._buffer, a, r) for t, a, r in
                                         zip(tensors, access, ranges or (None,) * len(tensors))], shape=shape)

    def _pin(self, tensors) -> None:
        """An eager dispatch inside a recording sets up state once (device.eager()): a buffer of the paused
        recording that it touches must keep that state across replays, so it leaves the reuse pool for good;
        if the recording already gave that buffer to another tensor, the state would be overwritten on
        every replay, so that is refused."""
        for t in tensors:
            buf = t._buffer
            if buf.scope is not None and buf.scope() is self._paused:
                if buf.holders > 1:
                    raise EvermindError(
                        "an eager dispatch inside record() writes a tensor allocated in the recording whose buffer the "
                        "recording reused: allocate that tensor inside device.eager() too (or set "
                        "EVERMIND_VK_DISABLE_RECORD_REUSE=1)")
                buf.pinned = True

    # -- device memory accounting (PyTorch's torch.cuda.memory_allocated family) --------------------------
    def _track_allocation(self, nbytes: int) -> None:
        self._allocated += nbytes
        self._peak_allocated = max(self._peak_allocated, self._allocated)

    def _track_release(self, nbytes: int) -> None:
        self._allocated -= nbytes

    def memory_allocated(self) -> int:
        """Bytes of device buffers allocated now: held by live tensors, by recorded Programs (the buffers they
        bind, shared among the recording's tensors whose lifetimes did not overlap) or by a recording's pool."""
        return self._allocated

    def max_memory_allocated(self) -> int:
        """The most memory_allocated() has been since the device was opened or reset_peak_memory_stats()."""
        return self._peak_allocated

    def reset_peak_memory_stats(self) -> None:
        """Start the peak of memory_allocated over from what is allocated now (PyTorch's
        torch.cuda.reset_peak_memory_stats)."""
        self._peak_allocated = self._allocated

    @contextlib.contextmanager
    def eager(self):
        """Run dispatches now even inside a recording (one-time state initialisation, which must not
        be replayed with the recorded step)."""
        rec, self.recording = self.recording, None
        paused, self._paused = self._paused, rec if rec is not None else self._paused
        try:
            yield
        finally:
            self.recording, self._paused = rec, paused

    def upload(self, tensor) -> None:
        """Copy a host-visible tensor's staging memory to the device now or, inside a recording, at
        each run of the recorded program (so a replay picks up host-written per-step scalars)."""
        if tensor._buffer.kp is None:
            self._place_now(tensor._buffer)
        tensor._buffer.pinned = True  # a transfer's buffer is never handed out again (host-visible ones never are)
        self._record_or_run(kp_module().OpTensorSyncDevice([tensor.kp]), tensor._buffer, "upload", transfer="w")

    def sync_local(self, tensor) -> None:
        """Copy a host-visible tensor's device buffer to its staging memory now or, inside a recording,
        at the end of each run (then read it with Tensor.read_staging(), no further submit)."""
        if tensor._buffer.kp is None:
            self._place_now(tensor._buffer)
        tensor._buffer.pinned = True
        self._record_or_run(kp_module().OpTensorSyncLocal([tensor.kp]), tensor._buffer, "download", transfer="r")

    def run_ops(self, ops) -> None:
        """Record kp operations (uploads, downloads) into one sequence and submit it now."""
        if self.recording is not None:
            raise EvermindError("tensor upload/download inside a recording: do it before or after `record()`")
        seq = self._eager
        seq.clear()
        for op in ops:
            seq.record(op)
        seq.eval()
        self.submits += 1
