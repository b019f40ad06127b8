"""AdamW (trust region, NaN guard, name-keyed moments, state_dict, replay), clip_grad_norm and LR
schedules against float64 numpy references."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk.train import AdamW, LRSchedule, clip_grad_norm, lr_at
from oracle import U32


def adamw_ref(p, grads, lr, b1, b2, eps, wd, md):
    """float64 reference over a list of gradients (same NaN-guard and clamp semantics)."""
    p = p.astype(np.float64).copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = g.astype(np.float64)
        ok = np.isfinite(g)
        gz = np.where(ok, g, 0)
        m2 = np.where(ok, b1 * m + (1 - b1) * gz, m)
        v2 = np.where(ok, b2 * v + (1 - b2) * gz * gz, v)
        step = lr * (m2 / (1 - b1 ** t)) / (np.sqrt(v2 / (1 - b2 ** t)) + eps)
        if md > 0:
            step = np.clip(step, -md, md)
        p = np.where(ok, p * (1 - lr * wd) - step, p)
        m, v = m2, v2
    return p, m, v


@given(n=st.integers(1, 3000), steps=st.integers(1, 30), md=st.sampled_from([0.0, 1e-3, 0.05]),
       wd=st.sampled_from([0.0, 1e-2, 0.1]), seed=st.integers(0, 2**31))
def test_adamw_matches_reference(device, n, steps, md, wd, seed):
    rng = np.random.default_rng(seed)
    p0 = rng.standard_normal(n).astype(np.float32)
    grads = [(rng.standard_normal(n) * 10.0 ** rng.integers(-3, 2)).astype(np.float32) for _ in range(steps)]
    p = ev.tensor(p0)
    opt = AdamW({"w": p}, lr=1e-2, weight_decay=wd, max_delta=md)
    for g in grads:
        opt.step({"w": ev.tensor(g)})
    wp, wm, wv = adamw_ref(p0, grads, 1e-2, 0.9, 0.999, 1e-8, wd, md)
    # Each step's update is at most lr*sqrt(1-b2^t)/(1-b1^t)-sized; f32 rounding accumulates per step.
    tol = steps * (64 * U32 * (np.abs(wp) + 1e-2 * 10))
    assert np.all(np.abs(p.numpy() - wp) <= tol)
    m, v = opt.state["w"]
    gmax = max(float(np.abs(g).max()) for g in grads)
    assert np.all(np.abs(m.numpy() - wm) <= steps * 8 * U32 * gmax)
    assert np.all(np.abs(v.numpy() - wv) <= steps * 8 * U32 * gmax ** 2)
    assert opt.step_count == steps and opt.nonfinite == 0


def test_trust_region_bound(device):
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal(1000).astype(np.float32)
    p = ev.tensor(p0)
    lr, wd, md = 0.5, 0.1, 1e-3  # a huge lr: the clamp binds everywhere
    opt = AdamW({"w": p}, lr=lr, weight_decay=wd, max_delta=md)
    opt.step({"w": ev.tensor(rng.standard_normal(1000).astype(np.float32))})
    delta = np.abs(p.numpy().astype(np.float64) - p0 * (1 - lr * wd))
    assert delta.max() <= md * (1 + 1e-5) + 4 * U32 * np.abs(p0).max()
    assert delta.max() >= 0.9 * md  # it did bind
    # max_delta = 0 is unclamped: step 1 ~ lr * sign(g)
    q = ev.tensor(np.zeros(4, np.float32))
    AdamW({"q": q}, lr=0.1, weight_decay=0.0).step({"q": ev.tensor(np.array([1, -2, 3e-3, -4e4], np.float32))})
    assert np.allclose(q.numpy(), [-0.1, 0.1, -0.1, 0.1], rtol=1e-4)


def test_nonfinite_gradients_are_skipped_and_counted(device):
    p0 = np.arange(6, dtype=np.float32)
    p = ev.tensor(p0)
    opt = AdamW({"w": p}, lr=0.1)
    opt.step({"w": ev.tensor(np.array([1, np.nan, 1, np.inf, -np.inf, 1], np.float32))})
    assert opt.nonfinite == 3
    got = p.numpy()
    assert np.array_equal(got[[1, 3, 4]], p0[[1, 3, 4]]) and not np.array_equal(got[[0, 2, 5]], p0[[0, 2, 5]])
    m, v = opt.state["w"]
    assert np.isfinite(m.numpy()).all() and np.isfinite(v.numpy()).all()
    assert m.numpy()[1] == 0 and v.numpy()[1] == 0
    for _ in range(3):  # later finite steps work everywhere (moments were not poisoned)
        opt.step({"w": ev.tensor(np.ones(6, np.float32))})
    assert opt.nonfinite == 0 and np.isfinite(p.numpy()).all()
    assert np.all(p.numpy()[[1, 3, 4]] < p0[[1, 3, 4]])


def test_moments_keyed_by_name_survive_subset_changes(device):
    a, b = ev.tensor(np.zeros(3, np.float32)), ev.tensor(np.zeros(5, np.float32))
    opt = AdamW({"a": a, "b": b}, lr=0.1, weight_decay=0.0)
    ga, gb = ev.tensor(np.ones(3, np.float32)), ev.tensor(np.ones(5, np.float32))
    opt.step({"a": ga})
    assert set(opt.state) == {"a"}
    m_a = opt.state["a"][0].numpy().copy()
    opt.step({"b": gb})
    assert set(opt.state) == {"a", "b"} and np.array_equal(opt.state["a"][0].numpy(), m_a)
    opt.step({"a": ga})
    assert np.allclose(opt.state["a"][0].numpy(), 0.9 * m_a + 0.1)
    assert opt.step_count == 3  # one global step counter, never reset (builderforce's step counter)


def test_state_dict_round_trip_is_exact(device):
    rng = np.random.default_rng(3)
    p0 = rng.standard_normal(50).astype(np.float32)
    gs = [rng.standard_normal(50).astype(np.float32) for _ in range(6)]
    p1 = ev.tensor(p0)
    o1 = AdamW({"w": p1}, lr=3e-3, max_delta=0.01)
    for g in gs[:3]:
        o1.step({"w": ev.tensor(g)})
    sd = o1.state_dict()
    p2 = ev.tensor(p1.numpy())
    o2 = AdamW({"w": p2}, lr=1.0)
    o2.load_state_dict(sd)
    assert o2.step_count == 3 and o2.lr == 3e-3
    for g in gs[3:]:
        o1.step({"w": ev.tensor(g)})
        o2.step({"w": ev.tensor(g)})
    assert p1.numpy().tobytes() == p2.numpy().tobytes()
    assert o1.state_dict()["state"]["w"]["exp_avg"].tobytes() == o2.state_dict()["state"]["w"]["exp_avg"].tobytes()


def test_recorded_step_replays_with_new_scalars(device):
    rng = np.random.default_rng(4)
    p0 = rng.standard_normal(300).astype(np.float32)
    g = ev.tensor(rng.standard_normal(300).astype(np.float32))
    pa, pb = ev.tensor(p0), ev.tensor(p0)
    oa, ob = AdamW({"w": pa}, lr=1e-2), AdamW({"w": pb}, lr=1e-2)
    for _ in range(5):
        oa.step({"w": g})
    ob.begin_step()
    with ev.record() as prog:  # the first step runs at the end of the block
        ob.record_updates({"w": g})
    for _ in range(4):
        ob.begin_step()  # new bias corrections, written to host memory; the replay uploads them
        prog.run()
    assert pa.numpy().tobytes() == pb.numpy().tobytes()


def test_optimizer_errors(device):
    with pytest.raises(ev.UnsupportedError, match="f32 master"):
        AdamW({"h": ev.tensor(np.zeros(2, np.float16))})
    opt = AdamW({"w": ev.tensor(np.zeros(2, np.float32))})
    with pytest.raises(ev.ShapeError):
        opt.step({"w": ev.tensor(np.zeros(3, np.float32))})
    with pytest.raises(KeyError):
        opt.step({"nope": ev.tensor(np.zeros(2, np.float32))})


def reduction_bound(arrs):
    """f32 two-stage sum of squares: per element ~ (CHUNK/WG + log2 WG + partials/WG + log2 WG) terms."""
    total = sum(float((a.astype(np.float64) ** 2).sum()) for a in arrs)
    n_part = sum(max(1, -(-a.size // 4096)) for a in arrs)
    return (4096 // 256 + 8 + n_part // 256 + 8 + 4) * 2 * U32 * total


@given(sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=12), max_norm=st.sampled_from([0.0, 0.5, 5.0, 1e6]),
       seed=st.integers(0, 2**31))
def test_clip_grad_norm(device, sizes, max_norm, seed):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    ts = {f"g{i}": ev.tensor(a) for i, a in enumerate(arrs)}
    res = clip_grad_norm(ts, max_norm, track=True)
    norm = math.sqrt(sum(float((a.astype(np.float64) ** 2).sum()) for a in arrs))
    assert abs(res.norm_before ** 2 - norm ** 2) <= reduction_bound(arrs)
    assert res.total_params == sum(sizes)
    scale = min(max_norm / (norm + 1e-6), 1.0) if max_norm > 0 else 1.0
    for a, t in zip(arrs, ts.values()):
        assert np.allclose(t.numpy(), a * np.float32(scale), rtol=4 * U32 * 8, atol=0)
    assert res.clipped == (max_norm > 0 and scale < 1.0)
    assert abs(res.norm_after - norm * scale) <= 1e-5 * norm * scale + 1e-30


@given(sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=6), max_norm=st.sampled_from([0.0, 0.5, 1e6]),
       bad=st.sampled_from([None, np.inf, np.nan]), seed=st.integers(0, 2**31))
def test_clip_deferred_into_adamw_same_bits(device, sizes, max_norm, bad, seed):
    """clip_grad_norm(defer=True) + record_updates(clip=...) (the train loop's fused form) moves the
    weights and moments exactly as clip_grad_norm's in-place scaling then the update; one gradient
    buffer is shared by two parameters (scaled once in place, read twice by the fused update)."""
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    if bad is not None:
        arrs[0][0] = bad
    p0 = [rng.standard_normal(n).astype(np.float32) for n in sizes] + [rng.standard_normal(sizes[0]).astype(np.float32)]
    out = {}
    for defer in (False, True):
        params = {f"p{i}": ev.tensor(p) for i, p in enumerate(p0)}
        opt = AdamW(params, lr=1e-2, weight_decay=0.1)
        for step in range(2):
            gs = [ev.tensor(a * np.float32(step + 1)) for a in arrs]
            grads = {f"p{i}": g for i, g in enumerate(gs)}
            grads[f"p{len(sizes)}"] = gs[0]  # shared with p0
            opt.begin_step()
            res = clip_grad_norm(grads, max_norm, defer=defer)
            opt.record_updates(grads, clip=res if defer else None)
        out[defer] = ([params[n].numpy().tobytes() for n in params], [opt.state[n][1].numpy().tobytes() for n in params],
                      res.norm_before, opt.nonfinite)
        if defer:  # the gradients themselves are left unscaled
            assert all(g.numpy().tobytes() == (a * np.float32(2)).tobytes() for g, a in zip(gs, arrs))
    assert out[True][:2] == out[False][:2] and out[True][3] == out[False][3]
    nb = out[True][2]
    assert nb == out[False][2] or (math.isnan(nb) and math.isnan(out[False][2]))


@given(sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=5), max_norm=st.sampled_from([0.0, 0.5, 1e6]),
       scale=st.sampled_from([1.0, 1024.0, 65536.0]), bad=st.sampled_from([None, np.inf, np.nan]),
       seed=st.integers(0, 2**31))
def test_unscale_fused_into_adamw_same_bits(device, sizes, max_norm, scale, bad, seed):
    """unscale_grads(in_place=False) + record_updates(unscale=...) (the train loop's mixed-precision step)
    moves the weights and moments exactly as the in-place unscale then the update, with and without the
    deferred clip; an overflow (an inf or NaN among the scaled gradients) skips and counts every element of
    every parameter in both; one gradient buffer is shared by two parameters; the scaled gradients are left
    as they were."""
    from evermind_vk.train.optim import unscale_grads
    rng = np.random.default_rng(seed)
    arrs = [(rng.standard_normal(n) * scale).astype(np.float32) for n in sizes]
    if bad is not None:
        arrs[-1][-1] = bad
    p0 = [rng.standard_normal(n).astype(np.float32) for n in sizes] + [rng.standard_normal(sizes[0]).astype(np.float32)]
    sbuf = ev.tensor(np.array([scale, 1.0 / scale], np.float32))
    out = {}
    for fused in (False, True):
        params = {f"p{i}": ev.tensor(p) for i, p in enumerate(p0)}
        opt = AdamW(params, lr=1e-2, weight_decay=0.1, max_delta=0.05)
        for step in range(2):
            gs = [ev.tensor(a * np.float32(step + 1)) for a in arrs]
            grads = {f"p{i}": g for i, g in enumerate(gs)}
            grads[f"p{len(sizes)}"] = gs[0]  # shared with p0
            opt.begin_step()
            state, norm = unscale_grads(grads, sbuf, in_place=not fused)
            res = clip_grad_norm(grads, max_norm, norm=norm, defer=True)
            opt.record_updates(grads, clip=res, unscale=(sbuf, state) if fused else None)
        out[fused] = ([params[n].numpy().tobytes() for n in params],
                      [t.numpy().tobytes() for n in params for t in opt.state[n]], opt.nonfinite, res.norm_before)
        if fused:
            assert all(g.numpy().tobytes() == (a * np.float32(2)).tobytes() for g, a in zip(gs, arrs))
    assert out[True][:3] == out[False][:3]
    if bad is not None:
        assert out[True][2] == sum(sizes) + sizes[0] and out[True][0] == [p.tobytes() for p in p0]
        assert math.isnan(out[True][3]) or math.isinf(out[True][3])
    else:
        assert out[True][2] == 0 and out[True][3] == out[False][3]


def test_clip_large_and_many_small(device):
    rng = np.random.default_rng(5)
    big = rng.standard_normal(1 << 24).astype(np.float32)  # 2^24 elements
    small = [rng.standard_normal(int(n)).astype(np.float32) for n in rng.integers(1, 40, 300)]
    arrs = [big] + small
    res = clip_grad_norm([ev.tensor(a) for a in arrs], 1.0, track=True)
    want = sum(float((a.astype(np.float64) ** 2).sum()) for a in arrs)
    assert abs(res.norm_before ** 2 - want) <= reduction_bound(arrs)
    assert abs(res.norm_after - 1.0) <= 1e-5 and res.clipped


def test_clip_nonfinite_norm_never_spreads(device):
    a = np.array([1.0, np.nan, 2.0], np.float32)
    b = np.array([3.0, 4.0], np.float32)
    ta, tb = ev.tensor(a), ev.tensor(b)
    res = clip_grad_norm([ta, tb], 1.0)
    assert not res.finite and not res.clipped
    assert np.array_equal(tb.numpy(), b)  # untouched, no NaN spread
    assert np.array_equal(ta.numpy()[[0, 2]], a[[0, 2]])


def test_clip_disabled_by_nonpositive_max_norm(device):
    b = np.array([30.0, 40.0], np.float32)
    t = ev.tensor(b)
    for mn in (0.0, -1.0):
        res = clip_grad_norm([t], mn, track=True)
        assert res.norm_before == pytest.approx(50.0) and not res.clipped
    assert np.array_equal(t.numpy(), b)


def test_lr_schedules():
    assert lr_at(5, 0.1) == 0.1
    w = LRSchedule(warmup_steps=4, min_lr=0.03)
    assert [lr_at(s, 0.1, w) for s in (1, 2, 4, 5)] == [0.03, 0.05, 0.1, 0.1]
    sd = LRSchedule("step_decay", warmup_steps=2, step_size=3, gamma=0.5)
    assert [lr_at(s, 1.0, sd) for s in (3, 5, 6, 9)] == [1.0, 1.0, 0.5, 0.25]
    cs = LRSchedule("cosine", warmup_steps=0, total_steps=10)
    assert lr_at(1, 1.0, cs) == 1.0 and lr_at(6, 1.0, cs) == pytest.approx(0.5)
    assert lr_at(11, 1.0, cs) == pytest.approx(0.0, abs=1e-12) and lr_at(50, 1.0, cs) == pytest.approx(0.0, abs=1e-12)
    assert lr_at(3, 0.2, LRSchedule("cosine", enabled=False)) == 0.2
    with pytest.raises(ValueError):
        LRSchedule("linear")



def test_parity_with_torch(device):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    p0 = rng.standard_normal((20, 30)).astype(np.float32)
    gs = [rng.standard_normal((20, 30)).astype(np.float32) * 3 for _ in range(100)]
    tp = torch.nn.Parameter(torch.tensor(p0))
    topt = torch.optim.AdamW([tp], lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
    p = ev.tensor(p0)
    opt = AdamW({"w": p}, lr=1e-2)
    for g in gs:
        tp.grad = torch.tensor(g)
        tn = torch.nn.utils.clip_grad_norm_([tp], 5.0)
        topt.step()
        gt = ev.tensor(g)
        res = clip_grad_norm({"w": gt}, 5.0, track=True)
        assert res.norm_before == pytest.approx(float(tn), rel=1e-5)
        opt.step({"w": gt})
    assert np.allclose(p.numpy(), tp.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_clip_scales_a_shared_gradient_once(device):
    """F.add hands its output gradient to both inputs as one tensor: the norm counts it per parameter,
    the scaling happens once (was: scaled twice, norm after clipping to 1.0 measured 0.118)."""
    from evermind_vk.autodiff import Tape
    from evermind_vk.autodiff import functional as F
    rng = np.random.default_rng(3)
    w1, w2 = ev.tensor(rng.standard_normal(8).astype(np.float32)), ev.tensor(rng.standard_normal(8).astype(np.float32))
    x = ev.tensor(rng.standard_normal(8).astype(np.float32))
    with Tape() as tape:
        y = F.mul(F.add(w1, w2), x)
    # seed dy = 1 on y (reduce_sum is not differentiable): dw1 = dw2 = x, one shared tensor
    grads = Tape.backward(tape, {y: ev.tensor(np.full(8, 3.0, np.float32))}).by_name({"w1": w1, "w2": w2})
    assert grads["w1"] is grads["w2"]
    g = 3.0 * x.numpy().astype(np.float64)
    res = clip_grad_norm(grads, 1.0, track=True)
    assert res.norm_before == pytest.approx(math.sqrt(2 * (g ** 2).sum()), rel=1e-5)
    assert res.norm_after == pytest.approx(1.0, rel=1e-5)
    assert np.allclose(grads["w1"].numpy(), g / math.sqrt(2 * (g ** 2).sum()), rtol=1e-5)
