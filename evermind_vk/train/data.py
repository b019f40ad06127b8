"""Training text: the embedded default corpus and (input, target) chunking."""
from __future__ import annotations

import hashlib
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


# -- data sources: what the Trainer iterates, whatever the model's data_kind ------------------------------
class TokenSource:
    """A token stream cut into next-token chunks of seq_len (build_chunks); a batch is batch_size padded
    rows {"ids", "targets"} (u32 [batch_size * seq_len]), weighted by its count of real targets."""

    def __init__(self, ids: np.ndarray, seq_len: int):
        self.ids = np.asarray(ids, np.uint32)
        self.seq_len = int(seq_len)
        self.items = build_chunks(self.ids, self.seq_len)

    def __len__(self) -> int:
        return len(self.items)

    def fingerprint(self) -> str:
        """sha256 of the tokens: a resumed run must train on the same data."""
        return hashlib.sha256(self.ids.tobytes()).hexdigest()

    def batches(self, rows: int, order) -> list:
        """[(inputs, n_targets, rows, seq_len)] in `order` (a permutation of the chunks)."""
        return [({"ids": i, "targets": t}, n, rows, self.seq_len)
                for i, t, n in batches(self.items, rows, self.seq_len, order=order)]

    def shard(self, batch, rank: int, rows: int):
        """This rank's rows rank*rows .. (rank+1)*rows - 1 of a global batch, and their real targets."""
        inputs, _, _, L = batch
        lo, hi = rank * rows * L, (rank + 1) * rows * L
        i, t = inputs["ids"][lo:hi], inputs["targets"][lo:hi]
        return ({"ids": i, "targets": t}, int(np.count_nonzero(t != IGNORE)), rows, L)

    def split_tail(self, fraction: float):
        """(training source, held-out token ids): the last `fraction` of the tokens held out."""
        cut = int(round(self.ids.size * (1 - fraction)))
        if cut < 2 or self.ids.size - cut < 2:
            raise ValueError(f"eval_split {fraction} of {self.ids.size} tokens leaves too few on one side")
        return TokenSource(self.ids[:cut], self.seq_len), self.ids[cut:]


class SequenceSource:
    """builderforce's EvermindLMTrainer data: whole sequences (>= 2 tokens; shorter ones are skipped), each
    one batch {"ids", "targets": next tokens, the last ignored} of its own length, weight 1, in order: a
    window of k sequences (accum_steps) averages their mean losses."""

    def __init__(self, sequences, vocab_size: int):
        self.items = []
        for s in sequences:
            tok = np.asarray(s, np.int64).ravel()
            if tok.size < 2:
                continue
            if tok.min() < 0 or tok.max() >= vocab_size:
                raise ValueError(f"token ids must be in 0..{vocab_size - 1}")
            tgt = np.full(tok.size, IGNORE, np.uint32)
            tgt[:-1] = tok[1:]
            self.items.append((tok.astype(np.uint32), tgt))
        self.seq_len = max((t.size for t, _ in self.items), default=0)

    def __len__(self) -> int:
        return len(self.items)

    def fingerprint(self) -> str:
        """sha256 of the sequences (lengths and tokens)."""
        h = hashlib.sha256()
        for t, _ in self.items:
            h.update(np.int64(t.size).tobytes() + t.tobytes())
        return h.hexdigest()

    def batches(self, rows: int, order) -> list:
        """One batch per sequence (rows must be 1)."""
        if rows != 1:
            raise ValueError("sequence data trains one sequence per batch (batch_size 1; use accum_steps)")
        return [({"ids": self.items[i][0], "targets": self.items[i][1]}, 1, 1, self.items[i][0].size)
                for i in order]

    def shard(self, batch, rank: int, rows: int):
        """Sequence windows are not split among data-parallel ranks."""
        raise ValueError("sequence data (builderforce's windows) is not trained data-parallel")


class RowSource:
    """Rows of arrays (images [N, C, H, W]; or inputs and targets [N, d]) under the model's input names; a
    batch is up to batch_size rows (the last of an epoch may be smaller), weighted by its row count."""

    def __init__(self, arrays: dict):
        self.arrays = {k: np.ascontiguousarray(v, np.float32) for k, v in arrays.items()}
        sizes = {v.shape[0] for v in self.arrays.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise ValueError(f"rows: every array needs the same non-zero number of rows, got "
                             f"{ {k: v.shape for k, v in self.arrays.items()} }")
        if any(not np.isfinite(v).all() for v in self.arrays.values()):
            raise ValueError("rows: NaN or Inf in the training data")
        self.n = sizes.pop()
        self.seq_len = 0

    def __len__(self) -> int:
        return self.n

    def fingerprint(self) -> str:
        """sha256 of the arrays (names, shapes and values)."""
        h = hashlib.sha256()
        for k in sorted(self.arrays):
            h.update(k.encode() + str(self.arrays[k].shape).encode() + self.arrays[k].tobytes())
        return h.hexdigest()

    def gather(self, idx: np.ndarray) -> dict:
        """The rows idx of every array."""
        return {k: v[idx] for k, v in self.arrays.items()}

    def batches(self, rows: int, order) -> "RowBatches":
        """The batches (inputs, rows in the batch, rows, 0) in `order`, gathered when indexed."""
        return RowBatches(self, rows, np.asarray(order))

    def shard(self, batch, rank: int, rows: int):
        """This rank's rows of a global batch (possibly none, at the end of an epoch)."""
        inputs = {k: v[rank * rows:(rank + 1) * rows] for k, v in batch[0].items()}
        n = next(iter(inputs.values())).shape[0]
        return inputs, n, n, 0

    def split_tail(self, fraction: float):
        """(training source, held-out source): the last `fraction` of the rows held out."""
        cut = int(round(self.n * (1 - fraction)))
        if cut < 1 or self.n - cut < 1:
            raise ValueError(f"eval_split {fraction} of {self.n} rows leaves none on one side")
        return (RowSource({k: v[:cut] for k, v in self.arrays.items()}),
                RowSource({k: v[cut:] for k, v in self.arrays.items()}))


class RowBatches:
    """RowSource's batches of one epoch as a sequence: len() and indexing (a slice gives a list) gather
    only the rows asked for, so a large data set is not copied once more per epoch."""

    def __init__(self, source, rows: int, order: np.ndarray):
        self.source, self.rows, self.order = source, int(rows), order

    def __len__(self) -> int:
        return -(-self.order.size // self.rows)

    def _one(self, b: int):
        idx = self.order[b * self.rows:(b + 1) * self.rows]
        return self.source.gather(idx), idx.size, idx.size, 0

    def __getitem__(self, key):
        if isinstance(key, slice):
            return [self._one(b) for b in range(*key.indices(len(self)))]
        if not -len(self) <= key < len(self):
            raise IndexError(key)
        return self._one(key % len(self))

    def __iter__(self):
        return (self._one(b) for b in range(len(self)))


class EmbeddingPairSource(RowSource):
    """Rows (table[ids[i]], table[ids[i + 1]]) under the names (input, target), gathered per batch: a token
    stream as next-token embedding pairs without materialising them (the command line's moe data)."""

    def __init__(self, ids, table: np.ndarray, names=("inputs", "targets")):
        self.ids = np.asarray(ids, np.int64)
        self.table = np.ascontiguousarray(table, np.float32)
        if self.ids.size < 2 or self.ids.min() < 0 or self.ids.max() >= self.table.shape[0]:
            raise ValueError(f"need >= 2 ids in [0, {self.table.shape[0]}), got {self.ids.size}")
        if not np.isfinite(self.table).all():
            raise ValueError("NaN or Inf in the embedding table")
        self.names, self.n, self.seq_len = tuple(names), self.ids.size - 1, 0
        self.arrays = {self.names[0]: self.table[:0], self.names[1]: self.table[:0]}  # the row shapes

    def fingerprint(self) -> str:
        """sha256 of the ids and the table."""
        return hashlib.sha256(self.ids.tobytes() + self.table.tobytes()).hexdigest()

    def gather(self, idx: np.ndarray) -> dict:
        """The pairs idx."""
        return {self.names[0]: self.table[self.ids[idx]], self.names[1]: self.table[self.ids[idx + 1]]}

    def split_tail(self, fraction: float):
        """(training source, held-out source): the last `fraction` of the pairs held out."""
        cut = int(round(self.n * (1 - fraction)))
        if cut < 1 or self.n - cut < 1:
            raise ValueError(f"eval_split {fraction} of {self.n} pairs leaves none on one side")
        return (EmbeddingPairSource(self.ids[:cut + 1], self.table, self.names),
                EmbeddingPairSource(self.ids[cut:], self.table, self.names))
