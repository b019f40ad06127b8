"""LlamaLM: a pretrained Llama-family model (SmolLM2, ...) on TransformerLM's blocks and ops, whose matrix
weights may stay in quantized blocks on the device (ops.QuantWeight: frozen, dequantized inside the
products), as a GGUF file stores them.

Same parameter names as TransformerLM (evermind_vk.models.transformer); a weight lives either in `params`
(an f32 Tensor, trainable) or in `qweights` (a QuantWeight, frozen). Q and K rows are in Hugging Face's
order (half-split RoPE: ops.rope), so a loader of llama.cpp's files undoes its converter's permutation
first (evermind_vk.files). LoRA adapters attach to quantized and f32 weights alike (QLoRA)."""
from __future__ import annotations

import numpy as np

from ..autodiff import functional as F
from ..errors import ConfigError, ShapeError, UnsupportedError
from ..ops import QuantWeight
from ..runtime import Tensor, get_device, tensor
from .config import LMConfig
from .lora import is_adapter
from .transformer import TransformerLM


class LlamaLM(TransformerLM):
    """TransformerLM with weights given, not initialised: `weights` maps every TransformerLM parameter
    name to a float32 array or a QuantWeight (on this device). norm and embedding weights may be either."""

    def __init__(self, config: LMConfig, weights: dict, device=None):
        self.config, self.device = config, get_device(device)
        want = _param_shapes(config)
        if set(weights) != set(want):
            raise ShapeError(f"LlamaLM: missing {sorted(set(want) - set(weights))[:5]}, "
                             f"unexpected {sorted(set(weights) - set(want))[:5]}")
        self.params: dict[str, Tensor] = {}
        self.qweights: dict[str, QuantWeight] = {}
        for name, w in weights.items():
            if tuple(w.shape) != want[name]:
                raise ShapeError(f"LlamaLM: {name} has shape {tuple(w.shape)}, the config implies {want[name]}")
            if isinstance(w, QuantWeight):
                if len(want[name]) != 2:
                    raise ShapeError(f"LlamaLM: {name} is a vector, it cannot be quantized")
                self.qweights[name] = w
            else:
                self.params[name] = tensor(np.ascontiguousarray(w, np.float32), device=self.device)
        self.lora: dict[str, float] = {}

    # -- parameters -----------------------------------------------------------------------------
    def num_parameters(self) -> int:
        """Parameters of the base model (quantized weights counted by their element count), adapters excluded."""
        return (sum(t.numel for k, t in self.params.items() if not is_adapter(k))
                + sum(q.shape[0] * q.shape[1] for q in self.qweights.values()))

    def state_dict(self) -> dict:
        """The f32 base weights; refused while some stay quantized (they have no f32 form on the device:
        evermind_vk.qlora writes the adapters, or the merged model, in Hugging Face's files)."""
        if self.qweights:
            raise UnsupportedError(f"{len(self.qweights)} weights of this LlamaLM are quantized blocks: save its "
                                   "adapters (qlora.save_peft) or the merged model (qlora.save_merged) instead")
        return super().state_dict()

    def load_state_dict(self, sd: dict) -> None:
        """Load f32 base weights; refused while weights are quantized (they are frozen: load adapters instead)."""
        if self.qweights:
            raise UnsupportedError("the quantized weights of a LlamaLM are frozen: load adapters instead")
        super().load_state_dict(sd)

    def linear_names(self) -> list[str]:
        """The projection weights LoRA adapters may attach to (attention and MLP, quantized or not)."""
        return [k for k in (*self.qweights, *self.params) if ".attn.w" in k or ".mlp.w" in k]

    def weight_bytes(self) -> dict:
        """Device bytes of the base weights: {"quantized": .., "f32": .., "total": .., "as_f32": ..} (as_f32:
        what every weight would take as float32)."""
        q = sum(w.nbytes for w in self.qweights.values())
        f = sum(t.numel * 4 for k, t in self.params.items() if not is_adapter(k))
        return {"quantized": q, "f32": f, "total": q + f, "as_f32": 4 * self.num_parameters()}

    # -- forward --------------------------------------------------------------------------------
    def forward(self, ids: Tensor, batch: int = 1, dtype: str = "f32", checkpoint: bool | int = False) -> Tensor:
        """Logits [T, vocab] as TransformerLM.forward; quantized weights run in f32 (their kernels dequantize
        into f32) and without activation checkpointing (a checkpointed layer recomputes from f32 parameters)."""
        if dtype != "f32" and self.qweights:
            raise ConfigError("LlamaLM with quantized weights runs in f32 (its kernels dequantize into f32)")
        if checkpoint and self.qweights:
            raise UnsupportedError("activation checkpointing is not available for a LlamaLM with quantized weights")
        return super().forward(ids, batch, dtype, checkpoint)

    def _embed(self, ids: Tensor) -> Tensor:
        q = self.qweights.get("embed.weight")
        return F.qembedding(ids, q) if q is not None else super()._embed(ids)

    def _head(self, x: Tensor) -> Tensor:
        name = "embed.weight" if self.config.tie_embeddings else "head.weight"
        q = self.qweights.get(name)
        return F.qlinear(x, q) if q is not None else super()._head(x)


def _param_shapes(c: LMConfig) -> dict:
    d, hd, H, KVH, ff, V = c.d_model, c.head_dim, c.n_heads, c.n_kv_heads, c.d_ff, c.vocab_size
    out = {"embed.weight": (V, d), "norm.weight": (d,)}
    for i in range(c.n_layers):
        L = f"layers.{i}."
        out.update({L + "attn_norm.weight": (d,), L + "attn.wq": (H * hd, d), L + "attn.wk": (KVH * hd, d),
                    L + "attn.wv": (KVH * hd, d), L + "attn.wo": (d, H * hd), L + "mlp_norm.weight": (d,),
                    L + "mlp.w_gate_up": (2 * ff, d), L + "mlp.w_down": (d, ff)})
    if not c.tie_embeddings:
        out["head.weight"] = (V, d)
    return out
