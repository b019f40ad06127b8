"""Mamba's scans: the chunked selective scan (Mamba-1, and builderforce's Mamba-3 complex form) and the
SSD's chunked quadratic form (Mamba-2, and its complex form): chunk lengths and what a variant holds."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ShapeError, UnsupportedError
from ..manifest import usable
from .table import F, Row

SCAN_OPS = ("scan_chunk", "scan_carry", "scan_output", "scan_backward_chunk", "scan_backward", "scan_channel_sum")
CSCAN_OPS = ("cscan_chunk", "cscan_carry", "cscan_output", "cscan_backward_chunk", "cscan_backward")
SSD_OPS = ("ssd_state", "ssd_output", "ssd_dgrid", "ssd_dbc", "ssd_da")


def ssd_row(op: str, dtype: str, wg: int = 64, qmax: int = 64, nmax: int = 64, template: str = "ssd") -> Row:
    """An SSD row (Mamba-2; template cssd: Mamba-3's complex form): WG threads, chunks of <= QMAX tokens,
    <= NMAX (complex) states in registers. Raises ValueError for a row its template cannot run."""
    spec = dict(WG=wg, QMAX=qmax, NMAX=nmax)
    errors = ssd_row_errors(spec)
    if errors:
        raise ValueError(f"{op} {dtype} {spec}:\n  " + "\n  ".join(errors))
    return Row(template, op, dtype, tuple(spec.items()))


# -- selective scan -----------------------------------------------------------------------------------
# lavapipe ends any shader loop after 65,535 iterations, so no scan invocation may walk a whole
# sequence: the chunk pass loops over one chunk (<= SCAN_MAX_CHUNK tokens), the carry pass over the
# chunk summaries (<= SCAN_MAX_CHUNKS of them). One (batch, chunk, channel) thread keeps its N states
# in registers: N <= the variant's NMAX.
SCAN_MAX_CHUNK = 4096
SCAN_MAX_CHUNKS = 4096


def scan_chunk_len(seq_len: int, requested: int, batch: int = 1) -> int:
    """Tokens per chunk: `requested`, raised just enough that the batch's sequences need <= SCAN_MAX_CHUNKS
    chunks in all (the carry loops over one sequence's chunks; the A_log and D gradients sum one partial
    per chunk of every sequence)."""
    if requested < 1:
        raise ShapeError(f"scan chunk length must be >= 1, got {requested}")
    ch = max(requested, -(-seq_len // (SCAN_MAX_CHUNKS // max(batch, 1) or 1)))
    while batch * -(-seq_len // ch) > SCAN_MAX_CHUNKS and ch < seq_len:
        ch += 1
    if ch > SCAN_MAX_CHUNK:
        raise UnsupportedError(f"a sequence of {seq_len} tokens needs chunks of {ch} > {SCAN_MAX_CHUNK} tokens")
    return ch


def scan_errors(n_state: int, nmax: int) -> list[str]:
    """Why a scan variant with NMAX registers of state cannot run N states (empty: it can)."""
    return [] if 1 <= n_state <= nmax else [f"d_state {n_state} outside 1..{nmax} (the scan keeps the states in registers)"]
# -- Mamba-2 SSD, the chunked quadratic form ----------------------------------------------------------
# templates/ssd.comp.j2: one workgroup per (batch, chunk, head) holds the chunk's cumulative decays, and
# ssd_output the Q×Q block, in shared memory: Q <= the variant's QMAX (QMAX^2 floats must fit), and the
# workgroup's threads cover the chunk's tokens (WG >= QMAX). The inter-chunk recurrence is scan_carry,
# over <= SCAN_MAX_CHUNKS chunks, so a sequence may have at most QMAX * SCAN_MAX_CHUNKS tokens.
def ssd_shared_bytes(spec: dict) -> int:
    """Shared memory of the largest SSD kernel (ssd_output / cssd_output: the Q×Q block and two decay
    arrays; ssd_da's arrays and tree sums are smaller)."""
    return (spec["QMAX"] * spec["QMAX"] + 2 * spec["QMAX"] + 2 * spec["WG"]) * 4


def ssd_row_errors(spec: dict) -> list[str]:
    """Why an SSD row of the variant table cannot work with its template (empty: it can)."""
    wg, qmax = spec["WG"], spec["QMAX"]
    errs = []
    if wg & (wg - 1) or wg < qmax:
        errs.append(f"WG {wg} must be a power of two >= QMAX {qmax} (one thread per token of a chunk, tree sums)")
    if ssd_shared_bytes(spec) > 32768:
        errs.append(f"QMAX {qmax}: the Q×Q block and the decays pass 32 KiB of shared memory")
    return errs


def ssd_launch_errors(spec: dict, shared_memory: int) -> list[str]:
    """Why an SSD variant cannot run on a device (empty: it can)."""
    need = ssd_shared_bytes(spec)
    return [] if need <= shared_memory else [
        f"the SSD's {spec['QMAX']}x{spec['QMAX']} block needs {need} bytes of shared memory, the device has {shared_memory}"]


def ssd_chunk_len(seq_len: int, requested: int, qmax: int) -> int:
    """Tokens per SSD chunk: `requested` (1..qmax), raised just enough that one sequence has
    <= SCAN_MAX_CHUNKS chunks (the inter-chunk scan loops over them); any chunk length gives the same
    result up to f32 rounding."""
    if not 1 <= requested <= qmax:
        raise UnsupportedError(f"SSD chunk length {requested} outside 1..{qmax} (the Q×Q block lives in shared memory)")
    q = max(requested, -(-seq_len // SCAN_MAX_CHUNKS))
    if q > qmax:
        raise UnsupportedError(f"a sequence of {seq_len} tokens needs more than {SCAN_MAX_CHUNKS} SSD chunks of "
                               f"<= {qmax} tokens (at most {qmax * SCAN_MAX_CHUNKS} tokens a sequence)")
    return q


def ssd_loop_count(op: str, spec: dict, push: dict) -> int:
    """Upper bound of the loop iterations one invocation of an SSD launch runs (exit tests and tree sums
    included): the decays' cumulative sum (Q), then the op's own loops over the chunk, the head's
    channels (hd) and the states (N). The complex form (cssd_*) has the same loops."""
    wg, Q, N, hd = spec["WG"], push["Q"], push["N"], push["hd"]
    base = Q + 2
    if op == "ssd_state":
        return base + Q + 1
    if op == "ssd_output":
        return base + (-(-Q * Q // wg) + 1) * (N + 1) + N + Q * (Q + N + 2) + 1
    if op == "ssd_dgrid":
        return base + hd + N + 2
    if op == "ssd_dbc":
        return base + 4 * (Q + 1) + 2 * (hd + 1)
    if op == "ssd_da":
        return base + -(-hd * N // wg) + 1 + N + 1 + Q + 2 * (wg.bit_length() + 1)
    raise ValueError(op)




def loop_count(op: str, spec: dict, flags, push: dict) -> int | None:
    """Loop iterations one invocation of an SSD kernel runs (None: not one; the scans' loops are bounded by
    their chunk lengths, SCAN_MAX_CHUNK and SCAN_MAX_CHUNKS)."""
    if op.startswith(("ssd_", "cssd_")):
        return ssd_loop_count(op.removeprefix("c"), spec, push)
    return None


ROWS = [
    # Mamba-1 selective scan, chunked: f32 and f16 storage (state and math f32); NMAX = the most states one
    # thread keeps in registers.
    *(Row("scan", op, dt, (("WG", 64), ("NMAX", 64))) for op in SCAN_OPS for dt in F),
    # builderforce's Mamba-3 scan (complex states), chunked: f32 / f16 storage; NMAX complex states per thread.
    *(Row("cscan", op, dt, (("WG", 64), ("NMAX", 32))) for op in CSCAN_OPS for dt in F),
    # Mamba-2 SSD, the chunked quadratic form: f32 / f16 storage; chunks of <= QMAX tokens.
    *(ssd_row(op, dt) for op in SSD_OPS for dt in F),
    # builderforce's Mamba-3 by the same quadratic form with a complex decay per head; NMAX complex states.
    *(ssd_row("c" + op, dt, nmax=32, template="cssd") for op in SSD_OPS for dt in F),
]


@dataclass(frozen=True)
class Launch:
    """A scan over `batch` sequences of `seq_len` tokens with `n_state` states (complex ones for the
    complex forms), `chunk` tokens a chunk asked for. form: 'scan', 'cscan', 'ssd' or 'cssd'."""
    form: str
    dtype: str
    seq_len: int
    n_state: int
    chunk: int
    batch: int = 1


@dataclass(frozen=True)
class Plan:
    """Tokens a chunk and chunks a sequence."""
    chunk: int
    n_chunks: int


FIRST_OP = {"scan": "scan_chunk", "cscan": "cscan_chunk", "ssd": "ssd_output", "cssd": "cssd_output"}


def plan(launch: Launch, device, knobs=None) -> Plan:
    """The chunking of a scan on `device`: UnsupportedError where the states do not fit a variant's
    registers, or (SSD) the Q×Q block the device's shared memory, or the sequence the chunk limits."""
    v = usable(FIRST_OP[launch.form], launch.dtype, device)[0]
    errs = scan_errors(launch.n_state, v.spec["NMAX"])
    if launch.form in ("ssd", "cssd"):
        errs = ssd_launch_errors(v.spec, device.info.shared_memory) + errs
    if errs:
        raise UnsupportedError("; ".join(errs))
    if launch.form in ("ssd", "cssd"):
        q = ssd_chunk_len(launch.seq_len, launch.chunk, v.spec["QMAX"])
    else:
        q = scan_chunk_len(launch.seq_len, launch.chunk, launch.batch)
    return Plan(q, -(-launch.seq_len // q))
