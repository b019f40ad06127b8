"""Device features: enabled at creation when reported, and never used by a variant on a device
without them (kill switches simulate such a device)."""
import os
import subprocess
import sys

import kp
import pytest

import evermind_vk as ev
from evermind_vk.runtime import kernels
from evermind_vk.runtime.device import DeviceInfo

pytestmark = pytest.mark.usefixtures("device")


def test_patched_kp_reports_enabled_features(device):
    caps = device.manager.get_device_capabilities()
    for key in ("storage_buffer_16bit_access", "shader_float16", "vulkan_memory_model", "cooperative_matrix",
                "subgroup_size", "max_compute_shared_memory_size", "cooperative_matrix_shapes"):
        assert key in caps
    listed = device.manager.list_device_capabilities()
    # What is enabled on the device is exactly what the device reports as supported.
    assert {k: v for k, v in caps.items()} == listed[device.index]


def test_device_memory_reported(device):
    """ci/patches/0012: the capability dicts carry the largest device-local heap's bytes, and DeviceInfo
    takes it; a kp without the patch is refused by name."""
    caps = device.manager.get_device_capabilities()
    assert isinstance(caps["device_local_memory"], int) and caps["device_local_memory"] > 0
    assert device.info.device_memory == caps["device_local_memory"]
    old = {k: v for k, v in caps.items() if k != "device_local_memory"}
    with pytest.raises(ev.DeviceError, match="0012"):
        DeviceInfo.from_caps(device.index, old)


def test_multiprocessors_reported(device):
    """ci/patches/0010: the capability dicts carry the device's multiprocessor count (0 where the driver
    does not say, as lavapipe), and DeviceInfo takes it; a kp without the patch is refused by name."""
    caps = device.manager.get_device_capabilities()
    assert isinstance(caps["multiprocessors"], int) and caps["multiprocessors"] >= 0
    assert device.info.multiprocessors == caps["multiprocessors"]
    if device.info.type == "cpu":
        assert caps["multiprocessors"] == 0
    old = {k: v for k, v in caps.items() if k != "multiprocessors"}
    with pytest.raises(ev.DeviceError, match="0010"):
        DeviceInfo.from_caps(device.index, old)


def test_cooperative_matrix2_reported(device):
    """ci/patches/0011: the capability dicts say whether VK_NV_cooperative_matrix2's workgroup scope, flexible
    dimensions and tensor addressing are on, with the flexible shapes (9 numbers each; a workgroup-scope one
    names its workgroup size); none of it without the extension (lavapipe). DeviceInfo keeps the shapes only
    while the feature is on."""
    caps = device.manager.get_device_capabilities()
    assert isinstance(caps["cooperative_matrix2"], bool)
    shapes = caps["cooperative_matrix_flexible_shapes"]
    assert all(len(s) == 9 for s in shapes)
    if caps["cooperative_matrix2"]:
        assert caps["cooperative_matrix"] and shapes
        assert all(s[8] > 0 for s in shapes if s[7] == 2)
        assert device.info.cooperative_matrix_flexible_shapes == tuple(tuple(s) for s in shapes)
    else:
        assert not shapes and not device.info.cooperative_matrix_flexible_shapes


def test_cm2_variants_need_a_device_shape():
    """A cm2 tile runs only where a flexible shape of its types (f16 x f16 -> f32, workgroup scope) divides it
    and allows its workgroup (runtime.variants.device_errors, applied by kernels.usable and dispatch)."""
    from evermind_vk.runtime import variants
    cm2 = [v for v in kernels.variants_of("matmul", "f16") if variants.matmul_kind(v.flags) == "cm2"]
    assert cm2 and all("cooperative_matrix2" in v.features for v in cm2)

    def info(*shapes):
        return DeviceInfo(0, "fake", "discrete_gpu", 32, 49152, 128, 1 << 30, max_per_stage_descriptor_storage_buffers=32,
                          max_descriptor_set_storage_buffers=256, max_per_stage_resources=128,
                          cooperative_matrix_flexible_shapes=shapes)
    # the H200's (driver 580): 32x16x16 on 128 threads, 32x32x16 on 256
    h200 = info((32, 16, 16, 0, 0, 1, 1, 2, 128), (32, 32, 16, 0, 0, 1, 1, 2, 256))
    assert not any(variants.device_errors(v, h200) for v in cm2)
    sizes = {variants.local_size(v.flags) for v in cm2}
    assert sizes == {128, 256}
    for wrong in ((16, 16, 16, 0, 0, 1, 1, 3, 0),                 # subgroup scope
                  (16, 16, 16, 0, 0, 0, 0, 2, 256), (16, 16, 16, 0, 0, 0, 0, 2, 128),  # f16 results
                  (48, 16, 16, 0, 0, 1, 1, 2, 256), (48, 16, 16, 0, 0, 1, 1, 2, 128)):  # granularity
        assert all(variants.device_errors(v, info(wrong)) for v in cm2), wrong
    only128 = info((16, 16, 16, 0, 0, 1, 1, 2, 128))  # a shape names its workgroup size
    assert {variants.local_size(v.flags) for v in cm2 if not variants.device_errors(v, only128)} == {128}
    assert not any(variants.device_errors(v, info()) for v in kernels.variants_of("matmul", "f32"))


def test_f16_variants_declare_their_feature():
    for v in kernels.manifest().values():
        if v.dtype == "f16":
            assert "storage_buffer_16bit_access" in v.features, v.name
        else:
            assert "storage_buffer_16bit_access" not in v.features, v.name


class FakeDevice:
    def __init__(self, **features):
        self.info = DeviceInfo(0, "fake", "cpu", 8, 32768, 128, 1 << 27, features=features,
                               max_per_stage_descriptor_storage_buffers=32, max_descriptor_set_storage_buffers=256,
                               max_per_stage_resources=128)

    def has(self, f):
        return bool(self.info.features.get(f))


def test_selection_never_picks_a_variant_needing_a_missing_feature():
    with pytest.raises(ev.UnsupportedError, match="storage_buffer_16bit_access"):
        kernels.usable("matmul", "f16", FakeDevice(storage_buffer_16bit_access=False))
    assert kernels.usable("matmul", "f16", FakeDevice(storage_buffer_16bit_access=True))
    assert kernels.usable("matmul", "f32", FakeDevice())


def test_kill_switch_turns_f16_off():
    code = ("import numpy as np, evermind_vk as ev\n"
            "d = ev.get_device(); assert not d.info.f16, d.info\n"
            "try:\n    ev.add(ev.tensor(np.ones(4, np.float16)), ev.tensor(np.ones(4, np.float16)))\n"
            "except ev.UnsupportedError as e:\n    print('REFUSED', e)\n"
            "print(ev.add(ev.tensor(np.ones(4, np.float32)), ev.tensor(np.ones(4, np.float32))).numpy())\n")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, EVERMIND_VK_DISABLE_F16="1"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "REFUSED" in out.stdout and "storage_buffer_16bit_access" in out.stdout
    assert "[2. 2. 2. 2.]" in out.stdout


def test_kp_is_the_patched_build():
    assert kp.__version__.endswith("+evermind1"), kp.__version__
