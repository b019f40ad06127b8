#!/usr/bin/env python3
"""HybridMambaModel against a PyTorch implementation of the same model, measured in the same run.

The PyTorch model (TorchMamba below) loads our weights and runs builderforce's blocks with the plain
sequential reference scan (a Python loop over time, vectorised over batch, heads, channels and states),
on CUDA when torch has it, else on the CPU. Printed:
  1. agreement: max |logits ours - logits torch| on the comparison batch;
  2. training tokens/s (forward, backward, AdamW step) of ours vs torch at --compare-len, and the ratio;
  3. generation tokens/s: ours with the O(1)-per-token recurrent state (one recorded submit per token when
     there are no attention layers) vs torch's recurrent step (the same state: conv window + scan state);
  4. ours: time per training step vs sequence length (--lens), and the slope of log(time) vs log(length)
     (1.0 = linear); torch too for lengths <= --torch-max-len.

    python bench/mamba_bench.py                                           # small, lavapipe-sized
    python bench/mamba_bench.py --layers mamba2,mamba2 --d-model 512 --batch 8 \\
        --lens 512,1024,2048,4096,8192,16384 --compare-len 1024 --torch-max-len 2048   # a GPU
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

import evermind_vk as ev
from evermind_vk.models import HybridMambaConfig, HybridMambaModel
from evermind_vk.train import Trainer


# -- the PyTorch model ----------------------------------------------------------------------------------
class TorchMamba:
    """builderforce's HybridMambaModel in PyTorch with our parameter names; scans one token at a time."""

    def __init__(self, state_dict: dict, cfg: HybridMambaConfig, device, dtype):
        import torch
        self.t, self.cfg, self.dev = torch, cfg, device
        self.P = {k: torch.tensor(np.asarray(v), dtype=dtype, device=device, requires_grad=True)
                  for k, v in state_dict.items()}

    # helpers
    def silu(self, x):
        return x * self.t.sigmoid(self.t.clamp(x, -15, 15))  # the device's silu (sigmoid argument clamped)

    def rms(self, x, w):
        return x * self.t.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w

    def conv(self, x, w, b):
        """Causal depthwise conv, builderforce's tap order (tap j reads t - j): x [Bt, S, C]."""
        K = w.shape[1]
        xp = self.t.nn.functional.pad(x.transpose(1, 2), (K - 1, 0))
        return self.t.nn.functional.conv1d(xp, w.flip(1)[:, None, :], b, groups=w.shape[0]).transpose(1, 2)

    def forward(self, ids, batch):
        t, P, c = self.t, self.P, self.cfg
        S = ids.numel() // batch
        x = P["embedding"][ids].reshape(batch, S, c.dModel)
        for i, kind in enumerate(c.layers):
            x = getattr(self, "_" + kind)(x, f"layer{i}.")
        return self.rms(x, P["final_norm"]) @ P["embedding"].T

    def _mamba1(self, x, L):
        t, P, c = self.t, self.P, self.cfg
        D, N, R = c.d_inner, c.dState, c.dt_rank
        xz = self.rms(x, P[L + "normWeight"]) @ P[L + "wInProj"].T + P[L + "bInProj"]
        u = self.silu(self.conv(xz[..., :D], P[L + "wConv"], P[L + "bConv"]))
        xp = u @ P[L + "wXProj"].T + P[L + "bXProj"]
        dl = t.nn.functional.softplus(xp[..., :R] @ P[L + "wDtProj"].T + P[L + "bDtProj"])
        A = -t.exp(t.clamp(P[L + "A_log"], -10, 5))
        Bm, Cm = xp[..., R:R + N], xp[..., R + N:]
        h = t.zeros(x.shape[0], D, N, dtype=x.dtype, device=x.device)
        ys = []
        for s in range(x.shape[1]):
            h = t.exp(dl[:, s, :, None] * A) * h + (dl[:, s] * u[:, s])[..., None] * Bm[:, s, None, :]
            ys.append((h * Cm[:, s, None, :]).sum(-1))
        y = (t.stack(ys, 1) + P[L + "D_vec"] * u) * self.silu(xz[..., D:])
        return x + y @ P[L + "wOutProj"].T + P[L + "bOutProj"]

    def _ssd_in(self, x, L, width):
        t, P, c = self.t, self.P, self.cfg
        D, H = c.d_inner, c.nHeads
        proj = self.rms(x, P[L + "preNormWeight"]) @ P[L + "wInProj"].T
        xbc = self.conv(proj[..., :D + width], P[L + "wConv"], P[L + "bConv"])
        dl = t.nn.functional.softplus(proj[..., D + width:] + P[L + "dt_bias"])  # [Bt, S, H]
        return xbc[..., :D], xbc[..., D:D + width // 2], xbc[..., D + width // 2:], dl

    def _mamba2(self, x, L):
        t, P, c = self.t, self.P, self.cfg
        H, G, N = c.nHeads, c.nGroups, c.dState
        hd = c.d_inner // H
        xs, Bm, Cm, dl = self._ssd_in(x, L, 2 * G * N)
        Bt, S = x.shape[:2]
        a = t.exp(dl * -t.nn.functional.softplus(P[L + "A_log"]))  # [Bt, S, H]
        Bh = Bm.reshape(Bt, S, G, N).repeat_interleave(H // G, 2)
        Ch = Cm.reshape(Bt, S, G, N).repeat_interleave(H // G, 2)
        xh = xs.reshape(Bt, S, H, hd)
        st = t.zeros(Bt, H, hd, N, dtype=x.dtype, device=x.device)
        ys = []
        for s in range(S):
            st = a[:, s, :, None, None] * st + xh[:, s, :, :, None] * Bh[:, s, :, None, :]
            ys.append((st * Ch[:, s, :, None, :]).sum(-1))
        y = t.stack(ys, 1) + P[L + "D_vec"][:, None] * xh
        return x + self.rms(y.reshape(Bt, S, -1), P[L + "normWeight"]) @ P[L + "wOutProj"].T

    def _mamba3(self, x, L):
        t, P, c = self.t, self.P, self.cfg
        H, G, Nc = c.nHeads, c.nGroups, c.dState
        hd = c.d_inner // H
        xs, Bm, Cm, dl = self._ssd_in(x, L, 4 * G * Nc)
        Bt, S = x.shape[:2]
        lam = t.complex(P[L + "A_log"][:, 0], P[L + "A_log"][:, 1])
        a = t.exp(dl * lam)  # [Bt, S, H] complex
        bb = (a - 1) * t.exp(-lam)
        cplx = lambda m: t.view_as_complex(m.reshape(Bt, S, G, Nc, 2).contiguous()).repeat_interleave(H // G, 2)  # noqa: E731
        Bh, Ch = cplx(Bm), cplx(Cm)
        xh = xs.reshape(Bt, S, H, hd)
        st = t.zeros(Bt, H, hd, Nc, dtype=a.dtype, device=x.device)
        ys = []
        for s in range(S):
            st = a[:, s, :, None, None] * st + (bb[:, s, :, None, None] * xh[:, s, :, :, None]) * Bh[:, s, :, None, :]
            ys.append((t.conj(Ch[:, s, :, None, :]) * st).real.sum(-1))
        y = t.stack(ys, 1) + P[L + "D_vec"][:, None] * xh
        return x + self.rms(y.reshape(Bt, S, -1), P[L + "normWeight"]) @ P[L + "wOutProj"].T

    def _attention(self, x, L):
        t, P, c = self.t, self.P, self.cfg
        Bt, S, d = x.shape
        H = c.nHeads
        qkv = self.rms(x, P[L + "normWeight"]) @ P[L + "wQKV"].T + P[L + "bQKV"]
        q, k, v = (qkv[..., j * d:(j + 1) * d].reshape(Bt, S, H, d // H).transpose(1, 2) for j in range(3))
        a = t.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + a.transpose(1, 2).reshape(Bt, S, d) @ P[L + "wO"].T + P[L + "bO"]

    # recurrent generation: O(1) per token in mamba layers (conv window + scan state), a KV cache in attention
    def init_state(self):
        t, c = self.t, self.cfg
        out = []
        for kind in c.layers:
            if kind == "attention":
                out.append({"k": [], "v": []})
                continue
            cd = {"mamba1": c.d_inner, "mamba2": c.d_inner + 2 * c.nGroups * c.dState,
                  "mamba3": c.d_inner + 4 * c.nGroups * c.dState}[kind]
            out.append({"win": t.zeros(c.dConv, cd, device=self.dev, dtype=self.P["embedding"].dtype), "h": None})
        return out

    def _conv_step(self, st, row, w, b):
        st["win"] = self.t.cat([st["win"][1:], row[None]])
        return b + (w.flip(1).T * st["win"]).sum(0)  # tap j reads the j-th newest

    def step(self, token, state):
        t, P, c = self.t, self.P, self.cfg
        x = P["embedding"][token]
        D, N, H, G = c.d_inner, c.dState, c.nHeads, c.nGroups
        hd = D // H
        for i, kind in enumerate(c.layers):
            L, st = f"layer{i}.", state[i]
            if kind == "mamba1":
                R = c.dt_rank
                xz = self.rms(x, P[L + "normWeight"]) @ P[L + "wInProj"].T + P[L + "bInProj"]
                u = self.silu(self._conv_step(st, xz[:D], P[L + "wConv"], P[L + "bConv"]))
                xp = u @ P[L + "wXProj"].T + P[L + "bXProj"]
                dl = t.nn.functional.softplus(xp[:R] @ P[L + "wDtProj"].T + P[L + "bDtProj"])
                A = -t.exp(t.clamp(P[L + "A_log"], -10, 5))
                h = st["h"] if st["h"] is not None else t.zeros(D, N, device=self.dev, dtype=x.dtype)
                st["h"] = h = t.exp(dl[:, None] * A) * h + (dl * u)[:, None] * xp[None, R:R + N]
                y = (h @ xp[R + N:] + P[L + "D_vec"] * u) * self.silu(xz[D:])
                x = x + y @ P[L + "wOutProj"].T + P[L + "bOutProj"]
            elif kind in ("mamba2", "mamba3"):
                width = (2 if kind == "mamba2" else 4) * G * N
                proj = self.rms(x, P[L + "preNormWeight"]) @ P[L + "wInProj"].T
                xbc = self._conv_step(st, proj[:D + width], P[L + "wConv"], P[L + "bConv"])
                dl = t.nn.functional.softplus(proj[D + width:] + P[L + "dt_bias"])
                xh = xbc[:D].reshape(H, hd)
                Bm, Cm = xbc[D:D + width // 2], xbc[D + width // 2:]
                if kind == "mamba2":
                    a = t.exp(dl * -t.nn.functional.softplus(P[L + "A_log"]))
                    Bh, Ch = (m.reshape(G, N).repeat_interleave(H // G, 0) for m in (Bm, Cm))
                    h = st["h"] if st["h"] is not None else t.zeros(H, hd, N, device=self.dev, dtype=x.dtype)
                    st["h"] = h = a[:, None, None] * h + xh[:, :, None] * Bh[:, None, :]
                    y = (h * Ch[:, None, :]).sum(-1)
                else:
                    lam = t.complex(P[L + "A_log"][:, 0], P[L + "A_log"][:, 1])
                    a = t.exp(dl * lam)
                    bb = (a - 1) * t.exp(-lam)
                    Bh, Ch = (t.view_as_complex(m.reshape(G, N, 2).contiguous()).repeat_interleave(H // G, 0)
                              for m in (Bm, Cm))
                    h = st["h"] if st["h"] is not None else t.zeros(H, hd, N, device=self.dev, dtype=a.dtype)
                    st["h"] = h = a[:, None, None] * h + (bb[:, None, None] * xh[:, :, None]) * Bh[:, None, :]
                    y = (t.conj(Ch[:, None, :]) * h).real.sum(-1)
                y = (y + P[L + "D_vec"][:, None] * xh).reshape(D)
                x = x + self.rms(y, P[L + "normWeight"]) @ P[L + "wOutProj"].T
            else:
                d = c.dModel
                qkv = self.rms(x, P[L + "normWeight"]) @ P[L + "wQKV"].T + P[L + "bQKV"]
                q, k, v = (qkv[j * d:(j + 1) * d].reshape(H, 1, d // H) for j in range(3))
                st["k"].append(k)
                st["v"].append(v)
                K, V = t.cat(st["k"], 1), t.cat(st["v"], 1)
                a = t.softmax(q @ K.transpose(1, 2) / math.sqrt(d // H), -1) @ V
                x = x + a.reshape(d) @ P[L + "wO"].T + P[L + "bO"]
        return self.rms(x, P["final_norm"]) @ P["embedding"].T

    def generate(self, prompt, n):
        with self.t.no_grad():
            state = self.init_state()
            for tok in prompt[:-1]:
                self.step(tok, state)
            out, cur = [], prompt[-1]
            for _ in range(n):
                cur = int(self.t.argmax(self.step(cur, state)))
                out.append(cur)
        return out


# -- measurements -----------------------------------------------------------------------------------------
def sync(torch, dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def ours_step_ms(cfg, L, batch, steps, seed=0):
    """ms per training step of ours (recorded step replayed; the first, recording step not counted)."""
    m = HybridMambaModel(cfg)
    tr = Trainer(m)
    ids = np.random.default_rng(seed).integers(0, cfg.vocabSize, batch * L * (steps + 1) + 1).astype(np.uint32)
    tr.train(ids[:batch * L + 1], epochs=1, seq_len=L, batch_size=batch)
    n0 = len(tr.history)
    t0 = time.perf_counter()
    tr.train(ids, epochs=1, seq_len=L, batch_size=batch)
    return (time.perf_counter() - t0) / max(1, len(tr.history) - n0) * 1e3


def torch_step_ms(torch, tm, cfg, L, batch, steps, seed=0):
    opt = torch.optim.AdamW(list(tm.P.values()), lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    times = []
    for k in range(steps + 1):  # the first step warms up (allocator, kernels)
        ids = torch.as_tensor(rng.integers(0, cfg.vocabSize, batch * L + 1).astype(np.int64), device=tm.dev)
        sync(torch, tm.dev)
        t0 = time.perf_counter()
        opt.zero_grad()
        lg = tm.forward(ids[:-1], batch).reshape(batch * L, -1)
        loss = torch.nn.functional.cross_entropy(lg, ids[1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(tm.P.values()), 1.0)
        opt.step()
        sync(torch, tm.dev)
        if k:
            times.append(time.perf_counter() - t0)
    return float(np.mean(times)) * 1e3


def slope(lens, ms):
    return float(np.polyfit(np.log(lens), np.log(ms), 1)[0]) if len(lens) > 1 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default="mamba1,mamba2")
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--batch", type=int, default=1, help="sequences per training step")
    ap.add_argument("--lens", default="128,256,512,1024", help="sequence lengths of the time-vs-length sweep")
    ap.add_argument("--compare-len", type=int, default=64, help="sequence length of the ours-vs-torch training run")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per measurement")
    ap.add_argument("--torch-max-len", type=int, default=256, help="the per-token PyTorch loop is slow")
    ap.add_argument("--torch-device", default=None, help="default: cuda when torch has it, else cpu")
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch
    tdev = torch.device(args.torch_device or ("cuda" if torch.cuda.is_available() else "cpu"))
    layers = tuple(args.layers.split(","))
    cfg = HybridMambaConfig(vocabSize=256, dModel=args.d_model, numLayers=len(layers), layers=layers, seed=0)
    dev = ev.get_device()
    out = {"device": dev.info.name, "torch_device": str(tdev), "torch": torch.__version__, "layers": layers,
           "dModel": args.d_model, "batch": args.batch, "params": HybridMambaModel(cfg).num_parameters()}
    print(f"ours on {dev.info.name}; torch {torch.__version__} on {tdev} (f32, sequential reference scan); "
          f"layers {','.join(layers)}; dModel {args.d_model}; {out['params']} parameters; batch {args.batch}")

    # 1. agreement on the same weights
    m = HybridMambaModel(cfg)
    tm = TorchMamba(m.state_dict(), cfg, tdev, torch.float32)
    L0, B0 = args.compare_len, args.batch
    ids = np.random.default_rng(1).integers(0, 256, B0 * L0).astype(np.uint32)
    ours_lg = m.forward(ev.tensor(ids), batch=B0).numpy()
    with torch.no_grad():
        th_lg = tm.forward(torch.as_tensor(ids.astype(np.int64), device=tdev), B0).reshape(B0 * L0, -1).cpu().numpy()
    out["max_logit_diff"] = float(np.abs(ours_lg - th_lg).max())
    print(f"same weights, {B0}x{L0} tokens: max |logits ours - torch| = {out['max_logit_diff']:.2e}")

    # 2. training tokens/s, same run
    o_ms = ours_step_ms(cfg, L0, B0, args.steps)
    t_ms = torch_step_ms(torch, TorchMamba(m.state_dict(), cfg, tdev, torch.float32), cfg, L0, B0, args.steps)
    tok = B0 * L0
    out["train"] = {"seq_len": L0, "ours_tokens_per_s": tok / o_ms * 1e3, "torch_tokens_per_s": tok / t_ms * 1e3,
                    "ours_over_torch": t_ms / o_ms}
    print(f"train {B0}x{L0}: ours {tok / o_ms * 1e3:.0f} tokens/s ({o_ms:.1f} ms/step), torch {tok / t_ms * 1e3:.0f} "
          f"tokens/s ({t_ms:.1f} ms/step): ours/torch = {t_ms / o_ms:.2f}x")

    # 3. generation tokens/s: recurrent state on both sides
    prompt = [1, 2, 3, 4]
    m.generate(prompt, max_new_tokens=2)
    t0 = time.perf_counter()
    g_ours = m.generate(prompt, max_new_tokens=args.gen_tokens)
    o_tps = (len(prompt) - 1 + len(g_ours)) / (time.perf_counter() - t0)
    tm.generate(prompt, 2)
    sync(torch, tdev)
    t0 = time.perf_counter()
    g_t = tm.generate(prompt, args.gen_tokens)
    sync(torch, tdev)
    t_tps = (len(prompt) - 1 + len(g_t)) / (time.perf_counter() - t0)
    same = next((i for i, (a, b) in enumerate(zip(g_ours, g_t)) if a != b), len(g_ours))
    out["generate"] = {"ours_tokens_per_s": o_tps, "torch_tokens_per_s": t_tps, "ours_over_torch": o_tps / t_tps,
                       "greedy_tokens_equal": same}
    print(f"generate (recurrent, {args.gen_tokens} tokens): ours {o_tps:.1f} tokens/s, torch {t_tps:.1f} tokens/s: "
          f"ours/torch = {o_tps / t_tps:.2f}x; greedy outputs agree on the first {same} of {len(g_ours)} tokens")

    # 4. time per step vs sequence length
    rows = []
    for L in [int(x) for x in args.lens.split(",")]:
        row = {"seq_len": L, "tokens_per_step": args.batch * L, "ours_ms": ours_step_ms(cfg, L, args.batch, args.steps)}
        if L <= args.torch_max_len:
            row["torch_ms"] = torch_step_ms(torch, TorchMamba(m.state_dict(), cfg, tdev, torch.float32), cfg, L,
                                            args.batch, args.steps)
        rows.append(row)
        print(json.dumps(row))
    out["sweep"] = rows
    out["ours_loglog_slope"] = slope([r["seq_len"] for r in rows], [r["ours_ms"] for r in rows])
    tr_rows = [r for r in rows if "torch_ms" in r]
    out["torch_loglog_slope"] = slope([r["seq_len"] for r in tr_rows], [r["torch_ms"] for r in tr_rows])
    print(f"time per step vs length, log-log slope: ours {out['ours_loglog_slope']:.2f}, torch "
          f"{out['torch_loglog_slope']:.2f} (1.0 = linear)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
