"""`evermind-vk profile --model ...`: GPU time per kernel variant of one recorded training step."""
from __future__ import annotations

import argparse

from ..runtime import get_device
from ..runtime.profiler import profile
from ..train import Trainer
from . import models
from .args import add_data, add_device, add_model_shape, add_optim, add_precision
from .common import POS_INT, CliError
from .train import check_flags

UNITS = {"tokens": "tokens", "pairs": "byte pairs", "images": "images"}


def cmd_profile(args) -> int:
    """Record one training step of --model (the `train` model flags), then print GPU time per kernel
    variant from Vulkan timestamps and the host time per step (evermind_vk.runtime.profiler)."""
    args.package = False
    check_flags(args)
    dev = get_device(args.device)
    model = models.build(args, dev)
    data = models.load_data(args)
    trainer = Trainer(model, seed=args.seed, precision=args.precision)
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
    print(f"one training step of --model {args.model} ({args.precision}): {model.num_parameters():,} parameters, "
          f"batch {shape}, {len(prog)} operations, one submit")
    print(prof.table())
    if args.by_shape:
        print()
        print(prof.table(by="shape", top=args.by_shape))
    print(f"throughput: {units / (prof.host_ms / 1e3):,.0f} {what}/s (host time), "
          f"{units / (prof.gpu_ms / 1e3):,.0f} {what}/s (GPU time)")
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
    p.add_argument("--by-shape", type=POS_INT, default=0, metavar="N",
                   help="also print the N costliest (kernel variant, launch sizes) pairs: which products cost what")
    add_device(p)
    p.set_defaults(fn=cmd_profile)
