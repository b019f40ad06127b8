"""The models layer: configurations and models built from differentiable ops. Imports only autodiff,
ops and the runtime (files and formats are joined to models in evermind_vk.files)."""
from .config import LMConfig
from .transformer import TransformerLM, init_params

# HybridMambaModel (issue 12)
from .mamba import HybridMambaConfig, HybridMambaModel  # noqa: E402

__all__ = ["LMConfig", "TransformerLM", "init_params", "HybridMambaConfig", "HybridMambaModel"]
