"""Elementwise maps: elements per thread (VEC)."""
from __future__ import annotations

from .table import F, Row


def row(template: str, op: str, dtype: str, wg: int = 256, vec: int = 1) -> Row:
    """An elementwise row: WG threads of VEC elements each."""
    return Row(template, op, dtype, (("WG", wg), ("VEC", vec)), tile=f"t{wg}x{vec}")


ROWS = [
    *(row("binary", op, dt, vec=vec) for op in ("add", "mul") for dt in F for vec in (1, 4)),
    *(row("binary", op, dt) for op in ("silu_backward", "gelu_backward") for dt in F),
    *(row("unary", "scale", dt, vec=vec) for dt in F for vec in (1, 4)),
    *(row("unary", op, dt) for op in ("silu", "gelu") for dt in F),
    *(row("unary", op, "u32", vec=4) for op in ("copy_words", "fill_words")),
]


def elementwise_vec(n: int, vecs=(1, 4), wg: int = 256) -> int:
    """Elements per thread: the widest VEC whose workgroups still number at least 64."""
    best = min(vecs)
    for v in sorted(vecs):
        if n >= 64 * wg * v:
            best = v
    return best
