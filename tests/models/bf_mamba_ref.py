"""builderforce's HybridMambaModel forward for mamba1 layers, in float64 numpy, written from builderforce
2026.7.14 (src/model/mamba_model.ts, mamba1_block.ts, kernels/selective_scan.ts, conv1d.ts,
activations.ts, linear_projection.ts), step by step as its kernels compute it:

  embedding lookup -> per layer: RMSNorm(eps 1e-6) -> in-projection (y = x Wᵀ + b) -> x | z split ->
  causal depthwise conv (y_t = b + Σ_k w[d, k] x_{t-k}) -> silu (v / (1 + e^-v)) -> x-projection ->
  dt | B | C split -> dt-projection -> the S6 scan: Δ = softplus(dt), A = -exp(clamp(A_log, -10, 5)),
  Ā = exp(ΔA), B̄ = (Ā - 1)/A · B (discretise_B: the zero-order hold), h_t = Ā h_{t-1} + B̄ u_t,
  y = Σ_n C h + D u -> y ⊙ silu(z) -> out-projection -> residual; final RMSNorm; tied head + zero bias.

split="flat" cuts x | z and dt | B | C as builderforce's buffer copies do: flat halves / regions of the
whole [M, ·] buffer, so for more than one token its "x" mixes tokens' x and z columns. split="token"
cuts each token's row (evermind-vk's HybridMambaModel). With one token the two are the same.
The recurrence is the one builderforce's kernel comments state; its tile scan (forward_scan's
Kogge-Stone loop) composes neighbouring pairs in the opposite order (a_prev·bu_cur + bu_prev), and its
barrier sits in non-uniform control flow, so its GPU numbers for more than one token are not that
recurrence: that is not reproduced here. With one token no composition happens."""
import numpy as np


def softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def silu(v):
    return v / (1 + np.exp(-v))


def rmsnorm(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def linear(x, w, b):
    return x @ w.T + b


def conv(x, w, b, L):
    """builderforce's conv1d_forward over `batch` sequences of L tokens (x [B*L, D], w [D, K])."""
    M, D = x.shape
    out = np.tile(b, (M, 1)).astype(np.float64)
    for r in range(M):
        t = r % L
        for k in range(w.shape[1]):
            if t >= k:
                out[r] += w[:, k] * x[r - k]
    return out


def _split(buf, widths, split):
    """Columns [w0 | w1 | ...] of buf [M, Σw]: per token, or as builderforce's flat copies of the buffer."""
    M = buf.shape[0]
    out, off = [], 0
    flat = buf.reshape(-1)
    for w in widths:
        out.append(buf[:, off:off + w] if split == "token" else flat[M * off:M * (off + w)].reshape(M, w))
        off += w
    return out


def scan(u, dt, A_log, B, C, Dv, L):
    """builderforce's S6 with its zero-order-hold B̄ = (Ā - 1)/A · B (discretise_B)."""
    A = -np.exp(np.clip(A_log, -10, 5))
    M, D = u.shape
    y = np.zeros((M, D))
    for r in range(M):
        if r % L == 0:
            h = np.zeros(A.shape)
        dl = softplus(dt[r])[:, None]
        abar = np.exp(dl * A)
        h = abar * h + (abar - 1) / A * B[r][None, :] * u[r][:, None]
        y[r] = h @ C[r] + Dv * u[r]
    return y


def mamba1(x, P, i, cfg, L, split):
    p = lambda n: np.asarray(P[f"layer{i}.{n}"], np.float64)  # noqa: E731
    D, N, R = cfg.d_inner, cfg.dState, cfg.dt_rank
    h = rmsnorm(x, p("normWeight"))
    xs, z = _split(linear(h, p("wInProj"), p("bInProj")), (D, D), split)
    u = silu(conv(xs, p("wConv"), p("bConv"), L))
    dt_raw, Bm, Cm = _split(linear(u, p("wXProj"), p("bXProj")), (R, N, N), split)
    dt = linear(dt_raw, p("wDtProj"), p("bDtProj"))
    y = scan(u, dt, p("A_log"), Bm, Cm, p("D_vec"), L) * silu(z)
    return x + linear(y, p("wOutProj"), p("bOutProj"))


def logits(P, cfg, ids, batch=1, split="token"):
    """Logits [batch*L, vocab] of builderforce's forward(ids, batch, L) for an all-mamba1 model."""
    assert all(t == "mamba1" for t in cfg.layers)
    L = len(ids) // batch
    emb = np.asarray(P["embedding"], np.float64)
    x = emb[np.asarray(ids)]
    for i in range(cfg.numLayers):
        x = mamba1(x, P, i, cfg, L, split)
    return rmsnorm(x, np.asarray(P["final_norm"], np.float64)) @ emb.T  # + the all-zero head bias
