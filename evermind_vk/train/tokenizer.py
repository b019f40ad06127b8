"""The default tokenizer: UTF-8 bytes (vocabulary 256)."""
from __future__ import annotations


class ByteTokenizer:
    """The byte-level tokenizer: UTF-8 bytes are the ids (vocabulary 256)."""

    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of text as ids."""
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        """Text from ids (ids outside 0..255 dropped, invalid UTF-8 replaced)."""
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")
