#!/usr/bin/env python3
"""The matrix products of one training step of the default lavapipe LM (bench/iree_bench.py's model: d 64,
2 layers, 4/2 heads, ff 128, vocab 256, batch 8 x 64 tokens; the 12 distinct shapes and layouts of its 39
products, forward Y = X . W^T, dX = dY . W, dW = dY^T . X), timed per matmul variant, rounds interleaved
across variants so that load from other processes hits all of them alike; each time is the median over
rounds of a recorded program of `--reps` launches, and the last lines weight each shape by its count in
the step. Every variant's result is checked against a float64 product first.

    .venv/bin/python bench/lavapipe_step_products.py auto matmul_f32_v4_t128x64 matmul_f32_v4_t16x64
"""
import argparse
import os
import statistics
import time

import numpy as np

import evermind_vk as ev
from matmul_variants import gemm_logged  # bench/ is this script's directory

# (M, N, K, trans_a, trans_b, count in the step)
SHAPES = [(512, 64, 64, 0, 1, 4), (512, 32, 64, 0, 1, 4), (512, 256, 64, 0, 1, 3), (512, 64, 128, 0, 1, 2),
          (512, 64, 256, 0, 0, 3), (512, 128, 64, 0, 0, 2), (512, 64, 64, 0, 0, 4), (512, 64, 32, 0, 0, 4),
          (256, 64, 512, 1, 0, 3), (64, 128, 512, 1, 0, 2), (64, 64, 512, 1, 0, 4), (32, 64, 512, 1, 0, 4)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("variants", nargs="+", help="matmul variant names (EVERMIND_VK_MATMUL_VARIANT), or auto")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=6, help="launches per recorded program")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = []
    for m, n, k, ta, tb, cnt in SHAPES:
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
        cases.append((m, n, k, bool(ta), bool(tb), cnt, ev.tensor(a), ev.tensor(b), ev.empty((m, n)), want))
    progs = {}
    for name in args.variants:
        os.environ["EVERMIND_VK_MATMUL_VARIANT"] = "" if name == "auto" else name
        for i, (m, n, k, ta, tb, cnt, A, B, C, want) in enumerate(cases):
            used = gemm_logged(A, B, C, m, n, k, ta, tb)
            err = np.abs(C.numpy() - want).max() / np.abs(want).max()
            if err > 1e-5:
                raise SystemExit(f"{name} on {m}x{n}x{k}: relative error {err:.2e}")
            with ev.record(run=False) as p:
                for _ in range(args.reps):
                    ev.ops.gemm(A, B, C, m, n, k, trans_a=ta, trans_b=tb)
            p.run()
            progs[name, i] = (p, used[0])
    os.environ["EVERMIND_VK_MATMUL_VARIANT"] = ""
    times = {key: [] for key in progs}
    for _ in range(args.rounds):
        for i in range(len(cases)):
            for name in args.variants:
                t0 = time.perf_counter()
                progs[name, i][0].run()
                times[name, i].append((time.perf_counter() - t0) / args.reps * 1e3)
    total = dict.fromkeys(args.variants, 0.0)
    print(f"# ms per product, median of {args.rounds} interleaved rounds of {args.reps} launches; "
          f"device {ev.get_device().info.name}")
    for i, (m, n, k, ta, tb, cnt) in enumerate(c[:6] for c in cases):
        row = []
        for name in args.variants:
            t = statistics.median(times[name, i])
            total[name] += t * cnt
            row.append(f"{t:7.3f} ({progs[name, i][1].replace('matmul_f32_', '')})")
        print(f"{m}x{n}x{k} trans_a={int(ta)} trans_b={int(tb)} x{cnt}: " + "  ".join(row))
    base = total[args.variants[0]]
    for name in args.variants:
        print(f"{name}: the step's {sum(c[5] for c in cases)} products {total[name]:.2f} ms "
              f"({total[name] / base:.2f}x of {args.variants[0]})")


if __name__ == "__main__":
    main()
