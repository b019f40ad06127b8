"""Kernels with one variant per (op, dtype): no choice to make, only their rows (one thread per element, or
one workgroup per chunk, row or channel)."""
from __future__ import annotations

from .table import F, simple

ROWS = [
    *(simple("rope", "rope", dt, 256) for dt in F),
    *(simple("bias_add", "bias_add", dt, 256) for dt in F),
    *(simple("copy2d", "copy2d", dt, 256) for dt in F),
    *(simple("glu", op, dt, 256, [act]) for op in ("glu", "glu_backward") for act in ("silu", "gelu") for dt in F),
    simple("optim", "adamw_step", "f32", 256),
    simple("optim", "clip_scale", "f32", 256),
    # Image ops: conv2d's im2col/col2im around the strided matmul, group_norm (two-stage statistics),
    # per-channel sums, nearest upsampling, pixel shuffle. Stage-2 reductions read f32 partials only.
    *(simple("conv2d", op, dt, 256) for op in ("im2col", "col2im", "swap_axes01", "channel_bias_add") for dt in F),
    *(simple("image", op, dt, 256) for op in ("group_norm_partials", "group_norm", "channel_partials",
                                             "group_norm_backward", "upsample2d", "upsample2d_backward",
                                             "pixel_shuffle", "pixel_shuffle_backward") for dt in F),
    *(simple("image", op, "f32", 256) for op in ("group_norm_stats", "channel_totals", "group_norm_backward_stats")),
    *(simple("mse_loss", op, dt, 256) for op in ("mse_diff", "mse_loss_backward") for dt in F),
    # Causal depthwise conv1d (EvermindLM, Mamba): one thread per output element; dkernel in two stages.
    *(simple("conv1d", op, dt, 256) for op in ("conv1d_causal", "conv1d_causal_backward",
                                               "conv1d_causal_weight_partials") for dt in F),
    # Shared-expert mixture of experts (builderforce's SharedExpertMoE): routing, dense expert combine, aux loss.
    *(simple("moe", op, dt, 64) for op in ("moe_route", "moe_bias_relu", "moe_relu_backward", "moe_combine",
                                           "moe_combine_backward", "moe_gate_grad", "moe_router_backward")
      for dt in F),
    simple("moe", "moe_aux", "f32", 64),
    # Dynamic loss scaling (mixed precision of builderforce's EvermindLMTrainer).
    *(simple("loss_scale", op, "f32", 256) for op in ("loss_scale_round", "loss_unscale")),
    # Dtype casts of mixed-precision training (f32 master weights -> f16 working copies; f16 gradients -> f32).
    *(simple("cast", op, "f16", 256) for op in ("cast_f16", "cast_f32")),
]
