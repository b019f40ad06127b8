"""Recorded decoding (train/decode.py): greedy output equals the uncached path (also past max_seq_len,
with a repetition penalty), batches of prompts of different lengths decode as each alone, the programs are
recorded once and replayed (one submit per token), sampling is reproducible, and generate's prompt forms."""
import numpy as np
import pytest

from evermind_vk.errors import TokenError
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import generate
from evermind_vk.train.decode import bucket, decoder

CFG = LMConfig(vocab_size=17, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, max_seq_len=12, seed=2)


@pytest.fixture(scope="module")
def model():
    m = TransformerLM(CFG)
    # larger weights than the init's, so that the next token depends on the whole context
    m.load_state_dict({k: (v * 10 if v.ndim == 2 else v) for k, v in m.state_dict().items()})
    return m


def test_greedy_identical_to_uncached(device, model):
    for prompt, n in (([3], 6), ([1, 2, 3, 4, 5], 14)):  # the second runs past max_seq_len (cache refills)
        plain = generate(model, prompt, max_new_tokens=n, use_cache=False, repetition_penalty=3.0)
        streamed = []
        fast = generate(model, prompt, max_new_tokens=n, on_token=streamed.append, repetition_penalty=3.0)
        assert fast == plain == streamed and len(plain) == n and len(set(plain)) > 3


def test_batch_equals_each_alone(device, model):
    prompts = [[3], [1, 2, 3, 4, 5, 6, 7], [9, 9, 4]]
    alone = [generate(model, p, max_new_tokens=9, repetition_penalty=2.0) for p in prompts]
    seen = []
    together = generate(model, prompts, max_new_tokens=9, repetition_penalty=2.0,
                        on_token=lambda b, t: seen.append((b, t)))
    assert together == alone
    assert [t for b, t in seen if b == 1] == alone[1]
    # per-sequence stops: the first sequence stops at its second token, the others go on
    stop = alone[0][1]
    got = generate(model, prompts, max_new_tokens=9, repetition_penalty=2.0, stop_tokens=[stop])
    for g, a in zip(got, alone):
        assert g == (a[:a.index(stop)] if stop in a else a)
    sampled = generate(model, prompts, max_new_tokens=5, temperature=1.0, top_k=5, seed=3)
    assert sampled == generate(model, prompts, max_new_tokens=5, temperature=1.0, top_k=5, seed=3)
    # item b's draw depends on its own slot, seed and step only: the batch's first row is the single run's
    assert generate(model, prompts[0], max_new_tokens=5, temperature=1.0, top_k=5, seed=3) == sampled[0]


def test_recorded_once_one_submit_per_token(device, model):
    generate(model, [[1, 2], [3]], max_new_tokens=3)  # records the step and the bucket's prefill
    dec = decoder(model, 2)
    step = dec._step[0]
    dev = model.device
    before = dev.submits
    generate(model, [[4, 5], [6]], max_new_tokens=6)
    assert dec._step[0] is step  # replayed, not recorded again
    assert dev.submits - before == 2 + 5  # two prefills, then one submit per decoded token


def test_prompt_forms(device, model):
    ids = [1, 2, 3]
    want = generate(model, ids, max_new_tokens=4)
    assert generate(model, np.array(ids), max_new_tokens=4) == want
    assert generate(model, np.array([ids, ids]), max_new_tokens=4) == [want, want]
    with pytest.raises(TokenError, match="byte vocabulary"):
        generate(model, "hi", max_new_tokens=2)
    m = TransformerLM(LMConfig(vocab_size=256, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=16,
                               max_seq_len=16))
    text = generate(m, "hi", max_new_tokens=3)
    assert isinstance(text, str) and len(text.encode("utf-8", errors="surrogatepass")) >= 1
    assert generate(m, ["hi", "yo"], max_new_tokens=2) == [generate(m, "hi", max_new_tokens=2),
                                                           generate(m, "yo", max_new_tokens=2)]
    with pytest.raises(TokenError):
        generate(model, [[1], []], max_new_tokens=2)


def test_bucket():
    assert [bucket(n, 100) for n in (1, 16, 17, 64, 65, 99)] == [16, 16, 32, 64, 100, 100]
