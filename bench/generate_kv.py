"""Generation speed with and without the KV cache at a given context (default: the default LMConfig,
256 positions: a 246-token prompt and 10 new tokens), greedy, on one device.

    python bench/generate_kv.py [--context 256] [--new 10] [--device N]

Prints tokens/s of the uncached path (the whole context per token), of the cached path including its
prefill, of cached decoding alone, and whether the greedy outputs are identical."""
import argparse
import time

import numpy as np

from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.runtime import get_device
from evermind_vk.train import generate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--new", type=int, default=10)
    ap.add_argument("--device", default=None)
    a = ap.parse_args()
    dev = get_device(a.device)
    m = TransformerLM(LMConfig(max_seq_len=a.context), device=dev)
    prompt = [int(i) for i in np.random.default_rng(0).integers(0, 256, a.context - a.new)]
    generate(m, prompt, max_new_tokens=2, use_cache=False)  # warm-up: pipelines of both paths
    generate(m, prompt, max_new_tokens=2)
    t = time.perf_counter()
    plain = generate(m, prompt, max_new_tokens=a.new, use_cache=False)
    t_plain = time.perf_counter() - t
    t = time.perf_counter()
    cached = generate(m, prompt, max_new_tokens=a.new)
    t_cached = time.perf_counter() - t
    cache = m.kv_cache()
    cache.step(prompt)
    t = time.perf_counter()
    for tok in plain:
        cache.step([tok])
    t_decode = time.perf_counter() - t
    r0, r1, r2 = a.new / t_plain, a.new / t_cached, a.new / t_decode
    print(f"{dev.info.name}: context {a.context}, {a.new} new tokens | no cache {r0:.2f} tok/s | "
          f"cache {r1:.2f} tok/s incl. prefill ({r1 / r0:.1f}x) | cached decode {r2:.2f} tok/s ({r2 / r0:.1f}x) | "
          f"greedy identical: {plain == cached}")


if __name__ == "__main__":
    main()
