"""QLoRA on a pretrained LlamaLM: LoRA adapters trained over base weights kept frozen in their quantized
blocks, then written as Hugging Face files.

    model, tok = ev.load("smollm2-135m")
    add_lora(model, LoRAConfig(rank=8, alpha=16, targets=QLORA_TARGETS))
    Trainer(model, tok).train(text, freeze=lora_frozen(model))
    save_peft(model, "out/")            # adapter_model.safetensors + adapter_config.json (PEFT's layout)
    save_merged(model, "merged/")       # model.safetensors + config.json (transformers' LlamaForCausalLM)

Names map between ours and Hugging Face's Llama: attn.wq/wk/wv/wo -> self_attn.{q,k,v,o}_proj, mlp.w_down ->
mlp.down_proj, and our fused mlp.w_gate_up [gate | up] -> mlp.gate_proj and mlp.up_proj (an adapter on it
becomes one per projection: the same A, B's two halves). Q and K rows are already in Hugging Face's order
(evermind_vk.files undoes llama.cpp's permutation at load)."""
from __future__ import annotations

import json
import os
import re

import numpy as np

from .errors import EvermindError, UnsupportedError
from .io.atomic import atomic_write
from .io.gguf import require_gguf
from .io.layouts import refuse_nonfinite
from .io.safetensors import save_safetensors
from .models.llama import LlamaLM

QLORA_TARGETS = ("layers.*.attn.wq", "layers.*.attn.wk", "layers.*.attn.wv", "layers.*.attn.wo",
                 "layers.*.mlp.w_gate_up", "layers.*.mlp.w_down")
_HF = {"attn.wq": "self_attn.q_proj", "attn.wk": "self_attn.k_proj", "attn.wv": "self_attn.v_proj",
       "attn.wo": "self_attn.o_proj", "mlp.w_down": "mlp.down_proj"}
_QTYPES = {"q4_0": "Q4_0", "q4_1": "Q4_1", "q8_0": "Q8_0"}


def _split(name: str) -> tuple:
    """('layers.3.', 'attn.wq') of a layer weight's name."""
    parts = name.split(".")
    return ".".join(parts[:2]) + ".", ".".join(parts[2:])


def hf_modules(name: str, rows: int) -> list:
    """[(Hugging Face module path, row slice)] of one of our linear weights (rows: its row count)."""
    layer, w = _split(name)
    base = "model." + layer
    if w == "mlp.w_gate_up":
        return [(base + "mlp.gate_proj", slice(0, rows // 2)), (base + "mlp.up_proj", slice(rows // 2, rows))]
    if w not in _HF:
        raise UnsupportedError(f"no Hugging Face module for {name}")
    return [(base + _HF[w], slice(0, rows))]


def _check(model) -> None:
    if not isinstance(model, LlamaLM):
        raise UnsupportedError(f"QLoRA export needs a pretrained LlamaLM, got {type(model).__name__}")
    if not getattr(model, "lora", None):
        raise EvermindError("the model has no LoRA adapters")


def peft_state_dict(model) -> tuple:
    """(tensors, adapter_config) in PEFT's layout for the model's adapters."""
    _check(model)
    cfg, P, out, mods = model.lora_config, model.params, {}, []
    for n in model.lora:
        A, B = P[n + ".lora_A"].numpy(), P[n + ".lora_B"].numpy()
        for mod, rows in hf_modules(n, B.shape[0]):
            out[f"base_model.model.{mod}.lora_A.weight"] = np.ascontiguousarray(A)
            out[f"base_model.model.{mod}.lora_B.weight"] = np.ascontiguousarray(B[rows])
            mods.append(mod)
    kinds = sorted({m.rsplit(".", 1)[1] for m in mods})
    if len(mods) == len(kinds) * model.config.n_layers:  # every layer alike: PEFT's list of module names
        targets = kinds
    else:  # a subset of layers or kinds per layer: the exact module paths as one regular expression
        targets = "|".join(re.escape(m) for m in sorted(mods))
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": int(cfg.rank), "lora_alpha": float(cfg.alpha),
              "target_modules": targets, "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
              "inference_mode": True, "modules_to_save": None, "use_rslora": False, "use_dora": False,
              "init_lora_weights": True, "base_model_name_or_path": getattr(model, "source", {}).get("path")}
    return out, config


def save_peft(model, out_dir: str) -> list:
    """adapter_model.safetensors + adapter_config.json in out_dir (PEFT's files); returns their paths."""
    tensors, config = peft_state_dict(model)
    return _write_pair(out_dir, "adapter_model.safetensors", tensors, "adapter_config.json", config)


def dequantized(qw) -> np.ndarray:
    """A QuantWeight's blocks read back from the device and dequantized by gguf (float32 [rows, cols])."""
    g = require_gguf()
    raw = qw.data.numpy().view(np.uint8)[: qw.shape[0] * qw.row_bytes()].reshape(qw.shape[0], -1)
    return g.quants.dequantize(raw, g.GGMLQuantizationType[_QTYPES[qw.qtype]]).astype(np.float32).reshape(qw.shape)


def base_weight(model, name: str) -> np.ndarray:
    """A base weight of the model in f32 on the host (quantized blocks dequantized)."""
    q = model.qweights.get(name)
    return dequantized(q) if q is not None else model.params[name].numpy()


def merged_state_dict(model) -> dict:
    """Hugging Face LlamaForCausalLM tensors (float32) with every adapter folded in: W + (alpha/r) B A."""
    c, out = model.config, {}
    out["model.embed_tokens.weight"] = base_weight(model, "embed.weight")
    out["model.norm.weight"] = base_weight(model, "norm.weight")
    if not c.tie_embeddings:
        out["lm_head.weight"] = base_weight(model, "head.weight")
    for i in range(c.n_layers):
        L = f"layers.{i}."
        out[f"model.{L}input_layernorm.weight"] = base_weight(model, L + "attn_norm.weight")
        out[f"model.{L}post_attention_layernorm.weight"] = base_weight(model, L + "mlp_norm.weight")
        for w in ("attn.wq", "attn.wk", "attn.wv", "attn.wo", "mlp.w_gate_up", "mlp.w_down"):
            W = base_weight(model, L + w).astype(np.float64)
            if L + w in getattr(model, "lora", {}) and not getattr(model, "lora_merged", False):
                P = model.params
                W = W + model.lora[L + w] * (P[L + w + ".lora_B"].numpy().astype(np.float64)
                                             @ P[L + w + ".lora_A"].numpy().astype(np.float64))
            for mod, rows in hf_modules(L + w, W.shape[0]):
                out[mod + ".weight"] = np.ascontiguousarray(W[rows], np.float32)
    return out


def hf_config(model, tokenizer=None) -> dict:
    """config.json of transformers' LlamaForCausalLM for the model's hyper-parameters."""
    c = model.config
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c.vocab_size,
           "hidden_size": c.d_model, "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layers,
           "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads, "head_dim": c.head_dim,
           "hidden_act": "silu", "max_position_embeddings": c.max_seq_len, "rms_norm_eps": c.norm_eps,
           "rope_theta": c.rope_theta, "tie_word_embeddings": c.tie_embeddings, "attention_bias": False,
           "mlp_bias": False, "torch_dtype": "float32"}
    if tokenizer is not None:
        cfg.update(bos_token_id=tokenizer.bos_id, eos_token_id=tokenizer.eos_id)
    return cfg


def save_merged(model, out_dir: str, tokenizer=None) -> list:
    """model.safetensors + config.json (Hugging Face's Llama) of the base model with its adapters folded in."""
    if not isinstance(model, LlamaLM):
        raise UnsupportedError(f"merged export needs a pretrained LlamaLM, got {type(model).__name__}")
    return _write_pair(out_dir, "model.safetensors", merged_state_dict(model), "config.json",
                       hf_config(model, tokenizer))


def _write_pair(out_dir: str, weights_name: str, tensors: dict, config_name: str, config: dict) -> list:
    """Hugging Face's pair of files in out_dir (safetensors weights + a JSON config); NaN/Inf weights are
    refused before anything is written (io.layouts.refuse_nonfinite). Returns their paths."""
    refuse_nonfinite(tensors, out_dir, verb="save")
    os.makedirs(out_dir, exist_ok=True)
    st, js = os.path.join(out_dir, weights_name), os.path.join(out_dir, config_name)
    save_safetensors(st, tensors, {"format": "pt"})
    atomic_write(js, json.dumps(config, indent=2).encode())
    return [st, js]

