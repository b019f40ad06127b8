"""The models layer: configurations and models built from differentiable ops. Imports only autodiff,
ops and the runtime (files and formats are joined to models in evermind_vk.files)."""
from .config import LMConfig
from .transformer import TransformerLM, init_params
from .lora import (LoRAConfig, add_lora, load_lora_state_dict, lora_frozen, lora_parameters, lora_state_dict,
                   merge_lora, unmerge_lora)

__all__ = ["LMConfig", "TransformerLM", "init_params",
           "LoRAConfig", "add_lora", "merge_lora", "unmerge_lora", "lora_frozen", "lora_parameters", "lora_state_dict",
           "load_lora_state_dict"]

# Image models.
from .conv_ae import ConvAE, ConvAEConfig  # noqa: E402

__all__ += ["ConvAE", "ConvAEConfig"]

# builderforce's models (evermind-lm, shared-expert-moe packages).
from .evermind_lm import EvermindLM, EvermindLMConfig  # noqa: E402
from .moe import MoEConfig, SharedExpertMoE  # noqa: E402

__all__ += ["EvermindLM", "EvermindLMConfig", "MoEConfig", "SharedExpertMoE"]

# HybridMambaModel
from .mamba import HybridMambaConfig, HybridMambaModel  # noqa: E402

__all__ += ["HybridMambaConfig", "HybridMambaModel"]
