"""Products with GGUF-quantized weights (ops.qmatmul): every usable variant (qmatmul's tiles, qgemv) at
SmolLM2-135M's shapes and a few row counts M, as GB/s of quantized weight bytes read per product, in one
recorded program of back-to-back launches (the weights stream from memory: each launch of a program of
several distinct weights, as in a decode step). Evidence for runtime/select/quant.py's QGEMV_DEVICES.

    python bench/qmatmul_bench.py [--rows 1,8,32] [--types q4_1,q4_0,q8_0]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.runtime import kernels, record

# SmolLM2-135M: q/o, k/v, gate+up, down, the tied head (N x K)
SHAPES = ((576, 576), (192, 576), (3072, 576), (576, 1536), (49152, 576))


def weights(qtype: str, N: int, K: int, copies: int, dev, rng) -> list:
    """`copies` distinct random quantized [N, K] weights (more bytes than the caches hold, as in a step)."""
    from gguf import GGMLQuantizationType as QT, quants
    qt = {"q4_0": QT.Q4_0, "q4_1": QT.Q4_1, "q8_0": QT.Q8_0}[qtype]
    w = rng.standard_normal((N, K)).astype(np.float32)
    blocks = quants.quantize(w, qt)
    return [ops.QuantWeight.from_blocks(blocks, qtype, (N, K), dev) for _ in range(copies)]


def gbps(dev, x, ws, v, repeats: int = 3) -> float:
    """GB/s of one variant over the weights ws, best of `repeats` runs of one recorded program."""
    y = ev.empty((x.shape[0], ws[0].shape[0]), "f32", dev)
    with record(dev, run=False) as prog:
        for w in ws:
            ops.qmatmul(x, w, out=y, variant=v)
    prog.run()
    best = min(_timed(prog) for _ in range(repeats))
    return sum(w.nbytes for w in ws) / best / 1e9


def _timed(prog) -> float:
    t0 = time.perf_counter()
    prog.run()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1,8,32")
    ap.add_argument("--types", default="q4_1,q4_0,q8_0")
    args = ap.parse_args()
    dev, rng = ev.get_device(), np.random.default_rng(0)
    print(f"device: {dev.info.name}")
    for qtype in args.types.split(","):
        cands = [v for op in ("qmatmul", "qgemv") for v in kernels.usable(op, "f32", dev) if qtype in v.flags]
        print(f"\n{qtype}: GB/s of quantized weights | M | N x K | " + " | ".join(v.name for v in cands))
        for N, K in SHAPES:
            ws = weights(qtype, N, K, max(1, int(64e6 // (N * K))), dev, rng)
            for M in (int(r) for r in args.rows.split(",")):
                x = ev.tensor(rng.standard_normal((M, K)).astype(np.float32))
                row = [f"{gbps(dev, x, ws, v):.2f}" for v in cands]
                print(f"{qtype} | {M} | {N}x{K} | " + " | ".join(row), flush=True)


if __name__ == "__main__":
    main()
