#!/usr/bin/env python3
"""conv2d forward and forward+backward (dX, dW, dB) on evermind-vk vs PyTorch in the same run (CUDA
if a GPU is visible to torch, else CPU), for ResNet-like shapes.

    python bench/conv_bench.py                 # lavapipe-sized: batch 2, ResNet stage shapes at 1/4 area
    python bench/conv_bench.py --gpu --json out.json   # batch 32, ResNet-50 stage shapes (an H200)

Device timings replay a recorded sequence of --reps repetitions with one submit (after a warm-up run;
the median of 5 replays); PyTorch timings are the median of 5 loops of --reps calls after two warm-ups.
Ratio = PyTorch time / evermind-vk time (> 1: evermind-vk is faster).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import evermind_vk as ev
from evermind_vk import ops

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

# (name, N, C, H, W, OC, K, stride, padding)
SMALL = [("3x3 64@28", 2, 64, 28, 28, 64, 3, 1, 1), ("3x3 128@14", 2, 128, 14, 14, 128, 3, 1, 1),
         ("3x3/2 64->128@28", 2, 64, 28, 28, 128, 3, 2, 1), ("1x1 256->64@14", 2, 256, 14, 14, 64, 1, 1, 0)]
GPU = [("3x3 64@56", 32, 64, 56, 56, 64, 3, 1, 1), ("3x3 128@28", 32, 128, 28, 28, 128, 3, 1, 1),
       ("3x3 256@14", 32, 256, 14, 14, 256, 3, 1, 1), ("3x3 512@7", 32, 512, 7, 7, 512, 3, 1, 1),
       ("3x3/2 128@56->28", 32, 128, 56, 56, 128, 3, 2, 1), ("1x1 64->256@56", 32, 64, 56, 56, 256, 1, 1, 0),
       ("7x7/2 3->64@224 (stem)", 32, 3, 224, 224, 64, 7, 2, 3)]


TRIALS = 5


def device_time(build, reps: int) -> float:
    with ev.record(run=False) as prog:
        for _ in range(reps):
            build()
    prog.run()  # warm-up (pipelines, caches)
    times = []
    for _ in range(TRIALS):  # the median of a few replays (a shared CPU is noisy)
        t0 = time.perf_counter()
        prog.run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / reps


def torch_time(fn, reps: int) -> float:
    cuda = torch.cuda.is_available()
    fn()
    fn()
    times = []
    for _ in range(TRIALS):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / reps


def bench(shape, dtype: str, reps: int) -> dict:
    name, N, C, H, W, OC, K, s, p = shape
    rng = np.random.default_rng(0)
    npdt = np.float16 if dtype == "f16" else np.float32
    x = rng.standard_normal((N, C, H, W)).astype(npdt)
    w = (rng.standard_normal((OC, C, K, K)) / np.sqrt(C * K * K)).astype(npdt)
    b = rng.standard_normal(OC).astype(np.float32)
    OH, OW = ops.conv2d_output_size(H, W, K, K, s, p)
    dy = rng.standard_normal((N, OC, OH, OW)).astype(npdt)
    xt, wt, bt, dyt = ev.tensor(x), ev.tensor(w), ev.tensor(b), ev.tensor(dy)
    flops = 2.0 * N * OC * OH * OW * C * K * K
    t_fwd = device_time(lambda: ops.conv2d(xt, wt, bt, s, p), reps)
    t_all = device_time(lambda: (ops.conv2d(xt, wt, bt, s, p),
                                 ops.conv2d_backward(xt, wt, dyt, s, p, need_bias=True)), reps)
    row = dict(shape=name, dtype=dtype, N=N, C=C, H=H, W=W, OC=OC, K=K, stride=s, padding=p,
               fwd_ms=t_fwd * 1e3, fwd_bwd_ms=t_all * 1e3, fwd_tflops=flops / t_fwd / 1e12,
               fwd_bwd_tflops=3 * flops / t_all / 1e12)
    if torch is not None and (dtype == "f32" or torch.cuda.is_available()):
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        tdt = torch.float16 if dtype == "f16" else torch.float32
        tx = torch.tensor(x.astype(np.float32), device=dev, dtype=tdt, requires_grad=True)
        tw = torch.tensor(w.astype(np.float32), device=dev, dtype=tdt, requires_grad=True)
        tb = torch.tensor(b, device=dev, dtype=tdt, requires_grad=True)
        tdy = torch.tensor(dy.astype(np.float32), device=dev, dtype=tdt)
        with torch.no_grad():
            tt_fwd = torch_time(lambda: torch.nn.functional.conv2d(tx, tw, tb, s, p), reps)

        def fb():
            tx.grad = tw.grad = tb.grad = None
            torch.nn.functional.conv2d(tx, tw, tb, s, p).backward(tdy)
        tt_all = torch_time(fb, reps)
        row.update(torch_device=dev, torch_fwd_ms=tt_fwd * 1e3, torch_fwd_bwd_ms=tt_all * 1e3,
                   ratio_fwd=tt_fwd / t_fwd, ratio_fwd_bwd=tt_all / t_all)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="batch-32 ResNet-50 shapes (for a GPU)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--dtypes", nargs="+", default=["f32", "f16"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    shapes, reps = (GPU, args.reps or 20) if args.gpu else (SMALL, args.reps or 2)
    dev = ev.get_device()
    tdev = ("cuda " + torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu") if torch else "absent"
    print(f"device: {dev.info.name} | torch: {torch.__version__ if torch else '-'} on {tdev} "
          f"| threads {torch.get_num_threads() if torch else '-'}")
    print(f"{'shape':24s} {'dt':3s} {'fwd ms':>9s} {'torch':>9s} {'ratio':>6s}   {'f+b ms':>9s} {'torch':>9s} {'ratio':>6s}  TFLOP/s f+b")
    rows = []
    for shape in shapes:
        for dt in args.dtypes:
            if dt == "f16" and not dev.has("storage_buffer_16bit_access"):
                continue
            r = bench(shape, dt, reps)
            rows.append(r)
            tf, tb = r.get("torch_fwd_ms", float("nan")), r.get("torch_fwd_bwd_ms", float("nan"))
            print(f"{r['shape']:24s} {dt:3s} {r['fwd_ms']:9.2f} {tf:9.2f} {r.get('ratio_fwd', float('nan')):6.2f}   "
                  f"{r['fwd_bwd_ms']:9.2f} {tb:9.2f} {r.get('ratio_fwd_bwd', float('nan')):6.2f}  {r['fwd_bwd_tflops']:.4f}")
            sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev.info.name, torch=tdev, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
