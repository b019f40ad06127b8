"""Will a model fit, estimated from its config before anything is allocated.

`check_fits(shapes, device, what, ranks)` refuses, in well under a second, a model whose largest
tensor exceeds the device's maxStorageBufferRange (UnsupportedError: a --d-model / --d-ff / vocabulary
beyond what one buffer may hold), or whose training state exceeds the host memory available now or, on
a GPU, the device's own memory (CapacityError). The training state per parameter: the f32 weight, its
gradient and AdamW's two moments (16 bytes on the device), each held twice in host memory because kp's
device tensors keep a host staging copy (32 bytes); activations come on top, so the estimate is a lower
bound. The device's memory is its largest device-local heap (ci/patches/0012); a CPU device (lavapipe)
allocates host memory, and its heap size (a fixed 2 GiB on Mesa 22.3) says nothing, so the host check
alone applies there."""
from __future__ import annotations

import math
import os

from ..errors import CapacityError, UnsupportedError

DEVICE_BYTES_PER_PARAM = 4 * 4  # weight, gradient, two AdamW moments, f32, on the device
TRAIN_BYTES_PER_PARAM = DEVICE_BYTES_PER_PARAM * 2  # ... and in host memory: device buffer + host staging copy


def host_available() -> int | None:
    """Bytes of host memory available now (/proc/meminfo MemAvailable; sysconf where there is none)."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f.read(1 << 16).splitlines():
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def training_bytes(shapes) -> int:
    """Estimated bytes of training state for parameters of these shapes (TRAIN_BYTES_PER_PARAM each)."""
    return sum(math.prod(s) for s in shapes) * TRAIN_BYTES_PER_PARAM


def check_fits(shapes: dict, device=None, what: str = "the model", ranks: int = 1,
               available: int | None = None) -> int:
    """Refuse a model of these parameter shapes ({name: shape}) that cannot train here: a tensor larger
    than device's maxStorageBufferRange (UnsupportedError naming it), its training state beyond a GPU
    device's memory, or `ranks` copies of it beyond the host memory available (CapacityError with both
    numbers). Returns the host estimate."""
    if device is not None:
        limit = device.info.max_storage_buffer_range
        name, shape = max(shapes.items(), key=lambda kv: math.prod(kv[1]))
        if 4 * math.prod(shape) > limit:
            raise UnsupportedError(f"{what}: tensor {name} {tuple(shape)} is {4 * math.prod(shape):,} bytes, more "
                                   f"than {device.info.name}'s maxStorageBufferRange ({limit:,} bytes)")
    n = sum(math.prod(s) for s in shapes.values())
    heap = device.info.device_memory if device is not None and device.info.type != "cpu" else 0
    if heap and n * DEVICE_BYTES_PER_PARAM > heap:
        raise CapacityError(f"{what}: {n:,} parameters need about {n * DEVICE_BYTES_PER_PARAM / 2**30:.1f} GiB of "
                            f"device memory to train (weights, gradients and AdamW state), but {device.info.name} "
                            f"has {heap / 2**30:.1f} GiB")
    need = training_bytes(shapes.values()) * ranks
    have = host_available() if available is None else available
    if have is not None and need > have:
        raise CapacityError(f"{what}: {n:,} parameters need about {need / 2**30:.1f} GiB to train"
                            f"{f' on {ranks} ranks' if ranks > 1 else ''} (weights, gradients and AdamW state, "
                            f"with kp's host copies), but only {have / 2**30:.1f} GiB of host memory is available")
    return need
