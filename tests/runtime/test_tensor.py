"""Upload/download round trips (bit-exact: the numpy-2 corruption guard) and tensor errors."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev


@given(n=st.integers(1, 3000), seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from(["f32", "f16", "u32", "i32"]))
def test_round_trip_is_bit_exact(device, n, seed, dtype):
    # Random bit patterns (NaN payloads, infinities, subnormals included) must come back unchanged.
    np_dtype = {"f32": np.float32, "f16": np.float16, "u32": np.uint32, "i32": np.int32}[dtype]
    raw = np.random.default_rng(seed).integers(0, 256, size=n * np.dtype(np_dtype).itemsize, dtype=np.uint8)
    host = raw.view(np_dtype)
    t = ev.tensor(host, device=device)
    assert t.dtype == dtype and t.shape == (n,)
    back = t.numpy()
    assert back.dtype == np_dtype
    assert back.tobytes() == host.tobytes()


def test_round_trip_distinct_values_numpy2_guard(device):
    # kp built against pybind11 < 2.12 under numpy 2 uploads the first element everywhere.
    x = np.arange(1, 1 << 16, dtype=np.float32)
    assert np.array_equal(ev.tensor(x).numpy(), x)


def test_device_only_round_trip_through_copy(device, rng):
    x = rng.standard_normal((5, 7)).astype(np.float16)
    t = ev.tensor(x)
    y = ev.scale(t, 1.0)  # an op output: device-only storage
    assert not y.host_visible and y.shape == (5, 7)
    assert y.numpy().tobytes() == x.tobytes()


def test_copy_into_existing_tensor(device):
    t = ev.tensor(np.zeros(9, np.float32))
    t.copy_(np.arange(9, dtype=np.float32))
    assert np.array_equal(t.numpy(), np.arange(9, dtype=np.float32))
    with pytest.raises(ev.ShapeError):
        t.copy_(np.zeros(8, np.float32))


def test_zeros_and_shapes(device):
    z = ev.zeros((3, 0, 2))
    assert z.numel == 0 and z.numpy().shape == (3, 0, 2)
    z = ev.zeros((4, 5), "f16")
    assert np.array_equal(z.numpy(), np.zeros((4, 5), np.float16))


def test_unsupported_dtype_is_a_clear_error(device):
    with pytest.raises(ev.UnsupportedError, match="float64"):
        ev.tensor(np.zeros(3, np.float64))
    with pytest.raises(ev.UnsupportedError, match="unsupported dtype"):
        ev.empty((2,), "bf16")
    with pytest.raises(ev.UnsupportedError, match="floating"):
        ev.tensor(np.array([1.5]), dtype="u32")
    # An explicit dtype converts (round-to-nearest-even for f16).
    assert ev.tensor(np.array([65520.0]), dtype="f16").numpy()[0] == np.float16(np.inf)


def test_bad_device_index_and_name():
    with pytest.raises(ev.DeviceError, match="no Vulkan device 99"):
        ev.get_device(99)
    with pytest.raises(ev.DeviceError, match="name contains"):
        ev.get_device("no-such-gpu-name")


def test_device_env_selection(monkeypatch):
    name = ev.devices()[0].name
    monkeypatch.setenv("EVERMIND_VK_DEVICE", name[:5])
    assert ev.get_device().index == 0
    monkeypatch.setenv("EVERMIND_VK_DEVICE", "42")
    with pytest.raises(ev.DeviceError):
        ev.get_device()


def test_devices_report_capabilities():
    (d0, *_) = ev.devices()
    assert d0.name and d0.type in ("cpu", "discrete_gpu", "integrated_gpu", "virtual_gpu", "other")
    assert d0.subgroup_size >= 1 and d0.shared_memory >= 16384
    assert isinstance(d0.f16, bool) and isinstance(d0.coopmat, bool)


def test_no_driver_is_a_device_error():
    # With no Vulkan driver at all, stock kp crashed the process; we raise DeviceError.
    import os
    import subprocess
    import sys
    code = ("import evermind_vk as ev\n"
            "try:\n    ev.devices()\nexcept ev.DeviceError as e:\n    print('DeviceError:', e)\n")
    env = dict(os.environ, VK_DRIVER_FILES="/nonexistent/icd.json", VK_ICD_FILENAMES="/nonexistent/icd.json")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert "DeviceError: no usable Vulkan device" in out.stdout
