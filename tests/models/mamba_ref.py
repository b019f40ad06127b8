"""A float64 PyTorch reference of HybridMambaModel: the plain sequential recurrence, one token at a
time, with autograd for the gradients (issue 12). Also the 'PyTorch implementation of the same model'
the benchmarks compare against."""
import math

import numpy as np
import torch


def silu(x):
    return x * torch.sigmoid(torch.clamp(x, -15, 15))  # the device's silu (sigmoid argument clamped)


def rmsnorm(x, w, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def conv_lag(x, w, b, S):
    """y[t, c] = b[c] + sum_{j < K, j <= t mod S} w[c, j] x[t - j, c]."""
    T, Cn = x.shape
    K = w.shape[1]
    out = []
    for t in range(T):
        s = t % S
        acc = b.clone()
        for j in range(min(K, s + 1)):
            acc = acc + w[:, j] * x[t - j]
        out.append(acc)
    return torch.stack(out)


def scan(u, dt, A_log, B, C, Dv, z, batch, h0=None, discretization="zoh"):
    """The selective scan, one token at a time; returns y and the final states. The input term:
    "zoh" (exp(ΔA) - 1)/A (expm1: exact for any A < 0), "euler" Δ."""
    M, Dc = u.shape
    L = M // batch
    A = -torch.exp(torch.clamp(A_log, -10, 5))
    ys, hl = [], []
    for b in range(batch):
        h = torch.zeros(A.shape, dtype=u.dtype) if h0 is None else h0[b]
        for t in range(L):
            r = b * L + t
            dl = torch.nn.functional.softplus(dt[r])
            bbar = torch.expm1(dl[:, None] * A) / A if discretization == "zoh" else dl[:, None]
            h = torch.exp(dl[:, None] * A) * h + bbar * u[r][:, None] * B[r][None, :]
            ys.append((h @ C[r] + Dv * u[r]) * silu(z[r]))
        hl.append(h)
    return torch.stack(ys), torch.stack(hl)


def mamba1(x, P, L, cfg, batch, S):
    D, N, R = cfg.d_inner, cfg.dState, cfg.dt_rank
    h = rmsnorm(x, P[L + "normWeight"])
    xz = h @ P[L + "wInProj"].T + P[L + "bInProj"]
    xs, z = xz[:, :D], xz[:, D:]
    u = silu(conv_lag(xs, P[L + "wConv"], P[L + "bConv"], S))
    xp = u @ P[L + "wXProj"].T + P[L + "bXProj"]
    dt = xp[:, :R] @ P[L + "wDtProj"].T + P[L + "bDtProj"]
    y, _ = scan(u, dt, P[L + "A_log"], xp[:, R:R + N], xp[:, R + N:], P[L + "D_vec"], z, batch,
                discretization=cfg.discretization)
    return x + y @ P[L + "wOutProj"].T + P[L + "bOutProj"]


def mamba2(x, P, L, cfg, batch, S):
    D, N, H, G = cfg.d_inner, cfg.dState, cfg.nHeads, cfg.nGroups
    hd = D // H
    h = rmsnorm(x, P[L + "preNormWeight"])
    proj = h @ P[L + "wInProj"].T
    cd = D + 2 * G * N
    xbc = conv_lag(proj[:, :cd], P[L + "wConv"], P[L + "bConv"], S)
    xs, Bm, Cm = xbc[:, :D], xbc[:, D:D + G * N], xbc[:, D + G * N:]
    dt = torch.nn.functional.softplus(proj[:, cd:] + P[L + "dt_bias"])  # [M, H]
    A = -torch.nn.functional.softplus(P[L + "A_log"])  # [H]
    ys = []
    for b in range(batch):
        st = torch.zeros(H, hd, N, dtype=x.dtype)
        for t in range(S):
            r = b * S + t
            for hh in range(H):
                g = hh * G // H
                Bv, Cv = Bm[r, g * N:(g + 1) * N], Cm[r, g * N:(g + 1) * N]
                xv = xs[r, hh * hd:(hh + 1) * hd]
                st_h = torch.exp(dt[r, hh] * A[hh]) * st[hh] + xv[:, None] * Bv[None, :]
                st = torch.cat([st[:hh], st_h[None], st[hh + 1:]])
            ys.append((st * Cm[r].reshape(G, N).repeat_interleave(H // G, 0)[:, None, :]).sum(-1).reshape(D)
                      + P[L + "D_vec"].repeat_interleave(hd) * xs[r])
    y = rmsnorm(torch.stack(ys), P[L + "normWeight"])
    return x + y @ P[L + "wOutProj"].T


def mamba3(x, P, L, cfg, batch, S):
    """builderforce's Mamba-3 block, per token: complex states, λ per head, ā = exp(Δλ), b̄ = (ā−1)e^{−λ},
    y = Σ Re(conj(C) h) + D x."""
    D, Nc, H, G = cfg.d_inner, cfg.dState, cfg.nHeads, cfg.nGroups
    hd = D // H
    h = rmsnorm(x, P[L + "preNormWeight"])
    proj = h @ P[L + "wInProj"].T
    cd = D + 4 * G * Nc
    xbc = conv_lag(proj[:, :cd], P[L + "wConv"], P[L + "bConv"], S)
    xs, Bm, Cm = xbc[:, :D], xbc[:, D:D + 2 * G * Nc], xbc[:, D + 2 * G * Nc:]
    dt = torch.nn.functional.softplus(proj[:, cd:] + P[L + "dt_bias"])  # [M, H]
    lam = torch.complex(P[L + "A_log"][:, 0], P[L + "A_log"][:, 1])
    ys = []
    for b in range(batch):
        cdt = torch.complex128 if x.dtype == torch.float64 else torch.complex64
        st = [torch.zeros(hd, Nc, dtype=cdt) for _ in range(H)]
        for t in range(S):
            r = b * S + t
            row = []
            for hh in range(H):
                g = hh * G // H
                Bc = torch.complex(Bm[r, 2 * g * Nc:2 * (g + 1) * Nc:2], Bm[r, 2 * g * Nc + 1:2 * (g + 1) * Nc:2])
                Cc = torch.complex(Cm[r, 2 * g * Nc:2 * (g + 1) * Nc:2], Cm[r, 2 * g * Nc + 1:2 * (g + 1) * Nc:2])
                a = torch.exp(dt[r, hh] * lam[hh])
                bb = (a - 1) * torch.exp(-lam[hh])
                xv = xs[r, hh * hd:(hh + 1) * hd]
                st[hh] = a * st[hh] + bb * xv[:, None] * Bc[None, :]
                row.append((torch.conj(Cc)[None, :] * st[hh]).real.sum(1) + P[L + "D_vec"][hh] * xv)
            ys.append(torch.cat(row))
    y = rmsnorm(torch.stack(ys), P[L + "normWeight"])
    return x + y @ P[L + "wOutProj"].T


def attention(x, P, L, cfg, batch, S):
    d, H = cfg.dModel, cfg.nHeads
    hd = d // H
    h = rmsnorm(x, P[L + "normWeight"])
    qkv = h @ P[L + "wQKV"].T + P[L + "bQKV"]
    q, k, v = (qkv[:, j * d:(j + 1) * d].reshape(batch, S, H, hd).transpose(1, 2) for j in range(3))
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    s = s.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
    a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(batch * S, d)
    return x + a @ P[L + "wO"].T + P[L + "bO"]


def logits(P, cfg, ids, batch):
    S = len(ids) // batch
    x = P["embedding"][torch.as_tensor(np.asarray(ids, np.int64))]
    for i, kind in enumerate(cfg.layers):
        x = {"mamba1": mamba1, "mamba2": mamba2, "mamba3": mamba3, "attention": attention}[kind](x, P, f"layer{i}.", cfg, batch, S)
    return rmsnorm(x, P["final_norm"]) @ P["embedding"].T


def params(state_dict):
    return {k: torch.tensor(np.asarray(v, np.float64), requires_grad=True) for k, v in state_dict.items()}
