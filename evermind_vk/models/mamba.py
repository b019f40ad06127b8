"""HybridMambaModel: builderforce's hybrid state-space LM, causal and on the device.

Token embedding -> numLayers blocks, each a pre-norm residual block of one type -> RMSNorm -> tied head
(logits = h · embeddingᵀ; builderforce's head bias is all zeros and no parameter, so it is left out).

  mamba1     h = RMSNorm(x); [x | z] = h W_in + b_in (split per token); u = silu(conv1d_causal(x));
             [dt_raw | B | C] = u W_x + b_x (per token); dt = dt_raw W_dt + b_dt;
             y = selective_scan(u, dt, A_log, B, C, D) ⊙ silu(z); x += y W_out + b_out
             The scan's input term is config.discretization: "zoh" (default) the zero-order hold
             (exp(ΔA) − 1)/A · B·u of the Mamba paper and builderforce; "euler" Δ·B·u (mamba-ssm's
             reference scan).
  attention  h = RMSNorm(x); [q | k | v] = h W_qkv + b_qkv (per token); x += causal_attention(q, k, v) W_o + b_o
             (nHeads heads, no positional encoding, as builderforce)

Parameters are named as builderforce names them (`embedding`, `layer{i}.wInProj`, ..., `final_norm`), in
its order (which is also the MBJS order), f32, shaped [out, in] for projections (y = x Wᵀ + b).
Initialisation reproduces builderforce's seeded draw: one LCG (s = 1664525 s + 1013904223 mod 2^32,
u = s / 2^32), Box–Muller from two draws per value (u1 = max(u, 1e-12)), arrays drawn in construction
order: embedding N(0, 1/sqrt(dModel)), then per layer its random weights in order; zeros and ones draw
nothing; A_log[d, n] = ln(n + 1); D = 1.

  mamba2     see _mamba2 (builderforce's SSD block, with its in-projection split per token).

  mamba3     see _mamba3 (builderforce's complex-state SSD block, split per token).

mamba2 and mamba3 run the chunked SSD (Dao & Gu 2024): the quadratic form inside chunks of ssd_chunk
tokens, state passing between them; generation steps the same recurrences one token at a time.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from .. import ops
from ..ops.decode import hyper_words
from ..autodiff import functional as F
from ..errors import EvermindError, ShapeError, UnsupportedError
from ..runtime import Tensor, empty, get_device, record, tensor, zeros
from ..runtime.kernels import copy_words
from ..runtime.select.decode import MambaLaunch
from .inputs import as_ids
from .protocol import NextTokenModel, checkpointed_layers
from .weights import load_named
from .windows import conv_window_step, last_rows

LAYER_TYPES = ("mamba1", "mamba2", "mamba3", "attention")
IMPLEMENTED = LAYER_TYPES
DISCRETIZATIONS = ("zoh", "euler")  # mamba1's input term (ops.selective_scan)
ATTENTION_CACHE_MIN = 64  # positions an attention layer's decode cache starts with (doubled as it fills)
MAX_LAYERS = 1 << 16  # a config dict's numLayers bound (MBJS's layer table holds as many)
# builderforce's HybridMambaModelConfig keys that hold per-layer-type overrides ({} as builderforce writes them)
_BF_DEFAULTS = {"mamba1": "defaultMamba1", "mamba2": "defaultMamba2", "mamba3": "defaultMamba3",
                "attention": "defaultAttention"}


@dataclass(frozen=True)
class HybridMambaConfig:
    """builderforce's HybridMambaModelConfig: field names and defaults (seed: 0, not Math.random)."""
    vocabSize: int = 256
    dModel: int = 64
    numLayers: int = 2
    layers: tuple = ()  # layer types (or builderforce's {"type": ...} specs), one per layer; empty = all mamba1
    dState: int = 16
    dConv: int = 4
    expand: int = 2
    nHeads: int = 4
    nGroups: int = 1
    chunkLen: int = 256
    eosId: int = -1
    seed: int = 0
    mimoGroup: int = 1  # builderforce's mamba3 option; its computation does not read it, nor does ours
    discretization: str = "zoh"  # mamba1's input term: "zoh" (builderforce, the Mamba paper) or "euler"

    def __post_init__(self):
        for name in ("vocabSize", "dModel", "numLayers", "dState", "dConv", "expand", "nHeads", "nGroups", "chunkLen",
                     "mimoGroup"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"HybridMambaConfig.{name} must be >= 1, got {getattr(self, name)}")
        layers = []
        for t in (self.layers or ("mamba1",) * self.numLayers):
            if isinstance(t, dict):  # builderforce's LayerSpec {type, config?}; per-layer overrides unsupported
                if set(t) - {"type"}:
                    raise ValueError(f"layer spec {t!r}: only 'type' is supported (no per-layer config)")
                t = t.get("type")
            layers.append(t)
        layers = tuple(layers)
        object.__setattr__(self, "layers", layers)
        if self.discretization not in DISCRETIZATIONS:
            raise ValueError(f"discretization must be one of {DISCRETIZATIONS}, got {self.discretization!r}")
        if len(layers) != self.numLayers:
            raise ValueError(f"layers schedule length ({len(layers)}) must equal numLayers ({self.numLayers})")
        for t in layers:
            if t not in LAYER_TYPES:
                raise ValueError(f"unknown layer type {t!r}; one of {LAYER_TYPES}")
        if "attention" in layers and self.dModel % self.nHeads:
            raise ValueError(f"dModel ({self.dModel}) must be divisible by nHeads ({self.nHeads})")
        if ("mamba2" in layers or "mamba3" in layers) and (self.d_inner % self.nHeads or self.nHeads % self.nGroups):
            raise ValueError(f"dInner ({self.d_inner}) must be divisible by nHeads ({self.nHeads}), "
                             f"and nHeads by nGroups ({self.nGroups})")

    # The names the trainer and generate() read (TransformerLM's config has them as fields). A state-space
    # model has no context limit; the chunked scans handle up to SCAN_MAX_CHUNK * SCAN_MAX_CHUNKS tokens,
    # the SSD (mamba2, mamba3) up to its largest chunk (64, the Q×Q tile in shared memory) * SCAN_MAX_CHUNKS.
    @property
    def vocab_size(self) -> int:
        """The vocabulary size (vocabSize, under the name the other models use)."""
        return self.vocabSize

    @property
    def max_seq_len(self) -> int:
        """The longest sequence the layers' scans support."""
        return 64 * 4096 if {"mamba2", "mamba3"} & set(self.layers) else 4096 * 4096

    @property
    def d_inner(self) -> int:
        """Width of a Mamba block's inner stream (expand * dModel)."""
        return self.expand * self.dModel

    @property
    def dt_rank(self) -> int:
        """Rank of mamba1's step-size projection (ceil(dModel / 16))."""
        return -(-self.dModel // 16)

    def to_dict(self) -> dict:
        """The configuration as a plain dict (layers as a list)."""
        d = asdict(self)
        d["layers"] = list(self.layers)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "HybridMambaConfig":
        """The config of to_dict(), or builderforce's HybridMambaModelConfig as builderforce writes it
        (JSON of `model.config`): vocabSize, dModel and numLayers required; `layers` a list of
        {type, config?} specs (missing: all mamba1); dState, dConv, expand, nHeads, nGroups, chunkLen,
        mimoGroup, eosId defaulted as builderforce does (16, 4, 2, 4, 1, 256, 1, -1); seed missing -> 0
        (builderforce draws from Math.random then: any seed is as good); defaultMamba1/2/3 and
        defaultAttention and per-layer `config` accepted when they leave every block at the model-wide
        values (this model has no per-layer sizes: anything else is a ValueError naming the key).
        discretization missing -> "zoh" (builderforce's mamba1). Unknown keys are a ValueError."""
        if not isinstance(d, dict):
            raise ValueError(f"config must be an object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known - set(_BF_DEFAULTS.values())
        missing = {"vocabSize", "dModel", "numLayers"} - set(d)
        if unknown or missing:
            raise ValueError(f"config fields: missing {sorted(missing)}, unknown {sorted(unknown)}")
        kw = {k: v for k, v in d.items() if k in known}
        for k, v in kw.items():
            if k not in ("layers", "discretization") and (not isinstance(v, int) or isinstance(v, bool)):
                raise ValueError(f"{k} = {v!r} is not an integer")
        if kw["numLayers"] > MAX_LAYERS:  # before a schedule of that length is built
            raise ValueError(f"numLayers {kw['numLayers']} exceeds {MAX_LAYERS}")
        layers = d.get("layers")
        if layers is None:
            layers = ["mamba1"] * kw["numLayers"]
        if not isinstance(layers, (list, tuple)):
            raise ValueError(f"layers must be a list, got {type(layers).__name__}")
        try:
            cfg = cls(**{**kw, "layers": tuple(_layer_type(spec) for spec in layers)})
        except TypeError as e:
            raise ValueError(str(e)) from e
        _check_layer_overrides(cfg, d, layers)
        return cfg


def _layer_type(spec) -> str:
    """A layer type from a type string or builderforce's {type, config?} spec (config checked later)."""
    if isinstance(spec, dict):
        if set(spec) - {"type", "config"}:
            raise ValueError(f"layer spec {spec!r}: keys other than 'type' and 'config'")
        return spec.get("type", "mamba1")
    return spec


def _block_values(cfg: "HybridMambaConfig", kind: str) -> dict:
    """What builderforce's blocks of `kind` are built with from the model-wide fields."""
    base = {"dModel": cfg.dModel}
    if kind == "attention":
        return {**base, "nHeads": cfg.nHeads}
    base.update(dState=cfg.dState, dConv=cfg.dConv, expand=cfg.expand)
    if kind == "mamba1":
        return {**base, "dtRank": cfg.dt_rank, "biasConv": True}
    base.update(nHeads=cfg.nHeads, nGroups=cfg.nGroups, chunkLen=cfg.chunkLen)
    return {**base, "mimoGroup": cfg.mimoGroup} if kind == "mamba3" else base


def _check_layer_overrides(cfg: "HybridMambaConfig", d: dict, layers) -> None:
    """builderforce builds layer i with {model-wide values, default<Type>, layers[i].config} (later wins);
    this model has one set of sizes, so every override must restate the model-wide value."""
    for key in _BF_DEFAULTS.values():
        if not isinstance(d.get(key, {}), dict):
            raise ValueError(f"{key} must be an object")
    for i, (kind, spec) in enumerate(zip(cfg.layers, layers)):
        over = {**d.get(_BF_DEFAULTS[kind], {}), **((spec.get("config") or {}) if isinstance(spec, dict) else {})}
        want = _block_values(cfg, kind)
        for k, v in over.items():
            if k not in want or want[k] != v:
                raise ValueError(f"layer {i} ({kind}): {k} = {v!r} differs from the model-wide "
                                 f"{want.get(k, '(none)')!r}; per-layer sizes are unsupported")


class SeededGaussian:
    """builderforce's seeded init source: an LCG and Box–Muller (two draws per value), float64 math."""

    A, C = 1664525, 1013904223

    def __init__(self, seed: int):
        self.s = (int(seed) & 0xFFFFFFFF) or 1

    def uniform(self, n: int) -> np.ndarray:
        """The next n LCG outputs s / 2^32, vectorised: s_k = a^k s_0 + c (1 + a + ... + a^(k-1)) mod 2^32
        (uint64 arithmetic wraps mod 2^64, which 2^32 divides)."""
        if n == 0:
            return np.zeros(0)
        with np.errstate(over="ignore"):
            ak = np.cumprod(np.full(n, self.A, np.uint64))  # a^1 .. a^n
            geo = np.cumsum(np.concatenate([[np.uint64(1)], ak[:-1]]))  # 1 + a + ... + a^(k-1)
            s = (ak * np.uint64(self.s) + np.uint64(self.C) * geo) & np.uint64(0xFFFFFFFF)
        self.s = int(s[-1])
        return s.astype(np.float64) / 2.0 ** 32

    def normal(self, n: int, std: float) -> np.ndarray:
        """n normal draws of standard deviation std (Box–Muller over 2 n uniforms), as float32."""
        u = self.uniform(2 * n)
        u1, u2 = np.maximum(u[0::2], 1e-12), u[1::2]
        return (std * np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)).astype(np.float32)


def layer_param_shapes(cfg: HybridMambaConfig, kind: str) -> list:
    """[(name, shape, init)] of one layer in builderforce's order; init: ('n', std) | 'zeros' | 'ones' | 'alog'."""
    d, D, N, K, R = cfg.dModel, cfg.d_inner, cfg.dState, cfg.dConv, cfg.dt_rank
    if kind == "mamba1":
        return [("wInProj", (2 * D, d), ("n", 0.02)), ("bInProj", (2 * D,), "zeros"),
                ("wConv", (D, K), ("n", 0.01)), ("bConv", (D,), "zeros"),
                ("wXProj", (R + 2 * N, D), ("n", 0.01)), ("bXProj", (R + 2 * N,), "zeros"),
                ("wDtProj", (D, R), ("n", 0.02)), ("bDtProj", (D,), "zeros"),
                ("A_log", (D, N), "alog"), ("D_vec", (D,), "ones"),
                ("wOutProj", (d, D), ("n", 0.02)), ("bOutProj", (d,), "zeros"),
                ("normWeight", (d,), "ones")]
    if kind == "mamba2":
        H, G = cfg.nHeads, cfg.nGroups
        conv_d = D + 2 * G * N
        return [("wInProj", (conv_d + H, d), ("n", 0.02)), ("wConv", (conv_d, K), ("n", 0.01)),
                ("bConv", (conv_d,), "zeros"), ("A_log", (H,), "zeros"), ("dt_bias", (H,), "zeros"),
                ("D_vec", (H,), "ones"), ("wOutProj", (d, D), ("n", 0.02)), ("normWeight", (D,), "ones"),
                ("preNormWeight", (d,), "ones")]
    if kind == "mamba3":  # dState = Nc complex states; A_log [H, 2] = (Re λ, Im λ) per head
        H, G = cfg.nHeads, cfg.nGroups
        conv_d = D + 4 * G * N
        return [("wInProj", (conv_d + H, d), ("n", 0.02)), ("wConv", (conv_d, K), ("n", 0.01)),
                ("bConv", (conv_d,), "zeros"), ("A_log", (H, 2), "phases"), ("dt_bias", (H,), "zeros"),
                ("D_vec", (H,), "ones"), ("wOutProj", (d, D), ("n", 0.02)), ("normWeight", (D,), "ones"),
                ("preNormWeight", (d,), "ones")]
    if kind == "attention":
        return [("wQKV", (3 * d, d), ("n", 0.02)), ("bQKV", (3 * d,), "zeros"),
                ("wO", (d, d), ("n", 0.02)), ("bO", (d,), "zeros"), ("normWeight", (d,), "ones")]
    raise UnsupportedError(f"{kind} layers are not implemented (implemented: {', '.join(IMPLEMENTED)})")


def init_params(cfg: HybridMambaConfig) -> dict[str, np.ndarray]:
    """Seeded initial weights in builderforce's names, order and draw order."""
    rng = SeededGaussian(cfg.seed)
    p = {"embedding": rng.normal(cfg.vocabSize * cfg.dModel, 1.0 / math.sqrt(cfg.dModel)).reshape(cfg.vocabSize, cfg.dModel)}
    for i, kind in enumerate(cfg.layers):
        for name, shape, init in layer_param_shapes(cfg, kind):
            n = int(np.prod(shape))
            if init == "zeros":
                a = np.zeros(n, np.float32)
            elif init == "ones":
                a = np.ones(n, np.float32)
            elif init == "phases":  # mamba3: log-magnitude 0, phases 2πh/H
                H = shape[0]
                a = np.stack([np.zeros(H), 2 * np.pi * np.arange(H) / H], 1).astype(np.float32).ravel()
            elif init == "alog":
                a = np.tile(np.log(np.arange(1, shape[1] + 1, dtype=np.float64)), shape[0]).astype(np.float32)
            else:
                a = rng.normal(n, init[1])
            p[f"layer{i}.{name}"] = a.reshape(shape)
    p["final_norm"] = np.ones(cfg.dModel, np.float32)
    return p


class HybridMambaModel(NextTokenModel):
    """builderforce's hybrid state-space LM (see the module docstring); implements models.protocol."""

    loss_options = ("checkpoint",)

    def __init__(self, config: HybridMambaConfig | dict | None = None, device=None, **kw):
        if isinstance(config, dict):
            config = HybridMambaConfig.from_dict(config)
        self.config = config or HybridMambaConfig(**kw)
        for t in self.config.layers:
            if t not in IMPLEMENTED:
                raise UnsupportedError(f"{t} layers are not implemented (implemented: {', '.join(IMPLEMENTED)})")
        self.device = get_device(device)
        self.params: dict[str, Tensor] = {k: tensor(v, device=self.device) for k, v in init_params(self.config).items()}
        self.scan_chunk = 64  # tokens per chunk of the scans (any value gives the same result)
        self.ssd_chunk = 64  # tokens per chunk of mamba2's / mamba3's SSD (1..64, the Q×Q block in shared memory)
        # mamba2: the 0/1 matrix [nHeads, dInner] that repeats a per-head value over the head's channels
        H, Dn = self.config.nHeads, self.config.d_inner
        self._head_expand = tensor(np.kron(np.eye(H, dtype=np.float32), np.ones((1, Dn // H), np.float32)),
                                   device=self.device) if Dn % H == 0 else None
        self._wsla = False

    # -- parameters -----------------------------------------------------------------------------
    def parameters(self) -> dict[str, Tensor]:
        """The parameters by name (device tensors, what an optimizer updates)."""
        return dict(self.params)

    def num_parameters(self) -> int:
        """Total number of parameter elements."""
        return sum(t.numel for t in self.params.values())

    def layer_types(self) -> list[str]:
        """The layer kinds in order."""
        return list(self.config.layers)

    def wsla_parameters(self) -> list[str]:
        """WSLA's narrow trainable set: mamba1 layers' x-projection (wXProj, bXProj: what makes Δ, B and C
        from the conv output, as builderforce); attention layers whole (builderforce); mamba2/mamba3 layers
        `wInProj_BC`, the B/C rows of wInProj (rows dInner .. dInner + the B and C widths; see
        parameter_views). builderforce's wInProj_BC is the first 2·nGroups·dState·dModel elements, which
        are x rows (the forward's row order is [x | B | C | dt]): WSLA adapts the selective projections, so
        the B/C rows are the ones meant."""
        out = []
        for i, kind in enumerate(self.config.layers):
            if kind == "mamba1":
                out += [f"layer{i}.wXProj", f"layer{i}.bXProj"]
            elif kind == "attention":
                out += [f"layer{i}.{n}" for n, _, _ in layer_param_shapes(self.config, kind)]
            else:
                out.append(f"layer{i}.wInProj_BC")
        return out

    def parameter_views(self) -> dict:
        """Trainable row ranges of parameters: name -> (parameter name, first row, rows). The trainer steps
        them with their own AdamW moments and writes the rows back."""
        c = self.config
        out = {}
        for i, kind in enumerate(c.layers):
            if kind in ("mamba2", "mamba3"):
                width = (2 if kind == "mamba2" else 4) * c.nGroups * c.dState
                out[f"layer{i}.wInProj_BC"] = (f"layer{i}.wInProj", c.d_inner, width)
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        """The parameters as host arrays by name."""
        return {k: t.numpy() for k, t in self.params.items()}

    def load_state_dict(self, sd: dict) -> None:
        """Copy host arrays into the parameters (names and shapes checked)."""
        load_named(self.params, sd)

    # -- forward --------------------------------------------------------------------------------
    def _mamba1(self, x: Tensor, i: int, batch: int, S: int) -> Tensor:
        c, P = self.config, self.params
        L = f"layer{i}."
        D, N, R = c.d_inner, c.dState, c.dt_rank
        h = F.rms_norm(x, P[L + "normWeight"], 1e-6)
        xz = F.bias_add(F.matmul(h, P[L + "wInProj"], transpose_b=True), P[L + "bInProj"])
        xs, z = F.col_slice(xz, 0, D), F.col_slice(xz, D, D)
        u = F.silu(F.conv1d_causal(xs, P[L + "wConv"], P[L + "bConv"], seq_len=S))
        xp = F.bias_add(F.matmul(u, P[L + "wXProj"], transpose_b=True), P[L + "bXProj"])
        dt_raw, Bm, Cm = F.col_slice(xp, 0, R), F.col_slice(xp, R, N), F.col_slice(xp, R + N, N)
        dt = F.bias_add(F.matmul(dt_raw, P[L + "wDtProj"], transpose_b=True), P[L + "bDtProj"])
        y = F.selective_scan(u, dt, P[L + "A_log"], Bm, Cm, P[L + "D_vec"], z, batch=batch, chunk=self.scan_chunk,
                             discretization=c.discretization)
        return F.add(x, F.bias_add(F.matmul(y, P[L + "wOutProj"], transpose_b=True), P[L + "bOutProj"]))

    def _mamba2(self, x: Tensor, i: int, batch: int, S: int) -> Tensor:
        """builderforce's Mamba-2 block, split per token: [x | B | C | dt] = RMSNorm(x) W_in; causal conv over
        [x | B | C] (no activation, as builderforce); SSD with one A = -softplus(A_log) and
        Δ = softplus(dt + dt_bias) per head, h_t = exp(Δ A) h_{t-1} + B_t x_t, y = C·h + D x per channel,
        computed by the chunked quadratic form (ops.ssd: (C Bᵀ ∘ L) X within chunks of ssd_chunk tokens,
        state passing between them); inner RMSNorm; W_out; residual. Generation steps the same recurrence
        one token at a time (_mamba2_step)."""
        c, P = self.config, self.params
        L = f"layer{i}."
        D, N, H, G = c.d_inner, c.dState, c.nHeads, c.nGroups
        E = self._head_expand
        h = F.rms_norm(x, P[L + "preNormWeight"], 1e-6)
        proj = F.matmul(h, P[L + "wInProj"], transpose_b=True)
        conv_d = D + 2 * G * N
        xbc = F.conv1d_causal(F.col_slice(proj, 0, conv_d), P[L + "wConv"], P[L + "bConv"], seq_len=S)
        xs, Bm, Cm = F.col_slice(xbc, 0, D), F.col_slice(xbc, D, G * N), F.col_slice(xbc, D + G * N, G * N)
        dt = F.bias_add(F.col_slice(proj, conv_d, H), P[L + "dt_bias"])  # [M, H]: one Δ per head
        Dch = F.reshape(F.matmul(F.reshape(P[L + "D_vec"], 1, H), E), D)
        y = F.ssd(xs, dt, P[L + "A_log"], Bm, Cm, Dch, batch=batch, chunk=self.ssd_chunk, groups=G)
        y = F.rms_norm(y, P[L + "normWeight"], 1e-6)
        return F.add(x, F.matmul(y, P[L + "wOutProj"], transpose_b=True))

    def _mamba3(self, x: Tensor, i: int, batch: int, S: int) -> Tensor:
        """builderforce's Mamba-3 block: mamba2's with dState complex states (B, C as (re, im) pairs) and
        one complex λ per head: ā = exp(Δλ), b̄ = (ā − 1) e^{−λ}, y = Σ Re(conj(C) h) + D x, by the chunked
        quadratic form with a complex decay (ops.complex_ssd); generation steps the recurrence
        (ops.complex_scan, _mamba3_step)."""
        c, P = self.config, self.params
        L = f"layer{i}."
        D, N, H, G = c.d_inner, c.dState, c.nHeads, c.nGroups
        E = self._head_expand
        h = F.rms_norm(x, P[L + "preNormWeight"], 1e-6)
        proj = F.matmul(h, P[L + "wInProj"], transpose_b=True)
        conv_d = D + 4 * G * N
        xbc = F.conv1d_causal(F.col_slice(proj, 0, conv_d), P[L + "wConv"], P[L + "bConv"], seq_len=S)
        xs, Bm, Cm = F.col_slice(xbc, 0, D), F.col_slice(xbc, D, 2 * G * N), F.col_slice(xbc, D + 2 * G * N, 2 * G * N)
        dt = F.bias_add(F.col_slice(proj, conv_d, H), P[L + "dt_bias"])  # [M, H]: one Δ per head
        Dch = F.reshape(F.matmul(F.reshape(P[L + "D_vec"], 1, H), E), D)
        y = F.complex_ssd(xs, dt, P[L + "A_log"], Bm, Cm, Dch, batch=batch, chunk=self.ssd_chunk, groups=G)
        y = F.rms_norm(y, P[L + "normWeight"], 1e-6)
        return F.add(x, F.matmul(y, P[L + "wOutProj"], transpose_b=True))

    def _mamba3_step(self, x: Tensor, i: int, st: dict, first: int = 0, S: int = 1) -> Tensor:
        c, P = self.config, self.params
        L = f"layer{i}."
        D, N, H, G = c.d_inner, c.dState, c.nHeads, c.nGroups
        E = self._head_expand
        proj = F.matmul(F.rms_norm(x, P[L + "preNormWeight"], 1e-6), P[L + "wInProj"], transpose_b=True)
        conv_d = D + 4 * G * N
        xbc = self._conv_step(st, "conv", F.col_slice(proj, 0, conv_d), P[L + "wConv"], P[L + "bConv"], first, S)
        dt = F.matmul(F.bias_add(F.col_slice(proj, conv_d, H), P[L + "dt_bias"]), E)
        Dch = F.reshape(F.matmul(F.reshape(P[L + "D_vec"], 1, H), E), D)
        n = x.shape[0] // S
        y, hl, _ = ops.complex_scan(F.col_slice(xbc, 0, D), dt, P[L + "A_log"], F.col_slice(xbc, D, 2 * G * N),
                                    F.col_slice(xbc, D + 2 * G * N, 2 * G * N), Dch, batch=n, chunk=self._chunk(S), groups=G,
                                    h0=_state_rows(st["h"], first, n))
        _store_rows(hl, st["h"], first)
        y = F.rms_norm(y, P[L + "normWeight"], 1e-6)
        return F.add(x, F.matmul(y, P[L + "wOutProj"], transpose_b=True))

    def _attention(self, x: Tensor, i: int, batch: int, S: int) -> Tensor:
        c, P = self.config, self.params
        L = f"layer{i}."
        d, H = c.dModel, c.nHeads
        T = x.shape[0]
        h = F.rms_norm(x, P[L + "normWeight"], 1e-6)
        qkv = F.bias_add(F.matmul(h, P[L + "wQKV"], transpose_b=True), P[L + "bQKV"])
        q, k, v = (F.reshape(F.col_slice(qkv, j * d, d), T, H, d // H) for j in range(3))
        a = F.reshape(F.attention(q, k, v, causal=True, batch=batch), T, d)
        return F.add(x, F.bias_add(F.matmul(a, P[L + "wO"], transpose_b=True), P[L + "bO"]))

    def forward(self, ids: Tensor, batch: int = 1, checkpoint: bool | int = False) -> Tensor:
        """Logits [batch*S, V] for `batch` sequences of S tokens packed in ids (u32 [batch*S], or a list /
        numpy integer array: models/inputs.py).
        checkpoint (activation checkpointing): True recomputes every layer in the backward, an integer k
        every k-th (models.protocol.checkpointed_layers); such a layer keeps only its input alive until
        the backward, which runs it again with the same kernels: the same gradients."""
        ids = as_ids(ids, self.config.vocabSize, self.device)
        T = ids.numel
        if T == 0 or T % batch:
            raise ShapeError(f"{T} ids are not {batch} non-empty sequences of equal length")
        S = T // batch
        P = self.params
        ckpt = checkpointed_layers(checkpoint, len(self.config.layers))
        x = F.embedding(ids, P["embedding"])
        for i, kind in enumerate(self.config.layers):
            block = {"mamba1": self._mamba1, "mamba2": self._mamba2, "mamba3": self._mamba3,
                     "attention": self._attention}[kind]
            if ckpt[i]:
                ins = (x,) + tuple(t for n, t in P.items() if n.startswith(f"layer{i}."))
                x = F.checkpoint(lambda x_, *_, block=block, i=i: block(x_, i, batch, S), ins)
            else:
                x = block(x, i, batch, S)
        x = F.rms_norm(x, P["final_norm"], 1e-6)
        return F.matmul(x, P["embedding"], transpose_b=True)

    def loss(self, ids: Tensor, targets: Tensor, batch: int = 1, checkpoint: bool | int = False) -> Tensor:
        """Mean next-token cross-entropy; targets >= vocabSize are ignored. checkpoint: see forward."""
        return F.cross_entropy(self.forward(ids, batch, checkpoint), targets, overwrite_logits=True)

    # -- recurrent generation: O(1) work per token in mamba layers ------------------------------------
    def generation_state(self) -> list:
        """The recurrent state after zero tokens (init_state)."""
        return self.init_state()

    def init_state(self, batch: int = 1, capacity: int | None = None) -> list:
        """Per layer, the recurrent state after zero tokens of `batch` sequences, in fixed buffers updated in
        place: mamba layers keep their conv windows (each sequence's last dConv-1 conv inputs, zeros at the
        start: the causal padding; [batch*(dConv-1), conv width], sequence b's rows b*(dConv-1)..) and their
        scan states ([batch, dInner, dState(, 2)]); attention layers keep a key and a value cache
        ([batch, capacity, nHeads, head dim], sequence b in slot b; fit_state enlarges them), the attention
        scores' scratch and, for step(), the positions fed so far ("len", host integers per slot; recorded
        decoders pass positions in their hyper buffer instead). capacity: None is ATTENTION_CACHE_MIN."""
        c, dev = self.config, self.device
        capacity = ATTENTION_CACHE_MIN if capacity is None else int(capacity)
        if batch < 1 or capacity < 1:
            raise ShapeError(f"init_state: batch {batch}, capacity {capacity}: want >= 1")
        out = []
        for kind in c.layers:
            if kind == "attention":
                H = c.nHeads
                kv = (batch, capacity, H, c.dModel // H)
                out.append({"k": zeros(kv, "f32", dev), "v": zeros(kv, "f32", dev),
                            "score": empty((batch * H * capacity,), "f32", dev), "len": np.zeros(batch, np.int64)})
                continue
            conv_d = {"mamba1": c.d_inner, "mamba2": c.d_inner + 2 * c.nGroups * c.dState,
                      "mamba3": c.d_inner + 4 * c.nGroups * c.dState}[kind]
            h = (batch, c.d_inner, c.dState) + ((2,) if kind == "mamba3" else ())
            out.append({"conv": zeros((batch * (c.dConv - 1), conv_d), "f32", dev) if c.dConv > 1 else None,
                        "h": zeros(h, "f32", dev)})
        return out

    @staticmethod
    def state_capacity(state: list) -> int | None:
        """Positions the state's attention caches hold (None: no attention layers)."""
        return next((st["k"].shape[1] for st in state if "k" in st), None)

    def fit_state(self, state: list, need: int) -> bool:
        """Attention caches of `state` that hold `need` positions: when short, enlarged in place to
        max(need, twice their capacity), keeping what they hold. Returns whether they were (the buffers are then
        new: programs recorded over the old ones must be recorded again)."""
        old = self.state_capacity(state)
        if old is None or need <= old:
            return False
        capacity = max(need, 2 * old)
        if capacity > self.config.max_seq_len:
            raise ShapeError(f"attention caches of {capacity} positions > max_seq_len {self.config.max_seq_len}")
        for st in state:
            if "k" not in st:
                continue
            B, L, H, D = st["k"].shape
            for key in ("k", "v"):
                new = zeros((B, capacity, H, D), "f32", self.device)
                ops.copy2d(st[key], new, B, L * H * D, 0, L * H * D, 0, capacity * H * D)
                st[key] = new
            st["score"] = empty((B * H * capacity,), "f32", self.device)
        return True

    def _conv_step(self, st: dict, key: str, rows: Tensor, w: Tensor, b: Tensor, first: int = 0, S: int = 1) -> Tensor:
        """S tokens of each of n sequences through the causal conv from their windows (slots first.. of
        st[key], advanced in place): models.windows.conv_window_step."""
        return conv_window_step(st[key], rows, w, b, self.config.dConv, first, S)

    def _chunk(self, S: int) -> int:
        """The scans' chunk for S tokens a sequence (1: a decode step)."""
        return min(S, self.scan_chunk)

    def _mamba1_step(self, x: Tensor, i: int, st: dict, first: int = 0, S: int = 1) -> Tensor:
        c, P = self.config, self.params
        L = f"layer{i}."
        D, N, R = c.d_inner, c.dState, c.dt_rank
        h = F.rms_norm(x, P[L + "normWeight"], 1e-6)
        xz = F.bias_add(F.matmul(h, P[L + "wInProj"], transpose_b=True), P[L + "bInProj"])
        u = F.silu(self._conv_step(st, "conv", F.col_slice(xz, 0, D), P[L + "wConv"], P[L + "bConv"], first, S))
        xp = F.bias_add(F.matmul(u, P[L + "wXProj"], transpose_b=True), P[L + "bXProj"])
        dt = F.bias_add(F.matmul(F.col_slice(xp, 0, R), P[L + "wDtProj"], transpose_b=True), P[L + "bDtProj"])
        y, hl, _ = ops.selective_scan(u, dt, P[L + "A_log"], F.col_slice(xp, R, N), F.col_slice(xp, R + N, N),
                                      P[L + "D_vec"], F.col_slice(xz, D, D), batch=x.shape[0] // S,
                                      chunk=self._chunk(S), h0=_state_rows(st["h"], first, x.shape[0] // S),
                                      discretization=c.discretization)
        _store_rows(hl, st["h"], first)
        return F.add(x, F.bias_add(F.matmul(y, P[L + "wOutProj"], transpose_b=True), P[L + "bOutProj"]))

    def _mamba2_step(self, x: Tensor, i: int, st: dict, first: int = 0, S: int = 1) -> Tensor:
        c, P = self.config, self.params
        L = f"layer{i}."
        D, N, H, G = c.d_inner, c.dState, c.nHeads, c.nGroups
        E = self._head_expand
        proj = F.matmul(F.rms_norm(x, P[L + "preNormWeight"], 1e-6), P[L + "wInProj"], transpose_b=True)
        conv_d = D + 2 * G * N
        xbc = self._conv_step(st, "conv", F.col_slice(proj, 0, conv_d), P[L + "wConv"], P[L + "bConv"], first, S)
        dt = F.matmul(F.bias_add(F.col_slice(proj, conv_d, H), P[L + "dt_bias"]), E)
        Dch = F.reshape(F.matmul(F.reshape(P[L + "D_vec"], 1, H), E), D)
        n = x.shape[0] // S
        y, hl, _ = ops.selective_scan(F.col_slice(xbc, 0, D), dt, P[L + "A_log"], F.col_slice(xbc, D, G * N),
                                      F.col_slice(xbc, D + G * N, G * N), Dch, None, batch=n, chunk=self._chunk(S),
                                      h0=_state_rows(st["h"], first, n), groups=G, discretization="none")
        _store_rows(hl, st["h"], first)
        y = F.rms_norm(y, P[L + "normWeight"], 1e-6)
        return F.add(x, F.matmul(y, P[L + "wOutProj"], transpose_b=True))

    def step(self, token: int, state: list) -> Tensor:
        """Logits [1, V] of the next token after `token`, updating `state` (from init_state, slot 0) in place.
        Mamba layers do O(1) work per token (one conv window, one scan step from the carried state);
        attention layers write the token's key and value into their caches (doubling them when full) and
        attend over the cached positions (O(context), as attention must)."""
        ids = tensor(np.array([token], np.uint32), device=self.device)
        if self.state_capacity(state) is None:
            return self._step_ids(ids, state)
        lens = next(st["len"] for st in state if "k" in st)
        self.fit_state(state, int(lens[0]) + 1)
        hyper = tensor(hyper_words([(int(lens[0]), 0, 0, False)]), device=self.device)
        out = self._step_ids(ids, state, 0, hyper)
        for st in state:
            if "k" in st:
                st["len"][0] += 1
        return out

    def _step_ids(self, ids: Tensor, state: list, first: int = 0, hyper: Tensor | None = None, S: int = 1,
                  start: bool = False) -> Tensor:
        """Logits [n, V] of the last of S tokens of each of n sequences (ids u32 [n*S], sequence-major):
        sequence r's state is slot first + r of `state` (init_state(batch) with batch >= first + n), updated
        in place; the other slots are left as they are. Attention layers read item r's position and cache
        slot (first + r) from `hyper` (ops.decode's layout; required when the stack has attention layers);
        for S > 1 they need start=True: the tokens are the sequences' first S (a prefill after a reset:
        each attends within its S tokens, written into its cache at positions 0..S-1)."""
        P = self.params
        n = ids.numel // S
        if S < 1 or n * S != ids.numel:
            raise ShapeError(f"_step_ids: {ids.numel} ids are not whole sequences of {S}")
        if self.state_capacity(state) is not None:
            if hyper is None:
                raise ShapeError("_step_ids: a stack with attention layers needs the positions (hyper)")
            if S > 1 and not start:
                raise ShapeError("_step_ids: attention layers take S > 1 tokens only from the start (start=True)")
        x = F.embedding(ids, P["embedding"])
        for i, kind in enumerate(self.config.layers):
            st = state[i]
            if kind == "mamba1":
                x = self._mamba1_step(x, i, st, first, S)
            elif kind == "mamba2":
                x = self._mamba2_step(x, i, st, first, S)
            elif kind == "mamba3":
                x = self._mamba3_step(x, i, st, first, S)
            else:
                x = self._attention_step(x, i, st, hyper, S)
        x = F.rms_norm(last_rows(x, S), P["final_norm"], 1e-6)
        return F.matmul(x, P["embedding"], transpose_b=True)

    def _attention_step(self, x: Tensor, i: int, st: dict, hyper: Tensor, S: int = 1) -> Tensor:
        """The attention block for S new tokens of each of n sequences: their keys and values written into the
        caches at (slot, position + s) of hyper's item r; one token (S = 1) attends over positions
        0..position, S > 1 tokens (a prefill from position 0) causally within themselves."""
        c, P = self.config, self.params
        L = f"layer{i}."
        T, d, H = x.shape[0], c.dModel, c.nHeads
        h = F.rms_norm(x, P[L + "normWeight"], 1e-6)
        qkv = F.bias_add(F.matmul(h, P[L + "wQKV"], transpose_b=True), P[L + "bQKV"])
        q, k, v = (F.reshape(F.col_slice(qkv, j * d, d), T, H, d // H) for j in range(3))
        ops.kv_write(k, st["k"], hyper, S)
        ops.kv_write(v, st["v"], hyper, S)
        if S == 1:
            a = ops.attention_decode(q, st["k"], st["v"], hyper, st["score"])
        else:
            a = F.attention(q, k, v, causal=True, batch=T // S)
        return F.add(x, F.bias_add(F.matmul(F.reshape(a, T, d), P[L + "wO"], transpose_b=True), P[L + "bO"]))

    def decode_launch(self, n: int = 1, capacity: int | None = None) -> MambaLaunch:
        """What the decode step's path rule (ops.decode_step_plan) needs to know of the model, for a step of n
        sequences whose attention caches hold `capacity` positions (None: ATTENTION_CACHE_MIN)."""
        c = self.config
        return MambaLaunch(c.dModel, c.d_inner, c.dState, c.dConv, c.dt_rank, layers=tuple(c.layers),
                           vocab=c.vocabSize, items=n, heads=c.nHeads,
                           max_len=ATTENTION_CACHE_MIN if capacity is None else int(capacity))

    def _fused_step_ids(self, ids: Tensor, state: list, n: int, first: int = 0, ids_offset: int = 0,
                        head: bool = True, hyper: Tensor | None = None, tokens: Tensor | None = None,
                        fused: tuple = ("mamba1",)) -> Tensor:
        """_step_ids with the layers of the kinds in `fused` (plan.layers of ops.decode_step_plan, which says where
        they run) on their fused kernels: mamba1 layers on ops.mamba1_decode, attention layers on
        ops.hybrid_attn_decode. Logits [n, V] of the n ids from word ids_offset of `ids` (u32), sequence r's state
        slot first + r (an attention layer's cache slot and position from `hyper`); one dispatch a fused layer (a
        first one also looks up the embedding rows, a last one also computes the final norm and, with `head`, the
        tied head's logits; without, the head's product follows). The other layers run their per-op steps
        (attention layers read positions from `hyper`), and a first layer that is not fused looks the embedding
        up from `tokens` (the n ids alone; default: ids itself)."""
        c, P, dev = self.config, self.params, self.device
        kinds = c.layers
        x = empty((n, c.dModel), "f32", dev) if kinds[0] in fused else \
            F.embedding(ids if tokens is None else tokens, P["embedding"])
        fused_last = kinds[-1] in fused
        y = empty((n, c.dModel), "f32", dev) if fused_last else None
        logits = empty((n, c.vocabSize), "f32", dev) if head and fused_last else None
        for i, kind in enumerate(kinds):
            last, st = i + 1 == len(kinds), state[i]
            if kind in fused:  # x in place; layer 0 looks the embedding up, the last ends with the norm (and head)
                ends = dict(ids=ids if i == 0 else None, ids_offset=ids_offset, table=P["embedding"] if i == 0 else None,
                            final_norm=P["final_norm"] if last else None, out=y if last else None,
                            head=P["embedding"] if head and last else None, logits=logits if last else None)
                if kind == "mamba1":
                    ops.mamba1_decode(x, [P[f"layer{i}.{w}"] for w in ops.MAMBA1_WEIGHTS], st["conv"], st["h"],
                                      first=first, discretization=c.discretization, **ends)
                else:
                    ops.hybrid_attn_decode(x, hyper, st["k"], st["v"], [P[f"layer{i}.{w}"] for w in ops.HATTN_WEIGHTS],
                                           **ends)
            elif kind == "attention":
                x = self._attention_step(x, i, st, hyper)
            else:
                step = {"mamba1": self._mamba1_step, "mamba2": self._mamba2_step, "mamba3": self._mamba3_step}[kind]
                x = step(x, i, st, first)  # a mamba1 layer too where only the attention layers run fused
        if not fused_last:
            return F.matmul(F.rms_norm(x, P["final_norm"], 1e-6), P["embedding"], transpose_b=True)
        return logits if head else ops.matmul(y, P["embedding"], transpose_b=True)

    def _recorded_step(self, state: list):
        """For stacks without attention (fixed shapes): one token's step recorded once and replayed with
        one submit per token (on mamba1_decode where the decode path rule says so). Returns feed(token) ->
        logits (numpy [V])."""
        dev, V = self.device, self.config.vocabSize
        ids = empty((1,), "u32", dev, host_visible=True)
        out = empty((1, V), "f32", dev, host_visible=True)
        plan = ops.decode_step_plan(self.decode_launch(1), dev)
        with record(dev, run=False) as prog:  # not run on leaving: that would feed a token
            dev.upload(ids)
            logits = self._step_ids(ids, state) if plan.variant is None else \
                self._fused_step_ids(ids, state, 1, head=plan.head, fused=plan.layers)
            copy_words(logits, out)
            dev.sync_local(out)

        def feed(token: int) -> np.ndarray:
            ids.write_staging(np.array([token], np.uint32))
            prog.run()
            return out.read_staging().reshape(V)
        return feed

    def generate(self, prompt_ids, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int | None = None,
                 seed: int | None = None) -> list[int]:
        """Continue prompt_ids with the recurrent state (the context is never re-run through mamba layers):
        greedy when temperature == 0, else seeded sampling from softmax(logits / T) over the top_k."""
        ids = [int(t) for t in prompt_ids]
        if not ids:
            raise EvermindError("generate needs a non-empty prompt")
        rng = np.random.default_rng(seed)
        state = self.init_state()
        if "attention" in self.config.layers:
            feed = lambda t: self.step(t, state).numpy()[0]  # noqa: E731  (positions and cache growth on the host)
        else:
            feed = self._recorded_step(state)
        for t in ids[:-1]:
            feed(t)
        out, cur = [], ids[-1]
        for _ in range(max_new_tokens):
            z = feed(cur).astype(np.float64)
            if temperature <= 0:
                cur = int(np.argmax(z))
            else:
                z = z / temperature
                if top_k is not None and 0 < top_k < z.size:
                    z = np.where(z >= np.partition(z, -top_k)[-top_k], z, -np.inf)
                p = np.exp(z - z.max())
                cur = int(rng.choice(z.size, p=p / p.sum()))
            out.append(cur)
            if cur == self.config.eosId:
                break
        return out


def _state_rows(h: Tensor, first: int, n: int) -> Tensor:
    """Slots first..first+n-1 of a scan state h [slots, ...]: h itself when that is all of it, else a copy."""
    if first == 0 and n == h.shape[0]:
        return h
    per = h.numel // h.shape[0]
    out = empty((n,) + tuple(h.shape[1:]), h.dtype, h.device)
    ops.copy2d(h, out, 1, n * per, first * per, 0, 0, 0)
    return out


def _store_rows(hl: Tensor, h: Tensor, first: int) -> None:
    """Write the scan states hl [n, ...] into slots first..first+n-1 of h [slots, ...]."""
    if hl.numel == h.numel:
        copy_words(hl, h)
    else:
        ops.copy2d(hl, h, 1, hl.numel, 0, 0, first * (h.numel // h.shape[0]), 0)
