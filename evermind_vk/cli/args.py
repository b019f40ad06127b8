"""The argument groups that several commands share, declared once: the device, the training data, the
optimizer, the model's shape and the precision. `train` and `profile` build their parsers from these."""
from __future__ import annotations

import argparse

from ..files import is_gguf
from .common import FINITE, NONNEG, NONNEG_INT, POS_INT
from .models import MODELS

DEVICE_HELP = "index or name substring (default: EVERMIND_VK_DEVICE, else 0)"


def add_device(p) -> None:
    """--device: which Vulkan device runs the command."""
    p.add_argument("--device", default=None, help=DEVICE_HELP)


def add_data(p, text_help: str) -> None:
    """--text, --seq-len, --batch-size: what a training step reads (--text and --seq-len: text models)."""
    p.add_argument("--text", help=text_help)
    p.add_argument("--seq-len", type=POS_INT, default=None,
                   help="tokens (bytes) per training sequence (text models; default 64)")
    p.add_argument("--batch-size", type=POS_INT, default=8,
                   help="sequences (images) per step; for moe, batches of --batch-size x --seq-len byte pairs")


def add_optim(p) -> None:
    """--lr, --max-grad-norm: the optimizer's step."""
    p.add_argument("--lr", type=NONNEG, default=3e-3, help="AdamW learning rate")
    p.add_argument("--max-grad-norm", type=FINITE, default=1.0,
                   help="clip the gradient norm to this (<= 0: no clipping)")


def _model_kind(v: str) -> str:
    """--model of `train`: one of MODELS, or a pretrained model (a .gguf path or a packaged short name)."""
    if v in MODELS or is_gguf(v):
        return v
    raise argparse.ArgumentTypeError(f"invalid choice: {v!r} (choose from {', '.join(MODELS)}, "
                                     "a .gguf file or smollm2-135m)")


def add_model_shape(p, pretrained: bool = False) -> None:
    """--model and its shape: --d-model, --layers, --heads, --kv-heads, --d-ff (each refused for a model it
    does not apply to), --seed. pretrained: --model also takes a .gguf file or smollm2-135m."""
    if pretrained:
        p.add_argument("--model", type=_model_kind, default="lm", metavar="{" + ",".join(MODELS) + ",X.gguf,smollm2-135m}",
                       help="lm: our TransformerLM on text; evermind-lm / moe / mamba: builderforce's EvermindLM, "
                            "SharedExpertMoE (next-byte embedding pairs) and HybridMambaModel, written as .evermind; "
                            "conv-ae: a conv autoencoder on procedural images; a .gguf file or smollm2-135m: QLoRA "
                            "fine-tuning of that pretrained model (--lora-rank)")
    else:
        p.add_argument("--model", choices=MODELS, default="lm",
                       help="lm: our TransformerLM on text; evermind-lm / moe / mamba: builderforce's EvermindLM, "
                            "SharedExpertMoE (next-byte embedding pairs) and HybridMambaModel, written as .evermind; "
                            "conv-ae: a conv autoencoder on procedural images")
    p.add_argument("--d-model", type=POS_INT, default=None, help="model width (text models; default 64)")
    p.add_argument("--layers", default=None,
                   help="layer count (lm, evermind-lm, mamba; default 2); for --model mamba also a list of layer "
                        "types, e.g. mamba1,mamba2,attention")
    p.add_argument("--heads", type=POS_INT, default=None, help="attention heads (lm, mamba; default 4)")
    p.add_argument("--kv-heads", type=POS_INT, default=None,
                   help="key/value heads, grouped-query attention (lm; default 2)")
    p.add_argument("--d-ff", type=POS_INT, default=None,
                   help="MLP / expert hidden width (lm, evermind-lm, moe; default 128)")
    p.add_argument("--images", type=POS_INT, default=None, help="conv-ae: training images (default 256)")
    p.add_argument("--image-size", type=POS_INT, default=None, help="conv-ae: image side, a multiple of 4 (default 16)")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="initialisation and data-order seed")


def add_checkpoint_layers(p) -> None:
    """--checkpoint-layers: activation checkpointing in the recorded step (lm, evermind-lm, mamba)."""
    p.add_argument("--checkpoint-layers", type=NONNEG_INT, nargs="?", const=1, default=None, metavar="K",
                   help="activation checkpointing (lm, evermind-lm, mamba): recompute every K-th layer in the backward "
                        "instead of keeping its activations (alone: every layer; 0: off, the default): less device "
                        "memory, the same gradients, about one more forward of compute")


def add_precision(p, choices=("f32", "f16", "bf16")) -> None:
    """--precision: f32, or mixed precision where the model's ops support it."""
    p.add_argument("--precision", choices=choices, default="f32",
                   help="f16: mixed precision (f16 activations and matmuls, f32 master weights and AdamW moments, "
                        "dynamic loss scaling)" + ("; bf16: refused (our shader compiler cannot compile bf16)"
                                                   if "bf16" in choices else ""))
