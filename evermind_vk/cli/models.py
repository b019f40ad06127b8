"""The model types the command line trains (`--model`): for each, which flags apply, how its model is
built from them, its data, its weights file, its held-out metric and its sample. `train` and `profile`
both read this table, so every model type gets every command-line feature the same way."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import EvermindError
from ..files import conv_ae_config_json, export_safetensors, lm_param_shapes, save_conv_ae
from ..io.layouts import evl_shapes
from ..io.package import EvermindPackage
from ..models.conv_ae import param_shapes as conv_ae_param_shapes
from ..models.mamba import layer_param_shapes
from ..models import (ConvAE, ConvAEConfig, EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel,
                      LMConfig, MoEConfig, SharedExpertMoE, TransformerLM)
from ..train import ByteTokenizer, default_corpus, generate, shapes_dataset
from ..train.data import EmbeddingPairSource
from .common import HELD_OUT, HELD_OUT_MAX, CliError, read_text

MODELS = ("lm", "evermind-lm", "moe", "mamba", "conv-ae")
TEXT_MODELS = ("lm", "evermind-lm", "moe", "mamba")
GENERATIVE = ("lm", "evermind-lm", "mamba")
MOE_EXPERTS, MOE_TOP_K, MOE_TABLE_SEED = 8, 2, 1234
HELD_OUT_IMAGES = 16

# Flags that apply to some model types only: dest -> (default, the types it applies to). Each defaults to
# None on the parser, so a flag given for a model it cannot apply to is refused, never ignored.
MODEL_FLAGS = {
    "text": (None, TEXT_MODELS),
    "seq_len": (64, TEXT_MODELS),
    "d_model": (64, TEXT_MODELS),
    "layers": ("2", ("lm", "evermind-lm", "mamba")),
    "heads": (4, ("lm", "mamba")),
    "kv_heads": (2, ("lm",)),
    "d_ff": (128, ("lm", "evermind-lm", "moe")),
    "images": (256, ("conv-ae",)),
    "image_size": (16, ("conv-ae",)),
    "prompt": ("The ", GENERATIVE),
    "sample_tokens": (60, GENERATIVE),
    "checkpoint_layers": (0, ("lm", "evermind-lm", "mamba")),  # the models with activation checkpointing
}


def resolve_model_flags(args) -> None:
    """Refuse a model-specific flag given for a model it does not apply to; fill in the defaults."""
    for dest, (default, models) in MODEL_FLAGS.items():
        if not hasattr(args, dest):
            continue
        if getattr(args, dest) is not None and args.model not in models:
            flag = "--" + dest.replace("_", "-")
            raise CliError(f"{flag} does not apply to --model {args.model} (it is for --model {', '.join(models)})")
        if getattr(args, dest) is None and default is not None:
            setattr(args, dest, default)


def _layer_count(args) -> int:
    if not str(args.layers).isdigit() or int(args.layers) < 1:
        raise CliError(f"--layers {args.layers}: a layer count (a list of layer types is for --model mamba)")
    return int(args.layers)


def _mamba_config(args) -> HybridMambaConfig:
    """--model mamba's config: --layers a count of mamba1 layers or a list of layer types."""
    spec = str(args.layers)
    layers = ("mamba1",) * int(spec) if spec.isdigit() else tuple(t.strip() for t in spec.split(",") if t.strip())
    try:
        return HybridMambaConfig(vocabSize=256, dModel=args.d_model, numLayers=len(layers), layers=layers,
                                 nHeads=args.heads, seed=args.seed)
    except (TypeError, ValueError) as e:
        raise CliError(f"--layers {spec}: {e}") from e


def _conv_ae_config(args) -> ConvAEConfig:
    """--model conv-ae's config."""
    return ConvAEConfig(image_size=args.image_size, seed=args.seed)


def param_shapes(args) -> dict | None:
    """{name: shape} of the weights the flags imply, computed without building anything (for the capacity
    check before training); None for flags the model would refuse (build() says why)."""
    try:
        if args.model == "lm":
            return lm_param_shapes(LMConfig(d_model=args.d_model, n_layers=_layer_count(args), n_heads=args.heads,
                                            n_kv_heads=args.kv_heads, d_ff=args.d_ff,
                                            max_seq_len=max(args.seq_len, 64), seed=args.seed))
        if args.model == "evermind-lm":
            c = EvermindLMConfig(256, args.d_model, _layer_count(args), 3, args.d_ff, seed=args.seed)
            return dict(evl_shapes(c.vocab_size, c.d_model, c.num_layers, c.conv_kernel, c.hidden_dim, c.num_experts))
        if args.model == "moe":
            d, h = args.d_model, args.d_ff
            out = {"wr": (MOE_EXPERTS, d)}
            for e in range(MOE_EXPERTS + 1):  # the shared expert and the routed ones
                out.update({f"e{e}.w1": (h, d), f"e{e}.b1": (h,), f"e{e}.w2": (d, h), f"e{e}.b2": (d,)})
            return out
        if args.model == "mamba":
            cfg = _mamba_config(args)
            out = {"embedding": (cfg.vocabSize, cfg.dModel), "final_norm": (cfg.dModel,)}
            for i, kind in enumerate(cfg.layers):
                out.update({f"layer{i}.{name}": shape for name, shape, _ in layer_param_shapes(cfg, kind)})
            return out
        if args.model == "conv-ae":
            return conv_ae_param_shapes(_conv_ae_config(args))
    except (ValueError, TypeError, EvermindError):
        return None
    return None


def build(args, device):
    """The model the flags describe (ConfigError-type problems become one CliError line)."""
    try:
        if args.model == "lm":
            return TransformerLM(LMConfig(d_model=args.d_model, n_layers=_layer_count(args), n_heads=args.heads,
                                          n_kv_heads=args.kv_heads, d_ff=args.d_ff,
                                          max_seq_len=max(args.seq_len, 64), seed=args.seed), device=device)
        if args.model == "evermind-lm":
            return EvermindLM(EvermindLMConfig(256, args.d_model, _layer_count(args), 3, args.d_ff, seed=args.seed),
                              device=device)
        if args.model == "moe":
            return SharedExpertMoE(MoEConfig(args.d_model, args.d_ff, MOE_EXPERTS, MOE_TOP_K, seed=args.seed),
                                   device=device)
        if args.model == "mamba":
            return HybridMambaModel(_mamba_config(args), device=device)
        return ConvAE(_conv_ae_config(args), device=device)
    except ValueError as e:
        if isinstance(e, CliError):
            raise
        raise CliError(f"--model {args.model}: {e}") from e


@dataclass
class RunData:
    """A run's training data, its held-out part (None if too short) and how to describe them."""

    train: object
    held: object
    describe: str
    metric: str  # the held-out line's words: "perplexity", "loss" or "MSE"
    units: str  # what a step's count counts: tokens, pairs or images


def _text_ids(args) -> np.ndarray:
    text = read_text(args.text) if args.text else default_corpus()
    ids = np.asarray(ByteTokenizer().encode(text))
    if ids.size < 2:
        raise CliError(f"--text {args.text}: {ids.size} bytes; need at least 2 (one next-token pair)"
                       if args.text else "the embedded corpus is empty")
    return ids


def load_data(args) -> RunData:
    """The data of --model: text (byte ids; byte pairs as embedding rows for moe) or procedural images."""
    if args.model == "conv-ae":
        imgs = shapes_dataset(args.images + HELD_OUT_IMAGES, args.image_size, 3, seed=args.seed)
        return RunData(imgs[:args.images], imgs[args.images:],
                       f"{args.images} procedural {args.image_size}x{args.image_size} RGB images (seed {args.seed}); "
                       f"{HELD_OUT_IMAGES} more held out", "MSE", "images")
    ids = _text_ids(args)
    n_held = min(int(ids.size * HELD_OUT), HELD_OUT_MAX) if ids.size >= 40 else 0
    train_ids, held = (ids[:-n_held], ids[-n_held:]) if n_held >= 2 else (ids, None)
    where = f"--text {args.text}" if args.text else "embedded default: Python stdlib docstrings"
    cut = f"last {held.size:,} held out" if held is not None else "too short to hold any out"
    describe = f"{ids.size:,} bytes ({where}; {cut})"
    if args.model != "moe":
        return RunData(train_ids, held, describe, "perplexity", "tokens")
    # the MoE maps a byte's embedding to the next byte's: rows of a fixed seeded table
    table = np.random.default_rng(MOE_TABLE_SEED).standard_normal((256, args.d_model)).astype(np.float32)
    return RunData(EmbeddingPairSource(train_ids, table), None if held is None else EmbeddingPairSource(held, table),
                   describe + " as next-byte embedding pairs", "loss", "pairs")


def rows_per_batch(args) -> int:
    """Rows of one batch: --batch-size sequences (images), or for moe --batch-size x --seq-len byte pairs."""
    return args.batch_size * args.seq_len if args.model == "moe" else args.batch_size


def weights_file(model_name: str) -> str:
    """The file a trained model is written to, in its natural format."""
    return {"lm": "model.safetensors", "conv-ae": "model.npz"}.get(model_name, "model.evermind")


def outputs(args) -> list[str]:
    """Every file a run writes under --out (checked before training)."""
    names = [weights_file(args.model), "config.json", "loss.png", "losses.csv"]
    if args.model == "conv-ae":
        names.append("reconstructions.png")
    if args.package and args.model in ("lm", "conv-ae"):
        names.append("model.evermind")
    return names


def write_weights(args, model, out: str) -> None:
    """The weights in the model's natural format (and the .evermind package with --package)."""
    path = os.path.join(out, weights_file(args.model))
    if args.model == "lm":
        export_safetensors(model, path)
        if args.package:
            EvermindPackage.from_model(model, "evermind-lm", card={"description": "an evermind-vk TransformerLM"}
                                       ).to_file(os.path.join(out, "model.evermind"))
    elif args.model == "conv-ae":  # model.npz + config.json (model_type "conv-ae")
        save_conv_ae(model, path)
        if args.package:
            EvermindPackage.from_model(model, "evermind-conv-ae", card={"description": "an evermind-vk ConvAE"}
                                       ).to_file(os.path.join(out, "model.evermind"))
    else:  # builderforce's model types: the .evermind package is their format
        EvermindPackage.from_model(model, name=f"evermind-vk-{args.model}", version="1.0.0").to_file(path)


def config_json(model) -> dict:
    """config.json's content: the config's fields (a ConvAE's also "model_type": "conv-ae", since its
    model.npz holds the weights alone and is read with the config.json beside it)."""
    return conv_ae_config_json(model) if isinstance(model, ConvAE) else model.config.to_dict()


def sample(args, model) -> str | None:
    """A short continuation of --prompt from a generative model, else None."""
    if args.model not in GENERATIVE:
        return None
    tok = ByteTokenizer()
    ids = tok.encode(args.prompt)
    if args.model == "evermind-lm":  # builderforce's sampler, as its trainer samples
        out = model.generate(ids or [0], args.sample_tokens, temperature=0.8, seed=args.seed + 1)
    else:  # recorded decoding with the device sampler (a HybridMambaModel stops at its eosId)
        stop = [model.config.eosId] if args.model == "mamba" and model.config.eosId >= 0 else []
        out = generate(model, ids or [0], max_new_tokens=args.sample_tokens, temperature=0.8, top_k=20,
                       seed=args.seed, stop_tokens=stop)
    return args.prompt + tok.decode([t for t in out if 0 <= t < 256])
