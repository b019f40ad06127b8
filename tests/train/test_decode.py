"""Recorded decoding (train/decode.py): greedy output equals the uncached path (also past max_seq_len,
with a repetition penalty), batches of prompts of different lengths decode as each alone, the programs are
recorded once and replayed (one submit per token), sampling is reproducible, and generate's prompt forms."""
import dataclasses

import numpy as np
import pytest

from evermind_vk.errors import TokenError
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import generate
from evermind_vk.train.decode import bucket, decoder

from decode_models import CFG, CFG_FUSED, _evermind, _mamba, _model


@pytest.fixture(autouse=True)
def fused_by_default_here(monkeypatch):
    """The decode path rule as on a CPU device, whatever device runs the suite: unforced, the fused kernels
    run where they can (on a GPU too), so these tests check them there (the rule's device types themselves:
    tests/ops' path-rule tests). One token a replay on every device (the submit counts below; several:
    tests/train/test_decode_chain.py)."""
    import evermind_vk as ev
    from evermind_vk.runtime.select import decode as select_decode
    monkeypatch.setattr(select_decode, "LAYER_DEVICE_TYPES", (*select_decode.LAYER_DEVICE_TYPES, ev.get_device().info.type))
    monkeypatch.setenv("EVERMIND_VK_DECODE_CHAIN", "1")


@pytest.fixture(scope="module")
def model():
    return _model(CFG)


@pytest.mark.parametrize("path", ["per-op", "fused", "fused untied", "per-op forced"])
def test_greedy_identical_to_uncached(device, model, path, monkeypatch):
    if path != "per-op":
        model = _model(dataclasses.replace(CFG_FUSED, tie_embeddings=path != "fused untied"))
    if path == "per-op forced":
        monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", "0")
    for prompt, n in (([3], 6), ([1, 2, 3, 4, 5], 14)):  # the second runs past max_seq_len (cache refills)
        plain = generate(model, prompt, max_new_tokens=n, use_cache=False, repetition_penalty=3.0)
        streamed = []
        fast = generate(model, prompt, max_new_tokens=n, on_token=streamed.append, repetition_penalty=3.0)
        assert fast == plain == streamed and len(plain) == n and len(set(plain)) > 3
    labels = decoder(model, 1).step_program().labels
    fused = path.startswith("fused")
    assert (sum(lb.startswith("decode_layer") for lb in labels) == model.config.n_layers) == fused, (path, labels)
    if fused:  # the upload (hyper with the ids), one dispatch a block (the last also the logits), sampler, download
        assert len(labels) == 1 + model.config.n_layers + 2, labels


@pytest.mark.parametrize("fused", [False, True])
def test_batch_equals_each_alone(device, model, fused):
    if fused:  # decode_layer, two sequences a workgroup
        model = _model(CFG_FUSED)
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
    assert dev.submits - before == 1 + 5  # one prefill of both prompts, then one submit per decoded token


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


@pytest.mark.parametrize("fused", [False, True])
def test_kept_prefix_runs_only_the_new_tokens(device, model, fused):
    """generate(keep_prefix=True), a chat's later turn: the decoder's cache keeps the positions whose tokens
    begin the prompt and feeds only the rest through the decode step (the per-op step, or decode_layer); the
    tokens equal the uncached path's, with a repetition penalty too; a prompt that does not begin with the
    cache runs a whole prefill."""
    if fused:
        model = _model(CFG_FUSED)
    first = [1, 2, 3]
    reply = generate(model, first, max_new_tokens=3, keep_prefix=True, repetition_penalty=2.0)
    turn = first + reply + [5, 6]
    st = {}
    kept = generate(model, turn, max_new_tokens=3, keep_prefix=True, repetition_penalty=2.0, stats=st)
    assert kept == generate(model, turn, max_new_tokens=3, use_cache=False, repetition_penalty=2.0)
    assert st["prefill_tokens"] == len(turn) - (len(first) + len(reply) - 1)  # the last reply token was never fed
    dec = decoder(model, 1)
    kv = [t.numpy()[0, :len(turn)] for t in dec.k + dec.v]  # the prompt's keys and values, kept + fed
    generate(model, turn, max_new_tokens=1)  # a whole prefill of the same prompt
    for a, b in zip(kv, [t.numpy()[0, :len(turn)] for t in dec.k + dec.v]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    other = [4, 4, 2, 7]
    assert generate(model, other, max_new_tokens=3, keep_prefix=True, stats=st) == \
        generate(model, other, max_new_tokens=3, use_cache=False)
    assert st["prefill_tokens"] == len(other)


def test_bucket():
    assert [bucket(n, 100) for n in (1, 16, 17, 64, 65, 99)] == [16, 16, 32, 64, 100, 100]


# (model, repetition penalty: strong for the Mamba stacks, whose tied heads of random weights repeat the last token)
@pytest.mark.parametrize("make,rp", [(_evermind, 2.0), (lambda: _mamba(("mamba1", "mamba2")), 100.0),
                                     (lambda: _mamba(("mamba1", "attention")), 100.0)],
                         ids=["evermind", "mamba", "mamba-attention"])
def test_other_models_greedy_and_batches(device, make, rp):
    m = make()
    prompts = [[3, 1, 4, 1, 5, 9, 2], [6], [5, 3]]
    plain = [generate(m, p, max_new_tokens=6, use_cache=False, repetition_penalty=rp) for p in prompts]
    assert generate(m, prompts, max_new_tokens=6, repetition_penalty=rp) == plain
    assert len({t for p in plain for t in p}) > 3
    st = {}
    a = generate(m, prompts[0], max_new_tokens=5, temperature=1.0, top_p=0.9, seed=2, stats=st)
    assert a == generate(m, prompts[0], max_new_tokens=5, temperature=1.0, top_p=0.9, seed=2)
    assert st["prefill_tokens"] > 0 and st["decode_tokens"] == 4


def test_evermind_window_is_the_receptive_field(device):
    """The W tokens of a prompt the decoder feeds give the last token's logits exactly as the whole context (and
    so the conv windows after them); W - 1 do not."""
    from evermind_vk.runtime import tensor
    m = _evermind()
    W = decoder(m, 1).W
    ids = np.random.default_rng(0).integers(0, 19, 3 * W).astype(np.uint32)
    full = m.forward(tensor(ids)).numpy()[-1]
    assert np.allclose(m.forward(tensor(ids[-W:])).numpy()[-1], full, rtol=1e-5, atol=1e-5)
    assert not np.allclose(m.forward(tensor(ids[-(W - 1):])).numpy()[-1], full, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("layers,knob", [(("mamba1", "mamba1"), ""), (("mamba1", "mamba1"), "0"),
                                        (("mamba2", "mamba3"), ""), (("attention", "mamba1"), ""),
                                        (("attention", "mamba1"), "0"), (("mamba1", "attention"), "1"),
                                        (("attention",), "")],
                         ids=["mamba1", "mamba1-per-op", "mamba2-mamba3", "attention-mamba1", "attention-mamba1-per-op",
                              "mamba1-attention-forced", "attention"])
def test_mamba_batch_decode_is_one_program_per_step(device, layers, knob, monkeypatch):
    """One recorded program feeds a token of every sequence of the batch (one submit per decoded token for
    all of them; attention layers read each sequence's position from the hyper buffer); prompts of different
    lengths, and a sequence that stops early, decode as each alone and as the uncached path. mamba1 and attention
    layers: on mamba1_decode and hybrid_attn_decode (several sequences a workgroup), or forced to the per-op
    step."""
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", knob)
    m = _mamba(layers)
    prompts = [[3, 1, 4, 1, 5], [6], [5, 3]]
    alone = [generate(m, p, max_new_tokens=6, repetition_penalty=100.0) for p in prompts]
    assert alone == [generate(m, p, max_new_tokens=6, use_cache=False, repetition_penalty=100.0) for p in prompts]
    assert generate(m, prompts, max_new_tokens=6, repetition_penalty=100.0) == alone  # records the programs
    dec, dev = decoder(m, 3), m.device
    step = dec.step_program()
    assert step is not None and dec._step[1].numel == 3  # the decode step feeds all three slots
    plain = [generate(m, p, max_new_tokens=6) for p in prompts]
    before = dev.submits
    assert generate(m, prompts, max_new_tokens=6) == plain
    # the states' reset (none to zero for attention alone: its caches are read only where written); a prefill
    # program a prompt (their lengths differ); then one replay per decoded token
    assert dev.submits - before == (layers != ("attention",)) + 3 + 5 and dec.step_program() is step
    stop = alone[1][1]  # the second sequence stops; the others go on beside its dead slot
    got = generate(m, prompts, max_new_tokens=6, repetition_penalty=100.0, stop_tokens=[stop])
    assert got == [a[:a.index(stop)] if stop in a else a for a in alone]
    sampled = generate(m, prompts, max_new_tokens=4, temperature=1.0, top_k=5, seed=3)
    assert generate(m, prompts[0], max_new_tokens=4, temperature=1.0, top_k=5, seed=3) == sampled[0]
    labels = dec.step_program().labels
    # each mamba1 layer on mamba1_decode, each attention layer on hybrid_attn_decode (a mixed stack's others per-op
    # beside them), unless forced off
    for op, kind in (("mamba1_decode", "mamba1"), ("hybrid_attn_decode", "attention")):
        assert sum(lb.startswith(op) for lb in labels) == (layers.count(kind) if knob != "0" else 0), labels


@pytest.mark.parametrize("path", ["fused", "fused euler", "fused head apart", "fused one layer", "per-op forced"])
def test_mamba1_greedy_identical_to_uncached(device, path, monkeypatch):
    """A mamba1 stack's recorded step on mamba1_decode (one dispatch a layer: layer 0 also looks up the embedding,
    the last also the final norm and the tied head's logits, or, for a vocabulary too large to fold in, the head's
    product after it) or, forced, on the model's per-op step: greedy tokens equal the uncached path's (the whole
    context through the chunked scans), with both discretizations."""
    if path == "per-op forced":
        monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", "0")
    kw = dict(discretization="euler") if "euler" in path else dict(vocabSize=33000) if "apart" in path else {}
    layers = ("mamba1",) if "one layer" in path else ("mamba1", "mamba1")  # one layer: the embedding and the head
    m = _mamba(layers, **kw)
    for prompt, n in (([3], 6), ([1, 2, 3, 4, 5], 9)):
        plain = generate(m, prompt, max_new_tokens=n, use_cache=False, repetition_penalty=100.0)
        assert generate(m, prompt, max_new_tokens=n, repetition_penalty=100.0) == plain and len(set(plain)) > 3
    labels = decoder(m, 1).step_program().labels
    fused = path.startswith("fused")
    assert sum(lb.startswith("mamba1_decode") for lb in labels) == (len(layers) if fused else 0), labels
    if fused:  # the upload (hyper with the ids), a dispatch a layer, (the head's product,) the sampler, the download
        assert len(labels) == 1 + len(layers) + ("apart" in path) + 2, labels


@pytest.mark.parametrize("knob", ["", "1"], ids=["default", "forced"])
@pytest.mark.parametrize("layers", [("attention", "mamba1"), ("mamba1", "attention"), ("attention",)],
                         ids=["attention-mamba1", "mamba1-attention", "attention"])
def test_mamba_attention_greedy_identical_to_uncached(device, layers, knob, monkeypatch):
    """A stack with attention layers decodes one dispatch a layer (attention layers on hybrid_attn_decode, mamba1
    layers on mamba1_decode; layer 0 also looks up the embedding from the ids in the hyper words, the last layer
    also computes the final norm and the tied head's logits): greedy tokens equal the uncached path's, across
    a growth of the attention caches (4 -> 8 -> 16 positions, the programs recorded again)."""
    from evermind_vk.models import mamba
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", knob)
    monkeypatch.setattr(mamba, "ATTENTION_CACHE_MIN", 4)
    m = _mamba(layers)
    rng = np.random.default_rng(4)  # nonzero attention biases (the init's are zero)
    m.load_state_dict({k: (v + rng.standard_normal(v.shape)).astype(np.float32) if k.endswith(("bQKV", "bO")) else v
                       for k, v in m.state_dict().items()})
    for prompt, n in (([3], 6), ([1, 2, 3, 4, 5], 9)):
        plain = generate(m, prompt, max_new_tokens=n, use_cache=False, repetition_penalty=100.0)
        assert generate(m, prompt, max_new_tokens=n, repetition_penalty=100.0) == plain and len(set(plain)) > 3
    dec = decoder(m, 1)
    assert m.state_capacity(dec.state) == 16
    labels = dec.step_program().labels
    # the upload (hyper with the ids), a dispatch a layer, the sampler, the download
    assert labels.count("upload") == 1 and len(labels) == 1 + len(layers) + 2, labels
    assert sum(lb.startswith("hybrid_attn_decode") for lb in labels) == layers.count("attention"), labels


def test_mamba_attention_fused_beside_a_per_op_mamba1(device):
    """A stack whose attention layers run fused while its mamba1 layers cannot (dState 3: not whole vec4s) runs
    those per-op between them: greedy output equals the uncached path's."""
    m = _mamba(("mamba1", "attention"), dState=3)
    prompts = [[3, 1, 4, 1, 5], [6]]
    plain = [generate(m, p, max_new_tokens=6, use_cache=False, repetition_penalty=100.0) for p in prompts]
    assert generate(m, prompts, max_new_tokens=6, repetition_penalty=100.0) == plain
    labels = decoder(m, 2).step_program().labels
    assert any(lb.startswith("hybrid_attn_decode") for lb in labels)
    assert not any(lb.startswith("mamba1_decode") for lb in labels), labels


def test_mamba_fused_step_refused_where_it_cannot_run(device, monkeypatch):
    """A stack without mamba1 or attention layers decodes on the per-op step unforced; EVERMIND_VK_DECODE_FUSED=1
    there is an error naming why, not a silent per-op step. A mixed stack runs its mamba1 layers fused, the mamba2
    layer per-op beside them, with the uncached path's tokens."""
    from evermind_vk.errors import UnsupportedError
    m = _mamba(("mamba2", "mamba3"))
    generate(m, [1, 2], max_new_tokens=3)
    assert not any(lb.startswith("mamba1_decode") for lb in decoder(m, 1).step_program().labels)
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", "1")
    with pytest.raises(UnsupportedError, match="EVERMIND_VK_DECODE_FUSED=1.*no mamba1 or attention layers"):
        generate(_mamba(("mamba2", "mamba3")), [1, 2], max_new_tokens=3)
    m = _mamba(("mamba2", "mamba1"))
    want = generate(m, [3, 1, 4], max_new_tokens=5, use_cache=False, repetition_penalty=100.0)
    assert generate(m, [3, 1, 4], max_new_tokens=5, repetition_penalty=100.0) == want
    labels = decoder(m, 1).step_program().labels
    assert sum(lb.startswith("mamba1_decode") for lb in labels) == 1 and "embedding_f32" in labels, labels


def test_fused_step_only_without_adapters(device):
    """The decode step runs decode_layer for a model it can run, and the per-op step once LoRA adapters are
    attached (decode_layer has no adapter products) and again once they are merged; greedy tokens equal the
    uncached path's every time."""
    from evermind_vk.models.lora import LoRAConfig, add_lora, merge_lora
    m = _model(CFG_FUSED)

    def check(fused):
        prompt = [1, 2, 3]
        assert generate(m, prompt, max_new_tokens=5) == generate(m, prompt, max_new_tokens=5, use_cache=False)
        labels = decoder(m, 1).step_program().labels
        assert any(lb.startswith("decode_layer") for lb in labels) == fused, labels

    check(True)
    add_lora(m, LoRAConfig(rank=2, targets=("layers.*.attn.wq", "layers.*.mlp.w_down")))
    for n in [k for k in m.params if k.endswith(".lora_B")]:  # nonzero adapters: they change the tokens' logits
        m.params[n].copy_(np.full(m.params[n].shape, 0.5, np.float32))
    check(False)
    merge_lora(m)
    check(True)


def test_mamba_attention_caches_grow(device, monkeypatch):
    """A hybrid stack's attention caches start small and double when a sequence outgrows them: the programs
    are recorded again over the new buffers, what the caches held is kept (greedy output equals the uncached
    path's across both growths), and the eager step() grows its state the same way."""
    from evermind_vk.models import mamba
    monkeypatch.setattr(mamba, "ATTENTION_CACHE_MIN", 4)
    m = _mamba(("mamba1", "attention"))
    prompts = [[3, 1, 4, 1, 5], [6]]
    plain = [generate(m, p, max_new_tokens=12, use_cache=False, repetition_penalty=100.0) for p in prompts]
    assert generate(m, prompts, max_new_tokens=12, repetition_penalty=100.0) == plain
    dec = decoder(m, 2)
    assert m.state_capacity(dec.state) == 16 and dec.pos.max() == 5 + 11  # 4 -> 8 -> 16 positions
    first = dec.step_program()
    assert generate(m, prompts, max_new_tokens=12, repetition_penalty=100.0) == plain
    assert dec.step_program() is first  # large enough now: the same programs replay
    state = m.init_state()
    rows = [m.step(t, state).numpy()[0] for t in [3, 1, 4, 1, 5, 9]]
    assert m.state_capacity(state) == 8 and list(state[1]["len"]) == [6]
    full = m.forward(np.array([3, 1, 4, 1, 5, 9], np.uint32)).numpy()
    np.testing.assert_allclose(np.array(rows), full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layers", [("mamba1", "attention"), ("mamba2", "mamba3")], ids=["mamba1-attention", "mamba2-mamba3"])
def test_mamba_prefill_is_one_program(device, layers):
    """Prompts of one length run through every layer in one recorded prefill program (the scans in
    chunks, here of 3 tokens, from the reset states; attention within the prompt, its keys and values
    written into the caches): one submit for all the prompts' tokens, greedy output equal to the uncached
    path's; prompts of different lengths take one prefill program a slot."""
    m = _mamba(layers)
    m.scan_chunk = 3
    prompts = [[3, 1, 4, 1, 5, 9, 2, 6, 5, 3], [2, 7, 1, 8, 2, 8, 1, 8, 2, 8]]
    plain = [generate(m, p, max_new_tokens=5, use_cache=False, repetition_penalty=100.0) for p in prompts]
    assert generate(m, prompts, max_new_tokens=5, repetition_penalty=100.0) == plain  # records the programs
    dev = m.device
    before = dev.submits
    assert generate(m, prompts, max_new_tokens=5, repetition_penalty=100.0) == plain
    # the penalty's seen ids, the reset, the prefill of both prompts, one replay a new token
    assert dev.submits - before == 1 + 1 + 1 + 4
    longer = [prompts[0] + [7, 7], prompts[1]]
    plain = [generate(m, p, max_new_tokens=5, use_cache=False, repetition_penalty=100.0) for p in longer]
    assert generate(m, longer, max_new_tokens=5, repetition_penalty=100.0) == plain
    # one program for both prompts of 10 tokens, then one a slot: (first slot, slots, tokens)
    assert set(decoder(m, 2)._prefills) == {(0, 2, 10), (0, 1, 12), (1, 1, 10)}


# ---- EvermindLM: recurrent decoding from conv windows (ConvDecoder), fused (evermind_layer) or per-op ----------
@pytest.mark.parametrize("make,rp", [(_evermind, 2.0), (lambda: _mamba(("mamba1", "mamba1")), 100.0)],
                         ids=["evermind", "mamba"])
def test_eight_sequences_a_workgroup(device, make, rp):
    """17 prompts: on CPU devices two workgroups of 8 sequences (the q8 variants: select.decode.plan) and one of 1;
    greedy tokens equal each prompt's on the uncached path."""
    m = make()
    prompts = [[(3 * i + j) % 17 + 1 for j in range(1 + i % 5)] for i in range(17)]
    plain = [generate(m, p, max_new_tokens=4, use_cache=False, repetition_penalty=rp) for p in prompts]
    assert generate(m, prompts, max_new_tokens=4, repetition_penalty=rp) == plain
    fused = [lb for lb in decoder(m, 17).step_program().labels if lb.startswith(("evermind_layer", "mamba1_decode"))]
    assert fused and all(lb.endswith("_q8") for lb in fused) or device.info.type != "cpu", fused


@pytest.mark.parametrize("path", ["fused", "per-op"])
def test_evermind_greedy_and_batches_on_both_paths(device, path, monkeypatch):
    """Greedy tokens equal the uncached path's (prompts longer and shorter than the receptive field W), a batch
    decodes as each prompt alone, a stopped sequence leaves the others as they were; the decode step is one
    recorded program: the upload (hyper with the ids), one evermind_layer a block (the last also the tied
    head's logits), the sampler and the download where fused; the per-op kernels (EvermindLM._step_ids) with
    EVERMIND_VK_DECODE_FUSED=0."""
    if path == "per-op":
        monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", "0")
    m = _evermind()
    W = decoder(m, 1).W
    prompts = [[3, 1, 4, 1, 5, 9, 2, 6, 5], [6], [5, 3, 5]]
    assert len(prompts[0]) > W > len(prompts[2])
    plain = [generate(m, p, max_new_tokens=7, use_cache=False, repetition_penalty=2.0) for p in prompts]
    alone = [generate(m, p, max_new_tokens=7, repetition_penalty=2.0) for p in prompts]
    assert alone == plain and len({t for p in plain for t in p}) > 4
    assert generate(m, prompts, max_new_tokens=7, repetition_penalty=2.0) == plain
    stop = plain[1][1]
    got = generate(m, prompts, max_new_tokens=7, repetition_penalty=2.0, stop_tokens=[stop])
    assert got == [a[:a.index(stop)] if stop in a else a for a in plain]
    dec, dev = decoder(m, 3), m.device
    labels = dec.step_program().labels
    n_fused = sum(lb.startswith("evermind_layer") for lb in labels)
    if path == "fused":
        assert n_fused == m.config.num_layers and len(labels) == 1 + m.config.num_layers + 2, labels
    else:
        assert n_fused == 0 and labels.count("upload") == 2, labels
    step = dec.step_program()
    before = dev.submits
    st = {}
    generate(m, prompts, max_new_tokens=6, stats=st)
    # the windows' reset; one prefill program a prompt (their lengths differ: the first's last W tokens, 1 and 3);
    # then one replay per decoded token
    assert dev.submits - before == 1 + 3 + 5 and dec.step_program() is step
    assert st["prefill_tokens"] == W + 1 + 3


def test_evermind_fused_step_forced_where_it_cannot_run(device, monkeypatch):
    """EVERMIND_VK_DECODE_FUSED=1 on a model evermind_layer cannot run (width 6: not whole vec4s) raises with
    the reason; unforced, the same model decodes per-op, greedy as the uncached path."""
    from evermind_vk.errors import UnsupportedError
    from evermind_vk.models import EvermindLM, EvermindLMConfig
    m = EvermindLM(EvermindLMConfig(19, d_model=6, num_layers=2, conv_kernel=2, hidden_dim=8, num_experts=2,
                                    top_k=1, seed=5))
    prompt = [1, 2, 3]
    assert generate(m, prompt, max_new_tokens=4) == generate(m, prompt, max_new_tokens=4, use_cache=False)
    assert not any(lb.startswith("evermind_layer") for lb in decoder(m, 1).step_program().labels)
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", "1")
    m2 = EvermindLM(m.config)  # a fresh decoder records its programs again
    with pytest.raises(UnsupportedError, match="EVERMIND_VK_DECODE_FUSED=1.*multiples of 4"):
        generate(m2, prompt, max_new_tokens=2)


@pytest.mark.parametrize("fused", ["", "0"])
def test_evermind_one_tap_conv_has_no_window(device, fused, monkeypatch):
    """conv_kernel 1: no past to keep (no window buffers, W = 1); greedy tokens equal the uncached path's."""
    from evermind_vk.models import EvermindLM, EvermindLMConfig
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", fused)
    m = EvermindLM(EvermindLMConfig(19, d_model=8, num_layers=2, conv_kernel=1, hidden_dim=8, num_experts=3,
                                    top_k=2, seed=6))
    m.load_state_dict({k: v * 20 if v.ndim == 2 else v for k, v in m.state_dict().items()})
    dec = decoder(m, 2)
    assert dec.W == 1 and dec.state == [None, None]
    prompts = [[1, 2, 3], [4]]
    want = [generate(m, p, max_new_tokens=5, use_cache=False, repetition_penalty=2.0) for p in prompts]
    assert generate(m, prompts, max_new_tokens=5, repetition_penalty=2.0) == want
    assert any(lb.startswith("evermind_layer") for lb in dec.step_program().labels) == (fused == "")


def test_evermind_prefill_is_one_program(device):
    """Prompts of one length feed their last W tokens (the receptive field) through every layer in one recorded
    prefill program from the reset windows: one submit for all the prompts, greedy output equal to the
    uncached path's."""
    m = _evermind()
    W = decoder(m, 2).W
    prompts = [[3, 1, 4, 1, 5, 9, 2, 6, 5, 3], [2, 7, 1, 8, 2, 8, 1, 8, 2, 8]]
    assert len(prompts[0]) > W
    plain = [generate(m, p, max_new_tokens=5, use_cache=False, repetition_penalty=2.0) for p in prompts]
    assert generate(m, prompts, max_new_tokens=5, repetition_penalty=2.0) == plain  # records the programs
    dev, st = m.device, {}
    before = dev.submits
    assert generate(m, prompts, max_new_tokens=5, repetition_penalty=2.0, stats=st) == plain
    # the penalty's seen ids, the reset, the prefill of both prompts, one replay a new token
    assert dev.submits - before == 1 + 1 + 1 + 4 and st["prefill_tokens"] == 2 * W
    assert set(decoder(m, 2)._prefills) == {(0, 2, W)}
