"""Token-id lists as JSON files (what `evermind-vk video encode` writes and `video decode` reads): a
JSON array of non-negative integers. Read as hostile input: a regular file only, at most
MAX_TOKEN_FILE bytes, JSON structure bounded before parsing (jsjson.loads), then every element checked.
Anything else is a TokenError (or a BlobError for what is not JSON at all) naming the file."""
from __future__ import annotations

from ..errors import TokenError
from .jsjson import loads
from .regular import read_regular

MAX_TOKEN_FILE = 16 << 20  # bytes: ~2M tokens of up to 7 digits


def load_token_list(path: str, vocab_size: int | None = None) -> list:
    """The token ids in path (a JSON array of integers in [0, vocab_size) when given)."""
    raw = read_regular(path, "token list", MAX_TOKEN_FILE)
    value = loads(raw, f"{path}: token list")
    if not isinstance(value, list):
        raise TokenError(f"{path}: a token list is a JSON array of integers, not {type(value).__name__}")
    for i, t in enumerate(value):
        if not isinstance(t, int) or isinstance(t, bool) or t < 0 or (vocab_size is not None and t >= vocab_size):
            want = f"an integer in [0, {vocab_size})" if vocab_size is not None else "a non-negative integer"
            raise TokenError(f"{path}: token {i} is {str(t)[:40]!r}, not {want}")
    return value
