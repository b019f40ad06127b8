"""The one check of a state dict against what a model expects (names, shapes, float32), used by every
model's load_state_dict."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedError


def check_state_dict(sd: dict, shapes: dict) -> None:
    """Raise ShapeError / UnsupportedError unless sd has exactly the names of `shapes` (name -> shape),
    each a float32 array of that shape."""
    missing, extra = set(shapes) - set(sd), set(sd) - set(shapes)
    if missing or extra:
        raise ShapeError(f"state_dict mismatch: missing {sorted(missing)}, unexpected {sorted(extra)}")
    for k, shape in shapes.items():
        a = np.asarray(sd[k])
        if a.shape != tuple(shape):
            raise ShapeError(f"state_dict[{k!r}] has shape {a.shape}, model wants {tuple(shape)}")
        if a.dtype != np.float32:
            raise UnsupportedError(f"state_dict[{k!r}] is {a.dtype}, model weights are float32")


def load_named(params: dict, sd: dict) -> None:
    """check_state_dict against the named tensors, then copy each array into its tensor."""
    check_state_dict(sd, {k: t.shape for k, t in params.items()})
    for k, t in params.items():
        t.copy_(np.asarray(sd[k]))
