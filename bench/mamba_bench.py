#!/usr/bin/env python3
"""HybridMambaModel (issue 12): time per training step vs sequence length (it must grow linearly), and
the same step of the float32 PyTorch reference (the plain per-token recurrence of
tests/models/mamba_ref.py) for comparison, plus recurrent generation tokens/s.

    python bench/mamba_bench.py [--layers mamba1,mamba1] [--d-model 32] [--lens 128,256,512,1024,2048]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "models"))

import evermind_vk as ev  # noqa: E402
from evermind_vk.models import HybridMambaConfig, HybridMambaModel  # noqa: E402
from evermind_vk.train import Trainer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="mamba1,mamba1")
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--lens", default="128,256,512,1024,2048")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--torch-max-len", type=int, default=512, help="the per-token PyTorch loop is slow")
    ap.add_argument("--gen-tokens", type=int, default=32)
    args = ap.parse_args()
    layers = tuple(args.layers.split(","))
    cfg = HybridMambaConfig(vocabSize=256, dModel=args.d_model, numLayers=len(layers), layers=layers, seed=0)
    dev = ev.get_device()
    out = {"device": dev.info.name, "layers": layers, "dModel": args.d_model, "rows": []}
    print(f"device {dev.info.name}; layers {','.join(layers)}; dModel {args.d_model}")
    for L in [int(x) for x in args.lens.split(",")]:
        m = HybridMambaModel(cfg)
        tr = Trainer(m)
        ids = np.random.default_rng(0).integers(0, 256, L * (args.steps + 1) + 1).astype(np.uint32)
        tr.train(ids[:L + 1], epochs=1, seq_len=L)  # records the step (first run)
        t0 = time.perf_counter()
        tr.train(ids, epochs=1, seq_len=L)
        n = len(tr.history) - 1
        ms = (time.perf_counter() - t0) / n * 1e3
        row = {"seq_len": L, "train_ms_per_step": ms, "train_us_per_token": ms * 1e3 / L}
        if L <= args.torch_max_len:
            import torch
            import mamba_ref
            torch.set_num_threads(1)
            P = {k: torch.tensor(v, requires_grad=True) for k, v in m.state_dict().items()}
            t0 = time.perf_counter()
            lg = mamba_ref.logits(P, cfg, ids[:L], 1)
            torch.nn.functional.cross_entropy(lg, torch.as_tensor(ids[1:L + 1].astype(np.int64))).backward()
            row["torch_ref_ms_per_step"] = (time.perf_counter() - t0) * 1e3
        out["rows"].append(row)
        print(json.dumps(row))
    m = HybridMambaModel(cfg)
    m.generate([1, 2, 3], max_new_tokens=2)
    t0 = time.perf_counter()
    m.generate([1, 2, 3], max_new_tokens=args.gen_tokens)
    out["generate_tokens_per_s"] = (args.gen_tokens + 2) / (time.perf_counter() - t0)
    print(f"recurrent generation: {out['generate_tokens_per_s']:.1f} tokens/s")
    L = [r["seq_len"] for r in out["rows"]]
    t = [r["train_ms_per_step"] for r in out["rows"]]
    out["loglog_slope"] = float(np.polyfit(np.log(L), np.log(t), 1)[0])
    print(f"time per step vs length, log-log slope {out['loglog_slope']:.2f} (1.0 = linear)")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
