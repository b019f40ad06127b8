"""Every backward against central finite differences of the device's own f32 forward.

L = sum(forward(inputs) * G) for a fixed random G; dL/dinput by the backward kernel vs
(L(x + h e_i) - L(x - h e_i)) / 2h computed in float64 from the f32 forward."""
import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk import ops

H = 1e-2


def fd_grad(loss, x):
    g = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += H
        xm[i] -= H
        g[i] = (loss(xp) - loss(xm)) / (2 * H)
    return g


def check(forward, backward, inputs, seed=0, rtol=2e-2, atol=2e-3):
    """forward(*np arrays) -> np output; backward(*np arrays, G) -> list of grads (None = skip)."""
    rng = np.random.default_rng(seed)
    out = forward(*inputs)
    G = rng.standard_normal(out.shape)
    grads = backward(*inputs, G.astype(np.float32))
    for k, (x, g) in enumerate(zip(inputs, grads)):
        if g is None:
            continue

        def loss(xk, k=k):
            args = list(inputs)
            args[k] = xk.astype(np.float32)
            return float((forward(*args).astype(np.float64) * G).sum())
        np.testing.assert_allclose(g, fd_grad(loss, x.astype(np.float64)), rtol=rtol, atol=atol,
                                   err_msg=f"input {k}")


def T(a):
    return ev.tensor(np.asarray(a, np.float32))


def rnd(*shape, seed=1, s=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * s).astype(np.float32)


def test_fd_softmax(device):
    for causal in (False, True):
        check(lambda x: ops.softmax(T(x), causal=causal).numpy(),
              lambda x, g: [ops.softmax_backward(ops.softmax(T(x), causal=causal), T(g), causal=causal).numpy()],
              [rnd(3, 5)])


def test_fd_rms_norm(device):
    def bwd(x, w, g):
        y, r = ops.rms_norm(T(x), T(w))
        dx, dw = ops.rms_norm_backward(T(x), T(w), T(g), r)
        return [dx.numpy(), dw.numpy()]
    check(lambda x, w: ops.rms_norm(T(x), T(w))[0].numpy(), bwd, [rnd(3, 6), rnd(6, seed=2)])


def test_fd_layer_norm(device):
    def bwd(x, w, b, g):
        y, m, r = ops.layer_norm(T(x), T(w), T(b))
        return [a.numpy() for a in ops.layer_norm_backward(T(x), T(w), T(g), m, r)]
    check(lambda x, w, b: ops.layer_norm(T(x), T(w), T(b))[0].numpy(), bwd, [rnd(3, 6), rnd(6, seed=2), rnd(6, seed=3)])


def test_fd_cross_entropy(device):
    t = ev.tensor(np.array([2, 0, 9, 4], np.uint32))  # 9 >= vocab: ignored

    def bwd(x, g):
        loss, count = ops.cross_entropy(T(x), t)
        return [ops.cross_entropy_backward(T(x), t, count, T(g.reshape(1))).numpy()]
    check(lambda x: ops.cross_entropy(T(x), t)[0].numpy(), bwd, [rnd(4, 5, s=2)])


@pytest.mark.parametrize("transpose", [False, True])
def test_fd_embedding(device, transpose):
    ids = ev.tensor(np.array([0, 2, 1, 2, 5, 2], np.uint32))
    check(lambda tab: ops.embedding(ids, T(tab), transpose=transpose, index_offset=1).numpy(),
          lambda tab, g: [ops.embedding_backward(ids, T(g), 3, transpose=transpose, index_offset=1).numpy()],
          [rnd(4, 3) if transpose else rnd(3, 4)])


def test_fd_rope(device):
    check(lambda x: ops.rope(T(x), start_pos=3).numpy(),
          lambda x, g: [ops.rope_backward(T(g), start_pos=3).numpy()], [rnd(3, 2, 4)])


def test_fd_bias_slice(device):
    check(lambda x, b: ops.bias_add(T(x), T(b)).numpy(),
          lambda x, b, g: [g, ops.bias_add_backward(T(g)).numpy()], [rnd(3, 4), rnd(4, seed=2)])
    check(lambda x: ops.row_slice(T(x), 1).numpy(),
          lambda x, g: [ops.row_slice_backward(T(g), 3, 1).numpy()], [rnd(3, 4)])


@pytest.mark.parametrize("kind", ["silu", "gelu"])
def test_fd_activations(device, kind):
    check(lambda x: getattr(ops, kind)(T(x)).numpy(),
          lambda x, g: [getattr(ops, kind + "_backward")(T(x), T(g)).numpy()], [rnd(3, 4, s=2)])


@pytest.mark.parametrize("kind", ["silu", "gelu"])
@pytest.mark.parametrize("limit", [0.0, 0.8])
def test_fd_glu(device, kind, limit):
    x = rnd(3, 8, s=1.5)
    if limit:  # keep |act(gate) * up| away from the limit so the clamp does not flip under +-h
        from ref import act
        a_up = np.abs(act(x[:, :4].astype(np.float64), kind) * x[:, 4:])
        x[:, 4:] *= np.where(np.abs(a_up - limit) < 0.2, 3.0, 1.0)
    check(lambda x: ops.glu(T(x), kind, limit).numpy(),
          lambda x, g: [ops.glu_backward(T(x), T(g), kind, limit).numpy()], [x])


@pytest.mark.parametrize("path", ["matmul", "fused"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads", [(1, 1), (4, 2), (2, 1)])
def test_fd_attention(device, monkeypatch, path, causal, heads):
    H, KVH = heads
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", path)

    def fwd(q, k, v):
        return ops.attention(T(q), T(k), T(v), causal=causal)[0].numpy()

    def bwd(q, k, v, g):
        out, p = ops.attention(T(q), T(k), T(v), causal=causal)
        return [a.numpy() for a in ops.attention_backward(T(q), T(k), T(v), T(g), p, causal=causal, out=out)]
    check(fwd, bwd, [rnd(3, H, 2), rnd(3, KVH, 2, seed=2), rnd(3, KVH, 2, seed=3)])


@pytest.mark.parametrize("config", ["", "d32_p4_r16x32"])
def test_fd_fused_attention_packed(device, monkeypatch, config):
    """The fused kernels on two packed sequences of 5 tokens (GQA 2:1, causal), default and row-split layouts."""
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    monkeypatch.setenv("EVERMIND_VK_ATTENTION_VARIANT", config)

    def fwd(q, k, v):
        return ops.attention(T(q), T(k), T(v), causal=True, batch=2)[0].numpy()

    def bwd(q, k, v, g):
        out, lse = ops.attention(T(q), T(k), T(v), causal=True, batch=2)
        assert lse.shape == (4, 5)
        return [a.numpy() for a in ops.attention_backward(T(q), T(k), T(v), T(g), lse, causal=True, batch=2, out=out)]
    check(fwd, bwd, [rnd(10, 2, 3), rnd(10, 1, 3, seed=2), rnd(10, 1, 3, seed=3)])
