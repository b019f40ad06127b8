"""Several decode steps a replay (train/decode.py _run_chain, EVERMIND_VK_DECODE_CHAIN): each step's picks are
fed to the next on the device, one submit and one read-back for k tokens of every sequence. The same kernels
on the same inputs as k single replays: greedy and seeded sampled output, stops, batches of prompts of different
lengths, the KV cache's refill at max_seq_len and a hybrid stack's attention caches growing equal one token a
replay, on the fused and the per-op steps of every model kind."""
import dataclasses

import numpy as np
import pytest

from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.runtime.select import decode as select_decode
from evermind_vk.train import generate
from evermind_vk.train.decode import decoder

from decode_models import CFG, CFG_FUSED, _evermind, _mamba, _model


@pytest.fixture(autouse=True)
def fused_where_it_can(monkeypatch):
    """The fused kernels' rule as on a CPU device, whatever device runs the suite (test_decode.py's reason)."""
    import evermind_vk as ev
    monkeypatch.setattr(select_decode, "LAYER_DEVICE_TYPES", (*select_decode.LAYER_DEVICE_TYPES, ev.get_device().info.type))


def _runs(m, monkeypatch, chain: str, prompts, n: int, stop: int):
    """Greedy with a repetition penalty, seeded sampling with top-k, and the batch greedy with a stop token, at
    `chain` tokens a replay."""
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", chain)
    st = {}
    out = (generate(m, prompts, max_new_tokens=n, repetition_penalty=3.0, stats=st),
           generate(m, prompts[0], max_new_tokens=n, temperature=1.0, top_k=5, seed=7),
           generate(m, prompts, max_new_tokens=n, temperature=0.9, top_p=0.9, seed=3),
           generate(m, prompts, max_new_tokens=n, repetition_penalty=3.0, stop_tokens=[stop]))
    return out, st


MODELS = {
    "tf per-op": (lambda: _model(CFG), "0"),
    "tf fused": (lambda: _model(CFG_FUSED), "1"),
    "tf fused untied": (lambda: _model(dataclasses.replace(CFG_FUSED, tie_embeddings=False)), "1"),
    "evermind fused": (_evermind, "1"),
    "evermind per-op": (_evermind, "0"),
    "mamba1-attention fused": (lambda: _mamba(("mamba1", "attention")), "1"),
    "mamba2-mamba3": (lambda: _mamba(("mamba2", "mamba3")), ""),
    "attention-mamba1 per-op": (lambda: _mamba(("attention", "mamba1")), "0"),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_chains_equal_one_token_a_replay(device, name, monkeypatch):
    make, fused = MODELS[name]
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", fused)
    m = make()
    prompts = [[3, 1, 4, 1, 5], [6], [5, 3, 9]]
    # 10 new tokens: steps 1..9 run as chains of 8 and 1 (chain 8), 4 + 4 + 1 (4), 2 x 4 + 1 (2 and 3)
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "1")
    greedy = generate(m, prompts, max_new_tokens=10, repetition_penalty=3.0)
    assert len({t for seq in greedy for t in seq}) > 3  # the output depends on the context
    stop = greedy[0][3]  # the first sequence stops at its fourth token, inside the first chain
    one, st1 = _runs(m, monkeypatch, "1", prompts, 10, stop)
    assert one[0] == greedy and len(one[3][0]) <= 3 and one[3][0] == greedy[0][:len(one[3][0])]
    for chain in ("2", "3", "4", "8", "64"):
        got, st = _runs(m, monkeypatch, chain, prompts, 10, stop)
        assert got == one, (name, chain)
        assert st["decode_tokens"] == st1["decode_tokens"]  # only the tokens kept are counted


@pytest.mark.parametrize("fused", ["0", "1"])
def test_one_submit_a_chain(device, fused, monkeypatch):
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", fused)
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "4")
    m = _model(CFG_FUSED)
    generate(m, [[1, 2], [3]], max_new_tokens=8)  # records the prefill and the chains of 4, 2 and 1
    dec, dev = decoder(m, 2), m.device
    progs = {k: dec.chain_program(k) for k in (4, 2)}
    assert all(progs.values())
    before = dev.submits
    generate(m, [[4, 5], [6]], max_new_tokens=8)
    # the prefill, then steps 1..7 as chains of 4 and 2 and one single step
    assert dev.submits - before == 1 + 1 + 1 + 1
    assert {k: dec.chain_program(k) for k in (4, 2)} == progs  # replayed, not recorded again
    labels = progs[4].labels
    assert labels.count("download") == 4 and labels.count("upload") == 4 + (fused == "0")
    # each later step's ids from the step before, on the device: into hyper's end (and the ids buffer, per-op)
    assert sum(lb.startswith("scatter_strided") for lb in labels) == 3 * (1 + (fused == "0"))


def test_chain_stops_short_of_the_cache_refill(device, monkeypatch):
    """A sequence whose cache would pass max_seq_len inside a chain: the chain shrinks (to one token a replay at
    the refill), and the output equals the uncached path's across the refills."""
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "8")
    for cfg, fused in ((CFG, "0"), (CFG_FUSED, "1")):
        monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", fused)
        m = _model(cfg)
        for prompt, n in (([1, 2, 3, 4, 5], 20), ([3], 14)):  # max_seq_len 12: refills
            plain = generate(m, prompt, max_new_tokens=n, use_cache=False, repetition_penalty=3.0)
            assert generate(m, prompt, max_new_tokens=n, repetition_penalty=3.0) == plain
        dec = decoder(m, 1)
        assert dec.chain_tokens(8, [True]) <= dec.L - len(dec.cached[0]) or dec.chain_tokens(8, [True]) == 1


def test_chain_grows_the_attention_caches(device, monkeypatch):
    """A hybrid stack's attention caches grow before a chain that needs the room (programs recorded again)."""
    from evermind_vk.models import mamba
    monkeypatch.setattr(mamba, "ATTENTION_CACHE_MIN", 4)
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "8")
    m = _mamba(("mamba1", "attention"))
    prompts = [[3, 1, 4, 1, 5], [6]]
    plain = [generate(m, p, max_new_tokens=12, use_cache=False, repetition_penalty=100.0) for p in prompts]
    assert generate(m, prompts, max_new_tokens=12, repetition_penalty=100.0) == plain
    assert m.state_capacity(decoder(m, 2).state) == 16


def test_chain_tokens_rule(device, monkeypatch):
    dec = decoder(_model(CFG), 2)
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "6")
    assert [dec.chain_tokens(r, [True, True]) for r in (1, 2, 3, 5, 9)] == [1, 2, 2, 4, 4]  # powers of two
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "1")
    assert dec.chain_tokens(9, [True, True]) == 1
    monkeypatch.delenv("EVERMIND_VK_DECODE_CHAIN")
    for dtype in ("cpu", "discrete-gpu"):
        want = select_decode.TUNED["CHAIN"].value["cpu" if dtype == "cpu" else "gpu"]
        assert select_decode.chain_tokens(dtype) == want and select_decode.chain_tokens(dtype, 3) == 3


def test_a_chain_of_one_prompt_token(device, monkeypatch):
    """A one-token prompt and one new token: no decode replay runs (the prefill picks the token)."""
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "8")
    m = TransformerLM(LMConfig(vocab_size=17, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=16, max_seq_len=8))
    assert len(generate(m, [3], max_new_tokens=1)) == 1
    assert generate(m, [3], max_new_tokens=0) == []


@pytest.mark.parametrize("cfg,fused", [(CFG, "0"), (CFG_FUSED, "1")], ids=["per-op", "fused"])
def test_chain_keeps_the_kept_prefix(device, cfg, fused, monkeypatch):
    """A chat's later turn (keep_prefix) after chained replies: the cache's bookkeeping of the tokens each chain
    fed keeps the right prefix, and the turn's reply equals the uncached path's."""
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", fused)
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "4")
    m = _model(cfg)
    first = [1, 2]
    reply = generate(m, first, max_new_tokens=6, keep_prefix=True, repetition_penalty=2.0)  # a chain of 4 inside
    assert reply == generate(m, first, max_new_tokens=6, use_cache=False, repetition_penalty=2.0)
    dec = decoder(m, 1)
    assert dec.cached[0] == first + reply[:-1]  # the last reply token was never fed
    turn = first + reply + [5]
    st = {}
    kept = generate(m, turn, max_new_tokens=3, keep_prefix=True, repetition_penalty=2.0, stats=st)
    assert kept == generate(m, turn, max_new_tokens=3, use_cache=False, repetition_penalty=2.0)
    assert st["prefill_tokens"] == 2  # the last reply token and the new one
