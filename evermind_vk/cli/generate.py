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
from .common import NONNEG, NONNEG_INT, POS_INT, CliError, load_model, parse_ids, print_continuations, report_rates
from .files import MODEL_HELP
from ..files import is_gguf
from .pretrained import cmd_generate_pretrained
from .video import write_frames

TEXT_MODELS = (TransformerLM, EvermindLM, HybridMambaModel)


def _prompt(args, vocab: int) -> tuple[list[int], bool]:
    """(prompt ids, whether they came from --prompt-ids) for a text model of `vocab` tokens."""
    if args.prompt_ids is not None:
        return parse_ids(args.prompt_ids, vocab=vocab), True
    if vocab < 256:
        raise CliError(f"{args.model}: vocabulary of {vocab} does not hold the byte tokenizer's 256 byte values, "
                       f"so --prompt TEXT cannot be encoded: give token ids with --prompt-ids 1,2,3")
    return list(ByteTokenizer().encode("The " if args.prompt is None else args.prompt)), False


def _sampler(args, model, as_ids: bool) -> str:
    """--sampler: "builderforce" (EvermindLM.generate: builderforce's argmax and seeded draws, a forward of the
    context per token) or "device" (train.generate: recorded decoding, the device sampler, every flag). auto:
    builderforce's for an EvermindLM given --prompt-ids (its numbers, as builderforce's generate gives them),
    else the device's. The flags builderforce's sampler has no counterpart for are refused, not ignored."""
    if args.sampler == "auto":
        return "builderforce" if as_ids and isinstance(model, EvermindLM) else "device"
    if args.sampler == "builderforce":
        if not isinstance(model, EvermindLM):
            raise CliError(f"--sampler builderforce: builderforce's sampler is EvermindLM's, not a "
                           f"{type(model).__name__}'s (use --sampler device)")
    return args.sampler


def _refuse_for_builderforce(args, what: str, stop_ids: int = 1, extra=()) -> None:
    """The flags builderforce's sampler has no counterpart for (more than `stop_ids` stop ids among them, and
    `extra`'s (flag, given) pairs), refused by name."""
    unsupported = [f for f, on in (("--top-p", args.top_p is not None),
                                   ("--repetition-penalty", args.repetition_penalty != 1.0),
                                   ("--batch", args.batch > 1), ("--stop", bool(args.stop)),
                                   ("--stop-ids" if not stop_ids else "several --stop-ids",
                                    len(args.stop_ids or []) > stop_ids), *extra) if on]
    if unsupported:
        raise CliError(f"{', '.join(unsupported)}: {what} has no such setting")


def _builderforce_sample(model, ids: list[int], args) -> list[int]:
    """EvermindLM.generate with the command's settings; the flags it has no counterpart for are refused."""
    _refuse_for_builderforce(args, "builderforce's sampler (EvermindLM with --prompt-ids; --sampler device runs "
                                   "recorded decoding with the device sampler)")
    stop = args.stop_ids[0] if args.stop_ids else None
    return model.generate(ids, args.tokens, temperature=args.temperature, seed=args.seed or 1,
                          top_k=args.top_k or 0, stop_token=stop)


def _media(args, lm, codec) -> int:
    """A media package: tokens after --prompt-ids (default <vid> <key>), printed, and the decoded frames to --out."""
    if args.prompt is not None:
        raise CliError(f"{args.model} is a media package: give its prompt as token ids (--prompt-ids), not text")
    if not args.out:
        raise CliError(f"{args.model} is a media package: --out DIR (or OUT.png) receives the decoded frames")
    args.stop_ids = None if args.stop_ids is None else parse_ids(args.stop_ids, "--stop-ids")
    _refuse_for_builderforce(args, "a media package's generation (builderforce's sampler, up to </vid>)", 0,
                             (("--sampler device", args.sampler == "device"),))
    prompt = parse_ids(args.prompt_ids, vocab=codec.vocab_size) if args.prompt_ids is not None else None
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
    new token ids (--sampler: an EvermindLM's through builderforce's sampler by default); or, for a media package,
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
    args.stop_ids = None if args.stop_ids is None else parse_ids(args.stop_ids, "--stop-ids", model.config.vocab_size)
    if as_ids and args.stop:
        raise CliError("--stop takes characters of a --prompt text; with --prompt-ids give --stop-ids")
    if _sampler(args, model, as_ids) == "builderforce":
        out = list(_builderforce_sample(model, ids, args))
        print(",".join(str(t) for t in ids + out) if as_ids else ByteTokenizer().decode([t for t in ids + out if t < 256]))
        return 0
    return _text(model, ids, args, as_ids)


def _text(model, ids: list[int], args, as_ids: bool = False) -> int:
    """Any text model through train.generate (recorded decoding, the device sampler): the continuation
    streamed (--batch N: N continuations at once, printed one after another; with --prompt-ids, the prompt's
    and the new ids comma-separated, a line a continuation), then tokens/s of the prefill and of the decoding
    on stderr."""
    tok = ByteTokenizer()
    stop = [int(x) for s in args.stop for x in tok.encode(s)[:1]]  # each --stop string: its first token
    stop += list(args.stop_ids or [])
    if isinstance(model, HybridMambaModel) and model.config.eosId >= 0:
        stop.append(model.config.eosId)
    kw = dict(max_new_tokens=args.tokens, temperature=args.temperature, top_k=args.top_k, seed=args.seed,
              top_p=args.top_p, repetition_penalty=args.repetition_penalty, stop_tokens=stop,
              use_cache=not args.no_cache)
    stats: dict = {}
    t0 = time.perf_counter()
    prompt = tok.decode(ids)
    if as_ids:
        outs = generate(model, [ids] * args.batch, stats=stats, **kw)
        for out in outs:
            print(",".join(str(t) for t in ids + list(out)))
        n = sum(len(o) for o in outs)
    elif args.batch > 1:
        n = print_continuations(generate(model, [ids] * args.batch, stats=stats, **kw),
                                lambda out: prompt + tok.decode([t for t in out if t < 256]))
    else:
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a byte at a time, multi-byte safe
        sys.stdout.write(prompt)
        sys.stdout.flush()

        def show(t):
            sys.stdout.write(dec.decode(bytes([t]) if 0 <= t < 256 else b""))
            sys.stdout.flush()
        n = len(generate(model, ids, on_token=show, stats=stats, **kw))
        sys.stdout.write(dec.decode(b"", final=True) + "\n")
    report_rates(n, time.perf_counter() - t0, stats, args)
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
    p.add_argument("--stop", action="append", default=[], help="stop at this character (repeatable; --prompt text)")
    p.add_argument("--stop-ids", default=None, metavar="IDS",
                   help="stop at any of these token ids, e.g. 0,2 (any prompt)")
    p.add_argument("--sampler", choices=("auto", "device", "builderforce"), default="auto",
                   help="device: recorded decoding with the device sampler (every flag, every text model); "
                        "builderforce: EvermindLM.generate's argmax and seeded draws (builderforce's numbers); "
                        "auto: builderforce for an EvermindLM given --prompt-ids, else device")
    p.add_argument("--no-cache", action="store_true", help="re-run the whole context per token (no KV cache)")
    p.add_argument("--batch", type=POS_INT, default=1,
                   help="sample this many continuations of the --prompt text at once")
    p.set_defaults(fn=cmd_generate)
