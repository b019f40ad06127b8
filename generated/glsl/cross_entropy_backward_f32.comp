#version 450
#extension GL_EXT_control_flow_attributes : enable

// Row-wise cross_entropy_backward: one workgroup of WG threads per row of `cols` elements; f32 arithmetic and
// reductions in a fixed order (deterministic).
layout(constant_id = 0) const uint WG = 128;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) readonly buffer Buf_target { uint target[]; };
layout(std430, binding = 2) readonly buffer Buf_count { float count[]; };
layout(std430, binding = 3) readonly buffer Buf_grad { float grad[]; };
layout(std430, binding = 4) writeonly buffer Buf_dx { float dx[]; };
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
    // dx = (softmax(x) - onehot(target)) * grad[0] / max(count[0], 1) (mean over valid targets).
    const uint tg = target[row];
    const float k = tg < p.cols ? grad[0] / max(count[0], 1.0) : 0.0;
    const uint PK = 8;
    float xr[PK];
    float m = -3.402823466e38;
    [[unroll]] for (uint q = 0; q < PK; ++q) {
        const uint j = t + q * WG;
        xr[q] = 0.0;
        if (j < p.cols) { xr[q] = float(x[base + j]); m = max(m, xr[q]); }
    }
    for (uint j = t + PK * WG; j < p.cols; j += WG) m = max(m, float(x[base + j]));
    m = wg_max(m);
    float s = 0.0;
    [[unroll]] for (uint q = 0; q < PK; ++q) {
        const uint j = t + q * WG;
        if (j < p.cols) { xr[q] = exp(xr[q] - m); s += xr[q]; }
    }
    for (uint j = t + PK * WG; j < p.cols; j += WG) s += exp(float(x[base + j]) - m);
    s = wg_sum(s);
    const float inv = 1.0 / s;
    [[unroll]] for (uint q = 0; q < PK; ++q) {
        const uint j = t + q * WG;
        if (j < p.cols) dx[base + j] = float(k * (xr[q] * inv - (j == tg ? 1.0 : 0.0)));
    }
    for (uint j = t + PK * WG; j < p.cols; j += WG)
        dx[base + j] = float(k * (exp(float(x[base + j]) - m) * inv - (j == tg ? 1.0 : 0.0)));
}