"""float64 numpy references (forward and analytic backward) for the LM ops."""
import math
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


def attention_bwd_mag(q, k, v, do, causal, scale):
    """The size of the terms that cancel in attention_bwd's dq, dk, dv: dS = P (dP - rowsum(P dP)) sums to
    zero along each row, so dq and dk can be far smaller than the |P| (|dP| + |rowsum|) |K| (|Q|) their
    rounding errors scale with (an f16 output O or dO moves the rowsum by ~U16 |dO| |O|)."""
    S, H, D = q.shape
    G = H // k.shape[1]
    _, P = attention(q, k, v, causal, scale)
    mq, mk, mv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for h in range(H):
        kv = h // G
        a = np.abs(P[h])
        adp = np.abs(do[:, h]) @ np.abs(v[:, kv]).T  # dP's terms
        t = a * (adp + (a * adp).sum(-1, keepdims=True))
        mq[:, h] = scale * t @ np.abs(k[:, kv])
        mk[:, kv] += scale * t.T @ np.abs(q[:, h])
        mv[:, kv] += a.T @ np.abs(do[:, h])
    return mq, mk, mv


# -- selective scan (Mamba-1), a plain sequential recurrence (issue 12) --------------------------------
def softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def scan_A(A_log):
    return -np.exp(np.clip(A_log, -10, 5))


def _scan_form(A_log, B, C, Dc, groups):
    """Per-channel A [Dc, N] and B, C [M, Dc, N] for either parameterisation (see ops.scan)."""
    M = B.shape[0]
    N = B.shape[1] // groups
    cpg = Dc // groups
    Bf = np.repeat(B.reshape(M, groups, N), cpg, axis=1)
    Cf = np.repeat(C.reshape(M, groups, N), cpg, axis=1)
    if A_log.ndim == 2:
        return scan_A(A_log), Bf, Cf
    hd = Dc // A_log.shape[0]
    return np.repeat(-softplus(A_log), hd)[:, None] * np.ones((1, N)), Bf, Cf


def phi1(x):
    """expm1(x) / x (1 at 0), float64 and exact near 0."""
    x = np.asarray(x, np.float64)
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, 1.0, np.expm1(safe) / safe)


def psi(x):
    """d/dx expm1(x) / x = (e^x - phi1(x)) / x; its Taylor series where |x| < 1 (cancellation)."""
    x = np.asarray(x, np.float64)
    series = sum((k + 1) / math.factorial(k + 2) * x ** k for k in range(25))
    safe = np.where(np.abs(x) < 1, 1.0, x)
    return np.where(np.abs(x) < 1, series, (np.exp(safe) - phi1(safe)) / safe)


def input_term(dl, A, discretization):
    """(b, db/dΔ, db/dA) [Dc, N] of the scan's input term h_t = a h_{t-1} + b B_t u_t: "zoh"
    (exp(ΔA) - 1)/A = Δ phi1(ΔA), "euler" Δ, "none" 1."""
    one = np.ones_like(A)
    if discretization == "none":
        return one, 0 * one, 0 * one
    if discretization == "euler":
        return dl[:, None] * one, one, 0 * one
    assert discretization == "zoh", discretization
    x = dl[:, None] * A
    return dl[:, None] * phi1(x), np.exp(x), dl[:, None] ** 2 * psi(x)


def selective_scan(u, dt, A_log, B, C, D, z=None, batch=1, h0=None, groups=1, discretization="zoh"):
    """y [M, Dc] and the final states [batch, Dc, N] of h_t = exp(Δ A) h_{t-1} + b B_t u_t (b the input
    term of `discretization`, input_term), y_t = (C_t h_t + D u_t) silu(z_t), one token at a time."""
    M, Dc = u.shape
    A, Bf, Cf = _scan_form(A_log, B, C, Dc, groups)
    N = A.shape[1]
    L = M // batch
    y = np.zeros((M, Dc))
    hl = np.zeros((batch, Dc, N))
    for b in range(batch):
        h = np.zeros((Dc, N)) if h0 is None else np.array(h0[b], np.float64)
        for t in range(L):
            r = b * L + t
            dl = softplus(dt[r])
            sc = input_term(dl, A, discretization)[0]
            h = np.exp(dl[:, None] * A) * h + sc * u[r][:, None] * Bf[r]
            y[r] = (h * Cf[r]).sum(1) + D * u[r]
            if z is not None:
                y[r] *= act(z[r], "silu")
        hl[b] = h
    return y, hl


def selective_scan_bwd(u, dt, A_log, B, C, D, z, dy, batch=1, h0=None, groups=1, discretization="zoh", mags=None):
    """(du, ddt, dA_log, dB, dC, dD, dz, dh0) by the reverse-time recurrence. mags: a dict that receives
    "dA_log", the sum of the absolute values of the terms dA_log adds (the scale its cancellation leaves
    a rounding error on: a tolerance's magnitude)."""
    M, Dc = u.shape
    A, Bf, Cf = _scan_form(A_log, B, C, Dc, groups)
    N = A.shape[1]
    L = M // batch
    du, ddt = np.zeros_like(u), np.zeros_like(u)
    dBf, dCf = np.zeros((M, Dc, N)), np.zeros((M, Dc, N))
    dA, dD = np.zeros((Dc, N)), np.zeros(Dc)
    dA_mag = np.zeros((Dc, N))
    dz = np.zeros_like(u) if z is not None else None
    dh0 = np.zeros((batch, Dc, N))
    for b in range(batch):
        hs = [np.zeros((Dc, N)) if h0 is None else np.array(h0[b], np.float64)]
        for t in range(L):
            r = b * L + t
            dl = softplus(dt[r])
            sc = input_term(dl, A, discretization)[0]
            hs.append(np.exp(dl[:, None] * A) * hs[-1] + sc * u[r][:, None] * Bf[r])
        K = np.zeros((Dc, N))
        Km = np.zeros((Dc, N))  # |terms| of K
        for t in range(L - 1, -1, -1):
            r = b * L + t
            dl = softplus(dt[r])
            sc, sc_dl, sc_dA = input_term(dl, A, discretization)
            a = np.exp(dl[:, None] * A)
            h, hp = hs[t + 1], hs[t]
            yy = (h * Cf[r]).sum(1) + D * u[r]
            dyy = dy[r]
            if z is not None:
                dyy = dy[r] * act(z[r], "silu")
                dz[r] = dy[r] * yy * act_d(z[r], "silu")
            dD += dyy * u[r]
            dCf[r] = dyy[:, None] * h
            g = K + Cf[r] * dyy[:, None]
            du[r] = D * dyy + (g * Bf[r] * sc).sum(1)
            dBf[r] = g * sc * u[r][:, None]
            bu = Bf[r] * u[r][:, None]
            ddl = (g * (A * a * hp + sc_dl * bu)).sum(1)
            ddt[r] = ddl / (1 + np.exp(-dt[r]))
            dA += g * (a * hp * dl[:, None] + sc_dA * bu)
            gm = Km + np.abs(Cf[r] * dyy[:, None])
            dA_mag += gm * (a * np.abs(hp) * dl[:, None] + np.abs(sc_dA * bu))
            K, Km = a * g, a * gm
        dh0[b] = K
    cpg = Dc // groups
    dB = dBf.reshape(M, groups, cpg, N).sum(2).reshape(M, groups * N)
    dC = dCf.reshape(M, groups, cpg, N).sum(2).reshape(M, groups * N)
    if A_log.ndim == 2:
        mask = (A_log > -10) & (A_log < 5)
        dAl = np.where(mask, dA * A, 0.0)
        mag = np.where(mask, dA_mag * np.abs(A), 0.0)
    else:
        H = A_log.shape[0]
        dAl = -(dA.reshape(H, -1).sum(1)) / (1 + np.exp(-A_log))
        mag = dA_mag.reshape(H, -1).sum(1) / (1 + np.exp(-A_log))
    if mags is not None:
        mags["dA_log"] = mag
    return du, ddt, dAl, dB, dC, dD, dz, dh0


def ssd(x, dt, A_log, B, C, D, batch=1, h0=None, groups=1):
    """Mamba-2 SSD (builderforce's form), the plain recurrence one token at a time: per head h of hd channels,
    h_t = exp(softplus(dt[t, h]) A_h) h_{t-1} + x_t B_tᵀ, y_t = h_t C_t + D x_t, A_h = -softplus(A_log[h]).
    x [M, Dc], dt [M, H], B, C [M, groups*N]. Returns y and the final states [batch, Dc, N]."""
    M, Dc = x.shape
    H = A_log.shape[0]
    hd, N, L = Dc // H, B.shape[1] // groups, M // batch
    Ah = -softplus(A_log)
    gi = np.arange(H) // (H // groups)  # each head's group
    y, hl = np.zeros((M, Dc)), np.zeros((batch, Dc, N))
    for b in range(batch):
        S = np.zeros((H, hd, N)) if h0 is None else np.array(h0[b], np.float64).reshape(H, hd, N)
        for t in range(L):
            r = b * L + t
            Bg, Cg, xh = B[r].reshape(groups, N)[gi], C[r].reshape(groups, N)[gi], x[r].reshape(H, hd)
            S = np.exp(softplus(dt[r]) * Ah)[:, None, None] * S + xh[:, :, None] * Bg[:, None, :]
            y[r] = np.einsum("hpn,hn->hp", S, Cg).ravel() + D * x[r]
        hl[b] = S.reshape(Dc, N)
    return y, hl


def ssd_bwd(x, dt, A_log, B, C, D, dy, batch=1, h0=None, groups=1):
    """(dx, ddt, dA_log, dB, dC, dD, dh0) of ssd by the reverse-time recurrence."""
    M, Dc = x.shape
    H = A_log.shape[0]
    hd, N, L = Dc // H, B.shape[1] // groups, M // batch
    Ah = -softplus(A_log)
    gi = np.arange(H) // (H // groups)
    dx, ddt, dB, dC = np.zeros((M, Dc)), np.zeros((M, H)), np.zeros((M, groups, N)), np.zeros((M, groups, N))
    dAh, dD, dh0 = np.zeros(H), np.zeros(Dc), np.zeros((batch, Dc, N))
    for b in range(batch):
        hs = [np.zeros((H, hd, N)) if h0 is None else np.array(h0[b], np.float64).reshape(H, hd, N)]
        for t in range(L):
            r = b * L + t
            Bg, xh = B[r].reshape(groups, N)[gi], x[r].reshape(H, hd)
            hs.append(np.exp(softplus(dt[r]) * Ah)[:, None, None] * hs[-1] + xh[:, :, None] * Bg[:, None, :])
        K = np.zeros((H, hd, N))
        for t in range(L - 1, -1, -1):
            r = b * L + t
            Bg, Cg = B[r].reshape(groups, N)[gi], C[r].reshape(groups, N)[gi]
            xh, dyh = x[r].reshape(H, hd), dy[r].reshape(H, hd)
            dl = softplus(dt[r])
            a = np.exp(dl * Ah)
            g = K + dyh[:, :, None] * Cg[:, None, :]  # the gradient of h_t
            np.add.at(dC[r], gi, np.einsum("hp,hpn->hn", dyh, hs[t + 1]))
            np.add.at(dB[r], gi, np.einsum("hp,hpn->hn", xh, g))
            dx[r] = (np.einsum("hpn,hn->hp", g, Bg)).ravel() + D * dy[r]
            dD += dy[r] * x[r]
            da = (g * hs[t]).sum((1, 2)) * a  # d/d(Δ_t A_h)
            ddt[r] = da * Ah / (1 + np.exp(-dt[r]))
            dAh += da * dl
            K = a[:, None, None] * g
        dh0[b] = K.reshape(Dc, N)
    dA_log = dAh * -(1 / (1 + np.exp(-A_log)))
    return dx, ddt, dA_log, dB.reshape(M, groups * N), dC.reshape(M, groups * N), dD, dh0
