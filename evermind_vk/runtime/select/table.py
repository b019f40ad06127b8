"""The variant table's row type (what `tools/codegen.py` generates from) and the tuned-constant record."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .features import features_for


@dataclass(frozen=True)
class Row:
    """One kernel variant to generate: a template, the op and dtype it computes, its specialization
    constants ((name, value), ... in the interface's spec order) and flags (what changes code: a template
    parameter, so each distinct (op, dtype, flags) is its own SPIR-V module). `tile` is the part of the name
    the specialization constants give."""
    template: str
    op: str
    dtype: str
    spec: tuple
    flags: tuple = ()
    tile: str = ""

    @property
    def module(self) -> str:
        """SPIR-V module name: everything that changes code, nothing that only specialises it."""
        return "_".join([self.op, self.dtype, *self.flags])

    @property
    def name(self) -> str:
        """The variant's name, derived mechanically: op_dtype_flags[_tile]."""
        return "_".join([self.op, self.dtype, *self.flags] + ([self.tile] if self.tile else []))

    @property
    def features(self) -> list[str]:
        """The device features the row needs (features.features_for)."""
        return features_for(self.dtype, self.flags)


@dataclass(frozen=True)
class Tuned:
    """A tuned constant of a selection rule: its value, why (one line) and the bench/results file whose
    measurements justify it."""
    value: Any
    reason: str
    source: str


def flag_int(flags, prefix: str) -> int:
    """The number of a flag `<prefix><digits>` (e.g. l256, x8, g8), 0 without one."""
    f = [f for f in flags if f[:len(prefix)] == prefix and f[len(prefix):].isdigit()]
    return int(f[0][len(prefix):]) if f else 0


def spec_of(v) -> dict:
    """A row's or a manifest variant's specialization constants as a dict (rows keep them as pairs)."""
    return dict(v.spec)


def simple(template: str, op: str, dtype: str, wg: int, flags=()) -> Row:
    """A kernel whose only specialization is its workgroup size (not part of the name)."""
    return Row(template, op, dtype, (("WG", wg),), flags=tuple(flags))


F = ("f32", "f16")  # the float dtypes most kernels come in
