#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_ballot : require
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// An L2 norm that cannot overflow for finite inputs: pass 0 finds m = max |x| (NaN
// propagates), pass 1 sums (x / m)^2 <= 1 per element, so the sum is at most the element count, and
// the norm is m * sqrt(sum). Each pass is two-stage (norm_partials: one partial per `chunk` elements
// into part[poff + g]; norm_final: one workgroup combines part[0..n) into acc[oidx]). Pass 0 leaves m
// in acc[oidx], which pass 1 reads and replaces with the norm. Fixed order: same inputs, same bits.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x0 { float16_t x0[]; };
layout(std430, binding = 1) readonly buffer Buf_x1 { float16_t x1[]; };
layout(std430, binding = 2) writeonly buffer Buf_part { float part[]; };
layout(std430, binding = 3) readonly buffer Buf_acc { float acc[]; };
layout(push_constant) uniform Push {
    uint n0;
    uint n1;
    uint g0;
    uint g1;
    uint chunk;
    uint poff;
    uint oidx;
    uint pass_;
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
float wg_maxnan_op(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : max(a, b); }
float wg_maxnan(float v) {
    const float s1_0 = subgroupBroadcast(v, 0);
    const float s1_1 = subgroupBroadcast(v, 1);
    const float s1_2 = subgroupBroadcast(v, 2);
    const float s1_3 = subgroupBroadcast(v, 3);
    const float s1_4 = subgroupBroadcast(v, 4);
    const float s1_5 = subgroupBroadcast(v, 5);
    const float s1_6 = subgroupBroadcast(v, 6);
    const float s1_7 = subgroupBroadcast(v, 7);
    const float s2_0 = wg_maxnan_op(s1_0, s1_4);
    const float s2_1 = wg_maxnan_op(s1_1, s1_5);
    const float s2_2 = wg_maxnan_op(s1_2, s1_6);
    const float s2_3 = wg_maxnan_op(s1_3, s1_7);
    const float s4_0 = wg_maxnan_op(s2_0, s2_2);
    const float s4_1 = wg_maxnan_op(s2_1, s2_3);
    const float s8_0 = wg_maxnan_op(s4_0, s4_1);
    return s8_0;
}

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint g = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    const float m = p.pass_ == 0 ? 0.0 : acc[p.oidx];
    float s = 0.0;
    // Up to 2 tensors in one dispatch (flag x2; runtime.variants.pick_norm_multi bounds it by
    // the device's storage-buffer limit): tensor j owns the workgroups g_j <= g < g_{j+1} (g_0 = 0,
    // unused slots 0xffffffff), each the same chunk of the same tensor as in norm_partials, so the
    // partials part[poff + g] are the ones a dispatch per tensor writes: same bits.
    uint jx = 0;
    if (g >= p.g1) jx = 1;
    if (jx == 0) {
        const uint lg = g - p.g0;
        const uint lo = lg * p.chunk, hi = min(lo + p.chunk, p.n0);
        if (p.pass_ == 0) {
            for (uint j = lo + t; j < hi; j += WG) { float a = abs(float(x0[j])); s = (isnan(a) || isnan(s)) ? a + s : max(s, a); }
        } else if (m > 0.0 && !isinf(m)) {  // m = 0: all zero; m = inf or NaN: the sum is unused
            // Divide (not multiply by 1/m, which overflows for a subnormal m): |x / m| <= 1.
            for (uint j = lo + t; j < hi; j += WG) { float a = float(x0[j]) / m; s += a * a; }
        }

    } else if (jx == 1) {
        const uint lg = g - p.g1;
        const uint lo = lg * p.chunk, hi = min(lo + p.chunk, p.n1);
        if (p.pass_ == 0) {
            for (uint j = lo + t; j < hi; j += WG) { float a = abs(float(x1[j])); s = (isnan(a) || isnan(s)) ? a + s : max(s, a); }
        } else if (m > 0.0 && !isinf(m)) {  // m = 0: all zero; m = inf or NaN: the sum is unused
            // Divide (not multiply by 1/m, which overflows for a subnormal m): |x / m| <= 1.
            for (uint j = lo + t; j < hi; j += WG) { float a = float(x1[j]) / m; s += a * a; }
        }

    }
    if (p.pass_ == 0) s = wg_maxnan(s);
    else s = wg_sum(s);
    if (t == 0) part[p.poff + g] = s;
}
