#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// conv1d_causal_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 1) readonly buffer Buf_kernel { float kernel[]; };
layout(std430, binding = 2) writeonly buffer Buf_dx { float16_t dx[]; };
layout(push_constant) uniform Push {
    uint T;
    uint C;
    uint K;
    uint period;
    uint torch_order;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // dx[t, c] = sum_j kernel[c, j] dy[t + lag(j), c] over taps whose output stays in t's sequence.
    if (i >= p.T * p.C) return;
    const uint t = i / p.C, c = i % p.C, s = t % p.period;
    float acc = 0.0;
    for (uint j = 0; j < p.K; ++j) {
        const uint lag = p.torch_order != 0 ? p.K - 1 - j : j;
        if (s + lag < p.period) acc += kernel[c * p.K + j] * float(dy[(t + lag) * p.C + c]);
    }
    dx[i] = float16_t(acc);
}