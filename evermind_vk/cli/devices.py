"""`evermind-vk devices` and `check`: the Vulkan devices, and a matmul checked against numpy."""
from __future__ import annotations

import argparse
import time

import numpy as np

from ..ops import matmul
from ..runtime import devices, get_device, tensor
from .args import add_device
from .common import POS_INT, say


def cmd_devices(args) -> int:
    """List every Vulkan device with its capabilities."""
    for d in devices():
        feats = ", ".join(k for k, v in d.features.items() if v) or "none"
        print(f"[{d.index}] {d.name} ({d.type}) subgroup={d.subgroup_size} shared={d.shared_memory} B "
              f"f16={'yes' if d.f16 else 'no'} coopmat={'yes' if d.coopmat else 'no'}\n    features: {feats}")
    return 0


def cmd_check(args) -> int:
    """Run matmul on the device and compare with numpy (float64), saying what it does as it goes."""
    say(f"opening Vulkan device {args.device if args.device is not None else '(default)'} ...")
    dev = get_device(args.device)
    say(f"device: {dev.info.name} ({dev.info.type})")
    rng = np.random.default_rng(0)
    n = args.size
    ok = True
    for dtype in ("f32", "f16"):
        if dtype == "f16" and not dev.info.f16:
            say(f"matmul {dtype}: skipped ({dev.info.name} has no 16-bit storage)")
            continue
        np_dt = np.float16 if dtype == "f16" else np.float32
        a = rng.standard_normal((n, n)).astype(np_dt)
        b = rng.standard_normal((n, n)).astype(np_dt)
        ta, tb = tensor(a, device=dev), tensor(b, device=dev)
        say(f"matmul {dtype} {n}x{n}x{n}: building the pipeline (the first run on lavapipe can take a minute) ...")
        t0 = time.perf_counter()
        matmul(ta, tb).numpy()  # warm-up: pipeline creation
        say(f"matmul {dtype}: pipeline ready in {time.perf_counter() - t0:.1f}s; timing one product ...")
        t0 = time.perf_counter()
        got = matmul(ta, tb).numpy().astype(np.float64)
        dt = time.perf_counter() - t0
        want = a.astype(np.float64) @ b.astype(np.float64)
        rel = np.abs(got - want).max() / np.abs(want).max()
        tol = 1e-5 if dtype == "f32" else 2e-3
        ok &= rel <= tol
        say(f"matmul {dtype} {n}x{n}x{n} on {dev.info.name}: max rel. error {rel:.2e} "
            f"({'ok' if rel <= tol else 'FAIL'}, tol {tol:g}), {2 * n**3 / dt / 1e9:.2f} GFLOP/s incl. readback")
    return 0 if ok else 1



def add_parsers(sub) -> None:
    """The `devices` and `check` subcommands."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    sub.add_parser("devices", help="list Vulkan devices and their capabilities", formatter_class=fmt
                   ).set_defaults(fn=cmd_devices)
    p = sub.add_parser("check", help="run a matmul on the device and check it against numpy", formatter_class=fmt)
    p.add_argument("--size", type=POS_INT, default=256, help="matrix size N (N x N x N products)")
    add_device(p)
    p.set_defaults(fn=cmd_check)
