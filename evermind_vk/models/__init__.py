"""The models layer: configurations and models built from differentiable ops. Imports only autodiff,
ops and the runtime (files and formats are joined to models in evermind_vk.files)."""
from .config import LMConfig
from .transformer import TransformerLM, init_params

__all__ = ["LMConfig", "TransformerLM", "init_params"]

# builderforce's models (evermind-lm, shared-expert-moe packages).
from .evermind_lm import EvermindLM, EvermindLMConfig  # noqa: E402
from .moe import MoEConfig, SharedExpertMoE  # noqa: E402

__all__ += ["EvermindLM", "EvermindLMConfig", "MoEConfig", "SharedExpertMoE"]
