"""A gradient tape: differentiable ops note (inputs, output, backward rule) on it while a Tape is active;
`Tape.backward(seed)` walks the entries in reverse and returns every tensor's gradient.

    with ev.Tape() as tape:
        y = F.matmul(x, w)
        loss = F.cross_entropy(y, targets)
    grads = tape.backward(loss)          # grads[w], grads.by_name(params)

Seeds: a 1-element loss tensor (seed 1), a mapping tensor -> gradient, or a list of (tensor, gradient)
pairs. Gradients of inputs used more than once accumulate (x + x gives 2g); integer (u32/i32) inputs
get none; every gradient's shape and dtype are checked against its tensor; an entry's saved tensors
and its output gradient are released as soon as the walk has passed it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import EvermindError, ShapeError
from ..ops import add
from ..runtime.tensor import Tensor, tensor

_active: list["Tape"] = []


@dataclass
class Entry:
    op: str
    inputs: tuple
    output: Tensor
    rule: object  # callable(grad_out) -> tuple of grads (None where no gradient), one per input
    saved: dict = field(default_factory=dict)


def active() -> "Tape | None":
    return _active[-1] if _active else None


def track(op: str, inputs, output: Tensor, rule) -> Tensor:
    """Called by differentiable ops: note the op on the active tape (if any) and return its output.
    (Recording dispatches into a replayable program is `evermind_vk.record`, another thing.)"""
    tape = active()
    if tape is not None:
        tape.entries.append(Entry(op, tuple(inputs), output, rule))
    return output


class Grads:
    """Gradients keyed by tensor identity."""

    def __init__(self, by_id: dict):
        self._by_id = by_id

    def __getitem__(self, t: Tensor) -> Tensor:
        return self._by_id[id(t)][1]

    def get(self, t: Tensor, default=None):
        hit = self._by_id.get(id(t))
        return default if hit is None else hit[1]

    def __contains__(self, t: Tensor) -> bool:
        return id(t) in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def by_name(self, params: dict) -> dict:
        """{name: gradient} for the named tensors that received one."""
        return {n: self._by_id[id(t)][1] for n, t in params.items() if id(t) in self._by_id}


def _differentiable(t: Tensor) -> bool:
    return t.dtype in ("f32", "f16")


class Tape:
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
        grads: dict[int, tuple[Tensor, Tensor]] = {}

        def accumulate(t: Tensor, g: Tensor) -> None:
            if g.shape != t.shape or g.dtype != t.dtype:
                raise ShapeError(f"gradient {g.shape}/{g.dtype} for a tensor {t.shape}/{t.dtype}")
            hit = grads.get(id(t))
            grads[id(t)] = (t, g if hit is None else add(hit[1], g))

        for t, g in self._seeds(seed):
            accumulate(t, g)
        entries = self.entries
        for i in range(len(entries) - 1, -1, -1):
            rec = entries[i]
            hit = grads.get(id(rec.output))
            if hit is not None:
                ins_grads = rec.rule(hit[1])
                if len(ins_grads) != len(rec.inputs):
                    raise EvermindError(f"backward rule of {rec.op} gave {len(ins_grads)} gradients "
                                        f"for {len(rec.inputs)} inputs")
                for x, gx in zip(rec.inputs, ins_grads):
                    if gx is not None and isinstance(x, Tensor) and _differentiable(x):
                        accumulate(x, gx)
            if not keep_intermediate:
                grads.pop(id(rec.output), None)
            if release:
                entries[i] = None  # its saved tensors go with it
        if release:
            self.entries = []
        return Grads(grads)
