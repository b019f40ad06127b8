"""Model configurations: plain frozen dataclasses that validate themselves and round-trip through dicts."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class LMConfig:
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
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_seq_len"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"LMConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads {self.n_kv_heads} must divide n_heads {self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError("head dimension must be even (RoPE rotates pairs)")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LMConfig":
        """The config from to_dict()'s output; ValueError names missing or unknown fields."""
        if not isinstance(d, dict):
            raise ValueError(f"config must be an object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        if set(d) != known:
            raise ValueError(f"config fields: missing {sorted(known - set(d))}, unknown {sorted(set(d) - known)}")
        try:
            return cls(**d)
        except TypeError as e:
            raise ValueError(str(e)) from e
