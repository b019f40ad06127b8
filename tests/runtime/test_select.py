"""The select package's contract (runtime/select/): codegen generates exactly the families' rows, the
preference orders name rows that exist (by parameters, not names), every tuned constant says why and cites
a bench/results file that exists, and a plan is what the op runs."""
import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

from evermind_vk.runtime import kernels, select
from evermind_vk.runtime.select import matmul, table

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import codegen  # noqa: E402

FAMILIES = [importlib.import_module(f"{select.__name__}.{m.name}") for m in pkgutil.iter_modules(select.__path__)]


def test_codegen_generates_the_families_rows_and_nothing_else():
    rows = [r for fam in sorted(FAMILIES, key=lambda f: f.__name__) for r in getattr(fam, "ROWS", ())]
    assert codegen.VARIANTS == rows
    assert {r.name for r in rows} == set(kernels.manifest())  # generated/ holds exactly these
    assert all(isinstance(r, table.Row) for r in rows)


def test_orders_name_rows_of_the_table():
    """CM_ORDER, CM_FEW and CM2_ORDER are keys (flags and tile) of rows that exist: renaming or dropping a
    row breaks this test, not silently the order."""
    keys = {matmul.row_key(r) for r in matmul.ROWS}
    assert set(matmul.CM_ORDER) <= keys and set(matmul.CM2_ORDER) <= keys and matmul.CM_FEW[0] in keys
    assert len(set(matmul.CM_ORDER)) == len(matmul.CM_ORDER) and len(set(matmul.CM2_ORDER)) == len(matmul.CM2_ORDER)


@pytest.mark.parametrize("fam", [f for f in FAMILIES if hasattr(f, "TUNED")], ids=lambda f: f.__name__.split(".")[-1])
def test_tuned_constants_say_why_and_cite_a_result_file(fam):
    tables = [getattr(fam, n) for n in dir(fam) if n.endswith("TUNED")]
    for tuned in tables:
        for name, t in tuned.items():
            assert isinstance(t, table.Tuned), name
            assert t.reason and "\n" not in t.reason, name
            assert t.source.startswith("bench/results/") and (ROOT / t.source).is_file(), (name, t.source)


def test_module_constants_are_the_tuned_values():
    for fam in FAMILIES:
        for name, t in getattr(fam, "TUNED", {}).items():
            if name in vars(fam) and name not in ("CM_ORDER", "CM_FEW", "CM2_ORDER"):  # those hold row keys
                assert getattr(fam, name) == t.value, (fam.__name__, name)


def test_every_looping_family_is_asked_for_loop_counts():
    from evermind_vk.runtime.select import launch
    looping = {f.__name__ for f in FAMILIES if hasattr(f, "loop_count")}
    assert looping == {f.__name__ for f in launch.FAMILIES}


def _planned(plan) -> list:
    """A matmul plan's dispatches in the order run_plan runs them: its parts, then "sum" for the column sum
    of a parallel split's workspace, then its own dispatches."""
    out = [x for part in plan.parts for x in _planned(part)]
    if plan.workspace:
        out.append("sum")
    return out + [(d.variant, d.push, d.groups) for d in plan.dispatches]


@pytest.mark.parametrize("split", ["", "4"])
def test_gemm_strided_runs_exactly_the_plan(device, monkeypatch, split):
    """gemm_strided dispatches what select.matmul.plan planned, nothing else: on a CPU device a K split into
    ordered dispatches, the later ones accumulating; with a parallel split (a GPU's choice, or forced with
    EVERMIND_VK_MATMUL_SPLIT_K) the parts into a workspace, then its column sum (one or more reduce
    dispatches, "sum")."""
    import numpy as np

    import evermind_vk as ev
    monkeypatch.setattr(matmul, "MAX_LOOP", 64)  # split K of 1024 into ordered ranges on any device type
    monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", split)
    a, b = (ev.tensor(np.ones((16, 1024), np.float32)) for _ in range(2))
    c = ev.tensor(np.zeros((16, 16), np.float32))
    launch = matmul.Launch(("f32",) * 3, (a.numel, b.numel, c.numel), 16, 16, 1024,
                           matmul.Layout((1024, 1), (1, 1024), (16, 1)))
    plan = matmul.plan(launch, device, matmul.Knobs(split_k=split))
    seen = []
    monkeypatch.setattr(kernels, "dispatch", lambda v, tensors, push, groups, writes=None: seen.append((v, push, groups)))
    ev.ops.gemm(a, b, c, 16, 16, 1024, trans_b=True)
    ran = []
    for v, push, groups in seen:  # a column sum's reduce dispatches as one "sum"
        if v.op == "matmul":
            ran.append((v, push, groups))
        elif ran[-1:] != ["sum"]:
            ran.append("sum")
    assert _planned(plan) == ran
    if split:
        assert plan.workspace and "sum" in ran
    elif device.info.type == "cpu":
        assert len(seen) > 1 and [p["beta"] for _, p, _ in seen] == [0.0] + [1.0] * (len(seen) - 1)


def test_scan_chunk_length_below_one_is_a_shape_error():
    from evermind_vk.errors import ShapeError
    from evermind_vk.runtime.select.scan import scan_chunk_len
    with pytest.raises(ShapeError, match="scan chunk length must be >= 1"):
        scan_chunk_len(8, 0)
