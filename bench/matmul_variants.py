#!/usr/bin/env python3
"""Every matmul variant that applies, forced one at a time (EVERMIND_VK_MATMUL_VARIANT), on n^3:
GFLOP/s, max relative error vs numpy float64 on a 512^3 check, and the ratio to PyTorch's matmul
measured in the same run when torch is importable (cuBLAS with TF32 off on a CUDA host).

    python bench/matmul_variants.py [--dtype f32] [--only SUBSTRING] 4096 8192
"""
import argparse
import os
import time

import numpy as np

import evermind_vk as ev
from evermind_vk.runtime import kernels

try:
    import torch
except ImportError:
    torch = None


def torch_gflops(n: int, dtype: str):
    if torch is None:
        return None, None
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tdt = torch.float16 if (dtype == "f16" and dev == "cuda") else torch.float32
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(n, n, device=dev, dtype=tdt)
    b = torch.randn(n, n, device=dev, dtype=tdt)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    a @ b
    sync()
    t0 = time.perf_counter()
    for _ in range(5):
        a @ b
    sync()
    return 2 * n ** 3 / ((time.perf_counter() - t0) / 5) / 1e9, f"torch {dev} {str(tdt).split('.')[-1]}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", type=int, nargs="*", default=[256])
    ap.add_argument("--dtype", choices=["f32", "f16"], action="append")
    ap.add_argument("--only", default="", help="variants whose name contains this")
    args = ap.parse_args(argv)
    dev = ev.get_device()
    print(f"# {dev.info.name}")
    for dtype in args.dtype or ["f32", "f16"]:
        ref = {n: torch_gflops(n, dtype) for n in args.sizes}
        for n, (g, what) in ref.items():
            if g:
                print(f"{what:28s} n={n:5d} {g:10.1f} GFLOP/s")
        for v in kernels.usable("matmul", dtype, dev):
            if args.only not in v.name:
                continue
            os.environ["EVERMIND_VK_MATMUL_VARIANT"] = v.name
            rng = np.random.default_rng(0)
            npd = np.float16 if dtype == "f16" else np.float32
            a = rng.standard_normal((512, 512)).astype(npd)
            b = rng.standard_normal((512, 512)).astype(npd)
            got = ev.matmul(ev.tensor(a), ev.tensor(b)).numpy().astype(np.float64)
            want = a.astype(np.float64) @ b.astype(np.float64)
            err = np.abs(got - want).max() / np.abs(want).max()
            for n in args.sizes:
                A = ev.tensor(rng.standard_normal((n, n)).astype(npd))
                B = ev.tensor(rng.standard_normal((n, n)).astype(npd))
                C = ev.empty((n, n), dtype)
                with ev.record(run=False) as p:
                    for _ in range(5):
                        ev.matmul(A, B, out=C)
                p.run()
                t0 = time.perf_counter()
                p.run()
                g = 2 * n ** 3 / ((time.perf_counter() - t0) / 5) / 1e9
                ratio = f"  {g / ref[n][0]:.3f} of {ref[n][1]}" if ref[n][0] else ""
                print(f"{v.name:34s} n={n:5d} {g:10.1f} GFLOP/s  check rel.err {err:.1e}{ratio}")
    os.environ.pop("EVERMIND_VK_MATMUL_VARIANT", None)


if __name__ == "__main__":
    main()
