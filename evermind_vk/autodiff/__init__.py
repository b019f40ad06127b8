"""The autodiff layer: a gradient tape and differentiable ops with one backward rule each. Imports
only ops and the runtime."""
from . import functional
from .tape import Grads, Tape, track

__all__ = ["Tape", "Grads", "track", "functional"]
