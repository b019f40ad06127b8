#!/usr/bin/env python3
"""Every matmul variant that applies, forced one at a time (EVERMIND_VK_MATMUL_VARIANT), and the
variant the selector picks by itself ("auto"): TFLOP/s, relative error against a float64 product of
the same inputs, and the ratio to PyTorch's matmul on the same shape and layout, measured in the same
run when torch is importable (cuBLAS with TF32 off on a CUDA host; f16 inputs for --dtype f16).

    python bench/matmul_variants.py [--dtype f32] [--only SUBSTRING] [--kinds rb,cm] 4096 8192
    python bench/matmul_variants.py --lm-shapes [--dtype f32]     # the LM's linear layers, M = 4096

"auto" is the selector's pick with split-K where it applies (the dW products of --lm-shapes on a GPU:
f32 and f16), "auto (no split-K)" the pick with EVERMIND_VK_MATMUL_SPLIT_K=0; the summary lists both.
--rounds R times torch and the pick alternately R more times per case and reports the median, min and max of
the R ratios (the summary then uses the median): one pair of timings moves by a few percent from run to run.

Square sizes n: C[n,n] = A[n,n] . B[n,n] (--layouts nt etc.: B or A stored transposed). --lm-shapes: for each linear layer (K in, N out) of the
23.7M LM (d 512, ff 1408, vocab 256) with M = batch x tokens = 4096 rows, the three products of a
training step, on the layouts our autodiff runs: fwd Y = X . W^T (W stored [N, K]), dX = dY . W,
dW = dY^T . X. Each time is the median of 3 runs of a recorded program of `reps` launches (enough
for ~20 ms of work); torch's the median of 3 CUDA-event-timed loops of as many launches.
"""
import argparse
import os
import statistics
import time

import numpy as np

import evermind_vk as ev
from evermind_vk.runtime import kernels, variants

try:
    import torch
except ImportError:
    torch = None

LM_LAYERS = [(512, 512), (512, 256), (512, 2816), (1408, 512)]  # (K in, N out): wq/wo, wk/wv/head, w_gate_up, w_down
PRODUCTS = ("fwd", "dX", "dW")


def lm_products(M, K, N):
    """(name, m, n, k, trans_a, trans_b, a_shape, b_shape) of the three products of Y[M,N] = X[M,K] . W[N,K]^T."""
    return [("fwd", M, N, K, False, True, (M, K), (N, K)),
            ("dX", M, K, N, False, False, (M, N), (N, K)),
            ("dW", N, K, M, True, False, (M, N), (M, K))]


def reps_for(flop, dtype):
    rate = 200e12 if dtype == "f16" else 30e12
    return int(min(200, max(3, np.ceil(0.02 / (flop / rate)))))


def torch_time(a, b, ta, tb, reps):
    """Median seconds per product with torch on the same data (None without torch)."""
    if torch is None:
        return None
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    A, B = torch.from_numpy(a).to(dev), torch.from_numpy(b).to(dev)
    if dev == "cpu" and A.dtype == torch.float16:
        A, B = A.float(), B.float()
    opa = A.t() if ta else A
    opb = B.t() if tb else B
    opa @ opb
    times = []
    for _ in range(3):
        if dev == "cuda":
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            e0.record()
            for _ in range(reps):
                opa @ opb
            e1.record()
            torch.cuda.synchronize()
            times.append(e0.elapsed_time(e1) / 1e3 / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                opa @ opb
            times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def reference(a, b, ta, tb):
    """float64 product of the (rounded) inputs."""
    if torch is not None and torch.cuda.is_available():
        A, B = torch.from_numpy(a).cuda().double(), torch.from_numpy(b).cuda().double()
        return ((A.t() if ta else A) @ (B.t() if tb else B)).cpu().numpy()
    A, B = a.astype(np.float64), b.astype(np.float64)
    return (A.T if ta else A) @ (B.T if tb else B)


def ev_time(A, B, C, m, n, k, ta, tb, reps):
    """Median seconds per product, replaying a recorded program of `reps` launches."""
    with ev.record(run=False) as p:
        for _ in range(reps):
            ev.ops.gemm(A, B, C, m, n, k, trans_a=ta, trans_b=tb)
    p.run()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        p.run()
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def layout(m, n, k, ta, tb):
    return variants.Layout((1, m) if ta else (k, 1), (1, k) if tb else (n, 1), (n, 1))


def run_case(label, m, n, k, ta, tb, a_shape, b_shape, dtype, cands, dev, rng, summary, split_k=(), forced_split="",
             rounds=0):
    npd = np.float16 if dtype == "f16" else np.float32
    a = rng.standard_normal(a_shape).astype(npd)
    b = rng.standard_normal(b_shape).astype(npd)
    flop = 2.0 * m * n * k
    reps = reps_for(flop, dtype)
    want = reference(a, b, ta, tb)
    scale = np.abs(want).max()
    tt = torch_time(a, b, ta, tb, reps)
    tref = f"torch {flop / tt / 1e12:8.2f} TFLOP/s" if tt else "no torch"
    print(f"# {label}: {m}x{n}x{k} trans_a={ta} trans_b={tb} {dtype}, {reps} reps; {tref}", flush=True)
    A, B = ev.tensor(a), ev.tensor(b)
    C = ev.empty((m, n), dtype)
    lay = layout(m, n, k, ta, tb)
    rows = [("auto", "", ""), ("auto (no split-K)", "", "0")] + [(f"auto (split-K {s})", "", str(s)) for s in split_k]
    rows += [(v.name + (f" split {forced_split}" if forced_split else ""), v.name, forced_split) for v in cands
             if not variants.variant_launch_errors(v, m, n, k, lay)]
    best = None
    for name, forced, split in rows:
        os.environ["EVERMIND_VK_MATMUL_VARIANT"] = forced
        os.environ["EVERMIND_VK_MATMUL_SPLIT_K"] = split
        try:
            used = gemm_logged(A, B, C, m, n, k, ta, tb)
            if not forced:
                name = f"{name} = {'+'.join(x.replace('matmul_', '') for x in used)}"
            err = np.abs(C.numpy().astype(np.float64) - want).max() / scale
            t = ev_time(A, B, C, m, n, k, ta, tb, reps)
        except Exception as e:  # a variant the device refuses: say so, time the rest
            print(f"  {name:52s} failed: {type(e).__name__}: {e}", flush=True)
            continue
        ratio = f"{tt / t:6.3f}" if tt else "   -  "
        print(f"  {name:52s} {flop / t / 1e12:8.2f} TFLOP/s  {ratio} of torch  rel.err {err:.1e}", flush=True)
        if name.startswith("auto ="):
            auto = tt and tt / t
            if tt and rounds:
                auto = interleaved_ratio(a, b, A, B, C, m, n, k, ta, tb, reps, rounds)
            summary.append([label, dtype, auto, None, None, None])
        elif name.startswith("auto (no split-K) =") and summary:
            summary[-1][3] = tt and tt / t
        elif forced and (best is None or t < best[1]):
            best = (name, t)
    if best and summary:
        summary[-1][4:] = [best[0], tt and tt / best[1]]
    os.environ.pop("EVERMIND_VK_MATMUL_VARIANT", None)
    os.environ.pop("EVERMIND_VK_MATMUL_SPLIT_K", None)


def interleaved_ratio(a, b, A, B, C, m, n, k, ta, tb, reps, rounds):
    """Median of `rounds` ratios torch time / our time, each pair timed back to back (the current pick)."""
    ratios = []
    for _ in range(rounds):
        ratios.append(torch_time(a, b, ta, tb, reps) / ev_time(A, B, C, m, n, k, ta, tb, reps))
    med = statistics.median(ratios)
    print(f"  {'  over ' + str(rounds) + ' interleaved rounds':52s} ratio median {med:.3f}  min {min(ratios):.3f}  "
          f"max {max(ratios):.3f}", flush=True)
    return med


def gemm_logged(A, B, C, m, n, k, ta, tb) -> list:
    """C = op(A) op(B) (ev.ops.gemm), returning the names of the variants it dispatched."""
    used = []
    real = kernels.dispatch
    kernels.dispatch = lambda v, *a, **kw: (used.append(v.name), real(v, *a, **kw))[1]
    try:
        ev.ops.gemm(A, B, C, m, n, k, trans_a=ta, trans_b=tb)
    finally:
        kernels.dispatch = real
    return used


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", type=int, nargs="*", default=[256])
    ap.add_argument("--dtype", choices=["f32", "f16"], action="append")
    ap.add_argument("--only", default="", help="variants whose name contains this (or one of these, comma-separated)")
    ap.add_argument("--kinds", default="", help="comma-separated matmul kinds to force (tiled, v4, rb, cm, cm2); default all")
    ap.add_argument("--layouts", default="nn", help="square sizes: comma-separated operand layouts, n (as is) or "
                    "t (transposed) for A then B, e.g. nn,nt (nt: B stored [N, K], k-contiguous)")
    ap.add_argument("--lm-shapes", action="store_true", help="the LM's linear-layer products instead of n^3")
    ap.add_argument("--rows", type=int, default=4096, help="M for --lm-shapes (batch x tokens)")
    ap.add_argument("--forced-split", default="", help="chunk count the forced variants run split-K with "
                    "(EVERMIND_VK_MATMUL_SPLIT_K for their rows; default: the selector's split)")
    ap.add_argument("--split-k", default="", help="comma-separated chunk counts to time the selector's pick "
                    "split that many ways too (EVERMIND_VK_MATMUL_SPLIT_K=n; where K allows), e.g. 2,4,8,16")
    ap.add_argument("--rounds", type=int, default=0, help="time torch and the selector's pick alternately this "
                    "many more times per case; the summary's auto column is then the median ratio")
    args = ap.parse_args(argv)
    dev = ev.get_device()
    print(f"# {dev.info.name}", flush=True)
    kinds = set(filter(None, args.kinds.split(",")))
    rng = np.random.default_rng(0)
    summary = []
    split_k = [int(x) for x in args.split_k.split(",") if x.strip()]
    for dtype in args.dtype or ["f32", "f16"]:
        cands = [v for v in kernels.usable("matmul", dtype, dev) if any(o in v.name for o in args.only.split(","))
                 and (not kinds or variants.matmul_kind(v.flags) in kinds)
                 and "c32" not in v.flags]  # C in f32: split-K's partials, reached through "auto"
        if args.lm_shapes:
            for K, N in LM_LAYERS:
                for case in lm_products(args.rows, K, N):
                    run_case(f"{case[0]} K={K} N={N}", *case[1:], dtype, cands, dev, rng, summary, split_k,
                             args.forced_split, args.rounds)
        else:
            for n in args.sizes:
                for lay in args.layouts.split(","):
                    ta, tb = lay[0] == "t", lay[1] == "t"
                    run_case(f"n={n} {lay}", n, n, n, ta, tb, (n, n), (n, n), dtype, cands, dev, rng, summary, split_k,
                             args.forced_split, args.rounds)
    med = f", the median of {args.rounds} interleaved rounds" if args.rounds else ""
    print(f"\n# summary: ratio to torch of the selector's pick (auto{med}), of the pick with split-K off "
          "(EVERMIND_VK_MATMUL_SPLIT_K=0) and of the best forced variant (split where auto splits)")
    for label, dtype, auto, nosplit, bname, bratio in summary:
        a = f"{auto:.3f}" if auto else "-"
        n = f"{nosplit:.3f}" if nosplit else "-"
        b = f"{bratio:.3f}" if bratio else "-"
        print(f"{dtype} {label:22s} auto {a:>6s}   no split {n:>6s}   best {b:>6s} {bname or ''}")


if __name__ == "__main__":
    main()
