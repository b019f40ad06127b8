#version 450
#extension GL_EXT_control_flow_attributes : enable

// Row-wise layer_norm_backward: one workgroup of WG threads per row of `cols` elements; f32 arithmetic and
// reductions in a fixed order (deterministic).
layout(constant_id = 0) const uint WG = 128;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) readonly buffer Buf_w { float w[]; };
layout(std430, binding = 2) readonly buffer Buf_dy { float dy[]; };
layout(std430, binding = 3) readonly buffer Buf_mean { float mean[]; };
layout(std430, binding = 4) readonly buffer Buf_rstd { float rstd[]; };
layout(std430, binding = 5) writeonly buffer Buf_dx { float dx[]; };
layout(std430, binding = 6) writeonly buffer Buf_part { float part[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
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
shared float red_wg_max[WG];
float wg_max(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_max[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_max[t]; float b = red_wg_max[t + s]; red_wg_max[t] = max(a, b); }
        barrier();
    }
    float r = red_wg_max[0];
    barrier();
    return r;
}

void main() {
    const uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    if (row >= p.rows) return;  // uniform per workgroup
    const uint t = gl_LocalInvocationID.x;
    const uint base = row * p.cols;
    // xh = (x - mu) r, g = w dy: dx = r (g - mean(g) - xh mean(g xh)); part = dy xh (rows sum to dw).
    const float mu = mean[row], r = rstd[row];
    float s1 = 0.0, s2 = 0.0;
    for (uint j = t; j < p.cols; j += WG) {
        float g = w[j] * float(dy[base + j]), xh = (float(x[base + j]) - mu) * r;
        s1 += g; s2 += g * xh;
    }
    s1 = wg_sum(s1) / float(p.cols);
    s2 = wg_sum(s2) / float(p.cols);
    for (uint j = t; j < p.cols; j += WG) {
        float dyv = float(dy[base + j]), xh = (float(x[base + j]) - mu) * r;
        dx[base + j] = float(r * (w[j] * dyv - s1 - xh * s2));
        part[base + j] = dyv * xh;
    }
}