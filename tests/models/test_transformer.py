"""TransformerLM: whole-model gradients against finite differences."""

import numpy as np

import evermind_vk as ev
from evermind_vk.autodiff import Tape
from evermind_vk.models import LMConfig, TransformerLM


TINY = LMConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)


def T(a):
    return ev.tensor(np.asarray(a, np.float32))




def test_whole_model_finite_differences(device):
    cfg = LMConfig(**{**TINY.to_dict(), "tie_embeddings": False})
    m = TransformerLM(cfg)
    rng = np.random.default_rng(0)
    for k, t in m.params.items():  # larger weights than the init so gradients are well above f32 noise
        t.copy_((rng.standard_normal(t.shape) * 0.5 + (1.0 if "norm" in k else 0.0)).astype(np.float32))
    ids = ev.tensor(np.array([1, 4, 2, 7, 3, 9], np.uint32))
    tg = ev.tensor(np.array([4, 2, 7, 3, 9, 5], np.uint32))
    with Tape() as tape:
        loss = m.loss(ids, tg, batch=2)
    grads = tape.backward(loss).by_name(m.params)
    assert set(grads) == set(m.params)
    h = 1e-2
    for name, p in m.params.items():
        base = p.numpy()
        gd = grads[name].numpy()
        for idx in [tuple(rng.integers(0, s) for s in base.shape) for _ in range(2)]:
            vals = []
            for sgn in (1, -1):
                w = base.astype(np.float64).copy()
                w[idx] += sgn * h
                p.copy_(w.astype(np.float32))
                vals.append(float(m.loss(ids, tg, batch=2).numpy()[0]))
            p.copy_(base)
            fd = (vals[0] - vals[1]) / (2 * h)
            assert abs(gd[idx] - fd) <= 3e-2 * abs(fd) + 2e-3, (name, idx, gd[idx], fd)
