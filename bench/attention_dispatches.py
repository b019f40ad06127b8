#!/usr/bin/env python3
"""Dispatches and GPU time of one recorded attention forward + backward (the goal: one dispatch per
product on the matmul path instead of one per sequence), from `ev.profile`, beside numpy's float64
forward + backward of the same shapes in the same run (the baseline; a GPU run shows the ratio only).

    python bench/attention_dispatches.py                                  # lavapipe-sized default
    python bench/attention_dispatches.py --batch 16 --seq 256 --heads 8 --kv-heads 4 --head-dim 64 --dtype f16

The path is EVERMIND_VK_ATTENTION (default here: matmul); the table is per kernel variant.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import evermind_vk as ev
from evermind_vk import ops


def numpy_step(q, k, v, do, B, S, H, KVH, causal):
    """float64 attention forward + backward per sequence and head (the baseline's work)."""
    G, D = H // KVH, q.shape[-1]
    sc = 1 / np.sqrt(D)
    mask = np.tril(np.ones((S, S), bool)) if causal else np.ones((S, S), bool)
    for b in range(B):
        sl = slice(b * S, (b + 1) * S)
        for h in range(H):
            Q, K, V, DO = q[sl, h], k[sl, h // G], v[sl, h // G], do[sl, h]
            s = np.where(mask, sc * Q @ K.T, -np.inf)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            dp = DO @ V.T
            ds = p * (dp - (p * dp).sum(-1, keepdims=True))
            _ = (p @ V, sc * ds @ K, sc * ds.T @ Q, p.T @ DO)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    ap.add_argument("--no-causal", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    os.environ.setdefault("EVERMIND_VK_ATTENTION", "matmul")
    B, S, H, KVH, D, causal = a.batch, a.seq, a.heads, a.kv_heads, a.head_dim, not a.no_causal
    rng = np.random.default_rng(0)
    np_dt = np.float16 if a.dtype == "f16" else np.float32
    q, k, v, do = (rng.standard_normal(s).astype(np_dt) for s in
                   ((B * S, H, D), (B * S, KVH, D), (B * S, KVH, D), (B * S, H, D)))
    dev = ev.get_device()
    qt, kt, vt, dot = (ev.tensor(x) for x in (q, k, v, do))
    with ev.record(run=False) as prog:
        out, saved = ops.attention(qt, kt, vt, causal=causal, batch=B)
        ops.attention_backward(qt, kt, vt, dot, saved, causal=causal, batch=B, out=out)
    prog.run()  # warm-up
    prof = ev.profile(prog, repeats=a.repeats)
    path = "fused" if saved.ndim == 2 else "matmul"
    print(f"attention fwd+bwd, {path} path, {a.dtype}: B={B} S={S} H={H} KVH={KVH} D={D} causal={causal} "
          f"on {dev.info.name}")
    print(prof.table())
    n_matmul = sum(1 for lb in prog.labels if lb.startswith("matmul_"))
    print(f"dispatches: {len(prog.labels)} in all, {n_matmul} matmul")
    f64 = [x.astype(np.float64) for x in (q, k, v, do)]
    t0 = time.perf_counter()
    numpy_step(*f64, B, S, H, KVH, causal)
    t_np = (time.perf_counter() - t0) * 1e3
    print(f"numpy float64 fwd+bwd: {t_np:.3f} ms; evermind-vk host ms / numpy ms = {prof.host_ms / t_np:.3f}")


if __name__ == "__main__":
    main()
