#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// conv1d_causal: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) readonly buffer Buf_kernel { float kernel[]; };
layout(std430, binding = 2) readonly buffer Buf_bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Buf_y { float16_t y[]; };
layout(push_constant) uniform Push {
    uint T;
    uint C;
    uint K;
    uint period;
    uint torch_order;
    uint has_bias;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // y[t, c] = bias[c] + sum_j kernel[c, j] x[t - lag(j), c] over taps with lag(j) <= t's position in its sequence.
    if (i >= p.T * p.C) return;
    const uint t = i / p.C, c = i % p.C, s = t % p.period;
    float acc = p.has_bias != 0 ? bias[c] : 0.0;
    for (uint j = 0; j < p.K; ++j) {
        const uint lag = p.torch_order != 0 ? p.K - 1 - j : j;
        if (lag <= s) acc += kernel[c * p.K + j] * float(x[(t - lag) * p.C + c]);
    }
    y[i] = float16_t(acc);
}