"""TrainConfig: every setting of one Trainer.train call, validated before the first step."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from ..errors import ConfigError
from .schedule import LRSchedule

# One default for AdamW and the Trainer: PyTorch's AdamW default and builderforce's trainer default (0.01).
DEFAULT_WEIGHT_DECAY = 1e-2
WSLA_MAX_DELTA = 0.05


@dataclass
class TrainConfig:
    """What Trainer.train does (each a keyword argument of train as well).

    epochs, seq_len (tokens per sequence; token models only), batch_size (rows per step, per rank when
    data-parallel), lr, max_grad_norm (<= 0: no clipping), weight_decay.
    wsla: train only model.wsla_parameters(), with max_delta (the per-element trust region) defaulting to
    0.05 (else 0 = off). freeze: fnmatch patterns of parameters not trained; param_groups: a list of
    {"params": pattern(s), "lr": ..., "weight_decay": ...}, the first matching group wins.
    schedule: an LRSchedule (doppler's lr_at, per optimizer step). accum_steps: batches per optimizer step,
    their gradients weighted by their share of the step's targets (rows), so one step equals one big batch.
    max_steps: stop once the trainer has taken that many optimizer steps (counting steps before a resume).
    time_limit: stop at the first step boundary past it (seconds). shuffle: a seeded permutation of the
    data each epoch (False: in order, as builderforce's EvermindLM and MoE trainers).
    on_step(step, metrics) after each optimizer step; on_epoch_end(epoch, loss, grad_norm) after each epoch
    (and after a partial epoch cut short by any stop), with the mean pre-clip gradient norm when
    track_grad_norm. progress: a progress bar (or lines) on stderr.
    eval_data with eval_every N: the evaluation metric every N steps (history's eval_ppl for language
    models, eval_loss for the others); eval_split = f instead holds out the last fraction f of the data.
    save_key with save_every N: a resumable checkpoint every N steps and at the end (save_dir: the store's
    directory for a plain key; a path key is a file). stop_on_signal: SIGINT/SIGTERM stop at the next
    step boundary (saving when save_key is set) and set trainer.interrupted."""

    epochs: int = 1
    seq_len: int = 64
    batch_size: int = 1
    lr: float = 1e-3
    max_grad_norm: float = 1.0
    weight_decay: float = DEFAULT_WEIGHT_DECAY
    wsla: bool = False
    max_delta: float | None = None
    freeze: tuple = ()
    param_groups: list | None = None
    schedule: LRSchedule | None = None
    accum_steps: int = 1
    max_steps: int | None = None
    time_limit: float | None = None
    shuffle: bool = True
    track_grad_norm: bool = False
    on_step: object = None
    on_epoch_end: object = None
    progress: bool = False
    eval_data: object = None
    eval_every: int = 0
    eval_split: float = 0.0
    save_key: str | None = None
    save_every: int = 0
    save_dir: str = ".evermind-checkpoints"
    stop_on_signal: bool = False

    @classmethod
    def of(cls, config: "TrainConfig | None", overrides: dict) -> "TrainConfig":
        """config (or the defaults) with keyword overrides; an unknown keyword is a ConfigError."""
        known = {f.name for f in fields(cls)}
        bad = sorted(set(overrides) - known)
        if bad:
            raise ConfigError(f"Trainer.train: unknown settings {bad}")
        base = {f.name: getattr(config, f.name) for f in fields(cls)} if config is not None else {}
        out = cls(**{**base, **overrides})
        out.validate()
        return out

    def validate(self) -> None:
        """Refuse settings that would divide by zero, train nothing or never stop, up front."""
        check_train_args(epochs=self.epochs, seq_len=self.seq_len, batch_size=self.batch_size,
                         max_grad_norm=self.max_grad_norm, time_limit=self.time_limit)
        for name in ("accum_steps",):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {v!r}")
        for name in ("eval_every", "save_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {v!r}")
        if self.max_steps is not None and (isinstance(self.max_steps, bool) or self.max_steps < 0):
            raise ConfigError(f"max_steps must be None or an integer >= 0, got {self.max_steps!r}")
        if self.eval_split and (self.eval_data is not None or not 0 < self.eval_split < 1):
            raise ConfigError("eval_split is a fraction in (0, 1), and excludes eval_data")

    @property
    def trust_region(self) -> float:
        """The max_delta AdamW uses: as given, else 0.05 under WSLA, else 0 (off)."""
        return self.max_delta if self.max_delta is not None else (WSLA_MAX_DELTA if self.wsla else 0.0)


def check_train_args(**kw) -> None:
    """Refuse settings that would divide by zero, train nothing or never stop, up front."""
    for name in ("epochs", "seq_len", "batch_size"):
        if name in kw:
            v = kw[name]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {v!r}")
    v = kw.get("max_grad_norm", 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
        raise ConfigError(f"max_grad_norm must be a finite number (<= 0: no clipping), got {v!r}")
    v = kw.get("time_limit")
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))
                          or not math.isfinite(v) or v < 0):
        raise ConfigError(f"time_limit must be None or a finite number of seconds >= 0, got {v!r}")
