"""TransformerLM: token embedding; N blocks of RMSNorm -> attention (RoPE, grouped-query heads) ->
residual, RMSNorm -> row-split SwiGLU MLP -> residual; final RMSNorm; tied or untied head.

Parameters are f32 and named hierarchically (PyTorch style):
    embed.weight [V, d]
    layers.{i}.attn_norm.weight [d]
    layers.{i}.attn.wq [H*hd, d]  .wk [KVH*hd, d]  .wv [KVH*hd, d]  .wo [d, H*hd]   (y = x W^T)
    layers.{i}.mlp_norm.weight [d]
    layers.{i}.mlp.w_gate_up [2*ff, d]  (output rows [gate | up])   .w_down [d, ff]
    norm.weight [d]
    head.weight [V, d]  (only when untied)
"""
from __future__ import annotations

import math

import numpy as np

from ..autodiff import functional as F
from ..errors import ConfigError, ShapeError
from .. import ops
from ..runtime import Tensor, arena, empty, get_device, record, tensor, zeros
from .inputs import as_ids
from .config import LMConfig
from .lora import is_adapter, lora_linear
from .protocol import NextTokenModel, checkpointed_layers
from .weights import load_named


def init_params(cfg: LMConfig) -> dict[str, np.ndarray]:
    """Seeded initial weights: N(0, 0.02) projections and embeddings (output projections scaled by
    1/sqrt(2 n_layers)), unit norm gains."""
    rng = np.random.default_rng(cfg.seed)
    d, hd, H, KVH, ff = cfg.d_model, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.d_ff

    def n(*shape, s=0.02):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    out_s = 0.02 / math.sqrt(2 * cfg.n_layers)
    p = {"embed.weight": n(cfg.vocab_size, d)}
    for i in range(cfg.n_layers):
        L = f"layers.{i}."
        p[L + "attn_norm.weight"] = np.ones(d, np.float32)
        p[L + "attn.wq"] = n(H * hd, d)
        p[L + "attn.wk"] = n(KVH * hd, d)
        p[L + "attn.wv"] = n(KVH * hd, d)
        p[L + "attn.wo"] = n(d, H * hd, s=out_s)
        p[L + "mlp_norm.weight"] = np.ones(d, np.float32)
        p[L + "mlp.w_gate_up"] = n(2 * ff, d)
        p[L + "mlp.w_down"] = n(d, ff, s=out_s)
    p["norm.weight"] = np.ones(d, np.float32)
    if not cfg.tie_embeddings:
        p["head.weight"] = n(cfg.vocab_size, d)
    return p


class TransformerLM(NextTokenModel):
    """The decoder-only transformer LM (see the module docstring); implements models.protocol."""

    precisions = ("f32", "f16")
    loss_options = ("checkpoint",)

    def __init__(self, config: LMConfig | None = None, device=None, **kw):
        self.config = config or LMConfig(**kw)
        self.device = get_device(device)
        self.params: dict[str, Tensor] = {k: tensor(v, device=self.device) for k, v in init_params(self.config).items()}
        self.lora: dict[str, float] = {}  # adapted weight name -> alpha / r (evermind_vk.models.lora)

    # -- parameters -----------------------------------------------------------------------------
    def parameters(self) -> dict[str, Tensor]:
        """The parameters by name, adapters included (device tensors, what an optimizer updates)."""
        return dict(self.params)

    def num_parameters(self) -> int:
        """Total number of parameter elements, adapters excluded."""
        return sum(t.numel for k, t in self.params.items() if not is_adapter(k))

    def wsla_parameters(self) -> list[str]:
        """The narrow subset WSLA (write-through adaptation) trains: each layer's two RMSNorm gains and
        its MLP down projection. The gains rescale what each sub-block sees (cheap, stable); w_down is
        how the layer writes into the residual stream, so adapting it changes what a layer contributes
        without disturbing attention patterns or the embedding. ~1/3 of the weights of a block."""
        out = []
        for i in range(self.config.n_layers):
            out += [f"layers.{i}.attn_norm.weight", f"layers.{i}.mlp_norm.weight", f"layers.{i}.mlp.w_down"]
        return out

    def linear_names(self) -> list[str]:
        """The weights used as linear layers (y = x W^T): what LoRA may target."""
        return [k for k in self.params if ".attn.w" in k or ".mlp.w" in k]

    def state_dict(self) -> dict[str, np.ndarray]:
        """The base weights (LoRA adapters, if any, are saved apart: evermind_vk.models.lora)."""
        return {k: t.numpy() for k, t in self.params.items() if not is_adapter(k)}

    def load_state_dict(self, sd: dict) -> None:
        """Copy host arrays into the (non-adapter) parameters, names and shapes checked."""
        load_named({k: t for k, t in self.params.items() if not is_adapter(k)}, sd)

    # -- forward --------------------------------------------------------------------------------
    def forward(self, ids: Tensor, batch: int = 1, dtype: str = "f32", checkpoint: bool | int = False) -> Tensor:
        """Logits [batch*S, V] for `batch` sequences of S tokens packed in ids (u32 [batch*S], or a list /
        numpy integer array: models/inputs.py).

        dtype "f16" (mixed precision): activations, matmuls and attention in f16 (f32 accumulation inside
        the kernels); each matrix weight is cast from its f32 master to an f16 working copy in the step
        (gradients come back to the masters in f32), the embedding lookup reads the f32 table and casts
        its rows, norm gains stay f32, and the loss is accumulated in f32.
        checkpoint (activation checkpointing): True recomputes every layer in the backward, an integer k
        every k-th (models.protocol.checkpointed_layers); such a layer keeps only its input (the residual
        stream) alive until the backward, which runs it again with the same kernels: the same gradients."""
        if dtype not in ("f32", "f16"):
            raise ConfigError(f"forward: dtype must be 'f32' or 'f16', got {dtype!r}")
        c, P = self.config, self.params
        ids = as_ids(ids, c.vocab_size, self.device)
        T = ids.numel
        if T % batch:
            raise ShapeError(f"{T} ids are not {batch} sequences of equal length")
        S = T // batch
        if S > c.max_seq_len:
            raise ShapeError(f"sequence length {S} exceeds max_seq_len {c.max_seq_len}")
        ckpt = checkpointed_layers(checkpoint, c.n_layers) + (False,)
        x = F.cast(self._embed(ids), dtype)
        # each residual add runs with the norm that follows it (F.add_rms_norm: the same bits, one kernel),
        # except into a checkpointed layer, which norms its own input (its one saved tensor is x)
        h = F.rms_norm(x, P["layers.0.attn_norm.weight"], c.norm_eps) if c.n_layers and not ckpt[0] else None
        for i in range(c.n_layers):
            if ckpt[i]:
                fn = lambda x_, *_, i=i: self._block(i, x_, None, batch, S, fuse_next=False)[0]  # noqa: E731
                x = F.checkpoint(fn, (x,) + tuple(P[n] for n in self._layer_params(i)))
                h = None
            else:
                x, h = self._block(i, x, h, batch, S, fuse_next=not ckpt[i + 1])
        x = h if h is not None else F.rms_norm(x, P["norm.weight"], c.norm_eps)
        return self._head(x)

    def _embed(self, ids: Tensor) -> Tensor:
        """The token embedding rows of ids (f32)."""
        return F.embedding(ids, self.params["embed.weight"])

    def _head(self, x: Tensor) -> Tensor:
        """Logits from the final normed states: the tied embedding or the head, transposed."""
        P = self.params
        return F.matmul_master(x, P["embed.weight"] if self.config.tie_embeddings else P["head.weight"],
                               transpose_b=True)

    def _layer_params(self, i: int) -> list[str]:
        """The parameters layer i reads (its LoRA adapters included): a checkpointed layer's inputs."""
        return [n for n in self.params if n.startswith(f"layers.{i}.")]

    def _block(self, i: int, x: Tensor, h: Tensor | None, batch: int, S: int, fuse_next: bool) -> tuple:
        """Layer i on the residual stream x (h: x normed by its attn_norm, None to compute it here): (x, the
        next norm of x when fuse_next (the next layer's attn_norm, or the final norm), else None)."""
        c, P = self.config, self.params
        L, T = f"layers.{i}.", x.shape[0]
        H, KVH, hd = c.n_heads, c.n_kv_heads, c.head_dim
        if h is None:
            h = F.rms_norm(x, P[L + "attn_norm.weight"], c.norm_eps)
        q = F.reshape(lora_linear(self, h, L + "attn.wq"), T, H, hd)
        k = F.reshape(lora_linear(self, h, L + "attn.wk"), T, KVH, hd)
        v = F.reshape(lora_linear(self, h, L + "attn.wv"), T, KVH, hd)
        q = F.rope(q, 0, c.rope_theta, S)
        k = F.rope(k, 0, c.rope_theta, S)
        a = F.reshape(F.attention(q, k, v, causal=True, batch=batch), T, H * hd)
        x, h = F.add_rms_norm(x, lora_linear(self, a, L + "attn.wo"), P[L + "mlp_norm.weight"], c.norm_eps)
        g = F.glu(lora_linear(self, h, L + "mlp.w_gate_up"), "silu", c.swiglu_limit)
        if not fuse_next:
            return F.add(x, lora_linear(self, g, L + "mlp.w_down")), None
        nxt = f"layers.{i + 1}.attn_norm.weight" if i + 1 < c.n_layers else "norm.weight"
        return F.add_rms_norm(x, lora_linear(self, g, L + "mlp.w_down"), P[nxt], c.norm_eps)

    def loss(self, ids: Tensor, targets: Tensor, batch: int = 1, dtype: str = "f32",
             checkpoint: bool | int = False) -> Tensor:
        """Mean next-token cross-entropy (f32); targets >= vocab_size are ignored. dtype, checkpoint: see forward."""
        return F.cross_entropy(self.forward(ids, batch, dtype, checkpoint), targets, overwrite_logits=True)

    def generation_state(self) -> "KVCache":
        """A fresh KV cache for incremental decoding."""
        return self.kv_cache()

    # -- generation with a KV cache ---------------------------------------------------------------
    def kv_cache(self, max_len: int | None = None, reuse: bool = False, keep: bool = False) -> "KVCache":
        """An empty KV cache for incremental decoding (max_len defaults to max_seq_len). With reuse, the
        model's last reused cache of that length, reset: its buffers and built kernels serve again (a
        generation loop calls this once per generation); with keep as well, not reset (its positions and
        their tokens, KVCache.tokens, kept for a prompt that starts with them)."""
        if reuse:
            hit = getattr(self, "_reused_cache", None)
            if hit is not None and hit.max_len == int(max_len or self.config.max_seq_len):
                if not keep:
                    hit.reset()
                return hit
            self._reused_cache = KVCache(self, max_len)
            return self._reused_cache
        return KVCache(self, max_len)

    def forward_cached(self, ids, cache: "KVCache") -> Tensor:
        """Logits [Q, V] of Q new tokens (host ids) appended at positions cache.length..+Q-1; their keys
        and values are written into the cache in place. The logits tensor is reused by the next call
        with the same Q (read it first). Equals forward() over the whole sequence, row for row."""
        c, P = self.config, self.params
        ids = np.asarray(ids, dtype=np.uint32).ravel()
        Q, start = ids.size, cache.length
        if Q < 1:
            raise ShapeError("forward_cached needs at least one new token")
        if start + Q > cache.max_len:
            raise ShapeError(f"KV cache full: {start} + {Q} tokens exceed its {cache.max_len} positions")
        H, KVH, hd = c.n_heads, c.n_kv_heads, c.head_dim
        slot = cache.slot(Q)
        slot["ids"].write_staging(ids)
        self.device.upload(slot["ids"])
        with slot["arena"]:
            x = self._embed(slot["ids"])
            for i in range(c.n_layers):
                L = f"layers.{i}."
                h, _ = ops.rms_norm(x, P[L + "attn_norm.weight"], c.norm_eps)
                q = lora_linear(self, h, L + "attn.wq").reshape(Q, H, hd)
                k = lora_linear(self, h, L + "attn.wk").reshape(Q, KVH, hd)
                v = lora_linear(self, h, L + "attn.wv")
                q = ops.rope(q, start, c.rope_theta, Q)
                k = ops.rope(k, start, c.rope_theta, Q)
                row = KVH * hd  # append this step's keys and values at rows start..start+Q-1
                ops.copy2d(k, cache.k[i], Q, row, 0, row, start * row, row)
                ops.copy2d(v, cache.v[i], Q, row, 0, row, start * row, row)
                a = ops.attention_cached(q, cache.k[i], cache.v[i], start, scratch=slot["scratch"]).reshape(Q, H * hd)
                x = ops.add(x, lora_linear(self, a, L + "attn.wo"))
                h, _ = ops.rms_norm(x, P[L + "mlp_norm.weight"], c.norm_eps)
                g = ops.glu(lora_linear(self, h, L + "mlp.w_gate_up"), "silu", c.swiglu_limit)
                x = ops.add(x, lora_linear(self, g, L + "mlp.w_down"))
            x, _ = ops.rms_norm(x, P["norm.weight"], c.norm_eps)
            logits = self._head(x)
        cache.length = start + Q
        cache.tokens += ids.tolist()
        return logits


class KVCache:
    """Per-layer key and value caches [max_len, KVH, head_dim] on the device, written in place, and the
    reusable per-Q buffers (ids, attention scratch, an arena for the step's intermediates)."""

    def __init__(self, model: TransformerLM, max_len: int | None = None):
        c = model.config
        self.model, self.max_len = model, int(max_len or c.max_seq_len)
        if not 1 <= self.max_len <= c.max_seq_len:
            raise ShapeError(f"KV cache length {self.max_len} outside 1..max_seq_len {c.max_seq_len}")
        dev = model.device
        shape = (self.max_len, c.n_kv_heads, c.head_dim)
        self.k = [zeros(shape, "f32", dev) for _ in range(c.n_layers)]
        self.v = [zeros(shape, "f32", dev) for _ in range(c.n_layers)]
        self.length = 0
        self.tokens: list[int] = []  # the token of each cached position
        self._slots: dict[int, dict] = {}

    def slot(self, Q: int) -> dict:
        """The reusable buffers for steps of Q new tokens (made on first use; only the decoding slot and
        the latest prefill are kept)."""
        s = self._slots.get(Q)
        if s is None:
            # keep the decoding slot (Q = 1) and the latest prefill only: prompts of many lengths must not
            # pile up scratch buffers
            for q in [q for q in self._slots if q != 1]:
                del self._slots[q]
            dev, n = self.model.device, self.model.config.n_heads * Q * self.max_len
            s = {"ids": empty((Q,), "u32", dev, host_visible=True), "arena": arena(dev),
                 "scratch": (empty((n,), "f32", dev), empty((n,), "f32", dev))}
            self._slots[Q] = s
        return s

    def step(self, ids) -> np.ndarray:
        """Append ids (host token ids) and return the last position's logits on the host. The step's
        dispatches go into one recorded sequence, submitted once (kernels and buffers are reused)."""
        dev, V = self.model.device, self.model.config.vocab_size
        s = self.slot(len(ids))
        host = s.get("host")
        if host is None:
            host = s["host"] = empty((V,), "f32", dev, host_visible=True)
        with record(dev):
            logits = self.model.forward_cached(ids, self)
            ops.copy2d(logits, host, 1, V, (len(ids) - 1) * V, V, 0, V)
            dev.sync_local(host)
        return host.read_staging()

    def reset(self) -> None:
        """Forget the cached positions (the buffers are kept and overwritten)."""
        self.length = 0
        self.tokens = []

    def truncate(self, n: int) -> None:
        """Keep the first n cached positions (later ones are overwritten by the next steps)."""
        if not 0 <= n <= self.length:
            raise ShapeError(f"truncate to {n} of {self.length} cached positions")
        self.length, self.tokens = n, self.tokens[:n]
