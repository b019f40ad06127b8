#!/usr/bin/env python3
"""Training-step throughput and memory of evermind-vk's TransformerLM (f32 and f16 mixed precision) against
the same architecture in PyTorch (eager f32, eager bf16-autocast, torch.compile f32, torch.compile
bf16-autocast), same config, same data, same run. CUDA when torch sees one, else CPU.

    python bench/train_bench.py                        # the small default config (lavapipe)
    python bench/train_bench.py --config tiny          # d128, 4 layers, batch 8 x 128
    python bench/train_bench.py --config 23.7m         # d512, 8 layers, 8/4 heads, ff 1408, batch 16 x 256
    python bench/train_bench.py --config 124m          # GPT-2-small class: d768, 12 layers, 12/4 heads, ff 3072,
                                                       # vocabulary 49,152, batch 8 x 1,024
    python bench/train_bench.py --config 350m          # d1024, 24 layers, 16/8 heads, ff 4096, vocab 49,152, 4 x 1,024

Per variant: tokens/s over --steps timed steps (after --warmup steps; torch.compile compiles in its warm-up),
the peak device memory of a step (torch: torch.cuda.max_memory_allocated after reset_peak_memory_stats, CUDA
only; evermind-vk: Device.max_memory_allocated, the bytes of device buffers our runtime held: weights,
AdamW moments and the recorded step's buffers), the driver's view of the same (on NVIDIA: the rise of
nvidia-smi's memory.used over the variant, sampled every 50 ms, so contexts and allocator slack count too), and
the ratio of each evermind-vk variant to each torch
baseline. Then the profiler table (ev.profile) of our f32 and f16 steps. --skip NAME skips a variant
(eager-f32, eager-bf16, compile-f32, compile-bf16, compile-f32-best, compile-bf16-best, ev-f32, ev-f16;
the -best variants are what a PyTorch user tuning for speed would run: SDPA with native GQA, fused RMSNorm and
the fused AdamW, compiled; the plain compile variants are the twin as written); a variant that fails says why and the
rest still run. Timings on a shared machine are noisy.
"""
import argparse
import gc
import json
import time
import traceback

import numpy as np

import evermind_vk as ev
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import Trainer

from torch_lm import torch_model  # bench/ is on sys.path when this file runs as a script

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

CONFIGS = {  # name: (d_model, layers, heads, kv_heads, d_ff, batch, seq_len, vocab)
    "small": (64, 2, 4, 2, 128, 8, 64, 256),
    "tiny": (128, 4, 4, 2, 352, 8, 128, 256),
    "23.7m": (512, 8, 8, 4, 1408, 16, 256, 256),
    "124m": (768, 12, 12, 4, 3072, 8, 1024, 49152),
    "350m": (1024, 24, 16, 8, 4096, 4, 1024, 49152),
}
TORCH_VARIANTS = ("eager-f32", "eager-bf16", "compile-f32", "compile-bf16", "compile-f32-best", "compile-bf16-best")
EV_VARIANTS = ("ev-f32", "ev-f16")


def bench_torch(name, cfg, ids, B, L, steps, warmup, dev):
    """tokens/s and peak CUDA memory (None on CPU) of one torch variant."""
    torch.manual_seed(0)
    best = name.endswith("-best")
    tm = torch_model(cfg, dev, best=best)
    opt = torch.optim.AdamW(tm.parameters(), lr=1e-3, weight_decay=1e-2, fused=best and dev == "cuda")
    fwd = torch.compile(tm) if name.startswith("compile") else tm
    bf16 = "bf16" in name
    batches = [(torch.tensor(ids[i * B * L:(i + 1) * B * L].reshape(B, L), device=dev),
                torch.tensor(ids[i * B * L + 1:(i + 1) * B * L + 1].reshape(B, L), device=dev))
               for i in range(warmup + steps)]

    def step(x, y):
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16):
            logits = fwd(x)
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, cfg.vocab_size), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tm.parameters(), 1.0)
        opt.step()
        return loss

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    t0 = time.perf_counter()
    for x, y in batches[:warmup]:
        step(x, y)
    sync()
    warm_s = time.perf_counter() - t0
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for x, y in batches[warmup:]:
        loss = step(x, y)
    loss = float(loss.detach())
    sync()
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else None
    return {"tokens_per_s": B * L * steps / dt, "peak_bytes": peak, "warmup_s": warm_s, "final_loss": loss}


def bench_ev(precision, cfg, ids, B, L, steps, warmup, repeats):
    dev = ev.get_device()
    gc.collect()
    model = TransformerLM(cfg, device=dev)
    tr = Trainer(model, precision=precision)
    n_warm = B * L * warmup + 1
    t0 = time.perf_counter()
    tr.train(ids[:n_warm], seq_len=L, batch_size=B, lr=1e-3)  # records the step (builds pipelines), warms up
    warm_s = time.perf_counter() - t0
    dev.reset_peak_memory_stats()
    t0 = time.perf_counter()
    tr.train(ids[n_warm - 1:n_warm - 1 + B * L * steps + 1], seq_len=L, batch_size=B, lr=1e-3)
    dt = time.perf_counter() - t0
    out = {"tokens_per_s": B * L * steps / dt, "peak_bytes": dev.max_memory_allocated(), "warmup_s": warm_s,
           "final_loss": tr.history[-1]["loss"], "steps_timed": len(tr.history) - warmup}
    if tr.scaler is not None:
        out["loss_scale"], out["overflows"] = tr.scaler.scale, tr.scaler.overflows
    # per-kernel times with a barrier before every dispatch (clean attribution); the host time is the
    # step as recorded, independent dispatches overlapping
    prof = ev.profile(tr.step_program(L, B), repeats=repeats, serialize=True)
    out["profile"] = prof.table()
    out["profile_by_shape"] = prof.table(by="shape", top=25)
    out["gpu_ms"], out["host_ms"] = prof.gpu_ms, prof.host_ms
    del tr, model
    gc.collect()
    return out


class DriverMemory:
    """The rise of the driver's memory.used (nvidia-smi, MiB) over a block, sampled every 50 ms; None where
    nvidia-smi is absent (lavapipe, CPU)."""

    def __init__(self):
        self.base = self.peak = _smi_used()

    def __enter__(self):
        import threading
        self.base = self.peak = _smi_used()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._poll, daemon=True)
        if self.base is not None:
            self._t.start()
        return self

    def _poll(self):
        while not self._stop.wait(0.05):
            u = _smi_used()
            if u is not None and u > self.peak:
                self.peak = u

    def __exit__(self, *exc):
        self._stop.set()
        if self._t.is_alive():
            self._t.join()

    @property
    def rise_bytes(self):
        return None if self.base is None else (self.peak - self.base) * 2 ** 20


def _smi_used():
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=5)
        return int(out.stdout.split()[0]) if out.returncode == 0 else None
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def mib(b):
    return "n/a" if b is None else f"{b / 2 ** 20:,.1f} MiB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="small",
                    help="preset (d_model, layers, heads, kv heads, ff, batch, seq): " +
                         "; ".join(f"{k}={v}" for k, v in CONFIGS.items()))
    for flag in ("d-model", "layers", "heads", "kv-heads", "d-ff", "batch", "seq-len", "vocab"):
        ap.add_argument("--" + flag, type=int, default=None, help="override the preset's value")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per variant")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (recording, compilation)")
    ap.add_argument("--repeats", type=int, default=3, help="profiler runs of our step")
    ap.add_argument("--skip", action="append", default=[], choices=TORCH_VARIANTS + EV_VARIANTS)
    ap.add_argument("--json", default="train_bench.json")
    a = ap.parse_args(argv)
    d, n_layers, H, KVH, ff, B, L, V = CONFIGS[a.config]
    d, n_layers, H, KVH, ff, B, L, V = (v if o is None else o for v, o in zip(
        (d, n_layers, H, KVH, ff, B, L, V),
        (a.d_model, a.layers, a.heads, a.kv_heads, a.d_ff, a.batch, a.seq_len, a.vocab)))
    cfg = LMConfig(vocab_size=V, d_model=d, n_layers=n_layers, n_heads=H, n_kv_heads=KVH, d_ff=ff, max_seq_len=L)
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, B * L * (a.warmup + a.steps + 1) + 2)
    dev = ev.get_device()
    res = {"config": cfg.to_dict(), "batch": B, "seq_len": L, "steps": a.steps, "warmup": a.warmup,
           "params": TransformerLM(cfg, device=dev).num_parameters(), "device": dev.info.name, "variants": {}}
    gc.collect()
    print(f"config {a.config}: {res['params']:,} parameters, batch {B} x {L} tokens; evermind-vk on {dev.info.name}",
          flush=True)
    tdev = None
    if torch is None:
        print("torch not installed: no PyTorch baselines")
    else:
        tdev = "cuda" if torch.cuda.is_available() else "cpu"
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        res["torch"] = {"version": torch.__version__, "device": tdev,
                        "name": torch.cuda.get_device_name() if tdev == "cuda" else "CPU"}
        print(f"torch {torch.__version__} on {res['torch']['name']} (TF32 off)", flush=True)
    for name in TORCH_VARIANTS + EV_VARIANTS:
        if name in a.skip or (name in TORCH_VARIANTS and torch is None):
            continue
        gc.collect()
        if tdev == "cuda":
            torch.cuda.empty_cache()
        try:
            with DriverMemory() as drv:
                if name in TORCH_VARIANTS:
                    r = bench_torch(name, cfg, ids, B, L, a.steps, a.warmup, tdev)
                else:
                    r = bench_ev(name[3:], cfg, ids, B, L, a.steps, a.warmup, a.repeats)
            r["driver_rise_bytes"] = drv.rise_bytes
        except Exception as e:  # say why, run the rest
            r = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
            traceback.print_exc()
        res["variants"][name] = r
        if "error" in r:
            print(f"{name:<17} FAILED: {r['error']}", flush=True)
        else:
            print(f"{name:<17} {r['tokens_per_s']:>12,.0f} tokens/s   peak {mib(r['peak_bytes']):>12}   "
                  f"driver +{mib(r['driver_rise_bytes']):>12}   "
                  f"(warm-up {r['warmup_s']:.1f}s, last loss {r['final_loss']:.3f})", flush=True)
    ok = {k: v for k, v in res["variants"].items() if "error" not in v}
    res["ratios"] = {}
    print("\nratios (evermind-vk tokens/s / torch tokens/s; memory: ours / torch's peak):")
    for e in EV_VARIANTS:
        for t in TORCH_VARIANTS:
            if e in ok and t in ok:
                r = ok[e]["tokens_per_s"] / ok[t]["tokens_per_s"]
                m = (ok[e]["peak_bytes"] / ok[t]["peak_bytes"]) if ok[t]["peak_bytes"] else None
                de, dt_ = ok[e].get("driver_rise_bytes"), ok[t].get("driver_rise_bytes")
                md = de / dt_ if de and dt_ else None
                res["ratios"][f"{e}/{t}"] = {"speed": r, "memory": m, "driver_memory": md}
                print(f"  {e} / {t:<17} speed {r:6.3f}x   memory {'n/a (CPU)' if m is None else f'{m:.3f}x'}"
                      f"   driver {'n/a' if md is None else f'{md:.3f}x'}")
    for e in EV_VARIANTS:
        if e in ok:
            print(f"\nprofile of our {e[3:]} step ({res['params']:,} parameters, batch {B} x {L}):")
            print(ok[e]["profile"])
            print(f"\nthe same step's 25 costliest (kernel variant, launch sizes) pairs:")
            print(ok[e]["profile_by_shape"])
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    print(f"\nwrote {a.json}")


if __name__ == "__main__":
    main()
