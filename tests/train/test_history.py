"""A trainer's history in its checkpoint (train/history.py): numeric keys as float64 columns in the tensor
section, so a long run resumes (as JSON, ~13 parsed values a step passed the JSON element bound after some
40,000 steps); every value round-trips exactly, with its type; older checkpoints' list form still loads."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from evermind_vk.errors import FormatError
from evermind_vk.io import jsjson
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import Trainer
from evermind_vk.train import history

TINY = LMConfig(vocab_size=13, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)
VALUE = st.one_of(st.integers(-2 ** 52, 2 ** 52), st.floats(allow_nan=True, allow_infinity=True), st.booleans())


def same(a, b) -> bool:
    """Equal lists of step dicts, NaN equal to NaN, types included."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.keys() != y.keys():
            return False
        for k in x:
            if type(x[k]) is not type(y[k]):
                return False
            if not (x[k] == y[k] or (isinstance(x[k], float) and math.isnan(x[k]) and math.isnan(y[k]))):
                return False
    return True


@given(st.lists(st.dictionaries(st.sampled_from(["epoch", "step", "loss", "grad_norm", "overflow", "eval_ppl"]),
                                VALUE, max_size=6), max_size=30))
def test_pack_unpack_round_trips(steps):
    # a key's values share a type in a real history; mixed ones fall back to the JSON column
    assert same(history.unpack(history.pack(steps)), steps)


def test_kinds_and_missing_keys():
    steps = [{"step": 1, "loss": 2.5, "overflow": False, "note": "a"},
             {"step": 2, "loss": math.inf, "overflow": True, "eval_ppl": 3.0},
             {"step": 3, "loss": math.nan}]
    packed = history.pack(steps)
    assert packed["kinds"] == {"step": "int", "loss": "float", "overflow": "bool", "note": "json", "eval_ppl": "float"}
    assert packed["values"]["loss"].dtype == np.float64 and np.isfinite(packed["values"]["loss"]).all()
    assert sorted(packed["present"]) == ["eval_ppl", "note", "overflow"]
    assert same(history.unpack(packed), steps)


def test_older_list_form_loads():
    assert history.unpack([{"step": 1, "loss": 0.5}]) == [{"step": 1, "loss": 0.5}]


@pytest.mark.parametrize("bad", [
    5, None, [1, 2], {"format": "other"},
    {"format": history.FORMAT, "n": 2, "keys": ["a"], "kinds": {"a": "float"}, "values": {"a": np.zeros(3)}},
    {"format": history.FORMAT, "n": 1, "keys": ["a"], "kinds": {"a": "complex"}, "values": {"a": np.zeros(1)}},
    {"format": history.FORMAT, "n": 1, "keys": ["a"], "kinds": {"a": "float"}, "values": {"a": np.zeros(1)},
     "special": [["a", 5, "inf"]]},
    {"format": history.FORMAT, "n": -1, "keys": [], "kinds": {}, "values": {}},
])
def test_malformed_history_is_a_typed_error(bad):
    with pytest.raises(FormatError):
        history.unpack(bad)


def test_a_long_run_resumes(device, tmp_path):
    """100,000 steps of history (1.3M JSON values, over the JSON element bound) save and resume exactly."""
    n = 100_000
    assert 13 * n > jsjson.MAX_ELEMENTS
    tr = Trainer(TransformerLM(TINY))
    tr.history = [{"epoch": 1 + i // 50_000, "step": i + 1, "loss": 1.0 / (i + 1), "grad_norm": 0.5 + i * 1e-6,
                   "tokens": 64, "effective_lr": 3e-3} for i in range(n)]
    tr.history[7]["grad_norm"] = math.inf  # an overflowed mixed-precision step
    tr.save("long", directory=str(tmp_path))
    back = Trainer(TransformerLM(TINY)).resume("long", directory=str(tmp_path))
    assert same(back.history, tr.history)
