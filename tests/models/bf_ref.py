"""Float64 numpy references of builderforce's SharedExpertMoE and EvermindLM, written from the spec
(seeds-spec.md §10, §7): seeded init (LCG + Box-Muller, draw order), per-token forward, exact
backward, load-balance loss and its router gradient, next-token loss over T-1 positions, and the
trainers' AdamW. Deliberately per token and unvectorised: another way of computing the same numbers."""
import numpy as np

MOE_SEED, LM_SEED = 0x4D6F4501, 0x45564C4D


class LCG:
    def __init__(self, seed):
        self.s = (int(seed) & 0xFFFFFFFF) or 1

    def next(self):
        self.s = (1664525 * self.s + 1013904223) & 0xFFFFFFFF
        return self.s / 2.0 ** 32


def gauss(rng, n, std):
    out = np.empty(n, np.float32)
    for i in range(n):
        u1 = max(rng.next(), 1e-12)
        u2 = rng.next()
        out[i] = std * np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)
    return out


def moe_init(d, h, E, seed=MOE_SEED, prefix=""):
    rng = LCG(seed)
    p = {prefix + "wr": gauss(rng, E * d, 0.02).reshape(E, d)}
    for name in ["shared"] + [f"expert{e}" for e in range(E)]:
        p[f"{prefix}{name}.w1"] = gauss(rng, h * d, np.sqrt(2 / d)).reshape(h, d)
        p[f"{prefix}{name}.b1"] = np.zeros(h, np.float32)
        p[f"{prefix}{name}.w2"] = gauss(rng, d * h, 0.02).reshape(d, h)
        p[f"{prefix}{name}.b2"] = np.zeros(d, np.float32)
    return p


def lm_init(V, d, L, K, h, E, seed=LM_SEED):
    seed = (int(seed) & 0xFFFFFFFF) or 1
    p = {"emb": gauss(LCG(seed), V * d, 0.02).reshape(V, d)}
    for i in range(L):
        conv = np.zeros((d, K), np.float32)
        conv[:, 0] = 1
        p[f"layer{i}.conv"] = conv
        p[f"layer{i}.nConv"] = np.ones(d, np.float32)
        p[f"layer{i}.nMoe"] = np.ones(d, np.float32)
        p.update(moe_init(d, h, E, seed + 1 + i, prefix=f"layer{i}.moe."))
    return p


def softmax(v):
    e = np.exp(v - v.max())
    return e / e.sum()


def _ffn(p, pre, x):
    a = p[pre + ".w1"] @ x + p[pre + ".b1"]
    hh = np.maximum(a, 0)
    return p[pre + ".w2"] @ hh + p[pre + ".b2"], a, hh


def moe_token(p, x, k, E, prefix=""):
    """Forward of one token: (out, cache)."""
    logits = p[prefix + "wr"] @ x
    probs = softmax(logits)
    experts = [int(e) for e in np.argsort(-logits, kind="stable")[:k]]
    gates = softmax(logits[experts])
    ys, a, hh = _ffn(p, prefix + "shared", x)
    out = ys.copy()
    cache = dict(x=x, probs=probs, experts=experts, gates=gates, shared=(a, hh), ex=[])
    for g, e in zip(gates, experts):
        y, a, hh = _ffn(p, f"{prefix}expert{e}", x)
        out += g * y
        cache["ex"].append((y, a, hh))
    return out, cache


def _ffn_back(p, g, pre, x, dy, a, hh):
    g[pre + ".b2"] += dy
    g[pre + ".w2"] += np.outer(dy, hh)
    dh = p[pre + ".w2"].T @ dy
    da = np.where(a > 0, dh, 0)
    g[pre + ".b1"] += da
    g[pre + ".w1"] += np.outer(da, x)
    return p[pre + ".w1"].T @ da


def moe_token_back(p, g, cache, dout, prefix=""):
    """Accumulate one token's gradients into g; return dx (shared + experts + router path)."""
    x = cache["x"]
    dx = _ffn_back(p, g, prefix + "shared", x, dout, *cache["shared"])
    dgate = []
    for gate, e, (y, a, hh) in zip(cache["gates"], cache["experts"], cache["ex"]):
        dx += _ffn_back(p, g, f"{prefix}expert{e}", x, gate * dout, a, hh)
        dgate.append(dout @ y)
    gates, dgate = cache["gates"], np.array(dgate)
    dot = gates @ dgate
    for gate, dg, e in zip(gates, dgate, cache["experts"]):
        dl = gate * (dg - dot)
        g[prefix + "wr"][e] += dl * x
        dx += dl * p[prefix + "wr"][e]
    return dx


def zeros_like(p):
    return {k: np.zeros(v.shape) for k, v in p.items()}


def f64(p):
    return {k: v.astype(np.float64) for k, v in p.items()}


def moe_batch(p, X, T, k, E, aux_weight=0.0):
    """MoETrainer's batch: sum of 0.5 |out - t|^2, per-sample backward, then the aux gradient with
    scale aux_weight E / B; returns (loss sum, grads (summed, not yet / B), aux, outs, experts)."""
    g = zeros_like(p)
    outs, caches, loss = [], [], 0.0
    for x, t in zip(X, T):
        out, c = moe_token(p, x, k, E)
        loss += 0.5 * ((out - t) ** 2).sum()
        moe_token_back(p, g, c, out - t)
        outs.append(out)
        caches.append(c)
    counts = np.zeros(E)
    for c in caches:
        counts[c["experts"]] += 1
    f = counts / (counts.sum() or 1)
    P = np.mean([c["probs"] for c in caches], 0)
    aux = E * (f * P).sum()
    scale = aux_weight * E / len(X)
    if scale:
        for c in caches:
            pr = c["probs"]
            g["wr"] += np.outer(scale * pr * (f - f @ pr), c["x"])
    return loss, g, aux, np.array(outs), [c["experts"] for c in caches]


def rms(x, w, eps=1e-5):
    r = np.sqrt((x * x).mean() + eps)
    return w * x / r, r


def rms_back(dy, x, r, w):
    D = x.size
    A = (dy * w * x).sum()
    return w * dy / r - x * A / (D * r ** 3), dy * x / r


def lm_forward(p, tokens, cfg):
    V, d, L, K, h, E, k = (cfg[n] for n in ("vocabSize", "dModel", "numLayers", "convKernel", "hiddenDim",
                                             "numExperts", "topK"))
    T = len(tokens)
    x = p["emb"][tokens].copy()
    caches = []
    for i in range(L):
        P = f"layer{i}."
        nc = [rms(x[t], p[P + "nConv"]) for t in range(T)]
        n = np.array([a for a, _ in nc])
        after = x.copy()
        for t in range(T):
            for j in range(K):
                if t - j >= 0:
                    after[t] += p[P + "conv"][:, j] * n[t - j]
        nm = [rms(after[t], p[P + "nMoe"]) for t in range(T)]
        outs = []
        mc = []
        for t in range(T):
            o, c = moe_token(p, nm[t][0], k, E, prefix=P + "moe.")
            outs.append(after[t] + o)
            mc.append(c)
        caches.append(dict(x=x, n=n, rc=[r for _, r in nc], after=after, rm=[r for _, r in nm], mc=mc))
        x = np.array(outs)
    return x @ p["emb"].T, x, caches


def lm_loss_and_grads(p, tokens, cfg):
    """builderforce lossAndBackward: mean over the T-1 predicted positions; every gradient."""
    L, K = cfg["numLayers"], cfg["convKernel"]
    T = len(tokens)
    logits, xf, caches = lm_forward(p, tokens, cfg)
    g = zeros_like(p)
    dX = np.zeros_like(xf)
    loss = 0.0
    for t in range(T - 1):
        s = softmax(logits[t])
        loss += (-np.log(s[tokens[t + 1]])) / (T - 1)
        dl = s.copy()
        dl[tokens[t + 1]] -= 1
        dl /= T - 1
        g["emb"] += np.outer(dl, xf[t])
        dX[t] += dl @ p["emb"]
    for i in range(L - 1, -1, -1):
        P, c = f"layer{i}.", caches[i]
        dA = np.zeros_like(dX)
        for t in range(T):
            dn = moe_token_back(p, g, c["mc"][t], dX[t], prefix=P + "moe.")
            dx, dgain = rms_back(dn, c["after"][t], c["rm"][t], p[P + "nMoe"])
            g[P + "nMoe"] += dgain
            dA[t] = dX[t] + dx
        dN = np.zeros_like(dA)
        dIn = dA.copy()
        for t in range(T):
            for j in range(K):
                if t - j >= 0:
                    g[P + "conv"][:, j] += dA[t] * c["n"][t - j]
                    dN[t - j] += dA[t] * p[P + "conv"][:, j]
        for t in range(T):
            dx, dgain = rms_back(dN[t], c["x"][t], c["rc"][t], p[P + "nConv"])
            g[P + "nConv"] += dgain
            dIn[t] += dx
        dX = dIn
    for t in range(T):
        g["emb"][tokens[t]] += dX[t]
    return loss, g, logits


def adamw_step(p, g, state, t, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    """builderforce's CPU AdamW, one step over every parameter (float64)."""
    for k in p:
        m, v = state.setdefault(k, (np.zeros(p[k].shape), np.zeros(p[k].shape)))
        m[...] = b1 * m + (1 - b1) * g[k]
        v[...] = b2 * v + (1 - b2) * g[k] ** 2
        p[k] = p[k] - lr * ((m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wd * p[k])


def lm_fit(p, seqs, cfg, lr, epochs, accum):
    """EvermindLMTrainer.fit without mixed precision: per-epoch mean sequence loss."""
    p, state, t, hist = dict(p), {}, 0, []
    for _ in range(epochs):
        total, n, window = 0.0, 0, []

        def flush():
            nonlocal t
            g = zeros_like(p)
            for s in window:
                for k, v in s.items():
                    g[k] += v / len(window)
            t += 1
            adamw_step(p, g, state, t, lr)
        for s in seqs:
            if len(s) < 2:
                continue
            loss, g, _ = lm_loss_and_grads(p, s, cfg)
            total, n = total + loss, n + 1
            window.append(g)
            if len(window) >= accum:
                flush()
                window = []
        if window:
            flush()
        hist.append(total / n if n else 0.0)
    return hist, p
