"""Numbers that cannot poison (issue 15): hyperparameters checked on every path, moments that would
overflow skipped and counted, an L2 norm that cannot overflow for finite gradients, integer tensors
that refuse to wrap, shapes that refuse to truncate, token ids outside the vocabulary refused."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import ConfigError, EvermindError, ShapeError, TokenError, UnsupportedError
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import AdamW, Trainer, clip_grad_norm, generate
from oracle import U32

TINY = LMConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)
BAD = [float("nan"), float("inf"), -float("inf"), -1.0]


@pytest.mark.parametrize("field", ["lr", "eps", "weight_decay", "max_delta"])
@pytest.mark.parametrize("value", BAD + ["0.1", None.__class__, True])
def test_adamw_refuses_bad_scalars(device, field, value):
    if value is None.__class__:
        value = [0.1]
    p = ev.tensor(np.zeros(2, np.float32))
    with pytest.raises(ConfigError, match=field):
        AdamW({"w": p}, **{field: value})
    opt = AdamW({"w": p}, lr=1e-3)
    before = (opt.lr, opt.betas, opt.eps, opt.weight_decay, opt.max_delta)
    with pytest.raises(ConfigError, match=field):
        opt.set_hyper(**{field: value})
    assert (opt.lr, opt.betas, opt.eps, opt.weight_decay, opt.max_delta) == before  # nothing changed


@pytest.mark.parametrize("betas", [(float("nan"), 0.9), (0.9, 1.0), (-0.1, 0.9), (0.9,), (0.9, 0.99, 0.9), 0.9,
                                   (0.9, float("inf"))])
def test_adamw_refuses_bad_betas(device, betas):
    p = ev.tensor(np.zeros(2, np.float32))
    with pytest.raises(ConfigError, match="betas"):
        AdamW({"w": p}, betas=betas)
    with pytest.raises(ConfigError, match="betas"):
        AdamW({"w": p}).set_hyper(betas=betas)


def test_load_state_dict_goes_through_the_checks(device):
    opt = AdamW({"w": ev.tensor(np.zeros(2, np.float32))})
    sd = opt.state_dict()
    sd["hyper"]["lr"] = float("inf")
    with pytest.raises(ConfigError):
        opt.load_state_dict(sd)


@pytest.mark.parametrize("kw", [dict(lr=float("inf")), dict(lr=float("nan")), dict(lr=-1.0),
                                dict(weight_decay=float("nan")), dict(weight_decay=-0.5)])
def test_trainer_refuses_poisoned_hyperparameters(device, kw):
    m = TransformerLM(TINY)
    before = {k: v.numpy().copy() for k, v in m.parameters().items()}
    tr = Trainer(m)
    with pytest.raises(ConfigError):
        tr.train(np.arange(20) % 11, seq_len=4, batch_size=2, **kw)
    for k, v in m.parameters().items():
        assert np.array_equal(v.numpy(), before[k]), k


def test_overflowing_moments_are_skipped_and_counted(device):
    # g^2 overflows f32 for |g| >~ 1.8e19 (and (1 - b2) g^2 for |g| >~ 6e20): such an element must be
    # skipped and counted like a NaN gradient; stock semantics stored v = inf and froze it forever.
    g = np.array([1e21, -1e30, 3e38, 1.0, -2.0], np.float32)
    p0 = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    p = ev.tensor(p0)
    opt = AdamW({"w": p}, lr=1e-2, weight_decay=0.0)
    opt.step({"w": ev.tensor(g)})
    assert opt.nonfinite == 3
    got = p.numpy()
    assert np.array_equal(got[:3], p0[:3])
    assert np.all(np.abs(got[3:] - (p0[3:] - 1e-2 * np.sign(g[3:]))) < 1e-5)
    m, v = opt.state["w"]
    assert np.all(np.isfinite(m.numpy())) and np.all(np.isfinite(v.numpy()))
    assert np.array_equal(v.numpy()[:3], [0, 0, 0])
    # A later ordinary gradient updates those elements again (they are not frozen).
    opt.step({"w": ev.tensor(np.ones(5, np.float32))})
    assert opt.nonfinite == 0
    assert np.all(p.numpy()[:3] < p0[:3])


# Terms one thread adds in a row in l2_norm's passes: a CHUNK of 4096 over the fewest threads a stage-1 workgroup
# has (8: flag sb's one subgroup, the CPU pick; 256 without it), then the final stage's, and the rest.
L2_TERMS = 4096 // 8 + 8 + 8 + 8 + 4


def _norm64(arrs):
    flat = np.concatenate([a.astype(np.float64).ravel() for a in arrs])
    m = np.abs(flat).max()
    return 0.0 if m == 0 else m * math.sqrt(float(((flat / m) ** 2).sum()))


@given(sizes=st.lists(st.integers(1, 9000), min_size=1, max_size=4), exp=st.integers(-30, 37),
       dtype=st.sampled_from(["f32", "f16"]), seed=st.integers(0, 2**31))
def test_l2_norm_matches_oracle_at_any_magnitude(device, sizes, exp, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "f16":
        exp = max(-4, min(exp, 4))  # f16 range
    npdt = np.float16 if dtype == "f16" else np.float32
    arrs = [(rng.standard_normal(n) * 10.0 ** exp).astype(npdt) for n in sizes]
    out = ev.empty((2,), "f32")
    ops.l2_norm([ev.tensor(a) for a in arrs], out, 1)
    got = float(out.numpy()[1])
    want = _norm64(arrs)
    n = sum(sizes)
    if want > np.finfo(np.float32).max:  # the true norm itself is past f32's range: inf is the right answer
        assert got == math.inf, (got, want)
        return
    assert math.isfinite(got)
    assert abs(got - want) <= L2_TERMS * 4 * U32 * want + 1e-30 * n, (got, want)


@given(sizes=st.lists(st.integers(1, 9000), min_size=1, max_size=19),
       dtypes=st.lists(st.sampled_from(["f32", "f16"]), min_size=19, max_size=19), exp=st.integers(-4, 4),
       nonfinite=st.sampled_from([None, np.inf, np.nan]), seed=st.integers(0, 2**31))
def test_l2_norm_many_tensors_per_dispatch(device, monkeypatch, sizes, dtypes, exp, nonfinite, seed):
    """norm_partials_multi (up to 8 tensors of one dtype a dispatch) against the float64 oracle, and bit
    for bit against one dispatch per tensor (EVERMIND_VK_NORM_MULTI=0): the partials are the same."""
    rng = np.random.default_rng(seed)
    arrs = [(rng.standard_normal(n) * 10.0 ** exp).astype(np.float16 if d == "f16" else np.float32)
            for n, d in zip(sizes, dtypes)]
    if nonfinite is not None:
        k = rng.integers(len(arrs))
        arrs[k][rng.integers(sizes[k])] = nonfinite
    got = {}
    for multi in ("1", "0"):
        monkeypatch.setenv("EVERMIND_VK_NORM_MULTI", multi)
        out = ev.empty((2,), "f32")
        ops.l2_norm([ev.tensor(a) for a in arrs], out, 1)
        got[multi] = out.numpy()[1:]
    assert got["1"].tobytes() == got["0"].tobytes()
    g = float(got["1"][0])
    if nonfinite is not None:
        assert (math.isnan(g) if math.isnan(nonfinite) else g == math.inf), (g, nonfinite)
        return
    want = _norm64(arrs)
    assert abs(g - want) <= L2_TERMS * 4 * U32 * want + 1e-30 * sum(sizes), (g, want)


def test_l2_norm_long_vector_past_the_loop_limit(device):
    # One tensor of 300,000 elements (one axis, > 65,535 per-invocation iterations if it were one loop).
    a = np.linspace(-1.0, 1.0, 300_000).astype(np.float32) * 1e20
    out = ev.empty((1,), "f32")
    ops.l2_norm([ev.tensor(a)], out)
    want = _norm64([a])
    assert abs(float(out.numpy()[0]) - want) <= 1e-5 * want


def test_l2_norm_nonfinite_and_zero(device):
    out = ev.empty((1,), "f32")
    ops.l2_norm([ev.tensor(np.zeros(10, np.float32))], out)
    assert float(out.numpy()[0]) == 0.0
    ops.l2_norm([ev.tensor(np.array([1.0, np.inf], np.float32))], out)
    assert float(out.numpy()[0]) == np.inf
    ops.l2_norm([ev.tensor(np.array([1.0, np.inf], np.float32)), ev.tensor(np.array([np.nan], np.float32))], out)
    assert math.isnan(float(out.numpy()[0]))


def test_clipping_happens_when_the_sum_of_squares_would_overflow(device):
    # sum of squares = 100 * 1e40 overflows f32; the norm (1e21) does not, so clipping must happen.
    g = np.full(100, 1e20, np.float32)
    t = ev.tensor(g)
    res = clip_grad_norm({"g": t}, 1.0, track=True)
    assert res.finite and res.clipped
    assert abs(res.norm_before - 1e21) <= 1e-5 * 1e21
    assert abs(res.norm_after - 1.0) <= 1e-5
    assert np.allclose(t.numpy(), 0.1, rtol=1e-5)


@pytest.mark.parametrize("data,dtype", [([-1], "u32"), ([2**40], "u32"), ([2**32], "u32"), ([2**31], "i32"),
                                        ([-2**31 - 1], "i32"), ([2**70], "u32"), ([2**40], None),
                                        (np.array([-1], np.int64), "u32"), (["a"], "f32")])
def test_integer_tensors_refuse_to_wrap(device, data, dtype):
    with pytest.raises(UnsupportedError):
        ev.tensor(data, dtype)
    if dtype is not None:
        t = ev.empty((1,), dtype, host_visible=True)
        with pytest.raises(UnsupportedError):
            t.copy_(data)


def test_integer_tensors_keep_their_range(device):
    assert ev.tensor([0, 2**32 - 1], "u32").numpy().tolist() == [0, 2**32 - 1]
    assert ev.tensor([-2**31, 2**31 - 1], "i32").numpy().tolist() == [-2**31, 2**31 - 1]


@pytest.mark.parametrize("shape", [(3.5,), 3.5, (2, 3.0), ("3",), (True,), (-1,), None])
def test_shapes_refuse_to_truncate(device, shape):
    with pytest.raises(ShapeError):
        ev.empty(shape)


@pytest.mark.parametrize("prompt", [[11], [3, 200], [-1], [2**33], [2**32 + 1], [1.5], []])
def test_generate_refuses_ids_outside_the_vocabulary(device, prompt):
    m = TransformerLM(TINY)
    with pytest.raises(TokenError):
        generate(m, prompt, max_new_tokens=1)


@pytest.mark.parametrize("kw", [dict(temperature=float("nan")), dict(temperature=-1.0), dict(top_k=-3),
                                dict(max_new_tokens=-1)])
def test_generate_refuses_bad_settings(device, kw):
    with pytest.raises(ConfigError):
        generate(TransformerLM(TINY), [1, 2], **{"max_new_tokens": 1, **kw})


def test_errors_are_typed():
    assert issubclass(ConfigError, EvermindError) and issubclass(TokenError, EvermindError)
