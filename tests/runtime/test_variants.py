"""The variant rules (runtime/variants.py): selectors, and every assumption a matmul template makes,
checked at each boundary."""
import pytest

from evermind_vk.errors import UnsupportedError
from evermind_vk.runtime import kernels, variants

TILES = [(32, 32, 16), (64, 64, 16), (128, 128, 8)]


def test_large_gpu_problem_takes_the_largest_tile():
    assert variants.matmul_tile(4096, 4096, 4096, TILES, 49152, "discrete_gpu") == (128, 128, 8)


def test_small_problem_takes_a_small_tile():
    assert variants.matmul_tile(16, 16, 16, TILES, 49152, "discrete_gpu") == (32, 32, 16)
    assert variants.matmul_tile(1, 1, 1, TILES, 49152, "cpu") == (32, 32, 16)


def test_cpu_needs_fewer_groups_than_gpu():
    assert variants.matmul_tile(256, 256, 256, TILES, 32768, "cpu") == (128, 128, 8)
    assert variants.matmul_tile(256, 256, 256, TILES, 32768, "discrete_gpu") == (32, 32, 16)


def test_padding_waste_is_limited():
    # 130 rows would pad a 128 tile to 256: too wasteful; 64-tiles pad 130 to 192 (still > 25%).
    t = variants.matmul_tile(130, 4096, 64, TILES, 49152, "discrete_gpu")
    assert t != (128, 128, 8)


def test_shared_memory_limit_is_respected():
    assert variants.matmul_tile(4096, 4096, 4096, TILES, 4 * 16 * (64 + 8), "discrete_gpu") == (32, 32, 16)
    # two shared buffers (the register-block variants) need twice the room
    assert variants.matmul_tile(4096, 4096, 4096, TILES, 10000, "discrete_gpu") == (128, 128, 8)
    assert variants.matmul_tile(4096, 4096, 4096, TILES, 10000, "discrete_gpu", buffers=2) == (32, 32, 16)
    with pytest.raises(ValueError):
        variants.matmul_tile(64, 64, 64, TILES, 100, "cpu")


def test_elementwise_vec():
    assert variants.elementwise_vec(10, (1, 4)) == 1
    assert variants.elementwise_vec(64 * 256 * 4, (1, 4)) == 4


ALIGNED = variants.Layout((4096, 1), (4096, 1), (4096, 1))  # row-major A, B, C: 16-byte loads possible
UNALIGNED = variants.Layout((4095, 1), (4095, 1), (4095, 1))
PACKED_B = variants.Layout((4096, 1), (1, 4096), (4096, 1))  # transpose_b: B k-contiguous


def pick(dtype, M, N, K, device, lay=ALIGNED, batch=1):
    return variants.pick_matmul(kernels.usable("matmul", dtype, device), M, N, K, lay, device.info.type,
                                device.info.shared_memory, batch)


def test_v4_for_aligned_products_on_cpu(device):
    if device.info.type != "cpu":
        return
    assert "v4" in pick("f32", 256, 256, 256, device).flags
    assert "v4" in pick("f32", 64, 64, 64, device).flags  # built once per device: small products too
    assert "v4" in pick("f32", 32, 64, 512, device, variants.Layout((1, 32), (64, 1), (64, 1))).flags  # dW: A m-contiguous
    # with subgroup broadcasts (flag sb): the largest sb block up to V4_SB_TILE with both cores busy
    sb = device.has("subgroup_broadcast_8")
    assert pick("f32", 512, 64, 64, device).name == f"matmul_f32_v4{'_sb' if sb else ''}_t16x64"
    assert pick("f32", 16, 64, 512, device, variants.Layout((1, 16), (64, 1), (64, 1))).name == \
        f"matmul_f32_v4{'_sb' if sb else ''}_t8x64"
    assert "sb" not in pick("f32", 4, 64, 64, device).flags  # a decode step's few rows: the least padding
    # without them: 8x1 threads (CPU_V4_THREADS) where a row has them, the largest such block with both cores busy
    plain = [v for v in kernels.usable("matmul", "f32", device) if "sb" not in v.flags]
    assert variants.pick_matmul(plain, 512, 64, 64, ALIGNED, "cpu", device.info.shared_memory).name == \
        "matmul_f32_v4_t16x64"
    assert variants.pick_matmul(plain, 16, 64, 512, variants.Layout((1, 16), (64, 1), (64, 1)), "cpu",
                                device.info.shared_memory).name == "matmul_f32_v4_t8x64"
    old = [v for v in plain if not ("v4" in v.flags and (v.spec["WG_X"], v.spec["WG_Y"]) == variants.CPU_V4_THREADS)]
    assert variants.pick_matmul(old, 512, 64, 64, ALIGNED, "cpu", device.info.shared_memory).name == \
        "matmul_f32_v4_t128x64"  # without them: 4x4 threads, 4 groups
    assert "v4" not in pick("f32", 256, 256, 256, device, UNALIGNED).flags  # not aligned
    assert "v4" not in pick("f32", 30, 64, 512, device, variants.Layout((1, 32), (64, 1), (64, 1))).flags  # M % 4
    assert "v4" not in pick("f32", 256, 256, 256, device, variants.Layout((2, 256), (256, 1), (256, 1))).flags  # no unit stride in A


def _fake_gpu(features=()):
    from types import SimpleNamespace
    from evermind_vk.runtime.device import DeviceInfo
    info = DeviceInfo(0, "fake gpu", "discrete_gpu", 32, 49152, 128, 2 ** 31, {f: True for f in features},
                      max_per_stage_descriptor_storage_buffers=2 ** 20, max_descriptor_set_storage_buffers=2 ** 20,
                      max_per_stage_resources=2 ** 20)
    return SimpleNamespace(info=info, has=lambda f: bool(info.features.get(f)))


@pytest.mark.parametrize("M, N, K, batch, tri, want", [
    (256, 256, 64, 128, "lower_c", "rb8x8_al_ukn_t128x128"),      # the LM's scores: 256x128 without the hint
    (4096, 4096, 128, 4, "lower_c", "rb8x8_al_ukn_t128x128"),     # (whole tiles: the aligned twins)
    (256, 64, 256, 128, "lower_a", "rb4x4_al_ukn_t64x64k16"),     # P V, dS K: 256x64 without the hint
    (4096, 128, 4096, 4, "lower_a", "rb4x4_al_ukn_t64x64k16"),
    (256, 64, 256, 64, "upper_a", "rb4x4_al_ukn_t64x64k16"),      # dK, dV
    (256, 60, 256, 64, "upper_a", "rb4x4_t64x64k16"),         # N not whole: the plain row
    (256, 256, 64, 128, "", "rb16x8_al_ukn_t256x128"),            # no hint: matmul_tile's pick
    (200, 200, 64, 128, "lower_c", None),                     # 128x128 would pad 64%: matmul_tile's pick
])
def test_causal_products_take_the_tri_tile_on_gpus(M, N, K, batch, tri, want):
    """variants.TRI_TILES: a causal hint picks the smaller register-block tile measured per product."""
    gpu = _fake_gpu(["storage_buffer_16bit_access"])
    cands = kernels.usable("matmul", "f32", gpu)
    v = variants.pick_matmul(cands, M, N, K, ALIGNED, gpu.info.type, gpu.info.shared_memory, batch, tri=tri)
    plain = variants.pick_matmul(cands, M, N, K, ALIGNED, gpu.info.type, gpu.info.shared_memory, batch)
    if want is None:
        assert v.name == plain.name and variants.TRI_TILES[tri][:2] != (v.spec["BM"], v.spec["BN"])
    else:
        assert v.name == "matmul_f32_" + want


@pytest.mark.parametrize("tri, M, N, batch, want", [
    ("lower_a", 256, 64, 128, 1),     # the 23.7M LM (16 x 8 heads, S 256): 512 workgroups whole, chunks < 256
    ("upper_a", 256, 64, 64, 1),      # its dK, dV (16 x 4 kv heads)
    ("lower_a", 1024, 64, 4, 4),      # one sequence, 4 heads, S 1024: 64 workgroups -> 4 chunks of 256
    ("lower_a", 2048, 64, 4, 4),      # 128 workgroups -> 4 chunks (512 workgroups with the empty ones)
    ("lower_a", 2048, 128, 4, 1),     # 256 workgroups: whole
    ("upper_a", 4096, 128, 2, 1),
    ("upper_a", 4096, 64, 1, 8),      # 64 workgroups, 8 chunks
    ("lower_c", 4096, 4096, 4, 1),    # the scores: K is the head dim
    ("", 4096, 64, 1, 1),             # not causal
])
def test_causal_products_split_along_k_on_gpus(tri, M, N, batch, want):
    """variants.tri_split: a causal *_a product of few workgroups runs in K chunks on GPUs, never on CPUs;
    tri_chunks cuts K into whole 64s covering it exactly."""
    assert variants.tri_split(tri, M, N, M, batch, "discrete_gpu") == want
    assert variants.tri_split(tri, M, N, M, batch, "cpu") == 1
    chunks = variants.tri_chunks(M, want)
    assert len(chunks) == want and chunks[0][0] == 0 and chunks[-1][1] == M
    assert all(a[1] == b[0] and a[0] % 64 == 0 for a, b in zip(chunks, chunks[1:]))


def test_tri_split_can_be_forced_and_refuses_nonsense():
    assert variants.tri_split("lower_a", 256, 64, 256, 128, "cpu", "3") == 3
    assert variants.tri_split("upper_a", 100, 64, 100, 1, "discrete_gpu", "8") == 2  # 100 has two 64s
    assert variants.tri_split("lower_a", 4096, 64, 4096, 1, "discrete_gpu", "0") == 1
    assert variants.tri_split("lower_c", 256, 256, 64, 1, "cpu", "4") == 1
    assert variants.tri_chunks(100, 2) == [(0, 64), (64, 100)] and variants.tri_chunks(130, 3) == [(0, 64), (64, 128), (128, 130)]
    with pytest.raises(UnsupportedError, match="EVERMIND_VK_TRI_SPLIT"):
        variants.tri_split("lower_a", 256, 64, 256, 1, "cpu", "two")


def test_causal_hint_changes_no_cpu_pick(device):
    cands = kernels.usable("matmul", "f32", device)
    for tri in variants.TRI_TILES:
        assert variants.pick_matmul(cands, 256, 256, 64, ALIGNED, "cpu", device.info.shared_memory, 16, tri=tri) == \
            variants.pick_matmul(cands, 256, 256, 64, ALIGNED, "cpu", device.info.shared_memory, 16)


def test_register_blocks_on_gpus_for_aligned_layouts():
    gpu = _fake_gpu(["storage_buffer_16bit_access"])
    assert pick("f32", 4096, 4096, 4096, gpu).name == "matmul_f32_rb16x8_al_ukn_t256x128"  # whole tiles: the al twin
    assert pick("f32", 4096, 4096, 4100, gpu).name == "matmul_f32_rb16x8_t256x128"
    assert pick("f16", 4096, 4096, 4096, gpu).name == "matmul_f16_rb8x8_al_ukn_t128x128"
    assert pick("f32", 512, 512, 512, gpu).name == "matmul_f32_rb4x4_al_ukn_t64x64k16"  # 64 groups
    assert pick("f32", 4096, 4096, 4096, gpu, UNALIGNED).name == "matmul_f32_t64x64"
    assert pick("f32", 4096, 4096, 4096, gpu, PACKED_B).name == "matmul_f32_rb16x8_al_ukk_t256x128"


def test_coopmat_needs_feature_and_alignment():
    cm_feats = ["storage_buffer_16bit_access", *variants.FLAG_FEATURES["cm"]]
    gpu = _fake_gpu(cm_feats)
    assert "cm" in pick("f16", 4096, 4096, 4096, gpu).flags
    assert "cm" not in pick("f16", 4096, 4096, 4100, gpu).flags  # K not a tile multiple
    assert "cm" not in pick("f16", 4096, 4096, 4096, gpu, UNALIGNED).flags
    assert "cm" not in pick("f16", 4096, 4096, 4096, _fake_gpu(["storage_buffer_16bit_access"])).flags


SPEC = {"BM": 128, "BN": 128, "BK": 16, "WG_X": 16, "WG_Y": 16}


@pytest.mark.parametrize("kind,M,N,K,lay,ok", [
    ("cm", 128, 128, 16, ALIGNED, True),
    ("cm", 127, 128, 16, ALIGNED, False),      # M one short of the tile: the kernel has no bounds checks
    ("cm", 128, 129, 16, ALIGNED, False),
    ("cm", 128, 128, 24, ALIGNED, False),
    ("cm", 128, 128, 16, variants.Layout((4096, 1), (4096, 1), (4096, 1), beta=1.0), True),  # beta: C read back
    ("cm", 128, 128, 16, variants.Layout((4096, 1), (4096, 1), (4096, 2)), False),  # C column stride
    ("cm", 128, 128, 16, variants.Layout((4096, 1), (4096, 1), (4096, 1), a_batch=(4, 0)), False),  # offset 4 < 8
    ("cm", 128, 128, 16, variants.Layout((4096, 1), (4096, 1), (4096, 1), a_batch=(8, 0)), True),
    ("cm", 128, 128, 16, variants.Layout((1, 4096), (4096, 1), (4096, 1)), True),  # A m-contiguous: staged as is
    ("cm", 128, 128, 16, variants.Layout((4096, 2), (4096, 1), (4096, 1)), False),  # A with no unit stride
    ("cm", 128, 128, 16, variants.Layout((4096, 1), (4096, 1), (4096, 1), outer=(2, 8, 4, 8)), False),  # sbo 4 < 8
    ("cm", 128, 128, 16, variants.Layout((4096, 1), (4096, 1), (4096, 1), outer=(2, 8, 16, 8)), True),
    ("v4", 256, 256, 256, ALIGNED, True),
    ("v4", 256, 255, 256, ALIGNED, False),     # N not whole vectors
    ("v4", 256, 256, 254, ALIGNED, False),
    ("v4", 256, 256, 256, variants.Layout((1, 256), (256, 1), (256, 1)), True),   # A m-contiguous, M % 4 == 0
    ("v4", 254, 256, 256, variants.Layout((1, 256), (256, 1), (256, 1)), False),  # ... M not a multiple of 4
    ("v4-1row", 256, 256, 256, variants.Layout((1, 256), (256, 1), (256, 1)), False),  # ... one row a thread
    ("v4-1row", 1, 256, 256, ALIGNED, True),  # A k-contiguous: any rows a thread
    ("v4", 256, 256, 256, variants.Layout((1, 254), (256, 1), (256, 1)), False),  # ... k stride not a multiple of 4
    ("rb", 5, 7, 3, ALIGNED, True),            # any M, N, K: edges load zeros
    ("rb", 5, 7, 3, variants.Layout((4094, 1), (4096, 1), (4096, 1)), False),  # row stride not a multiple of 4
    ("rb", 5, 7, 3, variants.Layout((4096, 1), (4096, 1), (4096, 1), b_batch=(2, 0, 1)), False),
    ("rb", 5, 7, 3, variants.Layout((4096, 2), (4096, 1), (4096, 1)), False),  # no unit stride in A
    ("rb", 5, 7, 3, variants.Layout((4096, 1), (4096, 1), (4096, 1), outer=(2, 6, 0, 0)), False),  # outer A stride 6
    ("rb", 5, 7, 3, variants.Layout((4096, 1), (4096, 1), (4096, 1), outer=(2, 8, 4, 3)), True),  # C: any
    ("tiled", 5, 7, 3, variants.Layout((3, 7), (5, 2), (9, 3), beta=0.5), True),  # anything goes
])
def test_launch_rules_at_each_boundary(kind, M, N, K, lay, ok):
    spec = dict(SPEC, BM=8, WG_Y=8) if kind == "v4-1row" else SPEC
    assert (not variants.matmul_launch_errors(kind.split("-")[0], spec, M, N, K, lay)) == ok


def test_row_rules_reject_tiles_that_do_not_divide():
    assert not variants.matmul_row_errors(128, 128, 8, 16, 16, ["rb8x8"])
    assert variants.matmul_row_errors(128, 128, 8, 16, 8, ["rb8x8"])      # block x threads != tile
    assert variants.matmul_row_errors(96, 96, 8, 16, 16, ["rb6x6"])       # block not a multiple of 4
    assert not variants.matmul_row_errors(128, 128, 16, 128, 1, ["cm", "rb4x4"])
    assert variants.matmul_row_errors(128, 128, 16, 64, 1, ["cm", "rb4x4"])  # not 4 subgroups of 32
    assert variants.matmul_row_errors(128, 128, 8, 128, 1, ["cm", "rb4x4"])  # BK not a multiple of 16
    assert variants.matmul_row_errors(128, 128, 16, 128, 1, ["cm"])          # no fragment block
    assert variants.matmul_row_errors(64, 64, 8, 4, 4, ["v4"])               # v4 reads k by 4
    assert variants.matmul_row_errors(6, 64, 4, 4, 4, ["v4"])                # 1.5 rows per thread
    assert not variants.matmul_row_errors(1, 64, 4, 8, 1, ["v4"])            # one row a thread (decode steps)
    assert not variants.matmul_row_errors(64, 64, 16, 16, 16, [])
    assert variants.matmul_row_errors(64, 60, 16, 16, 16, [])


def test_every_table_row_obeys_the_rules():
    """The generated manifest's matmul variants are exactly the rows the rules admit."""
    for v in kernels.manifest().values():
        if v.op == "matmul":
            s = v.spec
            assert not variants.matmul_row_errors(s["BM"], s["BN"], s["BK"], s["WG_X"], s["WG_Y"], v.flags), v.name
            assert tuple(v.features) == tuple(variants.features_for(v.dtype, v.flags)), v.name


def test_split_k_only_for_few_tiles_and_long_k_on_gpus():
    sk = variants.matmul_split_k
    assert sk(512, 512, 4096, 16, "discrete_gpu", "f32", 1, 0.0, True) == 16   # 16 tiles -> 256 groups
    assert sk(512, 2816, 4096, 88, "discrete_gpu", "f32", 1, 0.0, True) == 4   # 88 -> 352
    assert sk(4096, 4096, 4096, 1024, "discrete_gpu", "f32", 1, 0.0, True) == 1  # enough tiles
    assert sk(512, 512, 512, 16, "discrete_gpu", "f32", 1, 0.0, True) == 2     # chunks keep >= 256 of k
    assert sk(512, 512, 4096, 16, "cpu", "f32", 1, 0.0, True) == 1
    assert sk(512, 512, 4096, 16, "discrete_gpu", "f16", 1, 0.0, True) == 16   # f16: f32 partials (c32)
    assert sk(512, 512, 4096, 16, "discrete_gpu", "u32", 1, 0.0, True) == 1
    assert sk(512, 512, 4096, 16, "discrete_gpu", "f32", 2, 0.0, True) == 1    # batched
    assert sk(512, 512, 4096, 16, "discrete_gpu", "f32", 1, 1.0, True) == 1    # accumulates into C
    assert sk(512, 512, 4096, 16, "discrete_gpu", "f32", 1, 0.0, False) == 1   # C not dense
    assert sk(512, 512, 4096, 16, "discrete_gpu", "f32", 1, 0.0, True, "0") == 1
    assert sk(12, 20, 128, 1, "cpu", "f32", 1, 0.0, True, "4") == 4
    assert sk(12, 20, 120, 1, "cpu", "f32", 1, 0.0, True, "4") == 4            # 32, 32, 32 and 24
    assert sk(12, 20, 40, 1, "cpu", "f32", 1, 0.0, True, "3") == 3             # 16, 16, 8
    assert sk(12, 20, 40, 1, "cpu", "f32", 1, 0.0, True, "4") == 1             # 16, 16, 8: not 4


def test_split_k_in_whole_waves_where_the_device_counts_its_multiprocessors():
    """variants.wave_split: f32 products on one-workgroup-a-multiprocessor tiles choose the chunk count by
    waves x chunk length (the 23.7M LM's dW on an H200's 132 multiprocessors); the rest keep split_ways."""
    assert variants.k_chunks(4096, 3) == [(0, 1376), (1376, 2752), (2752, 4096)]
    assert variants.k_chunks(4096, 16) == [(k, k + 256) for k in range(0, 4096, 256)]
    assert variants.k_chunks(40, 3) == [(0, 16), (16, 32), (32, 40)]
    assert variants.k_chunks(33, 3) == [(0, 16), (16, 32), (32, 33)]
    assert len(variants.k_chunks(32, 3)) == 2  # three chunks of 16s overshoot
    ws = variants.wave_split
    assert ws(44, 4096, 132) == 3   # 2816x512 on 256x128: one wave of 1,376 (split_ways: 8, three of 512)
    assert ws(22, 4096, 132) == 6   # 512x1408: one wave of 688 (split_ways: 16, three of 256)
    assert ws(8, 4096, 132) == 16   # 512x512: 128 workgroups
    assert ws(64, 1408, 132) == 2   # 4096x512x1408: one wave of 704 ties two of 352: fewer chunks
    assert ws(64, 512, 132) == 2 and ws(64, 496, 132) == 2 and ws(64, 480, 132) == 1  # chunks keep >= 256 of k
    sk = variants.matmul_split_k
    big = dict(multiprocessors=132, tile=(256, 128, 16))
    assert sk(2816, 512, 4096, 44, "discrete_gpu", "f32", 1, 0.0, True, **big) == 3
    assert sk(2816, 512, 4096, 44, "discrete_gpu", "f32", 1, 0.0, True) == 8  # count unknown: split_ways
    assert sk(2816, 512, 4096, 44, "discrete_gpu", "f32", 1, 0.0, True, multiprocessors=132,
              tile=(128, 128, 16)) == 8  # smaller tiles share a multiprocessor: split_ways
    assert sk(2816, 512, 4096, 44, "discrete_gpu", "f16", 1, 0.0, True, **big) == 8  # f16: split_ways
    assert sk(2816, 512, 4096, 132, "discrete_gpu", "f32", 1, 0.0, True, **big) == 1  # fills the device
    assert sk(2816, 512, 4096, 44, "cpu", "f32", 1, 0.0, True, **big) == 1
    assert sk(2816, 512, 4096, 44, "discrete_gpu", "f32", 1, 0.0, True, "4", **big) == 4  # forced wins


def test_split_k_takes_the_largest_tile_that_split_fills_the_device():
    gpu = _fake_gpu(["storage_buffer_16bit_access"])
    cands = kernels.usable("matmul", "f32", gpu)

    def pick_split(M, N, K, lay):
        return variants.pick_matmul(cands, M, N, K, lay, gpu.info.type, gpu.info.shared_memory, split=True)
    dw = variants.Layout((1, 512), (512, 1), (512, 1))  # dW = X^T . dY: A m-contiguous
    assert pick_split(512, 512, 4096, dw).spec["BM"] == 256  # 8 tiles, split 16 ways
    assert pick("f32", 512, 512, 4096, gpu, dw).spec["BM"] == 64  # no split: the smallest tile
    assert pick_split(4096, 4096, 4096, ALIGNED).name == "matmul_f32_rb16x8_al_ukn_t256x128"  # enough tiles whole
    assert pick_split(4096, 512, 256, ALIGNED).name == "matmul_f32_rb8x8_al_ukn_t128x128k16"  # K too short to split


def test_whole_wave_split_into_two_chunks_gives_way_to_the_next_tile_whole():
    """variants.wave_split_pays: where the device reports its multiprocessors, an f32 tile of BIG_TILE_AREA that
    wave_split would cut into fewer than WAVE_SPLIT_MIN chunks is passed over by the split rule; the LM's
    fwd 4096x512x1408 and dX 4096x512x2816 then run 128x128 whole (128 workgroups), while dW 2816x512x4096
    (3 chunks) and 512x1408x4096 (6) still split 256x128."""
    gpu = _fake_gpu(["storage_buffer_16bit_access"])
    cands = kernels.usable("matmul", "f32", gpu)
    ukk = variants.Layout((1408, 1), (1, 1408), (512, 1))    # Y = X . W^T, W stored [N, K]
    ukn = variants.Layout((2816, 1), (512, 1), (512, 1))     # dX = dY . W
    dw = variants.Layout((1, 2816), (512, 1), (512, 1))      # dW = dY^T . X: A m-contiguous

    def pick_split(M, N, K, lay, sms):
        return variants.pick_matmul(cands, M, N, K, lay, gpu.info.type, gpu.info.shared_memory, split=True,
                                    multiprocessors=sms).name
    assert variants.wave_split(64, 1408, 132) == variants.wave_split(64, 2816, 132) == 2
    assert pick_split(4096, 512, 1408, ukk, 132) == "matmul_f32_rb8x8_al_ukk_t128x128k16"
    assert pick_split(4096, 512, 2816, ukn, 132) == "matmul_f32_rb8x8_al_ukn_t128x128k16"
    # multiprocessors unknown: no whole-wave split to judge, the big tile as before
    assert pick_split(4096, 512, 1408, ukk, 0) == "matmul_f32_rb16x8_al_ukk_t256x128"
    assert variants.wave_split(44, 4096, 132) == 3 and variants.wave_split(22, 4096, 132) == 6
    assert pick_split(2816, 512, 4096, dw, 132) == "matmul_f32_rb16x8_al_umn_t256x128"
    assert pick_split(512, 1408, 4096, variants.Layout((1, 512), (1408, 1), (1408, 1)), 132) == \
        "matmul_f32_rb16x8_al_umn_t256x128"
    # f16 register blocks split with split_ways, never in whole waves: the rule leaves them alone
    f16 = kernels.usable("matmul", "f16", gpu)
    assert variants.pick_matmul(f16, 4096, 512, 1408, ukk, gpu.info.type, gpu.info.shared_memory, split=True,
                                multiprocessors=132).name == \
        variants.pick_matmul(f16, 4096, 512, 1408, ukk, gpu.info.type, gpu.info.shared_memory, split=True).name


def test_f16_split_k_takes_the_first_cm_tile_that_split_fills_the_device():
    """The same split rule (variants.split_tile) on cooperative matrices, walking CM_ORDER: the weight
    gradients of the 23.7M LM leave whole 64x64 tiles 32-352 workgroups; split, they run 128x128."""
    gpu = _fake_gpu(["storage_buffer_16bit_access", *variants.FLAG_FEATURES["cm"]])
    cands = kernels.usable("matmul", "f16", gpu)

    def pick_split(M, N, K, lay):
        return variants.pick_matmul(cands, M, N, K, lay, gpu.info.type, gpu.info.shared_memory, split=True)
    dw = variants.Layout((1, 512), (1408, 1), (1408, 1))
    v = pick_split(512, 1408, 4096, dw)
    assert v.name == "matmul_f16_cm_rb4x2_w2x4_t128x128"  # 44 tiles, split 8 ways
    assert variants.matmul_split_k(512, 1408, 4096, 44, "discrete_gpu", "f16", 1, 0.0, True) == 8
    assert pick("f16", 512, 1408, 4096, gpu, dw).name == "matmul_f16_cm_rb2x2_t64x64k32"  # no split: 176 tiles
    assert pick_split(4096, 1408, 512, ALIGNED).name == "matmul_f16_cm_rb2x2_w4x4_t128x128k32"  # 352 whole: CM_FEW
    assert pick_split(4096, 256, 512, ALIGNED).name == "matmul_f16_cm_rb2x2_t64x64k32"  # K too short to split
    # the partials' launch (batch S, C in f32): a c32 row of the same 128x128 tile (352 workgroups: CM_FEW's)
    assert variants.pick_matmul(cands, 512, 1408, 512, dw, "discrete_gpu", 49152, 8,
                                out32=True).name == "matmul_f16_cm_rb2x2_w4x4_c32_t128x128k32"


@pytest.mark.parametrize("M, N, K, batch, want", [
    (4096, 512, 512, 1, "cm_rb2x2_w4x4_t128x128k32"),     # 128 workgroups
    (4096, 1408, 512, 1, "cm_rb2x2_w4x4_t128x128k32"),    # 352
    (256, 256, 64, 64, "cm_rb2x2_w4x4_t128x128k32"),      # 256, batched
    (256, 256, 64, 128, "cm_rb4x2_w2x4_t128x128"),        # 512: CM_ORDER's first
    (4096, 2816, 512, 1, "cm_rb4x2_w2x4_t128x128"),       # 704
    (4096, 4096, 4096, 1, "cm_rb4x2_w2x4_t128x128"),      # 1024
])
def test_cm_few_workgroups_take_the_deeper_k_row(M, N, K, batch, want):
    """variants.CM_FEW: below 512 workgroups of 128x128, 16 subgroups on BK 32 come before CM_ORDER's first."""
    gpu = _fake_gpu(["storage_buffer_16bit_access", *variants.FLAG_FEATURES["cm"]])
    cands = kernels.usable("matmul", "f16", gpu)
    v = variants.pick_matmul(cands, M, N, K, ALIGNED, gpu.info.type, gpu.info.shared_memory, batch)
    assert v.name == "matmul_f16_" + want


def test_tile_preference_orders_area_then_squareness():
    tiles = [(128, 128, 8), (256, 64, 16), (256, 64, 8), (256, 128, 8), (128, 256, 8), (128, 64, 16), (128, 128, 16)]
    order = sorted(tiles, key=variants.tile_preference, reverse=True)
    assert order == [(256, 128, 8), (128, 256, 8), (128, 128, 8), (128, 128, 16), (256, 64, 8), (256, 64, 16),
                     (128, 64, 16)]
    gpu = sorted(tiles, key=lambda t: variants.tile_preference(t, True), reverse=True)  # measured on the H200
    assert gpu == [(256, 128, 8), (128, 256, 8), (128, 128, 16), (128, 128, 8), (256, 64, 8), (256, 64, 16),
                   (128, 64, 16)]


@pytest.mark.parametrize("M, N, K, tile", [
    (4096, 2816, 512, (256, 128, 8)),   # 352 workgroups: the big tile fills the device twice
    (4096, 1408, 512, (128, 128, 16)),  # 176 of 256x128 are too few for it; 352 of 128x128
    (4096, 512, 512, (128, 128, 16)),   # 128 either way: 128x128 with BK 16 before 256x64 and BK 8
    (4096, 256, 512, (128, 64, 16)),    # 64 of the 16,384-output tiles: the next size
    (512, 8192, 256, (256, 128, 8)),    # 128: one whole wave of the big tile
])
def test_gpu_tiles_for_the_lm_products(M, N, K, tile):
    rb = [(128, 128, 8), (128, 64, 16), (64, 64, 16), (256, 128, 8), (128, 256, 8), (256, 64, 16), (256, 64, 8),
          (128, 128, 16)]
    assert variants.matmul_tile(M, N, K, rb, 49152, "discrete_gpu", buffers=2) == tile


def test_rb_and_cm_rows_must_fit_48k_of_shared_memory():
    assert variants.matmul_row_errors(256, 128, 16, 16, 16, ["rb16x8"])  # 50,176 bytes
    assert not variants.matmul_row_errors(256, 128, 8, 16, 16, ["rb16x8"])
    assert not variants.matmul_row_errors(128, 256, 16, 256, 1, ["cm", "rb4x4", "w2x4"])
    assert variants.matmul_row_errors(128, 256, 32, 256, 1, ["cm", "rb4x4", "w2x4"])  # 61 KiB


def test_softmax_rows_rule(device):
    """softmax / softmax_backward: on CPU devices the most rows a workgroup, on GPUs the fewest threads a row with
    at most SOFTMAX_ROW_ELEMS elements each (one row a workgroup beyond); a forced count must exist."""
    for op in ("softmax", "softmax_backward"):
        cands = kernels.usable(op, "f32", device)
        assert sorted(v.spec["ROWS"] for v in cands) == [1, 4, 16] and {v.spec["WG"] for v in cands} == {128}
        rows = lambda cols, typ="discrete_gpu": variants.pick_softmax(cands, cols, typ).spec["ROWS"]
        assert (rows(1), rows(64), rows(65), rows(256), rows(257), rows(4096)) == (16, 16, 4, 4, 1, 1)
        assert (rows(1, "cpu"), rows(256, "cpu"), rows(4096, "cpu")) == (16, 16, 16)
        assert variants.pick_softmax(cands, 64, "cpu", forced=4).spec["ROWS"] == 4
        with pytest.raises(UnsupportedError):
            variants.pick_softmax(cands, 64, "cpu", forced=8)


def test_row_workgroup_rule(device):
    """rms_norm / cross_entropy rows: on CPU devices the flag sb variant (one subgroup of 8) where the device runs
    it, else the smallest workgroup with at most CPU_ROW_ELEMS elements a thread; on GPUs the largest (never sb);
    a forced size must exist and is taken among the variants without sb."""
    sb = 1 if device.has("subgroup_broadcast_8") else 0
    for op in ("rms_norm_backward", "cross_entropy", "cross_entropy_backward"):
        plain = [v for v in kernels.usable(op, "f32", device) if "res" not in v.flags and "sb" not in v.flags]
        assert sorted(v.spec["WG"] for v in plain) == [8, 32, 128]
        assert sum("sb" in v.flags and "res" not in v.flags for v in kernels.usable(op, "f32", device)) == sb
    assert sorted(v.spec["WG"] for v in kernels.usable("rms_norm_backward", "f32", device)
                  if "res" in v.flags and "sb" not in v.flags) == [8, 32, 128]
    all_cands = kernels.usable("rms_norm", "f32", device)
    cands = [v for v in all_cands if "sb" not in v.flags]
    wg = lambda cols, typ="cpu": variants.pick_row_wg(cands, cols, typ).spec["WG"]
    assert sorted(v.spec["WG"] for v in cands) == [8, 32, 128]
    assert (wg(1), wg(64), wg(65), wg(256), wg(257), wg(1024), wg(4096)) == (8, 8, 32, 32, 128, 128, 128)
    assert wg(64, "discrete_gpu") == 128
    assert variants.pick_row_wg(cands, 64, "cpu", forced=32).spec["WG"] == 32
    with pytest.raises(UnsupportedError):
        variants.pick_row_wg(cands, 64, "cpu", forced=16)
    if sb:
        for cols in (1, 64, 257, 4096):
            assert variants.pick_row_wg(all_cands, cols, "cpu").flags == ("sb",)
            assert variants.pick_row_wg(all_cands, cols, "discrete_gpu").spec["WG"] == 128
        forced = variants.pick_row_wg(all_cands, 64, "cpu", forced=8)
        assert forced.spec["WG"] == 8 and "sb" not in forced.flags


def test_norm_block_and_rank_lane_rules():
    """rms_norm_backward's rows a workgroup: on CPU devices NORM_BLOCK_ROWS while a thread's columns fit its
    registers and the block's loop MAX_LOOP, else 1, and 1 on GPUs; embedding_rank's threads a token: one on CPU devices, RANK_LANES on GPUs
    down to RANK_THREADS threads in all; forced counts are taken (lanes: powers of two up to 256 only)."""
    B = variants.NORM_BLOCK_ROWS
    assert variants.norm_block_rows(4096, 512, 128) == B
    assert variants.norm_block_rows(5, 512, 128) == 5 and variants.norm_block_rows(0, 8, 8) == 1
    assert variants.norm_block_rows(4096, 8 * 128 + 1, 128) == 1  # past the registers' columns
    per_row = variants.norm_backward_row_loops(1024, 8)
    assert variants.norm_block_rows(4096, 64, 8) == B and variants.norm_block_rows(4096, 1024, 8) == 1
    assert per_row * B > variants.MAX_LOOP or variants.norm_block_rows(4096, 1024, 128) == B
    assert variants.norm_block_rows(4096, 512, 128, "discrete_gpu") == 1
    assert variants.norm_block_rows(4096, 512, 128, "discrete_gpu", forced=3) == 3
    assert variants.embedding_rank_lanes(4096, "cpu") == 1
    assert variants.embedding_rank_lanes(4096, "discrete_gpu") == variants.RANK_LANES
    assert variants.embedding_rank_lanes(variants.RANK_THREADS, "discrete_gpu") == 1
    assert variants.embedding_rank_lanes(variants.RANK_THREADS // 4, "integrated_gpu") == 4
    assert variants.embedding_rank_lanes(10, "cpu", forced=8) == 8
    for bad in (3, 512):
        with pytest.raises(UnsupportedError):
            variants.embedding_rank_lanes(10, "cpu", forced=bad)
