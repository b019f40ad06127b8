#version 450
#extension GL_EXT_control_flow_attributes : enable

// group_norm_stats: one workgroup of WG threads per output (a chunk, a row or a channel), fixed order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_part { float part[]; };
layout(std430, binding = 1) writeonly buffer Buf_stats { float stats[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint L;
    uint chunk;
    uint nchunk;
    float eps;
} p;
layout(local_size_x_id = 0) in;
shared float red_wg_sum[WG];
float wg_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_sum[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_sum[t]; float b = red_wg_sum[t + s]; red_wg_sum[t] = a + b; }
        barrier();
    }
    float r = red_wg_sum[0];
    barrier();
    return r;
}

void main() {
    const uint g = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    const uint t = gl_LocalInvocationID.x;
    // Row r from its chunks (Chan et al.): mean = sum s_k / L, M2 = sum q_k + n_k (s_k / n_k - mean)^2.
    if (g >= p.rows) return;
    const uint base = g * p.nchunk;
    float s = 0.0;
    for (uint k = t; k < p.nchunk; k += WG) s += part[2 * (base + k)];
    const float mean = wg_sum(s) / float(p.L);
    float q = 0.0;
    for (uint k = t; k < p.nchunk; k += WG) {
        float nk = float(min(p.chunk, p.L - k * p.chunk)), d = part[2 * (base + k)] / nk - mean;
        q += part[2 * (base + k) + 1] + nk * d * d;
    }
    q = wg_sum(q);
    if (t == 0) { stats[2 * g] = mean; stats[2 * g + 1] = inversesqrt(q / float(p.L) + p.eps); }
}
