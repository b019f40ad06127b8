"""QLoRA: adapters over frozen quantized base weights. Gradients against finite differences on a tiny
quantized Llama; on SmolLM2: held-out loss goes down, adapters saved in PEFT's layout load into peft, and
--merge's Hugging Face files load into transformers with our logits."""
import copy
import json
import os

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.autodiff import Tape
from evermind_vk.models import LMConfig, LoRAConfig, add_lora, lora_frozen, lora_parameters
from evermind_vk.models.llama import LlamaLM
from evermind_vk.models.lora import remove_lora
from evermind_vk.ops import QuantWeight
from evermind_vk.qlora import QLORA_TARGETS, save_merged, save_peft
from evermind_vk.train import Trainer
from evermind_vk.train.data import default_corpus

gguf = pytest.importorskip("gguf", reason="gguf is not installed (pip install 'evermind-vk[pretrained]')")
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import quants  # noqa: E402

TINY = LMConfig(vocab_size=40, d_model=64, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=64, max_seq_len=16)


def tiny_llama(device, seed=0):
    """A one-layer LlamaLM: Q4_1 attention, Q4_0 MLP, a Q8_0 tied embedding, f32 norms."""
    rng = np.random.default_rng(seed)
    c, w = TINY, {}

    def q(shape, kind):
        a = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        return QuantWeight.from_blocks(quants.quantize(a, kind), kind.name.lower(), shape, device)
    w["embed.weight"] = q((c.vocab_size, c.d_model), QT.Q8_0)
    w["norm.weight"] = (1 + 0.1 * rng.standard_normal(c.d_model)).astype(np.float32)
    L = "layers.0."
    w[L + "attn_norm.weight"] = (1 + 0.1 * rng.standard_normal(c.d_model)).astype(np.float32)
    w[L + "mlp_norm.weight"] = (1 + 0.1 * rng.standard_normal(c.d_model)).astype(np.float32)
    hd = c.head_dim
    for n, shape in (("attn.wq", (c.n_heads * hd, c.d_model)), ("attn.wk", (c.n_kv_heads * hd, c.d_model)),
                     ("attn.wv", (c.n_kv_heads * hd, c.d_model)), ("attn.wo", (c.d_model, c.n_heads * hd))):
        w[L + n] = q(shape, QT.Q4_1)
    w[L + "mlp.w_gate_up"] = q((2 * c.d_ff, c.d_model), QT.Q4_0)
    w[L + "mlp.w_down"] = q((c.d_model, c.d_ff), QT.Q4_0)
    return LlamaLM(c, w, device)


def test_qlora_gradients_against_finite_differences(device):
    m = tiny_llama(device)
    add_lora(m, LoRAConfig(rank=2, alpha=4.0, targets=QLORA_TARGETS, seed=1))
    rng = np.random.default_rng(3)
    for n in lora_parameters(m):  # nonzero B: gradients reach A as well
        if n.endswith("lora_B"):
            m.params[n].copy_((rng.standard_normal(m.params[n].shape) * 0.1).astype(np.float32))
    ids = rng.integers(0, TINY.vocab_size, 12).astype(np.uint32)
    tgt = np.roll(ids, -1).astype(np.uint32)

    def loss():
        return float(m.loss(ev.tensor(ids), ev.tensor(tgt)).numpy().ravel()[0])
    with Tape() as tape:
        out = m.loss(ev.tensor(ids), ev.tensor(tgt))
    grads = tape.backward(out).by_name(m.params)
    assert set(grads) >= set(lora_parameters(m))
    eps = 1e-2
    for n in ("layers.0.attn.wq.lora_A", "layers.0.mlp.w_gate_up.lora_B", "layers.0.mlp.w_down.lora_A",
              "layers.0.attn.wk.lora_B"):
        p = m.params[n]
        base = p.numpy()
        g = grads[n].numpy()
        for idx in [tuple(rng.integers(0, s) for s in base.shape) for _ in range(3)]:
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            p.copy_(plus)
            lp = loss()
            p.copy_(minus)
            lm = loss()
            p.copy_(base)
            fd = (lp - lm) / (2 * eps)
            assert abs(g[idx] - fd) <= 2e-3 + 0.05 * abs(fd), f"{n}{idx}: tape {g[idx]}, finite difference {fd}"


def test_base_weights_stay_quantized_and_frozen(device):
    m = tiny_llama(device)
    add_lora(m, LoRAConfig(rank=2, alpha=4.0, targets=QLORA_TARGETS))
    before = {k: q.data.numpy().copy() for k, q in m.qweights.items()}
    text = list(np.random.default_rng(0).integers(0, TINY.vocab_size, 200))
    Trainer(m).train(np.array(text, np.uint32), seq_len=8, lr=1e-2, max_steps=3, freeze=lora_frozen(m))
    assert all(np.array_equal(before[k], q.data.numpy()) for k, q in m.qweights.items())
    assert not any(isinstance(v, QuantWeight) for v in m.params.values())
    assert np.abs(m.params["layers.0.attn.wq.lora_B"].numpy()).max() > 0  # the adapters did train


def test_qlora_lowers_heldout_loss(smollm2):
    """A few AdamW steps on the embedded corpus lower the perplexity of a held-out part of it."""
    model, tok = smollm2
    add_lora(model, LoRAConfig(rank=8, alpha=16.0, targets=QLORA_TARGETS))
    try:
        text = default_corpus()[:4000]
        train = text[:3000]
        held = np.array(tok.encode(text[3000:])[: 3 * 33], np.uint32)  # three held-out sequences of 32
        tr = Trainer(model, tok)
        before = tr.evaluate(held, seq_len=32)
        tr.train(train, seq_len=32, lr=2e-3, max_steps=3, freeze=lora_frozen(model))
        after = tr.evaluate(held, seq_len=32)
        assert after < before, f"held-out perplexity {before:.3f} -> {after:.3f}"
    finally:
        remove_lora(model)


def test_peft_and_merged_exports_load_in_the_reference(smollm2, reference, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM
    model, tok = smollm2
    ref_model, _ = reference
    add_lora(model, LoRAConfig(rank=4, alpha=8.0, targets=QLORA_TARGETS, seed=2))
    try:
        rng = np.random.default_rng(5)
        for n in lora_parameters(model):
            if n.endswith("lora_B"):
                model.params[n].copy_((rng.standard_normal(model.params[n].shape) * 0.02).astype(np.float32))
        ids = tok.encode("Adapters change what the model says.")
        ours = model.forward(ev.tensor(np.array(ids, np.uint32))).numpy()
        save_merged(model, str(tmp_path / "merged"), tok)
        peft_files = save_peft(model, str(tmp_path / "adapter"))
    finally:
        remove_lora(model)
    assert json.load(open(tmp_path / "merged" / "config.json"))["model_type"] == "llama"
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"), dtype=torch.float32)
    with torch.no_grad():
        got = merged(torch.tensor([ids])).logits[0].numpy()
    tol = 1e-3 * np.abs(got).max()
    assert np.abs(got - ours).max() <= tol, f"merged: {np.abs(got - ours).max()} > {tol}"
    assert [os.path.basename(f) for f in peft_files] == ["adapter_model.safetensors", "adapter_config.json"]
    peft = pytest.importorskip("peft", reason="peft is not installed (pip install peft)")
    wrapped = peft.PeftModel.from_pretrained(copy.deepcopy(ref_model), str(tmp_path / "adapter"))
    with torch.no_grad():
        got = wrapped(torch.tensor([ids])).logits[0].numpy()
    assert np.abs(got - ours).max() <= tol, f"peft: {np.abs(got - ours).max()} > {tol}"
