"""Generation: continue a prompt (or a batch of prompts) with a model, greedy or sampled (temperature, top-k,
top-p, repetition penalty), seeded, with a KV cache (one token's work per step; for a TransformerLM a
recorded decode step sampled on the device, train/decode.py) and stop tokens, streaming each token."""
from __future__ import annotations

import math
import time

import numpy as np

from .. import ops
from . import decode
from ..errors import ConfigError, TokenError
from ..models.inputs import check_ids
from ..runtime import tensor


def sampling_probs(last: np.ndarray, ids, temperature: float, top_k, top_p, repetition_penalty: float):
    """The host sampler's distribution over the next token (float64), or the greedy id as an int when
    temperature <= 0: repetition penalty on the ids already seen, / temperature, top-k (ties at the k-th
    value kept), softmax, top-p (the smallest most-likely prefix with mass >= top_p, ties by id)."""
    z = last.astype(np.float64)
    if repetition_penalty != 1.0 and len(ids):  # CTRL / Hugging Face: shrink the logits of tokens already seen
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
    return p


def _pick(last: np.ndarray, ids: list, temperature: float, top_k, top_p, repetition_penalty: float, rng) -> int:
    p = sampling_probs(last, ids, temperature, top_k, top_p, repetition_penalty)
    return p if isinstance(p, int) else int(rng.choice(p.size, p=p))


def generate(model, prompt, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int | None = None,
             seed: int | None = None, top_p: float | None = None, repetition_penalty: float = 1.0,
             stop_tokens=(), use_cache: bool = True, on_token=None, stats: dict | None = None,
             keep_prefix: bool = False):
    """Continue a prompt: greedy when temperature == 0, else sampling from softmax(logits / T) restricted
    to the top_k logits and then to the top_p probability mass; seeded and reproducible. repetition_penalty
    > 1 divides positive (multiplies negative) logits of tokens already in the sequence. Generation ends
    after a token in stop_tokens (not included in the result). Context is the last max_seq_len tokens.

    prompt: token ids (a list or 1-D numpy array; returns the new ids), text (byte-vocabulary models:
    returns the new text), or a batch of either (a list of prompts of any lengths, or a 2-D array: returns
    one result per prompt, decoded together). on_token(id) (a batch: on_token(index, id)) is called for
    each new token as it is chosen (streaming). stats, a dict, receives prefill_tokens, prefill_s,
    decode_tokens and decode_s.

    use_cache with a TransformerLM (train/decode.py): the prompt is one recorded prefill program, each
    new token (of every sequence of a batch) one replay of a recorded decode step against the KV cache,
    sampled on the device (ops.sample); when a context reaches max_seq_len its cache is refilled with the
    last max_seq_len tokens (the context the uncached path sees, so greedy output is the same). With
    EVERMIND_VK_DECODE_CHAIN=k one replay runs up to k steps (the picks passed on on the device; the same
    tokens), and on_token is called a replay's tokens at a time. Other models, and use_cache=False: a forward
    per token (of each prompt) and the host sampler.
    keep_prefix (a chat's later turns, one prompt): the cache keeps the positions whose tokens begin the
    prompt, and only the rest of the prompt is run (the same numbers: each position's keys and values depend
    on the tokens up to it only); TransformerLM and LlamaLM through the recorded decode step, other models
    through the host KV-cache path."""
    prompts, single, text = _prompts(prompt, model.config.vocab_size)
    _check_sampling(max_new_tokens, temperature, top_k, top_p, repetition_penalty)
    stop = set(check_ids(list(stop_tokens), model.config.vocab_size, "generate: stop_tokens"))
    stats = {} if stats is None else stats
    stats.update(prefill_tokens=0, prefill_s=0.0, decode_tokens=0, decode_s=0.0)
    if keep_prefix and not single:
        raise TokenError("generate: keep_prefix continues one conversation, not a batch")
    if use_cache and decode.supports(model) and (not keep_prefix or decode.keeps_prefix(model)):
        if seed is None:
            seed = int(np.random.default_rng().integers(2**63))
        outs = _generate_device(model, prompts, int(max_new_tokens), dict(
            temperature=float(temperature), top_k=top_k, top_p=top_p, repetition_penalty=float(repetition_penalty),
            stop_tokens=stop, seed=int(seed) & (2**64 - 1)), on_token if not single or on_token is None
            else (lambda b, t: on_token(t)), stats, keep_prefix)
    else:
        outs = []
        for b, ids in enumerate(prompts):
            cb = on_token if single or on_token is None else (lambda t, b=b: on_token(b, t))
            outs.append(_generate_host(model, ids, int(max_new_tokens), temperature, top_k, seed, top_p,
                                       repetition_penalty, stop, use_cache, cb, stats, keep_prefix))
    if text:
        outs = [bytes(o).decode("utf-8", errors="replace") for o in outs]
    return outs[0] if single else outs


def _prompts(prompt, vocab_size: int):
    """(prompts as lists of ids, whether one prompt was given, whether it was text)."""
    def one(p, k):
        if isinstance(p, str):
            if vocab_size != 256:
                raise TokenError(f"generate: text needs a byte vocabulary (256 ids), this model has {vocab_size}")
            ids = list(p.encode("utf-8"))
        else:
            ids = check_ids(p, vocab_size, f"generate: prompt {k}" if k is not None else "generate: prompt")
        if not ids:
            raise TokenError("generate needs a non-empty prompt")
        return ids
    if isinstance(prompt, str):
        return [one(prompt, None)], True, True
    if isinstance(prompt, np.ndarray) and prompt.ndim == 2:
        return [one(row, k) for k, row in enumerate(prompt)], False, False
    if isinstance(prompt, (list, tuple)) and prompt and all(isinstance(p, (list, tuple, np.ndarray, str)) for p in prompt):
        kinds = {isinstance(p, str) for p in prompt}
        if len(kinds) > 1:
            raise TokenError("generate: a batch mixes text and token ids")
        return [one(p, k) for k, p in enumerate(prompt)], False, kinds == {True}
    if isinstance(prompt, np.ndarray) and prompt.ndim != 1:
        raise TokenError(f"generate: a prompt array must be 1-D (one prompt) or 2-D (a batch), got {prompt.ndim}-D")
    return [one(prompt, None)], True, False


def _check_sampling(max_new_tokens, temperature, top_k, top_p, repetition_penalty) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ConfigError(f"generate: max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if not (isinstance(temperature, (int, float, np.floating)) and math.isfinite(temperature) and temperature >= 0):
        raise ConfigError(f"generate: temperature must be finite and >= 0, got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0):
        raise ConfigError(f"generate: top_k must be None or an integer >= 0, got {top_k!r}")
    if not (math.isfinite(repetition_penalty) and repetition_penalty > 0) or \
            (top_p is not None and not (math.isfinite(top_p) and 0 < top_p <= 1)):
        raise ConfigError(f"generate: repetition_penalty must be > 0 and top_p in (0, 1], got {repetition_penalty}, {top_p}")


def _generate_device(model, prompts, n_new: int, sampling: dict, on_token, stats: dict, keep: bool = False) -> list:
    """Decode all prompts together with the recorded programs of train/decode.py (keep: one prompt that may
    begin with the positions the decoder's cache holds, Decoder.advance)."""
    B = len(prompts)
    dec = decode.decoder(model, B)
    seqs = [list(p) for p in prompts]
    dec.start(seqs, **sampling)
    outs: list[list[int]] = [[] for _ in range(B)]
    live = [n_new > 0] * B
    step = 0
    while step < n_new and any(live):
        t0 = time.perf_counter()
        k = dec.chain_tokens(n_new - step, live) if step else 1  # tokens a sequence this replay chooses
        if k > 1:
            steps = dec.advance_chain(seqs, live, step, k)
        else:
            steps = [dec.advance(seqs, live, step, keep) if keep else dec.advance(seqs, live, step)]
        kind = "prefill" if step == 0 else "decode"
        stats[kind + "_s"] += time.perf_counter() - t0
        stats[kind + "_tokens"] += dec.prefill_tokens if step == 0 else sum(len(r) for r in steps)
        for res in steps:
            for b, (tok, is_stop) in sorted(res.items()):
                if is_stop:
                    live[b] = False
                    continue
                seqs[b].append(tok)
                outs[b].append(tok)
                if on_token is not None:
                    on_token(b, tok)
        step += k
    return outs


def _generate_host(model, ids: list, max_new_tokens: int, temperature, top_k, seed, top_p, repetition_penalty,
                   stop: set, use_cache: bool, on_token, stats: dict, keep_prefix: bool = False) -> list[int]:
    """One prompt, a forward (or a KV-cache step) per token, sampled on the host (_pick)."""
    rng = np.random.default_rng(seed)
    L = getattr(model.config, "max_seq_len", None) or len(ids) + max_new_tokens  # EvermindLM: no limit
    cached = use_cache and hasattr(model, "forward_cached")
    cache = (model.kv_cache(reuse=True, keep=True) if keep_prefix else model.kv_cache(reuse=True)) if cached else None
    out: list[int] = []
    pending = ids[-L:]  # tokens not yet in the cache
    if cached and keep_prefix and len(ids) <= L:  # the cached positions that begin the prompt (one token left to run)
        k = 0
        while k < min(cache.length, len(ids) - 1) and cache.tokens[k] == ids[k]:
            k += 1
        cache.truncate(k)
        pending = ids[k:]
    elif cached:
        cache.reset()
    for n in range(max_new_tokens):
        t0 = time.perf_counter()
        if cached:
            if cache.length + len(pending) > L:  # full: refill with the last L tokens
                cache.reset()
                pending = ids[-L:]
            fed = len(pending)
            last = cache.step(pending)
        else:
            ctx = ids[-L:]
            fed = len(ctx) if n == 0 else 1
            logits = model.forward(tensor(np.array(ctx, np.uint32), device=model.device))
            last = ops.row_slice(logits, len(ctx) - 1).numpy()
        nxt = _pick(last, ids, temperature, top_k, top_p, repetition_penalty, rng)
        kind = "prefill" if n == 0 else "decode"
        stats[kind + "_s"] += time.perf_counter() - t0
        stats[kind + "_tokens"] += fed
        if nxt in stop:
            break
        ids.append(nxt)
        out.append(nxt)
        pending = [nxt]
        if on_token is not None:
            on_token(nxt)
    return out
