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
from ..runtime.kernels import copy_words, fill_words
from .schedule import LRSchedule, lr_at


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
        # -- LR schedule and parameter groups --
        # schedule: doppler's lr_at(step, group lr, schedule), evaluated by begin_step for each group and
        # written into that group's hyper buffer, so a recorded step follows it without re-recording.
        # Group 0 is the defaults (self.lr, self.weight_decay); param_groups adds groups 1.. with their own
        # lr and weight decay, each with its own hyper buffer. A name's group is fixed into a recorded step.
        self.schedule: LRSchedule | None = None
        self.param_groups: list[dict] = []  # [{"params": [names], "lr": float, "weight_decay": float}]
        self._hypers: list[Tensor] = [self._hyper] if dev else []

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
        """The per-step scalars of AdamW's kernel at 1-based step t (lr, betas, eps, decay, bias corrections, trust region)."""
        b1, b2 = self.betas
        return np.array([self.lr, b1, b2, self.eps, self.weight_decay, 1 - b1 ** t, 1 - b2 ** t,
                         self.max_delta], dtype=np.float32)

    def begin_step(self) -> None:
        """Advance the step count and write this step's scalars into the hyper buffers' host memory
        (one per parameter group, lr from the schedule). For a recorded step: call this, then replay the
        program (which uploads them)."""
        self.step_count += 1
        for g in range(len(self._hypers)):
            self._hypers[g].write_staging(self.group_hyper(self.step_count, g))

    # -- LR schedule and parameter groups ----------------------------------------------------------
    def set_param_groups(self, groups) -> None:
        """Replace the extra groups: a list of {"params": [names], "lr": ..., "weight_decay": ...}
        (lr / weight_decay default to the optimizer's). A name may be in one group; unlisted names are in
        group 0 (the defaults). Hyper buffers are reused by index, so recorded steps stay valid as long
        as each name keeps its group (the Trainer's step key includes the assignment)."""
        out, seen = [], set()
        for i, g in enumerate(groups or ()):
            names = list(g["params"])
            unknown = [n for n in names if n not in self.params]
            if unknown:
                raise KeyError(f"AdamW: parameter group {i + 1} names unknown parameters {unknown}")
            dup = seen.intersection(names)
            if dup:
                raise ValueError(f"AdamW: parameters {sorted(dup)} are in more than one group")
            seen.update(names)
            lr = float(self.lr if g.get("lr") is None else g["lr"])
            wd = float(self.weight_decay if g.get("weight_decay") is None else g["weight_decay"])
            if not lr >= 0 or not wd >= 0:
                raise ValueError(f"AdamW: group {i + 1} lr and weight_decay must be >= 0 (got {lr}, {wd})")
            out.append({"params": names, "lr": lr, "weight_decay": wd})
        self.param_groups = out
        while len(self._hypers) < 1 + len(out):
            with self._device.eager():
                self._hypers.append(tensor(np.zeros(8, np.float32), device=self._device))

    def group_of(self, name: str) -> int:
        """A name's parameter group: 1 + its index in param_groups, 0 for the default group."""
        for i, g in enumerate(self.param_groups):
            if name in g["params"]:
                return i + 1
        return 0

    def group_lr(self, t: int, group: int = 0) -> float:
        """The effective learning rate of a group at 1-based step t (its lr through the schedule)."""
        base = self.lr if group == 0 else self.param_groups[group - 1]["lr"]
        return lr_at(max(int(t), 1), base, self.schedule) if self.schedule is not None else base

    @property
    def effective_lr(self) -> float:
        """Group 0's learning rate of the current (last begun) step."""
        return self.group_lr(max(self.step_count, 1), 0)

    def group_hyper(self, t: int, group: int = 0) -> np.ndarray:
        """hyper(t) with a group's learning rate and weight decay."""
        h = self.hyper(t)
        h[0] = self.group_lr(t, group)
        if group:
            h[4] = self.param_groups[group - 1]["weight_decay"]
        return h

    def record_updates(self, grads: dict, clip: ClipMetrics | None = None,
                       unscale: tuple[Tensor, Tensor] | None = None) -> None:
        """Dispatch (or record) the uploads of the scalars and one update per named gradient. clip: the
        result of clip_grad_norm(..., defer=True) on these gradients; the updates apply its scale.
        unscale: (scale, state) of unscale_grads(..., in_place=False): the gradients are still loss-scaled
        and each update unscales (or, on overflow, skips) as that call's in-place form would have."""
        dev = self._device
        for h in self._hypers:
            dev.upload(h)
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
            deferred = clip is not None and clip.deferred
            ops.adamw_step(p, g, m, v, self._hypers[self.group_of(name)], self._nonfinite,
                           clip.state if deferred else None, clip.max_norm if deferred else 0.0, unscale=unscale)

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
        """Step count, hyperparameters, moments by name, groups and schedule (PyTorch's layout)."""
        return {
            "step": self.step_count,
            "hyper": {"lr": self.lr, "betas": list(self.betas), "eps": self.eps,
                      "weight_decay": self.weight_decay, "max_delta": self.max_delta},
            "state": {n: {"exp_avg": m.numpy(), "exp_avg_sq": v.numpy()} for n, (m, v) in self.state.items()},
            "param_groups": [dict(g, params=list(g["params"])) for g in self.param_groups],
            "schedule": None if self.schedule is None else dict(vars(self.schedule)),
        }

    def load_state_dict(self, sd: dict) -> None:
        """Restore state_dict()'s values into the existing moment tensors (a recorded step sees them)."""
        h = sd["hyper"]
        self.set_hyper(lr=h["lr"], betas=h["betas"], eps=h["eps"], weight_decay=h["weight_decay"],
                       max_delta=h["max_delta"])
        self.step_count = int(sd["step"])
        if "param_groups" in sd:
            self.set_param_groups(sd["param_groups"])
        if "schedule" in sd:
            self.schedule = LRSchedule(**sd["schedule"]) if sd["schedule"] else None
        # Moments are copied INTO the existing device tensors: a recorded step binds those tensors, so
        # replacing them would leave it updating the old ones (the resumed run silently diverged).
        # Names the state dict lacks restart from zero moments, in place too.
        for name, s in sd["state"].items():
            p = self.params.get(name)
            m, v = np.asarray(s["exp_avg"]), np.asarray(s["exp_avg_sq"])
            if p is not None and (m.shape != p.shape or v.shape != p.shape):
                raise ShapeError(f"AdamW state for {name!r} has shape {m.shape}, parameter {p.shape}")
        with self._device.eager():
            for name in [n for n in self.state if n not in sd["state"]]:
                for t in self.state[name]:
                    fill_words(t, 0)
            for name, s in sd["state"].items():
                m, v = (np.asarray(s[k], dtype=np.float32) for k in ("exp_avg", "exp_avg_sq"))
                if name in self.state and self.state[name][0].shape == m.shape:
                    for dst, src in zip(self.state[name], (m, v)):
                        copy_words(tensor(src, device=self._device), dst)
                else:
                    self.state[name] = (tensor(m, device=self._device), tensor(v, device=self._device))


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

    def __init__(self, state: Tensor, max_norm: float, total_params: int, track: bool, deferred: bool = False):
        self.state, self.max_norm, self.total_params = state, max_norm, total_params
        self.deferred = deferred  # the scale is applied by the optimizer's update (record_updates(clip=...))
        self._vals = None
        if track:
            self._read()

    def _read(self):
        if self._vals is None:
            s = self.state.numpy().astype(np.float64)
            after = float(s[1])
            if self.deferred:  # not measured: the norm the scaled gradients have
                n = float(s[0])
                scale = min(self.max_norm / (n + 1e-6), 1.0) if self.max_norm > 0 and math.isfinite(n) else 1.0
                after = n * scale
            self._vals = (float(s[0]), after)
        return self._vals

    @property
    def norm_before(self) -> float:
        """The global gradient norm before clipping."""
        return self._read()[0]

    @property
    def norm_after(self) -> float:
        """The global gradient norm after clipping (reported, as doppler)."""
        return self._read()[1]

    @property
    def finite(self) -> bool:
        """Whether the norm is finite (no inf or NaN gradient)."""
        return math.isfinite(self.norm_before)

    @property
    def clipped(self) -> bool:
        """Whether clipping scaled the gradients."""
        n = self.norm_before
        return self.max_norm > 0 and math.isfinite(n) and self.max_norm / (n + 1e-6) < 1.0

    def as_dict(self) -> dict:
        """doppler's ClipMetrics fields."""
        return {"norm_before": self.norm_before, "norm_after": self.norm_after, "clipped": self.clipped,
                "finite": self.finite, "total_params": self.total_params}


def _distinct_buffers(gl: list) -> list:
    """The gradients with one entry per device buffer: a buffer shared by several parameters (the tape
    hands add's output gradient to both inputs, so a residual add's two parameters get one tensor) is
    scaled in place once, not once per name."""
    seen, out = set(), []
    for g in gl:
        if id(g._buffer) not in seen:  # the Buffer, not its kp: a planned recording places buffers at its end
            seen.add(id(g._buffer))
            out.append(g)
    return out


def clip_grad_norm(grads, max_norm: float, track: bool = False, norm: Tensor | None = None,
                   defer: bool = False) -> ClipMetrics:
    """Scale all gradients (one vector) by min(max_norm / (norm + 1e-6), 1) on the device.

    norm_before is the L2 norm before clipping; norm_after is measured after. max_norm <= 0 disables
    clipping (the norm is still computed; it cannot overflow for finite gradients). A non-finite norm leaves every gradient untouched and is
    reported (finite = False). Reading the metrics is a host sync; with track=False it happens only
    when an attribute is read. norm: a device f32 [2] tensor whose element 0 already holds the norm of
    these gradients (unscale_grads computes it): used, and its element 1 overwritten, instead of a new pass.
    defer: only the norm is computed; the gradients stay as they are and the caller hands the result to
    AdamW.record_updates(grads, clip=...), whose updates scale each gradient element as clipping would
    have (same bits), and norm_after is derived from norm_before on the host, not measured (the train
    loop's step: 18 fewer scaling dispatches and no second norm for the LM)."""
    gl = list(grads.values()) if isinstance(grads, dict) else list(grads)
    if not gl:
        raise ValueError("clip_grad_norm: no gradients")
    for g in gl:
        if g.dtype != "f32":
            raise UnsupportedError(f"clip_grad_norm takes f32 gradients, got {g.dtype}")
    dev = gl[0].device
    if norm is not None:
        if norm.shape != (2,) or norm.dtype != "f32":
            raise ShapeError(f"clip_grad_norm: norm is {norm.shape}/{norm.dtype}, want (2,)/f32")
        state = norm
    else:
        state = empty((2,), "f32", dev)
        ops.l2_norm(gl, state, 0)  # overflow-free; every parameter's gradient counts, shared ones once per parameter
    if defer:
        return ClipMetrics(state, float(max_norm), sum(g.numel for g in gl), track, deferred=True)
    if max_norm > 0:
        for g in _distinct_buffers(gl):
            ops.clip_scale(g, state, max_norm)
    ops.l2_norm(gl, state, 1)
    return ClipMetrics(state, float(max_norm), sum(g.numel for g in gl), track)


# -- dynamic loss scaling (mixed precision) -----------------------------------------------------------
class GradScaler:
    """doppler's DynamicLossScaler (src/training/loss-scaling.js): the loss is multiplied by `scale`
    before the backward; a step whose gradients hold an inf or NaN is an overflow: it changes no weight
    and no moment, is counted (`overflows`), and halves the scale (floor min_scale); after growth_interval
    consecutive clean steps the scale doubles (cap max_scale; None: no cap). Defaults: 1024, x2 after 2000,
    x0.5, 1, 65536. GradScaler.builderforce() is builderforce's scaler (16384, x2 after 200, no cap): the one
    class serves both.

    The host keeps this state; the device reads the scale from a small per-step buffer written before
    each replay (write_device), so a recorded step replays unchanged. update(overflow) -> whether the
    step was applied."""

    def __init__(self, init_scale: float = 1024.0, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, min_scale: float = 1.0, max_scale: float | None = 65536.0):
        vals = {"init_scale": init_scale, "growth_factor": growth_factor, "backoff_factor": backoff_factor,
                "min_scale": min_scale, "max_scale": math.inf if max_scale is None else max_scale}
        for k, v in vals.items():
            f = _real(k, v)
            if not ((math.isfinite(f) or (k == "max_scale" and f == math.inf)) and f > 0):
                raise ConfigError(f"GradScaler: {k} must be finite and > 0, got {v!r}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, (int, np.integer)) or growth_interval < 1:
            raise ConfigError(f"GradScaler: growth_interval must be an integer >= 1, got {growth_interval!r}")
        if not (growth_factor >= 1 and 0 < backoff_factor <= 1 and min_scale <= vals["max_scale"]):
            raise ConfigError("GradScaler: need growth_factor >= 1, 0 < backoff_factor <= 1, min_scale <= max_scale")
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.min_scale, self.max_scale = float(min_scale), (None if max_scale is None else float(max_scale))
        self.scale = min(max(float(init_scale), self.min_scale), vals["max_scale"])
        self.clean_steps = 0  # consecutive steps without overflow since the last change of scale
        self.overflows = 0  # overflowing (skipped) steps, ever

    @classmethod
    def builderforce(cls, init_scale: float = 16384.0, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 200, min_scale: float = 1.0) -> "GradScaler":
        """builderforce's DynamicLossScaler (src/training/mixed_precision.ts): 16384, x2 after 200 clean
        steps, x0.5 on overflow, floor 1, no maximum."""
        return cls(init_scale, growth_factor, backoff_factor, growth_interval, min_scale, max_scale=None)

    @property
    def skipped(self) -> int:
        """Steps skipped for an overflow (builderforce's name for `overflows`)."""
        return self.overflows

    def update(self, overflow: bool) -> bool:
        """Record a step's outcome and adapt the scale; whether the step was applied (no overflow)."""
        if overflow:
            self.overflows += 1
            self.clean_steps = 0
            self.scale = max(self.min_scale, self.scale * self.backoff_factor)
            return False
        self.clean_steps += 1
        if self.clean_steps >= self.growth_interval:
            grown = self.scale * self.growth_factor
            self.scale = grown if self.max_scale is None else min(self.max_scale, grown)
            self.clean_steps = 0
        return True

    def device_words(self) -> np.ndarray:
        """[scale, 1 / scale]: the per-step device buffer ops.loss_unscale reads (scale[1])."""
        return np.array([self.scale, 1.0 / self.scale], np.float32)

    def state_dict(self) -> dict:
        """Everything a resumed run needs (max_scale None: no cap)."""
        return {"scale": self.scale, "clean_steps": self.clean_steps, "overflows": self.overflows,
                "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval, "min_scale": self.min_scale, "max_scale": self.max_scale}

    def load_state_dict(self, sd: dict) -> None:
        """Restore state_dict()'s values (each checked)."""
        fresh = GradScaler(sd["scale"], sd["growth_factor"], sd["backoff_factor"], int(sd["growth_interval"]),
                           sd["min_scale"], sd["max_scale"])  # checks every value
        fresh.scale = float(sd["scale"])  # as saved, unclamped: a resumed run continues bit-identically
        fresh.clean_steps, fresh.overflows = int(sd["clean_steps"]), int(sd["overflows"])
        self.__dict__.update(fresh.__dict__)


def unscale_grads(grads: dict, scale: Tensor, in_place: bool = True) -> tuple[Tensor, Tensor]:
    """Inside a step: the overflow check and unscale of loss-scaled f32 gradients. state[0] = the L2 norm
    of all of them (overflow-free: non-finite exactly when an element is inf or NaN); then every gradient
    is multiplied by scale[1] (= 1 / scale) when it is finite, else set to NaN, so that AdamW's existing
    non-finite skip leaves every weight and moment unchanged (and counts the elements). Gradient buffers
    shared by several names are unscaled once. Returns (state, norm), device f32 [2] tensors: state[0] the
    scaled gradients' norm (copy it to read it), norm[0] = state[0] * scale[1], the unscaled gradients' norm
    (exact for a power-of-two scale: l2_norm divides by the largest magnitude first), for clip_grad_norm.
    in_place=False: the gradients stay loss-scaled (no dispatch per gradient); hand (scale, state) to
    AdamW.record_updates(..., unscale=...), whose updates unscale as this would have (same bits). The train
    loop's step does this: 2-4% more tokens/s for the 23.7M LM in f16 on an H100 (bench/results/train_bench-23.7m-h100.txt)."""
    gl = list(grads.values())
    if not gl:
        raise ValueError("unscale_grads: no gradients")
    dev = gl[0].device
    state = empty((2,), "f32", dev)
    ops.l2_norm(gl, state, 0)
    if in_place:
        for g in _distinct_buffers(gl):
            ops.loss_unscale(g, scale, state)
    norm = empty((2,), "f32", dev)
    copy_words(state, norm)
    ops.loss_unscale(norm, scale, state)
    return state, norm
