"""API misuse (issue 15): every case raises a typed EvermindError subclass naming the problem, never a
bare ValueError/TypeError/OverflowError/ZeroDivisionError from deep inside (runtime, ops, models)."""
import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import EvermindError
from evermind_vk.models import LMConfig, TransformerLM

TINY = dict(vocab_size=11, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)


def f32(*shape):
    return ev.tensor(np.ones(shape, np.float32))


CASES = {
    # runtime: devices, tensors
    "device index out of range": lambda: ev.get_device(99),
    "device name not found": lambda: ev.get_device("no such gpu"),
    "device selector of a bad type": lambda: ev.get_device(1.5),
    "100 GB tensor": lambda: ev.empty((25 * 10**9,)),
    "100 GB tensor, 2-D": lambda: ev.empty((100_000, 250_000)),
    "shape with a float": lambda: ev.empty((3.5,)),
    "negative shape": lambda: ev.empty((-2, 3)),
    "shape of strings": lambda: ev.empty("abc"),
    "shape None": lambda: ev.empty(None),
    "unknown dtype": lambda: ev.empty((2,), "f64"),
    "float64 data": lambda: ev.tensor(np.zeros(2)),
    "int64 data past i32": lambda: ev.tensor(np.array([0, 2**31], np.int64)),
    "uint64 data past u32": lambda: ev.tensor(np.array([2**32], np.uint64)),
    "bool array data": lambda: ev.tensor(np.zeros(2, np.bool_)),
    "ragged list": lambda: ev.tensor([[1.0], [1.0, 2.0]]),
    "string data": lambda: ev.tensor(["x"]),
    "object data": lambda: ev.tensor([object()]),
    "python int past 64 bits": lambda: ev.tensor([2**70]),
    "u32 of -1": lambda: ev.tensor([-1], "u32"),
    "u32 of 2^40": lambda: ev.tensor([2**40], "u32"),
    "float data to u32": lambda: ev.tensor([1.5], "u32"),
    "reshape to the wrong count": lambda: f32(2, 3).reshape(4, 2),
    "copy_ into a device-only tensor": lambda: ev.empty((2,)).copy_(np.zeros(2, np.float32)),
    "copy_ of the wrong shape": lambda: ev.empty((2,), host_visible=True).copy_(np.zeros(3, np.float32)),
    "read_staging of a device-only tensor": lambda: ev.empty((2,)).read_staging(),
    # ops
    "add of different shapes": lambda: ev.add(f32(2), f32(3)),
    "add of different dtypes": lambda: ev.add(f32(2), ev.tensor(np.ones(2, np.float16))),
    "matmul inner mismatch": lambda: ev.matmul(f32(2, 3), f32(4, 2)),
    "matmul of 1-D": lambda: ev.matmul(f32(3), f32(3)),
    "operator + of shapes": lambda: f32(2) + f32(3),
    "operator @ mismatch": lambda: f32(2, 3) @ f32(2, 3),
    "row_slice out of range": lambda: ops.row_slice(f32(2, 3), 5),
    "index past the end": lambda: f32(2, 3)[2],
    "too many indices": lambda: f32(2, 3)[0, 0, 0],
    "index by a list": lambda: f32(2, 3)[[0, 1]],
    ".T of a 3-D tensor": lambda: f32(2, 3, 4).T,
    "sum of i32": lambda: ev.tensor(np.ones(3, np.int32)).sum(),
    "sum along a missing dim": lambda: f32(2, 3).sum(2),
    "l2_norm of nothing": lambda: ops.l2_norm([], ev.empty((1,))),
    "l2_norm out index": lambda: ops.l2_norm([f32(2)], ev.empty((1,)), 3),
    "rms_norm weight shape": lambda: ops.rms_norm(f32(2, 4), f32(3), 1e-6),
    # models
    "rope_theta 0": lambda: LMConfig(**{**TINY, "rope_theta": 0.0}),
    "rope_theta negative": lambda: LMConfig(**{**TINY, "rope_theta": -1.0}),
    "rope_theta nan": lambda: LMConfig(**{**TINY, "rope_theta": float("nan")}),
    "norm_eps 0": lambda: LMConfig(**{**TINY, "norm_eps": 0.0}),
    "d_model 0": lambda: LMConfig(**{**TINY, "d_model": 0}),
    "d_model a float": lambda: LMConfig(**{**TINY, "d_model": 8.5}),
    "d_model a string": lambda: LMConfig(**{**TINY, "d_model": "8"}),
    "heads do not divide": lambda: LMConfig(**{**TINY, "n_heads": 3}),
    "kv heads do not divide": lambda: LMConfig(**{**TINY, "n_heads": 4, "n_kv_heads": 3}),
    "odd head dim": lambda: LMConfig(**{**TINY, "d_model": 6, "n_heads": 2}),
    "config from a list": lambda: LMConfig.from_dict([1, 2]),
    "config with unknown fields": lambda: LMConfig.from_dict({**TINY, "extra": 1}),
    "config with missing fields": lambda: LMConfig.from_dict({"d_model": 8}),
    "model of a bad config": lambda: TransformerLM(LMConfig(**TINY), device=99),
    # train
    "AdamW lr inf": lambda: __import__("evermind_vk.train", fromlist=["AdamW"]).AdamW({"w": f32(2)}, lr=float("inf")),
    "Trainer epochs 0": lambda: _trainer().train([1, 2, 3, 4], epochs=0, seq_len=2),
    "Trainer batch_size 0": lambda: _trainer().train([1, 2, 3, 4], batch_size=0, seq_len=2),
    "Trainer seq_len 0": lambda: _trainer().train([1, 2, 3, 4], seq_len=0),
    "Trainer seq_len too long": lambda: _trainer().train([1, 2, 3, 4], seq_len=99),
    "Trainer time_limit nan": lambda: _trainer().train([1, 2, 3, 4], seq_len=2, time_limit=float("nan")),
    "Trainer time_limit negative": lambda: _trainer().train([1, 2, 3, 4], seq_len=2, time_limit=-5),
    "Trainer max_grad_norm nan": lambda: _trainer().train([1, 2, 3, 4], seq_len=2, max_grad_norm=float("nan")),
    "Trainer empty text": lambda: _trainer().train("", seq_len=2),
    "Trainer 1-byte text": lambda: _trainer().train("a", seq_len=2),
    "Trainer ids past vocab": lambda: _trainer().train([1, 2, 300], seq_len=2),
    "Trainer ids negative": lambda: _trainer().train([1, -2, 3], seq_len=2),
    "evaluate empty": lambda: _trainer().evaluate("", seq_len=2),
    "generate id -1": lambda: ev_generate([-1]),
    "generate id 2^33": lambda: ev_generate([2**33]),
    "generate id >= vocab": lambda: ev_generate([11]),
    "generate empty prompt": lambda: ev_generate([]),
}


def _trainer():
    from evermind_vk.train import Trainer
    return Trainer(TransformerLM(LMConfig(**TINY)))


def ev_generate(prompt):
    from evermind_vk.train import generate
    return generate(TransformerLM(LMConfig(**TINY)), prompt, max_new_tokens=1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_misuse_raises_a_typed_error(device, name):
    with pytest.raises(EvermindError) as info:
        CASES[name]()
    assert str(info.value), f"{name}: {type(info.value).__name__} with an empty message"
