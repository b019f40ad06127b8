"""The ops layer: each op picks a generated kernel variant and dispatches it, forward and backward,
one module per family (each lists its ops in __all__). Imports only the runtime."""
from .activations import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .matmul import *  # noqa: F401,F403
from .norms import *  # noqa: F401,F403
from .optim import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .elementwise import add as residual_add  # noqa: F401
# Causal depthwise conv1d (EvermindLM, Mamba).
from .conv import *  # noqa: F401,F403
from .scan import *  # noqa: F401,F403
