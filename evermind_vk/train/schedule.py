"""Learning-rate schedules with doppler's semantics: pure functions of the 1-based step."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LRSchedule:
    """type: 'constant' | 'step_decay' | 'cosine'; warmup_steps > 0 adds a linear warm-up to any type.
    min_lr clamps the warm-up from below (it is not the end point of the decay)."""
    type: str = "constant"
    warmup_steps: int = 0
    step_size: int = 1000
    gamma: float = 0.95
    total_steps: int = 10000
    min_lr: float = 0.0
    enabled: bool = True

    def __post_init__(self):
        if self.type not in ("constant", "step_decay", "cosine"):
            raise ValueError(f"unknown LR schedule type {self.type!r}")
        if self.warmup_steps < 0 or self.step_size < 1 or self.total_steps < 1:
            raise ValueError("warmup_steps >= 0, step_size >= 1 and total_steps >= 1 are required")


def lr_at(step: int, lr: float, schedule: LRSchedule | None = None) -> float:
    """The effective learning rate at 1-based `step`."""
    s = schedule or LRSchedule()
    if not s.enabled:
        return lr
    W = s.warmup_steps
    if W > 0 and step <= W:
        return max(lr * step / W, s.min_lr)
    if s.type == "step_decay":
        return lr * s.gamma ** (max(0, step - W - 1) // s.step_size)
    if s.type == "cosine":
        return lr * 0.5 * (1 + math.cos(math.pi * min(1.0, max(0, step - W - 1) / s.total_steps)))
    return lr
