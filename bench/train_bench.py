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

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def torch_model(cfg: LMConfig, dev):
    nn = torch.nn
    H, KVH, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim

    class RMS(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + cfg.norm_eps) * self.w

    def rope(x, S):  # x [B, S, h, hd], half-split
        half = hd // 2
        freq = cfg.rope_theta ** (-2 * torch.arange(half, device=x.device) / hd)
        ang = torch.arange(S, device=x.device)[:, None] * freq[None]
        c, s = ang.cos()[None, :, None], ang.sin()[None, :, None]
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * c - b * s, a * s + b * c], -1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg.d_model
            self.n1, self.n2 = RMS(d), RMS(d)
            self.wq = nn.Linear(d, H * hd, bias=False)
            self.wk = nn.Linear(d, KVH * hd, bias=False)
            self.wv = nn.Linear(d, KVH * hd, bias=False)
            self.wo = nn.Linear(H * hd, d, bias=False)
            self.gu = nn.Linear(d, 2 * cfg.d_ff, bias=False)
            self.down = nn.Linear(cfg.d_ff, d, bias=False)

        def forward(self, x):
            B, S, _ = x.shape
            h = self.n1(x)
            q = rope(self.wq(h).view(B, S, H, hd), S).transpose(1, 2)
            k = rope(self.wk(h).view(B, S, KVH, hd), S).transpose(1, 2).repeat_interleave(H // KVH, 1)
            v = self.wv(h).view(B, S, KVH, hd).transpose(1, 2).repeat_interleave(H // KVH, 1)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.wo(a.transpose(1, 2).reshape(B, S, H * hd))
            g, u = self.gu(self.n2(x)).chunk(2, -1)
            return x + self.down(torch.nn.functional.silu(g) * u)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.n_layers))
            self.norm = RMS(cfg.d_model)

        def forward(self, ids):
            x = self.emb(ids)
            for b in self.blocks:
                x = b(x)
            return self.norm(x) @ self.emb.weight.T

    return LM().to(dev)


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
