"""Buffer reuse inside a recording (runtime/program.py): a recorded step that hands the buffers of its dead
tensors to later allocations gives bit-identical results to one that does not (EVERMIND_VK_DISABLE_RECORD_REUSE=1),
over several replays, for the transformer, Mamba and MoE models; it holds less memory; host-visible buffers
(uploads, downloads), buffers alive when the recording ends and buffers set up eagerly are never handed out
twice; memory_allocated counts the pool."""
import gc

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.models import (EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel, LMConfig,
                                TransformerLM)
from evermind_vk.runtime.kernels import fill_words
from evermind_vk.train import EvermindLMTrainer, Trainer
from test_sync import LAYER_JSON, validated

KILL = "EVERMIND_VK_DISABLE_RECORD_REUSE"


def _programs(trainer):
    trainer = getattr(trainer, "trainer", trainer)  # a preset (EvermindLMTrainer) runs on a Trainer
    return [s.program for s in trainer._steps.values() if s.program is not None]


def _run(monkeypatch, reuse: bool, make, train):
    """(losses, weights, allocations served from the pool, peak bytes of the training) of one run."""
    monkeypatch.setenv(KILL, "0" if reuse else "1")
    dev = ev.get_device()
    gc.collect()
    model, trainer = make()
    gc.collect()
    dev.reset_peak_memory_stats()
    base = dev.memory_allocated()
    losses = train(trainer)
    reused = sum(p.buffers_reused for p in _programs(trainer))
    peak = dev.max_memory_allocated() - base
    return np.asarray(losses, np.float64), model.state_dict(), reused, peak


def _same(monkeypatch, make, train):
    a = _run(monkeypatch, True, make, train)
    b = _run(monkeypatch, False, make, train)
    assert a[2] > 0 and b[2] == 0, (a[2], b[2])  # the pool served allocations with reuse, none without
    assert np.array_equal(a[0], b[0], equal_nan=True), (a[0], b[0])
    assert a[1].keys() == b[1].keys()
    for k in a[1]:
        assert np.array_equal(a[1][k], b[1][k]), k
    return a, b


def _per_step(tr):
    """Every optimizer step's loss and gradient norm (Trainer.history)."""
    assert len(tr.history) >= 3
    return [[h["loss"], h["grad_norm"] if h["grad_norm"] is not None else np.nan] for h in tr.history]


def _lm_text(n):
    return np.random.default_rng(3).integers(0, 256, n).astype(np.uint32)


@pytest.mark.parametrize("precision,accum", [("f32", 1), ("f16", 1), ("f32", 2)])
def test_transformer_steps_are_bit_identical_with_reuse(monkeypatch, device, precision, accum):
    if precision == "f16" and not device.info.f16:
        pytest.skip("no f16 on this device")
    ids = _lm_text(4 * 8 * 16 + 1)

    def make():
        m = TransformerLM(LMConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64, max_seq_len=16),
                          device=device)
        return m, Trainer(m, precision=precision)

    def train(tr):  # 4 optimizer steps: one recording, three replays (accum 2: micro and apply programs)
        tr.train(ids, seq_len=16, batch_size=8 // accum, accum_steps=accum, lr=1e-2, max_grad_norm=1.0, max_steps=4)
        return _per_step(tr)
    _same(monkeypatch, make, train)


def test_mamba_steps_are_bit_identical_with_reuse(monkeypatch, device):
    ids = np.arange(12 * 8, dtype=np.uint32) % 12

    def make():
        m = HybridMambaModel(HybridMambaConfig(vocabSize=12, dModel=16, numLayers=4,
                                               layers=("mamba1", "mamba2", "mamba3", "attention"), dState=4, nHeads=2,
                                               seed=1), device=device)
        return m, Trainer(m, seed=0)

    def train(tr):  # 4 steps: batches of 3, 3, 3 and 2 sequences (two programs)
        tr.train(ids, epochs=1, seq_len=8, batch_size=3, lr=1e-2, track_grad_norm=True)
        return _per_step(tr)
    _same(monkeypatch, make, train)


def test_moe_steps_are_bit_identical_with_reuse(monkeypatch, device):
    seqs = [[1, 2, 3, 4, 5, 6], [2, 3, 4, 8, 0, 1], [7, 1, 1, 0, 8, 2]]

    def make():
        m = EvermindLM(EvermindLMConfig.from_builderforce(dict(vocabSize=9, dModel=8, numLayers=2, convKernel=3,
                                                               hiddenDim=6, numExperts=4, topK=2, seed=4)),
                       device=device)
        return m, EvermindLMTrainer(m, lr=0.03, epochs=4)

    _same(monkeypatch, make, lambda tr: tr.fit(seqs))


def test_reuse_lowers_the_peak_of_a_recorded_step(monkeypatch, device):
    # Measured on lavapipe (this config, f32): 4 steps peak at 0.50 of the peak without reuse (weights not
    # counted; AdamW moments counted). bench/record_memory.py prints the same for bigger configs.
    ids = _lm_text(4 * 8 * 32 + 1)

    def make():
        m = TransformerLM(LMConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=128, max_seq_len=32),
                          device=device)
        return m, Trainer(m)

    a, b = _same(monkeypatch, make, lambda tr: (tr.train(ids, seq_len=32, batch_size=8, lr=1e-3, max_steps=4),
                                                _per_step(tr))[1])
    assert a[3] < 0.7 * b[3], (a[3], b[3])


def _bufs(*ts):
    return [t._buffer for t in ts]


def test_a_dead_temporary_buffer_serves_a_later_allocation_and_results_hold(device, monkeypatch):
    monkeypatch.setenv(KILL, "0")
    x = ev.tensor(np.arange(1024, dtype=np.float32))
    with ev.record() as prog:
        t = ops.scale(x, 2.0)
        first = t._buffer
        y = ops.add(t, x)  # 3x
        del t  # dies inside the recording: its buffer joins the pool
        z = ops.scale(y, 2.0)  # same size: takes the dead temporary's buffer
        w = ops.add(z, x)  # 7x
    assert z._buffer is first and prog.buffers_reused >= 1
    assert len({id(b) for b in _bufs(x, y, z, w)}) == 4
    for k in range(3):  # replays, with a new input uploaded each time
        x.copy_(np.arange(1024, dtype=np.float32) * (k + 2))
        prog.run()
        np.testing.assert_array_equal(w.numpy(), 7 * np.arange(1024, dtype=np.float32) * (k + 2))
        np.testing.assert_array_equal(y.numpy(), 3 * np.arange(1024, dtype=np.float32) * (k + 2))


def test_the_buffer_freed_longest_ago_serves_first_and_saves_a_barrier(device, monkeypatch):
    """Of two free buffers of one size, a later allocation takes the one freed first: here that one's reader
    is behind a barrier already, so the new writer needs none (the last freed one's reader is not)."""
    monkeypatch.setenv(KILL, "0")
    monkeypatch.setenv("EVERMIND_VK_DISABLE_BARRIER_ELISION", "0")
    x = ev.tensor(np.arange(256, dtype=np.float32))
    with ev.record() as prog:
        a, b = ops.scale(x, 2.0), ops.scale(x, 4.0)
        a_buf, b_buf = a._buffer, b._buffer
        s = ops.add(a, x)  # reads a, after a barrier (a was just written)
        u = ops.add(s, b)  # reads b, after another barrier (s was just written)
        del a, b  # a's buffer is free first; b's reader u is in the current group, a's reader s is not
        before = prog.barrier_plan.barriers
        c = ops.scale(x, 3.0)  # independent of everything: takes a's buffer (freed first)
        assert c._buffer is a_buf and c._buffer is not b_buf
        assert prog.barrier_plan.barriers == before  # a's reader is behind a barrier: none needed
    np.testing.assert_array_equal(c.numpy(), 3 * np.arange(256, dtype=np.float32))
    np.testing.assert_array_equal(u.numpy(), 7 * np.arange(256, dtype=np.float32))


def test_host_visible_and_escaping_buffers_are_never_handed_out_again(device, monkeypatch):
    monkeypatch.setenv(KILL, "0")
    x = ev.tensor(np.ones(256, np.float32))
    with ev.record() as prog:
        up = ev.empty((256,), "f32", host_visible=True)  # an upload/download buffer made in the recording
        device.upload(up)
        ev.add(up, x, out=up)
        device.sync_local(up)
        kept = ops.scale(x, 3.0)  # alive when the recording ends
        up_buf, kept_buf = up._buffer, kept._buffer
        del up
        gc.collect()
        later = [ops.scale(x, 1.0) for _ in range(3)]  # same byte size as both
        assert not {id(b) for b in _bufs(*later)} & {id(up_buf), id(kept_buf)}
        tmp = ops.scale(x, 4.0)
        tmp_buf = tmp._buffer
        del tmp
        dl = ev.empty((256,), "f32", host_visible=True)  # a dead device-only buffer never becomes host-visible
        assert dl._buffer is not tmp_buf and dl.host_visible
    del later
    gc.collect()
    with ev.record():  # a new recording never gets the buffers of an earlier program, dead tensors' or not
        again = [ops.scale(x, 1.0) for _ in range(4)]
        assert not {id(b) for b in _bufs(*again)} & {id(kept_buf), id(tmp_buf)}
    assert prog is not None


def test_eager_state_inside_a_recording_is_pinned_or_refused(device, monkeypatch):
    monkeypatch.setenv(KILL, "0")
    x = ev.tensor(np.ones(64, np.float32))
    with ev.record():
        state = ev.empty((64,), "f32")
        with device.eager():  # set up once, not replayed: its buffer must keep this across replays
            fill_words(state, 0)
        buf = state._buffer
        ops.add(state, x, out=state)
        del state
        nxt = ops.scale(x, 2.0)
        assert nxt._buffer is not buf  # pinned: never back in the pool
        tmp = ops.scale(x, 1.0)
        del tmp
        reused = ev.empty((64,), "f32")  # a reused buffer set up eagerly would be overwritten on replay
        with pytest.raises(ev.EvermindError, match="reused"):
            with device.eager():
                fill_words(reused, 0)


def test_memory_allocated_counts_the_pool_and_the_kill_switch(device, monkeypatch):
    x = ev.tensor(np.ones(256, np.float32))
    for reuse, grow in ((True, 1024), (False, 2 * 1024)):
        monkeypatch.setenv(KILL, "0" if reuse else "1")
        gc.collect()
        before = device.memory_allocated()
        with ev.record() as prog:
            t = ops.scale(x, 2.0)
            del t  # its buffer is still allocated (pool; the program binds it)
            assert device.memory_allocated() == before + 1024
            t = ops.scale(x, 3.0)  # reuse: the same buffer; kill switch: a second one
        del t
        gc.collect()
        assert device.memory_allocated() == before + grow
        assert prog.buffers_reused == (1 if reuse else 0)
        del prog
        gc.collect()
        assert device.memory_allocated() == before


def test_a_smaller_tensor_in_a_bigger_free_buffer(device, monkeypatch):
    """Best fit: a free buffer up to REUSE_MAX_RATIO times too big serves an allocation; kernels take the
    tensor's own size (push constants), so the spare tail is never read, and no more than that ratio is wasted."""
    from evermind_vk.runtime.program import REUSE_MAX_RATIO
    monkeypatch.setenv(KILL, "0")
    big = ev.tensor(np.arange(1000, dtype=np.float32))
    small = ev.tensor(np.arange(600, dtype=np.float32))
    ones = ev.tensor(np.ones(400, np.float32))
    with ev.record() as prog:
        t = ops.scale(big, 2.0)
        ops.add(t, big, out=t)  # 3x: the buffer's tail after 600 elements holds 3 * (600..999)
        tbuf = t._buffer
        del t
        s = ops.scale(small, 5.0)  # 600 elements in the 1000-element buffer
        r = ops.add(s, small)
        tiny = ops.scale(ones, 1.0)  # 2.5x smaller: a buffer of its own
    assert s._buffer is tbuf and s.words == 600 and tiny._buffer is not tbuf and REUSE_MAX_RATIO < 2.5
    for k in range(2):
        prog.run()
        np.testing.assert_array_equal(s.numpy(), 5 * np.arange(600, dtype=np.float32))
        np.testing.assert_array_equal(r.numpy(), 6 * np.arange(600, dtype=np.float32))


STEP = """
import numpy as np, evermind_vk as ev
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import Trainer
m = TransformerLM(LMConfig(d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=32, max_seq_len=8))
tr = Trainer(m)
tr.train(np.arange(3 * 2 * 8 + 1) % 256, seq_len=8, batch_size=2, lr=1e-2)  # one recording, two replays
print("REUSED", sum(s.program.buffers_reused for s in tr._steps.values()))
"""


def test_a_reusing_step_is_hazard_free_under_synchronization_validation():
    """Khronos synchronization validation sees no write-after-read or write-after-write hazard on the buffers
    a recorded training step shares (the barriers the recording keeps, ci/patches/0002 and 0009, order
    them); test_sync.py's positive control shows the layer reports a missing barrier."""
    if not LAYER_JSON.exists():
        pytest.skip("Khronos validation layer not installed (ci/setup.sh installs it)")
    out, msgs = validated(STEP, timeout=600, EVERMIND_VK_DISABLE_RECORD_REUSE="0")
    reused = int(out.split("REUSED ")[1].split()[0])
    assert reused > 0, out[-4000:]
    assert not msgs, "\n".join(msgs[:20])
