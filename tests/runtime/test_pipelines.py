"""Pipelines are built once per kernel variant and device (ci/patches/0008): later calls with new
tensors allocate a descriptor set only, and every tensor set still gets its own bindings."""
import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.runtime.device import kp_module


def test_fresh_outputs_build_no_pipeline(device, rng):
    a = rng.standard_normal((33, 20)).astype(np.float32)
    b = rng.standard_normal((20, 17)).astype(np.float32)
    ta, tb = ev.tensor(a), ev.tensor(b)
    ev.matmul(ta, tb).numpy()  # first use of these variants: builds their pipelines
    built = device.pipelines_built
    for _ in range(4):
        y = ev.matmul(ta, tb)  # a fresh output tensor each call
        np.testing.assert_allclose(y.numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert device.pipelines_built == built


def test_without_sharing_each_tensor_set_builds_one(device, rng):
    # The control: with sharing off (EVERMIND_VK_DISABLE_SHARED_PIPELINES) every new tensor set builds.
    a = ev.tensor(rng.standard_normal((8, 8)).astype(np.float32))
    ev.scale(a, 2.0).numpy()
    device.share_pipelines = False
    try:
        built = device.pipelines_built
        ev.scale(a, 2.0).numpy()
        assert device.pipelines_built > built
    finally:
        device.share_pipelines = True


def test_shared_pipeline_keeps_bindings_apart(device, rng):
    xs = [rng.standard_normal(1000).astype(np.float32) for _ in range(3)]
    ts = [ev.tensor(x) for x in xs]
    with ev.record() as prog:  # three tensor sets of one variant in one sequence
        ys = [ev.add(t, t) for t in ts]
    for x, y in zip(xs, ys):
        assert np.array_equal(y.numpy(), x + x)
    prog.run()
    for x, y in zip(xs, ys):
        assert np.array_equal(y.numpy(), x + x)


def test_algorithm_sharing_checks_its_source(device):
    kp = kp_module()
    mgr = device.manager
    t = mgr.tensor_t(np.zeros(4, np.uint32), kp.TensorTypes.storage)
    with pytest.raises(RuntimeError, match="not built"):
        mgr.algorithm_sharing(mgr.algorithm([], b""), [t], [1, 1, 1])
    v = ev.runtime.kernels.elementwise_variant("copy_words", "u32", 4, device)
    src = device._pipeline(v, 2, ev.runtime.kernels.spirv(v.spirv))
    with pytest.raises(RuntimeError, match="3 tensors for a pipeline of 2 bindings"):
        mgr.algorithm_sharing(src, [t, t, t], [1, 1, 1])
