"""Pretrained GGUF models on the command line (docs/pretrained.md): `chat`, and the `generate` and `train`
paths taken when --model names a .gguf file or a packaged model (smollm2-135m)."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from ..models import LoRAConfig, add_lora, lora_frozen
from ..files import PACKAGED, load_gguf
from ..qlora import QLORA_TARGETS, save_merged, save_peft
from ..runtime import get_device
from ..train import Trainer, default_corpus, generate
from .args import add_device
from .common import (NONNEG, NONNEG_INT, CliError, check_out_dir, parse_ids, print_continuations, read_text,
                     report_rates)

HELD_OUT_SEQS = 8
MODEL_HELP = f"a .gguf file or a packaged model ({', '.join(PACKAGED)})"


class Streamer:
    """Prints tokens as they come, decoding the whole reply each time (a token may end inside a character)."""

    def __init__(self, tok):
        self.tok, self.ids, self.shown = tok, [], ""

    def __call__(self, t: int) -> None:
        self.ids.append(t)
        text = self.tok.decode(self.ids)
        if not text.endswith("\ufffd"):  # wait for the rest of a multi-byte character
            sys.stdout.write(text[len(self.shown):])
            sys.stdout.flush()
            self.shown = text


def _sampling(args) -> dict:
    return dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                repetition_penalty=args.repetition_penalty)


def cmd_generate_pretrained(args) -> int:
    """generate --model X.gguf: the prompt continued (raw text, no chat template), streamed (--batch N: N
    continuations at once, printed one after another), then the prefill and decode tokens/s."""
    if getattr(args, "prompt_ids", None) is not None or getattr(args, "out", None):
        raise CliError(f"{args.model}: a pretrained model takes a text --prompt (its own tokenizer encodes it)")
    if args.sampler == "builderforce":
        raise CliError("--sampler builderforce: builderforce's sampler is EvermindLM's, not a pretrained model's")
    prompt = "The " if args.prompt is None else args.prompt
    model, tok = load_gguf(args.model, device=get_device(args.device))
    ids = tok.encode(prompt)
    stop = list(tok.stop_ids()) + [i for s in args.stop for i in tok.encode(s)[:1]]
    if args.stop_ids is not None:
        stop += parse_ids(args.stop_ids, "--stop-ids", model.config.vocab_size)
    batch, stats = args.batch, {}
    kw = dict(max_new_tokens=args.tokens, stop_tokens=stop, use_cache=not args.no_cache, stats=stats, **_sampling(args))
    t0 = time.perf_counter()
    if batch > 1:
        n = print_continuations(generate(model, [ids] * batch, **kw), lambda out: prompt + tok.decode(out))
    else:
        sys.stdout.write(prompt)
        n = len(generate(model, ids, on_token=Streamer(tok), **kw))
        sys.stdout.write("\n")
    report_rates(n, time.perf_counter() - t0, stats, args)
    return 0


def _stdin_turns(interactive: bool):
    """User turns from stdin, one a line (blank lines skipped; interactively, a blank line ends the chat)."""
    while True:
        if interactive:
            sys.stdout.write("you> ")
            sys.stdout.flush()
        line = sys.stdin.readline()
        if not line or (interactive and not line.strip()):
            return
        if line.strip():
            yield line.rstrip("\n")


def cmd_chat(args) -> int:
    """A multi-turn chat: each line of stdin is a user turn; the reply streams until an end-of-turn token."""
    model, tok = load_gguf(args.model, device=get_device(args.device))
    messages = [{"role": "system", "content": args.system}] if args.system else []
    interactive = sys.stdin.isatty() and not args.message
    for line in (args.message or _stdin_turns(interactive)):
        messages.append({"role": "user", "content": line})
        prompt = tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True))
        if len(prompt) + args.tokens > model.config.max_seq_len:
            raise CliError(f"the conversation ({len(prompt)} tokens) leaves no room for a reply "
                           f"in {model.config.max_seq_len} positions")
        sys.stdout.write("assistant> ")
        t0 = time.perf_counter()
        stream = Streamer(tok)
        out = generate(model, prompt, max_new_tokens=args.tokens, stop_tokens=tok.stop_ids(), on_token=stream,
                       keep_prefix=True, **_sampling(args))  # earlier turns stay in the KV cache
        dt = time.perf_counter() - t0
        sys.stdout.write("\n")
        print(f"[{len(out)} tokens in {dt:.2f}s: {len(out) / max(dt, 1e-9):.2f} tokens/s]", file=sys.stderr)
        messages.append({"role": "assistant", "content": tok.decode(out)})
    return 0


def cmd_train_pretrained(args) -> int:
    """train --model X.gguf --lora-rank R: QLoRA adapters over the frozen quantized weights, saved in PEFT's
    layout (and, with --merge, the merged Hugging Face model)."""
    if not args.lora_rank:
        raise CliError("--model with a pretrained model trains LoRA adapters: give --lora-rank R")
    if args.precision != "f32" or args.nproc > 1 or args.resume or args.package:
        raise CliError("--precision, --nproc, --resume and --package are not implemented for pretrained models")
    check_out_dir(args.out, ["adapter_model.safetensors", "adapter_config.json"]
                  + (["merged/model.safetensors", "merged/config.json"] if args.merge else []))
    model, tok = load_gguf(args.model, device=get_device(args.device))
    text = read_text(args.text) if args.text else default_corpus()
    cut = int(len(text) * 0.9)  # the last 10% held out, its first HELD_OUT_SEQS sequences evaluated
    train, held = text[:cut], np.array(tok.encode(text[cut:])[: HELD_OUT_SEQS * (args.seq_len + 1)], np.uint32)
    if held.size < args.seq_len + 1:
        raise CliError(f"--text is too short for a held-out part of {args.seq_len + 1} tokens")
    add_lora(model, LoRAConfig(rank=args.lora_rank, alpha=args.lora_alpha or 2.0 * args.lora_rank,
                               targets=QLORA_TARGETS, seed=args.seed))
    trainer = Trainer(model, tok, seed=args.seed)
    before = trainer.evaluate(held, seq_len=args.seq_len)
    print(f"held-out perplexity before: {before:.3f}")
    t0 = time.perf_counter()
    trainer.train(train, epochs=args.epochs or 1, seq_len=args.seq_len, batch_size=args.batch_size,
                           lr=args.lr, max_grad_norm=args.max_grad_norm, max_steps=args.max_steps,
                           time_limit=args.time_limit or None, freeze=lora_frozen(model))
    dt = time.perf_counter() - t0
    after = trainer.evaluate(held, seq_len=args.seq_len)
    print(f"trained {trainer.global_step} steps in {dt:.1f}s "
          f"(last step's loss {trainer.history[-1]['loss'] if trainer.history else float('nan'):.4f}); held-out perplexity after: {after:.3f}")
    for f in save_peft(model, args.out):
        print(f"wrote {f}")
    if args.merge:
        for f in save_merged(model, os.path.join(args.out, "merged"), tok):
            print(f"wrote {f}")
    if args.prompt:
        msgs = [{"role": "user", "content": args.prompt}]
        out = generate(model, tok.encode(tok.apply_chat_template(msgs)), args.sample_tokens,
                       stop_tokens=tok.stop_ids())
        print(f"sample> {tok.decode(out)}")
    return 0


def add_lora_args(p) -> None:
    """--lora-rank, --lora-alpha, --merge of `train` (pretrained models)."""
    p.add_argument("--lora-rank", type=NONNEG_INT, default=0,
                   help="pretrained --model: train rank-R LoRA adapters over the frozen quantized weights (QLoRA)")
    p.add_argument("--lora-alpha", type=NONNEG, default=0.0, help="LoRA alpha (0: 2 x rank)")
    p.add_argument("--merge", action="store_true",
                   help="pretrained --model: also write OUT/merged/model.safetensors + config.json (Hugging Face)")


def add_sampling(p) -> None:
    """--tokens, --temperature, --top-k, --top-p, --repetition-penalty, --seed of `chat` and pretrained `generate`."""
    p.add_argument("--tokens", type=NONNEG_INT, default=128, help="most tokens a reply may have")
    p.add_argument("--temperature", type=NONNEG, default=0.0, help="sampling temperature (0: greedy)")
    p.add_argument("--top-k", type=NONNEG_INT, default=0, help="sample among the k most likely (0: all)")
    p.add_argument("--top-p", type=NONNEG, default=None, help="nucleus sampling: keep this much probability mass")
    p.add_argument("--repetition-penalty", type=NONNEG, default=1.1, help="> 1 discourages repeated tokens")
    p.add_argument("--seed", type=NONNEG_INT, default=0, help="sampling seed")


def add_parser(sub) -> None:
    """The `chat` subcommand."""
    p = sub.add_parser("chat", help="chat with a pretrained GGUF model (multi-turn, streaming)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="smollm2-135m", help=MODEL_HELP)
    p.add_argument("--system", default="", help="a system message (default: the template's own)")
    p.add_argument("--message", action="append", default=[],
                   help="a user turn (repeatable: a scripted conversation); without it, lines of stdin")
    add_sampling(p)
    add_device(p)
    p.set_defaults(fn=cmd_chat)

