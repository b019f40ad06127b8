#!/usr/bin/env python3
"""Data-parallel scaling: tokens/s of TransformerLM training with N = 1, 2, 4 ranks (processes, gloo),
per-rank batch B (weak scaling: the global batch is N·B), and where the step time goes.

    python bench/dp_bench.py                                   # a small config (lavapipe, 2 CPU cores)
    EVERMIND_VK_DEVICE=0 python bench/dp_bench.py --nprocs 1,2 --d-model 512 --layers 8 --heads 8 \\
        --kv-heads 4 --d-ff 1408 --seq-len 256 --batch 8 --steps 20 # two ranks sharing one GPU

N = 1 is the plain single-process Trainer (no world, one recorded submit per step): the baseline of
scaling efficiency = tokens/s(N) / (N x tokens/s(1)). For N > 1 each rank reports the host-clock time of
its communication phases (gradient download, bucketed all-reduce, ZeRO broadcast, the stop agreement)
as a share of its step time, and the GPU time of its recorded programs from ev.profile (micro =
forward + backward, apply = upload + clip + AdamW). Ranks sharing one device (lavapipe, or
EVERMIND_VK_DEVICE=0 on one GPU) compete for it, so N ranks cannot beat one there: the measurement
is then the overhead of the data-parallel machinery, not multi-device speed-up.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

WORKER = r"""
import json, os, sys, time
import numpy as np
import evermind_vk as ev
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import Trainer
from evermind_vk.train.distributed import World
a = json.loads(sys.argv[1])
cfg = LMConfig(**a["cfg"])
world = World.from_env() if "WORLD_SIZE" in os.environ else None
n = world.size if world else 1
dev = ev.get_device(world.device() if world else None)
tr = Trainer(TransformerLM(cfg, device=dev), world=world, zero=a["zero"])
gb = n * a["batch"] * a["seq_len"]
ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (a["warmup"] + a["steps"] + 1) * gb + 1)
stamps = []
tr.train(ids, seq_len=a["seq_len"], batch_size=a["batch"], lr=1e-3, max_steps=a["warmup"] + a["steps"],
         on_step=lambda s, m: stamps.append((time.perf_counter(), m["tokens"], dict(tr._dp.timing) if tr._dp else None)))
t0, _, tim0 = stamps[a["warmup"] - 1]
t1, _, tim1 = stamps[-1]
tokens = sum(s[1] for s in stamps[a["warmup"]:])
out = {"rank": world.rank if world else 0, "tokens_per_s": tokens / (t1 - t0), "step_ms": 1e3 * (t1 - t0) / a["steps"],
       "device": dev.info.name}
if tr._dp:
    comm = {k: 1e3 * (tim1[k] - tim0[k]) / a["steps"] for k in ("download_s", "allreduce_s", "broadcast_s", "agree_s")}
    out["comm_ms"] = comm
    out["opt_state_bytes"] = tr._dp.optimizer_state_bytes()
    try:
        for kind in ("micro", "apply"):
            prog = next(s.program for k, s in tr._steps.items() if k[-1] == kind)
            out[f"gpu_{kind}_ms"] = ev.profile(prog, repeats=3).gpu_ms
        downloads = next(iter(tr._dp._download.values()))  # one recorded download per gradient bucket
        out["gpu_download_ms"] = sum(ev.profile(p, repeats=3).gpu_ms for _, p in downloads)
        out["buckets"] = len(downloads)
    except ev.EvermindError as e:
        out["profile"] = str(e)
else:
    out["opt_state_bytes"] = sum(m.nbytes + v.nbytes for m, v in tr.optimizer.state.values())
print("RESULT " + json.dumps(out), flush=True)
"""


def run(n: int, args, cfg: dict) -> list[dict]:
    import socket
    payload = json.dumps({"cfg": cfg, "batch": args.batch, "seq_len": args.seq_len, "steps": args.steps,
                          "warmup": args.warmup, "zero": args.zero and n > 1})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(n):
        env = dict(os.environ)
        if n > 1:
            env.update(RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, payload], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    res = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"rank failed ({p.returncode}):\n{err[-2000:]}")
        res.append(json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:]))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nprocs", default="1,2,4")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--d-ff", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4, help="sequences per rank per step")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (after --warmup)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed first steps (recording, pipeline builds)")
    ap.add_argument("--zero", action="store_true", help="ZeRO-1 optimizer-state sharding for N > 1")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    cfg = {"d_model": args.d_model, "n_layers": args.layers, "n_heads": args.heads, "n_kv_heads": args.kv_heads,
           "d_ff": args.d_ff, "max_seq_len": max(64, args.seq_len)}
    ns = [int(x) for x in args.nprocs.split(",")]
    results, base = {}, None
    print(f"model {cfg}, per-rank batch {args.batch} x {args.seq_len} tokens, {args.steps} timed steps"
          f"{', ZeRO-1' if args.zero else ''}; EVERMIND_VK_DEVICE={os.environ.get('EVERMIND_VK_DEVICE', '(round-robin)')}")
    print(f"{'N':>2} {'tokens/s':>10} {'eff.':>6} {'step ms':>8} {'comm ms':>8} {'comm %':>7} "
          f"{'GPU micro ms':>12} {'GPU apply ms':>12} {'GPU dl ms':>9} {'opt. state B/rank':>17}  device")
    for n in ns:
        rs = run(n, args, cfg)
        tps = rs[0]["tokens_per_s"]  # rank 0's global tokens (every rank's rows) per second
        if n == 1:
            base = tps
        eff = tps / (n * base) if base else float("nan")
        step = float(np.mean([r["step_ms"] for r in rs]))
        comm = float(np.mean([sum(r["comm_ms"].values()) for r in rs])) if n > 1 else 0.0
        gm = np.mean([r.get("gpu_micro_ms", np.nan) for r in rs]) if n > 1 else float("nan")
        ga = np.mean([r.get("gpu_apply_ms", np.nan) for r in rs]) if n > 1 else float("nan")
        gd = np.mean([r.get("gpu_download_ms", np.nan) for r in rs]) if n > 1 else float("nan")
        opt = max(r["opt_state_bytes"] for r in rs)
        results[n] = {"tokens_per_s": tps, "efficiency": eff, "step_ms": step, "comm_ms": comm,
                      "comm_share": comm / step if step else 0.0, "gpu_micro_ms": gm, "gpu_apply_ms": ga, "gpu_download_ms": gd,
                      "opt_state_bytes_max_rank": opt, "ranks": rs}
        print(f"{n:>2} {tps:>10.0f} {eff:>6.2f} {step:>8.1f} {comm:>8.2f} {100 * comm / step:>6.1f}% "
              f"{gm:>12.2f} {ga:>12.2f} {gd:>9.3f} {opt:>17,}  {rs[0]['device']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=float)


if __name__ == "__main__":
    main()
