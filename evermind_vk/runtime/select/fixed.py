"""Kernels with one variant per (op, dtype): no choice to make, only their rows (one thread per element, or
one workgroup per chunk, row or channel); rope and the gated activations also have a CPU twin, more elements a
thread (pick_cpu_twin)."""
from __future__ import annotations

from .table import F, simple

ROWS = [
    *(simple("rope", "rope", dt, 256) for dt in F),
    *(simple("rope", "rope", dt, 256, ["th"]) for dt in F),  # CPU twin: a thread per (token, head)
    *(simple("bias_add", "bias_add", dt, 256) for dt in F),
    *(simple("copy2d", "copy2d", dt, 256) for dt in F),
    # Strided views: a gather (transpose, basic indexing, expand) and its scatter; u32 moves any 32-bit
    # dtype's words.
    *(simple("strided", op, dt, 256) for op in ("gather_strided", "scatter_strided") for dt in ("f32", "f16", "u32")),
    *(simple("glu", op, dt, 256, [act]) for op in ("glu", "glu_backward") for act in ("silu", "gelu") for dt in F),
    # CPU twins: four columns a thread (d % 4 == 0)
    *(simple("glu", op, dt, 256, [act, "c4"]) for op in ("glu", "glu_backward") for act in ("silu", "gelu") for dt in F),
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


# The CPU twins: the flag that gives a thread more elements, and the elements it then takes of the one-a-thread
# layout's. On CPU devices the integer divisions that find a thread's row, head or column run lane by lane
# (x86 has no vector division), so one a head (rope) or one a four columns (glu) instead of one an element is
# 40% (rope) and 25-30% (glu) less time on lavapipe (the small LM's launches, interleaved A/B, this change's
# commit message); GPUs keep one element a thread (more threads, coalesced loads).
CPU_TWINS = {"rope": "th", "glu": "c4", "glu_backward": "c4"}


def pick_cpu_twin(cands, device_type: str, fits: bool = True):
    """rope's or a gated activation's variant among `cands` (one op, dtype and activation): its CPU twin
    (CPU_TWINS) on CPU devices where the launch `fits` it (glu: d % 4 == 0; rope: its loop over the D / 2 pairs
    within the device's loop cap), else the one-element-a-thread one."""
    twin = CPU_TWINS[cands[0].op]
    use = device_type == "cpu" and fits
    return next(v for v in cands if (twin in v.flags) == use)

