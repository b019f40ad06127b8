"""Generation with the KV cache: the cached forward equals the full forward row for row, greedy output
equals the uncached path (also past max_seq_len), and the samplers (top-p, repetition penalty, stop
tokens, streaming)."""
import numpy as np
import pytest

from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.runtime import tensor
from evermind_vk.train import generate
from evermind_vk.train.generate import _pick

CFG = LMConfig(vocab_size=17, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, max_seq_len=12, seed=2)


def test_forward_cached_equals_forward(device):
    m = TransformerLM(CFG)
    ids = np.random.default_rng(0).integers(0, 17, 12).astype(np.uint32)
    full = m.forward(tensor(ids)).numpy()
    cache = m.kv_cache()
    rows = [m.forward_cached(ids[:5], cache).numpy()]
    rows += [m.forward_cached(ids[i:i + 1], cache).numpy() for i in range(5, 9)]
    rows += [m.forward_cached(ids[9:], cache).numpy()]
    assert cache.length == 12
    assert np.allclose(np.concatenate(rows), full, rtol=1e-5, atol=1e-6)
    last = cache.step  # the cache is full: one more token does not fit
    with pytest.raises(Exception, match="full"):
        last([1])


def test_greedy_identical_with_and_without_cache(device):
    m = TransformerLM(CFG)
    # larger weights than the init's, so that the next token depends on the whole context
    m.load_state_dict({k: (v * 10 if v.ndim == 2 else v) for k, v in m.state_dict().items()})
    for prompt, n in (([3], 6), ([1, 2, 3, 4, 5], 14)):  # the second runs past max_seq_len (window refills)
        # greedy with a repetition penalty: deterministic, and the tokens vary
        plain = generate(m, prompt, max_new_tokens=n, use_cache=False, repetition_penalty=3.0)
        streamed = []
        cached = generate(m, prompt, max_new_tokens=n, on_token=streamed.append, repetition_penalty=3.0)
        assert cached == plain == streamed and len(plain) == n and len(set(plain)) > 3


def test_stop_tokens_and_sampling_options(device):
    m = TransformerLM(CFG)
    plain = generate(m, [3], max_new_tokens=6)
    assert generate(m, [3], max_new_tokens=6, stop_tokens=[plain[0]]) == []
    a = generate(m, [3], 8, temperature=1.0, top_p=0.9, repetition_penalty=1.3, seed=4)
    assert a == generate(m, [3], 8, temperature=1.0, top_p=0.9, repetition_penalty=1.3, seed=4)
    k = next(i for i, t in enumerate(a) if t not in a[:i] and i > 0)
    assert generate(m, [3], 8, temperature=1.0, top_p=0.9, repetition_penalty=1.3, seed=4, stop_tokens=[a[k]]) == a[:k]
    with pytest.raises(Exception):
        generate(m, [3], 2, top_p=0.0)


def test_top_p_and_repetition_penalty_semantics():
    rng = np.random.default_rng(0)
    z = np.array([3.0, 2.0, 1.0, 0.0])  # p = .644 .237 .087 .032: top_p .7 keeps the first two
    picks = {_pick(z, [], 1.0, None, 0.7, 1.0, rng) for _ in range(300)}
    assert picks == {0, 1}
    assert {_pick(z, [], 1.0, None, 0.5, 1.0, rng) for _ in range(50)} == {0}
    assert _pick(np.array([2.0, 1.9, -1.0]), [0], 0.0, None, None, 2.0, rng) == 1  # 2 / 2 < 1.9
    assert _pick(np.array([-0.5, -0.6]), [0], 0.0, None, None, 2.0, rng) == 1  # -0.5 * 2 < -0.6
