#!/usr/bin/env python3
"""Training-step throughput (tokens/s) of evermind-vk's TransformerLM vs the same architecture in
PyTorch eager (CUDA if visible, else CPU), same shapes, same run.

    python bench/train_bench.py                                  # a small config (lavapipe)
    python bench/train_bench.py --d-model 512 --layers 8 --heads 8 --kv-heads 4 --d-ff 1408 \\
        --seq-len 256 --batch 16 --steps 20                       # a GPU
"""
import argparse
import json
import time

import numpy as np

from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import Trainer

from torch_lm import torch_model  # bench/ is on sys.path when this file runs as a script

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--d-ff", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json", default="train_bench.json")
    a = ap.parse_args(argv)
    cfg = LMConfig(d_model=a.d_model, n_layers=a.layers, n_heads=a.heads, n_kv_heads=a.kv_heads, d_ff=a.d_ff,
                   max_seq_len=a.seq_len)
    L, B = a.seq_len, a.batch
    ids = np.random.default_rng(0).integers(0, 256, B * L * (a.steps + 2) + 1)
    model = TransformerLM(cfg)
    tr = Trainer(model)
    tr.train(ids[: B * L * 2 + 1], epochs=1, seq_len=L, batch_size=B, lr=1e-3)  # record + warm up
    t0 = time.perf_counter()
    tr.train(ids[: B * L * a.steps + 1], epochs=1, seq_len=L, batch_size=B, lr=1e-3)
    ev_tps = B * L * a.steps / (time.perf_counter() - t0)
    out = {"config": cfg.to_dict(), "batch": B, "seq_len": L, "params": model.num_parameters(),
           "device": model.device.info.name, "evermind_tokens_per_s": ev_tps}
    print(f"evermind-vk on {model.device.info.name}: {ev_tps:,.0f} tokens/s ({model.num_parameters():,} params)")
    if torch is not None:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        torch.backends.cuda.matmul.allow_tf32 = False
        tm = torch_model(cfg, dev)
        opt = torch.optim.AdamW(tm.parameters(), lr=1e-3)
        x = torch.tensor(ids[: B * L].reshape(B, L), device=dev)
        y = torch.tensor(ids[1: B * L + 1].reshape(B, L), device=dev)

        def step():
            loss = torch.nn.functional.cross_entropy(tm(x).view(-1, cfg.vocab_size), y.view(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(tm.parameters(), 1.0)
            opt.step()
        for _ in range(3):
            step()
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        if dev == "cuda":
            torch.cuda.synchronize()
        t_tps = B * L * a.steps / (time.perf_counter() - t0)
        out.update({"torch_device": dev, "torch_eager_tokens_per_s": t_tps, "ratio_vs_torch": ev_tps / t_tps})
        print(f"torch eager f32 on {dev}: {t_tps:,.0f} tokens/s  -> ratio {ev_tps / t_tps:.3f}")
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
