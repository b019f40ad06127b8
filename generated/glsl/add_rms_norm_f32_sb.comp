#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_ballot : require

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
float wg_sum_op(float a, float b) { return a + b; }
float wg_sum(float v) {
    const float s1_0 = subgroupBroadcast(v, 0);
    const float s1_1 = subgroupBroadcast(v, 1);
    const float s1_2 = subgroupBroadcast(v, 2);
    const float s1_3 = subgroupBroadcast(v, 3);
    const float s1_4 = subgroupBroadcast(v, 4);
    const float s1_5 = subgroupBroadcast(v, 5);
    const float s1_6 = subgroupBroadcast(v, 6);
    const float s1_7 = subgroupBroadcast(v, 7);
    const float s2_0 = wg_sum_op(s1_0, s1_4);
    const float s2_1 = wg_sum_op(s1_1, s1_5);
    const float s2_2 = wg_sum_op(s1_2, s1_6);
    const float s2_3 = wg_sum_op(s1_3, s1_7);
    const float s4_0 = wg_sum_op(s2_0, s2_2);
    const float s4_1 = wg_sum_op(s2_1, s2_3);
    const float s8_0 = wg_sum_op(s4_0, s4_1);
    return s8_0;
}
float wg_max_op(float a, float b) { return max(a, b); }
float wg_max(float v) {
    const float s1_0 = subgroupBroadcast(v, 0);
    const float s1_1 = subgroupBroadcast(v, 1);
    const float s1_2 = subgroupBroadcast(v, 2);
    const float s1_3 = subgroupBroadcast(v, 3);
    const float s1_4 = subgroupBroadcast(v, 4);
    const float s1_5 = subgroupBroadcast(v, 5);
    const float s1_6 = subgroupBroadcast(v, 6);
    const float s1_7 = subgroupBroadcast(v, 7);
    const float s2_0 = wg_max_op(s1_0, s1_4);
    const float s2_1 = wg_max_op(s1_1, s1_5);
    const float s2_2 = wg_max_op(s1_2, s1_6);
    const float s2_3 = wg_max_op(s1_3, s1_7);
    const float s4_0 = wg_max_op(s2_0, s2_2);
    const float s4_1 = wg_max_op(s2_1, s2_3);
    const float s8_0 = wg_max_op(s4_0, s4_1);
    return s8_0;
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