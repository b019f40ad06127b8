"""The models layer: configurations and models built from differentiable ops. Imports only autodiff,
ops and the runtime (files and formats are joined to models in evermind_vk.files).

Language models: TransformerLM (ours), and builderforce's EvermindLM and HybridMambaModel; the
shared-expert mixture of experts SharedExpertMoE (builderforce's); the image autoencoder ConvAE. Every
forward takes device tensors or host data (models/inputs.py)."""
from .config import LMConfig
from .conv_ae import ConvAE, ConvAEConfig
from .evermind_lm import EvermindLM, EvermindLMConfig
from .lora import (LoRAConfig, add_lora, load_lora_state_dict, lora_frozen, lora_parameters, lora_state_dict,
                   merge_lora, unmerge_lora)
from .mamba import HybridMambaConfig, HybridMambaModel
from .moe import MoEConfig, SharedExpertMoE
from .transformer import TransformerLM, init_params

__all__ = ["LMConfig", "TransformerLM", "init_params",
           "LoRAConfig", "add_lora", "merge_lora", "unmerge_lora", "lora_frozen", "lora_parameters", "lora_state_dict",
           "load_lora_state_dict",
           "ConvAE", "ConvAEConfig",
           "EvermindLM", "EvermindLMConfig", "MoEConfig", "SharedExpertMoE",
           "HybridMambaConfig", "HybridMambaModel"]
