#!/usr/bin/env python3
"""Every matmul variant that applies, forced one at a time (EVERMIND_VK_MATMUL_VARIANT), on n^3:
GFLOP/s and max relative error vs numpy float64 on a 512^3 check."""
import os
import sys
import time

import numpy as np

import evermind_vk as ev
from evermind_vk import kernels


def main(sizes):
    dev = ev.get_device()
    print(f"# {dev.info.name}")
    for dtype in ("f32", "f16"):
        for v in kernels.usable("matmul", dtype, dev):
            os.environ["EVERMIND_VK_MATMUL_VARIANT"] = v.name
            rng = np.random.default_rng(0)
            npd = np.float16 if dtype == "f16" else np.float32
            a = rng.standard_normal((512, 512)).astype(npd)
            b = rng.standard_normal((512, 512)).astype(npd)
            got = ev.matmul(ev.tensor(a), ev.tensor(b)).numpy().astype(np.float64)
            want = a.astype(np.float64) @ b.astype(np.float64)
            err = np.abs(got - want).max() / np.abs(want).max()
            for n in sizes:
                A = ev.tensor(rng.standard_normal((n, n)).astype(npd))
                B = ev.tensor(rng.standard_normal((n, n)).astype(npd))
                C = ev.empty((n, n), dtype)
                with ev.record(run=False) as p:
                    for _ in range(5):
                        ev.matmul(A, B, out=C)
                p.run()
                t0 = time.perf_counter()
                p.run()
                dt = (time.perf_counter() - t0) / 5
                print(f"{v.name:28s} n={n:5d} {2 * n ** 3 / dt / 1e9:10.1f} GFLOP/s  check rel.err {err:.1e}")
    os.environ.pop("EVERMIND_VK_MATMUL_VARIANT")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [256])
