"""Recorded decoding's kernels (evermind_vk.train.decode): positions read from a device buffer (rope_at,
kv_write, attention_decode) and the device sampler (sample). attention_decode comes in workgroups of 16 to
128 threads, one (sequence, head) each: pick_decode_wg chooses; the sampler in workgroups of 64 or 256 threads,
one item each: pick_sample_wg chooses."""
from __future__ import annotations

from ...errors import UnsupportedError
from .table import F, Row, simple

ROWS = [
    *(simple("decode", op, dt, 256) for op in ("rope_at", "kv_write", "rope_kv_at") for dt in F),
    *(Row("decode", "attention_decode", dt, (("WG", wg),), tile=f"wg{wg}") for wg in (16, 32, 64, 128) for dt in F),
    *(Row("sample", "sample", dt, (("WG", wg),), tile=f"wg{wg}") for wg in (64, 256) for dt in F),
]


def pick_decode_wg(cands, D: int, device_type: str):
    """attention_decode's variant: the fewest threads >= the head dimension on CPU devices (each barrier of
    the workgroup's reductions costs per thread there) or, on GPUs, the most (the keys are spread over the
    threads). Raises UnsupportedError when no variant has WG >= D."""
    fit = sorted((v for v in cands if v.spec["WG"] >= D), key=lambda v: v.spec["WG"])
    if not fit:
        raise UnsupportedError(f"attention_decode: head dim {D} > the largest workgroup "
                               f"({max(v.spec['WG'] for v in cands)} threads)")
    return fit[0] if device_type == "cpu" else fit[-1]


def pick_sample_wg(cands, device_type: str):
    """sample's variant: the fewest threads on CPU devices (its reductions run log2(WG) barrier phases over
    every thread: 64 threads cost a quarter of 256's per phase there), the most on GPUs."""
    ordered = sorted(cands, key=lambda v: v.spec["WG"])
    if not ordered:
        raise UnsupportedError("no sample kernel is usable on this device")
    return ordered[0] if device_type == "cpu" else ordered[-1]
