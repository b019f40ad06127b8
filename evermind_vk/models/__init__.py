"""The models layer: configurations and models built from differentiable ops, and the protocol every
model implements for the Trainer. Imports only autodiff, ops and the runtime (files and formats are
joined to models in evermind_vk.files)."""
from .config import LMConfig
from .conv_ae import ConvAE, ConvAEConfig
from .evermind_lm import EvermindLM, EvermindLMConfig
from .lora import (LoRAConfig, add_lora, load_lora_state_dict, lora_frozen, lora_parameters, lora_state_dict,
                   merge_lora, unmerge_lora)
from .mamba import HybridMambaConfig, HybridMambaModel
from .moe import MoEConfig, SharedExpertMoE
from .protocol import NextTokenModel, TrainableModel
from .registry import MODEL_TYPES, build_model, model_type
from .transformer import TransformerLM, init_params

__all__ = ["LMConfig", "TransformerLM", "init_params",
           "LoRAConfig", "add_lora", "merge_lora", "unmerge_lora", "lora_frozen", "lora_parameters", "lora_state_dict",
           "load_lora_state_dict",
           "ConvAE", "ConvAEConfig",  # image models
           "EvermindLM", "EvermindLMConfig", "MoEConfig", "SharedExpertMoE",  # builderforce's models
           "HybridMambaConfig", "HybridMambaModel",
           "NextTokenModel", "TrainableModel", "MODEL_TYPES", "build_model", "model_type"]  # the model protocol
