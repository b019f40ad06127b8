#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_ballot : require
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Row-wise cross_entropy: one workgroup of WG threads per row of `cols` elements; f32 arithmetic and
// reductions in a fixed order (deterministic).
layout(constant_id = 0) const uint WG = 128;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) readonly buffer Buf_target { uint target[]; };
layout(std430, binding = 2) writeonly buffer Buf_loss { float loss[]; };
layout(std430, binding = 3) writeonly buffer Buf_valid { float valid[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
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
    // loss = logsumexp(x) - x[target]; a target >= cols is ignored (loss 0, valid 0).
    const uint tg = target[row];
    const uint PK = 32;
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
    if (t == 0) {
        bool ok = tg < p.cols;
        loss[row] = ok ? (log(s) + m - float(x[base + tg])) : 0.0;
        valid[row] = ok ? 1.0 : 0.0;
    }
}