"""Kernels on GGUF's quantized weight blocks (templates/qmatmul.comp.j2): their variant rows (quant type x
tile) and the runtime's choice among them.

A row is (template, op, dtype, spec constants, flags, tile); ROWS holds them as table.Row, which tools/codegen.py generates.
The quant type is a flag (it changes the code: the block's layout); TM, the rows of X one thread of qmatmul
multiplies by one block, and qgemv's TN, the columns one thread computes, are specialization constants (the tile)."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import UnsupportedError
from ..manifest import grid, usable
from .table import Row, Tuned

# bytes per block of 32 weights, by quant type (GGUF / ggml: Q4_0, Q4_1, Q8_0)
QUANT_TYPES = {"q4_0": 18, "q4_1": 20, "q8_0": 34}
BLOCK = 32
# qmatmul's tiles: TM = 1 for matrix-vector products (decoding, M = 1), 4 for matrices (prefill, training)
QMATMUL_TM = (1, 4)
# qgemv's tiles: WG threads of TN columns x TM rows each (TN columns share each load of X, TM rows each block of W)
QGEMV_TILES = ((("WG", 8), ("TN", 8), ("TM", 1)), (("WG", 8), ("TN", 8), ("TM", 4)))
TUNED = {
    "QGEMV_DEVICES": Tuned(("cpu",), "device types whose products run on qgemv at every row count: on lavapipe "
                                     "2-5x qmatmul's tiles for M = 1..32 (its TM = 4 tile from 4 rows)",
                           "bench/results/qmatmul_bench-lavapipe.txt"),
}
# lavapipe ends a shader loop after 65,535 iterations: qmatmul_dx's loop over W's rows runs in chunks of this
DX_ROWS_PER_LAUNCH = 32768


def variant_rows() -> list[tuple]:
    """Every quantized-kernel row: (template, op, dtype, spec, flags, tile)."""
    rows = []
    for q in QUANT_TYPES:
        rows += [("qmatmul", "qmatmul", "f32", (("WG", 64), ("TM", tm)), (q,), f"m{tm}") for tm in QMATMUL_TM]
        rows += [("qmatmul", "qgemv", "f32", t, (q,), _gemv_tile(dict(t))) for t in QGEMV_TILES]
        rows.append(("qmatmul", "qmatmul_dx", "f32", (("WG", 64),), (q,), ""))
        rows.append(("qmatmul", "qembedding", "f32", (("WG", 256),), (q,), ""))
    return rows


def _gemv_tile(spec: dict) -> str:
    """qgemv's tile name: nTN, then mTM where a thread multiplies more than one row."""
    return f"n{spec['TN']}" + (f"m{spec['TM']}" if spec["TM"] > 1 else "")


ROWS = [Row(*row) for row in variant_rows()]  # tools/codegen.py collects every family's ROWS


def pick_qmatmul(cands: list, qtype: str, M: int, device_type: str = "cpu", gemv: list = ()):
    """The variant for Y = X W^T with a quant type and M rows of X: qgemv (`gemv`, its usable variants) on the
    device types of TUNED QGEMV_DEVICES, else qmatmul (`cands`); of either, TM = 1 for one row, else the
    largest TM <= M. Every one computes each output the same way (the template's block_term): the same bits."""
    few = [v for v in gemv if qtype in v.flags]
    if device_type in TUNED["QGEMV_DEVICES"].value and few:
        return _rows_tile(few, M)
    mine = [v for v in cands if qtype in v.flags]
    if not mine:
        raise UnsupportedError(f"no qmatmul kernel for quant type {qtype}")
    return _rows_tile(mine, M)


def _rows_tile(cands: list, M: int):
    """TM = 1 for one row of X, else the largest TM <= M (the smallest where none fits)."""
    fit = [v for v in cands if v.spec["TM"] <= max(1, M)]
    return max(fit or cands, key=lambda v: v.spec["TM"]) if M > 1 else min(cands, key=lambda v: v.spec["TM"])


def qmatmul_groups(v, M: int, N: int) -> int:
    """Workgroups of a qmatmul or qgemv launch (the template's order: column blocks x row groups)."""
    return -(-N // (v.spec["WG"] * v.spec.get("TN", 1))) * -(-M // v.spec["TM"])  # qmatmul: one column a thread


@dataclass(frozen=True)
class Launch:
    """Y [M, N] = X [M, K] . W^T with W [N, K] in blocks of `qtype` (op "qmatmul"), or its input gradient
    dX = dY . W (op "qmatmul_dx")."""
    op: str
    qtype: str
    M: int
    N: int
    K: int


@dataclass(frozen=True)
class Dispatch:
    """One dispatch: the variant, its push constants and workgroups."""
    variant: object
    push: dict
    groups: tuple


@dataclass(frozen=True)
class Plan:
    """What a launch runs, in order (qmatmul_dx: a dispatch per chunk of W's rows, each later one adding)."""
    dispatches: tuple


def plan(launch: Launch, device, variant=None) -> Plan:
    """The dispatches of a quantized product on `device`: the product on pick_qmatmul's variant (or
    `variant`, which must multiply the launch's quant type), the input gradient in chunks of
    DX_ROWS_PER_LAUNCH rows of W (lavapipe's loop cap)."""
    M, N, K, q = launch.M, launch.N, launch.K, launch.qtype
    if launch.op == "qmatmul":
        v = variant or pick_qmatmul(usable("qmatmul", "f32", device), q, M, device.info.type,
                                    usable("qgemv", "f32", device))
        if v.op not in ("qmatmul", "qgemv") or q not in v.flags:
            raise UnsupportedError(f"qmatmul: variant {v.name} does not multiply {q} blocks")
        return Plan((Dispatch(v, dict(M=M, N=N, K=K), grid(qmatmul_groups(v, M, N))),))
    mine = [v for v in usable("qmatmul_dx", "f32", device) if q in v.flags]
    if not mine:
        raise UnsupportedError(f"no qmatmul_dx kernel for quant type {q}")
    v, threads = mine[0], M * (K // BLOCK)
    return Plan(tuple(Dispatch(v, dict(M=M, N=N, K=K, n0=n0, n1=min(N, n0 + DX_ROWS_PER_LAUNCH),
                                        beta=0.0 if n0 == 0 else 1.0), grid(-(-threads // v.spec["WG"])))
                      for n0 in range(0, N, DX_ROWS_PER_LAUNCH)))
