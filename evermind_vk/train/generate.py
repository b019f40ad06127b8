"""Generation: continue a prompt with a model, greedy or sampled (temperature, top-k, top-p, repetition
penalty), seeded, with a KV cache (one token's work per step) and stop tokens, streaming each token."""
from __future__ import annotations

import math

import numpy as np

from .. import ops
from ..errors import ConfigError, TokenError
from ..models.inputs import check_ids
from ..runtime import tensor


def _pick(last: np.ndarray, ids: list, temperature: float, top_k, top_p, repetition_penalty: float, rng) -> int:
    z = last.astype(np.float64)
    if repetition_penalty != 1.0 and ids:  # CTRL / Hugging Face: shrink the logits of tokens already seen
        seen = np.unique(np.asarray(ids, dtype=np.int64))
        seen = seen[seen < z.size]
        z[seen] = np.where(z[seen] > 0, z[seen] / repetition_penalty, z[seen] * repetition_penalty)
    if temperature <= 0:
        return int(np.argmax(z))
    z = z / temperature
    if top_k is not None and 0 < top_k < z.size:
        cut = np.partition(z, -top_k)[-top_k]
        z = np.where(z >= cut, z, -np.inf)
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p is not None and 0 < top_p < 1:  # nucleus: the smallest set of most likely tokens with mass >= top_p
        order = np.argsort(-p, kind="stable")
        keep = np.cumsum(p[order]) - p[order] < top_p
        mask = np.zeros(p.size, bool)
        mask[order[keep]] = True
        p = np.where(mask, p, 0.0)
        p /= p.sum()
    return int(rng.choice(z.size, p=p))


def generate(model, prompt_ids, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int | None = None,
             seed: int | None = None, top_p: float | None = None, repetition_penalty: float = 1.0,
             stop_tokens=(), use_cache: bool = True, on_token=None, keep_prefix: bool = False) -> list[int]:
    """Continue prompt_ids: greedy when temperature == 0, else sampling from softmax(logits / T)
    restricted to the top_k logits and then to the top_p probability mass; seeded and reproducible.
    repetition_penalty > 1 divides positive (multiplies negative) logits of tokens already in the
    sequence. Generation ends after a token in stop_tokens (not included in the result). on_token(id) is
    called for each new token as it is chosen (streaming). Context is the last max_seq_len tokens.

    use_cache (models with forward_cached): the prompt is run once and each new token then costs one
    token's work against the KV cache; when the context reaches max_seq_len the cache is refilled with
    the last max_seq_len tokens (the same context the uncached path sees, so greedy output is identical).
    keep_prefix (a chat's later turns): the model's reused cache keeps the positions whose tokens begin
    prompt_ids, and only the rest of the prompt is run (the same numbers: each position's keys and values
    depend on the tokens up to it only)."""
    ids = check_ids(prompt_ids, model.config.vocab_size, "generate: prompt")
    if not ids:
        raise TokenError("generate needs a non-empty prompt")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ConfigError(f"generate: max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if not (isinstance(temperature, (int, float, np.floating)) and math.isfinite(temperature) and temperature >= 0):
        raise ConfigError(f"generate: temperature must be finite and >= 0, got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0):
        raise ConfigError(f"generate: top_k must be None or an integer >= 0, got {top_k!r}")
    if not (math.isfinite(repetition_penalty) and repetition_penalty > 0) or \
            (top_p is not None and not (math.isfinite(top_p) and 0 < top_p <= 1)):
        raise ConfigError(f"generate: repetition_penalty must be > 0 and top_p in (0, 1], got {repetition_penalty}, {top_p}")
    stop = set(check_ids(list(stop_tokens), model.config.vocab_size, "generate: stop_tokens"))
    rng = np.random.default_rng(seed)
    L = model.config.max_seq_len
    cached = use_cache and hasattr(model, "forward_cached")
    cache = (model.kv_cache(reuse=True, keep=True) if keep_prefix else model.kv_cache(reuse=True)) if cached else None
    out: list[int] = []
    pending = ids[-L:]  # tokens not yet in the cache
    if cached and keep_prefix and len(ids) <= L:  # the cached positions that begin the prompt (one token left to run)
        n = 0
        while n < min(cache.length, len(ids) - 1) and cache.tokens[n] == ids[n]:
            n += 1
        cache.truncate(n)
        pending = ids[n:]
    elif cached:
        cache.reset()
    for _ in range(max_new_tokens):
        if cached:
            if cache.length + len(pending) > L:  # full: refill with the last L tokens
                cache.reset()
                pending = ids[-L:]
            last = cache.step(pending)
        else:
            ctx = ids[-L:]
            logits = model.forward(tensor(np.array(ctx, np.uint32), device=model.device))
            last = ops.row_slice(logits, len(ctx) - 1).numpy()
        nxt = _pick(last, ids, temperature, top_k, top_p, repetition_penalty, rng)
        if nxt in stop:
            break
        ids.append(nxt)
        out.append(nxt)
        pending = [nxt]
        if on_token is not None:
            on_token(nxt)
    return out
