#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// attention dq (f16 storage, f32 arithmetic)
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 64;
layout(constant_id = 2) const uint TILE = 64;
layout(std430, binding = 0) readonly buffer Buf_q { float16_t q[]; };
layout(std430, binding = 1) readonly buffer Buf_k { float16_t k[]; };
layout(std430, binding = 2) readonly buffer Buf_v { float16_t v[]; };
layout(std430, binding = 3) readonly buffer Buf_o { float16_t o[]; };
layout(std430, binding = 4) readonly buffer Buf_dout { float16_t dout[]; };
layout(std430, binding = 5) readonly buffer Buf_lse { float lse[]; };
layout(std430, binding = 6) writeonly buffer Buf_delta { float delta[]; };
layout(std430, binding = 7) writeonly buffer Buf_dq { float16_t dq[]; };
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
layout(std430, binding = 0) readonly buffer Buf_q4 { uvec2 q4[]; };
vec4 ld_q(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) { uvec2 w = q4[(base + d) / 4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
    return vec4(float(q[base + d]), d + 1 < p.D ? float(q[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(q[base + d + 2]) : 0.0, d + 3 < p.D ? float(q[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_q's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_q(uint base, uint d) {
    const uvec2 w = q4[(base + min(d, p.D - 4u)) / 4];
    return mix(vec4(0.0), vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), bvec4(d < p.D));
}
layout(std430, binding = 1) readonly buffer Buf_k4 { uvec2 k4[]; };
vec4 ld_k(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) { uvec2 w = k4[(base + d) / 4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
    return vec4(float(k[base + d]), d + 1 < p.D ? float(k[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(k[base + d + 2]) : 0.0, d + 3 < p.D ? float(k[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_k's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_k(uint base, uint d) {
    const uvec2 w = k4[(base + min(d, p.D - 4u)) / 4];
    return mix(vec4(0.0), vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), bvec4(d < p.D));
}
layout(std430, binding = 2) readonly buffer Buf_v4 { uvec2 v4[]; };
vec4 ld_v(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) { uvec2 w = v4[(base + d) / 4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
    return vec4(float(v[base + d]), d + 1 < p.D ? float(v[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(v[base + d + 2]) : 0.0, d + 3 < p.D ? float(v[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_v's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_v(uint base, uint d) {
    const uvec2 w = v4[(base + min(d, p.D - 4u)) / 4];
    return mix(vec4(0.0), vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), bvec4(d < p.D));
}
layout(std430, binding = 3) readonly buffer Buf_o4 { uvec2 o4[]; };
vec4 ld_o(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) { uvec2 w = o4[(base + d) / 4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
    return vec4(float(o[base + d]), d + 1 < p.D ? float(o[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(o[base + d + 2]) : 0.0, d + 3 < p.D ? float(o[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_o's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_o(uint base, uint d) {
    const uvec2 w = o4[(base + min(d, p.D - 4u)) / 4];
    return mix(vec4(0.0), vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), bvec4(d < p.D));
}
layout(std430, binding = 4) readonly buffer Buf_dout4 { uvec2 dout4[]; };
vec4 ld_dout(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) { uvec2 w = dout4[(base + d) / 4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
    return vec4(float(dout[base + d]), d + 1 < p.D ? float(dout[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(dout[base + d + 2]) : 0.0, d + 3 < p.D ? float(dout[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_dout's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_dout(uint base, uint d) {
    const uvec2 w = dout4[(base + min(d, p.D - 4u)) / 4];
    return mix(vec4(0.0), vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), bvec4(d < p.D));
}
layout(std430, binding = 7) writeonly buffer Buf_dq4 { uvec2 dq4[]; };
void st_dq(uint base, uint d, vec4 x) {
    if (d >= p.D) return;
    if ((p.D & 3u) == 0u) { dq4[(base + d) / 4] = uvec2(packHalf2x16(x.xy), packHalf2x16(x.zw)); return; }
    for (uint u = 0; u < 4 && d + u < p.D; ++u) dq[base + d + u] = float16_t(x[u]);
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
    const vec4 q0_0 = ldv_q(qb0, 0);
    vec4 a0_0 = vec4(0.0);
    const vec4 q0_1 = ldv_q(qb0, 4);
    vec4 a0_1 = vec4(0.0);
    const vec4 q0_2 = ldv_q(qb0, 8);
    vec4 a0_2 = vec4(0.0);
    const vec4 q0_3 = ldv_q(qb0, 12);
    vec4 a0_3 = vec4(0.0);
    const vec4 q0_4 = ldv_q(qb0, 16);
    vec4 a0_4 = vec4(0.0);
    const vec4 q0_5 = ldv_q(qb0, 20);
    vec4 a0_5 = vec4(0.0);
    const vec4 q0_6 = ldv_q(qb0, 24);
    vec4 a0_6 = vec4(0.0);
    const vec4 q0_7 = ldv_q(qb0, 28);
    vec4 a0_7 = vec4(0.0);
    const vec4 o0_0 = ldv_dout(qb0, 0);
    const vec4 o0_1 = ldv_dout(qb0, 4);
    const vec4 o0_2 = ldv_dout(qb0, 8);
    const vec4 o0_3 = ldv_dout(qb0, 12);
    const vec4 o0_4 = ldv_dout(qb0, 16);
    const vec4 o0_5 = ldv_dout(qb0, 20);
    const vec4 o0_6 = ldv_dout(qb0, 24);
    const vec4 o0_7 = ldv_dout(qb0, 28);
    const float D0 = dot(o0_0, ldv_o(qb0, 0)) + dot(o0_1, ldv_o(qb0, 4)) + dot(o0_2, ldv_o(qb0, 8)) + dot(o0_3, ldv_o(qb0, 12)) + dot(o0_4, ldv_o(qb0, 16)) + dot(o0_5, ldv_o(qb0, 20)) + dot(o0_6, ldv_o(qb0, 24)) + dot(o0_7, ldv_o(qb0, 28));
    const float L0 = lse[(b * p.H + h) * S + min(r0 + 0, S - 1u)];
    if (L == 0u && r0 + 0 < S) delta[(b * p.H + h) * S + r0 + 0] = D0;
    const uint qb1 = ((b * S + min(r0 + 1, S - 1u)) * p.H + h) * p.D;
    const vec4 q1_0 = ldv_q(qb1, 0);
    vec4 a1_0 = vec4(0.0);
    const vec4 q1_1 = ldv_q(qb1, 4);
    vec4 a1_1 = vec4(0.0);
    const vec4 q1_2 = ldv_q(qb1, 8);
    vec4 a1_2 = vec4(0.0);
    const vec4 q1_3 = ldv_q(qb1, 12);
    vec4 a1_3 = vec4(0.0);
    const vec4 q1_4 = ldv_q(qb1, 16);
    vec4 a1_4 = vec4(0.0);
    const vec4 q1_5 = ldv_q(qb1, 20);
    vec4 a1_5 = vec4(0.0);
    const vec4 q1_6 = ldv_q(qb1, 24);
    vec4 a1_6 = vec4(0.0);
    const vec4 q1_7 = ldv_q(qb1, 28);
    vec4 a1_7 = vec4(0.0);
    const vec4 o1_0 = ldv_dout(qb1, 0);
    const vec4 o1_1 = ldv_dout(qb1, 4);
    const vec4 o1_2 = ldv_dout(qb1, 8);
    const vec4 o1_3 = ldv_dout(qb1, 12);
    const vec4 o1_4 = ldv_dout(qb1, 16);
    const vec4 o1_5 = ldv_dout(qb1, 20);
    const vec4 o1_6 = ldv_dout(qb1, 24);
    const vec4 o1_7 = ldv_dout(qb1, 28);
    const float D1 = dot(o1_0, ldv_o(qb1, 0)) + dot(o1_1, ldv_o(qb1, 4)) + dot(o1_2, ldv_o(qb1, 8)) + dot(o1_3, ldv_o(qb1, 12)) + dot(o1_4, ldv_o(qb1, 16)) + dot(o1_5, ldv_o(qb1, 20)) + dot(o1_6, ldv_o(qb1, 24)) + dot(o1_7, ldv_o(qb1, 28));
    const float L1 = lse[(b * p.H + h) * S + min(r0 + 1, S - 1u)];
    if (L == 0u && r0 + 1 < S) delta[(b * p.H + h) * S + r0 + 1] = D1;
    const uint qb2 = ((b * S + min(r0 + 2, S - 1u)) * p.H + h) * p.D;
    const vec4 q2_0 = ldv_q(qb2, 0);
    vec4 a2_0 = vec4(0.0);
    const vec4 q2_1 = ldv_q(qb2, 4);
    vec4 a2_1 = vec4(0.0);
    const vec4 q2_2 = ldv_q(qb2, 8);
    vec4 a2_2 = vec4(0.0);
    const vec4 q2_3 = ldv_q(qb2, 12);
    vec4 a2_3 = vec4(0.0);
    const vec4 q2_4 = ldv_q(qb2, 16);
    vec4 a2_4 = vec4(0.0);
    const vec4 q2_5 = ldv_q(qb2, 20);
    vec4 a2_5 = vec4(0.0);
    const vec4 q2_6 = ldv_q(qb2, 24);
    vec4 a2_6 = vec4(0.0);
    const vec4 q2_7 = ldv_q(qb2, 28);
    vec4 a2_7 = vec4(0.0);
    const vec4 o2_0 = ldv_dout(qb2, 0);
    const vec4 o2_1 = ldv_dout(qb2, 4);
    const vec4 o2_2 = ldv_dout(qb2, 8);
    const vec4 o2_3 = ldv_dout(qb2, 12);
    const vec4 o2_4 = ldv_dout(qb2, 16);
    const vec4 o2_5 = ldv_dout(qb2, 20);
    const vec4 o2_6 = ldv_dout(qb2, 24);
    const vec4 o2_7 = ldv_dout(qb2, 28);
    const float D2 = dot(o2_0, ldv_o(qb2, 0)) + dot(o2_1, ldv_o(qb2, 4)) + dot(o2_2, ldv_o(qb2, 8)) + dot(o2_3, ldv_o(qb2, 12)) + dot(o2_4, ldv_o(qb2, 16)) + dot(o2_5, ldv_o(qb2, 20)) + dot(o2_6, ldv_o(qb2, 24)) + dot(o2_7, ldv_o(qb2, 28));
    const float L2 = lse[(b * p.H + h) * S + min(r0 + 2, S - 1u)];
    if (L == 0u && r0 + 2 < S) delta[(b * p.H + h) * S + r0 + 2] = D2;
    const uint qb3 = ((b * S + min(r0 + 3, S - 1u)) * p.H + h) * p.D;
    const vec4 q3_0 = ldv_q(qb3, 0);
    vec4 a3_0 = vec4(0.0);
    const vec4 q3_1 = ldv_q(qb3, 4);
    vec4 a3_1 = vec4(0.0);
    const vec4 q3_2 = ldv_q(qb3, 8);
    vec4 a3_2 = vec4(0.0);
    const vec4 q3_3 = ldv_q(qb3, 12);
    vec4 a3_3 = vec4(0.0);
    const vec4 q3_4 = ldv_q(qb3, 16);
    vec4 a3_4 = vec4(0.0);
    const vec4 q3_5 = ldv_q(qb3, 20);
    vec4 a3_5 = vec4(0.0);
    const vec4 q3_6 = ldv_q(qb3, 24);
    vec4 a3_6 = vec4(0.0);
    const vec4 q3_7 = ldv_q(qb3, 28);
    vec4 a3_7 = vec4(0.0);
    const vec4 o3_0 = ldv_dout(qb3, 0);
    const vec4 o3_1 = ldv_dout(qb3, 4);
    const vec4 o3_2 = ldv_dout(qb3, 8);
    const vec4 o3_3 = ldv_dout(qb3, 12);
    const vec4 o3_4 = ldv_dout(qb3, 16);
    const vec4 o3_5 = ldv_dout(qb3, 20);
    const vec4 o3_6 = ldv_dout(qb3, 24);
    const vec4 o3_7 = ldv_dout(qb3, 28);
    const float D3 = dot(o3_0, ldv_o(qb3, 0)) + dot(o3_1, ldv_o(qb3, 4)) + dot(o3_2, ldv_o(qb3, 8)) + dot(o3_3, ldv_o(qb3, 12)) + dot(o3_4, ldv_o(qb3, 16)) + dot(o3_5, ldv_o(qb3, 20)) + dot(o3_6, ldv_o(qb3, 24)) + dot(o3_7, ldv_o(qb3, 28));
    const float L3 = lse[(b * p.H + h) * S + min(r0 + 3, S - 1u)];
    if (L == 0u && r0 + 3 < S) delta[(b * p.H + h) * S + r0 + 3] = D3;
    const uint qb4 = ((b * S + min(r0 + 4, S - 1u)) * p.H + h) * p.D;
    const vec4 q4_0 = ldv_q(qb4, 0);
    vec4 a4_0 = vec4(0.0);
    const vec4 q4_1 = ldv_q(qb4, 4);
    vec4 a4_1 = vec4(0.0);
    const vec4 q4_2 = ldv_q(qb4, 8);
    vec4 a4_2 = vec4(0.0);
    const vec4 q4_3 = ldv_q(qb4, 12);
    vec4 a4_3 = vec4(0.0);
    const vec4 q4_4 = ldv_q(qb4, 16);
    vec4 a4_4 = vec4(0.0);
    const vec4 q4_5 = ldv_q(qb4, 20);
    vec4 a4_5 = vec4(0.0);
    const vec4 q4_6 = ldv_q(qb4, 24);
    vec4 a4_6 = vec4(0.0);
    const vec4 q4_7 = ldv_q(qb4, 28);
    vec4 a4_7 = vec4(0.0);
    const vec4 o4_0 = ldv_dout(qb4, 0);
    const vec4 o4_1 = ldv_dout(qb4, 4);
    const vec4 o4_2 = ldv_dout(qb4, 8);
    const vec4 o4_3 = ldv_dout(qb4, 12);
    const vec4 o4_4 = ldv_dout(qb4, 16);
    const vec4 o4_5 = ldv_dout(qb4, 20);
    const vec4 o4_6 = ldv_dout(qb4, 24);
    const vec4 o4_7 = ldv_dout(qb4, 28);
    const float D4 = dot(o4_0, ldv_o(qb4, 0)) + dot(o4_1, ldv_o(qb4, 4)) + dot(o4_2, ldv_o(qb4, 8)) + dot(o4_3, ldv_o(qb4, 12)) + dot(o4_4, ldv_o(qb4, 16)) + dot(o4_5, ldv_o(qb4, 20)) + dot(o4_6, ldv_o(qb4, 24)) + dot(o4_7, ldv_o(qb4, 28));
    const float L4 = lse[(b * p.H + h) * S + min(r0 + 4, S - 1u)];
    if (L == 0u && r0 + 4 < S) delta[(b * p.H + h) * S + r0 + 4] = D4;
    const uint qb5 = ((b * S + min(r0 + 5, S - 1u)) * p.H + h) * p.D;
    const vec4 q5_0 = ldv_q(qb5, 0);
    vec4 a5_0 = vec4(0.0);
    const vec4 q5_1 = ldv_q(qb5, 4);
    vec4 a5_1 = vec4(0.0);
    const vec4 q5_2 = ldv_q(qb5, 8);
    vec4 a5_2 = vec4(0.0);
    const vec4 q5_3 = ldv_q(qb5, 12);
    vec4 a5_3 = vec4(0.0);
    const vec4 q5_4 = ldv_q(qb5, 16);
    vec4 a5_4 = vec4(0.0);
    const vec4 q5_5 = ldv_q(qb5, 20);
    vec4 a5_5 = vec4(0.0);
    const vec4 q5_6 = ldv_q(qb5, 24);
    vec4 a5_6 = vec4(0.0);
    const vec4 q5_7 = ldv_q(qb5, 28);
    vec4 a5_7 = vec4(0.0);
    const vec4 o5_0 = ldv_dout(qb5, 0);
    const vec4 o5_1 = ldv_dout(qb5, 4);
    const vec4 o5_2 = ldv_dout(qb5, 8);
    const vec4 o5_3 = ldv_dout(qb5, 12);
    const vec4 o5_4 = ldv_dout(qb5, 16);
    const vec4 o5_5 = ldv_dout(qb5, 20);
    const vec4 o5_6 = ldv_dout(qb5, 24);
    const vec4 o5_7 = ldv_dout(qb5, 28);
    const float D5 = dot(o5_0, ldv_o(qb5, 0)) + dot(o5_1, ldv_o(qb5, 4)) + dot(o5_2, ldv_o(qb5, 8)) + dot(o5_3, ldv_o(qb5, 12)) + dot(o5_4, ldv_o(qb5, 16)) + dot(o5_5, ldv_o(qb5, 20)) + dot(o5_6, ldv_o(qb5, 24)) + dot(o5_7, ldv_o(qb5, 28));
    const float L5 = lse[(b * p.H + h) * S + min(r0 + 5, S - 1u)];
    if (L == 0u && r0 + 5 < S) delta[(b * p.H + h) * S + r0 + 5] = D5;
    const uint qb6 = ((b * S + min(r0 + 6, S - 1u)) * p.H + h) * p.D;
    const vec4 q6_0 = ldv_q(qb6, 0);
    vec4 a6_0 = vec4(0.0);
    const vec4 q6_1 = ldv_q(qb6, 4);
    vec4 a6_1 = vec4(0.0);
    const vec4 q6_2 = ldv_q(qb6, 8);
    vec4 a6_2 = vec4(0.0);
    const vec4 q6_3 = ldv_q(qb6, 12);
    vec4 a6_3 = vec4(0.0);
    const vec4 q6_4 = ldv_q(qb6, 16);
    vec4 a6_4 = vec4(0.0);
    const vec4 q6_5 = ldv_q(qb6, 20);
    vec4 a6_5 = vec4(0.0);
    const vec4 q6_6 = ldv_q(qb6, 24);
    vec4 a6_6 = vec4(0.0);
    const vec4 q6_7 = ldv_q(qb6, 28);
    vec4 a6_7 = vec4(0.0);
    const vec4 o6_0 = ldv_dout(qb6, 0);
    const vec4 o6_1 = ldv_dout(qb6, 4);
    const vec4 o6_2 = ldv_dout(qb6, 8);
    const vec4 o6_3 = ldv_dout(qb6, 12);
    const vec4 o6_4 = ldv_dout(qb6, 16);
    const vec4 o6_5 = ldv_dout(qb6, 20);
    const vec4 o6_6 = ldv_dout(qb6, 24);
    const vec4 o6_7 = ldv_dout(qb6, 28);
    const float D6 = dot(o6_0, ldv_o(qb6, 0)) + dot(o6_1, ldv_o(qb6, 4)) + dot(o6_2, ldv_o(qb6, 8)) + dot(o6_3, ldv_o(qb6, 12)) + dot(o6_4, ldv_o(qb6, 16)) + dot(o6_5, ldv_o(qb6, 20)) + dot(o6_6, ldv_o(qb6, 24)) + dot(o6_7, ldv_o(qb6, 28));
    const float L6 = lse[(b * p.H + h) * S + min(r0 + 6, S - 1u)];
    if (L == 0u && r0 + 6 < S) delta[(b * p.H + h) * S + r0 + 6] = D6;
    const uint qb7 = ((b * S + min(r0 + 7, S - 1u)) * p.H + h) * p.D;
    const vec4 q7_0 = ldv_q(qb7, 0);
    vec4 a7_0 = vec4(0.0);
    const vec4 q7_1 = ldv_q(qb7, 4);
    vec4 a7_1 = vec4(0.0);
    const vec4 q7_2 = ldv_q(qb7, 8);
    vec4 a7_2 = vec4(0.0);
    const vec4 q7_3 = ldv_q(qb7, 12);
    vec4 a7_3 = vec4(0.0);
    const vec4 q7_4 = ldv_q(qb7, 16);
    vec4 a7_4 = vec4(0.0);
    const vec4 q7_5 = ldv_q(qb7, 20);
    vec4 a7_5 = vec4(0.0);
    const vec4 q7_6 = ldv_q(qb7, 24);
    vec4 a7_6 = vec4(0.0);
    const vec4 q7_7 = ldv_q(qb7, 28);
    vec4 a7_7 = vec4(0.0);
    const vec4 o7_0 = ldv_dout(qb7, 0);
    const vec4 o7_1 = ldv_dout(qb7, 4);
    const vec4 o7_2 = ldv_dout(qb7, 8);
    const vec4 o7_3 = ldv_dout(qb7, 12);
    const vec4 o7_4 = ldv_dout(qb7, 16);
    const vec4 o7_5 = ldv_dout(qb7, 20);
    const vec4 o7_6 = ldv_dout(qb7, 24);
    const vec4 o7_7 = ldv_dout(qb7, 28);
    const float D7 = dot(o7_0, ldv_o(qb7, 0)) + dot(o7_1, ldv_o(qb7, 4)) + dot(o7_2, ldv_o(qb7, 8)) + dot(o7_3, ldv_o(qb7, 12)) + dot(o7_4, ldv_o(qb7, 16)) + dot(o7_5, ldv_o(qb7, 20)) + dot(o7_6, ldv_o(qb7, 24)) + dot(o7_7, ldv_o(qb7, 28));
    const float L7 = lse[(b * p.H + h) * S + min(r0 + 7, S - 1u)];
    if (L == 0u && r0 + 7 < S) delta[(b * p.H + h) * S + r0 + 7] = D7;
    const uint qb8 = ((b * S + min(r0 + 8, S - 1u)) * p.H + h) * p.D;
    const vec4 q8_0 = ldv_q(qb8, 0);
    vec4 a8_0 = vec4(0.0);
    const vec4 q8_1 = ldv_q(qb8, 4);
    vec4 a8_1 = vec4(0.0);
    const vec4 q8_2 = ldv_q(qb8, 8);
    vec4 a8_2 = vec4(0.0);
    const vec4 q8_3 = ldv_q(qb8, 12);
    vec4 a8_3 = vec4(0.0);
    const vec4 q8_4 = ldv_q(qb8, 16);
    vec4 a8_4 = vec4(0.0);
    const vec4 q8_5 = ldv_q(qb8, 20);
    vec4 a8_5 = vec4(0.0);
    const vec4 q8_6 = ldv_q(qb8, 24);
    vec4 a8_6 = vec4(0.0);
    const vec4 q8_7 = ldv_q(qb8, 28);
    vec4 a8_7 = vec4(0.0);
    const vec4 o8_0 = ldv_dout(qb8, 0);
    const vec4 o8_1 = ldv_dout(qb8, 4);
    const vec4 o8_2 = ldv_dout(qb8, 8);
    const vec4 o8_3 = ldv_dout(qb8, 12);
    const vec4 o8_4 = ldv_dout(qb8, 16);
    const vec4 o8_5 = ldv_dout(qb8, 20);
    const vec4 o8_6 = ldv_dout(qb8, 24);
    const vec4 o8_7 = ldv_dout(qb8, 28);
    const float D8 = dot(o8_0, ldv_o(qb8, 0)) + dot(o8_1, ldv_o(qb8, 4)) + dot(o8_2, ldv_o(qb8, 8)) + dot(o8_3, ldv_o(qb8, 12)) + dot(o8_4, ldv_o(qb8, 16)) + dot(o8_5, ldv_o(qb8, 20)) + dot(o8_6, ldv_o(qb8, 24)) + dot(o8_7, ldv_o(qb8, 28));
    const float L8 = lse[(b * p.H + h) * S + min(r0 + 8, S - 1u)];
    if (L == 0u && r0 + 8 < S) delta[(b * p.H + h) * S + r0 + 8] = D8;
    const uint qb9 = ((b * S + min(r0 + 9, S - 1u)) * p.H + h) * p.D;
    const vec4 q9_0 = ldv_q(qb9, 0);
    vec4 a9_0 = vec4(0.0);
    const vec4 q9_1 = ldv_q(qb9, 4);
    vec4 a9_1 = vec4(0.0);
    const vec4 q9_2 = ldv_q(qb9, 8);
    vec4 a9_2 = vec4(0.0);
    const vec4 q9_3 = ldv_q(qb9, 12);
    vec4 a9_3 = vec4(0.0);
    const vec4 q9_4 = ldv_q(qb9, 16);
    vec4 a9_4 = vec4(0.0);
    const vec4 q9_5 = ldv_q(qb9, 20);
    vec4 a9_5 = vec4(0.0);
    const vec4 q9_6 = ldv_q(qb9, 24);
    vec4 a9_6 = vec4(0.0);
    const vec4 q9_7 = ldv_q(qb9, 28);
    vec4 a9_7 = vec4(0.0);
    const vec4 o9_0 = ldv_dout(qb9, 0);
    const vec4 o9_1 = ldv_dout(qb9, 4);
    const vec4 o9_2 = ldv_dout(qb9, 8);
    const vec4 o9_3 = ldv_dout(qb9, 12);
    const vec4 o9_4 = ldv_dout(qb9, 16);
    const vec4 o9_5 = ldv_dout(qb9, 20);
    const vec4 o9_6 = ldv_dout(qb9, 24);
    const vec4 o9_7 = ldv_dout(qb9, 28);
    const float D9 = dot(o9_0, ldv_o(qb9, 0)) + dot(o9_1, ldv_o(qb9, 4)) + dot(o9_2, ldv_o(qb9, 8)) + dot(o9_3, ldv_o(qb9, 12)) + dot(o9_4, ldv_o(qb9, 16)) + dot(o9_5, ldv_o(qb9, 20)) + dot(o9_6, ldv_o(qb9, 24)) + dot(o9_7, ldv_o(qb9, 28));
    const float L9 = lse[(b * p.H + h) * S + min(r0 + 9, S - 1u)];
    if (L == 0u && r0 + 9 < S) delta[(b * p.H + h) * S + r0 + 9] = D9;
    const uint qb10 = ((b * S + min(r0 + 10, S - 1u)) * p.H + h) * p.D;
    const vec4 q10_0 = ldv_q(qb10, 0);
    vec4 a10_0 = vec4(0.0);
    const vec4 q10_1 = ldv_q(qb10, 4);
    vec4 a10_1 = vec4(0.0);
    const vec4 q10_2 = ldv_q(qb10, 8);
    vec4 a10_2 = vec4(0.0);
    const vec4 q10_3 = ldv_q(qb10, 12);
    vec4 a10_3 = vec4(0.0);
    const vec4 q10_4 = ldv_q(qb10, 16);
    vec4 a10_4 = vec4(0.0);
    const vec4 q10_5 = ldv_q(qb10, 20);
    vec4 a10_5 = vec4(0.0);
    const vec4 q10_6 = ldv_q(qb10, 24);
    vec4 a10_6 = vec4(0.0);
    const vec4 q10_7 = ldv_q(qb10, 28);
    vec4 a10_7 = vec4(0.0);
    const vec4 o10_0 = ldv_dout(qb10, 0);
    const vec4 o10_1 = ldv_dout(qb10, 4);
    const vec4 o10_2 = ldv_dout(qb10, 8);
    const vec4 o10_3 = ldv_dout(qb10, 12);
    const vec4 o10_4 = ldv_dout(qb10, 16);
    const vec4 o10_5 = ldv_dout(qb10, 20);
    const vec4 o10_6 = ldv_dout(qb10, 24);
    const vec4 o10_7 = ldv_dout(qb10, 28);
    const float D10 = dot(o10_0, ldv_o(qb10, 0)) + dot(o10_1, ldv_o(qb10, 4)) + dot(o10_2, ldv_o(qb10, 8)) + dot(o10_3, ldv_o(qb10, 12)) + dot(o10_4, ldv_o(qb10, 16)) + dot(o10_5, ldv_o(qb10, 20)) + dot(o10_6, ldv_o(qb10, 24)) + dot(o10_7, ldv_o(qb10, 28));
    const float L10 = lse[(b * p.H + h) * S + min(r0 + 10, S - 1u)];
    if (L == 0u && r0 + 10 < S) delta[(b * p.H + h) * S + r0 + 10] = D10;
    const uint qb11 = ((b * S + min(r0 + 11, S - 1u)) * p.H + h) * p.D;
    const vec4 q11_0 = ldv_q(qb11, 0);
    vec4 a11_0 = vec4(0.0);
    const vec4 q11_1 = ldv_q(qb11, 4);
    vec4 a11_1 = vec4(0.0);
    const vec4 q11_2 = ldv_q(qb11, 8);
    vec4 a11_2 = vec4(0.0);
    const vec4 q11_3 = ldv_q(qb11, 12);
    vec4 a11_3 = vec4(0.0);
    const vec4 q11_4 = ldv_q(qb11, 16);
    vec4 a11_4 = vec4(0.0);
    const vec4 q11_5 = ldv_q(qb11, 20);
    vec4 a11_5 = vec4(0.0);
    const vec4 q11_6 = ldv_q(qb11, 24);
    vec4 a11_6 = vec4(0.0);
    const vec4 q11_7 = ldv_q(qb11, 28);
    vec4 a11_7 = vec4(0.0);
    const vec4 o11_0 = ldv_dout(qb11, 0);
    const vec4 o11_1 = ldv_dout(qb11, 4);
    const vec4 o11_2 = ldv_dout(qb11, 8);
    const vec4 o11_3 = ldv_dout(qb11, 12);
    const vec4 o11_4 = ldv_dout(qb11, 16);
    const vec4 o11_5 = ldv_dout(qb11, 20);
    const vec4 o11_6 = ldv_dout(qb11, 24);
    const vec4 o11_7 = ldv_dout(qb11, 28);
    const float D11 = dot(o11_0, ldv_o(qb11, 0)) + dot(o11_1, ldv_o(qb11, 4)) + dot(o11_2, ldv_o(qb11, 8)) + dot(o11_3, ldv_o(qb11, 12)) + dot(o11_4, ldv_o(qb11, 16)) + dot(o11_5, ldv_o(qb11, 20)) + dot(o11_6, ldv_o(qb11, 24)) + dot(o11_7, ldv_o(qb11, 28));
    const float L11 = lse[(b * p.H + h) * S + min(r0 + 11, S - 1u)];
    if (L == 0u && r0 + 11 < S) delta[(b * p.H + h) * S + r0 + 11] = D11;
    const uint qb12 = ((b * S + min(r0 + 12, S - 1u)) * p.H + h) * p.D;
    const vec4 q12_0 = ldv_q(qb12, 0);
    vec4 a12_0 = vec4(0.0);
    const vec4 q12_1 = ldv_q(qb12, 4);
    vec4 a12_1 = vec4(0.0);
    const vec4 q12_2 = ldv_q(qb12, 8);
    vec4 a12_2 = vec4(0.0);
    const vec4 q12_3 = ldv_q(qb12, 12);
    vec4 a12_3 = vec4(0.0);
    const vec4 q12_4 = ldv_q(qb12, 16);
    vec4 a12_4 = vec4(0.0);
    const vec4 q12_5 = ldv_q(qb12, 20);
    vec4 a12_5 = vec4(0.0);
    const vec4 q12_6 = ldv_q(qb12, 24);
    vec4 a12_6 = vec4(0.0);
    const vec4 q12_7 = ldv_q(qb12, 28);
    vec4 a12_7 = vec4(0.0);
    const vec4 o12_0 = ldv_dout(qb12, 0);
    const vec4 o12_1 = ldv_dout(qb12, 4);
    const vec4 o12_2 = ldv_dout(qb12, 8);
    const vec4 o12_3 = ldv_dout(qb12, 12);
    const vec4 o12_4 = ldv_dout(qb12, 16);
    const vec4 o12_5 = ldv_dout(qb12, 20);
    const vec4 o12_6 = ldv_dout(qb12, 24);
    const vec4 o12_7 = ldv_dout(qb12, 28);
    const float D12 = dot(o12_0, ldv_o(qb12, 0)) + dot(o12_1, ldv_o(qb12, 4)) + dot(o12_2, ldv_o(qb12, 8)) + dot(o12_3, ldv_o(qb12, 12)) + dot(o12_4, ldv_o(qb12, 16)) + dot(o12_5, ldv_o(qb12, 20)) + dot(o12_6, ldv_o(qb12, 24)) + dot(o12_7, ldv_o(qb12, 28));
    const float L12 = lse[(b * p.H + h) * S + min(r0 + 12, S - 1u)];
    if (L == 0u && r0 + 12 < S) delta[(b * p.H + h) * S + r0 + 12] = D12;
    const uint qb13 = ((b * S + min(r0 + 13, S - 1u)) * p.H + h) * p.D;
    const vec4 q13_0 = ldv_q(qb13, 0);
    vec4 a13_0 = vec4(0.0);
    const vec4 q13_1 = ldv_q(qb13, 4);
    vec4 a13_1 = vec4(0.0);
    const vec4 q13_2 = ldv_q(qb13, 8);
    vec4 a13_2 = vec4(0.0);
    const vec4 q13_3 = ldv_q(qb13, 12);
    vec4 a13_3 = vec4(0.0);
    const vec4 q13_4 = ldv_q(qb13, 16);
    vec4 a13_4 = vec4(0.0);
    const vec4 q13_5 = ldv_q(qb13, 20);
    vec4 a13_5 = vec4(0.0);
    const vec4 q13_6 = ldv_q(qb13, 24);
    vec4 a13_6 = vec4(0.0);
    const vec4 q13_7 = ldv_q(qb13, 28);
    vec4 a13_7 = vec4(0.0);
    const vec4 o13_0 = ldv_dout(qb13, 0);
    const vec4 o13_1 = ldv_dout(qb13, 4);
    const vec4 o13_2 = ldv_dout(qb13, 8);
    const vec4 o13_3 = ldv_dout(qb13, 12);
    const vec4 o13_4 = ldv_dout(qb13, 16);
    const vec4 o13_5 = ldv_dout(qb13, 20);
    const vec4 o13_6 = ldv_dout(qb13, 24);
    const vec4 o13_7 = ldv_dout(qb13, 28);
    const float D13 = dot(o13_0, ldv_o(qb13, 0)) + dot(o13_1, ldv_o(qb13, 4)) + dot(o13_2, ldv_o(qb13, 8)) + dot(o13_3, ldv_o(qb13, 12)) + dot(o13_4, ldv_o(qb13, 16)) + dot(o13_5, ldv_o(qb13, 20)) + dot(o13_6, ldv_o(qb13, 24)) + dot(o13_7, ldv_o(qb13, 28));
    const float L13 = lse[(b * p.H + h) * S + min(r0 + 13, S - 1u)];
    if (L == 0u && r0 + 13 < S) delta[(b * p.H + h) * S + r0 + 13] = D13;
    const uint qb14 = ((b * S + min(r0 + 14, S - 1u)) * p.H + h) * p.D;
    const vec4 q14_0 = ldv_q(qb14, 0);
    vec4 a14_0 = vec4(0.0);
    const vec4 q14_1 = ldv_q(qb14, 4);
    vec4 a14_1 = vec4(0.0);
    const vec4 q14_2 = ldv_q(qb14, 8);
    vec4 a14_2 = vec4(0.0);
    const vec4 q14_3 = ldv_q(qb14, 12);
    vec4 a14_3 = vec4(0.0);
    const vec4 q14_4 = ldv_q(qb14, 16);
    vec4 a14_4 = vec4(0.0);
    const vec4 q14_5 = ldv_q(qb14, 20);
    vec4 a14_5 = vec4(0.0);
    const vec4 q14_6 = ldv_q(qb14, 24);
    vec4 a14_6 = vec4(0.0);
    const vec4 q14_7 = ldv_q(qb14, 28);
    vec4 a14_7 = vec4(0.0);
    const vec4 o14_0 = ldv_dout(qb14, 0);
    const vec4 o14_1 = ldv_dout(qb14, 4);
    const vec4 o14_2 = ldv_dout(qb14, 8);
    const vec4 o14_3 = ldv_dout(qb14, 12);
    const vec4 o14_4 = ldv_dout(qb14, 16);
    const vec4 o14_5 = ldv_dout(qb14, 20);
    const vec4 o14_6 = ldv_dout(qb14, 24);
    const vec4 o14_7 = ldv_dout(qb14, 28);
    const float D14 = dot(o14_0, ldv_o(qb14, 0)) + dot(o14_1, ldv_o(qb14, 4)) + dot(o14_2, ldv_o(qb14, 8)) + dot(o14_3, ldv_o(qb14, 12)) + dot(o14_4, ldv_o(qb14, 16)) + dot(o14_5, ldv_o(qb14, 20)) + dot(o14_6, ldv_o(qb14, 24)) + dot(o14_7, ldv_o(qb14, 28));
    const float L14 = lse[(b * p.H + h) * S + min(r0 + 14, S - 1u)];
    if (L == 0u && r0 + 14 < S) delta[(b * p.H + h) * S + r0 + 14] = D14;
    const uint qb15 = ((b * S + min(r0 + 15, S - 1u)) * p.H + h) * p.D;
    const vec4 q15_0 = ldv_q(qb15, 0);
    vec4 a15_0 = vec4(0.0);
    const vec4 q15_1 = ldv_q(qb15, 4);
    vec4 a15_1 = vec4(0.0);
    const vec4 q15_2 = ldv_q(qb15, 8);
    vec4 a15_2 = vec4(0.0);
    const vec4 q15_3 = ldv_q(qb15, 12);
    vec4 a15_3 = vec4(0.0);
    const vec4 q15_4 = ldv_q(qb15, 16);
    vec4 a15_4 = vec4(0.0);
    const vec4 q15_5 = ldv_q(qb15, 20);
    vec4 a15_5 = vec4(0.0);
    const vec4 q15_6 = ldv_q(qb15, 24);
    vec4 a15_6 = vec4(0.0);
    const vec4 q15_7 = ldv_q(qb15, 28);
    vec4 a15_7 = vec4(0.0);
    const vec4 o15_0 = ldv_dout(qb15, 0);
    const vec4 o15_1 = ldv_dout(qb15, 4);
    const vec4 o15_2 = ldv_dout(qb15, 8);
    const vec4 o15_3 = ldv_dout(qb15, 12);
    const vec4 o15_4 = ldv_dout(qb15, 16);
    const vec4 o15_5 = ldv_dout(qb15, 20);
    const vec4 o15_6 = ldv_dout(qb15, 24);
    const vec4 o15_7 = ldv_dout(qb15, 28);
    const float D15 = dot(o15_0, ldv_o(qb15, 0)) + dot(o15_1, ldv_o(qb15, 4)) + dot(o15_2, ldv_o(qb15, 8)) + dot(o15_3, ldv_o(qb15, 12)) + dot(o15_4, ldv_o(qb15, 16)) + dot(o15_5, ldv_o(qb15, 20)) + dot(o15_6, ldv_o(qb15, 24)) + dot(o15_7, ldv_o(qb15, 28));
    const float L15 = lse[(b * p.H + h) * S + min(r0 + 15, S - 1u)];
    if (L == 0u && r0 + 15 < S) delta[(b * p.H + h) * S + r0 + 15] = D15;
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
                const float w = vis ? exp2((dot(q0_0, k0) + dot(q0_1, k1) + dot(q0_2, k2) + dot(q0_3, k3) + dot(q0_4, k4) + dot(q0_5, k5) + dot(q0_6, k6) + dot(q0_7, k7)) * c - L0) * ((dot(o0_0, v0) + dot(o0_1, v1) + dot(o0_2, v2) + dot(o0_3, v3) + dot(o0_4, v4) + dot(o0_5, v5) + dot(o0_6, v6) + dot(o0_7, v7)) - D0) : 0.0;
                a0_0 += w * k0;
                a0_1 += w * k1;
                a0_2 += w * k2;
                a0_3 += w * k3;
                a0_4 += w * k4;
                a0_5 += w * k5;
                a0_6 += w * k6;
                a0_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 1);
                const float w = vis ? exp2((dot(q1_0, k0) + dot(q1_1, k1) + dot(q1_2, k2) + dot(q1_3, k3) + dot(q1_4, k4) + dot(q1_5, k5) + dot(q1_6, k6) + dot(q1_7, k7)) * c - L1) * ((dot(o1_0, v0) + dot(o1_1, v1) + dot(o1_2, v2) + dot(o1_3, v3) + dot(o1_4, v4) + dot(o1_5, v5) + dot(o1_6, v6) + dot(o1_7, v7)) - D1) : 0.0;
                a1_0 += w * k0;
                a1_1 += w * k1;
                a1_2 += w * k2;
                a1_3 += w * k3;
                a1_4 += w * k4;
                a1_5 += w * k5;
                a1_6 += w * k6;
                a1_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 2);
                const float w = vis ? exp2((dot(q2_0, k0) + dot(q2_1, k1) + dot(q2_2, k2) + dot(q2_3, k3) + dot(q2_4, k4) + dot(q2_5, k5) + dot(q2_6, k6) + dot(q2_7, k7)) * c - L2) * ((dot(o2_0, v0) + dot(o2_1, v1) + dot(o2_2, v2) + dot(o2_3, v3) + dot(o2_4, v4) + dot(o2_5, v5) + dot(o2_6, v6) + dot(o2_7, v7)) - D2) : 0.0;
                a2_0 += w * k0;
                a2_1 += w * k1;
                a2_2 += w * k2;
                a2_3 += w * k3;
                a2_4 += w * k4;
                a2_5 += w * k5;
                a2_6 += w * k6;
                a2_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 3);
                const float w = vis ? exp2((dot(q3_0, k0) + dot(q3_1, k1) + dot(q3_2, k2) + dot(q3_3, k3) + dot(q3_4, k4) + dot(q3_5, k5) + dot(q3_6, k6) + dot(q3_7, k7)) * c - L3) * ((dot(o3_0, v0) + dot(o3_1, v1) + dot(o3_2, v2) + dot(o3_3, v3) + dot(o3_4, v4) + dot(o3_5, v5) + dot(o3_6, v6) + dot(o3_7, v7)) - D3) : 0.0;
                a3_0 += w * k0;
                a3_1 += w * k1;
                a3_2 += w * k2;
                a3_3 += w * k3;
                a3_4 += w * k4;
                a3_5 += w * k5;
                a3_6 += w * k6;
                a3_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 4);
                const float w = vis ? exp2((dot(q4_0, k0) + dot(q4_1, k1) + dot(q4_2, k2) + dot(q4_3, k3) + dot(q4_4, k4) + dot(q4_5, k5) + dot(q4_6, k6) + dot(q4_7, k7)) * c - L4) * ((dot(o4_0, v0) + dot(o4_1, v1) + dot(o4_2, v2) + dot(o4_3, v3) + dot(o4_4, v4) + dot(o4_5, v5) + dot(o4_6, v6) + dot(o4_7, v7)) - D4) : 0.0;
                a4_0 += w * k0;
                a4_1 += w * k1;
                a4_2 += w * k2;
                a4_3 += w * k3;
                a4_4 += w * k4;
                a4_5 += w * k5;
                a4_6 += w * k6;
                a4_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 5);
                const float w = vis ? exp2((dot(q5_0, k0) + dot(q5_1, k1) + dot(q5_2, k2) + dot(q5_3, k3) + dot(q5_4, k4) + dot(q5_5, k5) + dot(q5_6, k6) + dot(q5_7, k7)) * c - L5) * ((dot(o5_0, v0) + dot(o5_1, v1) + dot(o5_2, v2) + dot(o5_3, v3) + dot(o5_4, v4) + dot(o5_5, v5) + dot(o5_6, v6) + dot(o5_7, v7)) - D5) : 0.0;
                a5_0 += w * k0;
                a5_1 += w * k1;
                a5_2 += w * k2;
                a5_3 += w * k3;
                a5_4 += w * k4;
                a5_5 += w * k5;
                a5_6 += w * k6;
                a5_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 6);
                const float w = vis ? exp2((dot(q6_0, k0) + dot(q6_1, k1) + dot(q6_2, k2) + dot(q6_3, k3) + dot(q6_4, k4) + dot(q6_5, k5) + dot(q6_6, k6) + dot(q6_7, k7)) * c - L6) * ((dot(o6_0, v0) + dot(o6_1, v1) + dot(o6_2, v2) + dot(o6_3, v3) + dot(o6_4, v4) + dot(o6_5, v5) + dot(o6_6, v6) + dot(o6_7, v7)) - D6) : 0.0;
                a6_0 += w * k0;
                a6_1 += w * k1;
                a6_2 += w * k2;
                a6_3 += w * k3;
                a6_4 += w * k4;
                a6_5 += w * k5;
                a6_6 += w * k6;
                a6_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 7);
                const float w = vis ? exp2((dot(q7_0, k0) + dot(q7_1, k1) + dot(q7_2, k2) + dot(q7_3, k3) + dot(q7_4, k4) + dot(q7_5, k5) + dot(q7_6, k6) + dot(q7_7, k7)) * c - L7) * ((dot(o7_0, v0) + dot(o7_1, v1) + dot(o7_2, v2) + dot(o7_3, v3) + dot(o7_4, v4) + dot(o7_5, v5) + dot(o7_6, v6) + dot(o7_7, v7)) - D7) : 0.0;
                a7_0 += w * k0;
                a7_1 += w * k1;
                a7_2 += w * k2;
                a7_3 += w * k3;
                a7_4 += w * k4;
                a7_5 += w * k5;
                a7_6 += w * k6;
                a7_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 8);
                const float w = vis ? exp2((dot(q8_0, k0) + dot(q8_1, k1) + dot(q8_2, k2) + dot(q8_3, k3) + dot(q8_4, k4) + dot(q8_5, k5) + dot(q8_6, k6) + dot(q8_7, k7)) * c - L8) * ((dot(o8_0, v0) + dot(o8_1, v1) + dot(o8_2, v2) + dot(o8_3, v3) + dot(o8_4, v4) + dot(o8_5, v5) + dot(o8_6, v6) + dot(o8_7, v7)) - D8) : 0.0;
                a8_0 += w * k0;
                a8_1 += w * k1;
                a8_2 += w * k2;
                a8_3 += w * k3;
                a8_4 += w * k4;
                a8_5 += w * k5;
                a8_6 += w * k6;
                a8_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 9);
                const float w = vis ? exp2((dot(q9_0, k0) + dot(q9_1, k1) + dot(q9_2, k2) + dot(q9_3, k3) + dot(q9_4, k4) + dot(q9_5, k5) + dot(q9_6, k6) + dot(q9_7, k7)) * c - L9) * ((dot(o9_0, v0) + dot(o9_1, v1) + dot(o9_2, v2) + dot(o9_3, v3) + dot(o9_4, v4) + dot(o9_5, v5) + dot(o9_6, v6) + dot(o9_7, v7)) - D9) : 0.0;
                a9_0 += w * k0;
                a9_1 += w * k1;
                a9_2 += w * k2;
                a9_3 += w * k3;
                a9_4 += w * k4;
                a9_5 += w * k5;
                a9_6 += w * k6;
                a9_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 10);
                const float w = vis ? exp2((dot(q10_0, k0) + dot(q10_1, k1) + dot(q10_2, k2) + dot(q10_3, k3) + dot(q10_4, k4) + dot(q10_5, k5) + dot(q10_6, k6) + dot(q10_7, k7)) * c - L10) * ((dot(o10_0, v0) + dot(o10_1, v1) + dot(o10_2, v2) + dot(o10_3, v3) + dot(o10_4, v4) + dot(o10_5, v5) + dot(o10_6, v6) + dot(o10_7, v7)) - D10) : 0.0;
                a10_0 += w * k0;
                a10_1 += w * k1;
                a10_2 += w * k2;
                a10_3 += w * k3;
                a10_4 += w * k4;
                a10_5 += w * k5;
                a10_6 += w * k6;
                a10_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 11);
                const float w = vis ? exp2((dot(q11_0, k0) + dot(q11_1, k1) + dot(q11_2, k2) + dot(q11_3, k3) + dot(q11_4, k4) + dot(q11_5, k5) + dot(q11_6, k6) + dot(q11_7, k7)) * c - L11) * ((dot(o11_0, v0) + dot(o11_1, v1) + dot(o11_2, v2) + dot(o11_3, v3) + dot(o11_4, v4) + dot(o11_5, v5) + dot(o11_6, v6) + dot(o11_7, v7)) - D11) : 0.0;
                a11_0 += w * k0;
                a11_1 += w * k1;
                a11_2 += w * k2;
                a11_3 += w * k3;
                a11_4 += w * k4;
                a11_5 += w * k5;
                a11_6 += w * k6;
                a11_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 12);
                const float w = vis ? exp2((dot(q12_0, k0) + dot(q12_1, k1) + dot(q12_2, k2) + dot(q12_3, k3) + dot(q12_4, k4) + dot(q12_5, k5) + dot(q12_6, k6) + dot(q12_7, k7)) * c - L12) * ((dot(o12_0, v0) + dot(o12_1, v1) + dot(o12_2, v2) + dot(o12_3, v3) + dot(o12_4, v4) + dot(o12_5, v5) + dot(o12_6, v6) + dot(o12_7, v7)) - D12) : 0.0;
                a12_0 += w * k0;
                a12_1 += w * k1;
                a12_2 += w * k2;
                a12_3 += w * k3;
                a12_4 += w * k4;
                a12_5 += w * k5;
                a12_6 += w * k6;
                a12_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 13);
                const float w = vis ? exp2((dot(q13_0, k0) + dot(q13_1, k1) + dot(q13_2, k2) + dot(q13_3, k3) + dot(q13_4, k4) + dot(q13_5, k5) + dot(q13_6, k6) + dot(q13_7, k7)) * c - L13) * ((dot(o13_0, v0) + dot(o13_1, v1) + dot(o13_2, v2) + dot(o13_3, v3) + dot(o13_4, v4) + dot(o13_5, v5) + dot(o13_6, v6) + dot(o13_7, v7)) - D13) : 0.0;
                a13_0 += w * k0;
                a13_1 += w * k1;
                a13_2 += w * k2;
                a13_3 += w * k3;
                a13_4 += w * k4;
                a13_5 += w * k5;
                a13_6 += w * k6;
                a13_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 14);
                const float w = vis ? exp2((dot(q14_0, k0) + dot(q14_1, k1) + dot(q14_2, k2) + dot(q14_3, k3) + dot(q14_4, k4) + dot(q14_5, k5) + dot(q14_6, k6) + dot(q14_7, k7)) * c - L14) * ((dot(o14_0, v0) + dot(o14_1, v1) + dot(o14_2, v2) + dot(o14_3, v3) + dot(o14_4, v4) + dot(o14_5, v5) + dot(o14_6, v6) + dot(o14_7, v7)) - D14) : 0.0;
                a14_0 += w * k0;
                a14_1 += w * k1;
                a14_2 += w * k2;
                a14_3 += w * k3;
                a14_4 += w * k4;
                a14_5 += w * k5;
                a14_6 += w * k6;
                a14_7 += w * k7;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 15);
                const float w = vis ? exp2((dot(q15_0, k0) + dot(q15_1, k1) + dot(q15_2, k2) + dot(q15_3, k3) + dot(q15_4, k4) + dot(q15_5, k5) + dot(q15_6, k6) + dot(q15_7, k7)) * c - L15) * ((dot(o15_0, v0) + dot(o15_1, v1) + dot(o15_2, v2) + dot(o15_3, v3) + dot(o15_4, v4) + dot(o15_5, v5) + dot(o15_6, v6) + dot(o15_7, v7)) - D15) : 0.0;
                a15_0 += w * k0;
                a15_1 += w * k1;
                a15_2 += w * k2;
                a15_3 += w * k3;
                a15_4 += w * k4;
                a15_5 += w * k5;
                a15_6 += w * k6;
                a15_7 += w * k7;
            }
        }
    }
    const vec4 as0_0 = subgroupAdd(a0_0);
    const vec4 as0_1 = subgroupAdd(a0_1);
    const vec4 as0_2 = subgroupAdd(a0_2);
    const vec4 as0_3 = subgroupAdd(a0_3);
    const vec4 as0_4 = subgroupAdd(a0_4);
    const vec4 as0_5 = subgroupAdd(a0_5);
    const vec4 as0_6 = subgroupAdd(a0_6);
    const vec4 as0_7 = subgroupAdd(a0_7);
    const vec4 as1_0 = subgroupAdd(a1_0);
    const vec4 as1_1 = subgroupAdd(a1_1);
    const vec4 as1_2 = subgroupAdd(a1_2);
    const vec4 as1_3 = subgroupAdd(a1_3);
    const vec4 as1_4 = subgroupAdd(a1_4);
    const vec4 as1_5 = subgroupAdd(a1_5);
    const vec4 as1_6 = subgroupAdd(a1_6);
    const vec4 as1_7 = subgroupAdd(a1_7);
    const vec4 as2_0 = subgroupAdd(a2_0);
    const vec4 as2_1 = subgroupAdd(a2_1);
    const vec4 as2_2 = subgroupAdd(a2_2);
    const vec4 as2_3 = subgroupAdd(a2_3);
    const vec4 as2_4 = subgroupAdd(a2_4);
    const vec4 as2_5 = subgroupAdd(a2_5);
    const vec4 as2_6 = subgroupAdd(a2_6);
    const vec4 as2_7 = subgroupAdd(a2_7);
    const vec4 as3_0 = subgroupAdd(a3_0);
    const vec4 as3_1 = subgroupAdd(a3_1);
    const vec4 as3_2 = subgroupAdd(a3_2);
    const vec4 as3_3 = subgroupAdd(a3_3);
    const vec4 as3_4 = subgroupAdd(a3_4);
    const vec4 as3_5 = subgroupAdd(a3_5);
    const vec4 as3_6 = subgroupAdd(a3_6);
    const vec4 as3_7 = subgroupAdd(a3_7);
    const vec4 as4_0 = subgroupAdd(a4_0);
    const vec4 as4_1 = subgroupAdd(a4_1);
    const vec4 as4_2 = subgroupAdd(a4_2);
    const vec4 as4_3 = subgroupAdd(a4_3);
    const vec4 as4_4 = subgroupAdd(a4_4);
    const vec4 as4_5 = subgroupAdd(a4_5);
    const vec4 as4_6 = subgroupAdd(a4_6);
    const vec4 as4_7 = subgroupAdd(a4_7);
    const vec4 as5_0 = subgroupAdd(a5_0);
    const vec4 as5_1 = subgroupAdd(a5_1);
    const vec4 as5_2 = subgroupAdd(a5_2);
    const vec4 as5_3 = subgroupAdd(a5_3);
    const vec4 as5_4 = subgroupAdd(a5_4);
    const vec4 as5_5 = subgroupAdd(a5_5);
    const vec4 as5_6 = subgroupAdd(a5_6);
    const vec4 as5_7 = subgroupAdd(a5_7);
    const vec4 as6_0 = subgroupAdd(a6_0);
    const vec4 as6_1 = subgroupAdd(a6_1);
    const vec4 as6_2 = subgroupAdd(a6_2);
    const vec4 as6_3 = subgroupAdd(a6_3);
    const vec4 as6_4 = subgroupAdd(a6_4);
    const vec4 as6_5 = subgroupAdd(a6_5);
    const vec4 as6_6 = subgroupAdd(a6_6);
    const vec4 as6_7 = subgroupAdd(a6_7);
    const vec4 as7_0 = subgroupAdd(a7_0);
    const vec4 as7_1 = subgroupAdd(a7_1);
    const vec4 as7_2 = subgroupAdd(a7_2);
    const vec4 as7_3 = subgroupAdd(a7_3);
    const vec4 as7_4 = subgroupAdd(a7_4);
    const vec4 as7_5 = subgroupAdd(a7_5);
    const vec4 as7_6 = subgroupAdd(a7_6);
    const vec4 as7_7 = subgroupAdd(a7_7);
    const vec4 as8_0 = subgroupAdd(a8_0);
    const vec4 as8_1 = subgroupAdd(a8_1);
    const vec4 as8_2 = subgroupAdd(a8_2);
    const vec4 as8_3 = subgroupAdd(a8_3);
    const vec4 as8_4 = subgroupAdd(a8_4);
    const vec4 as8_5 = subgroupAdd(a8_5);
    const vec4 as8_6 = subgroupAdd(a8_6);
    const vec4 as8_7 = subgroupAdd(a8_7);
    const vec4 as9_0 = subgroupAdd(a9_0);
    const vec4 as9_1 = subgroupAdd(a9_1);
    const vec4 as9_2 = subgroupAdd(a9_2);
    const vec4 as9_3 = subgroupAdd(a9_3);
    const vec4 as9_4 = subgroupAdd(a9_4);
    const vec4 as9_5 = subgroupAdd(a9_5);
    const vec4 as9_6 = subgroupAdd(a9_6);
    const vec4 as9_7 = subgroupAdd(a9_7);
    const vec4 as10_0 = subgroupAdd(a10_0);
    const vec4 as10_1 = subgroupAdd(a10_1);
    const vec4 as10_2 = subgroupAdd(a10_2);
    const vec4 as10_3 = subgroupAdd(a10_3);
    const vec4 as10_4 = subgroupAdd(a10_4);
    const vec4 as10_5 = subgroupAdd(a10_5);
    const vec4 as10_6 = subgroupAdd(a10_6);
    const vec4 as10_7 = subgroupAdd(a10_7);
    const vec4 as11_0 = subgroupAdd(a11_0);
    const vec4 as11_1 = subgroupAdd(a11_1);
    const vec4 as11_2 = subgroupAdd(a11_2);
    const vec4 as11_3 = subgroupAdd(a11_3);
    const vec4 as11_4 = subgroupAdd(a11_4);
    const vec4 as11_5 = subgroupAdd(a11_5);
    const vec4 as11_6 = subgroupAdd(a11_6);
    const vec4 as11_7 = subgroupAdd(a11_7);
    const vec4 as12_0 = subgroupAdd(a12_0);
    const vec4 as12_1 = subgroupAdd(a12_1);
    const vec4 as12_2 = subgroupAdd(a12_2);
    const vec4 as12_3 = subgroupAdd(a12_3);
    const vec4 as12_4 = subgroupAdd(a12_4);
    const vec4 as12_5 = subgroupAdd(a12_5);
    const vec4 as12_6 = subgroupAdd(a12_6);
    const vec4 as12_7 = subgroupAdd(a12_7);
    const vec4 as13_0 = subgroupAdd(a13_0);
    const vec4 as13_1 = subgroupAdd(a13_1);
    const vec4 as13_2 = subgroupAdd(a13_2);
    const vec4 as13_3 = subgroupAdd(a13_3);
    const vec4 as13_4 = subgroupAdd(a13_4);
    const vec4 as13_5 = subgroupAdd(a13_5);
    const vec4 as13_6 = subgroupAdd(a13_6);
    const vec4 as13_7 = subgroupAdd(a13_7);
    const vec4 as14_0 = subgroupAdd(a14_0);
    const vec4 as14_1 = subgroupAdd(a14_1);
    const vec4 as14_2 = subgroupAdd(a14_2);
    const vec4 as14_3 = subgroupAdd(a14_3);
    const vec4 as14_4 = subgroupAdd(a14_4);
    const vec4 as14_5 = subgroupAdd(a14_5);
    const vec4 as14_6 = subgroupAdd(a14_6);
    const vec4 as14_7 = subgroupAdd(a14_7);
    const vec4 as15_0 = subgroupAdd(a15_0);
    const vec4 as15_1 = subgroupAdd(a15_1);
    const vec4 as15_2 = subgroupAdd(a15_2);
    const vec4 as15_3 = subgroupAdd(a15_3);
    const vec4 as15_4 = subgroupAdd(a15_4);
    const vec4 as15_5 = subgroupAdd(a15_5);
    const vec4 as15_6 = subgroupAdd(a15_6);
    const vec4 as15_7 = subgroupAdd(a15_7);
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
        if (row < S) {
            const uint ob = ((b * S + row) * p.H + h) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dq(ob, 4 * e, o[e] * p.scale);
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
        if (row < S) {
            const uint ob = ((b * S + row) * p.H + h) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dq(ob, 4 * e, o[e] * p.scale);
        }

    }

}
