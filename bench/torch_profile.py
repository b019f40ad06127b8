#!/usr/bin/env python3
"""Where PyTorch's training step spends its GPU time: the torch twin of our TransformerLM
(bench/torch_lm.py, the optimizer and clipping of bench/train_bench.py) under torch.profiler, kernel by
kernel and by kind (GEMM, attention, Triton-fused, optimizer, other), per step. The counterpart of
our own profile (`evermind-vk profile`, bench/train_bench.py's table), for comparing the two kind by kind.

    python bench/torch_profile.py --config 23.7m                    # torch.compile f32 (TF32 off)
    python bench/torch_profile.py --config 23.7m --variant eager-f32
"""
import argparse
import re

import numpy as np

import torch

from torch_lm import torch_model  # bench/ is on sys.path when this file runs as a script
from train_bench import CONFIGS, TORCH_VARIANTS

from evermind_vk.models import LMConfig

KINDS = (  # (kind, pattern on the kernel's name), first match wins
    ("attention", r"fmha|flash|attention|attn|efficient"),
    ("gemm", r"gemm|sgemm|cutlass|sm\d\d_xmma|ampere_|hopper|nvjet|cublas"),
    ("optimizer", r"multi_tensor|foreach|adam|_amp_"),
    ("triton (fused)", r"triton"),
)


def kind_of(name: str) -> str:
    for kind, pat in KINDS:
        if re.search(pat, name, re.I):
            return kind
    return "other"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="23.7m")
    ap.add_argument("--variant", choices=TORCH_VARIANTS, default="compile-f32")
    ap.add_argument("--steps", type=int, default=10, help="profiled steps")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("torch_profile: needs CUDA (torch.profiler's device times)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    d, n_layers, H, KVH, ff, B, L = CONFIGS[a.config]
    cfg = LMConfig(d_model=d, n_layers=n_layers, n_heads=H, n_kv_heads=KVH, d_ff=ff, max_seq_len=L)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, B * L + 1)
    x = torch.tensor(ids[:-1].reshape(B, L), device="cuda")
    y = torch.tensor(ids[1:].reshape(B, L), device="cuda")
    torch.manual_seed(0)
    tm = torch_model(cfg, "cuda")
    opt = torch.optim.AdamW(tm.parameters(), lr=1e-3, weight_decay=1e-2)
    fwd = torch.compile(tm) if a.variant.startswith("compile") else tm
    bf16 = a.variant.endswith("bf16")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(fwd(x).float().view(-1, cfg.vocab_size), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tm.parameters(), 1.0)
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
    per = {}
    for ev_ in prof.key_averages():
        t = ev_.device_time_total if hasattr(ev_, "device_time_total") else ev_.cuda_time_total
        if t <= 0 or ev_.device_type != torch.autograd.DeviceType.CUDA:
            continue
        n, c = per.get(ev_.key, (0.0, 0))
        per[ev_.key] = (n + t, c + ev_.count)
    total = sum(t for t, _ in per.values())
    print(f"# torch {torch.__version__} {a.variant} on {torch.cuda.get_device_name()}, config {a.config} "
          f"(batch {B} x {L}), {a.steps} steps profiled; GPU ms per step")
    kinds = {}
    for n, (t, c) in per.items():
        k = kind_of(n)
        kt, kc = kinds.get(k, (0.0, 0))
        kinds[k] = (kt + t, kc + c)
    print(f"{'kind':<16} {'launches':>9} {'ms/step':>9} {'%':>6}")
    for k, (t, c) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print(f"{k:<16} {c / a.steps:>9.1f} {t / 1e3 / a.steps:>9.3f} {100 * t / total:>5.1f}%")
    print(f"{'GPU total':<16} {sum(c for _, c in per.values()) / a.steps:>9.1f} {total / 1e3 / a.steps:>9.3f}")
    print(f"\n{'kernel':<90} {'kind':<15} {'n/step':>7} {'ms/step':>8}")
    for n, (t, c) in sorted(per.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"{n[:90]:<90} {kind_of(n):<15} {c / a.steps:>7.1f} {t / 1e3 / a.steps:>8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
