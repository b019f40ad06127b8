"""The default tokenizer: UTF-8 bytes (vocabulary 256)."""
from __future__ import annotations


class ByteTokenizer:
    """Text as its UTF-8 bytes; decoding replaces invalid sequences."""

    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of text."""
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        """The text of byte ids (ids outside 0..255 dropped)."""
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")
