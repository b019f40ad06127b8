"""Barriers only where a dependency needs one (runtime/program.py, ci/patches/0009): the plan keeps the
barrier before a dispatch that reads or writes what was written, or writes what was read, since the last
barrier; independent dispatches go without. Checked by the plan's rules, by the flags a recording sets, by
results (bit-identical training with and without elision), and by Khronos synchronization validation over
whole training steps (with a positive control: a plan that drops every barrier is reported)."""
import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.runtime.program import BarrierPlan
from evermind_vk.train import Trainer
from test_sync import LAYER_JSON, validated

KILL = "EVERMIND_VK_DISABLE_BARRIER_ELISION"


class Buf:  # identity is what the plan compares
    pass


def test_plan_rules():
    a, b, c, d = Buf(), Buf(), Buf(), Buf()
    p = BarrierPlan(elide=True)
    assert p.dispatch([(a, "r"), (b, "w")])          # the first dispatch always has one
    assert not p.dispatch([(a, "r"), (c, "w")])      # reads what is only read, writes something new
    assert p.dispatch([(b, "r"), (d, "w")])          # RAW on b
    assert not p.dispatch([(a, "r"), (c, "w")])      # after that barrier c is clean again
    assert p.dispatch([(a, "w")])                    # WAR on a (read since the barrier)
    assert p.dispatch([(a, "rw")])                   # WAW on a
    assert not p.dispatch([(b, "r")])                # b was written before the last barrier
    p.transfer(c, "w")                               # an upload of c
    assert p.dispatch([(c, "r")])                    # must wait for it
    p.transfer(d, "r")                               # a download of d
    assert not p.dispatch([(d, "r")])                # reading beside a read is fine
    assert p.dispatch([(d, "w")])                    # overwriting what the download reads is not
    assert (p.dispatches, p.barriers) == (10, 6)


def test_plan_ranges():
    """A binding's byte range narrows what it touches: launches on disjoint rows of one workspace need no
    barrier between them; overlap, a whole-buffer read after a ranged write, or a ranged write after a
    whole read does."""
    a, w = Buf(), Buf()
    p = BarrierPlan(elide=True)
    assert p.dispatch([(a, "r"), (w, "w", (0, 64))])
    assert not p.dispatch([(a, "r"), (w, "w", (64, 128))])      # the next rows
    assert not p.dispatch([(a, "r"), (w, "rw", (128, 192))])    # read-write, its own rows
    assert p.dispatch([(a, "r"), (w, "w", (100, 140))])         # WAW: meets two earlier ranges
    assert not p.dispatch([(w, "w", (0, 10))])                  # since that barrier only 100..140 is written
    assert p.dispatch([(w, "r")])                               # a whole read meets every range
    assert p.dispatch([(w, "w", (500, 600))])                   # WAR: w was read whole
    assert (p.dispatches, p.barriers) == (7, 4)


def test_matmuls_on_disjoint_parts_of_one_output_overlap(device, monkeypatch):
    """gemm_strided names the part of C it writes: two products into the two halves of one buffer go without
    a barrier between them, into overlapping parts with one; a range a binding cannot have is refused."""
    from evermind_vk.errors import KernelError
    from evermind_vk.ops.matmul import gemm_strided
    from evermind_vk.runtime import kernels
    monkeypatch.delenv(KILL, raising=False)
    rng = np.random.default_rng(0)
    a, b = (ev.tensor(rng.standard_normal(64).astype(np.float32)) for _ in range(2))
    kw = dict(a_strides=(8, 1), b_strides=(8, 1), c_strides=(8, 1))
    for second, barrier in ((64, False), (32, True)):
        c = ev.tensor(np.zeros(128, np.float32))
        with ev.record() as prog:
            gemm_strided(a, b, c, 8, 8, 8, **kw)
            gemm_strided(b, a, c, 8, 8, 8, **kw, c_batch=(second, 0))
        assert [op.barrier for op in prog._ops] == [True, barrier]
    A, B = a.numpy().reshape(8, 8).astype(np.float64), b.numpy().reshape(8, 8).astype(np.float64)
    got = c.numpy()
    np.testing.assert_allclose(got[:32], (A @ B).reshape(-1)[:32], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[32:96], (B @ A).reshape(-1), rtol=1e-5, atol=1e-5)
    v = kernels.variants_of("add", "f32")[0]
    for writes in ({0: (0, 8)}, {2: (0, 65)}, {2: (8, 8)}):  # a read-only binding, past the end, empty
        with pytest.raises(KernelError, match="write range"):
            kernels.dispatch(v, [a, b, ev.tensor(np.zeros(64, np.float32))], dict(n=64), (1, 1, 1), writes)


def test_plan_without_elision_keeps_every_barrier():
    p = BarrierPlan(elide=False)
    assert [p.dispatch([(Buf(), "r"), (Buf(), "w")]) for _ in range(4)] == [True] * 4


def test_a_recording_sets_the_flags_and_results_hold(device, monkeypatch):
    monkeypatch.delenv(KILL, raising=False)
    rng = np.random.default_rng(0)
    xs = [ev.tensor(rng.standard_normal(1000).astype(np.float32)) for _ in range(4)]
    with ev.record() as prog:
        y1 = ev.add(xs[0], xs[1])      # first: barrier
        y2 = ev.add(xs[2], xs[3])      # independent: none
        y3 = ev.mul(xs[0], xs[3])      # independent: none
        z = ev.add(y1, y2)             # reads y1, y2: barrier
        w = ev.mul(y3, xs[0])          # reads y3 (written before the last barrier): none
    flags = [op.barrier for op in prog._ops]
    assert flags == [True, False, False, True, False], flags
    h = [x.numpy().astype(np.float64) for x in xs]
    np.testing.assert_array_equal(z.numpy(), ((h[0] + h[1]).astype(np.float32) + (h[2] + h[3]).astype(np.float32)))
    np.testing.assert_array_equal(w.numpy(), (h[0] * h[3]).astype(np.float32) * h[0].astype(np.float32))
    monkeypatch.setenv(KILL, "1")
    with ev.record() as prog2:
        ev.add(xs[0], xs[1])
        ev.add(xs[2], xs[3])
    assert [op.barrier for op in prog2._ops] == [True, True]


def _train_lm(monkeypatch, elide: bool, precision: str):
    monkeypatch.setenv(KILL, "0" if elide else "1")
    m = TransformerLM(LMConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64,
                               max_seq_len=16, seed=5))
    tr = Trainer(m, precision=precision)
    ids = np.random.default_rng(2).integers(0, 64, 4 * 2 * 16 + 1).astype(np.uint32)
    tr.train(ids, seq_len=16, batch_size=2, lr=1e-2)
    plans = [s.program.barrier_plan for s in tr._steps.values() if s.program is not None]
    return [h["loss"] for h in tr.history], m.state_dict(), plans


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_training_is_bit_identical_with_and_without_elision(device, monkeypatch, precision):
    la, wa, plans = _train_lm(monkeypatch, True, precision)
    lb, wb, plans_off = _train_lm(monkeypatch, False, precision)
    assert la == lb
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), k
    # elision drops barriers (independent projections, weight gradients beside input gradients, AdamW updates)
    assert all(p.barriers < p.dispatches for p in plans), [(p.barriers, p.dispatches) for p in plans]
    assert all(p.barriers == p.dispatches for p in plans_off)


STEPS = """
import numpy as np, evermind_vk as ev
from evermind_vk.models import LMConfig, TransformerLM, HybridMambaConfig, HybridMambaModel
from evermind_vk.train import Trainer
from evermind_vk.runtime import program
from evermind_vk.errors import EvermindError
def train(tr, *args, **kw):
    try:
        tr.train(*args, **kw)
    except EvermindError as e:  # the control's dispatches race on a real GPU: its loss may go nan, and that ends a run
        if not {drop_all}:
            raise
        print("control run ended:", e)
if {drop_all}:  # the positive control: a plan that never keeps a barrier after the first
    program.BarrierPlan.dispatch = lambda self, touches: not self.__dict__.setdefault("_seen", False) and not self.__dict__.update(_seen=True)
for prec in ("f32", "f16"):
    m = TransformerLM(LMConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64, max_seq_len=16))
    train(Trainer(m, precision=prec), np.arange(3 * 2 * 16 + 1) % 64, seq_len=16, batch_size=2, lr=1e-2)
m = HybridMambaModel(HybridMambaConfig(vocabSize=12, dModel=16, numLayers=4, layers=("mamba1", "mamba2", "mamba3",
                                       "attention"), dState=4, nHeads=2, seed=1))
train(Trainer(m), np.arange(12 * 8, dtype=np.uint32) % 12, seq_len=8, batch_size=3, lr=1e-2)
print("DONE")
"""


def _validated(drop_all: bool) -> list:
    return validated(STEPS.format(drop_all=drop_all), timeout=900, **{KILL: "0"})[1]


@pytest.mark.skipif(not LAYER_JSON.exists(), reason="Khronos validation layer not installed (ci/setup.sh installs it)")
def test_elided_training_steps_are_hazard_free_under_synchronization_validation():
    msgs = _validated(drop_all=False)
    assert not msgs, "\n".join(msgs[:20])


@pytest.mark.skipif(not LAYER_JSON.exists(), reason="Khronos validation layer not installed (ci/setup.sh installs it)")
def test_validation_reports_a_plan_that_drops_needed_barriers():
    msgs = _validated(drop_all=True)
    assert any("SYNC-HAZARD" in m for m in msgs), msgs[:5]


def test_serialized_profile_times_every_dispatch_apart_and_keeps_the_plan(device, monkeypatch):
    monkeypatch.delenv(KILL, raising=False)
    xs = [ev.tensor(np.full(4096, float(i), np.float32)) for i in range(4)]
    with ev.record() as prog:
        y1 = ev.add(xs[0], xs[1])
        y2 = ev.add(xs[2], xs[3])
        ev.add(y1, y2)
    before = [op.barrier for op in prog._ops]
    assert before == [True, False, True]
    for serialize in (False, True):
        prof = ev.profile(prog, repeats=2, serialize=serialize)
        assert [r.count for r in prof.rows] == [3] and prof.gpu_ms > 0
        assert [op.barrier for op in prog._ops] == before  # the recorded program is unchanged
        assert prof.serialized == serialize and ("serialized" in prof.table()) == serialize
