"""The pure variant selectors."""
import pytest

from evermind_vk import select

TILES = [(32, 32, 16), (64, 64, 16), (128, 128, 8)]


def test_large_gpu_problem_takes_the_largest_tile():
    assert select.matmul_tile(4096, 4096, 4096, TILES, 49152, "discrete_gpu") == (128, 128, 8)


def test_small_problem_takes_a_small_tile():
    assert select.matmul_tile(16, 16, 16, TILES, 49152, "discrete_gpu") == (32, 32, 16)
    assert select.matmul_tile(1, 1, 1, TILES, 49152, "cpu") == (32, 32, 16)


def test_cpu_needs_fewer_groups_than_gpu():
    assert select.matmul_tile(256, 256, 256, TILES, 32768, "cpu") == (128, 128, 8)
    assert select.matmul_tile(256, 256, 256, TILES, 32768, "discrete_gpu") == (32, 32, 16)


def test_padding_waste_is_limited():
    # 130 rows would pad a 128 tile to 256: too wasteful; 64-tiles pad 130 to 192 (still > 25%).
    t = select.matmul_tile(130, 4096, 64, TILES, 49152, "discrete_gpu")
    assert t != (128, 128, 8)


def test_shared_memory_limit_is_respected():
    assert select.matmul_tile(4096, 4096, 4096, TILES, 4 * 16 * (64 + 8), "discrete_gpu") == (32, 32, 16)
    # two shared buffers (the register-block variants) need twice the room
    assert select.matmul_tile(4096, 4096, 4096, TILES, 10000, "discrete_gpu") == (128, 128, 8)
    assert select.matmul_tile(4096, 4096, 4096, TILES, 10000, "discrete_gpu", buffers=2) == (32, 32, 16)
    with pytest.raises(ValueError):
        select.matmul_tile(64, 64, 64, TILES, 100, "cpu")


def test_elementwise_vec():
    assert select.elementwise_vec(10, (1, 4)) == 1
    assert select.elementwise_vec(64 * 256 * 4, (1, 4)) == 4


def test_v4_only_for_big_aligned_products_on_cpu(device):
    import importlib
    mm = importlib.import_module("evermind_vk.ops.matmul")
    if device.info.type != "cpu":
        return
    assert "v4" in mm._pick("f32", 256, 256, 256, device, 1, False, True).flags
    assert "v4" not in mm._pick("f32", 64, 64, 64, device, 1, False, True).flags  # compile cost dominates
    assert "v4" not in mm._pick("f32", 256, 256, 256, device, 1, False, False).flags  # not aligned


def _fake_gpu(features=()):
    from types import SimpleNamespace
    from evermind_vk.device import DeviceInfo
    info = DeviceInfo(0, "fake gpu", "discrete_gpu", 32, 49152, 128, 2 ** 31, {f: True for f in features})
    return SimpleNamespace(info=info, has=lambda f: bool(info.features.get(f)))


def test_register_blocks_on_gpus_for_aligned_layouts():
    import importlib
    mm = importlib.import_module("evermind_vk.ops.matmul")
    gpu = _fake_gpu(["storage_buffer_16bit_access"])
    assert mm._pick("f32", 4096, 4096, 4096, gpu, rb_layout_ok=True).name == "matmul_f32_rb8x8_t128x128"
    assert mm._pick("f16", 4096, 4096, 4096, gpu, rb_layout_ok=True).name == "matmul_f16_rb8x8_t128x128"
    assert mm._pick("f32", 512, 512, 512, gpu, rb_layout_ok=True).name == "matmul_f32_rb4x4_t64x64"  # 64 groups
    assert mm._pick("f32", 4096, 4096, 4096, gpu, rb_layout_ok=False).name == "matmul_f32_t64x64"
    assert mm._pick("f32", 4096, 4096, 4096, gpu, v4_layout_ok=True).name == "matmul_f32_t64x64"  # v4: CPUs only
