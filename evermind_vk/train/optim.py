"""Optimizer side of training on the device: AdamW with a per-element trust region, and gradient-norm
clipping (learning-rate schedules are in evermind_vk.train.schedule).

AdamW semantics (per element, PyTorch's AdamW plus builderforce's per-element trust region):
    m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g^2
    step = lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps), clamped to +-max_delta if max_delta > 0
    p = p (1 - lr wd) - step
Weight decay stays outside the clamp (as builderforce's trust-region AdamW does), so
|p' - p (1 - lr wd)| <= max_delta. A non-finite gradient element leaves that element's parameter and
moments untouched and is counted (builderforce stores the moments first, so one NaN poisons them forever).
"""
from __future__ import annotations

import math

import numpy as np

from .. import ops
from ..errors import ConfigError, ShapeError, UnsupportedError
from ..runtime import Tensor, empty, tensor, zeros
from ..runtime.kernels import fill_words


class AdamW:
    """AdamW over named f32 parameters; moments keyed by parameter name, created lazily (zeros) the
    first time a name is stepped, and kept when the trainable subset changes."""

    def __init__(self, params: dict, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, max_delta: float = 0.0):
        self.params = dict(params)
        for name, p in self.params.items():
            if p.dtype != "f32":
                raise UnsupportedError(f"AdamW keeps f32 master weights; parameter {name!r} is {p.dtype}")
        self.lr = self.eps = self.weight_decay = self.max_delta = 0.0
        self.betas = (0.0, 0.0)
        self.set_hyper(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, max_delta=max_delta)
        self.step_count = 0
        self.state: dict[str, tuple[Tensor, Tensor]] = {}
        dev = next(iter(self.params.values())).device if self.params else None
        self._device = dev
        self._hyper = tensor(np.zeros(8, np.float32), device=dev) if dev else None
        self._nonfinite = zeros((1,), "u32", dev, host_visible=True) if dev else None

    # -- hyperparameters -----------------------------------------------------------------------
    def set_hyper(self, *, lr=None, betas=None, eps=None, weight_decay=None, max_delta=None) -> None:
        """Change hyperparameters (those given), each checked: lr, eps, weight_decay, max_delta finite
        and >= 0, betas in [0, 1). Every path (constructor, Trainer, schedules, load_state_dict) goes
        through here, so a NaN or infinite value can never reach the kernel (inf * 0 = NaN there)."""
        new = {}
        for name, val in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay), ("max_delta", max_delta)):
            if val is None:
                continue
            f = _real(name, val)
            if not (math.isfinite(f) and f >= 0):
                raise ConfigError(f"AdamW: {name} must be finite and >= 0, got {val!r}")
            new[name] = f
        if betas is not None:
            try:
                b = tuple(_real("betas", x) for x in betas)
            except TypeError as e:
                raise ConfigError(f"AdamW: betas must be two numbers, got {betas!r}") from e
            if len(b) != 2 or not all(0.0 <= x < 1.0 for x in b):  # NaN fails the comparison too
                raise ConfigError(f"AdamW: betas must be two numbers in [0, 1), got {betas!r}")
            new["betas"] = b
        for k, v in new.items():  # all checked before any is set
            setattr(self, k, v)

    # -- per-step scalars ---------------------------------------------------------------------
    def hyper(self, t: int) -> np.ndarray:
        b1, b2 = self.betas
        return np.array([self.lr, b1, b2, self.eps, self.weight_decay, 1 - b1 ** t, 1 - b2 ** t,
                         self.max_delta], dtype=np.float32)

    def begin_step(self) -> None:
        """Advance the step count and write this step's scalars into the hyper buffer's host memory.
        For a recorded step: call this, then replay the program (which uploads them)."""
        self.step_count += 1
        self._hyper.write_staging(self.hyper(self.step_count))

    def record_updates(self, grads: dict) -> None:
        """Dispatch (or record) the uploads of the scalars and one update per named gradient."""
        dev = self._device
        dev.upload(self._hyper)
        fill_words(self._nonfinite, 0)
        for name, g in grads.items():
            p = self.params.get(name)
            if p is None:
                raise KeyError(f"AdamW: gradient for unknown parameter {name!r}")
            if g.shape != p.shape or g.dtype != "f32":
                raise ShapeError(f"AdamW: gradient {name!r} is {g.shape}/{g.dtype}, parameter is {p.shape}/f32")
            if name not in self.state:  # lazily, zeroed now: not part of a recorded step
                with dev.eager():
                    self.state[name] = (zeros(p.shape, "f32", dev), zeros(p.shape, "f32", dev))
            m, v = self.state[name]
            ops.adamw_step(p, g, m, v, self._hyper, self._nonfinite)

    def step(self, grads: dict) -> None:
        """One AdamW step for the parameters named in grads (eagerly, or recorded inside record())."""
        self.begin_step()
        self.record_updates(grads)

    @property
    def nonfinite(self) -> int:
        """Non-finite gradient elements skipped in the last step (reads the device counter)."""
        return int(self._nonfinite.numpy()[0])

    # -- persistence --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "step": self.step_count,
            "hyper": {"lr": self.lr, "betas": list(self.betas), "eps": self.eps,
                      "weight_decay": self.weight_decay, "max_delta": self.max_delta},
            "state": {n: {"exp_avg": m.numpy(), "exp_avg_sq": v.numpy()} for n, (m, v) in self.state.items()},
        }

    def load_state_dict(self, sd: dict) -> None:
        h = sd["hyper"]
        self.set_hyper(lr=h["lr"], betas=h["betas"], eps=h["eps"], weight_decay=h["weight_decay"],
                       max_delta=h["max_delta"])
        self.step_count = int(sd["step"])
        state = {}
        for name, s in sd["state"].items():
            p = self.params.get(name)
            m, v = np.asarray(s["exp_avg"]), np.asarray(s["exp_avg_sq"])
            if p is not None and (m.shape != p.shape or v.shape != p.shape):
                raise ShapeError(f"AdamW state for {name!r} has shape {m.shape}, parameter {p.shape}")
            state[name] = (tensor(m.astype(np.float32), device=self._device),
                           tensor(v.astype(np.float32), device=self._device))
        self.state = state


def _real(name: str, val) -> float:
    if isinstance(val, (bool, np.bool_)) or not isinstance(val, (int, float, np.integer, np.floating)):
        raise ConfigError(f"AdamW: {name} must be a number, got {val!r}")
    return float(val)


# -- gradient clipping ------------------------------------------------------------------------------
class ClipMetrics:
    """clip_grad_norm's result. norm_before / norm_after / clipped are read from the device on first
    access (or at once with track=True); total_params is known on the host. `state` is the device
    tensor [norm_before, norm_after] (norms, not squares: a finite gradient whose sum of squares would
    overflow f32 still has a finite norm; copy it inside a recording to read it without a sync)."""

    def __init__(self, state: Tensor, max_norm: float, total_params: int, track: bool):
        self.state, self.max_norm, self.total_params = state, max_norm, total_params
        self._vals = None
        if track:
            self._read()

    def _read(self):
        if self._vals is None:
            s = self.state.numpy().astype(np.float64)
            self._vals = (float(s[0]), float(s[1]))
        return self._vals

    @property
    def norm_before(self) -> float:
        return self._read()[0]

    @property
    def norm_after(self) -> float:
        return self._read()[1]

    @property
    def finite(self) -> bool:
        return math.isfinite(self.norm_before)

    @property
    def clipped(self) -> bool:
        n = self.norm_before
        return self.max_norm > 0 and math.isfinite(n) and self.max_norm / (n + 1e-6) < 1.0

    def as_dict(self) -> dict:
        return {"norm_before": self.norm_before, "norm_after": self.norm_after, "clipped": self.clipped,
                "finite": self.finite, "total_params": self.total_params}


def clip_grad_norm(grads, max_norm: float, track: bool = False) -> ClipMetrics:
    """Scale all gradients (one vector) by min(max_norm / (norm + 1e-6), 1) on the device.

    norm_before is the L2 norm before clipping; norm_after is measured after. max_norm <= 0 disables
    clipping (the norm is still computed; it cannot overflow for finite gradients). A non-finite norm leaves every gradient untouched and is
    reported (finite = False). Reading the metrics is a host sync; with track=False it happens only
    when an attribute is read."""
    gl = list(grads.values()) if isinstance(grads, dict) else list(grads)
    if not gl:
        raise ValueError("clip_grad_norm: no gradients")
    for g in gl:
        if g.dtype != "f32":
            raise UnsupportedError(f"clip_grad_norm takes f32 gradients, got {g.dtype}")
    dev = gl[0].device
    state = empty((2,), "f32", dev)
    ops.l2_norm(gl, state, 0)  # overflow-free: max |g| first, then the scaled sum of squares
    if max_norm > 0:
        for g in gl:
            ops.clip_scale(g, state, max_norm)
    ops.l2_norm(gl, state, 1)
    return ClipMetrics(state, float(max_norm), sum(g.numel for g in gl), track)
