"""JSON exactly as JavaScript writes it: `stable_json` (doppler's stableJson, compact JSON of a
recursively key-sorted copy, which its checkpoint hashes cover) and `js_json` (JSON.stringify of plain
data in insertion order, as builderforce writes package manifests), byte for byte. JavaScript details that matter for hashes: keys sort by UTF-16 code units, yet an
object lists integer-like keys ("0".."4294967294") first in numeric order; numbers print the
ECMAScript way (1e-7, 1e+21, 100000000000000000000, -0 -> 0, NaN/Infinity -> null); strings escape
only quote, backslash and control characters (lone surrogates as \\uXXXX); undefined members are
dropped (use the UNDEFINED marker)."""
from __future__ import annotations

import json
import math

from ..errors import FormatError

UNDEFINED = object()


def js_number(x) -> str:
    """x printed as JavaScript's String(number) does (integers exactly below 2^53, ECMAScript shortest form
    otherwise; non-finite values raise)."""
    if isinstance(x, bool):
        raise TypeError("bool is not a number here")
    if isinstance(x, int) and abs(x) < 2 ** 53:
        return str(x)
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return "null"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    r = repr(abs(x))  # shortest round-trip digits, as ECMAScript requires
    mant, _, exp = r.partition("e")
    exp = int(exp) if exp else 0
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    digits = (ip + fp).lstrip("0")
    lead_zeros = len(ip + fp) - len((ip + fp).lstrip("0"))
    n = len(ip) + exp - lead_zeros  # decimal point position relative to digits
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    es = ("+" if e >= 0 else "-") + str(abs(e))
    return sign + digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + es


_ESC = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def js_string(s: str) -> str:
    """s as JavaScript's JSON.stringify quotes it (only quote, backslash and control characters escaped;
    lone surrogates as \\uXXXX)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in _ESC:
            out.append(_ESC[ch])
        elif o < 0x20 or 0xD800 <= o <= 0xDFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _is_index(k: str) -> bool:
    return k.isdigit() and (k == "0" or k[0] != "0") and int(k) < 2 ** 32 - 1 and k.isascii()


def js_key_order(keys) -> list:
    """The order a JS object built by inserting keys sorted by UTF-16 units enumerates them."""
    keys = sorted(keys, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    idx = sorted((k for k in keys if _is_index(k)), key=int)
    return idx + [k for k in keys if not _is_index(k)]


def stable_json(value) -> str:
    """value as doppler's stableJson writes it: compact JSON of a recursively key-sorted copy, byte for
    byte."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return js_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join("null" if v is UNDEFINED else stable_json(v) for v in value) + "]"
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise TypeError(f"object key {k!r} is not a string")
        parts = [js_string(k) + ":" + stable_json(value[k]) for k in js_key_order(value) if value[k] is not UNDEFINED]
        return "{" + ",".join(parts) + "}"
    raise TypeError(f"cannot serialise {type(value).__name__}")


def js_json(value) -> str:
    """JSON.stringify(value) for plain data: insertion order, ECMAScript number and string format."""
    if value is None or value is True or value is False or isinstance(value, (int, float, str)):
        return stable_json(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(js_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(js_string(str(k)) + ":" + js_json(v) for k, v in value.items()) + "}"
    raise TypeError(f"cannot serialise {type(value).__name__}")


# -- reading hostile JSON ---------------------------------------------------------------------------
MAX_DEPTH = 64  # no JSON of ours nests deeper; deeper input is refused before anything recurses over it


def json_depth(value, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of parsed JSON (iterative, so any depth is measured without recursion); stops
    counting past limit + 1."""
    depth, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            depth = max(depth, d)
            if depth > limit:
                return depth
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return depth


def loads(data, what: str, max_depth: int = MAX_DEPTH):
    """json.loads of UTF-8 bytes from a stranger: FormatError (never RecursionError, UnicodeDecodeError
    or JSONDecodeError) when it is not JSON or nests deeper than max_depth."""
    try:
        value = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise FormatError(f"{what} is not JSON: {str(e)[:200]}") from e
    if json_depth(value, max_depth) > max_depth:
        raise FormatError(f"{what} nests deeper than {max_depth} levels")
    return value
