"""builderforce's SharedExpertMoE on the device: a shared ReLU MLP plus the top-k of E routed ReLU
MLPs, a bias-free router, combine gates = softmax over the selected logits (evermind_vk.ops.moe).

Parameters carry builderforce's names and layouts (`wr` [E, d], `shared.{w1 [h, d], b1 [h], w2 [d, h],
b2 [d]}`, `expert{e}.{...}`) in `state_dict()` / `load_state_dict()`; on the device the experts are
stacked, the shared one first (`parameters()`: `wr`, `w1` [(E+1)h, d], `b1`, `w2` [(E+1)d, h], `b2`), so
one product runs every expert. Initialisation is builderforce's seeded one, value for value: its LCG
(s = 1664525 s + 1013904223 mod 2^32, u = s / 2^32) feeding Box-Muller with two draws per value
(u1 = max(u, 1e-12), std sqrt(-2 ln u1) cos(2 pi u2)), drawn in the order wr, shared.w1, shared.w2,
expert0.w1, expert0.w2, ... (biases zero).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..autodiff import functional as F
from .. import ops
from ..errors import ShapeError
from ..runtime import Tensor, get_device, tensor
from .protocol import check_options, config_from_dict
from .weights import check_state_dict

DEFAULT_MOE_SEED = 0x4D6F4501  # "MoE\x01"
_A, _C, _MASK = 1664525, 1013904223, 0xFFFFFFFF
_BLOCK = 4096


def _jump_tables():
    a = np.empty(_BLOCK, np.uint64)
    c = np.empty(_BLOCK, np.uint64)
    ak, ck = 1, 0
    for j in range(_BLOCK):  # s_{j+1} = ak s_0 + ck (mod 2^32)
        ak, ck = (_A * ak) & _MASK, (_A * ck + _C) & _MASK
        a[j], c[j] = ak, ck
    return a, c


_JA, _JC = _jump_tables()


class SeededRng:
    """builderforce's SeededRng (state (seed >>> 0) || 1), drawn in vectorised blocks."""

    def __init__(self, seed: int):
        self.state = (int(seed) & _MASK) or 1

    def uniforms(self, n: int) -> np.ndarray:
        """The next n values of next() (float64 in [0, 1))."""
        out = np.empty(n, np.float64)
        for lo in range(0, n, _BLOCK):
            m = min(_BLOCK, n - lo)
            s = (_JA[:m] * np.uint64(self.state) + _JC[:m]) & np.uint64(_MASK)
            out[lo:lo + m] = s / 2.0 ** 32
            self.state = int(s[-1])
        return out

    def gauss(self, n: int, std: float) -> np.ndarray:
        """n Box-Muller values (two draws each), rounded to f32 as builderforce's Float32Array does."""
        u = self.uniforms(2 * n)
        u1, u2 = np.maximum(u[0::2], 1e-12), u[1::2]
        return ((std * np.sqrt(-2 * np.log(u1))) * np.cos(2 * math.pi * u2)).astype(np.float32)


@dataclass(frozen=True)
class MoEConfig:
    model_dim: int = 64
    hidden_dim: int = 128
    num_experts: int = 8
    top_k: int = 2
    seed: int | None = None  # None: builderforce's default seed

    def __post_init__(self):
        for n in ("model_dim", "hidden_dim", "num_experts"):
            if int(getattr(self, n)) < 1:
                raise ValueError(f"MoEConfig.{n} must be >= 1, got {getattr(self, n)}")
        if self.top_k > self.num_experts:
            raise ValueError(f"MoE topK ({self.top_k}) must be ≤ numExperts ({self.num_experts})")
        if self.top_k < 1:
            raise ValueError(f"MoE topK must be ≥ 1 (got {self.top_k})")

    def to_dict(self) -> dict:
        """The fields by name (from_dict's input)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "MoEConfig":
        """The config from to_dict()'s output."""
        return config_from_dict(cls, d)

    def to_builderforce(self) -> dict:
        """builderforce's config object (manifest `config`): modelDim, hiddenDim, numExperts, topK (+ seed)."""
        out = dict(modelDim=self.model_dim, hiddenDim=self.hidden_dim, numExperts=self.num_experts, topK=self.top_k)
        if self.seed is not None:
            out["seed"] = self.seed
        return out

    @classmethod
    def from_builderforce(cls, cfg: dict) -> "MoEConfig":
        return cls(int(cfg["modelDim"]), int(cfg["hiddenDim"]), int(cfg["numExperts"]), int(cfg["topK"]),
                   None if cfg.get("seed") is None else int(cfg["seed"]))


def expert_names(E: int) -> list[str]:
    return ["shared"] + [f"expert{e}" for e in range(E)]


def moe_init(d: int, h: int, E: int, seed: int) -> dict[str, np.ndarray]:
    """builderforce's initial weights by its parameter names (seed as builderforce's constructor takes it)."""
    rng = SeededRng(seed)
    p = {"wr": rng.gauss(E * d, 0.02).reshape(E, d)}
    for name in expert_names(E):
        p[f"{name}.w1"] = rng.gauss(h * d, math.sqrt(2 / d)).reshape(h, d)
        p[f"{name}.b1"] = np.zeros(h, np.float32)
        p[f"{name}.w2"] = rng.gauss(d * h, 0.02).reshape(d, h)
        p[f"{name}.b2"] = np.zeros(d, np.float32)
    return p


def stack_experts(named: dict, E: int, prefix: str = "") -> dict[str, np.ndarray]:
    """builderforce-named arrays -> the device stacks (wr, w1, b1, w2, b2), shared expert first."""
    names = expert_names(E)
    return {"wr": np.asarray(named[prefix + "wr"], np.float32),
            **{k: np.concatenate([np.asarray(named[f"{prefix}{n}.{k}"], np.float32) for n in names])
               for k in ("w1", "b1", "w2", "b2")}}


def unstack_experts(stacks: dict, E: int, prefix: str = "") -> dict[str, np.ndarray]:
    """The device stacks -> builderforce-named arrays, in builderforce's parameters() order."""
    Z = E + 1
    out = {prefix + "wr": stacks["wr"]}
    parts = {k: np.split(np.asarray(stacks[k]), Z) for k in ("w1", "b1", "w2", "b2")}
    for z, n in enumerate(expert_names(E)):
        for k in ("w1", "b1", "w2", "b2"):
            out[f"{prefix}{n}.{k}"] = parts[k][z]
    return out


class MoELayerParams:
    """The device tensors of one MoE (stacked experts), created from builderforce-named arrays."""
    KEYS = ("wr", "w1", "b1", "w2", "b2")

    def __init__(self, named: dict, E: int, device, prefix: str = ""):
        self.E = E
        self.t = {k: tensor(v, device=device) for k, v in stack_experts(named, E, prefix).items()}

    def __call__(self, x: Tensor, k: int, aux_scale: float = 0.0):
        t = self.t
        return F.moe_ffn(x, t["wr"], t["w1"], t["b1"], t["w2"], t["b2"], k, aux_scale)


class SharedExpertMoE:
    """builderforce's shared-expert MoE layer (see the module docstring); implements models.protocol with
    (input, target) vector pairs: loss = the mean over the batch of 1/2 |out - target|^2 (builderforce's
    MoETrainer), plus the router's load-balance gradient (loss options aux_weight, default 0.01, and
    aux_divided_twice, default True: builderforce divides that gradient by the batch size twice)."""

    data_kind = "pairs"
    eval_metric = "loss"
    precisions = ("f32",)
    loss_options = ("aux_weight", "aux_divided_twice")
    records_grad_scale = True  # the router's load-balance gradient is added outside the loss, scaled at record time

    def __init__(self, config: MoEConfig | None = None, device=None, **kw):
        self.config = config or MoEConfig(**kw)
        self.device = get_device(device)
        c = self.config
        seed = DEFAULT_MOE_SEED if c.seed is None else c.seed
        self.layer = MoELayerParams(moe_init(c.model_dim, c.hidden_dim, c.num_experts, seed), c.num_experts, self.device)

    # -- parameters -----------------------------------------------------------------------------
    def parameters(self) -> dict[str, Tensor]:
        """The device tensors (stacked experts), what an optimizer updates."""
        return dict(self.layer.t)

    def num_parameters(self) -> int:
        return sum(t.numel for t in self.layer.t.values())

    def wsla_parameters(self) -> list[str]:
        """The narrow set WSLA trains: the router and the output biases (which experts fire, and a per-expert
        offset), experts' weights frozen. builderforce defines no WSLA set for SharedExpertMoE."""
        return ["wr", "b2"]

    def state_dict(self) -> dict[str, np.ndarray]:
        """builderforce's names, layouts and order (wr, shared.*, expert{e}.*)."""
        return unstack_experts({k: t.numpy() for k, t in self.layer.t.items()}, self.config.num_experts)

    def load_state_dict(self, sd: dict) -> None:
        stand_ins = {k: np.broadcast_to(np.float32(0), t.shape) for k, t in self.layer.t.items()}  # no download
        check_state_dict(sd, {k: v.shape for k, v in unstack_experts(stand_ins, self.config.num_experts).items()})
        for k, v in stack_experts(sd, self.config.num_experts).items():
            self.layer.t[k].copy_(v)

    def named_grads(self, grads) -> dict[str, np.ndarray]:
        """builderforce-named host gradients from a Tape's grads of parameters()."""
        return unstack_experts({k: grads[t].numpy() for k, t in self.layer.t.items()}, self.config.num_experts)

    # -- compute --------------------------------------------------------------------------------
    def forward(self, x: Tensor, aux_scale: float = 0.0):
        """(out [N, d], context, aux) for N tokens x [N, d]; aux (a 1-element tensor: the load-balance
        loss of these tokens) and the aux router gradient (scale aux_scale) only when aux_scale != 0."""
        if x.ndim != 2 or x.shape[1] != self.config.model_dim:
            raise ShapeError(f"SharedExpertMoE: input {x.shape} is not [N, {self.config.model_dim}]")
        return self.layer(x, self.config.top_k, aux_scale)

    def __call__(self, x: Tensor) -> Tensor:
        return self.forward(x)[0]

    # -- the model protocol ---------------------------------------------------------------------
    def batch_inputs(self, batch: int, seq_len: int = 0) -> dict:
        """inputs and targets, f32 [batch, model_dim] each."""
        d = self.config.model_dim
        return {"inputs": ((batch, d), "f32"), "targets": ((batch, d), "f32")}

    def batch_loss(self, inputs: dict, batch: int, seq_len: int = 0, dtype: str = "f32", grad_scale: float = 1.0,
                   **options) -> tuple:
        """(mean of 1/2 |out - target|^2 over the batch, {"aux_loss": the batch's load-balance loss}). The
        router's load-balance gradient (scale aux_weight E / B, divided by B again as builderforce does
        unless aux_divided_twice=False, times grad_scale) is added in the backward."""
        check_options(self, options)
        E, d = self.config.num_experts, self.config.model_dim
        aux_weight = float(options.get("aux_weight", 0.01))
        twice = bool(options.get("aux_divided_twice", True))
        aux_scale = aux_weight * E / (batch if twice else 1) / batch * grad_scale
        out, ctx, aux = self.forward(inputs["inputs"], aux_scale=aux_scale)
        if aux is None:  # aux_weight 0: the load-balance loss is still reported
            aux = ops.moe_load_stats(ctx)[1]
        return F.scale(F.mse_loss(out, inputs["targets"]), d / 2), {"aux_loss": aux}

    def generation_state(self):
        """None: a single MoE layer does not generate."""
        return None

    def route(self, x: Tensor):
        """(experts [N, k] highest logit first, gates [N, k], probs [N, E]) on the host."""
        out, ctx, _ = self.forward(x)
        sel = ctx.sel.numpy().astype(np.int64)
        gates = ctx.gates.numpy()[:, 1:]
        return sel, np.take_along_axis(gates, sel, 1), ctx.probs.numpy()
