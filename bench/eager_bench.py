#!/usr/bin/env python3
"""Eager calls against the recorded replay of the same work, measured in the same run.

    python bench/eager_bench.py                        # lavapipe-sized: matmul 256^3, attention S=128 H=4 hd=64
    python bench/eager_bench.py --matmul 1024 --attn 1024 --reps 20
    EVERMIND_VK_DISABLE_SHARED_PIPELINES=1 python bench/eager_bench.py   # the old behaviour: a pipeline per tensor set

Eager: each call allocates fresh output tensors (as user code does) and runs its dispatches one
submit each; the first call (which builds the variants' pipelines) is excluded. Replay: the same call
recorded once with `ev.record()` and re-run with `Program.run()` (one submit). Eager and replay runs
alternate (a shared machine's load hits both alike); medians over --reps.
The issue's bars (lavapipe): matmul eager / replay <= 2, attention fwd+bwd eager / replay <= 1.5.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import evermind_vk as ev
from evermind_vk import ops


def median_s(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def compare(name: str, step, reps: int, dev) -> dict:
    built0 = dev.pipelines_built
    t0 = time.perf_counter()
    step()  # first call: pipelines of its variants are built here
    first = time.perf_counter() - t0
    built_first = dev.pipelines_built - built0
    with ev.record(run=False) as prog:
        step()
    prog.run()  # warm-up
    eager_ts, replay_ts = [], []
    for _ in range(reps):  # interleaved, so that load from other processes hits both alike
        eager_ts.append(median_s(step, 1))
        replay_ts.append(median_s(prog.run, 1))
    eager, replay = statistics.median(eager_ts), statistics.median(replay_ts)
    built_later = dev.pipelines_built - built0 - built_first
    row = {"bench": name, "first_call_ms": first * 1e3, "eager_ms": eager * 1e3, "replay_ms": replay * 1e3,
           "eager_over_replay": eager / replay, "dispatches": len(prog),
           "pipelines_built_first_call": built_first, "pipelines_built_later_calls": built_later,
           "shared_pipelines": dev.share_pipelines}
    print(f"{name:<28} first call {first * 1e3:9.1f} ms | eager {eager * 1e3:8.2f} ms | replay {replay * 1e3:8.2f} ms "
          f"| eager/replay {eager / replay:5.2f} | {len(prog)} dispatches | pipelines built: {built_first} first, "
          f"{built_later} in {reps} later calls")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matmul", type=int, default=256, help="n of the n^3 f32 matmul")
    ap.add_argument("--attn", type=int, default=128, help="sequence length of causal attention (H=4, KV=2, hd=64)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    dev = ev.get_device()
    print(f"device: {dev.info.name} | shared pipelines: {'on' if dev.share_pipelines else 'off'}")
    rng = np.random.default_rng(0)
    n = args.matmul
    a = ev.tensor(rng.standard_normal((n, n)).astype(np.float32))
    b = ev.tensor(rng.standard_normal((n, n)).astype(np.float32))
    rows = [compare(f"matmul f32 {n}^3", lambda: ev.matmul(a, b), args.reps, dev)]
    S, H, KVH, D = args.attn, 4, 2, 64
    q, k, v, do = (ev.tensor(rng.standard_normal(s).astype(np.float32))
                   for s in ((S, H, D), (S, KVH, D), (S, KVH, D), (S, H, D)))

    def attn():
        o, p = ops.attention(q, k, v, causal=True)
        ops.attention_backward(q, k, v, do, p, causal=True)
    rows.append(compare(f"attention fwd+bwd S={S}", attn, args.reps, dev))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev.info.name, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
