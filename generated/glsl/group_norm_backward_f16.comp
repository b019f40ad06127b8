#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// group_norm_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) readonly buffer Buf_w { float w[]; };
layout(std430, binding = 2) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 3) readonly buffer Buf_stats { float stats[]; };
layout(std430, binding = 4) readonly buffer Buf_rsum { float rsum[]; };
layout(std430, binding = 5) writeonly buffer Buf_dx { float16_t dx[]; };
layout(push_constant) uniform Push {
    uint n;
    uint C;
    uint HW;
    uint G;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // dx = rstd (w[c] dy - mean(w dy) - xhat mean(w dy xhat)), the means over the row.
    if (i >= p.n) return;
    const uint nc = i / p.HW, c = nc % p.C, row = (nc / p.C) * p.G + c / (p.C / p.G);
    const float rstd = stats[2 * row + 1], xh = (float(x[i]) - stats[2 * row]) * rstd;
    dx[i] = float16_t(rstd * (w[c] * float(dy[i]) - rsum[2 * row] - xh * rsum[2 * row + 1]));
}