"""float64 numpy references (forward and analytic backward) for the LM ops."""
import numpy as np


def softmax(x, causal=False, seq=None):
    x = np.asarray(x, np.float64)
    rows, cols = x.reshape(-1, x.shape[-1]).shape
    xr = x.reshape(rows, cols).copy()
    if causal:
        seq = cols if seq is None else seq
        pos = np.arange(rows) % seq
        mask = np.arange(cols)[None, :] > (pos[:, None] + cols - seq)
        xr[mask] = -np.inf
    m = xr.max(-1, keepdims=True)
    e = np.exp(xr - m)
    return (e / e.sum(-1, keepdims=True)).reshape(x.shape)


def softmax_bwd(y, dy):
    return y * (dy - (y * dy).sum(-1, keepdims=True))


def rmsnorm(x, w, eps):
    r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return x * r * w, r


def rmsnorm_bwd(x, w, dy, eps):
    _, r = rmsnorm(x, w, eps)
    s = (w * dy * x).mean(-1, keepdims=True)
    dx = r * w * dy - x * r ** 3 * s
    dw = (dy * x * r).reshape(-1, x.shape[-1]).sum(0)
    return dx, dw


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    r = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return (x - mu) * r * w + b


def layernorm_bwd(x, w, dy, eps):
    mu = x.mean(-1, keepdims=True)
    r = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xh = (x - mu) * r
    g = w * dy
    dx = r * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
    C = x.shape[-1]
    return dx, (dy * xh).reshape(-1, C).sum(0), dy.reshape(-1, C).sum(0)


def xent(x, t):
    V = x.shape[1]
    ok = t < V
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1)) + m[:, 0]
    per = np.where(ok, lse - x[np.arange(len(t)), np.minimum(t, V - 1)], 0.0)
    n = max(ok.sum(), 1)
    return per.sum() / n


def xent_bwd(x, t, g):
    V = x.shape[1]
    ok = t < V
    s = softmax(x)
    s[np.arange(len(t))[ok], t[ok]] -= 1
    s[~ok] = 0
    return s * g / max(ok.sum(), 1)


def rope(x, start, theta, sign=1.0):
    S, H, D = x.shape
    h = D // 2
    freq = theta ** (-2 * np.arange(h) / D)
    ang = (start + np.arange(S))[:, None] * freq[None, :]
    c, s = np.cos(ang)[:, None, :], sign * np.sin(ang)[:, None, :]
    a, b = x[..., :h], x[..., h:]
    return np.concatenate([a * c - b * s, a * s + b * c], -1)


def sig(x):
    return 1 / (1 + np.exp(-np.clip(x, -15, 15)))


GC = 0.7978845608


def act(x, kind):
    if kind == "silu":
        return x * sig(x)
    return 0.5 * x * (1 + np.tanh(np.clip(GC * (x + 0.044715 * x ** 3), -15, 15)))


def act_d(x, kind):
    if kind == "silu":
        s = sig(x)
        return s * (1 + x * (1 - s))
    t = np.tanh(np.clip(GC * (x + 0.044715 * x ** 3), -15, 15))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GC * (1 + 3 * 0.044715 * x * x)


def glu(x, kind, limit):
    d = x.shape[-1] // 2
    o = act(x[..., :d], kind) * x[..., d:]
    return np.clip(o, -limit, limit) if limit > 0 else o


def glu_bwd(x, dy, kind, limit):
    d = x.shape[-1] // 2
    g, u = x[..., :d], x[..., d:]
    a = act(g, kind)
    cut = (limit > 0) & (np.abs(a * u) > limit)
    return np.concatenate([np.where(cut, 0, dy * act_d(g, kind) * u), np.where(cut, 0, dy * a)], -1)


def same(x):
    return x


def attention(q, k, v, causal, scale, rnd=same):
    """rnd rounds the intermediates (scores, probabilities) as the device stores them."""
    S, H, D = q.shape
    G = H // k.shape[1]
    out = np.zeros_like(q)
    P = np.zeros((H, S, S))
    for h in range(H):
        s = rnd(scale * q[:, h] @ k[:, h // G].T)
        P[h] = rnd(softmax(s, causal))
        out[:, h] = P[h] @ v[:, h // G]
    return out, P


def attention_bwd(q, k, v, do, causal, scale, rnd=same):
    S, H, D = q.shape
    G = H // k.shape[1]
    _, P = attention(q, k, v, causal, scale, rnd)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for h in range(H):
        kv = h // G
        dv[:, kv] += P[h].T @ do[:, h]
        dp = rnd(do[:, h] @ v[:, kv].T)
        ds = rnd(P[h] * (dp - (P[h] * dp).sum(-1, keepdims=True)))
        dq[:, h] = scale * ds @ k[:, kv]
        dk[:, kv] += scale * ds.T @ q[:, h]
    return dq, dk, dv
