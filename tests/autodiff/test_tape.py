"""The gradient tape: branching, seed forms, accumulation, release, shape checks."""

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.autodiff import functional as F
from evermind_vk.autodiff import Tape


def T(a):
    return ev.tensor(np.asarray(a, np.float32))


def test_branching_and_seed_forms(device):
    x = T([1.0, -2.0])
    with Tape() as tape:
        a, b = F.scale(x, 2.0), F.scale(x, 3.0)
    g = tape.backward({a: T([1, 1]), b: T([1, 1])})
    assert np.array_equal(g[x].numpy(), [5, 5])
    with Tape() as tape:
        a, b = F.scale(x, 2.0), F.scale(x, 3.0)
    g = tape.backward([(a, T([1, 0])), (b, T([0, 1]))])
    assert np.array_equal(g[x].numpy(), [2, 3])


def test_reuse_accumulates_and_intermediates_are_released(device):
    x = T([1.0, 2.0, 3.0])
    with Tape() as tape:
        y = F.add(x, x)
        z = F.mul(y, y)
    g = tape.backward({z: T([1, 1, 1])})
    assert np.allclose(g[x].numpy(), 8 * np.array([1, 2, 3]))  # d/dx (2x)^2 = 8x
    assert y not in g and z not in g and tape.entries == []  # released
    with Tape() as tape:
        y = F.add(x, x)
    g = tape.backward({y: T([1, 2, 3])}, keep_intermediate=True)
    assert np.array_equal(g[x].numpy(), [2, 4, 6]) and y in g


def test_loss_seed_integer_inputs_and_shape_checks(device):
    table = T(np.arange(12).reshape(4, 3))
    ids = ev.tensor(np.array([1, 3], np.uint32))
    tg = ev.tensor(np.array([0, 2], np.uint32))
    with Tape() as tape:
        loss = F.cross_entropy(F.embedding(ids, table), tg)
    g = tape.backward(loss)
    assert ids not in g and tg not in g and g[table].shape == (4, 3)
    with Tape() as tape:
        y = F.scale(T([1, 2]), 2.0)
    with pytest.raises(ev.ShapeError):
        tape.backward({y: T([1, 2, 3])})
    with pytest.raises(ev.ShapeError, match="1-element"):
        tape.backward(y)
    with pytest.raises(ev.EvermindError):
        tape.backward(42)



def test_the_tape_keeps_only_what_rules_need(device):
    """An intermediate no backward rule captured dies when the forward code drops it (the tape notes it by key),
    while one a rule needs stays; gradients are unchanged, also when a dead tensor's id() is reused."""
    import gc
    import weakref
    x, w = T([1.0, -2.0, 3.0]), T([0.5, 0.25, 2.0])
    with Tape() as tape:
        a = F.scale(x, 2.0)  # add's and scale's rules keep nothing
        b = F.add(a, x)
        c = F.mul(b, w)  # mul's rule keeps b and w
        dead, kept = weakref.ref(a), weakref.ref(b)
        del a, b
        gc.collect()
        assert dead() is None and kept() is not None
        fresh = [F.scale(x, 1.0) for _ in range(8)]  # new tensors, possibly at the dead one's id()
    g = tape.backward({c: T([1, 1, 1])})
    np.testing.assert_allclose(g[x].numpy(), 3 * w.numpy())  # d/dx sum((2x + x) w)
    np.testing.assert_allclose(g[w].numpy(), 3 * x.numpy())
    assert all(f not in g for f in fresh)


def test_a_norm_adds_the_residual_gradient_in_its_own_kernel(device):
    """rms_norm's fuse rule: the gradient its input has from a residual stream goes into the norm's backward
    kernel (flag res) instead of an add; the gradients are the float64 chain rule's."""
    import ref
    rng = np.random.default_rng(3)
    x, dy = rng.standard_normal((6, 40)), rng.standard_normal((6, 40))
    w1, w2 = rng.standard_normal(40), rng.standard_normal(40)
    xt, w1t, w2t, dyt = T(x), T(w1), T(w2), T(dy)
    with ev.record(run=False) as prog:
        with Tape() as tape:
            h = F.add(xt, F.rms_norm(xt, w1t))  # x reaches the loss twice: through the norm and the residual
            y = F.rms_norm(h, w2t)
        g = tape.backward({y: dyt})
    assert not [n for n in prog.labels if n.startswith("add_")][1:], prog.labels  # the forward's add only
    assert sum(n.startswith("rms_norm_backward") and "_res" in n for n in prog.labels) == 1, prog.labels  # the inner norm
    prog.run()
    X, W1, W2 = (a.astype(np.float32).astype(np.float64) for a in (x, w1, w2))
    H = X + ref.rmsnorm(X, W1, 1e-6)[0]
    dh, dw2 = ref.rmsnorm_bwd(H, W2, dy.astype(np.float32), 1e-6)
    dxn, dw1 = ref.rmsnorm_bwd(X, W1, dh, 1e-6)
    for got, want in ((g[xt], dh + dxn), (g[w1t], dw1), (g[w2t], dw2)):
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-4, atol=2e-4)


def test_projections_of_one_input_add_their_input_gradients_in_place(device):
    """Three matmuls of one input (q, k and v): the second and third dX go into the first's buffer (beta 1),
    since the tape alone holds it; no add runs. A gradient the tape does not hold alone (an add's rule hands
    one tensor to both its inputs) is never written in place: x + x.w still gets dy + dy.w^T."""
    rng = np.random.default_rng(5)
    h, ws = rng.standard_normal((5, 6)), [rng.standard_normal((4, 6)) for _ in range(3)]
    dys = [rng.standard_normal((5, 4)) for _ in range(3)]
    ht, wts, dyts = T(h), [T(w) for w in ws], [T(d) for d in dys]
    with ev.record(run=False) as prog:
        with Tape() as tape:
            outs = [F.matmul(ht, wt, transpose_b=True) for wt in wts]
        g = tape.backward(dict(zip(outs, dyts)))
    assert not [n for n in prog.labels if n.startswith("add_")], prog.labels
    prog.run()
    f = lambda a: a.astype(np.float32).astype(np.float64)
    want = sum(f(d) @ f(w) for d, w in zip(dys, ws))
    np.testing.assert_allclose(g[ht].numpy(), want, rtol=1e-5, atol=1e-5)
    for wt, d in zip(wts, dys):
        np.testing.assert_allclose(g[wt].numpy(), f(d).T @ f(h), rtol=1e-5, atol=1e-5)
    x, w, dy = rng.standard_normal((4, 3)), rng.standard_normal((3, 3)), rng.standard_normal((4, 3))
    xt, wt, dyt = T(x), T(w), T(dy)
    with Tape() as tape:
        y = F.add(xt, F.matmul(xt, wt))
    g = tape.backward({y: dyt})
    np.testing.assert_allclose(g[xt].numpy(), f(dy) + f(dy) @ f(w).T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g[wt].numpy(), f(x).T @ f(dy), rtol=1e-5, atol=1e-5)
