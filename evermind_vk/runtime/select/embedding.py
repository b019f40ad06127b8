"""Embedding lookups and their backward: the columns a thread sums, the scan or sorted path, the lanes
that count a token's rank."""
from __future__ import annotations

from ...errors import UnsupportedError
from .table import F, Tuned, simple

ROWS = [
    # One thread per output element.
    *(simple("embedding", op, dt, 256) for op in ("embedding", "embedding_backward") for dt in F),
    # embedding_backward's sorted path: the counting sort of the ids, then sums over each id's run.
    simple("embedding", "embedding_rank", "f32", 256),
    *(simple("embedding", "embedding_backward_sorted", dt, 256) for dt in F),
]


def embedding_backward_cols(D: int, transpose: bool) -> int:
    """Table columns one embedding_backward thread sums: 4 for a [V, D] table with D % 4 == 0 (each id
    test over the tokens then serves four sums: ~4x less work on lavapipe, same order, same bits), else 1."""
    return 4 if not transpose and D % 4 == 0 else 1


EMBEDDING_BACKWARD_PATHS = ("scan", "sorted")


# embedding_rank's threads a token on GPUs: lanes of one token split its count over the tokens, up to
# RANK_THREADS threads in all; CPU devices (few cores, and a workgroup's threads run in turn) keep one.
TUNED = {
    "RANK_LANES": Tuned(32, "GPUs: lanes counting one token's rank (one thread a token left the device idle)",
                        "bench/results/selection-tuning.md"),
}
RANK_LANES = TUNED["RANK_LANES"].value
RANK_THREADS = 1 << 20


def embedding_rank_lanes(T: int, device_type: str, forced: int = 0) -> int:
    """Threads counting for each token in embedding_rank (a power of two dividing its workgroup);
    forced: EVERMIND_VK_RANK_LANES's count."""
    if forced:
        if forced & (forced - 1) or forced > 256:
            raise UnsupportedError(f"EVERMIND_VK_RANK_LANES={forced}: want a power of two up to 256")
        return forced
    if device_type == "cpu":
        return 1
    lanes = RANK_LANES
    while lanes > 1 and T * lanes > RANK_THREADS:
        lanes //= 2
    return lanes


def embedding_backward_path(T: int, V: int, D: int, cols: int, forced: str = "") -> str:
    """'scan' (every table thread loops over all T tokens: V * D / cols * T steps) or 'sorted' (a
    counting sort of the ids, T * T steps, then each thread loops over its id's tokens only: T * D / cols
    plus binary searches). Sorted where T * T < V * D / cols * T, i.e. T < V * D / cols (the LM's
    [256, 64] table from 512 tokens: 4,096 threads x 512 tokens scanned before, 512 x 512 counts now).
    forced: EVERMIND_VK_EMBEDDING_BACKWARD ('' , 'scan' or 'sorted')."""
    if forced and forced not in EMBEDDING_BACKWARD_PATHS:
        raise UnsupportedError(f"EVERMIND_VK_EMBEDDING_BACKWARD={forced!r}: want one of "
                               f"{', '.join(EMBEDDING_BACKWARD_PATHS)}")
    if forced:
        return forced
    return "sorted" if T < V * D // cols else "scan"


def search_loops(n: int) -> int:
    """Iterations of one binary search over n sorted values (embedding_backward_sorted runs two)."""
    return n.bit_length() + 1



def loop_count(op: str, spec: dict, flags, push: dict) -> int | None:
    """Loop iterations one invocation of an embedding backward kernel runs (None: not one)."""
    if op == "embedding_backward":
        return push["t1"] - push["t0"] + 1
    if op == "embedding_rank":
        return -(-(push["c1"] - push["c0"]) // push["lanes"]) + 1 + push["lanes"].bit_length() + 1
    if op == "embedding_backward_sorted":
        return 2 * search_loops(push["T"]) + push["p1"] - push["p0"] + 1
    return None
