"""Training text: the embedded default corpus and (input, target) chunking."""
from __future__ import annotations

import importlib

import numpy as np

IGNORE = 0xFFFFFFFF  # a target id >= any vocabulary: ignored by the loss

# Module docstrings of the standard library: real English technical prose that ships with every
# Python install (a few hundred KB), read at run time so nothing is copied into this package.
CORPUS_MODULES = (
    "argparse", "asyncio", "bisect", "calendar", "collections", "concurrent.futures", "contextlib", "copy",
    "csv", "dataclasses", "datetime", "decimal", "difflib", "doctest", "email", "enum", "fractions",
    "ftplib", "functools", "getopt", "gettext", "heapq", "http.client", "imaplib", "inspect", "ipaddress",
    "json", "logging", "mailbox", "numbers", "optparse", "os", "pathlib", "pickle", "pickletools",
    "pprint", "random", "re", "sched", "shlex", "shutil", "smtplib", "socket", "statistics", "string",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "timeit", "trace", "turtle", "typing",
    "unittest", "urllib.parse", "uuid", "warnings", "weakref", "zipfile",
)


def default_corpus() -> str:
    """The embedded default corpus (the docstrings of CORPUS_MODULES and their public members)."""
    parts = []
    for name in CORPUS_MODULES:
        try:
            mod = importlib.import_module(name)
        except Exception:  # a module missing from a trimmed install is skipped, the rest suffices
            continue
        if mod.__doc__:
            parts.append(mod.__doc__.strip())
        for attr in sorted(getattr(mod, "__all__", ()) or ()):
            doc = getattr(getattr(mod, attr, None), "__doc__", None)
            if isinstance(doc, str) and len(doc) > 200 and doc.strip() not in parts:
                parts.append(doc.strip())
    text = "\n\n".join(parts)
    if len(text) < 10_000:
        raise RuntimeError("default corpus unexpectedly small: is this Python running with -OO?")
    return text


def build_chunks(ids, seq_len: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(input, target) chunks of up to seq_len pairs covering every pair (ids[i], ids[i+1]); the last
    chunk may be shorter (builderforce's chunking drops it)."""
    ids = np.asarray(ids, dtype=np.uint32)
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    if ids.size < 2:
        raise ValueError(f"need at least 2 tokens to make a training pair, got {ids.size}")
    n = ids.size
    return [(ids[s:min(s + seq_len, n - 1)], ids[s + 1:s + seq_len + 1]) for s in range(0, n - 1, seq_len)]


def batches(chunks, batch_size: int, seq_len: int, rng: np.random.Generator | None = None, order=None):
    """Fixed-shape [batch_size * seq_len] batches (padding: input 0, target IGNORE); yields
    (inputs, targets, n_valid_targets). The chunks come in `order` (a permutation) if given, else
    shuffled by rng, else in sequence."""
    if order is None:
        order = np.arange(len(chunks))
        if rng is not None:
            rng.shuffle(order)
    for b in range(0, len(order), batch_size):
        inp = np.zeros((batch_size, seq_len), np.uint32)
        tgt = np.full((batch_size, seq_len), IGNORE, np.uint32)
        n = 0
        for row, ci in enumerate(order[b:b + batch_size]):
            x, y = chunks[ci]
            inp[row, :x.size] = x
            tgt[row, :y.size] = y
            n += y.size
        yield inp.ravel(), tgt.ravel(), n
