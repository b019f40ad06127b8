"""Pure variant selectors: (shape, device facts, candidates) -> variant. No device access here."""
from __future__ import annotations

import math


def elementwise_vec(n: int, vecs=(1, 4), wg: int = 256) -> int:
    """Elements per thread: the widest VEC whose workgroups still number at least 64."""
    best = min(vecs)
    for v in sorted(vecs):
        if n >= 64 * wg * v:
            best = v
    return best


def matmul_tile(M: int, N: int, K: int, tiles, shared_memory: int, device_type: str, batch: int = 1,
                buffers: int = 1):
    """Pick a (BM, BN, BK) tile from `tiles` for an MxK . KxN product.

    Tiles whose shared memory (buffers x 4 bytes x BK x (BM + BN + 8)) exceeds the device limit are never chosen.
    Among the rest, prefer the largest tile that (a) wastes at most 25% of its area on padding and
    (b) still yields enough workgroups to fill the device (64 on a GPU, 4 on a CPU device such as
    lavapipe); otherwise the tile with the least padded work, smallest first.
    """
    fits = [t for t in tiles if buffers * 4 * t[2] * (t[0] + t[1] + 8) <= shared_memory]
    if not fits:
        raise ValueError(f"no matmul tile fits {shared_memory} bytes of shared memory")
    want_groups = 4 if device_type == "cpu" else 64

    def groups(t):
        return math.ceil(M / t[0]) * math.ceil(N / t[1]) * batch

    def padded(t):
        return math.ceil(M / t[0]) * t[0] * math.ceil(N / t[1]) * t[1]

    good = [t for t in fits if padded(t) <= 1.25 * M * N and groups(t) >= want_groups]
    if good:
        return max(good, key=lambda t: (t[0] * t[1], t[2]))
    return min(fits, key=lambda t: (padded(t), t[0] * t[1]))
