"""Model configurations: plain frozen dataclasses that validate themselves and round-trip through dicts."""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields

from ..errors import ConfigError


@dataclass(frozen=True)
class LMConfig:
    """A TransformerLM's shape and hyperparameters (a Llama-style decoder: RoPE, GQA, SwiGLU, RMSNorm)."""
    vocab_size: int = 256
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ff: int = 128
    max_seq_len: int = 256
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    tie_embeddings: bool = True
    swiglu_limit: float = 0.0
    seed: int = 0

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_seq_len", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ConfigError(f"LMConfig.{name} must be an integer, got {v!r}")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_seq_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"LMConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("rope_theta", "norm_eps", "swiglu_limit"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise ConfigError(f"LMConfig.{name} must be a finite number, got {v!r}")
        if not self.rope_theta > 0:
            raise ConfigError(f"LMConfig.rope_theta must be > 0, got {self.rope_theta}")
        if not self.norm_eps > 0:
            raise ConfigError(f"LMConfig.norm_eps must be > 0, got {self.norm_eps}")
        if self.swiglu_limit < 0:
            raise ConfigError(f"LMConfig.swiglu_limit must be >= 0 (0: off), got {self.swiglu_limit}")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(f"n_kv_heads {self.n_kv_heads} must divide n_heads {self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ConfigError("head dimension must be even (RoPE rotates pairs)")

    @property
    def head_dim(self) -> int:
        """Width of one attention head (d_model / n_heads)."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        """The configuration as a plain dict (what config.json holds)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LMConfig":
        """The config from to_dict()'s output; ValueError names missing or unknown fields."""
        if not isinstance(d, dict):
            raise ConfigError(f"config must be an object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        if set(d) != known:
            raise ConfigError(f"config fields: missing {sorted(known - set(d))}, unknown {sorted(set(d) - known)}")
        try:
            return cls(**d)
        except TypeError as e:
            raise ConfigError(str(e)) from e
