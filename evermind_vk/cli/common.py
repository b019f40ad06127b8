"""What every command shares: the one-line error type and reporting, argparse number types, reading a
training text, checking an output directory before any work, and opening any model file."""
from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import struct
import sys
import tempfile
import zipfile

from ..errors import EvermindError, FormatError, LimitError
from ..files import load
from ..io.atomic import atomic_write
from ..io.regular import read_regular
from ..runtime import knobs
from ..train.distributed import RANK_ERROR_ENV


def say(msg: str) -> None:
    """Print a progress line now (flushed, so it shows before a slow step)."""
    print(msg, flush=True)


def parse_ids(text: str, flag: str = "--prompt-ids", vocab: int | None = None) -> list[int]:
    """--prompt-ids 1,2,3 -> [1, 2, 3] (and --stop-ids), each id below `vocab` where given."""
    try:
        ids = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise CliError(f"{flag} {text!r}: comma-separated token ids, e.g. 1,2,3") from None
    if not ids or min(ids) < 0:
        raise CliError(f"{flag} {text!r}: one or more non-negative token ids")
    if vocab is not None and max(ids) >= vocab:
        raise CliError(f"{flag}: token id {max(ids)} is outside the vocabulary of {vocab}")
    return ids


def print_continuations(outs, render) -> int:
    """generate --batch N's output: each continuation under a `--- i/N ---` line, as render(ids) gives its text;
    returns the new tokens in all."""
    for i, out in enumerate(outs):
        print(f"--- {i + 1}/{len(outs)} ---")
        print(render(out))
    return sum(len(o) for o in outs)


def report_rates(n: int, dt: float, stats: dict, args) -> None:
    """generate's closing line on stderr: tokens and time in all, and the prefill and decode rates (stats:
    train.generate's), with the batch and cache settings."""
    rate = lambda k: stats[k + "_tokens"] / stats[k + "_s"] if stats[k + "_s"] > 0 else 0.0  # noqa: E731
    print(f"[{n} tokens in {dt:.2f}s: {n / max(dt, 1e-9):.1f} tokens/s; prefill {stats['prefill_tokens']} tokens "
          f"at {rate('prefill'):.1f} tokens/s, decode {rate('decode'):.1f} tokens/s"
          f"{', batch ' + str(args.batch) if args.batch > 1 else ''}{', no KV cache' if args.no_cache else ''}]",
          file=sys.stderr)


def read_text(path: str) -> str:
    """A training text: a readable UTF-8 regular file (OSError / UnicodeDecodeError name the file)."""
    raw = bytes(read_regular(path, "--text file"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"--text {path}: not UTF-8 text (byte {e.start}: {raw[e.start:e.start + 1]!r}); "
                       "convert it first, e.g. iconv -f latin1 -t utf-8") from e


def check_out_dir(out: str, names: list[str]) -> None:
    """Make sure every output can be written BEFORE training (so a bad --out loses no training)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise CliError(f"--out {out}: exists and is not a directory")
    os.makedirs(out, exist_ok=True)
    for name in names:
        p = os.path.join(out, name)
        if os.path.exists(p) and not os.path.isfile(p):
            raise CliError(f"--out {out}: {name} exists and is not a regular file")
        if os.path.exists(p) and not os.access(p, os.W_OK):
            raise CliError(f"--out {out}: {name} exists and is not writable")
    try:  # the directory itself must take new files (the atomic writes create temporaries there)
        fd, probe = tempfile.mkstemp(prefix=".evermind-vk-probe-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise CliError(f"--out {out}: cannot create files there ({e.strerror})") from e


HELD_OUT = 0.05  # the last 5% of the corpus is held out to measure perplexity before and after training
HELD_OUT_MAX = 8_192  # bytes at most (keeps the two evaluations to a few seconds each on lavapipe)


def load_model(path: str, device=None, config=None):
    """Any model file we read (.safetensors, .npz, .evermind, builderforce's bare EVL0 / MoE0 / MBJS / VRQ0
    with `config` (a JSON file) where they need one, or a run directory holding model.safetensors or
    model.npz), with unreadable files as one typed error."""
    if os.path.isdir(path):
        for name in ("model.safetensors", "model.npz", "model.evermind"):
            if os.path.isfile(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            raise IsADirectoryError(errno.EISDIR, "is a directory with no model.safetensors, model.npz or "
                                    "model.evermind", path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    try:
        return load(path, device=device, config=config)
    except EvermindError as e:
        if str(path) in str(e):
            raise
        raise type(e)(f"{path}: {e}") from e  # name the file
    except OSError:
        raise
    except (ValueError, KeyError, EOFError, zipfile.BadZipFile, struct.error) as e:
        raise FormatError(f"{path}: not a model file we can read ({type(e).__name__}: {e})") from e


class CliError(EvermindError):
    """A command-line argument or input that cannot work (reported as one line, exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line `evermind-vk: error: ...` (exit 2), never the usage block."""

    def error(self, message):
        """Raise the usage error as a CliError (one line, exit 2)."""
        raise CliError(f"{self.prog.removeprefix('evermind-vk').strip() + ': ' if self.prog != 'evermind-vk' else ''}"
                       f"{message} (see --help)")


def number(kind, lo=None, lo_open=False, zero_ok=False, what=""):
    """An argparse type: a finite number of `kind`, >= lo (> lo if lo_open)."""
    def parse(text: str):
        """text as a number of `kind` within the bounds (argparse.ArgumentTypeError otherwise)."""
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}")
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if lo is not None and (v < lo or (lo_open and v == lo)) and not (zero_ok and v == 0):
            raise argparse.ArgumentTypeError(f"{text} must be {'>' if lo_open else '>='} {lo}{what}")
        return v
    parse.__name__ = kind.__name__
    return parse


POS_INT = number(int, 1)
NONNEG_INT = number(int, 0)
NONNEG = number(float, 0.0)
FINITE = number(float)


def describe(e: BaseException) -> str:
    """One line for an exception: OSErrors name the file and the reason, others their message."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    msg = str(e) or type(e).__name__
    if isinstance(e, UnicodeDecodeError):
        msg = f"not UTF-8 text ({e.reason} at byte {e.start})"
    return " ".join(msg.split())  # one line


def error(msg: str) -> None:
    """Report a failure as the one line `evermind-vk: error: ...` on stderr. A rank started by the --nproc
    launcher hands the line to the launcher instead (which reports the run's failure once) and prints it
    as that rank's line."""
    line = " ".join(msg.split())
    handoff = knobs.get(RANK_ERROR_ENV)
    if handoff:
        with contextlib.suppress(OSError):
            atomic_write(handoff, line.encode("utf-8", "replace"))
        print(f"evermind-vk: rank {os.environ.get('RANK', '?')}: {line}", file=sys.stderr, flush=True)
        return
    print(f"evermind-vk: error: {line}", file=sys.stderr, flush=True)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PNG_PIXELS = 1 << 22  # a PNG's width x height (2048 x 2048): its header is checked before decoding


def png_bytes(path: str, what: str = "PNG image") -> tuple[bytes, int, int]:
    """(bytes, width, height) of a PNG file: a regular file read once (bounded by its size at open) whose
    IHDR, checked before any pixel is decoded, declares at most MAX_PNG_PIXELS pixels."""
    raw = bytes(read_regular(path, what))
    if len(raw) < 24 or raw[:8] != PNG_SIGNATURE or raw[12:16] != b"IHDR":
        raise FormatError(f"{path}: not a PNG file")
    w, h = struct.unpack(">II", raw[16:24])
    if w * h > MAX_PNG_PIXELS:
        raise LimitError(f"{path}: a PNG of {w} x {h} pixels; at most {MAX_PNG_PIXELS:,} are read")
    return raw, w, h
