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

import numpy as np

from ..errors import FormatError, StructureLimitError

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
# Parsed JSON costs ~90 bytes of Python objects per value (a list, a dict, a number, a short string),
# however few bytes it took in the file (`[]` is 2). So structure is bounded before json.loads runs: a
# vectorised pre-scan (numpy, 256 KiB steps, stopping at the first limit passed) measures nesting depth,
# value count and string length outside and inside strings, and refuses with StructureLimitError (a
# LimitError and a FormatError). Defaults keep
# the parsed value under ~48 MB; the environment variables raise them for a legitimately big file.
MAX_DEPTH = 64  # no JSON of ours nests deeper; deeper input is refused before anything recurses over it
MAX_ELEMENTS = 1 << 19  # values (containers, numbers, strings, literals) in one document
MAX_STRING = 1 << 22  # bytes in one string (4 MiB)
_SCAN_STEP = 1 << 18


_limits_source = None  # set_limits_source: the package's knobs (io reads no environment itself)


def set_limits_source(source) -> None:
    """Where json_limits() takes the limits from: source() -> (depth, values, string bytes), 0 meaning the
    default. evermind_vk.files installs the JSON limit knobs (EVERMIND_VK_JSON_MAX_DEPTH and its siblings);
    the io layer reads no environment variables itself."""
    global _limits_source
    _limits_source = source


def json_limits() -> tuple[int, int, int]:
    """(max depth, max values, max string bytes) for hostile JSON: the defaults, or what the limits source
    says (EVERMIND_VK_JSON_MAX_DEPTH / EVERMIND_VK_JSON_MAX_ELEMENTS / EVERMIND_VK_JSON_MAX_STRING)."""
    given = _limits_source() if _limits_source is not None else (0, 0, 0)
    return tuple(int(v) or d for v, d in zip(given, (MAX_DEPTH, MAX_ELEMENTS, MAX_STRING)))


class _Scan:
    """Running state of the pre-scan across steps."""
    def __init__(self):
        self.in_str, self.depth, self.values, self.str_start, self.bs_run = False, 0, 0, 0, 0


_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def _real_quotes(a: np.ndarray, st: _Scan) -> np.ndarray:
    """Offsets of the quotes in a that are not escaped (preceded by an even run of backslashes, the
    run continuing from the previous step); updates st.bs_run. Only quotes matter: any other escaped
    byte is inside a string, where nothing is structural."""
    q = np.flatnonzero(a == 34)
    bs = a == 92
    if not bs.any():
        if st.bs_run and q.size and q[0] == 0 and st.bs_run % 2:
            q = q[1:]
        st.bs_run = 0
        return q
    pos = np.arange(a.size, dtype=np.int64)
    last_nb = np.maximum.accumulate(np.where(bs, -1 - st.bs_run, pos))
    if q.size:
        run = np.where(q > 0, q - 1 - last_nb[np.maximum(q - 1, 0)], st.bs_run)
        q = q[run % 2 == 0]
    st.bs_run = int(a.size - 1 - last_nb[-1])
    return q


def _scan_step(a: np.ndarray, base: int, st: _Scan, lim: tuple, what: str) -> None:
    """One step of the pre-scan over bytes a starting at offset base."""
    max_depth, max_values, max_string = lim
    quotes = _real_quotes(a, st)
    # offsets where a string opens / closes in this step (alternating, continuing st.in_str)
    opens = quotes[1::2] if st.in_str else quotes[0::2]
    ends = quotes[0::2] if st.in_str else quotes[1::2]
    starts = np.concatenate(([st.str_start - base], opens)) if st.in_str else opens
    n_full = min(len(starts), len(ends))
    too_long = f"{what}: a JSON string longer than {max_string} bytes (EVERMIND_VK_JSON_MAX_STRING)"
    if n_full and int((ends[:n_full] - starts[:n_full]).max()) - 1 > max_string:
        raise StructureLimitError(too_long)
    if len(starts) > n_full:  # a string still open at the end of this step
        st.str_start = base + int(starts[-1])
        if base + a.size - st.str_start - 1 > max_string:
            raise StructureLimitError(too_long)
    # bytes outside strings: the parity of the real quotes up to each byte (a quote is never structural)
    isq = np.zeros(a.size, np.int8)
    isq[quotes] = 1
    parity = (np.cumsum(isq, dtype=np.int32) + (1 if st.in_str else 0)) & 1
    outside = parity == 0
    if a.size:
        st.in_str = bool(parity[-1])
    delta = np.where(outside, _OPEN[a], 0).astype(np.int32)
    if delta.any():
        depth = st.depth + np.cumsum(delta, dtype=np.int32)
        if int(depth.max()) > max_depth:
            raise StructureLimitError(f"{what}: JSON nests deeper than {max_depth} levels (EVERMIND_VK_JSON_MAX_DEPTH)")
        st.depth = int(depth[-1])
    # values: containers + commas + 1 bounds the values of any valid document (object keys not counted)
    st.values += int(np.count_nonzero(delta > 0)) + int(np.count_nonzero(outside & (a == 44)))
    if st.values + 1 > max_values:
        raise StructureLimitError(f"{what}: more than {max_values} JSON values (EVERMIND_VK_JSON_MAX_ELEMENTS)")


def check_json_structure(data, what: str, limits: tuple | None = None) -> None:
    """Refuse (StructureLimitError) JSON bytes whose nesting, value count or string length passes the limits
    (json_limits() unless given), without parsing, in 256 KiB steps that stop at the first limit passed;
    malformed JSON is left to the parser."""
    lim = limits or json_limits()
    mv = memoryview(data).cast("B")
    st = _Scan()
    for off in range(0, len(mv), _SCAN_STEP):
        _scan_step(np.frombuffer(mv[off:off + _SCAN_STEP], np.uint8), off, st, lim, what)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON (JavaScript writes null for NaN and Infinity)")


def loads(data, what: str, max_depth: int | None = None, limits: tuple | None = None):
    """json.loads of UTF-8 bytes from a stranger: StructureLimitError when its structure passes the limits
    (checked before parsing, see check_json_structure; max_depth overrides the depth limit), FormatError
    (never RecursionError, UnicodeDecodeError or JSONDecodeError) when it is not JSON."""
    lim = limits or json_limits()
    if max_depth is not None:
        lim = (max_depth,) + tuple(lim[1:])
    check_json_structure(data, what, lim)
    try:
        value = json.loads(bytes(data).decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise FormatError(f"{what} is not JSON: {str(e)[:200]}") from e
    if json_depth(value, lim[0]) > lim[0]:
        raise FormatError(f"{what} nests deeper than {lim[0]} levels")
    return value


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


def loads_str(text: str, what: str, limits: tuple | None = None):
    """loads() of a str (JSON held in safetensors metadata, a config string)."""
    return loads(text.encode("utf-8", "surrogatepass"), what, limits=limits)
