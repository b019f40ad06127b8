"""The evermind-vk command."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def cmd_devices(args) -> int:
    import evermind_vk as ev
    for d in ev.devices():
        feats = ", ".join(k for k, v in d.features.items() if v) or "none"
        print(f"[{d.index}] {d.name} ({d.type}) subgroup={d.subgroup_size} shared={d.shared_memory} B "
              f"f16={'yes' if d.f16 else 'no'} coopmat={'yes' if d.coopmat else 'no'}\n    features: {feats}")
    return 0


def cmd_check(args) -> int:
    """Run matmul on the device and compare with numpy (float64)."""
    import evermind_vk as ev
    dev = ev.get_device(args.device)
    rng = np.random.default_rng(0)
    n = args.size
    ok = True
    for dtype in ("f32", "f16"):
        if dtype == "f16" and not dev.info.f16:
            print(f"matmul {dtype}: skipped ({dev.info.name} has no 16-bit storage)")
            continue
        np_dt = np.float16 if dtype == "f16" else np.float32
        a = rng.standard_normal((n, n)).astype(np_dt)
        b = rng.standard_normal((n, n)).astype(np_dt)
        ta, tb = ev.tensor(a, device=dev), ev.tensor(b, device=dev)
        ev.matmul(ta, tb).numpy()  # warm-up: pipeline creation
        t0 = time.perf_counter()
        got = ev.matmul(ta, tb).numpy().astype(np.float64)
        dt = time.perf_counter() - t0
        want = a.astype(np.float64) @ b.astype(np.float64)
        rel = np.abs(got - want).max() / np.abs(want).max()
        tol = 1e-5 if dtype == "f32" else 2e-3
        ok &= rel <= tol
        print(f"matmul {dtype} {n}x{n}x{n} on {dev.info.name}: max rel. error {rel:.2e} "
              f"({'ok' if rel <= tol else 'FAIL'}, tol {tol:g}), {2 * n**3 / dt / 1e9:.2f} GFLOP/s incl. readback")
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="evermind-vk", description="Train and run small models on Vulkan.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("devices", help="list Vulkan devices and their capabilities").set_defaults(fn=cmd_devices)
    p = sub.add_parser("check", help="run a matmul on the device and check it against numpy")
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--device", default=None, help="index or name substring (default: EVERMIND_VK_DEVICE or 0)")
    p.set_defaults(fn=cmd_check)
    args = ap.parse_args(argv)
    from .errors import EvermindError
    try:
        return args.fn(args)
    except EvermindError as e:
        print(f"evermind-vk: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
