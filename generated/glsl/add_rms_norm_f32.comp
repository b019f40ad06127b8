#version 450
#extension GL_EXT_control_flow_attributes : enable

// Row-wise add_rms_norm: one workgroup of WG threads per row of `cols` elements; f32 arithmetic and
// reductions in a fixed order (deterministic).
layout(constant_id = 0) const uint WG = 128;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) readonly buffer Buf_a { float a[]; };
layout(std430, binding = 2) readonly buffer Buf_w { float w[]; };
layout(std430, binding = 3) buffer Buf_h { float h[]; };
layout(std430, binding = 4) writeonly buffer Buf_y { float y[]; };
layout(std430, binding = 5) writeonly buffer Buf_rstd { float rstd[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
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
    // h = x + a (a residual add, rounded to T as the add kernel rounds it), then rms_norm of that h: the
    // bits of add followed by rms_norm, with one pass less over the rows.
    // (the sums and y take h as stored, rounded to T; a thread's first PK elements stay in registers,
    // later ones are read back where this invocation wrote them, as f16 ones are once)
    const uint PK = 8;
    float hk[PK];
    float s = 0.0;
    [[unroll]] for (uint k = 0; k < PK; ++k) {
        const uint j = t + k * WG;
        hk[k] = 0.0;
        if (j < p.cols) {
            hk[k] = x[base + j] + a[base + j];
            h[base + j] = hk[k];
            s += hk[k] * hk[k];
        }
    }
    for (uint j = t + PK * WG; j < p.cols; j += WG) {
        h[base + j] = float(float(x[base + j]) + float(a[base + j]));
        float v = float(h[base + j]); s += v * v;
    }
    s = wg_sum(s);
    const float r = inversesqrt(s / float(p.cols) + p.eps);
    if (t == 0) rstd[row] = r;
    [[unroll]] for (uint k = 0; k < PK; ++k) {
        const uint j = t + k * WG;
        if (j < p.cols) y[base + j] = float(hk[k] * r * w[j]);
    }
    for (uint j = t + PK * WG; j < p.cols; j += WG) y[base + j] = float(float(h[base + j]) * r * w[j]);
}