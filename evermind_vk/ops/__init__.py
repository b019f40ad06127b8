"""The ops layer: each op picks a generated kernel variant and dispatches it, forward and backward,
one module per family (each lists its ops in __all__). Imports only the runtime. Importing it installs
Tensor's operators and methods (`+ - * @`, `.T`, `.sum()`, indexing: ops/methods.py)."""
from .activations import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403  (causal depthwise conv1d: EvermindLM, Mamba)
from .conv2d import *  # noqa: F401,F403
from .decode import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .elementwise import add as residual_add  # noqa: F401
from .embedding import *  # noqa: F401,F403
from .image import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .matmul import *  # noqa: F401,F403
from .methods import *  # noqa: F401,F403
from .moe import *  # noqa: F401,F403  (shared-expert mixture of experts: builderforce's SharedExpertMoE)
from .norms import *  # noqa: F401,F403
from .optim import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .regression import *  # noqa: F401,F403
from .scan import *  # noqa: F401,F403
from .quant import *  # noqa: F401,F403  (GGUF quantized weights)
from .strided import *  # noqa: F401,F403
