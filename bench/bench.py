#!/usr/bin/env python3
"""evermind-vk benchmarks. Every number is printed beside a baseline measured in the same run:
numpy (CPU) always, PyTorch when importable (CUDA if a GPU is visible to it, else CPU).

    python bench/bench.py                       # lavapipe-sized defaults
    python bench/bench.py --matmul 4096 8192 --attn 2048 --adam 100000000 --json out.json
    python bench/bench.py --matmul --adam 0 --attn 1024 2048 4096 --attn-hd 64 128 --attn-path fused matmul
    python bench/bench.py --matmul --attn --adam 0 --softmax 32768x256 16384x1024 16384x4096

Device timings replay a recorded sequence of --reps dispatches with one submit (after a warm-up
run), so they measure the kernels, not the per-submit cost.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.train import AdamW

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def timed(fn, reps: int, min_time: float = 0.2) -> float:
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if n >= reps and dt >= min_time or dt > 20:
            return dt / n


def device_time(build, reps: int) -> float:
    """Seconds per repetition of the dispatches `build()` records."""
    with ev.record(run=False) as prog:
        for _ in range(reps):
            build()
    prog.run()  # warm-up (pipelines, caches)
    t0 = time.perf_counter()
    prog.run()
    return (time.perf_counter() - t0) / reps


def torch_dev():
    if torch is None:
        return None
    return "cuda" if torch.cuda.is_available() else "cpu"


def torch_time(fn, reps):
    if torch_dev() == "cuda":
        torch.cuda.synchronize()
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / reps
    return timed(fn, reps)


def bench_matmul(n: int, reps: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    a32 = rng.standard_normal((n, n)).astype(np.float32)
    b32 = rng.standard_normal((n, n)).astype(np.float32)
    flops = 2.0 * n ** 3
    t_np = timed(lambda: a32 @ b32, 1 if n >= 2048 else 3) if n <= 4096 else float("nan")
    for dtype in ("f32", "f16"):
        dev = ev.get_device()
        if dtype == "f16" and not dev.info.f16:
            continue
        a = ev.tensor(a32.astype(np.float16) if dtype == "f16" else a32)
        b = ev.tensor(b32.astype(np.float16) if dtype == "f16" else b32)
        c = ev.empty((n, n), dtype)
        t_ev = device_time(lambda: ev.matmul(a, b, out=c), reps)
        row = {"bench": "matmul", "dtype": dtype, "n": n, "evermind_gflops": flops / t_ev / 1e9,
               "numpy_f32_gflops": flops / t_np / 1e9 if t_np == t_np else None}
        if torch is not None:
            td = torch_dev()
            tdt = torch.float16 if (dtype == "f16" and td == "cuda") else torch.float32
            if td == "cuda":
                torch.backends.cuda.matmul.allow_tf32 = False
            ta = torch.tensor(a32, device=td, dtype=tdt)
            tb = torch.tensor(b32, device=td, dtype=tdt)
            t_t = torch_time(lambda: ta @ tb, max(3, reps))
            row[f"torch_{td}_{str(tdt).split('.')[-1]}_gflops"] = flops / t_t / 1e9
            row["ratio_vs_torch"] = row["evermind_gflops"] / row[f"torch_{td}_{str(tdt).split('.')[-1]}_gflops"]
        if row["numpy_f32_gflops"]:
            row["ratio_vs_numpy"] = row["evermind_gflops"] / row["numpy_f32_gflops"]
        rows.append(row)
    return rows


def attn_flops(S, H, D, causal):
    f = 4.0 * S * S * H * D  # QK^T and PV
    return 3.5 * f * (0.5 if causal else 1.0)  # forward + backward (dV, dP, dQ, dK: 2x forward), causal counts half


def bench_attention(S: int, H: int, KVH: int, D: int, reps: int, paths=("default",), dtype: str = "f32") -> list[dict]:
    """Causal attention forward + backward on one sequence, for each path (EVERMIND_VK_ATTENTION: the
    rule's pick "default", "fused", "matmul"), beside numpy (S <= 2048) and torch SDPA in the same run."""
    import os
    rng = np.random.default_rng(1)
    q = rng.standard_normal((S, H, D)).astype(np.float32)
    k = rng.standard_normal((S, KVH, D)).astype(np.float32)
    v = rng.standard_normal((S, KVH, D)).astype(np.float32)
    do = rng.standard_normal((S, H, D)).astype(np.float32)
    npdt = np.float16 if dtype == "f16" else np.float32
    tq, tk, tv, tdo = (ev.tensor(x.astype(npdt)) for x in (q, k, v, do))
    flops = attn_flops(S, H, D, True)
    G = H // KVH
    base = {"bench": "attention_fwd_bwd", "S": S, "H": H, "KVH": KVH, "D": D, "causal": True, "dtype": dtype}
    if S <= 2048:
        def np_step():
            for h in range(H):
                s = q[:, h] @ k[:, h // G].T / math.sqrt(D)
                s = s + np.triu(np.full((S, S), -np.inf, np.float32), 1)
                p = np.exp(s - s.max(1, keepdims=True))
                p /= p.sum(1, keepdims=True)
                p @ v[:, h // G]
                dp = do[:, h] @ v[:, h // G].T
                ds = p * (dp - (p * dp).sum(1, keepdims=True))
                p.T @ do[:, h], ds @ k[:, h // G], ds.T @ q[:, h]
        base["numpy_ms"] = timed(np_step, 1) * 1e3
    if torch is not None:
        td = torch_dev()
        tdt = torch.float16 if (dtype == "f16" and td == "cuda") else torch.float32
        Q = torch.tensor(q, device=td, dtype=tdt).permute(1, 0, 2).contiguous().requires_grad_()
        K = torch.tensor(k, device=td, dtype=tdt).permute(1, 0, 2).repeat_interleave(G, 0).contiguous().requires_grad_()
        V = torch.tensor(v, device=td, dtype=tdt).permute(1, 0, 2).repeat_interleave(G, 0).contiguous().requires_grad_()
        DO = torch.tensor(do, device=td, dtype=tdt).permute(1, 0, 2).contiguous()

        def t_step():
            o = torch.nn.functional.scaled_dot_product_attention(Q[None], K[None], V[None], is_causal=True)
            torch.autograd.grad(o, (Q, K, V), DO[None])
        base[f"torch_{td}_{str(tdt).split('.')[-1]}_sdpa_ms"] = torch_time(t_step, max(3, reps)) * 1e3
    rows = []
    for path in paths:
        old = os.environ.get("EVERMIND_VK_ATTENTION")
        if path == "default":
            os.environ.pop("EVERMIND_VK_ATTENTION", None)
        else:
            os.environ["EVERMIND_VK_ATTENTION"] = path
        try:
            def step():
                o, saved = ops.attention(tq, tk, tv, causal=True)
                ops.attention_backward(tq, tk, tv, tdo, saved, causal=True, out=o)
            t_ev = device_time(step, reps)
            _, saved = ops.attention(tq, tk, tv, causal=True)
            took = "fused" if saved.ndim == 2 else "matmul"
        finally:
            if old is None:
                os.environ.pop("EVERMIND_VK_ATTENTION", None)
            else:
                os.environ["EVERMIND_VK_ATTENTION"] = old
        row = dict(base, path=path, took=took, evermind_ms=t_ev * 1e3, evermind_gflops=flops / t_ev / 1e9)
        if "numpy_ms" in row:
            row["ratio_vs_numpy"] = row["numpy_ms"] / row["evermind_ms"]
        tkey = next((k_ for k_ in row if k_.endswith("_sdpa_ms")), None)
        if tkey:
            row["ratio_vs_torch"] = row[tkey] / row["evermind_ms"]  # > 1: evermind-vk is faster
        rows.append(row)
    return rows


def bench_softmax(rows: int, cols: int, reps: int) -> list[dict]:
    """Causal softmax forward + backward over [rows, cols] (attention's probabilities: rows of `cols` keys),
    the rule's pick and each rows-a-workgroup forced (EVERMIND_VK_SOFTMAX_ROWS), beside torch's
    softmax + _softmax_backward_data on the same data (masked to the same causal pattern)."""
    import os
    from evermind_vk.runtime import kernels, variants
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    dy = rng.standard_normal((rows, cols)).astype(np.float32)
    tx, tdy = ev.tensor(x), ev.tensor(dy)
    base = {"bench": "softmax_fwd_bwd", "rows": rows, "cols": cols, "causal": True, "dtype": "f32"}
    if torch is not None:
        td = torch_dev()
        X = torch.tensor(x, device=td) + torch.triu(torch.full((cols, cols), float("-inf"), device=td), 1).repeat(
            rows // cols + 1, 1)[:rows]
        DY = torch.tensor(dy, device=td)

        def t_step():
            y = torch.softmax(X, -1)
            torch._softmax_backward_data(DY, y, -1, y.dtype)
        base[f"torch_{td}_ms"] = torch_time(t_step, max(5, reps)) * 1e3
    picked = variants.pick_softmax(kernels.usable("softmax", "f32", ev.get_device()), cols, ev.get_device().info.type)
    rows_out = []
    for forced in ["", *sorted({str(v.spec["ROWS"]) for v in kernels.usable("softmax", "f32", ev.get_device())}, key=int)]:
        old = os.environ.get("EVERMIND_VK_SOFTMAX_ROWS")
        os.environ["EVERMIND_VK_SOFTMAX_ROWS"] = forced
        try:
            def step():
                y = ops.softmax(tx, causal=True, seq=cols)
                ops.softmax_backward(y, tdy, causal=True, seq=cols)
            t = device_time(step, reps)
        finally:
            if old is None:
                os.environ.pop("EVERMIND_VK_SOFTMAX_ROWS", None)
            else:
                os.environ["EVERMIND_VK_SOFTMAX_ROWS"] = old
        row = dict(base, rows_a_workgroup=forced or f"auto ({picked.spec['ROWS']})", evermind_ms=t * 1e3,
                   evermind_gbs=5 * 4.0 * rows * cols / t / 1e9)  # read x; write y; read y, dy; write dx
        tkey = next((k_ for k_ in row if k_.startswith("torch_")), None)
        if tkey:
            row["ratio_vs_torch"] = row[tkey] / row["evermind_ms"]
        rows_out.append(row)
    return rows_out


def bench_adam(n_params: int, reps: int) -> dict:
    dev = ev.get_device()
    cap = min(dev.info.max_storage_buffer_range // 4, 1 << 25)
    sizes = [min(cap, n_params - i) for i in range(0, n_params, cap)]
    rng = np.random.default_rng(2)
    params = {f"p{i}": ev.tensor(rng.standard_normal(s).astype(np.float32)) for i, s in enumerate(sizes)}
    grads = {k: ev.tensor(rng.standard_normal(p.numel).astype(np.float32) * 1e-3) for k, p in params.items()}
    opt = AdamW(params, lr=1e-3, max_delta=0.05)
    opt.step(grads)  # creates the moments
    opt.begin_step()
    t_step = device_time(lambda: opt.record_updates(grads), reps)
    bytes_step = 4.0 * n_params * 7  # read p, g, m, v; write p, m, v
    outs = {k: ev.empty((p.numel,), "f32") for k, p in params.items()}
    from evermind_vk.runtime.kernels import copy_words
    t_copy = device_time(lambda: [copy_words(p, outs[k]) for k, p in params.items()], reps)
    copy_gbs = 8.0 * n_params / t_copy / 1e9
    row = {"bench": "adamw_step", "params": n_params, "evermind_gbs": bytes_step / t_step / 1e9,
           "device_copy_gbs": copy_gbs, "ms_per_step": t_step * 1e3}
    row["ratio_vs_copy"] = row["evermind_gbs"] / copy_gbs
    if torch is not None and torch_dev() == "cuda":  # the device's copy bandwidth as CUDA sees it
        src = torch.empty(n_params, device="cuda")
        dst = torch.empty_like(src)
        t = torch_time(lambda: dst.copy_(src), max(5, reps))
        row["torch_cuda_copy_gbs"] = 8.0 * n_params / t / 1e9
        row["ratio_vs_torch_copy"] = row["evermind_gbs"] / row["torch_cuda_copy_gbs"]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matmul", type=int, nargs="*", default=[256])
    ap.add_argument("--attn", type=int, nargs="*", default=[128], help="sequence lengths (causal, one sequence)")
    ap.add_argument("--attn-hd", type=int, nargs="*", default=[64], help="head dims for --attn")
    ap.add_argument("--attn-heads", type=int, nargs=2, default=[4, 2], metavar=("H", "KVH"))
    ap.add_argument("--attn-path", nargs="*", default=["default"], choices=["default", "fused", "matmul"],
                    help="attention paths to time (EVERMIND_VK_ATTENTION), each beside the same torch SDPA")
    ap.add_argument("--attn-dtype", default="f32", choices=["f32", "f16"])
    ap.add_argument("--softmax", nargs="*", default=[], metavar="ROWSxCOLS",
                    help="causal softmax fwd + bwd shapes, e.g. 32768x256 (the 23.7M LM's attention)")
    ap.add_argument("--adam", type=int, default=1_000_000, help="parameters in the AdamW step")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default="bench.json")
    args = ap.parse_args(argv)
    dev = ev.get_device()
    info = {"device": dev.info.name, "device_type": dev.info.type, "torch": getattr(torch, "__version__", None),
            "torch_device": torch_dev(), "numpy": np.__version__, "results": []}
    print(f"# evermind-vk bench on {dev.info.name} ({dev.info.type}); torch: {info['torch']} ({info['torch_device']})")
    for n in args.matmul:
        for row in bench_matmul(n, args.reps):
            info["results"].append(row)
            print(json.dumps(row))
    for D in args.attn_hd:
        for S in args.attn:
            for row in bench_attention(S, *args.attn_heads, D, args.reps, args.attn_path, args.attn_dtype):
                info["results"].append(row)
                print(json.dumps(row))
    for shape in args.softmax:
        r, c = (int(n) for n in shape.lower().split("x"))
        for row in bench_softmax(r, c, args.reps):
            info["results"].append(row)
            print(json.dumps(row))
    if args.adam:
        row = bench_adam(args.adam, args.reps)
        info["results"].append(row)
        print(json.dumps(row))
    with open(args.json, "w") as f:
        json.dump(info, f, indent=1)
    print(f"# wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
