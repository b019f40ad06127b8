"""Recording many dispatches into one kp Sequence, submitted once and replayable.

    with ev.record() as step:      # ops inside are recorded, not run
        y = ev.matmul(x, w)
        z = ev.add(y, b)
    # leaving the block submits the whole sequence once
    step.run()                     # replays it (one submit) with the same tensors

Push constants are captured at record time, so a replay repeats exactly what was recorded; per-step
scalars that change between replays belong in a device buffer that the kernels read.
"""
from __future__ import annotations

from .device import get_device
from ..errors import EvermindError


class Program:
    def __init__(self, device):
        self.device = device
        self._ops = []
        self._keep = []  # algorithms the sequence uses stay alive with it
        self._labels = []  # per op: the kernel variant's name, or "upload" / "download" (the profiler's rows)
        self._seq = None

    def _append(self, op, keep, label: str = "") -> None:
        """Add a kp operation; `keep` (its algorithm or tensor) lives as long as the program; `label`
        names it (the kernel variant) for the profiler."""
        if self._seq is not None:
            raise EvermindError("this Program is already recorded")
        self._ops.append(op)
        self._keep.append(keep)
        self._labels.append(label or type(op).__name__)

    @property
    def labels(self) -> list[str]:
        """What each recorded operation is, in order: a kernel variant's name, "upload" or "download"."""
        return list(self._labels)

    def __len__(self) -> int:
        return len(self._ops)

    def _finish(self) -> None:
        seq = self.device.manager.sequence()
        for op in self._ops:
            seq.record(op)
        self._seq = seq

    def run(self) -> None:
        """Submit the recorded sequence once."""
        if self._seq is None:
            raise EvermindError("Program.run() before its recording finished")
        if self._ops:
            self._seq.eval()
            self.device.submits += 1


class record:
    """Context manager: record the dispatches of the ops inside into one Program (see module doc)."""

    def __init__(self, device=None, run: bool = True):
        self.device = get_device(device)
        self.run = run
        self.program = Program(self.device)

    def __enter__(self) -> Program:
        if self.device.recording is not None:
            raise EvermindError("record() blocks do not nest")
        self.device.recording = self.program
        return self.program

    def __exit__(self, exc_type, exc, tb) -> None:
        self.device.recording = None
        if exc_type is None:
            self.program._finish()
            if self.run:
                self.program.run()
