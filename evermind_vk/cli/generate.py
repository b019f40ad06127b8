"""`evermind-vk generate`: stream a continuation of a prompt from a saved model (any text model type)."""
from __future__ import annotations

import argparse
import codecs
import sys
import time

from ..errors import FormatError
from ..models import EvermindLM, HybridMambaModel, TransformerLM
from ..runtime import get_device
from ..train import ByteTokenizer, generate
from .args import add_device
from .common import NONNEG, NONNEG_INT, POS_INT, load_model
from .files import MODEL_HELP


def cmd_generate(args) -> int:
    """Stream a continuation of --prompt (text, through the byte tokenizer) to stdout (--batch N: N
    continuations at once, printed one after another), then the prefill and decode tokens/s on stderr."""
    model = load_model(args.model, device=get_device(args.device))
    tok = ByteTokenizer()
    if isinstance(model, tuple):
        raise FormatError(f"{args.model} is a media package (EvermindLM + codec), not a text model")
    if not isinstance(model, (TransformerLM, EvermindLM, HybridMambaModel)):
        raise FormatError(f"{args.model} holds a {type(model).__name__}, which does not generate text")
    if model.config.vocab_size < 256:
        raise FormatError(f"{args.model}: vocabulary of {model.config.vocab_size} is not the byte tokenizer's 256")
    stop = [int(x) for s in args.stop for x in tok.encode(s)[:1]]  # each --stop string: its first token
    if isinstance(model, HybridMambaModel) and model.config.eosId >= 0:
        stop.append(model.config.eosId)
    kw = dict(max_new_tokens=args.tokens, temperature=args.temperature, top_k=args.top_k, seed=args.seed,
              top_p=args.top_p, repetition_penalty=args.repetition_penalty, stop_tokens=stop,
              use_cache=not args.no_cache)
    stats: dict = {}
    t0 = time.perf_counter()
    if args.batch > 1:
        outs = generate(model, [tok.encode(args.prompt)] * args.batch, stats=stats, **kw)
        for i, out in enumerate(outs):
            print(f"--- {i + 1}/{args.batch} ---")
            print(args.prompt + tok.decode([t for t in out if t < 256]))
        n = sum(len(o) for o in outs)
    else:
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a byte at a time, multi-byte safe
        sys.stdout.write(args.prompt)
        sys.stdout.flush()

        def show(t):
            sys.stdout.write(dec.decode(bytes([t]) if 0 <= t < 256 else b""))
            sys.stdout.flush()
        n = len(generate(model, tok.encode(args.prompt), on_token=show, stats=stats, **kw))
        sys.stdout.write(dec.decode(b"", final=True) + "\n")
    dt = time.perf_counter() - t0
    rate = lambda k: stats[k + "_tokens"] / stats[k + "_s"] if stats[k + "_s"] > 0 else 0.0  # noqa: E731
    print(f"[{n} tokens in {dt:.2f}s: {n / max(dt, 1e-9):.1f} tokens/s; prefill {stats['prefill_tokens']} tokens "
          f"at {rate('prefill'):.1f} tokens/s, decode {rate('decode'):.1f} tokens/s"
          f"{', batch ' + str(args.batch) if args.batch > 1 else ''}{', no KV cache' if args.no_cache else ''}]",
          file=sys.stderr)
    return 0


def add_parser(sub) -> None:
    """The `generate` subcommand."""
    p = sub.add_parser("generate", help="sample from a saved model", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="runs/default", help=MODEL_HELP)
    p.add_argument("--prompt", default="The ", help="text to continue")
    p.add_argument("--tokens", type=NONNEG_INT, default=200, help="tokens (bytes) to generate")
    p.add_argument("--temperature", type=NONNEG, default=0.8, help="sampling temperature (0: greedy)")
    p.add_argument("--top-k", type=NONNEG_INT, default=20, help="sample among the k most likely (0: all)")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="sampling seed")
    add_device(p)
    p.add_argument("--top-p", type=NONNEG, default=None, help="nucleus sampling: keep this much probability mass")
    p.add_argument("--repetition-penalty", type=NONNEG, default=1.0, help="> 1 discourages repeated tokens")
    p.add_argument("--stop", action="append", default=[], help="stop at this character (repeatable)")
    p.add_argument("--no-cache", action="store_true", help="re-run the whole context per token (no KV cache)")
    p.add_argument("--batch", type=POS_INT, default=1, help="sample this many continuations of the prompt at once")
    p.set_defaults(fn=cmd_generate)
