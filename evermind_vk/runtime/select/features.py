"""What a row needs of a device: the features its dtype and flags name, and the device shapes a
cooperative_matrix2 tile must divide."""
from __future__ import annotations

# Device features a dtype or a code-changing flag needs (names as in Device.caps).
DTYPE_FEATURES = {"f16": ("storage_buffer_16bit_access",)}
FLAG_FEATURES = {"cm": ("cooperative_matrix", "coopmat_f16_16x16x16_f32", "shader_float16", "subgroup_size_32",
                        "vulkan_memory_model"),
                 "cm2": ("cooperative_matrix2", "shader_float16", "vulkan_memory_model"),
                 "sb": ("subgroup_broadcast_8",), "sa": ("subgroup_arithmetic_8",)}


def features_for(dtype: str, flags=()) -> list[str]:
    """The device features a row of `dtype` with `flags` needs, sorted."""
    out = list(DTYPE_FEATURES.get(dtype, ()))
    for f in flags:
        out += FLAG_FEATURES.get(f, ())
    return sorted(set(out))


# VK_NV_cooperative_matrix2's flexible shapes, as ci/patches/0011 reports them: (M, N, K granularity, A, B, C,
# Result component type, scope, workgroup invocations: the workgroup size a workgroup-scope shape takes). The
# cm2 kernels multiply f16 A and B (FLOAT16 = 0) into f32 C and results (FLOAT32 = 1) at workgroup scope (2).
CM2_TYPES = (0, 0, 1, 1, 2)


def device_errors(v, info) -> list[str]:
    """Why a variant cannot run on a device (a DeviceInfo) beyond the features it names (empty: it can):
    a cm2 tile (flag cm2, lN threads) must be whole multiples of a flexible shape of its types for its
    workgroup size."""
    if "cm2" not in v.flags:
        return []
    spec = dict(v.spec)
    nt = next(int(f[1:]) for f in v.flags if f[:1] == "l" and f[1:].isdigit())
    bm, bn, bk = spec["BM"], spec["BN"], spec["BK"]
    if any(tuple(s[3:8]) == CM2_TYPES and s[8] == nt and bm % s[0] == 0 and bn % s[1] == 0 and bk % s[2] == 0
           for s in info.cooperative_matrix_flexible_shapes):
        return []
    return [f"{v.name}: no f16 x f16 -> f32 workgroup-scope flexible shape of the device for {nt} threads divides "
            f"{bm}x{bn}x{bk}"]
