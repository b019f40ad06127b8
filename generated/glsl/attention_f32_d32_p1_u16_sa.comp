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

const uint HD = 32, TPR = 1;
const uint DV = 8;        // vec4s of a row per thread
const uint HV = HD / 4;          // vec4s of a row
// A streamed row in shared memory: the TPR parts of DV vec4s each, one vec4 apart (HVP per row), so
// the parts the TPR threads of a row read at once fall in different banks.
const uint HVP = HV + TPR - 1;
const float LOG2E = 1.4426950408889634;
const float NEG = -3.0e38;       // masked score: exp2(NEG - m) == 0 for any finite row max m

const uint R = 16;
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
    float m7 = NEG, l7 = 0.0;
    const uint qb8 = ((b * S + min(r0 + 8, S - 1u)) * p.H + h) * p.D;
    const vec4 q8_0 = ldv_q(qb8, 0) * c;
    vec4 a8_0 = vec4(0.0);
    const vec4 q8_1 = ldv_q(qb8, 4) * c;
    vec4 a8_1 = vec4(0.0);
    const vec4 q8_2 = ldv_q(qb8, 8) * c;
    vec4 a8_2 = vec4(0.0);
    const vec4 q8_3 = ldv_q(qb8, 12) * c;
    vec4 a8_3 = vec4(0.0);
    const vec4 q8_4 = ldv_q(qb8, 16) * c;
    vec4 a8_4 = vec4(0.0);
    const vec4 q8_5 = ldv_q(qb8, 20) * c;
    vec4 a8_5 = vec4(0.0);
    const vec4 q8_6 = ldv_q(qb8, 24) * c;
    vec4 a8_6 = vec4(0.0);
    const vec4 q8_7 = ldv_q(qb8, 28) * c;
    vec4 a8_7 = vec4(0.0);
    float m8 = NEG, l8 = 0.0;
    const uint qb9 = ((b * S + min(r0 + 9, S - 1u)) * p.H + h) * p.D;
    const vec4 q9_0 = ldv_q(qb9, 0) * c;
    vec4 a9_0 = vec4(0.0);
    const vec4 q9_1 = ldv_q(qb9, 4) * c;
    vec4 a9_1 = vec4(0.0);
    const vec4 q9_2 = ldv_q(qb9, 8) * c;
    vec4 a9_2 = vec4(0.0);
    const vec4 q9_3 = ldv_q(qb9, 12) * c;
    vec4 a9_3 = vec4(0.0);
    const vec4 q9_4 = ldv_q(qb9, 16) * c;
    vec4 a9_4 = vec4(0.0);
    const vec4 q9_5 = ldv_q(qb9, 20) * c;
    vec4 a9_5 = vec4(0.0);
    const vec4 q9_6 = ldv_q(qb9, 24) * c;
    vec4 a9_6 = vec4(0.0);
    const vec4 q9_7 = ldv_q(qb9, 28) * c;
    vec4 a9_7 = vec4(0.0);
    float m9 = NEG, l9 = 0.0;
    const uint qb10 = ((b * S + min(r0 + 10, S - 1u)) * p.H + h) * p.D;
    const vec4 q10_0 = ldv_q(qb10, 0) * c;
    vec4 a10_0 = vec4(0.0);
    const vec4 q10_1 = ldv_q(qb10, 4) * c;
    vec4 a10_1 = vec4(0.0);
    const vec4 q10_2 = ldv_q(qb10, 8) * c;
    vec4 a10_2 = vec4(0.0);
    const vec4 q10_3 = ldv_q(qb10, 12) * c;
    vec4 a10_3 = vec4(0.0);
    const vec4 q10_4 = ldv_q(qb10, 16) * c;
    vec4 a10_4 = vec4(0.0);
    const vec4 q10_5 = ldv_q(qb10, 20) * c;
    vec4 a10_5 = vec4(0.0);
    const vec4 q10_6 = ldv_q(qb10, 24) * c;
    vec4 a10_6 = vec4(0.0);
    const vec4 q10_7 = ldv_q(qb10, 28) * c;
    vec4 a10_7 = vec4(0.0);
    float m10 = NEG, l10 = 0.0;
    const uint qb11 = ((b * S + min(r0 + 11, S - 1u)) * p.H + h) * p.D;
    const vec4 q11_0 = ldv_q(qb11, 0) * c;
    vec4 a11_0 = vec4(0.0);
    const vec4 q11_1 = ldv_q(qb11, 4) * c;
    vec4 a11_1 = vec4(0.0);
    const vec4 q11_2 = ldv_q(qb11, 8) * c;
    vec4 a11_2 = vec4(0.0);
    const vec4 q11_3 = ldv_q(qb11, 12) * c;
    vec4 a11_3 = vec4(0.0);
    const vec4 q11_4 = ldv_q(qb11, 16) * c;
    vec4 a11_4 = vec4(0.0);
    const vec4 q11_5 = ldv_q(qb11, 20) * c;
    vec4 a11_5 = vec4(0.0);
    const vec4 q11_6 = ldv_q(qb11, 24) * c;
    vec4 a11_6 = vec4(0.0);
    const vec4 q11_7 = ldv_q(qb11, 28) * c;
    vec4 a11_7 = vec4(0.0);
    float m11 = NEG, l11 = 0.0;
    const uint qb12 = ((b * S + min(r0 + 12, S - 1u)) * p.H + h) * p.D;
    const vec4 q12_0 = ldv_q(qb12, 0) * c;
    vec4 a12_0 = vec4(0.0);
    const vec4 q12_1 = ldv_q(qb12, 4) * c;
    vec4 a12_1 = vec4(0.0);
    const vec4 q12_2 = ldv_q(qb12, 8) * c;
    vec4 a12_2 = vec4(0.0);
    const vec4 q12_3 = ldv_q(qb12, 12) * c;
    vec4 a12_3 = vec4(0.0);
    const vec4 q12_4 = ldv_q(qb12, 16) * c;
    vec4 a12_4 = vec4(0.0);
    const vec4 q12_5 = ldv_q(qb12, 20) * c;
    vec4 a12_5 = vec4(0.0);
    const vec4 q12_6 = ldv_q(qb12, 24) * c;
    vec4 a12_6 = vec4(0.0);
    const vec4 q12_7 = ldv_q(qb12, 28) * c;
    vec4 a12_7 = vec4(0.0);
    float m12 = NEG, l12 = 0.0;
    const uint qb13 = ((b * S + min(r0 + 13, S - 1u)) * p.H + h) * p.D;
    const vec4 q13_0 = ldv_q(qb13, 0) * c;
    vec4 a13_0 = vec4(0.0);
    const vec4 q13_1 = ldv_q(qb13, 4) * c;
    vec4 a13_1 = vec4(0.0);
    const vec4 q13_2 = ldv_q(qb13, 8) * c;
    vec4 a13_2 = vec4(0.0);
    const vec4 q13_3 = ldv_q(qb13, 12) * c;
    vec4 a13_3 = vec4(0.0);
    const vec4 q13_4 = ldv_q(qb13, 16) * c;
    vec4 a13_4 = vec4(0.0);
    const vec4 q13_5 = ldv_q(qb13, 20) * c;
    vec4 a13_5 = vec4(0.0);
    const vec4 q13_6 = ldv_q(qb13, 24) * c;
    vec4 a13_6 = vec4(0.0);
    const vec4 q13_7 = ldv_q(qb13, 28) * c;
    vec4 a13_7 = vec4(0.0);
    float m13 = NEG, l13 = 0.0;
    const uint qb14 = ((b * S + min(r0 + 14, S - 1u)) * p.H + h) * p.D;
    const vec4 q14_0 = ldv_q(qb14, 0) * c;
    vec4 a14_0 = vec4(0.0);
    const vec4 q14_1 = ldv_q(qb14, 4) * c;
    vec4 a14_1 = vec4(0.0);
    const vec4 q14_2 = ldv_q(qb14, 8) * c;
    vec4 a14_2 = vec4(0.0);
    const vec4 q14_3 = ldv_q(qb14, 12) * c;
    vec4 a14_3 = vec4(0.0);
    const vec4 q14_4 = ldv_q(qb14, 16) * c;
    vec4 a14_4 = vec4(0.0);
    const vec4 q14_5 = ldv_q(qb14, 20) * c;
    vec4 a14_5 = vec4(0.0);
    const vec4 q14_6 = ldv_q(qb14, 24) * c;
    vec4 a14_6 = vec4(0.0);
    const vec4 q14_7 = ldv_q(qb14, 28) * c;
    vec4 a14_7 = vec4(0.0);
    float m14 = NEG, l14 = 0.0;
    const uint qb15 = ((b * S + min(r0 + 15, S - 1u)) * p.H + h) * p.D;
    const vec4 q15_0 = ldv_q(qb15, 0) * c;
    vec4 a15_0 = vec4(0.0);
    const vec4 q15_1 = ldv_q(qb15, 4) * c;
    vec4 a15_1 = vec4(0.0);
    const vec4 q15_2 = ldv_q(qb15, 8) * c;
    vec4 a15_2 = vec4(0.0);
    const vec4 q15_3 = ldv_q(qb15, 12) * c;
    vec4 a15_3 = vec4(0.0);
    const vec4 q15_4 = ldv_q(qb15, 16) * c;
    vec4 a15_4 = vec4(0.0);
    const vec4 q15_5 = ldv_q(qb15, 20) * c;
    vec4 a15_5 = vec4(0.0);
    const vec4 q15_6 = ldv_q(qb15, 24) * c;
    vec4 a15_6 = vec4(0.0);
    const vec4 q15_7 = ldv_q(qb15, 28) * c;
    vec4 a15_7 = vec4(0.0);
    float m15 = NEG, l15 = 0.0;
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
            {
                const bool vis = j < S && (!causal || j <= r0 + 0);
                const float s = vis ? dot(q0_0, k0) + dot(q0_1, k1) + dot(q0_2, k2) + dot(q0_3, k3) + dot(q0_4, k4) + dot(q0_5, k5) + dot(q0_6, k6) + dot(q0_7, k7) : NEG;
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
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 1);
                const float s = vis ? dot(q1_0, k0) + dot(q1_1, k1) + dot(q1_2, k2) + dot(q1_3, k3) + dot(q1_4, k4) + dot(q1_5, k5) + dot(q1_6, k6) + dot(q1_7, k7) : NEG;
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
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 2);
                const float s = vis ? dot(q2_0, k0) + dot(q2_1, k1) + dot(q2_2, k2) + dot(q2_3, k3) + dot(q2_4, k4) + dot(q2_5, k5) + dot(q2_6, k6) + dot(q2_7, k7) : NEG;
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
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 3);
                const float s = vis ? dot(q3_0, k0) + dot(q3_1, k1) + dot(q3_2, k2) + dot(q3_3, k3) + dot(q3_4, k4) + dot(q3_5, k5) + dot(q3_6, k6) + dot(q3_7, k7) : NEG;
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
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 4);
                const float s = vis ? dot(q4_0, k0) + dot(q4_1, k1) + dot(q4_2, k2) + dot(q4_3, k3) + dot(q4_4, k4) + dot(q4_5, k5) + dot(q4_6, k6) + dot(q4_7, k7) : NEG;
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
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 5);
                const float s = vis ? dot(q5_0, k0) + dot(q5_1, k1) + dot(q5_2, k2) + dot(q5_3, k3) + dot(q5_4, k4) + dot(q5_5, k5) + dot(q5_6, k6) + dot(q5_7, k7) : NEG;
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
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 6);
                const float s = vis ? dot(q6_0, k0) + dot(q6_1, k1) + dot(q6_2, k2) + dot(q6_3, k3) + dot(q6_4, k4) + dot(q6_5, k5) + dot(q6_6, k6) + dot(q6_7, k7) : NEG;
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
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 7);
                const float s = vis ? dot(q7_0, k0) + dot(q7_1, k1) + dot(q7_2, k2) + dot(q7_3, k3) + dot(q7_4, k4) + dot(q7_5, k5) + dot(q7_6, k6) + dot(q7_7, k7) : NEG;
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
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 8);
                const float s = vis ? dot(q8_0, k0) + dot(q8_1, k1) + dot(q8_2, k2) + dot(q8_3, k3) + dot(q8_4, k4) + dot(q8_5, k5) + dot(q8_6, k6) + dot(q8_7, k7) : NEG;
                const float mn = max(m8, s);
                const float a = exp2(m8 - mn), w = vis ? exp2(s - mn) : 0.0;
                l8 = l8 * a + w;
                m8 = mn;
                a8_0 = a8_0 * a + w * v0;
                a8_1 = a8_1 * a + w * v1;
                a8_2 = a8_2 * a + w * v2;
                a8_3 = a8_3 * a + w * v3;
                a8_4 = a8_4 * a + w * v4;
                a8_5 = a8_5 * a + w * v5;
                a8_6 = a8_6 * a + w * v6;
                a8_7 = a8_7 * a + w * v7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 9);
                const float s = vis ? dot(q9_0, k0) + dot(q9_1, k1) + dot(q9_2, k2) + dot(q9_3, k3) + dot(q9_4, k4) + dot(q9_5, k5) + dot(q9_6, k6) + dot(q9_7, k7) : NEG;
                const float mn = max(m9, s);
                const float a = exp2(m9 - mn), w = vis ? exp2(s - mn) : 0.0;
                l9 = l9 * a + w;
                m9 = mn;
                a9_0 = a9_0 * a + w * v0;
                a9_1 = a9_1 * a + w * v1;
                a9_2 = a9_2 * a + w * v2;
                a9_3 = a9_3 * a + w * v3;
                a9_4 = a9_4 * a + w * v4;
                a9_5 = a9_5 * a + w * v5;
                a9_6 = a9_6 * a + w * v6;
                a9_7 = a9_7 * a + w * v7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 10);
                const float s = vis ? dot(q10_0, k0) + dot(q10_1, k1) + dot(q10_2, k2) + dot(q10_3, k3) + dot(q10_4, k4) + dot(q10_5, k5) + dot(q10_6, k6) + dot(q10_7, k7) : NEG;
                const float mn = max(m10, s);
                const float a = exp2(m10 - mn), w = vis ? exp2(s - mn) : 0.0;
                l10 = l10 * a + w;
                m10 = mn;
                a10_0 = a10_0 * a + w * v0;
                a10_1 = a10_1 * a + w * v1;
                a10_2 = a10_2 * a + w * v2;
                a10_3 = a10_3 * a + w * v3;
                a10_4 = a10_4 * a + w * v4;
                a10_5 = a10_5 * a + w * v5;
                a10_6 = a10_6 * a + w * v6;
                a10_7 = a10_7 * a + w * v7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 11);
                const float s = vis ? dot(q11_0, k0) + dot(q11_1, k1) + dot(q11_2, k2) + dot(q11_3, k3) + dot(q11_4, k4) + dot(q11_5, k5) + dot(q11_6, k6) + dot(q11_7, k7) : NEG;
                const float mn = max(m11, s);
                const float a = exp2(m11 - mn), w = vis ? exp2(s - mn) : 0.0;
                l11 = l11 * a + w;
                m11 = mn;
                a11_0 = a11_0 * a + w * v0;
                a11_1 = a11_1 * a + w * v1;
                a11_2 = a11_2 * a + w * v2;
                a11_3 = a11_3 * a + w * v3;
                a11_4 = a11_4 * a + w * v4;
                a11_5 = a11_5 * a + w * v5;
                a11_6 = a11_6 * a + w * v6;
                a11_7 = a11_7 * a + w * v7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 12);
                const float s = vis ? dot(q12_0, k0) + dot(q12_1, k1) + dot(q12_2, k2) + dot(q12_3, k3) + dot(q12_4, k4) + dot(q12_5, k5) + dot(q12_6, k6) + dot(q12_7, k7) : NEG;
                const float mn = max(m12, s);
                const float a = exp2(m12 - mn), w = vis ? exp2(s - mn) : 0.0;
                l12 = l12 * a + w;
                m12 = mn;
                a12_0 = a12_0 * a + w * v0;
                a12_1 = a12_1 * a + w * v1;
                a12_2 = a12_2 * a + w * v2;
                a12_3 = a12_3 * a + w * v3;
                a12_4 = a12_4 * a + w * v4;
                a12_5 = a12_5 * a + w * v5;
                a12_6 = a12_6 * a + w * v6;
                a12_7 = a12_7 * a + w * v7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 13);
                const float s = vis ? dot(q13_0, k0) + dot(q13_1, k1) + dot(q13_2, k2) + dot(q13_3, k3) + dot(q13_4, k4) + dot(q13_5, k5) + dot(q13_6, k6) + dot(q13_7, k7) : NEG;
                const float mn = max(m13, s);
                const float a = exp2(m13 - mn), w = vis ? exp2(s - mn) : 0.0;
                l13 = l13 * a + w;
                m13 = mn;
                a13_0 = a13_0 * a + w * v0;
                a13_1 = a13_1 * a + w * v1;
                a13_2 = a13_2 * a + w * v2;
                a13_3 = a13_3 * a + w * v3;
                a13_4 = a13_4 * a + w * v4;
                a13_5 = a13_5 * a + w * v5;
                a13_6 = a13_6 * a + w * v6;
                a13_7 = a13_7 * a + w * v7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 14);
                const float s = vis ? dot(q14_0, k0) + dot(q14_1, k1) + dot(q14_2, k2) + dot(q14_3, k3) + dot(q14_4, k4) + dot(q14_5, k5) + dot(q14_6, k6) + dot(q14_7, k7) : NEG;
                const float mn = max(m14, s);
                const float a = exp2(m14 - mn), w = vis ? exp2(s - mn) : 0.0;
                l14 = l14 * a + w;
                m14 = mn;
                a14_0 = a14_0 * a + w * v0;
                a14_1 = a14_1 * a + w * v1;
                a14_2 = a14_2 * a + w * v2;
                a14_3 = a14_3 * a + w * v3;
                a14_4 = a14_4 * a + w * v4;
                a14_5 = a14_5 * a + w * v5;
                a14_6 = a14_6 * a + w * v6;
                a14_7 = a14_7 * a + w * v7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 15);
                const float s = vis ? dot(q15_0, k0) + dot(q15_1, k1) + dot(q15_2, k2) + dot(q15_3, k3) + dot(q15_4, k4) + dot(q15_5, k5) + dot(q15_6, k6) + dot(q15_7, k7) : NEG;
                const float mn = max(m15, s);
                const float a = exp2(m15 - mn), w = vis ? exp2(s - mn) : 0.0;
                l15 = l15 * a + w;
                m15 = mn;
                a15_0 = a15_0 * a + w * v0;
                a15_1 = a15_1 * a + w * v1;
                a15_2 = a15_2 * a + w * v2;
                a15_3 = a15_3 * a + w * v3;
                a15_4 = a15_4 * a + w * v4;
                a15_5 = a15_5 * a + w * v5;
                a15_6 = a15_6 * a + w * v6;
                a15_7 = a15_7 * a + w * v7;
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
    const float aM8 = subgroupMax(m8);
    const float af8 = exp2(m8 - aM8);  // 0 for a lane that saw no key of the row
    const float al8 = subgroupAdd(l8 * af8);
    const vec4 as8_0 = subgroupAdd(af8 * a8_0);
    const vec4 as8_1 = subgroupAdd(af8 * a8_1);
    const vec4 as8_2 = subgroupAdd(af8 * a8_2);
    const vec4 as8_3 = subgroupAdd(af8 * a8_3);
    const vec4 as8_4 = subgroupAdd(af8 * a8_4);
    const vec4 as8_5 = subgroupAdd(af8 * a8_5);
    const vec4 as8_6 = subgroupAdd(af8 * a8_6);
    const vec4 as8_7 = subgroupAdd(af8 * a8_7);
    const float aM9 = subgroupMax(m9);
    const float af9 = exp2(m9 - aM9);  // 0 for a lane that saw no key of the row
    const float al9 = subgroupAdd(l9 * af9);
    const vec4 as9_0 = subgroupAdd(af9 * a9_0);
    const vec4 as9_1 = subgroupAdd(af9 * a9_1);
    const vec4 as9_2 = subgroupAdd(af9 * a9_2);
    const vec4 as9_3 = subgroupAdd(af9 * a9_3);
    const vec4 as9_4 = subgroupAdd(af9 * a9_4);
    const vec4 as9_5 = subgroupAdd(af9 * a9_5);
    const vec4 as9_6 = subgroupAdd(af9 * a9_6);
    const vec4 as9_7 = subgroupAdd(af9 * a9_7);
    const float aM10 = subgroupMax(m10);
    const float af10 = exp2(m10 - aM10);  // 0 for a lane that saw no key of the row
    const float al10 = subgroupAdd(l10 * af10);
    const vec4 as10_0 = subgroupAdd(af10 * a10_0);
    const vec4 as10_1 = subgroupAdd(af10 * a10_1);
    const vec4 as10_2 = subgroupAdd(af10 * a10_2);
    const vec4 as10_3 = subgroupAdd(af10 * a10_3);
    const vec4 as10_4 = subgroupAdd(af10 * a10_4);
    const vec4 as10_5 = subgroupAdd(af10 * a10_5);
    const vec4 as10_6 = subgroupAdd(af10 * a10_6);
    const vec4 as10_7 = subgroupAdd(af10 * a10_7);
    const float aM11 = subgroupMax(m11);
    const float af11 = exp2(m11 - aM11);  // 0 for a lane that saw no key of the row
    const float al11 = subgroupAdd(l11 * af11);
    const vec4 as11_0 = subgroupAdd(af11 * a11_0);
    const vec4 as11_1 = subgroupAdd(af11 * a11_1);
    const vec4 as11_2 = subgroupAdd(af11 * a11_2);
    const vec4 as11_3 = subgroupAdd(af11 * a11_3);
    const vec4 as11_4 = subgroupAdd(af11 * a11_4);
    const vec4 as11_5 = subgroupAdd(af11 * a11_5);
    const vec4 as11_6 = subgroupAdd(af11 * a11_6);
    const vec4 as11_7 = subgroupAdd(af11 * a11_7);
    const float aM12 = subgroupMax(m12);
    const float af12 = exp2(m12 - aM12);  // 0 for a lane that saw no key of the row
    const float al12 = subgroupAdd(l12 * af12);
    const vec4 as12_0 = subgroupAdd(af12 * a12_0);
    const vec4 as12_1 = subgroupAdd(af12 * a12_1);
    const vec4 as12_2 = subgroupAdd(af12 * a12_2);
    const vec4 as12_3 = subgroupAdd(af12 * a12_3);
    const vec4 as12_4 = subgroupAdd(af12 * a12_4);
    const vec4 as12_5 = subgroupAdd(af12 * a12_5);
    const vec4 as12_6 = subgroupAdd(af12 * a12_6);
    const vec4 as12_7 = subgroupAdd(af12 * a12_7);
    const float aM13 = subgroupMax(m13);
    const float af13 = exp2(m13 - aM13);  // 0 for a lane that saw no key of the row
    const float al13 = subgroupAdd(l13 * af13);
    const vec4 as13_0 = subgroupAdd(af13 * a13_0);
    const vec4 as13_1 = subgroupAdd(af13 * a13_1);
    const vec4 as13_2 = subgroupAdd(af13 * a13_2);
    const vec4 as13_3 = subgroupAdd(af13 * a13_3);
    const vec4 as13_4 = subgroupAdd(af13 * a13_4);
    const vec4 as13_5 = subgroupAdd(af13 * a13_5);
    const vec4 as13_6 = subgroupAdd(af13 * a13_6);
    const vec4 as13_7 = subgroupAdd(af13 * a13_7);
    const float aM14 = subgroupMax(m14);
    const float af14 = exp2(m14 - aM14);  // 0 for a lane that saw no key of the row
    const float al14 = subgroupAdd(l14 * af14);
    const vec4 as14_0 = subgroupAdd(af14 * a14_0);
    const vec4 as14_1 = subgroupAdd(af14 * a14_1);
    const vec4 as14_2 = subgroupAdd(af14 * a14_2);
    const vec4 as14_3 = subgroupAdd(af14 * a14_3);
    const vec4 as14_4 = subgroupAdd(af14 * a14_4);
    const vec4 as14_5 = subgroupAdd(af14 * a14_5);
    const vec4 as14_6 = subgroupAdd(af14 * a14_6);
    const vec4 as14_7 = subgroupAdd(af14 * a14_7);
    const float aM15 = subgroupMax(m15);
    const float af15 = exp2(m15 - aM15);  // 0 for a lane that saw no key of the row
    const float al15 = subgroupAdd(l15 * af15);
    const vec4 as15_0 = subgroupAdd(af15 * a15_0);
    const vec4 as15_1 = subgroupAdd(af15 * a15_1);
    const vec4 as15_2 = subgroupAdd(af15 * a15_2);
    const vec4 as15_3 = subgroupAdd(af15 * a15_3);
    const vec4 as15_4 = subgroupAdd(af15 * a15_4);
    const vec4 as15_5 = subgroupAdd(af15 * a15_5);
    const vec4 as15_6 = subgroupAdd(af15 * a15_6);
    const vec4 as15_7 = subgroupAdd(af15 * a15_7);
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
        const float M = (L == 0u ? aM0 : (L == 1u ? aM1 : (L == 2u ? aM2 : (L == 3u ? aM3 : (L == 4u ? aM4 : (L == 5u ? aM5 : (L == 6u ? aM6 : aM7)))))));
        const float lsum = (L == 0u ? al0 : (L == 1u ? al1 : (L == 2u ? al2 : (L == 3u ? al3 : (L == 4u ? al4 : (L == 5u ? al5 : (L == 6u ? al6 : al7)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.H + h) * p.D;
            const float inv = 1.0 / lsum;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_o(ob, 4 * e, o[e] * inv);
            lse[(b * p.H + h) * S + row] = M + log2(lsum);
        }

    }
    {
        const uint r = L + 8u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? as8_0 : (L == 1u ? as9_0 : (L == 2u ? as10_0 : (L == 3u ? as11_0 : (L == 4u ? as12_0 : (L == 5u ? as13_0 : (L == 6u ? as14_0 : as15_0)))))));
        o[1] = (L == 0u ? as8_1 : (L == 1u ? as9_1 : (L == 2u ? as10_1 : (L == 3u ? as11_1 : (L == 4u ? as12_1 : (L == 5u ? as13_1 : (L == 6u ? as14_1 : as15_1)))))));
        o[2] = (L == 0u ? as8_2 : (L == 1u ? as9_2 : (L == 2u ? as10_2 : (L == 3u ? as11_2 : (L == 4u ? as12_2 : (L == 5u ? as13_2 : (L == 6u ? as14_2 : as15_2)))))));
        o[3] = (L == 0u ? as8_3 : (L == 1u ? as9_3 : (L == 2u ? as10_3 : (L == 3u ? as11_3 : (L == 4u ? as12_3 : (L == 5u ? as13_3 : (L == 6u ? as14_3 : as15_3)))))));
        o[4] = (L == 0u ? as8_4 : (L == 1u ? as9_4 : (L == 2u ? as10_4 : (L == 3u ? as11_4 : (L == 4u ? as12_4 : (L == 5u ? as13_4 : (L == 6u ? as14_4 : as15_4)))))));
        o[5] = (L == 0u ? as8_5 : (L == 1u ? as9_5 : (L == 2u ? as10_5 : (L == 3u ? as11_5 : (L == 4u ? as12_5 : (L == 5u ? as13_5 : (L == 6u ? as14_5 : as15_5)))))));
        o[6] = (L == 0u ? as8_6 : (L == 1u ? as9_6 : (L == 2u ? as10_6 : (L == 3u ? as11_6 : (L == 4u ? as12_6 : (L == 5u ? as13_6 : (L == 6u ? as14_6 : as15_6)))))));
        o[7] = (L == 0u ? as8_7 : (L == 1u ? as9_7 : (L == 2u ? as10_7 : (L == 3u ? as11_7 : (L == 4u ? as12_7 : (L == 5u ? as13_7 : (L == 6u ? as14_7 : as15_7)))))));
        const float M = (L == 0u ? aM8 : (L == 1u ? aM9 : (L == 2u ? aM10 : (L == 3u ? aM11 : (L == 4u ? aM12 : (L == 5u ? aM13 : (L == 6u ? aM14 : aM15)))))));
        const float lsum = (L == 0u ? al8 : (L == 1u ? al9 : (L == 2u ? al10 : (L == 3u ? al11 : (L == 4u ? al12 : (L == 5u ? al13 : (L == 6u ? al14 : al15)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.H + h) * p.D;
            const float inv = 1.0 / lsum;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_o(ob, 4 * e, o[e] * inv);
            lse[(b * p.H + h) * S + row] = M + log2(lsum);
        }

    }

}
