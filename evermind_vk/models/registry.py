"""Every model type by the name checkpoints store (its class name): class and config class, so a saved
trainer can rebuild its model from the stored config."""
from __future__ import annotations

from ..errors import CheckpointMismatchError
from .config import LMConfig
from .conv_ae import ConvAE, ConvAEConfig
from .evermind_lm import EvermindLM, EvermindLMConfig
from .mamba import HybridMambaConfig, HybridMambaModel
from .moe import MoEConfig, SharedExpertMoE
from .transformer import TransformerLM

MODEL_TYPES = {
    "TransformerLM": (TransformerLM, LMConfig),
    "EvermindLM": (EvermindLM, EvermindLMConfig),
    "SharedExpertMoE": (SharedExpertMoE, MoEConfig),
    "HybridMambaModel": (HybridMambaModel, HybridMambaConfig),
    "ConvAE": (ConvAE, ConvAEConfig),
}


def model_type(model) -> str:
    """The stored name of a model's type (its class name)."""
    return type(model).__name__


def build_model(type_name: str, config: dict, device=None):
    """A freshly initialised model of a stored type and config (weights are loaded separately)."""
    if type_name not in MODEL_TYPES:
        raise CheckpointMismatchError(f"unknown model type {type_name!r} (known: {', '.join(MODEL_TYPES)})")
    cls, cfg_cls = MODEL_TYPES[type_name]
    return cls(cfg_cls.from_dict(config), device=device)
