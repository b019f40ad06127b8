"""`evermind-vk generate`: a continuation of a prompt from a saved model: text through the byte tokenizer
(--prompt) where the vocabulary holds the bytes, token ids (--prompt-ids) for any text model, and for a media
package the tokens and the frames its codec decodes them to (--out)."""
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
from .common import NONNEG, NONNEG_INT, POS_INT, CliError, load_model
from .files import MODEL_HELP
from ..files import is_gguf
from .pretrained import cmd_generate_pretrained
from .video import write_frames

TEXT_MODELS = (TransformerLM, EvermindLM, HybridMambaModel)


def _ids(text: str) -> list[int]:
    """--prompt-ids 1,2,3 -> [1, 2, 3]."""
    try:
        ids = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise CliError(f"--prompt-ids {text!r}: comma-separated token ids, e.g. 1,2,3") from None
    if not ids or min(ids) < 0:
        raise CliError(f"--prompt-ids {text!r}: one or more non-negative token ids")
    return ids


def _prompt(args, vocab: int) -> tuple[list[int], bool]:
    """(prompt ids, whether they came from --prompt-ids) for a text model of `vocab` tokens."""
    if args.prompt_ids is not None:
        ids = _ids(args.prompt_ids)
        if max(ids) >= vocab:
            raise CliError(f"--prompt-ids: token id {max(ids)} is outside the vocabulary of {vocab}")
        return ids, True
    if vocab < 256:
        raise CliError(f"{args.model}: vocabulary of {vocab} does not hold the byte tokenizer's 256 byte values, "
                       f"so --prompt TEXT cannot be encoded: give token ids with --prompt-ids 1,2,3")
    return list(ByteTokenizer().encode("The " if args.prompt is None else args.prompt)), False


def _sample(model, ids: list[int], args) -> list[int]:
    """New ids from any text model with the command's sampling settings (top_k None or 0: all)."""
    if isinstance(model, HybridMambaModel):  # O(1) work per token from its recurrent state
        return model.generate(ids, max_new_tokens=args.tokens, temperature=args.temperature, top_k=args.top_k,
                              seed=args.seed)
    if isinstance(model, EvermindLM):
        return model.generate(ids, args.tokens, temperature=args.temperature, seed=args.seed or 1,
                              top_k=args.top_k or 0)
    return generate(model, ids, max_new_tokens=args.tokens, temperature=args.temperature, top_k=args.top_k,
                    seed=args.seed, top_p=args.top_p, repetition_penalty=args.repetition_penalty,
                    use_cache=not args.no_cache)


def _media(args, lm, codec) -> int:
    """A media package: tokens after --prompt-ids (default <vid> <key>), printed, and the decoded frames to --out."""
    if args.prompt is not None:
        raise CliError(f"{args.model} is a media package: give its prompt as token ids (--prompt-ids), not text")
    if not args.out:
        raise CliError(f"{args.model} is a media package: --out DIR (or OUT.png) receives the decoded frames")
    prompt = _ids(args.prompt_ids) if args.prompt_ids is not None else None
    if prompt is not None and max(prompt) >= codec.vocab_size:
        raise CliError(f"--prompt-ids: token id {max(prompt)} is outside the vocabulary of {codec.vocab_size}")
    toks, frames = codec.generate_video(lm, args.tokens, prompt, temperature=args.temperature,
                                        seed=args.seed or 1, top_k=args.top_k or 0)
    print(",".join(str(t) for t in (prompt or [codec.bos_video, codec.frame_key]) + toks))
    if not frames:
        raise FormatError(f"{args.model}: the generated tokens hold no frame")
    write_frames(frames, args.out)
    print(f"{len(toks)} tokens -> {len(frames)} frames {codec.width}x{codec.height}; wrote {args.out}",
          file=sys.stderr)
    return 0


def cmd_generate(args) -> int:
    """Stream a continuation of --prompt (through the byte tokenizer) to stdout, then the prefill and decode
    tokens/s (every text model type; --batch N continuations); or, with --prompt-ids, print the prompt and
    new token ids (EvermindLM and HybridMamba: their own builderforce samplers); or, for a media package,
    tokens and frames; a
    pretrained .gguf --model (or smollm2-135m) with its own tokenizer."""
    if is_gguf(args.model):
        return cmd_generate_pretrained(args)
    model = load_model(args.model, device=get_device(args.device), config=args.config)
    if isinstance(model, tuple):
        return _media(args, *model)
    if not isinstance(model, TEXT_MODELS):
        raise FormatError(f"{args.model} holds a {type(model).__name__}, which does not generate text")
    ids, as_ids = _prompt(args, model.config.vocab_size)
    if as_ids:
        print(",".join(str(t) for t in ids + list(_sample(model, ids, args))))
        return 0
    return _text(model, ids, args)


def _text(model, ids: list[int], args) -> int:
    """Any text model through train.generate (recorded decoding, the device sampler): the continuation
    streamed (--batch N: N continuations at once, printed one after another), then tokens/s of the
    prefill and of the decoding on stderr."""
    tok = ByteTokenizer()
    prompt = tok.decode(ids)
    stop = [int(x) for s in args.stop for x in tok.encode(s)[:1]]  # each --stop string: its first token
    if isinstance(model, HybridMambaModel) and model.config.eosId >= 0:
        stop.append(model.config.eosId)
    kw = dict(max_new_tokens=args.tokens, temperature=args.temperature, top_k=args.top_k, seed=args.seed,
              top_p=args.top_p, repetition_penalty=args.repetition_penalty, stop_tokens=stop,
              use_cache=not args.no_cache)
    stats: dict = {}
    t0 = time.perf_counter()
    if args.batch > 1:
        outs = generate(model, [ids] * args.batch, stats=stats, **kw)
        for i, out in enumerate(outs):
            print(f"--- {i + 1}/{args.batch} ---")
            print(prompt + tok.decode([t for t in out if t < 256]))
        n = sum(len(o) for o in outs)
    else:
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a byte at a time, multi-byte safe
        sys.stdout.write(prompt)
        sys.stdout.flush()

        def show(t):
            sys.stdout.write(dec.decode(bytes([t]) if 0 <= t < 256 else b""))
            sys.stdout.flush()
        n = len(generate(model, ids, on_token=show, stats=stats, **kw))
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
    p.add_argument("--model", default="runs/default",
                   help=MODEL_HELP + "; or a pretrained GGUF model: a .gguf file or smollm2-135m (its own tokenizer)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--prompt", default=None, help="text to continue (byte vocabularies; default 'The ')")
    g.add_argument("--prompt-ids", default=None, metavar="IDS",
                   help="token ids to continue, e.g. 1,2,3 (any vocabulary; prints the ids)")
    p.add_argument("--config", default=None,
                   help="a JSON config for builderforce's bare weight files (MBJS needs one; EVL0/MoE0 are checked)")
    p.add_argument("--out", default=None, help="media packages: a folder (or a .png strip) for the decoded frames")
    p.add_argument("--tokens", type=NONNEG_INT, default=200, help="tokens to generate")
    p.add_argument("--temperature", type=NONNEG, default=0.8, help="sampling temperature (0: greedy)")
    p.add_argument("--top-k", type=NONNEG_INT, default=20, help="sample among the k most likely (0: all)")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="sampling seed")
    add_device(p)
    p.add_argument("--top-p", type=NONNEG, default=None, help="nucleus sampling: keep this much probability mass")
    p.add_argument("--repetition-penalty", type=NONNEG, default=1.0, help="> 1 discourages repeated tokens")
    p.add_argument("--stop", action="append", default=[], help="stop at this character (repeatable)")
    p.add_argument("--no-cache", action="store_true", help="re-run the whole context per token (no KV cache)")
    p.add_argument("--batch", type=POS_INT, default=1,
                   help="sample this many continuations of the --prompt text at once")
    p.set_defaults(fn=cmd_generate)
