"""The argument groups that several commands share, declared once: the device, the training data, the
optimizer, the model's shape and the precision. `train` and `profile` build their parsers from these."""
from __future__ import annotations

from .common import FINITE, NONNEG, NONNEG_INT, POS_INT, CliError

DEVICE_HELP = "index or name substring (default: EVERMIND_VK_DEVICE, else 0)"


def add_device(p) -> None:
    """--device: which Vulkan device runs the command."""
    p.add_argument("--device", default=None, help=DEVICE_HELP)


def add_data(p, text_help: str) -> None:
    """--text, --seq-len, --batch-size: what a training step reads."""
    p.add_argument("--text", help=text_help)
    p.add_argument("--seq-len", type=POS_INT, default=64, help="tokens (bytes) per training sequence")
    p.add_argument("--batch-size", type=POS_INT, default=8, help="sequences per step")


def add_optim(p) -> None:
    """--lr, --max-grad-norm: the optimizer's step."""
    p.add_argument("--lr", type=NONNEG, default=3e-3, help="AdamW learning rate")
    p.add_argument("--max-grad-norm", type=FINITE, default=1.0,
                   help="clip the gradient norm to this (<= 0: no clipping)")


def add_model_shape(p) -> None:
    """--d-model, --layers, --heads, --kv-heads, --d-ff, --seed: the model built for the run."""
    p.add_argument("--d-model", type=POS_INT, default=64, help="model width")
    p.add_argument("--layers", default="2",
                   help="layer count; for --model mamba also a list of layer types, e.g. mamba1,mamba2,attention")
    p.add_argument("--heads", type=POS_INT, default=4, help="attention heads")
    p.add_argument("--kv-heads", type=POS_INT, default=2, help="key/value heads (grouped-query attention)")
    p.add_argument("--d-ff", type=POS_INT, default=128, help="MLP hidden width")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="initialisation and data-order seed")


def add_precision(p, choices=("f32", "f16", "bf16")) -> None:
    """--precision: f32, or mixed precision where the model's ops support it."""
    p.add_argument("--precision", choices=choices, default="f32",
                   help="f16: mixed precision (f16 activations and matmuls, f32 master weights and AdamW moments, "
                        "dynamic loss scaling)" + ("; bf16: refused (our shader compiler cannot compile bf16)"
                                                   if "bf16" in choices else ""))


def layer_count(args) -> int:
    """--layers as a count (a list of layer types is for --model mamba only)."""
    if not str(args.layers).isdigit() or int(args.layers) < 1:
        raise CliError(f"--layers {args.layers}: a layer count (a list of layer types is for --model mamba)")
    return int(args.layers)
