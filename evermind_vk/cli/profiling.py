"""`evermind-vk profile`: GPU time per kernel variant of one recorded training step (--generate: of
generation's recorded decode step)."""
from __future__ import annotations

import argparse

from ..models import LMConfig, TransformerLM
from ..runtime import get_device
from ..runtime.profiler import profile
from ..train import ByteTokenizer, Trainer, default_corpus, generate
from ..train.decode import decoder
from .args import add_data, add_device, add_model_shape, add_optim, add_precision, layer_count
from .common import POS_INT, read_text


def cmd_profile(args) -> int:
    """Record one training step of a TransformerLM (the `train` model flags), then print GPU time per
    kernel variant from Vulkan timestamps and the host time per step (evermind_vk.runtime.profiler)."""
    layers = layer_count(args)
    dev = get_device(args.device)
    cfg = LMConfig(d_model=args.d_model, n_layers=layers, n_heads=args.heads, n_kv_heads=args.kv_heads,
                   d_ff=args.d_ff, max_seq_len=max(args.seq_len, 64), seed=args.seed)
    model = TransformerLM(cfg, device=dev)
    if args.generate:
        return _profile_decode(model, args)
    tok = ByteTokenizer()
    need = args.batch_size * (args.seq_len + 1) * 2
    text = read_text(args.text) if args.text else default_corpus()
    ids = tok.encode(text)[:need]
    trainer = Trainer(model, tok, seed=args.seed, precision=args.precision)
    trainer.train(ids, epochs=1, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                  max_grad_norm=args.max_grad_norm)  # records the step and runs it (pipelines built)
    prog = trainer.step_program(args.seq_len, args.batch_size, args.max_grad_norm)
    prof = profile(prog, repeats=args.repeats, serialize=args.serialize)
    tokens = args.batch_size * args.seq_len
    print(f"one training step ({args.precision}): {model.num_parameters():,} parameters, batch {args.batch_size} x "
          f"{args.seq_len} tokens, {len(prog)} operations, one submit")
    print(prof.table())
    if args.by_shape:
        print()
        print(prof.table(by="shape", top=args.by_shape))
    print(f"throughput: {tokens / (prof.host_ms / 1e3):,.0f} tokens/s (host time), "
          f"{tokens / (prof.gpu_ms / 1e3):,.0f} tokens/s (GPU time)")
    return 0



def _profile_decode(model, args) -> int:
    """Record the decode step of `generate` for --batch-size prompts of --seq-len tokens, then print GPU
    time per kernel variant of one step (the step replays at the same positions)."""
    tok = ByteTokenizer()
    text = read_text(args.text) if args.text else default_corpus()
    ids = tok.encode(text)
    P = min(args.seq_len, model.config.max_seq_len - 2)
    prompts = [ids[b * P:(b + 1) * P] for b in range(args.batch_size)]
    stats: dict = {}
    generate(model, prompts, max_new_tokens=3, stats=stats)  # records the prefill and the decode step
    prog = decoder(model, args.batch_size)._step[0]
    prof = profile(prog, repeats=args.repeats, serialize=args.serialize)
    print(f"one decode step: {model.num_parameters():,} parameters, batch {args.batch_size} at position {P + 1}, "
          f"{len(prog)} operations, one submit")
    print(prof.table())
    if args.by_shape:
        print()
        print(prof.table(by="shape", top=args.by_shape))
    B = args.batch_size
    print(f"decode: {B / (prof.host_ms / 1e3):,.0f} tokens/s (host time), {B / (prof.gpu_ms / 1e3):,.0f} tokens/s "
          f"(GPU time); prefill of {stats['prefill_tokens']} tokens: "
          f"{stats['prefill_tokens'] / max(stats['prefill_s'], 1e-9):,.0f} tokens/s (first run, includes recording)")
    return 0


def add_parser(sub) -> None:
    """The `profile` subcommand."""
    p = sub.add_parser("profile", help="GPU time per kernel variant of one recorded training step",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_data(p, "a UTF-8 text file for the sample batch (default: the embedded corpus)")
    add_optim(p)
    add_model_shape(p)
    p.add_argument("--repeats", type=POS_INT, default=3, help="timed runs of the step (median per operation)")
    p.add_argument("--serialize", action="store_true",
                   help="time each kernel with a barrier before every dispatch (clean per-kernel times; the "
                        "recorded step lets independent dispatches overlap)")
    add_precision(p, choices=("f32", "f16"))
    p.add_argument("--generate", action="store_true",
                   help="profile generation's recorded decode step instead (--batch-size prompts of --seq-len tokens)")
    p.add_argument("--by-shape", type=POS_INT, default=0, metavar="N",
                   help="also print the N costliest (kernel variant, launch sizes) pairs: which products cost what")
    add_device(p)
    p.set_defaults(fn=cmd_profile)
