"""The models layer: configurations and models built from differentiable ops. Imports only autodiff,
ops and the runtime (files and formats are joined to models in evermind_vk.files)."""
from .config import LMConfig
from .transformer import TransformerLM, init_params

__all__ = ["LMConfig", "TransformerLM", "init_params"]

# Image models (issue 17).
from .conv_ae import ConvAE, ConvAEConfig  # noqa: E402

__all__ += ["ConvAE", "ConvAEConfig"]
