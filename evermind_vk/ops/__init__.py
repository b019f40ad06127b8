"""The ops layer: each op picks a generated kernel variant and dispatches it, forward and backward,
one module per family (each lists its ops in __all__). Imports only the runtime."""
from .activations import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .conv2d import *  # noqa: F401,F403
from .decode import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .embedding import *  # noqa: F401,F403
from .image import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .matmul import *  # noqa: F401,F403
from .norms import *  # noqa: F401,F403
from .optim import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .regression import *  # noqa: F401,F403
from .elementwise import add as residual_add  # noqa: F401
# Causal depthwise conv1d (EvermindLM, Mamba).
from .conv import *  # noqa: F401,F403
# Shared-expert mixture of experts (builderforce's SharedExpertMoE).
from .moe import *  # noqa: F401,F403

# -- Tensor operators (harden-user) ----------------------------------------------------------------
# The runtime layer cannot import ops, so the ops layer installs `+ - * @` and unary `-` on Tensor when
# it is imported (importing evermind_vk does). Each is the eager op of the same name (recorded inside
# record()): a + b = add, a - b = add(a, scale(b, -1)), a * b = mul (a * 2.0 = scale), a @ b = matmul.
# Anything else (a + 1.0, mixed shapes) is a TypeError or a ShapeError, never a silent broadcast.
from numbers import Real as _Real  # noqa: E402

from ..runtime.tensor import Tensor as _Tensor  # noqa: E402


def _tensor_add(a, b):
    return add(a, b) if isinstance(b, _Tensor) else NotImplemented


def _tensor_sub(a, b):
    return add(a, scale(b, -1.0)) if isinstance(b, _Tensor) else NotImplemented


def _tensor_mul(a, b):
    if isinstance(b, _Tensor):
        return mul(a, b)
    if isinstance(b, _Real) and not isinstance(b, bool):
        return scale(a, float(b))
    return NotImplemented


def _tensor_matmul(a, b):
    return matmul(a, b) if isinstance(b, _Tensor) else NotImplemented


_Tensor.__add__ = _tensor_add
_Tensor.__sub__ = _tensor_sub
_Tensor.__mul__ = _tensor_mul
_Tensor.__rmul__ = _tensor_mul
_Tensor.__matmul__ = _tensor_matmul
_Tensor.__neg__ = lambda a: scale(a, -1.0)
from .scan import *  # noqa: F401,F403
