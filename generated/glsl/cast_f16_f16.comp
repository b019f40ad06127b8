#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// cast_f16: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { float16_t y[]; };
layout(push_constant) uniform Push {
    uint n;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    const float x0 = x[i];
    const uint b = floatBitsToUint(x0), sgn = b & 0x80000000u, a = b & 0x7fffffffu;
    float r;
    if (a >= 0x7f800000u) r = x0;                                      // inf, nan
    else if (a >= 0x477ff000u) r = uintBitsToFloat(sgn | 0x7f800000u);  // >= 65520 rounds to inf
    else if (a < 0x38800000u) {                                         // below 2^-14: f16 subnormals, step 2^-24
        const float q = roundEven(uintBitsToFloat(a) * 16777216.0) / 16777216.0;
        r = uintBitsToFloat(sgn | floatBitsToUint(q));
    } else {
        const uint t = (a + 0x0fffu + ((a >> 13) & 1u)) & ~0x1fffu;     // drop 13 mantissa bits, ties to even
        r = uintBitsToFloat(sgn | t);
    }
    y[i] = float16_t(r);
}