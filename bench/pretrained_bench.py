"""Decode speed of SmolLM2-135M (the packaged GGUF): evermind-vk on the default Vulkan device against Hugging
Face transformers on the CPU with the same number of threads (and on CUDA where torch has it), same run.

    python bench/pretrained_bench.py [--tokens 32] [--threads 2] [--model smollm2-135m]

Prints tokens/s of each (greedy decoding with a KV cache, after a warm-up that builds the kernels) and the
ratio ours / transformers."""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import evermind_vk as ev
from evermind_vk.files import resolve
from evermind_vk.train.generate import generate

PROMPT = "The capital of France is"


def ours(path: str, n: int) -> tuple:
    """Greedy decoding through generate (the recorded prefill and decode step, the device sampler): the
    decode tokens/s of its stats, after a warm-up generation that records the programs."""
    model, tok = ev.load(path)
    ids = tok.encode(PROMPT)
    generate(model, ids, max_new_tokens=n)  # warm-up: programs recorded, kernels built
    stats: dict = {}
    generate(model, ids, max_new_tokens=n + 1, stats=stats)
    return stats["decode_tokens"] / stats["decode_s"], model.device.info.name


def transformers_tps(path: str, n: int, device: str) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.split(path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).to(device).eval()
    x = torch.tensor([tok.encode(PROMPT)], device=device)
    with torch.no_grad():
        out = model(x, use_cache=True)
        past, nxt = out.past_key_values, out.logits[0, -1].argmax().view(1, 1)
        model(nxt, past_key_values=past, use_cache=True)  # warm-up
        out = model(x, use_cache=True)
        past, nxt = out.past_key_values, out.logits[0, -1].argmax().view(1, 1)
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            out = model(nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[0, -1].argmax().view(1, 1)
        if device == "cuda":
            torch.cuda.synchronize()
        return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = ap.parse_args()
    path = resolve(args.model)
    tps, dev = ours(path, args.tokens)
    print(f"evermind-vk on {dev}: {tps:.2f} tokens/s ({args.tokens} greedy decode steps)")
    import torch
    torch.set_num_threads(args.threads)
    cpu = transformers_tps(path, args.tokens, "cpu")
    print(f"transformers f32 on the CPU ({args.threads} threads): {cpu:.2f} tokens/s; ours / theirs = {tps / cpu:.3f}")
    if torch.cuda.is_available():
        gpu = transformers_tps(path, args.tokens, "cuda")
        print(f"transformers f32 on CUDA: {gpu:.2f} tokens/s; ours / theirs = {tps / gpu:.3f}")


if __name__ == "__main__":
    main()
