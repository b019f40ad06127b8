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
