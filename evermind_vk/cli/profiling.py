"""`evermind-vk profile --model ...`: GPU time per kernel variant of one recorded training step (--generate:
of generation's recorded decode step)."""
from __future__ import annotations

import argparse

import numpy as np

from ..runtime import get_device
from ..runtime.profiler import profile
from ..runtime.select import decode as select_decode
from ..train import Trainer, decode, generate
from ..train.decode import decoder
from . import models
from .args import add_checkpoint_layers, add_data, add_device, add_model_shape, add_optim, add_precision
from .common import POS_INT, CliError
from .train import check_flags

UNITS = {"tokens": "tokens", "pairs": "byte pairs", "images": "images"}


def cmd_profile(args) -> int:
    """Record one training step of --model (the `train` model flags), then print GPU time per kernel
    variant from Vulkan timestamps and the host time per step (evermind_vk.runtime.profiler)."""
    args.package = False
    check_flags(args)
    if args.chain > 1 and not args.generate:
        raise CliError("--chain profiles a replay of several decode steps: it needs --generate")
    dev = get_device(args.device)
    model = models.build(args, dev)
    if args.generate:
        return _profile_decode(model, args)
    data = models.load_data(args)
    trainer = Trainer(model, seed=args.seed, precision=args.precision, checkpoint_layers=args.checkpoint_layers)
    try:
        source = trainer.source(data.train, args.seq_len)
    except ValueError as e:
        raise CliError(f"--model {args.model}: {e}") from e
    rows = models.rows_per_batch(args)
    trainer.train(source, epochs=1, batch_size=rows, lr=args.lr, max_grad_norm=args.max_grad_norm,
                  max_steps=1)  # records the step and runs it (pipelines built)
    prog = trainer.recorded_program("train")
    prof = profile(prog, repeats=args.repeats, serialize=args.serialize)
    units = rows * (args.seq_len if model.data_kind == "tokens" else 1)
    what = UNITS[model.data_kind]
    shape = f"{args.batch_size} x {args.seq_len} tokens" if model.data_kind == "tokens" else f"{rows} {what}"
    ckpt = f", activation checkpointing every {args.checkpoint_layers} layer(s)" if args.checkpoint_layers else ""
    print(f"one training step of --model {args.model} ({args.precision}{ckpt}): {model.num_parameters():,} parameters, "
          f"batch {shape}, {len(prog)} operations, one submit")
    _print_tables(prof, args)
    print(f"throughput: {units / (prof.host_ms / 1e3):,.0f} {what}/s (host time), "
          f"{units / (prof.gpu_ms / 1e3):,.0f} {what}/s (GPU time)")
    return 0


def _print_tables(prof, args) -> None:
    """The profile's table by kernel variant, and with --by-shape N its N costliest (variant, launch) pairs."""
    print(prof.table())
    if args.by_shape:
        print()
        print(prof.table(by="shape", top=args.by_shape))


def _profile_decode(model, args) -> int:
    """Record generation's decode step for --batch-size random prompts of --seq-len tokens, then print GPU
    time per kernel variant of one step (it replays at the same positions)."""
    if not decode.supports(model):
        raise CliError(f"--generate: --model {args.model} is not a text model")
    V, B = model.config.vocab_size, args.batch_size
    K = select_decode.chain_floor(args.chain)  # --chain rounded down to a power of two, as the decoder rounds it
    limit = getattr(model.config, "max_seq_len", None) or args.seq_len + K + 3
    P = max(1, min(args.seq_len, limit - K - 3))
    rng = np.random.default_rng(args.seed)
    prompts = [rng.integers(0, V, P).tolist() for _ in range(B)]
    stats: dict = {}
    outs = generate(model, prompts, max_new_tokens=3, stats=stats)  # records the prefill and the decode step
    dec = decoder(model, B)
    prog = dec.step_program()
    if prog is None:  # every decoder records its step on the first decoded token
        raise CliError(f"--generate: --model {args.model}: generating 3 tokens recorded no decode step")
    what = "one decode step"
    if K > 1:  # a replay of K steps (records and runs it once; the replays below repeat the same positions)
        dec.advance_chain([p + o for p, o in zip(prompts, outs)], [True] * B, 3, K)
        prog, what = dec.chain_program(K), f"one replay of {K} decode steps (--chain)"
    prof = profile(prog, repeats=args.repeats, serialize=args.serialize)
    print(f"{what} of --model {args.model}: {model.num_parameters():,} parameters, batch {B} at position "
          f"{P + 1}, {len(prog)} operations, one submit")
    _print_tables(prof, args)
    print(f"decode: {B * K / (prof.host_ms / 1e3):,.0f} tokens/s (host time), {B * K / (prof.gpu_ms / 1e3):,.0f} tokens/s "
          f"(GPU time); prefill of {stats['prefill_tokens']} tokens: "
          f"{stats['prefill_tokens'] / max(stats['prefill_s'], 1e-9):,.0f} tokens/s (first run, includes recording)")
    return 0


def add_parser(sub) -> None:
    """The `profile` subcommand."""
    p = sub.add_parser("profile", help="GPU time per kernel variant of one recorded training step",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_data(p, "a UTF-8 text file for the sample batch (default: the embedded corpus; text models)")
    add_optim(p)
    add_model_shape(p)
    p.add_argument("--repeats", type=POS_INT, default=3, help="timed runs of the step (median per operation)")
    p.add_argument("--serialize", action="store_true",
                   help="time each kernel with a barrier before every dispatch (clean per-kernel times; the "
                        "recorded step lets independent dispatches overlap)")
    add_precision(p, choices=("f32", "f16"))
    p.add_argument("--generate", action="store_true",
                   help="profile generation's recorded decode step instead (--batch-size prompts of --seq-len tokens)")
    p.add_argument("--chain", type=POS_INT, default=1, metavar="K",
                   help="with --generate: profile one replay of K decode steps (EVERMIND_VK_DECODE_CHAIN=K's program; "
                        "K rounded down to a power of two)")
    add_checkpoint_layers(p)
    p.add_argument("--by-shape", type=POS_INT, default=0, metavar="N",
                   help="also print the N costliest (kernel variant, launch sizes) pairs: which products cost what")
    add_device(p)
    p.set_defaults(fn=cmd_profile)
