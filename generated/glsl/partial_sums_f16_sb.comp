#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_ballot : require
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Two-stage deterministic reduction. Stage 1 (partial_sums): workgroup g sums x[g*chunk .. (g+1)*chunk)
// (squared if `square`) into part[poff + g]. Stage 2 (final_sum): one workgroup sums part[0..n)
// into acc[oidx] (added to it if `accumulate`; then divided by max(div[0], 1) if `use_div`).
// Fixed order: same inputs, same bits.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) writeonly buffer Buf_part { float part[]; };
layout(push_constant) uniform Push {
    uint n;
    uint chunk;
    uint square;
    uint poff;
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

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint g = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    const uint lo = g * p.chunk, hi = min(lo + p.chunk, p.n);
    float s = 0.0;
    for (uint j = lo + t; j < hi; j += WG) { float v = float(x[j]); s += p.square != 0 ? v * v : v; }
    s = wg_sum(s);
    if (t == 0) part[p.poff + g] = s;
}
