"""A trainer's history (one dict per optimizer step) in a checkpoint: numeric keys as columns of float64
arrays, which the checkpoint store keeps in its tensor section, not as JSON values. A history in JSON costs
about 13 parsed values a step, so a run of some 40,000 steps would pass the JSON element bound every loader
enforces (io.jsjson: EVERMIND_VK_JSON_MAX_ELEMENTS) and its checkpoint could not be resumed; as columns it
costs 8 bytes a value, bounded by the bytes present like any tensor.

The packed form (a dict, FORMAT): n steps; keys in first-seen order; per key its kind ("int", "float",
"bool" or "json"); numeric keys' values (float64 [n], 0 where a step lacks the key or the value is not
finite) and, where some step lacks the key, a u8 mask of the steps that have it; the few non-finite values
(an overflowed step's gradient norm) as [key, step, "nan" | "inf" | "-inf"] triples; other keys' values as
JSON lists (None where a step lacks the key). Python ints and floats round-trip exactly (ints below 2^53)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import FormatError

FORMAT = "evermind-vk.history/1"
KINDS = ("int", "float", "bool", "json")
_SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _kind(values) -> str:
    """The column kind of a key's present values."""
    if all(type(v) is bool or isinstance(v, np.bool_) for v in values):
        return "bool"
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and abs(int(v)) < 2 ** 53
           for v in values):
        return "int"
    if all(isinstance(v, (float, np.floating)) for v in values):
        return "float"
    return "json"  # mixed types (ints and floats under one key): kept as they are


def pack(history: list[dict]) -> dict:
    """The packed form of a history (a list of per-step dicts)."""
    keys: dict[str, None] = {}
    for h in history:
        keys.update(dict.fromkeys(h))
    out = {"format": FORMAT, "n": len(history), "keys": list(keys), "kinds": {}, "values": {}, "present": {},
           "special": []}
    for k in keys:
        have = [k in h for h in history]
        vals = [h[k] for h in history if k in h]
        kind = out["kinds"][k] = _kind(vals)
        if not all(have):
            out["present"][k] = np.array(have, np.uint8)
        if kind == "json":
            out["values"][k] = [h.get(k) for h in history]
            continue
        col = np.zeros(len(history), np.float64)
        for i, h in enumerate(history):
            if k in h:
                v = float(h[k])
                if math.isfinite(v):
                    col[i] = v
                else:
                    out["special"].append([k, i, "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")])
        out["values"][k] = col
    return out


def unpack(stored) -> list[dict]:
    """A history from its packed form, or from the list of dicts older checkpoints hold. FormatError
    where the stored structure is not one of them or its parts disagree (a file from elsewhere)."""
    if isinstance(stored, list):
        if not all(isinstance(h, dict) for h in stored):
            raise FormatError("checkpoint history: a list that is not all step records")
        return [dict(h) for h in stored]
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        raise FormatError(f"checkpoint history: not a history ({type(stored).__name__})")
    n, keys, kinds = stored.get("n"), stored.get("keys"), stored.get("kinds")
    values, present = stored.get("values"), stored.get("present") or {}
    if type(n) is not int or n < 0 or not isinstance(keys, list) or not isinstance(kinds, dict) \
            or not isinstance(values, dict) or not isinstance(present, dict):
        raise FormatError("checkpoint history: malformed (n, keys, kinds, values)")
    cols = {}
    for k in keys:
        kind, col, mask = kinds.get(k), values.get(k), present.get(k)
        if kind not in KINDS or col is None or len(col) != n or (mask is not None and len(mask) != n):
            raise FormatError(f"checkpoint history: column {k!r} ({kind!r}) does not hold {n} steps")
        cols[k] = (kind, col if kind == "json" else np.asarray(col, np.float64),
                   None if mask is None else np.asarray(mask).astype(bool))
    special = {}
    for item in stored.get("special") or []:
        if not (isinstance(item, list) and len(item) == 3 and item[0] in cols and type(item[1]) is int
                and 0 <= item[1] < n and item[2] in _SPECIAL):
            raise FormatError(f"checkpoint history: bad non-finite entry {item!r:.80}")
        special[(item[0], item[1])] = _SPECIAL[item[2]]
    out = []
    for i in range(n):
        h = {}
        for k, (kind, col, mask) in cols.items():
            if mask is not None and not mask[i]:
                continue
            if kind == "json":
                h[k] = col[i]
                continue
            v = special.get((k, i), float(col[i]))
            h[k] = bool(v) if kind == "bool" else (int(v) if kind == "int" else v)
        out.append(h)
    return out
