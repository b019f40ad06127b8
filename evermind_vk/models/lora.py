"""LoRA adapters for a model's linear layers (y = x W^T):

    y = x W^T + (alpha / r) (x A^T) B^T      A [r, in] ~ U(-1/sqrt(in), 1/sqrt(in)), B [out, r] = 0

so an adapted model starts out equal to the base model. Adapters are extra parameters of the model
(named `<weight>.lora_A` / `<weight>.lora_B`), built from matmul and scale through autodiff.functional,
so their gradients come from the tape like any other; train only them by freezing the rest
(`lora_frozen(model)` gives the freeze patterns). merge_lora folds (alpha/r) B A into W on the device
(then the adapters are skipped), unmerge_lora takes it out again (equal up to f32 rounding).

    add_lora(model, LoRAConfig(rank=4, alpha=8, targets=("layers.*.attn.wq", "layers.*.attn.wv")))
    Trainer(model).train(text, freeze=lora_frozen(model))
    save_lora(model, "adapters.safetensors")     # evermind_vk.train.adapters: adapters alone
"""
from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass

import numpy as np

from .. import ops
from ..autodiff import functional as F
from ..errors import EvermindError, ShapeError, UnsupportedError
from ..runtime import Tensor, tensor

SUFFIXES = (".lora_A", ".lora_B")


@dataclass(frozen=True)
class LoRAConfig:
    """Low-rank adapters: rank, alpha, the linear weights they adapt (fnmatch patterns) and their init
    seed."""
    rank: int = 8
    alpha: float = 16.0
    targets: tuple = ("layers.*.attn.wq", "layers.*.attn.wv")  # fnmatch patterns over linear weight names
    seed: int = 0

    def __post_init__(self):
        if int(self.rank) < 1 or not math.isfinite(self.alpha):
            raise ValueError(f"LoRA rank must be >= 1 and alpha finite, got {self.rank}, {self.alpha}")

    @property
    def scale(self) -> float:
        """The adapter's output scale, alpha / rank."""
        return self.alpha / self.rank

    def to_dict(self) -> dict:
        """The configuration as a plain (JSON-ready) dict."""
        return {"rank": int(self.rank), "alpha": float(self.alpha), "targets": list(self.targets), "seed": int(self.seed)}


def is_adapter(name: str) -> bool:
    """Whether a parameter name is a LoRA adapter's."""
    return name.endswith(SUFFIXES)


def add_lora(model, config: LoRAConfig | None = None) -> list[str]:
    """Attach adapters to every linear weight of the model matching config.targets; returns their
    parameter names. The model must expose linear_names() and keep its adapters in model.lora."""
    cfg = config or LoRAConfig()
    if not hasattr(model, "linear_names") or not hasattr(model, "lora"):
        raise UnsupportedError(f"LoRA applies to models whose forward routes its linear layers through "
                               f"lora_linear (TransformerLM), not {type(model).__name__}")
    if getattr(model, "lora", None):
        raise EvermindError("the model already has LoRA adapters")
    hits = [n for n in model.linear_names() if any(fnmatch.fnmatchcase(n, p) for p in cfg.targets)]
    if not hits:
        raise EvermindError(f"no linear layer matches the LoRA targets {list(cfg.targets)} "
                            f"(linear layers: {model.linear_names()[:6]} ...)")
    rng = np.random.default_rng(cfg.seed)
    names = []
    for n in hits:
        out_f, in_f = ((getattr(model, "qweights", None) or {}).get(n) or model.params[n]).shape
        bound = 1.0 / math.sqrt(in_f)
        a = rng.uniform(-bound, bound, (cfg.rank, in_f)).astype(np.float32)
        model.params[n + ".lora_A"] = tensor(a, device=model.device)
        model.params[n + ".lora_B"] = tensor(np.zeros((out_f, cfg.rank), np.float32), device=model.device)
        names += [n + ".lora_A", n + ".lora_B"]
    model.lora = {n: cfg.scale for n in hits}
    model.lora_config = cfg
    model.lora_merged = False
    return names


def lora_linear(model, x: Tensor, name: str) -> Tensor:
    """x W^T, plus the adapter's (alpha/r) (x A^T) B^T when `name` has one and it is not merged."""
    P = model.params
    q = (getattr(model, "qweights", None) or {}).get(name)
    if q is not None:  # a frozen quantized base weight (ops.QuantWeight): dequantized inside the product
        y = F.qlinear(x, q)
    else:
        y = F.matmul_master(x, P[name], transpose_b=True)  # f16 x (mixed precision): an f16 working copy, f32 dW
    s = (getattr(model, "lora", None) or {}).get(name)
    if s is None or getattr(model, "lora_merged", False):
        return y
    low = F.matmul_master(F.matmul_master(x, P[name + ".lora_A"], transpose_b=True), P[name + ".lora_B"],
                          transpose_b=True)
    return F.add(y, F.scale(low, s))


def lora_parameters(model) -> list[str]:
    """The names of model's adapter parameters."""
    return [n for n in model.params if is_adapter(n)]


def lora_frozen(model) -> list[str]:
    """Freeze patterns that leave only the adapters trainable (for Trainer.train(freeze=...))."""
    if not getattr(model, "lora", None):
        raise EvermindError("the model has no LoRA adapters")
    return [n for n in model.params if not is_adapter(n)]


def _delta(model, name: str) -> Tensor:
    P = model.params
    return ops.scale(ops.matmul(P[name + ".lora_B"], P[name + ".lora_A"]), model.lora[name])  # [out, in]


def merge_lora(model) -> None:
    """W += (alpha/r) B A for every adapted weight, on the device; the adapters are then skipped."""
    if not getattr(model, "lora", None) or model.lora_merged:
        raise EvermindError("no unmerged LoRA adapters to merge")
    frozen = sorted(set(model.lora) & set(getattr(model, "qweights", None) or {}))
    if frozen:
        raise EvermindError(f"cannot merge adapters into quantized weights on the device ({frozen[0]}, ...): "
                            "export the merged model instead (evermind_vk.qlora.save_merged)")
    for n in model.lora:
        W = model.params[n]
        ops.add(W, _delta(model, n), out=W)
    model.lora_merged = True


def unmerge_lora(model) -> None:
    """W -= (alpha/r) B A: the base weights back (up to f32 rounding), the adapters in use again."""
    if not getattr(model, "lora", None) or not model.lora_merged:
        raise EvermindError("no merged LoRA adapters to unmerge")
    for n in model.lora:
        W = model.params[n]
        ops.add(W, ops.scale(_delta(model, n), -1.0), out=W)
    model.lora_merged = False


def lora_state_dict(model) -> dict[str, np.ndarray]:
    """model's adapter parameters as host arrays by name."""
    return {n: model.params[n].numpy() for n in lora_parameters(model)}


def load_lora_state_dict(model, sd: dict) -> None:
    """Copy adapter weights into the model's adapters (same names and shapes)."""
    have = set(lora_parameters(model))
    if set(sd) != have:
        raise ShapeError(f"LoRA adapters differ: missing {sorted(have - set(sd))}, unexpected {sorted(set(sd) - have)}")
    for n, a in sd.items():
        a = np.asarray(a)
        if a.shape != model.params[n].shape or a.dtype != np.float32:
            raise ShapeError(f"adapter {n!r} is {a.shape}/{a.dtype}, the model's is {model.params[n].shape}/float32")
        model.params[n].copy_(a)


def remove_lora(model) -> None:
    """Detach the adapters (unmerged ones only): the model is its base again."""
    if not getattr(model, "lora", None):
        raise EvermindError("the model has no LoRA adapters")
    if model.lora_merged:
        raise EvermindError("unmerge the adapters before removing them")
    for n in lora_parameters(model):
        del model.params[n]
    model.lora = {}
