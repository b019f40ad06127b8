#!/usr/bin/env python3
"""Which matmul variant each product of one LM training step would get on a GPU like the H200, without
one: the step runs with `kernels.dispatch` replaced by a logger (nothing executes; losses are garbage) on
the local device dressed up as a discrete GPU with 48 KiB of shared memory, every feature and 132
multiprocessors (--multiprocessors: the H200's count; f32 split-K plans whole waves by it), so the
selection rules in runtime/select/ decide as they would there. Prints, per variant, its dispatch
count and the distinct products (M, N, K, a_strides, b_strides, beta, inner batch, outer batch); a
split-K product shows as its K/S chunks with inner batch S on a c32 variant (f16) plus a column sum.

    python bench/matmul_selection.py --precision f16                 # the 23.7M config of train_bench
    python bench/matmul_selection.py --precision f32 --config tiny
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib

import numpy as np

import evermind_vk as ev
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.runtime import kernels
from evermind_vk.train import Trainer

CONFIGS = {"tiny": (128, 4, 4, 2, 352, 8, 128), "23.7m": (512, 8, 8, 4, 1408, 16, 256)}  # as bench/train_bench.py


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", choices=["f32", "f16"], default="f16")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="23.7m")
    ap.add_argument("--multiprocessors", type=int, default=132, help="the device's count (H200: 132; 0: unknown)")
    a = ap.parse_args(argv)
    d, n_layers, H, KVH, ff, B, L = CONFIGS[a.config]
    dev = ev.get_device()
    dev.info = dataclasses.replace(dev.info, type="discrete_gpu", shared_memory=49152, subgroup_size=32,
                                   multiprocessors=a.multiprocessors,
                                   features={k: True for k in dev.info.features})
    mm = importlib.import_module("evermind_vk.ops.matmul")
    att = importlib.import_module("evermind_vk.ops.attention")
    count, products, current = collections.Counter(), collections.defaultdict(set), []
    real = mm.gemm_strided

    def gemm_strided(a_, b_, c_, M, N, K, **kw):
        current.append((M, N, K, kw.get("a_strides"), kw.get("b_strides"), kw.get("beta", 0.0), kw.get("batch", 1),
                        kw.get("outer", (1,))[0]))
        return real(a_, b_, c_, M, N, K, **kw)

    def dispatch(v, tensors, push, groups, *rest):
        count[v.name] += 1
        if v.op == "matmul" and current:
            products[v.name].add(current[-1])

    mm.gemm_strided = att.gemm_strided = gemm_strided
    kernels.dispatch = dispatch
    cfg = LMConfig(d_model=d, n_layers=n_layers, n_heads=H, n_kv_heads=KVH, d_ff=ff, max_seq_len=L)
    tr = Trainer(TransformerLM(cfg), precision=a.precision)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, B * L * 2 + 2)
    try:
        tr.train(ids, epochs=1, seq_len=L, batch_size=B, max_steps=1)
    except ev.EvermindError as e:  # nothing ran: the loss read back is arbitrary bytes, maybe not finite
        if "loss became" not in str(e):
            raise
    print(f"{a.config} {a.precision}, batch {B} x {L}: matmul variants of one step as a discrete GPU would pick them")
    for name, n in sorted(count.items(), key=lambda x: -x[1]):
        if name.startswith("matmul"):
            print(f"{n:6d} {name}")
            for p in sorted(products[name], key=str):
                print("         ", p)
    print(f"{sum(n for k, n in count.items() if k.startswith('matmul')):6d} matmul dispatches in all")
    print(f"{count['colsum_cast_f16']:6d} colsum_cast_f16 (f16 split-K sums; the chunks ran on the c32 variants, "
          "batch = chunks)")


if __name__ == "__main__":
    main()
