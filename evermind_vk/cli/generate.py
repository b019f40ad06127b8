"""`evermind-vk generate`: stream a continuation of a prompt from a saved model."""
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
from .common import NONNEG, NONNEG_INT, load_model
from .files import MODEL_HELP


def cmd_generate(args) -> int:
    """Stream a continuation of --prompt (text, through the byte tokenizer) to stdout, then tokens/s."""
    model = load_model(args.model, device=get_device(args.device))
    tok = ByteTokenizer()
    if isinstance(model, tuple):
        raise FormatError(f"{args.model} is a media package (EvermindLM + codec), not a text model")
    if isinstance(model, HybridMambaModel):  # O(1) work per token from its recurrent state
        out = model.generate(tok.encode(args.prompt), max_new_tokens=args.tokens, temperature=args.temperature,
                             top_k=args.top_k, seed=args.seed)
        print(args.prompt + tok.decode(out))
        return 0
    if isinstance(model, EvermindLM):
        if model.config.vocab_size < 256:
            raise FormatError(f"{args.model}: vocabulary of {model.config.vocab_size} is not the byte tokenizer's 256")
        out = model.generate(tok.encode(args.prompt), args.tokens, temperature=args.temperature, seed=args.seed or 1)
        print(args.prompt + tok.decode([t for t in out if t < 256]))
        return 0
    if not isinstance(model, TransformerLM):
        raise FormatError(f"{args.model} holds a {type(model).__name__}, which does not generate text")
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a byte at a time, multi-byte safe
    sys.stdout.write(args.prompt)
    sys.stdout.flush()

    def show(t):
        sys.stdout.write(dec.decode(bytes([t]) if 0 <= t < 256 else b""))
        sys.stdout.flush()

    stop = [int(x) for s in args.stop for x in tok.encode(s)[:1]]  # each --stop string: its first token
    t0 = time.perf_counter()
    out = generate(model, tok.encode(args.prompt), max_new_tokens=args.tokens, temperature=args.temperature,
                   top_k=args.top_k, seed=args.seed, top_p=args.top_p, repetition_penalty=args.repetition_penalty,
                   stop_tokens=stop, use_cache=not args.no_cache, on_token=show)
    dt = time.perf_counter() - t0
    sys.stdout.write(dec.decode(b"", final=True) + "\n")
    print(f"[{len(out)} tokens in {dt:.2f}s: {len(out) / max(dt, 1e-9):.1f} tokens/s"
          f"{', no KV cache' if args.no_cache else ''}]", file=sys.stderr)
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
    p.set_defaults(fn=cmd_generate)
