"""Generation: continue a prompt with a model, greedy or sampled (temperature, top-k), seeded."""
from __future__ import annotations

import numpy as np

from .. import ops
from ..errors import EvermindError
from ..runtime import tensor


def generate(model, prompt_ids, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int | None = None,
             seed: int | None = None) -> list[int]:
    """Continue prompt_ids: greedy when temperature == 0, else sampling from softmax(logits / T)
    restricted to the top_k logits; seeded and reproducible. Context is the last max_seq_len tokens."""
    ids = [int(i) for i in prompt_ids]
    if not ids:
        raise EvermindError("generate needs a non-empty prompt")
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
