"""Optimizer kernels: the AdamW update with its per-element trust region, and the gradient scale of
norm clipping. Their host-side state (moments by name, step count, metrics) is in evermind_vk.train."""
from __future__ import annotations

from ..runtime.tensor import Tensor
from ._util import per_thread

__all__ = ["adamw_step", "clip_scale"]


def adamw_step(p: Tensor, g: Tensor, m: Tensor, v: Tensor, hyper: Tensor, nonfinite: Tensor,
               clip_norm: Tensor | None = None, max_norm: float = 0.0,
               unscale: tuple[Tensor, Tensor] | None = None) -> None:
    """One AdamW update of p from g in place (moments m, v in place). hyper holds [lr, b1, b2, eps, wd,
    1 - b1^t, 1 - b2^t, max_delta] on the device; non-finite gradient elements are skipped and counted
    into nonfinite[0]. clip_norm (with max_norm > 0): the update uses g scaled as clip_scale(g, clip_norm,
    max_norm) would scale it (same bits), without writing g: clipping fused into the update.
    unscale = (scale, overflow): g holds loss-scaled values; the update uses g * scale[1] as
    loss_unscale(g, scale, overflow) would have stored it (same bits, before the clipping), and when
    overflow[0] is inf or NaN it skips and counts every element, as after loss_unscale's NaN."""
    clip = max_norm > 0 and clip_norm is not None
    scale, overflow = unscale if unscale is not None else (hyper, hyper)
    per_thread("adamw_step", "f32", [p, g, m, v, hyper, nonfinite, clip_norm if clip else hyper, scale, overflow],
               {"n": p.numel, "max_norm": float(max_norm) if clip else 0.0, "unscale": int(unscale is not None)},
               p.numel)


def clip_scale(g: Tensor, state: Tensor, max_norm: float) -> None:
    """g *= min(max_norm / (state[0] + 1e-6), 1) in place (state[0]: the norm, from l2_norm); a
    non-finite state[0] leaves g untouched."""
    per_thread("clip_scale", "f32", [g, state], {"n": g.numel, "max_norm": float(max_norm)}, g.numel)


# -- dynamic loss scaling ----------------------------------------------------------------------------
def loss_scale_round(g: Tensor, scale: Tensor) -> None:
    """g = f16-nearest(g * scale[0]) in place (ties to even; |x| >= 65520 gives inf)."""
    per_thread("loss_scale_round", "f32", [g, scale], {"n": g.numel}, g.numel)


def loss_unscale(g: Tensor, scale: Tensor, state: Tensor) -> None:
    """g *= scale[1] in place if state[0] is finite, else g = NaN (AdamW then skips every element)."""
    per_thread("loss_unscale", "f32", [g, scale, state], {"n": g.numel}, g.numel)


__all__ += ["loss_scale_round", "loss_unscale"]
