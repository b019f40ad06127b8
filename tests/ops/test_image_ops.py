"""Image ops (conv2d, group_norm, upsample2d, pixel_shuffle), forward and backward, against float64
numpy oracles on the same rounded inputs (hypothesis over odd shapes, padding, stride, dilation),
against PyTorch where installed, and every backward against finite differences of the device's own
f32 forward. Reductions longer than lavapipe's 65,535-iteration loop cap are tested too."""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.autodiff import Tape, functional as F
from evermind_vk.errors import ShapeError
from oracle import TINY16, TINY32, U16, assert_within, gamma, rounded

DT = ["f32", "f16"]
NP = {"f32": np.float32, "f16": np.float16}
seeds = st.integers(0, 2**31)


def data(rng, shape, dtype, s=1.0):
    return (rng.standard_normal(shape) * s).astype(NP[dtype])


def within(got, want, mag, n, dtype, what):
    """|got - want| <= (2 gamma_{n+4} + 3 u16 for f16) * mag + tiny: mag bounds the terms summed (and
    the output), n the reduction length; f16 adds intermediate and output rounding."""
    tol = 2 * gamma(n + 4) + (3 * U16 if dtype == "f16" else 0.0)
    tiny = TINY16 if dtype == "f16" else TINY32
    assert_within(np.asarray(got, np.float64), np.asarray(want, np.float64), tol * mag + 4 * tiny, what)


# -- float64 oracles (direct, tap by tap: independent of the device's im2col design) ----------------
def _out(H, K, s, p, d):
    return (H + 2 * p - d * (K - 1) - 1) // s + 1


def _taps(x, KH, KW, s, p, d):
    """(ky, kx, view) with view [N, C, OH, OW] the input pixels tap (ky, kx) reads (zero padding)."""
    N, C, H, W = x.shape
    OH, OW = _out(H, KH, s[0], p[0], d[0]), _out(W, KW, s[1], p[1], d[1])
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    for ky in range(KH):
        for kx in range(KW):
            y0, x0 = ky * d[0], kx * d[1]
            yield ky, kx, (slice(y0, y0 + s[0] * (OH - 1) + 1, s[0]), slice(x0, x0 + s[1] * (OW - 1) + 1, s[1])), xp


def conv_ref(x, w, b, s, p, d):
    OC, C, KH, KW = w.shape
    y = 0.0
    for ky, kx, (sy, sx), xp in _taps(x, KH, KW, s, p, d):
        y = y + np.einsum("nchw,oc->nohw", xp[:, :, sy, sx], w[:, :, ky, kx])
    return y + (0.0 if b is None else b[None, :, None, None])


def conv_bwd_ref(x, w, dy, s, p, d):
    OC, C, KH, KW = w.shape
    N, _, H, W = x.shape
    dw = np.zeros(w.shape)
    dxp = np.zeros((N, C, H + 2 * p[0], W + 2 * p[1]))
    for ky, kx, (sy, sx), xp in _taps(x, KH, KW, s, p, d):
        dw[:, :, ky, kx] = np.einsum("nohw,nchw->oc", dy, xp[:, :, sy, sx])
        dxp[:, :, sy, sx] += np.einsum("nohw,oc->nchw", dy, w[:, :, ky, kx])
    return dxp[:, :, p[0]:p[0] + H, p[1]:p[1] + W], dw, dy.sum((0, 2, 3))


def gn_ref(x, G, w, b, eps):
    N, C, H, W = x.shape
    xg = x.reshape(N, G, -1)
    mu = xg.mean(-1, keepdims=True)
    r = 1 / np.sqrt(((xg - mu) ** 2).mean(-1, keepdims=True) + eps)
    xh = ((xg - mu) * r).reshape(x.shape)
    return xh * w[None, :, None, None] + b[None, :, None, None], xh, r


def gn_bwd_ref(x, G, w, dy, eps):
    N, C, H, W = x.shape
    _, xh, r = gn_ref(x, G, w, np.zeros(C), eps)
    g = (w[None, :, None, None] * dy).reshape(N, G, -1)
    xhg = xh.reshape(N, G, -1)
    dx = r * (g - g.mean(-1, keepdims=True) - xhg * (g * xhg).mean(-1, keepdims=True))
    return dx.reshape(x.shape), (dy * xh).sum((0, 2, 3)), dy.sum((0, 2, 3))


def upsample_ref(x, sh, sw):
    return np.repeat(np.repeat(x, sh, axis=2), sw, axis=3)


def upsample_bwd_ref(dy, sh, sw):
    N, C, OH, OW = dy.shape
    return dy.reshape(N, C, OH // sh, sh, OW // sw, sw).sum((3, 5))


def shuffle_ref(x, r):
    N, Cr, H, W = x.shape
    C = Cr // (r * r)
    return x.reshape(N, C, r, r, H, W).transpose(0, 1, 4, 2, 5, 3).reshape(N, C, H * r, W * r)


def shuffle_tokens_ref(x, r, gh, gw):
    """doppler's layout, written as its formula: out[c, gy*r+sy, gx*r+sx] = x[gy*gw+gx, (sy*r+sx)*C+c]."""
    N, T, PC = x.shape
    C = PC // (r * r)
    out = np.zeros((N, C, gh * r, gw * r))
    for gy in range(gh):
        for gx in range(gw):
            for sy in range(r):
                for sx in range(r):
                    for c in range(C):
                        out[:, c, gy * r + sy, gx * r + sx] = x[:, gy * gw + gx, (sy * r + sx) * C + c]
    return out


# -- conv2d --------------------------------------------------------------------------------------
conv_shapes = dict(N=st.integers(1, 3), C=st.integers(1, 5), OC=st.integers(1, 6), H=st.integers(1, 11),
                   W=st.integers(1, 11), KH=st.integers(1, 4), KW=st.integers(1, 4), sh=st.integers(1, 3),
                   sw=st.integers(1, 3), ph=st.integers(0, 2), pw=st.integers(0, 2), dh=st.integers(1, 3),
                   dw=st.integers(1, 3), bias=st.booleans(), seed=seeds)


@pytest.mark.parametrize("dtype", DT)
@given(**conv_shapes)
def test_conv2d(device, dtype, N, C, OC, H, W, KH, KW, sh, sw, ph, pw, dh, dw, bias, seed):
    s, p, d = (sh, sw), (ph, pw), (dh, dw)
    assume(_out(H, KH, sh, ph, dh) >= 1 and _out(W, KW, sw, pw, dw) >= 1)
    rng = np.random.default_rng(seed)
    x, w = data(rng, (N, C, H, W), dtype), data(rng, (OC, C, KH, KW), dtype)
    b = rng.standard_normal(OC).astype(np.float32) if bias else None
    X, Wt = rounded(x, dtype), rounded(w, dtype)
    B = None if b is None else b.astype(np.float64)
    y = ops.conv2d(ev.tensor(x), ev.tensor(w), None if b is None else ev.tensor(b), s, p, d)
    want = conv_ref(X, Wt, B, s, p, d)
    mag = conv_ref(np.abs(X), np.abs(Wt), None if B is None else np.abs(B), s, p, d)
    within(y.numpy(), want, mag, C * KH * KW, dtype, "conv2d")
    dy = data(rng, want.shape, dtype)
    DY = rounded(dy, dtype)
    dx, dwt, db = ops.conv2d_backward(ev.tensor(x), ev.tensor(w), ev.tensor(dy), s, p, d, need_bias=bias)
    wdx, wdw, wdb = conv_bwd_ref(X, Wt, DY, s, p, d)
    mdx, mdw, mdb = conv_bwd_ref(np.abs(X), np.abs(Wt), np.abs(DY), s, p, d)
    within(dx.numpy(), wdx, mdx, OC * KH * KW, dtype, "conv2d dx")
    within(dwt.numpy(), wdw, mdw, N * want.shape[2] * want.shape[3], dtype, "conv2d dw")
    if bias:
        within(db.numpy(), wdb, mdb, N * want.shape[2] * want.shape[3], "f32", "conv2d db")
    else:
        assert db is None


def test_conv2d_errors(device):
    x = ev.tensor(np.zeros((1, 2, 4, 4), np.float32))
    with pytest.raises(ShapeError, match="channels"):
        ops.conv2d(x, ev.tensor(np.zeros((3, 1, 3, 3), np.float32)))
    with pytest.raises(ShapeError, match="does not fit"):
        ops.conv2d(x, ev.tensor(np.zeros((3, 2, 3, 3), np.float32)), dilation=2)
    with pytest.raises(ShapeError, match="stride"):
        ops.conv2d(x, ev.tensor(np.zeros((3, 2, 3, 3), np.float32)), stride=0)
    with pytest.raises(ShapeError, match="bias"):
        ops.conv2d(x, ev.tensor(np.zeros((3, 2, 3, 3), np.float32)), ev.tensor(np.zeros(2, np.float32)))


def test_conv2d_long_reduction(device):
    """dW and dB reduce over N*OH*OW = 1,050,000 > 65,535 * 16 pixels: the matmul's k loop (K / 16
    steps) would pass lavapipe's loop cap in one dispatch; the K split keeps each under 1,024."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, (1, 1, 1050, 1000)).astype(np.float32)
    dy = rng.uniform(0.5, 1.5, (1, 2, 1050, 1000)).astype(np.float32)
    w = np.ones((2, 1, 1, 1), np.float32)
    dx, dw, db = ops.conv2d_backward(ev.tensor(x), ev.tensor(w), ev.tensor(dy), need_x=False, need_bias=True)
    X, DY = x.astype(np.float64), dy.astype(np.float64)
    want = np.array([(DY[0, o] * X[0, 0]).sum() for o in range(2)])
    np.testing.assert_allclose(dw.numpy().ravel(), want, rtol=1e-4)
    np.testing.assert_allclose(db.numpy(), DY.sum((0, 2, 3)), rtol=1e-4)


# -- group_norm ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DT)
@given(N=st.integers(1, 3), G=st.integers(1, 4), Cg=st.integers(1, 3), H=st.integers(1, 9), W=st.integers(1, 9),
       seed=seeds)
def test_group_norm(device, dtype, N, G, Cg, H, W, seed):
    assume(Cg * H * W >= 2)
    rng = np.random.default_rng(seed)
    C = G * Cg
    x, dy = data(rng, (N, C, H, W), dtype, 2), data(rng, (N, C, H, W), dtype)
    w, b = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    xt = ev.tensor(x)
    y, stats = ops.group_norm(xt, G, ev.tensor(w), ev.tensor(b), eps=1e-5)
    X, DY, Wd, Bd = rounded(x, dtype), rounded(dy, dtype), w.astype(np.float64), b.astype(np.float64)
    L = Cg * H * W
    want, xh, r = gn_ref(X, G, Wd, Bd, 1e-5)
    mag = np.abs(xh * Wd[None, :, None, None]) + np.abs(Bd)[None, :, None, None] + np.abs(Wd)[None, :, None, None]
    within(y.numpy(), want, 8 * mag, L, dtype, "group_norm")
    dx, dwt, dbt = ops.group_norm_backward(xt, G, ev.tensor(w), ev.tensor(dy), stats)
    wdx, wdw, wdb = gn_bwd_ref(X, G, Wd, DY, 1e-5)
    g = np.abs(Wd[None, :, None, None] * DY).reshape(N, G, -1)
    xa = np.abs(xh).reshape(N, G, -1)
    mdx = (r * (g + g.mean(-1, keepdims=True) + xa * (g * xa).mean(-1, keepdims=True))).reshape(x.shape)
    within(dx.numpy(), wdx, 8 * mdx, L, dtype, "group_norm dx")
    within(dwt.numpy(), wdw, 8 * np.abs(DY * xh).sum((0, 2, 3)), N * H * W + L, "f32", "group_norm dweight")
    within(dbt.numpy(), wdb, np.abs(DY).sum((0, 2, 3)), N * H * W, "f32", "group_norm dbias")


def test_group_norm_long_group(device):
    """One group of 2 x 300 x 250 = 150,000 elements (> 65,535): two-stage statistics and sums."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((1, 2, 300, 250)) * 3 + 5).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    w, b = np.array([1.5, -0.5], np.float32), np.array([0.25, 1.0], np.float32)
    xt = ev.tensor(x)
    y, stats = ops.group_norm(xt, 1, ev.tensor(w), ev.tensor(b))
    X, DY = x.astype(np.float64), dy.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), gn_ref(X, 1, w.astype(np.float64), b.astype(np.float64), 1e-5)[0], atol=2e-4)
    dx, dwt, dbt = ops.group_norm_backward(xt, 1, ev.tensor(w), ev.tensor(dy), stats)
    wdx, wdw, wdb = gn_bwd_ref(X, 1, w.astype(np.float64), DY, 1e-5)
    np.testing.assert_allclose(dx.numpy(), wdx, atol=2e-4)
    np.testing.assert_allclose(dwt.numpy(), wdw, rtol=1e-3, atol=0.1)
    np.testing.assert_allclose(dbt.numpy(), wdb, rtol=1e-3, atol=0.1)
    np.testing.assert_allclose(ops.channel_sum(xt).numpy(), X.sum((0, 2, 3)), rtol=1e-5)


def test_group_norm_errors(device):
    x = ev.tensor(np.zeros((1, 6, 2, 2), np.float32))
    w = ev.tensor(np.ones(6, np.float32))
    with pytest.raises(ShapeError, match="groups"):
        ops.group_norm(x, 4, w, w)
    with pytest.raises(ShapeError, match="weight"):
        ops.group_norm(x, 3, ev.tensor(np.ones(3, np.float32)), w)


# -- upsample2d, pixel_shuffle -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DT)
@given(N=st.integers(1, 3), C=st.integers(1, 4), H=st.integers(1, 7), W=st.integers(1, 7), sh=st.integers(1, 3),
       sw=st.integers(1, 3), seed=seeds)
def test_upsample2d(device, dtype, N, C, H, W, sh, sw, seed):
    rng = np.random.default_rng(seed)
    x, dy = data(rng, (N, C, H, W), dtype), data(rng, (N, C, H * sh, W * sw), dtype)
    assert np.array_equal(ops.upsample2d(ev.tensor(x), (sh, sw)).numpy(), upsample_ref(x, sh, sw))
    DY = rounded(dy, dtype)
    within(ops.upsample2d_backward(ev.tensor(dy), (sh, sw)).numpy(), upsample_bwd_ref(DY, sh, sw),
           upsample_bwd_ref(np.abs(DY), sh, sw), sh * sw, dtype, "upsample2d backward")


@pytest.mark.parametrize("dtype", DT)
@given(N=st.integers(1, 2), C=st.integers(1, 3), H=st.integers(1, 5), W=st.integers(1, 5), r=st.integers(1, 3),
       tokens=st.booleans(), seed=seeds)
def test_pixel_shuffle(device, dtype, N, C, H, W, r, tokens, seed):
    rng = np.random.default_rng(seed)
    if tokens:
        x = data(rng, (N, H * W, r * r * C), dtype)
        want = shuffle_tokens_ref(x.astype(np.float64), r, H, W)
        kw = dict(layout="tokens", grid=(H, W))
    else:
        x = data(rng, (N, C * r * r, H, W), dtype)
        want = shuffle_ref(x.astype(np.float64), r)
        kw = {}
    y = ops.pixel_shuffle(ev.tensor(x), r, **kw)
    assert np.array_equal(y.numpy().astype(np.float64), want)
    # A permutation: its backward is its inverse, exact. <dy, shuffle(x)> = <backward(dy), x>.
    dy = data(rng, want.shape, dtype)
    dx = ops.pixel_shuffle_backward(ev.tensor(dy), x.shape, r, **kw).numpy()
    assert dx.shape == x.shape
    assert sorted(dx.ravel().tolist()) == sorted(dy.ravel().tolist())
    e = np.zeros(x.size)
    for k in rng.choice(x.size, min(5, x.size), replace=False):
        e[:] = 0
        e[k] = 1
        ek = e.reshape(x.shape).astype(NP[dtype])
        assert float((ops.pixel_shuffle(ev.tensor(ek), r, **kw).numpy().astype(np.float64) * dy).sum()) == dx.ravel()[k]


def test_pixel_shuffle_tokens_unbatched(device):
    """doppler's single-image form: [tokens, r*r*C] -> [C, gh*r, gw*r]."""
    x = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(6, 8)  # grid 2x3, r 2, C 2
    y = ops.pixel_shuffle(ev.tensor(x), 2, layout="tokens", grid=(2, 3)).numpy()
    assert y.shape == (2, 4, 6)
    assert np.array_equal(y, shuffle_tokens_ref(x[None].astype(np.float64), 2, 2, 3)[0])
    assert y[1, 1, 2] == x[1 * 0 + 1, (1 * 2 + 0) * 2 + 1]  # c=1, gy=0 sy=1, gx=1 sx=0: token 1, pc 5
    with pytest.raises(ShapeError, match="grid"):
        ops.pixel_shuffle(ev.tensor(x), 2, layout="tokens")
    with pytest.raises(ShapeError, match="divisible"):
        ops.pixel_shuffle(ev.tensor(np.zeros((1, 3, 2, 2), np.float32)), 2)


# -- PyTorch: the references users know -----------------------------------------------------------
@given(**conv_shapes)
def test_against_torch_conv2d(device, N, C, OC, H, W, KH, KW, sh, sw, ph, pw, dh, dw, bias, seed):
    torch = pytest.importorskip("torch")
    s, p, d = (sh, sw), (ph, pw), (dh, dw)
    assume(_out(H, KH, sh, ph, dh) >= 1 and _out(W, KW, sw, pw, dw) >= 1)
    rng = np.random.default_rng(seed)
    x, w, b = data(rng, (N, C, H, W), "f32"), data(rng, (OC, C, KH, KW), "f32"), data(rng, (OC,), "f32")
    xt, wt, bt = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b))
    yt = torch.nn.functional.conv2d(xt, wt, bt if bias else None, s, p, d)
    dy = data(rng, tuple(yt.shape), "f32")
    yt.backward(torch.tensor(dy.astype(np.float64)))
    y = ops.conv2d(ev.tensor(x), ev.tensor(w), ev.tensor(b) if bias else None, s, p, d)
    got = ops.conv2d_backward(ev.tensor(x), ev.tensor(w), ev.tensor(dy), s, p, d, need_bias=bias)
    mag = conv_ref(np.abs(x), np.abs(w), np.abs(b) if bias else None, s, p, d)
    mdx, mdw, mdb = conv_bwd_ref(np.abs(x), np.abs(w), np.abs(dy), s, p, d)
    P = N * yt.shape[2] * yt.shape[3]
    within(y.numpy(), yt.detach().numpy(), mag, C * KH * KW, "f32", "conv2d vs torch")
    within(got[0].numpy(), xt.grad.numpy(), mdx, OC * KH * KW, "f32", "dx vs torch")
    within(got[1].numpy(), wt.grad.numpy(), mdw, P, "f32", "dw vs torch")
    if bias:
        within(got[2].numpy(), bt.grad.numpy(), mdb, P, "f32", "db vs torch")


def test_against_torch_image_ops(device):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = np.random.default_rng(7)
    for (N, C, H, W, G) in ((2, 6, 5, 3, 3), (1, 4, 7, 1, 1), (3, 8, 2, 5, 4)):
        x, dy = data(rng, (N, C, H, W), "f32"), data(rng, (N, C, H, W), "f32")
        w, b = data(rng, (C,), "f32"), data(rng, (C,), "f32")
        xt, wt, bt = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b))
        yt = tf.group_norm(xt, G, wt, bt, 1e-5)
        yt.backward(torch.tensor(dy.astype(np.float64)))
        y, stats = ops.group_norm(ev.tensor(x), G, ev.tensor(w), ev.tensor(b))
        got = ops.group_norm_backward(ev.tensor(x), G, ev.tensor(w), ev.tensor(dy), stats)
        np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), atol=1e-5)
        for g, t in zip(got, (xt, wt, bt)):
            np.testing.assert_allclose(g.numpy(), t.grad.numpy(), atol=1e-4)
    x = data(rng, (2, 3, 3, 5), "f32")
    xt = torch.tensor(x, requires_grad=True)
    yt = tf.interpolate(xt, scale_factor=(2, 3), mode="nearest")
    dy = data(rng, tuple(yt.shape), "f32")
    yt.backward(torch.tensor(dy))
    assert np.array_equal(ops.upsample2d(ev.tensor(x), (2, 3)).numpy(), yt.detach().numpy())
    np.testing.assert_allclose(ops.upsample2d_backward(ev.tensor(dy), (2, 3)).numpy(), xt.grad.numpy(), atol=1e-6)
    x = data(rng, (2, 18, 3, 4), "f32")
    xt = torch.tensor(x, requires_grad=True)
    yt = tf.pixel_shuffle(xt, 3)
    dy = data(rng, tuple(yt.shape), "f32")
    yt.backward(torch.tensor(dy))
    assert np.array_equal(ops.pixel_shuffle(ev.tensor(x), 3).numpy(), yt.detach().numpy())
    assert np.array_equal(ops.pixel_shuffle_backward(ev.tensor(dy), x.shape, 3).numpy(), xt.grad.numpy())


# -- finite differences of the device's own f32 forward ------------------------------------------
H_FD = 1e-2


def fd_check(forward, grads, inputs, seed=0, rtol=2e-2, atol=3e-3):
    """grads: the device's gradients of L = sum(forward(*inputs) * G) for each input (None: skip)."""
    G = np.random.default_rng(seed).standard_normal(forward(*inputs).shape)
    got = grads(*inputs, G.astype(np.float32))
    for k, g in enumerate(got):
        if g is None:
            continue
        num = np.zeros(inputs[k].shape)
        for i in np.ndindex(inputs[k].shape):
            vals = []
            for h in (H_FD, -H_FD):
                args = [a.copy() for a in inputs]
                args[k][i] += h
                vals.append(float((forward(*args).astype(np.float64) * G).sum()))
            num[i] = (vals[0] - vals[1]) / (2 * H_FD)
        np.testing.assert_allclose(g, num, rtol=rtol, atol=atol, err_msg=f"input {k}")


def T(a):
    return ev.tensor(np.asarray(a, np.float32))


def test_fd_conv2d(device):
    rng = np.random.default_rng(3)
    kw = dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2))
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 2, 5, 4), (3, 2, 2, 2), (3,)))

    def grads(x, w, b, g):
        return [a.numpy() for a in ops.conv2d_backward(T(x), T(w), T(g), need_bias=True, **kw)]
    fd_check(lambda x, w, b: ops.conv2d(T(x), T(w), T(b), **kw).numpy(), grads, [x, w, b])


def test_fd_group_norm(device):
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 3, 2), (4,), (4,)))

    def grads(x, w, b, g):
        y, stats = ops.group_norm(T(x), 2, T(w), T(b))
        return [a.numpy() for a in ops.group_norm_backward(T(x), 2, T(w), T(g), stats)]
    fd_check(lambda x, w, b: ops.group_norm(T(x), 2, T(w), T(b))[0].numpy(), grads, [x, w, b])


def test_fd_upsample2d_pixel_shuffle(device):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 3, 2)).astype(np.float32)
    fd_check(lambda x: ops.upsample2d(T(x), (2, 3)).numpy(),
             lambda x, g: [ops.upsample2d_backward(T(g), (2, 3)).numpy()], [x])
    x = rng.standard_normal((2, 8, 2, 3)).astype(np.float32)
    fd_check(lambda x: ops.pixel_shuffle(T(x), 2).numpy(),
             lambda x, g: [ops.pixel_shuffle_backward(T(g), x.shape, 2).numpy()], [x])
    x = rng.standard_normal((6, 8)).astype(np.float32)
    kw = dict(layout="tokens", grid=(2, 3))
    fd_check(lambda x: ops.pixel_shuffle(T(x), 2, **kw).numpy(),
             lambda x, g: [ops.pixel_shuffle_backward(T(g), x.shape, 2, **kw).numpy()], [x])


# -- the tape ------------------------------------------------------------------------------------
def test_tape_image_ops(device):
    """The autodiff rules: a small conv -> group_norm -> upsample -> pixel_shuffle -> mse chain, every
    gradient against finite differences of the same chain's device forward."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = (rng.standard_normal((4, 2, 2, 2)) * 0.5).astype(np.float32)
    b, gw, gb = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    tgt = rng.standard_normal((1, 1, 8, 8)).astype(np.float32)

    def chain(x, w, b, gw, gb):
        h = F.conv2d(T(x), T(w), T(b), padding=1, stride=1)          # [1, 4, 4, 4]
        h = F.group_norm(h, 2, T(gw), T(gb))
        h = F.upsample2d(h, 1)
        h = F.pixel_shuffle(h, 2)                                      # [1, 1, 8, 8]
        return F.mse_loss(h, T(tgt))

    def grads(x, w, b, gw, gb, g):
        ts = [T(a) for a in (x, w, b, gw, gb)]
        with Tape() as tape:
            h = F.conv2d(ts[0], ts[1], ts[2], padding=1, stride=1)
            h = F.pixel_shuffle(F.upsample2d(F.group_norm(h, 2, ts[3], ts[4]), 1), 2)
            loss = F.mse_loss(h, T(tgt))
        gr = tape.backward(loss)
        return [gr[t].numpy() * float(g.ravel()[0]) for t in ts]
    fd_check(lambda *a: chain(*a).numpy(), grads, [x, w, b, gw, gb])


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("shape", [(2, 3, 50, 45), (1, 2, 64, 128), (3, 2, 41, 67)])
def test_conv2d_split_k_weight_grad(device, dtype, shape):
    """dW over N*OH*OW = 4500, 8192, 8241 pixels: the split-K path (pieces of KSPLIT = 4096, a shorter
    last piece or none, the pieces summed by a matmul with ones)."""
    rng = np.random.default_rng(sum(shape))
    N, C, H, W = shape
    x, w = data(rng, shape, dtype), data(rng, (4, C, 3, 3), dtype)
    dy = data(rng, (N, 4, H, W), dtype)
    X, Wt, DY = rounded(x, dtype), rounded(w, dtype), rounded(dy, dtype)
    _, dwt, _ = ops.conv2d_backward(ev.tensor(x), ev.tensor(w), ev.tensor(dy), padding=1, need_x=False)
    wdw = conv_bwd_ref(X, Wt, DY, (1, 1), (1, 1), (1, 1))[1]
    mdw = conv_bwd_ref(np.abs(X), np.abs(Wt), np.abs(DY), (1, 1), (1, 1), (1, 1))[1]
    # f16: each piece is rounded to f16 before the pieces are summed (one more rounding per piece)
    within(dwt.numpy(), wdw, mdw * (2 if dtype == "f16" else 1), N * H * W, dtype, "conv2d split-K dw")
