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

# Flag sb outside the matmuls: a workgroup that is one subgroup of 8 (the device feature subgroup_broadcast_8,
# runtime/device.py), whose workgroup reductions take the lanes' values by subgroupBroadcast instead of
# shared memory and barriers (templates/_interface.glsl.j2, wg_reduce).
SUBGROUP_WG = 8


def subgroup_row(template: str, op: str, dtype: str, flags=(), tile: str = "") -> Row:
    """A row whose workgroup is one subgroup of SUBGROUP_WG threads, with flag sb (after `flags`)."""
    return Row(template, op, dtype, (("WG", SUBGROUP_WG),), flags=(*tuple(flags), "sb"), tile=tile)


def subgroup_first(cands, device_type: str) -> list:
    """The candidates a CPU device tries first: those with flag sb (workgroup reductions without shared
    memory or barriers: on lavapipe each shared-memory load is a loop over the lanes and each barrier a
    coroutine switch), where the device runs any; else, and on GPUs, those without."""
    sb = [v for v in cands if "sb" in v.flags]
    return sb if device_type == "cpu" and sb else [v for v in cands if "sb" not in v.flags]
