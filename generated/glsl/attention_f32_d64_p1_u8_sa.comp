#version 450
#extension GL_EXT_control_flow_attributes : enable

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// attention fwd (f32 storage, f32 arithmetic)
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 64;
layout(constant_id = 2) const uint TILE = 64;
layout(std430, binding = 0) readonly buffer Buf_q { float q[]; };
layout(std430, binding = 1) readonly buffer Buf_k { float k[]; };
layout(std430, binding = 2) readonly buffer Buf_v { float v[]; };
layout(std430, binding = 3) writeonly buffer Buf_o { float o[]; };
layout(std430, binding = 4) writeonly buffer Buf_lse { float lse[]; };
layout(push_constant) uniform Push {
    uint S;
    uint H;
    uint KVH;
    uint D;
    uint causal;
    float scale;
} p;
layout(local_size_x_id = 0) in;

// 16-byte views (8-byte for f16) of the T bindings, used when D % 4 == 0 (rows then start aligned).
layout(std430, binding = 0) readonly buffer Buf_q4 { vec4 q4[]; };
vec4 ld_q(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) return q4[(base + d) / 4];
    return vec4(float(q[base + d]), d + 1 < p.D ? float(q[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(q[base + d + 2]) : 0.0, d + 3 < p.D ? float(q[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_q's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_q(uint base, uint d) {
    return mix(vec4(0.0), q4[(base + min(d, p.D - 4u)) / 4], bvec4(d < p.D));
}
layout(std430, binding = 1) readonly buffer Buf_k4 { vec4 k4[]; };
vec4 ld_k(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) return k4[(base + d) / 4];
    return vec4(float(k[base + d]), d + 1 < p.D ? float(k[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(k[base + d + 2]) : 0.0, d + 3 < p.D ? float(k[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_k's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_k(uint base, uint d) {
    return mix(vec4(0.0), k4[(base + min(d, p.D - 4u)) / 4], bvec4(d < p.D));
}
layout(std430, binding = 2) readonly buffer Buf_v4 { vec4 v4[]; };
vec4 ld_v(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) return v4[(base + d) / 4];
    return vec4(float(v[base + d]), d + 1 < p.D ? float(v[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(v[base + d + 2]) : 0.0, d + 3 < p.D ? float(v[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_v's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_v(uint base, uint d) {
    return mix(vec4(0.0), v4[(base + min(d, p.D - 4u)) / 4], bvec4(d < p.D));
}
layout(std430, binding = 3) writeonly buffer Buf_o4 { vec4 o4[]; };
void st_o(uint base, uint d, vec4 x) {
    if (d >= p.D) return;
    if ((p.D & 3u) == 0u) { o4[(base + d) / 4] = x; return; }
    for (uint u = 0; u < 4 && d + u < p.D; ++u) o[base + d + u] = float(x[u]);
}

const uint HD = 64, TPR = 1;
const uint DV = 16;        // vec4s of a row per thread
const uint HV = HD / 4;          // vec4s of a row
// A streamed row in shared memory: the TPR parts of DV vec4s each, one vec4 apart (HVP per row), so
// the parts the TPR threads of a row read at once fall in different banks.
const uint HVP = HV + TPR - 1;
const float LOG2E = 1.4426950408889634;
const float NEG = -3.0e38;       // masked score: exp2(NEG - m) == 0 for any finite row max m

const uint R = 8;
void main() {
    const uint L = gl_LocalInvocationIndex;
    const uint S = p.S, b = gl_WorkGroupID.z;
    const bool causal = p.causal != 0u;
    const float c = p.scale * LOG2E;
    const uint r0 = gl_WorkGroupID.x * R;  // the workgroup's first row (query, or key in dkv)
    const uint h = gl_WorkGroupID.y, g = h / (p.H / p.KVH);
    const uint qb0 = ((b * S + min(r0 + 0, S - 1u)) * p.H + h) * p.D;
    const vec4 q0_0 = ldv_q(qb0, 0) * c;
    vec4 a0_0 = vec4(0.0);
    const vec4 q0_1 = ldv_q(qb0, 4) * c;
    vec4 a0_1 = vec4(0.0);
    const vec4 q0_2 = ldv_q(qb0, 8) * c;
    vec4 a0_2 = vec4(0.0);
    const vec4 q0_3 = ldv_q(qb0, 12) * c;
    vec4 a0_3 = vec4(0.0);
    const vec4 q0_4 = ldv_q(qb0, 16) * c;
    vec4 a0_4 = vec4(0.0);
    const vec4 q0_5 = ldv_q(qb0, 20) * c;
    vec4 a0_5 = vec4(0.0);
    const vec4 q0_6 = ldv_q(qb0, 24) * c;
    vec4 a0_6 = vec4(0.0);
    const vec4 q0_7 = ldv_q(qb0, 28) * c;
    vec4 a0_7 = vec4(0.0);
    const vec4 q0_8 = ldv_q(qb0, 32) * c;
    vec4 a0_8 = vec4(0.0);
    const vec4 q0_9 = ldv_q(qb0, 36) * c;
    vec4 a0_9 = vec4(0.0);
    const vec4 q0_10 = ldv_q(qb0, 40) * c;
    vec4 a0_10 = vec4(0.0);
    const vec4 q0_11 = ldv_q(qb0, 44) * c;
    vec4 a0_11 = vec4(0.0);
    const vec4 q0_12 = ldv_q(qb0, 48) * c;
    vec4 a0_12 = vec4(0.0);
    const vec4 q0_13 = ldv_q(qb0, 52) * c;
    vec4 a0_13 = vec4(0.0);
    const vec4 q0_14 = ldv_q(qb0, 56) * c;
    vec4 a0_14 = vec4(0.0);
    const vec4 q0_15 = ldv_q(qb0, 60) * c;
    vec4 a0_15 = vec4(0.0);
    float m0 = NEG, l0 = 0.0;
    const uint qb1 = ((b * S + min(r0 + 1, S - 1u)) * p.H + h) * p.D;
    const vec4 q1_0 = ldv_q(qb1, 0) * c;
    vec4 a1_0 = vec4(0.0);
    const vec4 q1_1 = ldv_q(qb1, 4) * c;
    vec4 a1_1 = vec4(0.0);
    const vec4 q1_2 = ldv_q(qb1, 8) * c;
    vec4 a1_2 = vec4(0.0);
    const vec4 q1_3 = ldv_q(qb1, 12) * c;
    vec4 a1_3 = vec4(0.0);
    const vec4 q1_4 = ldv_q(qb1, 16) * c;
    vec4 a1_4 = vec4(0.0);
    const vec4 q1_5 = ldv_q(qb1, 20) * c;
    vec4 a1_5 = vec4(0.0);
    const vec4 q1_6 = ldv_q(qb1, 24) * c;
    vec4 a1_6 = vec4(0.0);
    const vec4 q1_7 = ldv_q(qb1, 28) * c;
    vec4 a1_7 = vec4(0.0);
    const vec4 q1_8 = ldv_q(qb1, 32) * c;
    vec4 a1_8 = vec4(0.0);
    const vec4 q1_9 = ldv_q(qb1, 36) * c;
    vec4 a1_9 = vec4(0.0);
    const vec4 q1_10 = ldv_q(qb1, 40) * c;
    vec4 a1_10 = vec4(0.0);
    const vec4 q1_11 = ldv_q(qb1, 44) * c;
    vec4 a1_11 = vec4(0.0);
    const vec4 q1_12 = ldv_q(qb1, 48) * c;
    vec4 a1_12 = vec4(0.0);
    const vec4 q1_13 = ldv_q(qb1, 52) * c;
    vec4 a1_13 = vec4(0.0);
    const vec4 q1_14 = ldv_q(qb1, 56) * c;
    vec4 a1_14 = vec4(0.0);
    const vec4 q1_15 = ldv_q(qb1, 60) * c;
    vec4 a1_15 = vec4(0.0);
    float m1 = NEG, l1 = 0.0;
    const uint qb2 = ((b * S + min(r0 + 2, S - 1u)) * p.H + h) * p.D;
    const vec4 q2_0 = ldv_q(qb2, 0) * c;
    vec4 a2_0 = vec4(0.0);
    const vec4 q2_1 = ldv_q(qb2, 4) * c;
    vec4 a2_1 = vec4(0.0);
    const vec4 q2_2 = ldv_q(qb2, 8) * c;
    vec4 a2_2 = vec4(0.0);
    const vec4 q2_3 = ldv_q(qb2, 12) * c;
    vec4 a2_3 = vec4(0.0);
    const vec4 q2_4 = ldv_q(qb2, 16) * c;
    vec4 a2_4 = vec4(0.0);
    const vec4 q2_5 = ldv_q(qb2, 20) * c;
    vec4 a2_5 = vec4(0.0);
    const vec4 q2_6 = ldv_q(qb2, 24) * c;
    vec4 a2_6 = vec4(0.0);
    const vec4 q2_7 = ldv_q(qb2, 28) * c;
    vec4 a2_7 = vec4(0.0);
    const vec4 q2_8 = ldv_q(qb2, 32) * c;
    vec4 a2_8 = vec4(0.0);
    const vec4 q2_9 = ldv_q(qb2, 36) * c;
    vec4 a2_9 = vec4(0.0);
    const vec4 q2_10 = ldv_q(qb2, 40) * c;
    vec4 a2_10 = vec4(0.0);
    const vec4 q2_11 = ldv_q(qb2, 44) * c;
    vec4 a2_11 = vec4(0.0);
    const vec4 q2_12 = ldv_q(qb2, 48) * c;
    vec4 a2_12 = vec4(0.0);
    const vec4 q2_13 = ldv_q(qb2, 52) * c;
    vec4 a2_13 = vec4(0.0);
    const vec4 q2_14 = ldv_q(qb2, 56) * c;
    vec4 a2_14 = vec4(0.0);
    const vec4 q2_15 = ldv_q(qb2, 60) * c;
    vec4 a2_15 = vec4(0.0);
    float m2 = NEG, l2 = 0.0;
    const uint qb3 = ((b * S + min(r0 + 3, S - 1u)) * p.H + h) * p.D;
    const vec4 q3_0 = ldv_q(qb3, 0) * c;
    vec4 a3_0 = vec4(0.0);
    const vec4 q3_1 = ldv_q(qb3, 4) * c;
    vec4 a3_1 = vec4(0.0);
    const vec4 q3_2 = ldv_q(qb3, 8) * c;
    vec4 a3_2 = vec4(0.0);
    const vec4 q3_3 = ldv_q(qb3, 12) * c;
    vec4 a3_3 = vec4(0.0);
    const vec4 q3_4 = ldv_q(qb3, 16) * c;
    vec4 a3_4 = vec4(0.0);
    const vec4 q3_5 = ldv_q(qb3, 20) * c;
    vec4 a3_5 = vec4(0.0);
    const vec4 q3_6 = ldv_q(qb3, 24) * c;
    vec4 a3_6 = vec4(0.0);
    const vec4 q3_7 = ldv_q(qb3, 28) * c;
    vec4 a3_7 = vec4(0.0);
    const vec4 q3_8 = ldv_q(qb3, 32) * c;
    vec4 a3_8 = vec4(0.0);
    const vec4 q3_9 = ldv_q(qb3, 36) * c;
    vec4 a3_9 = vec4(0.0);
    const vec4 q3_10 = ldv_q(qb3, 40) * c;
    vec4 a3_10 = vec4(0.0);
    const vec4 q3_11 = ldv_q(qb3, 44) * c;
    vec4 a3_11 = vec4(0.0);
    const vec4 q3_12 = ldv_q(qb3, 48) * c;
    vec4 a3_12 = vec4(0.0);
    const vec4 q3_13 = ldv_q(qb3, 52) * c;
    vec4 a3_13 = vec4(0.0);
    const vec4 q3_14 = ldv_q(qb3, 56) * c;
    vec4 a3_14 = vec4(0.0);
    const vec4 q3_15 = ldv_q(qb3, 60) * c;
    vec4 a3_15 = vec4(0.0);
    float m3 = NEG, l3 = 0.0;
    const uint qb4 = ((b * S + min(r0 + 4, S - 1u)) * p.H + h) * p.D;
    const vec4 q4_0 = ldv_q(qb4, 0) * c;
    vec4 a4_0 = vec4(0.0);
    const vec4 q4_1 = ldv_q(qb4, 4) * c;
    vec4 a4_1 = vec4(0.0);
    const vec4 q4_2 = ldv_q(qb4, 8) * c;
    vec4 a4_2 = vec4(0.0);
    const vec4 q4_3 = ldv_q(qb4, 12) * c;
    vec4 a4_3 = vec4(0.0);
    const vec4 q4_4 = ldv_q(qb4, 16) * c;
    vec4 a4_4 = vec4(0.0);
    const vec4 q4_5 = ldv_q(qb4, 20) * c;
    vec4 a4_5 = vec4(0.0);
    const vec4 q4_6 = ldv_q(qb4, 24) * c;
    vec4 a4_6 = vec4(0.0);
    const vec4 q4_7 = ldv_q(qb4, 28) * c;
    vec4 a4_7 = vec4(0.0);
    const vec4 q4_8 = ldv_q(qb4, 32) * c;
    vec4 a4_8 = vec4(0.0);
    const vec4 q4_9 = ldv_q(qb4, 36) * c;
    vec4 a4_9 = vec4(0.0);
    const vec4 q4_10 = ldv_q(qb4, 40) * c;
    vec4 a4_10 = vec4(0.0);
    const vec4 q4_11 = ldv_q(qb4, 44) * c;
    vec4 a4_11 = vec4(0.0);
    const vec4 q4_12 = ldv_q(qb4, 48) * c;
    vec4 a4_12 = vec4(0.0);
    const vec4 q4_13 = ldv_q(qb4, 52) * c;
    vec4 a4_13 = vec4(0.0);
    const vec4 q4_14 = ldv_q(qb4, 56) * c;
    vec4 a4_14 = vec4(0.0);
    const vec4 q4_15 = ldv_q(qb4, 60) * c;
    vec4 a4_15 = vec4(0.0);
    float m4 = NEG, l4 = 0.0;
    const uint qb5 = ((b * S + min(r0 + 5, S - 1u)) * p.H + h) * p.D;
    const vec4 q5_0 = ldv_q(qb5, 0) * c;
    vec4 a5_0 = vec4(0.0);
    const vec4 q5_1 = ldv_q(qb5, 4) * c;
    vec4 a5_1 = vec4(0.0);
    const vec4 q5_2 = ldv_q(qb5, 8) * c;
    vec4 a5_2 = vec4(0.0);
    const vec4 q5_3 = ldv_q(qb5, 12) * c;
    vec4 a5_3 = vec4(0.0);
    const vec4 q5_4 = ldv_q(qb5, 16) * c;
    vec4 a5_4 = vec4(0.0);
    const vec4 q5_5 = ldv_q(qb5, 20) * c;
    vec4 a5_5 = vec4(0.0);
    const vec4 q5_6 = ldv_q(qb5, 24) * c;
    vec4 a5_6 = vec4(0.0);
    const vec4 q5_7 = ldv_q(qb5, 28) * c;
    vec4 a5_7 = vec4(0.0);
    const vec4 q5_8 = ldv_q(qb5, 32) * c;
    vec4 a5_8 = vec4(0.0);
    const vec4 q5_9 = ldv_q(qb5, 36) * c;
    vec4 a5_9 = vec4(0.0);
    const vec4 q5_10 = ldv_q(qb5, 40) * c;
    vec4 a5_10 = vec4(0.0);
    const vec4 q5_11 = ldv_q(qb5, 44) * c;
    vec4 a5_11 = vec4(0.0);
    const vec4 q5_12 = ldv_q(qb5, 48) * c;
    vec4 a5_12 = vec4(0.0);
    const vec4 q5_13 = ldv_q(qb5, 52) * c;
    vec4 a5_13 = vec4(0.0);
    const vec4 q5_14 = ldv_q(qb5, 56) * c;
    vec4 a5_14 = vec4(0.0);
    const vec4 q5_15 = ldv_q(qb5, 60) * c;
    vec4 a5_15 = vec4(0.0);
    float m5 = NEG, l5 = 0.0;
    const uint qb6 = ((b * S + min(r0 + 6, S - 1u)) * p.H + h) * p.D;
    const vec4 q6_0 = ldv_q(qb6, 0) * c;
    vec4 a6_0 = vec4(0.0);
    const vec4 q6_1 = ldv_q(qb6, 4) * c;
    vec4 a6_1 = vec4(0.0);
    const vec4 q6_2 = ldv_q(qb6, 8) * c;
    vec4 a6_2 = vec4(0.0);
    const vec4 q6_3 = ldv_q(qb6, 12) * c;
    vec4 a6_3 = vec4(0.0);
    const vec4 q6_4 = ldv_q(qb6, 16) * c;
    vec4 a6_4 = vec4(0.0);
    const vec4 q6_5 = ldv_q(qb6, 20) * c;
    vec4 a6_5 = vec4(0.0);
    const vec4 q6_6 = ldv_q(qb6, 24) * c;
    vec4 a6_6 = vec4(0.0);
    const vec4 q6_7 = ldv_q(qb6, 28) * c;
    vec4 a6_7 = vec4(0.0);
    const vec4 q6_8 = ldv_q(qb6, 32) * c;
    vec4 a6_8 = vec4(0.0);
    const vec4 q6_9 = ldv_q(qb6, 36) * c;
    vec4 a6_9 = vec4(0.0);
    const vec4 q6_10 = ldv_q(qb6, 40) * c;
    vec4 a6_10 = vec4(0.0);
    const vec4 q6_11 = ldv_q(qb6, 44) * c;
    vec4 a6_11 = vec4(0.0);
    const vec4 q6_12 = ldv_q(qb6, 48) * c;
    vec4 a6_12 = vec4(0.0);
    const vec4 q6_13 = ldv_q(qb6, 52) * c;
    vec4 a6_13 = vec4(0.0);
    const vec4 q6_14 = ldv_q(qb6, 56) * c;
    vec4 a6_14 = vec4(0.0);
    const vec4 q6_15 = ldv_q(qb6, 60) * c;
    vec4 a6_15 = vec4(0.0);
    float m6 = NEG, l6 = 0.0;
    const uint qb7 = ((b * S + min(r0 + 7, S - 1u)) * p.H + h) * p.D;
    const vec4 q7_0 = ldv_q(qb7, 0) * c;
    vec4 a7_0 = vec4(0.0);
    const vec4 q7_1 = ldv_q(qb7, 4) * c;
    vec4 a7_1 = vec4(0.0);
    const vec4 q7_2 = ldv_q(qb7, 8) * c;
    vec4 a7_2 = vec4(0.0);
    const vec4 q7_3 = ldv_q(qb7, 12) * c;
    vec4 a7_3 = vec4(0.0);
    const vec4 q7_4 = ldv_q(qb7, 16) * c;
    vec4 a7_4 = vec4(0.0);
    const vec4 q7_5 = ldv_q(qb7, 20) * c;
    vec4 a7_5 = vec4(0.0);
    const vec4 q7_6 = ldv_q(qb7, 24) * c;
    vec4 a7_6 = vec4(0.0);
    const vec4 q7_7 = ldv_q(qb7, 28) * c;
    vec4 a7_7 = vec4(0.0);
    const vec4 q7_8 = ldv_q(qb7, 32) * c;
    vec4 a7_8 = vec4(0.0);
    const vec4 q7_9 = ldv_q(qb7, 36) * c;
    vec4 a7_9 = vec4(0.0);
    const vec4 q7_10 = ldv_q(qb7, 40) * c;
    vec4 a7_10 = vec4(0.0);
    const vec4 q7_11 = ldv_q(qb7, 44) * c;
    vec4 a7_11 = vec4(0.0);
    const vec4 q7_12 = ldv_q(qb7, 48) * c;
    vec4 a7_12 = vec4(0.0);
    const vec4 q7_13 = ldv_q(qb7, 52) * c;
    vec4 a7_13 = vec4(0.0);
    const vec4 q7_14 = ldv_q(qb7, 56) * c;
    vec4 a7_14 = vec4(0.0);
    const vec4 q7_15 = ldv_q(qb7, 60) * c;
    vec4 a7_15 = vec4(0.0);
    float m7 = NEG, l7 = 0.0;
    const uint kend = causal ? min(S, r0 + R) : S;  // keys the workgroup's rows see
    for (uint j0 = 0; j0 < kend; j0 += TILE) {
        const uint jn = min(j0 + TILE, kend);
        for (uint jb = j0; jb < jn; jb += WG) {
            const uint j = jb + L;  // this lane's key
            const uint kb = ((b * S + min(j, S - 1u)) * p.KVH + g) * p.D;
            const vec4 k0 = ldv_k(kb, 0), v0 = ldv_v(kb, 0);
            const vec4 k1 = ldv_k(kb, 4), v1 = ldv_v(kb, 4);
            const vec4 k2 = ldv_k(kb, 8), v2 = ldv_v(kb, 8);
            const vec4 k3 = ldv_k(kb, 12), v3 = ldv_v(kb, 12);
            const vec4 k4 = ldv_k(kb, 16), v4 = ldv_v(kb, 16);
            const vec4 k5 = ldv_k(kb, 20), v5 = ldv_v(kb, 20);
            const vec4 k6 = ldv_k(kb, 24), v6 = ldv_v(kb, 24);
            const vec4 k7 = ldv_k(kb, 28), v7 = ldv_v(kb, 28);
            const vec4 k8 = ldv_k(kb, 32), v8 = ldv_v(kb, 32);
            const vec4 k9 = ldv_k(kb, 36), v9 = ldv_v(kb, 36);
            const vec4 k10 = ldv_k(kb, 40), v10 = ldv_v(kb, 40);
            const vec4 k11 = ldv_k(kb, 44), v11 = ldv_v(kb, 44);
            const vec4 k12 = ldv_k(kb, 48), v12 = ldv_v(kb, 48);
            const vec4 k13 = ldv_k(kb, 52), v13 = ldv_v(kb, 52);
            const vec4 k14 = ldv_k(kb, 56), v14 = ldv_v(kb, 56);
            const vec4 k15 = ldv_k(kb, 60), v15 = ldv_v(kb, 60);
            {
                const bool vis = j < S && (!causal || j <= r0 + 0);
                const float s = vis ? dot(q0_0, k0) + dot(q0_1, k1) + dot(q0_2, k2) + dot(q0_3, k3) + dot(q0_4, k4) + dot(q0_5, k5) + dot(q0_6, k6) + dot(q0_7, k7) + dot(q0_8, k8) + dot(q0_9, k9) + dot(q0_10, k10) + dot(q0_11, k11) + dot(q0_12, k12) + dot(q0_13, k13) + dot(q0_14, k14) + dot(q0_15, k15) : NEG;
                const float mn = max(m0, s);
                const float a = exp2(m0 - mn), w = vis ? exp2(s - mn) : 0.0;
                l0 = l0 * a + w;
                m0 = mn;
                a0_0 = a0_0 * a + w * v0;
                a0_1 = a0_1 * a + w * v1;
                a0_2 = a0_2 * a + w * v2;
                a0_3 = a0_3 * a + w * v3;
                a0_4 = a0_4 * a + w * v4;
                a0_5 = a0_5 * a + w * v5;
                a0_6 = a0_6 * a + w * v6;
                a0_7 = a0_7 * a + w * v7;
                a0_8 = a0_8 * a + w * v8;
                a0_9 = a0_9 * a + w * v9;
                a0_10 = a0_10 * a + w * v10;
                a0_11 = a0_11 * a + w * v11;
                a0_12 = a0_12 * a + w * v12;
                a0_13 = a0_13 * a + w * v13;
                a0_14 = a0_14 * a + w * v14;
                a0_15 = a0_15 * a + w * v15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 1);
                const float s = vis ? dot(q1_0, k0) + dot(q1_1, k1) + dot(q1_2, k2) + dot(q1_3, k3) + dot(q1_4, k4) + dot(q1_5, k5) + dot(q1_6, k6) + dot(q1_7, k7) + dot(q1_8, k8) + dot(q1_9, k9) + dot(q1_10, k10) + dot(q1_11, k11) + dot(q1_12, k12) + dot(q1_13, k13) + dot(q1_14, k14) + dot(q1_15, k15) : NEG;
                const float mn = max(m1, s);
                const float a = exp2(m1 - mn), w = vis ? exp2(s - mn) : 0.0;
                l1 = l1 * a + w;
                m1 = mn;
                a1_0 = a1_0 * a + w * v0;
                a1_1 = a1_1 * a + w * v1;
                a1_2 = a1_2 * a + w * v2;
                a1_3 = a1_3 * a + w * v3;
                a1_4 = a1_4 * a + w * v4;
                a1_5 = a1_5 * a + w * v5;
                a1_6 = a1_6 * a + w * v6;
                a1_7 = a1_7 * a + w * v7;
                a1_8 = a1_8 * a + w * v8;
                a1_9 = a1_9 * a + w * v9;
                a1_10 = a1_10 * a + w * v10;
                a1_11 = a1_11 * a + w * v11;
                a1_12 = a1_12 * a + w * v12;
                a1_13 = a1_13 * a + w * v13;
                a1_14 = a1_14 * a + w * v14;
                a1_15 = a1_15 * a + w * v15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 2);
                const float s = vis ? dot(q2_0, k0) + dot(q2_1, k1) + dot(q2_2, k2) + dot(q2_3, k3) + dot(q2_4, k4) + dot(q2_5, k5) + dot(q2_6, k6) + dot(q2_7, k7) + dot(q2_8, k8) + dot(q2_9, k9) + dot(q2_10, k10) + dot(q2_11, k11) + dot(q2_12, k12) + dot(q2_13, k13) + dot(q2_14, k14) + dot(q2_15, k15) : NEG;
                const float mn = max(m2, s);
                const float a = exp2(m2 - mn), w = vis ? exp2(s - mn) : 0.0;
                l2 = l2 * a + w;
                m2 = mn;
                a2_0 = a2_0 * a + w * v0;
                a2_1 = a2_1 * a + w * v1;
                a2_2 = a2_2 * a + w * v2;
                a2_3 = a2_3 * a + w * v3;
                a2_4 = a2_4 * a + w * v4;
                a2_5 = a2_5 * a + w * v5;
                a2_6 = a2_6 * a + w * v6;
                a2_7 = a2_7 * a + w * v7;
                a2_8 = a2_8 * a + w * v8;
                a2_9 = a2_9 * a + w * v9;
                a2_10 = a2_10 * a + w * v10;
                a2_11 = a2_11 * a + w * v11;
                a2_12 = a2_12 * a + w * v12;
                a2_13 = a2_13 * a + w * v13;
                a2_14 = a2_14 * a + w * v14;
                a2_15 = a2_15 * a + w * v15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 3);
                const float s = vis ? dot(q3_0, k0) + dot(q3_1, k1) + dot(q3_2, k2) + dot(q3_3, k3) + dot(q3_4, k4) + dot(q3_5, k5) + dot(q3_6, k6) + dot(q3_7, k7) + dot(q3_8, k8) + dot(q3_9, k9) + dot(q3_10, k10) + dot(q3_11, k11) + dot(q3_12, k12) + dot(q3_13, k13) + dot(q3_14, k14) + dot(q3_15, k15) : NEG;
                const float mn = max(m3, s);
                const float a = exp2(m3 - mn), w = vis ? exp2(s - mn) : 0.0;
                l3 = l3 * a + w;
                m3 = mn;
                a3_0 = a3_0 * a + w * v0;
                a3_1 = a3_1 * a + w * v1;
                a3_2 = a3_2 * a + w * v2;
                a3_3 = a3_3 * a + w * v3;
                a3_4 = a3_4 * a + w * v4;
                a3_5 = a3_5 * a + w * v5;
                a3_6 = a3_6 * a + w * v6;
                a3_7 = a3_7 * a + w * v7;
                a3_8 = a3_8 * a + w * v8;
                a3_9 = a3_9 * a + w * v9;
                a3_10 = a3_10 * a + w * v10;
                a3_11 = a3_11 * a + w * v11;
                a3_12 = a3_12 * a + w * v12;
                a3_13 = a3_13 * a + w * v13;
                a3_14 = a3_14 * a + w * v14;
                a3_15 = a3_15 * a + w * v15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 4);
                const float s = vis ? dot(q4_0, k0) + dot(q4_1, k1) + dot(q4_2, k2) + dot(q4_3, k3) + dot(q4_4, k4) + dot(q4_5, k5) + dot(q4_6, k6) + dot(q4_7, k7) + dot(q4_8, k8) + dot(q4_9, k9) + dot(q4_10, k10) + dot(q4_11, k11) + dot(q4_12, k12) + dot(q4_13, k13) + dot(q4_14, k14) + dot(q4_15, k15) : NEG;
                const float mn = max(m4, s);
                const float a = exp2(m4 - mn), w = vis ? exp2(s - mn) : 0.0;
                l4 = l4 * a + w;
                m4 = mn;
                a4_0 = a4_0 * a + w * v0;
                a4_1 = a4_1 * a + w * v1;
                a4_2 = a4_2 * a + w * v2;
                a4_3 = a4_3 * a + w * v3;
                a4_4 = a4_4 * a + w * v4;
                a4_5 = a4_5 * a + w * v5;
                a4_6 = a4_6 * a + w * v6;
                a4_7 = a4_7 * a + w * v7;
                a4_8 = a4_8 * a + w * v8;
                a4_9 = a4_9 * a + w * v9;
                a4_10 = a4_10 * a + w * v10;
                a4_11 = a4_11 * a + w * v11;
                a4_12 = a4_12 * a + w * v12;
                a4_13 = a4_13 * a + w * v13;
                a4_14 = a4_14 * a + w * v14;
                a4_15 = a4_15 * a + w * v15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 5);
                const float s = vis ? dot(q5_0, k0) + dot(q5_1, k1) + dot(q5_2, k2) + dot(q5_3, k3) + dot(q5_4, k4) + dot(q5_5, k5) + dot(q5_6, k6) + dot(q5_7, k7) + dot(q5_8, k8) + dot(q5_9, k9) + dot(q5_10, k10) + dot(q5_11, k11) + dot(q5_12, k12) + dot(q5_13, k13) + dot(q5_14, k14) + dot(q5_15, k15) : NEG;
                const float mn = max(m5, s);
                const float a = exp2(m5 - mn), w = vis ? exp2(s - mn) : 0.0;
                l5 = l5 * a + w;
                m5 = mn;
                a5_0 = a5_0 * a + w * v0;
                a5_1 = a5_1 * a + w * v1;
                a5_2 = a5_2 * a + w * v2;
                a5_3 = a5_3 * a + w * v3;
                a5_4 = a5_4 * a + w * v4;
                a5_5 = a5_5 * a + w * v5;
                a5_6 = a5_6 * a + w * v6;
                a5_7 = a5_7 * a + w * v7;
                a5_8 = a5_8 * a + w * v8;
                a5_9 = a5_9 * a + w * v9;
                a5_10 = a5_10 * a + w * v10;
                a5_11 = a5_11 * a + w * v11;
                a5_12 = a5_12 * a + w * v12;
                a5_13 = a5_13 * a + w * v13;
                a5_14 = a5_14 * a + w * v14;
                a5_15 = a5_15 * a + w * v15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 6);
                const float s = vis ? dot(q6_0, k0) + dot(q6_1, k1) + dot(q6_2, k2) + dot(q6_3, k3) + dot(q6_4, k4) + dot(q6_5, k5) + dot(q6_6, k6) + dot(q6_7, k7) + dot(q6_8, k8) + dot(q6_9, k9) + dot(q6_10, k10) + dot(q6_11, k11) + dot(q6_12, k12) + dot(q6_13, k13) + dot(q6_14, k14) + dot(q6_15, k15) : NEG;
                const float mn = max(m6, s);
                const float a = exp2(m6 - mn), w = vis ? exp2(s - mn) : 0.0;
                l6 = l6 * a + w;
                m6 = mn;
                a6_0 = a6_0 * a + w * v0;
                a6_1 = a6_1 * a + w * v1;
                a6_2 = a6_2 * a + w * v2;
                a6_3 = a6_3 * a + w * v3;
                a6_4 = a6_4 * a + w * v4;
                a6_5 = a6_5 * a + w * v5;
                a6_6 = a6_6 * a + w * v6;
                a6_7 = a6_7 * a + w * v7;
                a6_8 = a6_8 * a + w * v8;
                a6_9 = a6_9 * a + w * v9;
                a6_10 = a6_10 * a + w * v10;
                a6_11 = a6_11 * a + w * v11;
                a6_12 = a6_12 * a + w * v12;
                a6_13 = a6_13 * a + w * v13;
                a6_14 = a6_14 * a + w * v14;
                a6_15 = a6_15 * a + w * v15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 7);
                const float s = vis ? dot(q7_0, k0) + dot(q7_1, k1) + dot(q7_2, k2) + dot(q7_3, k3) + dot(q7_4, k4) + dot(q7_5, k5) + dot(q7_6, k6) + dot(q7_7, k7) + dot(q7_8, k8) + dot(q7_9, k9) + dot(q7_10, k10) + dot(q7_11, k11) + dot(q7_12, k12) + dot(q7_13, k13) + dot(q7_14, k14) + dot(q7_15, k15) : NEG;
                const float mn = max(m7, s);
                const float a = exp2(m7 - mn), w = vis ? exp2(s - mn) : 0.0;
                l7 = l7 * a + w;
                m7 = mn;
                a7_0 = a7_0 * a + w * v0;
                a7_1 = a7_1 * a + w * v1;
                a7_2 = a7_2 * a + w * v2;
                a7_3 = a7_3 * a + w * v3;
                a7_4 = a7_4 * a + w * v4;
                a7_5 = a7_5 * a + w * v5;
                a7_6 = a7_6 * a + w * v6;
                a7_7 = a7_7 * a + w * v7;
                a7_8 = a7_8 * a + w * v8;
                a7_9 = a7_9 * a + w * v9;
                a7_10 = a7_10 * a + w * v10;
                a7_11 = a7_11 * a + w * v11;
                a7_12 = a7_12 * a + w * v12;
                a7_13 = a7_13 * a + w * v13;
                a7_14 = a7_14 * a + w * v14;
                a7_15 = a7_15 * a + w * v15;
            }
        }
    }
    const float aM0 = subgroupMax(m0);
    const float af0 = exp2(m0 - aM0);  // 0 for a lane that saw no key of the row
    const float al0 = subgroupAdd(l0 * af0);
    const vec4 as0_0 = subgroupAdd(af0 * a0_0);
    const vec4 as0_1 = subgroupAdd(af0 * a0_1);
    const vec4 as0_2 = subgroupAdd(af0 * a0_2);
    const vec4 as0_3 = subgroupAdd(af0 * a0_3);
    const vec4 as0_4 = subgroupAdd(af0 * a0_4);
    const vec4 as0_5 = subgroupAdd(af0 * a0_5);
    const vec4 as0_6 = subgroupAdd(af0 * a0_6);
    const vec4 as0_7 = subgroupAdd(af0 * a0_7);
    const vec4 as0_8 = subgroupAdd(af0 * a0_8);
    const vec4 as0_9 = subgroupAdd(af0 * a0_9);
    const vec4 as0_10 = subgroupAdd(af0 * a0_10);
    const vec4 as0_11 = subgroupAdd(af0 * a0_11);
    const vec4 as0_12 = subgroupAdd(af0 * a0_12);
    const vec4 as0_13 = subgroupAdd(af0 * a0_13);
    const vec4 as0_14 = subgroupAdd(af0 * a0_14);
    const vec4 as0_15 = subgroupAdd(af0 * a0_15);
    const float aM1 = subgroupMax(m1);
    const float af1 = exp2(m1 - aM1);  // 0 for a lane that saw no key of the row
    const float al1 = subgroupAdd(l1 * af1);
    const vec4 as1_0 = subgroupAdd(af1 * a1_0);
    const vec4 as1_1 = subgroupAdd(af1 * a1_1);
    const vec4 as1_2 = subgroupAdd(af1 * a1_2);
    const vec4 as1_3 = subgroupAdd(af1 * a1_3);
    const vec4 as1_4 = subgroupAdd(af1 * a1_4);
    const vec4 as1_5 = subgroupAdd(af1 * a1_5);
    const vec4 as1_6 = subgroupAdd(af1 * a1_6);
    const vec4 as1_7 = subgroupAdd(af1 * a1_7);
    const vec4 as1_8 = subgroupAdd(af1 * a1_8);
    const vec4 as1_9 = subgroupAdd(af1 * a1_9);
    const vec4 as1_10 = subgroupAdd(af1 * a1_10);
    const vec4 as1_11 = subgroupAdd(af1 * a1_11);
    const vec4 as1_12 = subgroupAdd(af1 * a1_12);
    const vec4 as1_13 = subgroupAdd(af1 * a1_13);
    const vec4 as1_14 = subgroupAdd(af1 * a1_14);
    const vec4 as1_15 = subgroupAdd(af1 * a1_15);
    const float aM2 = subgroupMax(m2);
    const float af2 = exp2(m2 - aM2);  // 0 for a lane that saw no key of the row
    const float al2 = subgroupAdd(l2 * af2);
    const vec4 as2_0 = subgroupAdd(af2 * a2_0);
    const vec4 as2_1 = subgroupAdd(af2 * a2_1);
    const vec4 as2_2 = subgroupAdd(af2 * a2_2);
    const vec4 as2_3 = subgroupAdd(af2 * a2_3);
    const vec4 as2_4 = subgroupAdd(af2 * a2_4);
    const vec4 as2_5 = subgroupAdd(af2 * a2_5);
    const vec4 as2_6 = subgroupAdd(af2 * a2_6);
    const vec4 as2_7 = subgroupAdd(af2 * a2_7);
    const vec4 as2_8 = subgroupAdd(af2 * a2_8);
    const vec4 as2_9 = subgroupAdd(af2 * a2_9);
    const vec4 as2_10 = subgroupAdd(af2 * a2_10);
    const vec4 as2_11 = subgroupAdd(af2 * a2_11);
    const vec4 as2_12 = subgroupAdd(af2 * a2_12);
    const vec4 as2_13 = subgroupAdd(af2 * a2_13);
    const vec4 as2_14 = subgroupAdd(af2 * a2_14);
    const vec4 as2_15 = subgroupAdd(af2 * a2_15);
    const float aM3 = subgroupMax(m3);
    const float af3 = exp2(m3 - aM3);  // 0 for a lane that saw no key of the row
    const float al3 = subgroupAdd(l3 * af3);
    const vec4 as3_0 = subgroupAdd(af3 * a3_0);
    const vec4 as3_1 = subgroupAdd(af3 * a3_1);
    const vec4 as3_2 = subgroupAdd(af3 * a3_2);
    const vec4 as3_3 = subgroupAdd(af3 * a3_3);
    const vec4 as3_4 = subgroupAdd(af3 * a3_4);
    const vec4 as3_5 = subgroupAdd(af3 * a3_5);
    const vec4 as3_6 = subgroupAdd(af3 * a3_6);
    const vec4 as3_7 = subgroupAdd(af3 * a3_7);
    const vec4 as3_8 = subgroupAdd(af3 * a3_8);
    const vec4 as3_9 = subgroupAdd(af3 * a3_9);
    const vec4 as3_10 = subgroupAdd(af3 * a3_10);
    const vec4 as3_11 = subgroupAdd(af3 * a3_11);
    const vec4 as3_12 = subgroupAdd(af3 * a3_12);
    const vec4 as3_13 = subgroupAdd(af3 * a3_13);
    const vec4 as3_14 = subgroupAdd(af3 * a3_14);
    const vec4 as3_15 = subgroupAdd(af3 * a3_15);
    const float aM4 = subgroupMax(m4);
    const float af4 = exp2(m4 - aM4);  // 0 for a lane that saw no key of the row
    const float al4 = subgroupAdd(l4 * af4);
    const vec4 as4_0 = subgroupAdd(af4 * a4_0);
    const vec4 as4_1 = subgroupAdd(af4 * a4_1);
    const vec4 as4_2 = subgroupAdd(af4 * a4_2);
    const vec4 as4_3 = subgroupAdd(af4 * a4_3);
    const vec4 as4_4 = subgroupAdd(af4 * a4_4);
    const vec4 as4_5 = subgroupAdd(af4 * a4_5);
    const vec4 as4_6 = subgroupAdd(af4 * a4_6);
    const vec4 as4_7 = subgroupAdd(af4 * a4_7);
    const vec4 as4_8 = subgroupAdd(af4 * a4_8);
    const vec4 as4_9 = subgroupAdd(af4 * a4_9);
    const vec4 as4_10 = subgroupAdd(af4 * a4_10);
    const vec4 as4_11 = subgroupAdd(af4 * a4_11);
    const vec4 as4_12 = subgroupAdd(af4 * a4_12);
    const vec4 as4_13 = subgroupAdd(af4 * a4_13);
    const vec4 as4_14 = subgroupAdd(af4 * a4_14);
    const vec4 as4_15 = subgroupAdd(af4 * a4_15);
    const float aM5 = subgroupMax(m5);
    const float af5 = exp2(m5 - aM5);  // 0 for a lane that saw no key of the row
    const float al5 = subgroupAdd(l5 * af5);
    const vec4 as5_0 = subgroupAdd(af5 * a5_0);
    const vec4 as5_1 = subgroupAdd(af5 * a5_1);
    const vec4 as5_2 = subgroupAdd(af5 * a5_2);
    const vec4 as5_3 = subgroupAdd(af5 * a5_3);
    const vec4 as5_4 = subgroupAdd(af5 * a5_4);
    const vec4 as5_5 = subgroupAdd(af5 * a5_5);
    const vec4 as5_6 = subgroupAdd(af5 * a5_6);
    const vec4 as5_7 = subgroupAdd(af5 * a5_7);
    const vec4 as5_8 = subgroupAdd(af5 * a5_8);
    const vec4 as5_9 = subgroupAdd(af5 * a5_9);
    const vec4 as5_10 = subgroupAdd(af5 * a5_10);
    const vec4 as5_11 = subgroupAdd(af5 * a5_11);
    const vec4 as5_12 = subgroupAdd(af5 * a5_12);
    const vec4 as5_13 = subgroupAdd(af5 * a5_13);
    const vec4 as5_14 = subgroupAdd(af5 * a5_14);
    const vec4 as5_15 = subgroupAdd(af5 * a5_15);
    const float aM6 = subgroupMax(m6);
    const float af6 = exp2(m6 - aM6);  // 0 for a lane that saw no key of the row
    const float al6 = subgroupAdd(l6 * af6);
    const vec4 as6_0 = subgroupAdd(af6 * a6_0);
    const vec4 as6_1 = subgroupAdd(af6 * a6_1);
    const vec4 as6_2 = subgroupAdd(af6 * a6_2);
    const vec4 as6_3 = subgroupAdd(af6 * a6_3);
    const vec4 as6_4 = subgroupAdd(af6 * a6_4);
    const vec4 as6_5 = subgroupAdd(af6 * a6_5);
    const vec4 as6_6 = subgroupAdd(af6 * a6_6);
    const vec4 as6_7 = subgroupAdd(af6 * a6_7);
    const vec4 as6_8 = subgroupAdd(af6 * a6_8);
    const vec4 as6_9 = subgroupAdd(af6 * a6_9);
    const vec4 as6_10 = subgroupAdd(af6 * a6_10);
    const vec4 as6_11 = subgroupAdd(af6 * a6_11);
    const vec4 as6_12 = subgroupAdd(af6 * a6_12);
    const vec4 as6_13 = subgroupAdd(af6 * a6_13);
    const vec4 as6_14 = subgroupAdd(af6 * a6_14);
    const vec4 as6_15 = subgroupAdd(af6 * a6_15);
    const float aM7 = subgroupMax(m7);
    const float af7 = exp2(m7 - aM7);  // 0 for a lane that saw no key of the row
    const float al7 = subgroupAdd(l7 * af7);
    const vec4 as7_0 = subgroupAdd(af7 * a7_0);
    const vec4 as7_1 = subgroupAdd(af7 * a7_1);
    const vec4 as7_2 = subgroupAdd(af7 * a7_2);
    const vec4 as7_3 = subgroupAdd(af7 * a7_3);
    const vec4 as7_4 = subgroupAdd(af7 * a7_4);
    const vec4 as7_5 = subgroupAdd(af7 * a7_5);
    const vec4 as7_6 = subgroupAdd(af7 * a7_6);
    const vec4 as7_7 = subgroupAdd(af7 * a7_7);
    const vec4 as7_8 = subgroupAdd(af7 * a7_8);
    const vec4 as7_9 = subgroupAdd(af7 * a7_9);
    const vec4 as7_10 = subgroupAdd(af7 * a7_10);
    const vec4 as7_11 = subgroupAdd(af7 * a7_11);
    const vec4 as7_12 = subgroupAdd(af7 * a7_12);
    const vec4 as7_13 = subgroupAdd(af7 * a7_13);
    const vec4 as7_14 = subgroupAdd(af7 * a7_14);
    const vec4 as7_15 = subgroupAdd(af7 * a7_15);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? as0_0 : (L == 1u ? as1_0 : (L == 2u ? as2_0 : (L == 3u ? as3_0 : (L == 4u ? as4_0 : (L == 5u ? as5_0 : (L == 6u ? as6_0 : as7_0)))))));
        o[1] = (L == 0u ? as0_1 : (L == 1u ? as1_1 : (L == 2u ? as2_1 : (L == 3u ? as3_1 : (L == 4u ? as4_1 : (L == 5u ? as5_1 : (L == 6u ? as6_1 : as7_1)))))));
        o[2] = (L == 0u ? as0_2 : (L == 1u ? as1_2 : (L == 2u ? as2_2 : (L == 3u ? as3_2 : (L == 4u ? as4_2 : (L == 5u ? as5_2 : (L == 6u ? as6_2 : as7_2)))))));
        o[3] = (L == 0u ? as0_3 : (L == 1u ? as1_3 : (L == 2u ? as2_3 : (L == 3u ? as3_3 : (L == 4u ? as4_3 : (L == 5u ? as5_3 : (L == 6u ? as6_3 : as7_3)))))));
        o[4] = (L == 0u ? as0_4 : (L == 1u ? as1_4 : (L == 2u ? as2_4 : (L == 3u ? as3_4 : (L == 4u ? as4_4 : (L == 5u ? as5_4 : (L == 6u ? as6_4 : as7_4)))))));
        o[5] = (L == 0u ? as0_5 : (L == 1u ? as1_5 : (L == 2u ? as2_5 : (L == 3u ? as3_5 : (L == 4u ? as4_5 : (L == 5u ? as5_5 : (L == 6u ? as6_5 : as7_5)))))));
        o[6] = (L == 0u ? as0_6 : (L == 1u ? as1_6 : (L == 2u ? as2_6 : (L == 3u ? as3_6 : (L == 4u ? as4_6 : (L == 5u ? as5_6 : (L == 6u ? as6_6 : as7_6)))))));
        o[7] = (L == 0u ? as0_7 : (L == 1u ? as1_7 : (L == 2u ? as2_7 : (L == 3u ? as3_7 : (L == 4u ? as4_7 : (L == 5u ? as5_7 : (L == 6u ? as6_7 : as7_7)))))));
        o[8] = (L == 0u ? as0_8 : (L == 1u ? as1_8 : (L == 2u ? as2_8 : (L == 3u ? as3_8 : (L == 4u ? as4_8 : (L == 5u ? as5_8 : (L == 6u ? as6_8 : as7_8)))))));
        o[9] = (L == 0u ? as0_9 : (L == 1u ? as1_9 : (L == 2u ? as2_9 : (L == 3u ? as3_9 : (L == 4u ? as4_9 : (L == 5u ? as5_9 : (L == 6u ? as6_9 : as7_9)))))));
        o[10] = (L == 0u ? as0_10 : (L == 1u ? as1_10 : (L == 2u ? as2_10 : (L == 3u ? as3_10 : (L == 4u ? as4_10 : (L == 5u ? as5_10 : (L == 6u ? as6_10 : as7_10)))))));
        o[11] = (L == 0u ? as0_11 : (L == 1u ? as1_11 : (L == 2u ? as2_11 : (L == 3u ? as3_11 : (L == 4u ? as4_11 : (L == 5u ? as5_11 : (L == 6u ? as6_11 : as7_11)))))));
        o[12] = (L == 0u ? as0_12 : (L == 1u ? as1_12 : (L == 2u ? as2_12 : (L == 3u ? as3_12 : (L == 4u ? as4_12 : (L == 5u ? as5_12 : (L == 6u ? as6_12 : as7_12)))))));
        o[13] = (L == 0u ? as0_13 : (L == 1u ? as1_13 : (L == 2u ? as2_13 : (L == 3u ? as3_13 : (L == 4u ? as4_13 : (L == 5u ? as5_13 : (L == 6u ? as6_13 : as7_13)))))));
        o[14] = (L == 0u ? as0_14 : (L == 1u ? as1_14 : (L == 2u ? as2_14 : (L == 3u ? as3_14 : (L == 4u ? as4_14 : (L == 5u ? as5_14 : (L == 6u ? as6_14 : as7_14)))))));
        o[15] = (L == 0u ? as0_15 : (L == 1u ? as1_15 : (L == 2u ? as2_15 : (L == 3u ? as3_15 : (L == 4u ? as4_15 : (L == 5u ? as5_15 : (L == 6u ? as6_15 : as7_15)))))));
        const float M = (L == 0u ? aM0 : (L == 1u ? aM1 : (L == 2u ? aM2 : (L == 3u ? aM3 : (L == 4u ? aM4 : (L == 5u ? aM5 : (L == 6u ? aM6 : aM7)))))));
        const float lsum = (L == 0u ? al0 : (L == 1u ? al1 : (L == 2u ? al2 : (L == 3u ? al3 : (L == 4u ? al4 : (L == 5u ? al5 : (L == 6u ? al6 : al7)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.H + h) * p.D;
            const float inv = 1.0 / lsum;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_o(ob, 4 * e, o[e] * inv);
            lse[(b * p.H + h) * S + row] = M + log2(lsum);
        }

    }

}
