#!/usr/bin/env python3
"""The recorded decode step of a TransformerLM on decode_layer (one dispatch a block) against the per-op step
(EVERMIND_VK_DECODE_FUSED=0), for model sizes given as d x heads x kv_heads x d_ff, at batch B: each step
replayed `--steps` times a round, the two interleaved for `--rounds` rounds, medians in ms a step. Forced
fused (=1) for every size, so that sizes past the rule's limit are timed too.

    python bench/decode_fused_sweep.py 64x4x2x128 128x8x4x256 192x12x6x384 256x16x8x512 --batch 1
"""
import argparse
import os
import statistics
import time

import numpy as np

from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import generate
from evermind_vk.train.decode import decoder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="+", help="d x heads x kv_heads x d_ff, e.g. 64x4x2x128")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    for size in a.sizes:
        d, H, KVH, F = (int(v) for v in size.split("x"))
        progs = {}
        for mode in ("0", "1"):
            os.environ["EVERMIND_VK_DECODE_FUSED"] = mode  # read when the step is recorded
            m = TransformerLM(LMConfig(d_model=d, n_heads=H, n_kv_heads=KVH, d_ff=F))
            rng = np.random.default_rng(0)
            prompts = [rng.integers(0, 256, a.prompt).tolist() for _ in range(a.batch)]
            generate(m, prompts[0] if a.batch == 1 else prompts, max_new_tokens=3)
            progs[mode] = decoder(m, a.batch).step_program()
        os.environ.pop("EVERMIND_VK_DECODE_FUSED")
        ms = {"0": [], "1": []}
        for _ in range(a.rounds):
            for mode, prog in progs.items():
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    prog.run()
                ms[mode].append((time.perf_counter() - t0) / a.steps * 1e3)
        u, f = statistics.median(ms["0"]), statistics.median(ms["1"])
        print(f"d {d} heads {H}/{KVH} ff {F} B {a.batch}: operations {len(progs['0'])} -> {len(progs['1'])}, "
              f"per-op {u:.3f} ms, fused {f:.3f} ms a step ({u / f:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
