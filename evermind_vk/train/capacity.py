"""Will a model fit, estimated from its config before anything is allocated.

`check_fits(shapes, device, what, ranks)` refuses, in well under a second, a model whose largest
tensor exceeds the device's maxStorageBufferRange (UnsupportedError: a --d-model / --d-ff / vocabulary
beyond what one buffer may hold), or whose training state exceeds the host memory available now
(CapacityError). The training state per parameter: the f32 weight, its gradient and AdamW's two
moments (16 bytes), each held twice because kp's device tensors keep a host staging copy (32 bytes);
activations come on top, so the estimate is a lower bound. kp exposes no device heap sizes, so a
discrete GPU's own memory is not checked here (its allocation failure is a DeviceError)."""
from __future__ import annotations

import math
import os

from ..errors import CapacityError, UnsupportedError

TRAIN_BYTES_PER_PARAM = 4 * 4 * 2  # weight, gradient, two AdamW moments; device buffer + host staging copy


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
    than device's maxStorageBufferRange (UnsupportedError naming it), or `ranks` copies of its training
    state beyond the host memory available (CapacityError with both numbers). Returns the estimate."""
    if device is not None:
        limit = device.info.max_storage_buffer_range
        name, shape = max(shapes.items(), key=lambda kv: math.prod(kv[1]))
        if 4 * math.prod(shape) > limit:
            raise UnsupportedError(f"{what}: tensor {name} {tuple(shape)} is {4 * math.prod(shape):,} bytes, more "
                                   f"than {device.info.name}'s maxStorageBufferRange ({limit:,} bytes)")
    need = training_bytes(shapes.values()) * ranks
    have = host_available() if available is None else available
    if have is not None and need > have:
        n = sum(math.prod(s) for s in shapes.values())
        raise CapacityError(f"{what}: {n:,} parameters need about {need / 2**30:.1f} GiB to train"
                            f"{f' on {ranks} ranks' if ranks > 1 else ''} (weights, gradients and AdamW state, "
                            f"with kp's host copies), but only {have / 2**30:.1f} GiB of host memory is available")
    return need
