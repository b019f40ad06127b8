"""Generation: continue a prompt with a model, greedy or sampled (temperature, top-k), seeded."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import ops
from ..errors import ConfigError, TokenError
from ..runtime import tensor


def generate(model, prompt_ids, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int | None = None,
             seed: int | None = None) -> list[int]:
    """Continue prompt_ids: greedy when temperature == 0, else sampling from softmax(logits / T)
    restricted to the top_k logits; seeded and reproducible. Context is the last max_seq_len tokens."""
    ids = check_ids(prompt_ids, model.config.vocab_size, "generate: prompt")
    if not ids:
        raise TokenError("generate needs a non-empty prompt")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ConfigError(f"generate: max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if not (isinstance(temperature, (int, float, np.floating)) and math.isfinite(temperature) and temperature >= 0):
        raise ConfigError(f"generate: temperature must be finite and >= 0, got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0):
        raise ConfigError(f"generate: top_k must be None or an integer >= 0, got {top_k!r}")
    rng = np.random.default_rng(seed)
    L = model.config.max_seq_len
    for _ in range(max_new_tokens):
        ctx = ids[-L:]
        logits = model.forward(tensor(np.array(ctx, np.uint32), device=model.device))
        last = ops.row_slice(logits, len(ctx) - 1).numpy().astype(np.float64)
        if temperature <= 0:
            nxt = int(np.argmax(last))
        else:
            z = last / temperature
            if top_k is not None and 0 < top_k < z.size:
                cut = np.partition(z, -top_k)[-top_k]
                z = np.where(z >= cut, z, -np.inf)
            p = np.exp(z - z.max())
            p /= p.sum()
            nxt = int(rng.choice(z.size, p=p))
        ids.append(nxt)
    return ids[len(prompt_ids):]


def check_ids(ids, vocab_size: int, what: str = "token ids") -> list[int]:
    """ids as a list of Python ints, each an integer in [0, vocab_size); TokenError names the first bad one
    (an id >= vocab would read past the embedding; one past 32 bits would wrap in a u32 tensor)."""
    out = []
    for k, i in enumerate(ids.tolist() if isinstance(ids, np.ndarray) else ids):
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise TokenError(f"{what}: id #{k} is {i!r}, not an integer")
        i = int(i)
        if not 0 <= i < vocab_size:
            raise TokenError(f"{what}: id #{k} is {i}, outside the vocabulary [0, {vocab_size})")
        out.append(i)
    return out
