"""A gradient tape: differentiable ops note (inputs, output, backward rule) on it while a Tape is active;
`Tape.backward(seed)` walks the entries in reverse and returns every tensor's gradient.

    with ev.Tape() as tape:
        y = F.matmul(x, w)
        loss = F.cross_entropy(y, targets)
    grads = tape.backward(loss)          # grads[w], grads.by_name(params)

Seeds: a 1-element loss tensor (seed 1), a mapping tensor -> gradient, or a list of (tensor, gradient)
pairs. Gradients of inputs used more than once accumulate (x + x gives 2g; an op with a `fuse` rule adds
the gradient its input 0 has so far inside its own backward kernel instead of a separate add: rms_norm
into a new dx, a residual stream's; matmul into that gradient's own buffer (beta 1), which it may only do
where the tape alone holds that tensor: one the tape's own add made, or one a `fresh` rule returned, never
one a rule handed to several inputs); integer (u32/i32) inputs
get none; every gradient's shape and dtype are checked against its tensor; an entry's saved tensors
and its output gradient are released as soon as the walk has passed it.

What the tape keeps alive: only what each backward rule captured (its saved tensors). An entry notes its
inputs and output by a per-tensor key with their shape and dtype, not the tensors themselves, so a forward
intermediate no rule needs dies as soon as the forward code drops it (PyTorch's saved-tensor habit); inside
a recording its buffer then serves later allocations of the step (evermind_vk.runtime.program).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..errors import EvermindError, ShapeError
from ..ops import add
from ..runtime.tensor import Tensor, tensor

_active: list["Tape"] = []


_keys = itertools.count(1)


def _key(t: Tensor) -> int:
    """A tensor object's tape identity (unique for the process, unlike id(), which a dead tensor's
    successor may get; views are objects of their own)."""
    k = t.__dict__.get("_tape_key")
    if k is None:
        k = t._tape_key = next(_keys)
    return k


@dataclass(frozen=True)
class Ref:
    """What the tape notes about a tensor without keeping it alive."""
    key: int
    shape: tuple
    dtype: str

    @staticmethod
    def of(t: Tensor) -> "Ref":
        """A Ref to tensor t (its key, shape and dtype; t itself is not kept)."""
        return Ref(_key(t), t.shape, t.dtype)


@dataclass
class Entry:
    """One op noted on a Tape: its inputs and output (as Refs), the backward rule and its fused form."""
    op: str
    inputs: tuple  # a Ref per tensor input (None for other inputs)
    output: Ref
    rule: object  # callable(grad_out) -> tuple of grads (None where no gradient), one per input
    saved: dict = field(default_factory=dict)
    # callable(grad_out, acc) -> the rule's grads, input 0's being acc + its own: used when input 0 has a
    # gradient already (acc), which the result then replaces (one kernel instead of the rule and an add)
    fuse: object = None
    fuse_in_place: bool = False  # fuse adds into acc's own buffer: only for a gradient the tape alone holds
    fresh: bool = False  # every gradient the rule (and fuse) returns is a new tensor that nothing else holds


def active() -> "Tape | None":
    """The innermost Tape being recorded, or None."""
    return _active[-1] if _active else None


def track(op: str, inputs, output: Tensor, rule, fuse=None, fuse_in_place: bool = False,
          fresh: bool = False) -> Tensor:
    """Called by differentiable ops: note the op on the active tape (if any) and return its output.
    fuse, fuse_in_place, fresh: see Entry. (Recording dispatches into a replayable program is
    `evermind_vk.record`, another thing.)"""
    tape = active()
    if tape is not None:
        tape.entries.append(Entry(op, tuple(Ref.of(x) if isinstance(x, Tensor) else None for x in inputs),
                                  Ref.of(output), rule, fuse=fuse, fuse_in_place=fuse_in_place, fresh=fresh))
    return output


class Grads:
    """Gradients keyed by tensor identity (the tape's key of each tensor)."""

    def __init__(self, by_key: dict):
        self._by_key = by_key

    @staticmethod
    def _k(t: Tensor):
        return t.__dict__.get("_tape_key") if isinstance(t, Tensor) else None

    def __getitem__(self, t: Tensor) -> Tensor:
        hit = self._by_key.get(self._k(t))
        if hit is None:
            raise KeyError(t)
        return hit

    def get(self, t: Tensor, default=None):
        """The gradient of tensor t (matched by identity), or default when it has none."""
        hit = self._by_key.get(self._k(t))
        return default if hit is None else hit

    def __contains__(self, t: Tensor) -> bool:
        return self._k(t) in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    def by_name(self, params: dict) -> dict:
        """{name: gradient} for the named tensors that received one."""
        return {n: self._by_key[k] for n, t in params.items() if (k := self._k(t)) in self._by_key}


def _differentiable(t) -> bool:
    return t.dtype in ("f32", "f16")


class Tape:
    """Records the differentiable ops run inside `with Tape() as tape:`; tape.backward(seed) runs their
    rules in reverse and returns the gradients as a Grads."""

    def __init__(self):
        self.entries: list[Entry] = []

    def __enter__(self) -> "Tape":
        _active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _active.remove(self)

    def _seeds(self, seed) -> list[tuple[Tensor, Tensor]]:
        if isinstance(seed, Tensor):
            if seed.numel != 1:
                raise ShapeError(f"backward(tensor) needs a 1-element loss, got shape {seed.shape}; "
                                 "pass {tensor: gradient} for others")
            with seed.device.eager():  # a constant made once, not an operation of a recorded step
                one = tensor(np.ones(seed.shape, np.float32), dtype=seed.dtype, device=seed.device)
            return [(seed, one)]
        if isinstance(seed, dict):
            return list(seed.items())
        if isinstance(seed, (list, tuple)):
            pairs = []
            for item in seed:
                if not (isinstance(item, (list, tuple)) and len(item) == 2):
                    raise EvermindError("backward(list) takes (tensor, gradient) pairs")
                pairs.append((item[0], item[1]))
            return pairs
        raise EvermindError(f"backward: unsupported seed {type(seed).__name__}")

    def backward(self, seed, release: bool = True, keep_intermediate: bool = False) -> Grads:
        """Gradients of the leaf tensors (inputs and parameters) the seeds reach, and of intermediates
        too with keep_intermediate. With release, the tape is consumed: each entry, the tensors it
        saved and its output's gradient are dropped once processed."""
        grads: dict[int, Tensor] = {}  # tape key -> gradient
        owned: set[int] = set()  # keys whose gradient tensor the tape alone holds (an in-place fuse may add into it)

        def accumulate(t: Ref, g: Tensor, fresh: bool = False) -> None:
            if g.shape != t.shape or g.dtype != t.dtype:
                raise ShapeError(f"gradient {g.shape}/{g.dtype} for a tensor {t.shape}/{t.dtype}")
            hit = grads.get(t.key)
            grads[t.key] = g if hit is None else add(hit, g)
            if hit is not None or fresh:
                owned.add(t.key)
            else:
                owned.discard(t.key)

        for t, g in self._seeds(seed):
            accumulate(Ref.of(t), g)
        seed = t = g = None
        entries = self.entries
        for i in range(len(entries) - 1, -1, -1):
            rec = entries[i]
            g = grads.pop(rec.output.key, None)
            owned.discard(rec.output.key)  # passed to the rule now (and kept, if kept, as it is)
            if g is not None:
                if keep_intermediate:
                    grads[rec.output.key] = g
                x0 = rec.inputs[0] if rec.inputs else None
                acc = None
                if (rec.fuse is not None and x0 is not None and x0.key in grads
                        and (not rec.fuse_in_place or x0.key in owned)):
                    acc = grads.pop(x0.key)
                    owned.discard(x0.key)
                fused = acc is not None
                ins_grads = rec.rule(g) if acc is None else rec.fuse(g, acc)  # fuse: acc is in input 0's
                del g, acc  # the output's gradient dies with this entry (unless kept or captured)
                if len(ins_grads) != len(rec.inputs):
                    raise EvermindError(f"backward rule of {rec.op} gave {len(ins_grads)} gradients "
                                        f"for {len(rec.inputs)} inputs")
                for j, (x, gx) in enumerate(zip(rec.inputs, ins_grads)):
                    if gx is not None and x is not None and _differentiable(x):
                        # a fused input 0's total is new (or acc itself, which the tape held alone)
                        accumulate(x, gx, fresh=rec.fresh or (fused and j == 0))
                ins_grads = gx = None
            if release:
                entries[i] = None  # its saved tensors go with it
            del rec
        if release:
            self.entries = []
        return Grads(grads)
