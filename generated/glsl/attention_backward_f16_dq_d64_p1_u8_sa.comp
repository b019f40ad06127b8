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
    const vec4 q0_8 = ldv_q(qb0, 32);
    vec4 a0_8 = vec4(0.0);
    const vec4 q0_9 = ldv_q(qb0, 36);
    vec4 a0_9 = vec4(0.0);
    const vec4 q0_10 = ldv_q(qb0, 40);
    vec4 a0_10 = vec4(0.0);
    const vec4 q0_11 = ldv_q(qb0, 44);
    vec4 a0_11 = vec4(0.0);
    const vec4 q0_12 = ldv_q(qb0, 48);
    vec4 a0_12 = vec4(0.0);
    const vec4 q0_13 = ldv_q(qb0, 52);
    vec4 a0_13 = vec4(0.0);
    const vec4 q0_14 = ldv_q(qb0, 56);
    vec4 a0_14 = vec4(0.0);
    const vec4 q0_15 = ldv_q(qb0, 60);
    vec4 a0_15 = vec4(0.0);
    const vec4 o0_0 = ldv_dout(qb0, 0);
    const vec4 o0_1 = ldv_dout(qb0, 4);
    const vec4 o0_2 = ldv_dout(qb0, 8);
    const vec4 o0_3 = ldv_dout(qb0, 12);
    const vec4 o0_4 = ldv_dout(qb0, 16);
    const vec4 o0_5 = ldv_dout(qb0, 20);
    const vec4 o0_6 = ldv_dout(qb0, 24);
    const vec4 o0_7 = ldv_dout(qb0, 28);
    const vec4 o0_8 = ldv_dout(qb0, 32);
    const vec4 o0_9 = ldv_dout(qb0, 36);
    const vec4 o0_10 = ldv_dout(qb0, 40);
    const vec4 o0_11 = ldv_dout(qb0, 44);
    const vec4 o0_12 = ldv_dout(qb0, 48);
    const vec4 o0_13 = ldv_dout(qb0, 52);
    const vec4 o0_14 = ldv_dout(qb0, 56);
    const vec4 o0_15 = ldv_dout(qb0, 60);
    const float D0 = dot(o0_0, ldv_o(qb0, 0)) + dot(o0_1, ldv_o(qb0, 4)) + dot(o0_2, ldv_o(qb0, 8)) + dot(o0_3, ldv_o(qb0, 12)) + dot(o0_4, ldv_o(qb0, 16)) + dot(o0_5, ldv_o(qb0, 20)) + dot(o0_6, ldv_o(qb0, 24)) + dot(o0_7, ldv_o(qb0, 28)) + dot(o0_8, ldv_o(qb0, 32)) + dot(o0_9, ldv_o(qb0, 36)) + dot(o0_10, ldv_o(qb0, 40)) + dot(o0_11, ldv_o(qb0, 44)) + dot(o0_12, ldv_o(qb0, 48)) + dot(o0_13, ldv_o(qb0, 52)) + dot(o0_14, ldv_o(qb0, 56)) + dot(o0_15, ldv_o(qb0, 60));
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
    const vec4 q1_8 = ldv_q(qb1, 32);
    vec4 a1_8 = vec4(0.0);
    const vec4 q1_9 = ldv_q(qb1, 36);
    vec4 a1_9 = vec4(0.0);
    const vec4 q1_10 = ldv_q(qb1, 40);
    vec4 a1_10 = vec4(0.0);
    const vec4 q1_11 = ldv_q(qb1, 44);
    vec4 a1_11 = vec4(0.0);
    const vec4 q1_12 = ldv_q(qb1, 48);
    vec4 a1_12 = vec4(0.0);
    const vec4 q1_13 = ldv_q(qb1, 52);
    vec4 a1_13 = vec4(0.0);
    const vec4 q1_14 = ldv_q(qb1, 56);
    vec4 a1_14 = vec4(0.0);
    const vec4 q1_15 = ldv_q(qb1, 60);
    vec4 a1_15 = vec4(0.0);
    const vec4 o1_0 = ldv_dout(qb1, 0);
    const vec4 o1_1 = ldv_dout(qb1, 4);
    const vec4 o1_2 = ldv_dout(qb1, 8);
    const vec4 o1_3 = ldv_dout(qb1, 12);
    const vec4 o1_4 = ldv_dout(qb1, 16);
    const vec4 o1_5 = ldv_dout(qb1, 20);
    const vec4 o1_6 = ldv_dout(qb1, 24);
    const vec4 o1_7 = ldv_dout(qb1, 28);
    const vec4 o1_8 = ldv_dout(qb1, 32);
    const vec4 o1_9 = ldv_dout(qb1, 36);
    const vec4 o1_10 = ldv_dout(qb1, 40);
    const vec4 o1_11 = ldv_dout(qb1, 44);
    const vec4 o1_12 = ldv_dout(qb1, 48);
    const vec4 o1_13 = ldv_dout(qb1, 52);
    const vec4 o1_14 = ldv_dout(qb1, 56);
    const vec4 o1_15 = ldv_dout(qb1, 60);
    const float D1 = dot(o1_0, ldv_o(qb1, 0)) + dot(o1_1, ldv_o(qb1, 4)) + dot(o1_2, ldv_o(qb1, 8)) + dot(o1_3, ldv_o(qb1, 12)) + dot(o1_4, ldv_o(qb1, 16)) + dot(o1_5, ldv_o(qb1, 20)) + dot(o1_6, ldv_o(qb1, 24)) + dot(o1_7, ldv_o(qb1, 28)) + dot(o1_8, ldv_o(qb1, 32)) + dot(o1_9, ldv_o(qb1, 36)) + dot(o1_10, ldv_o(qb1, 40)) + dot(o1_11, ldv_o(qb1, 44)) + dot(o1_12, ldv_o(qb1, 48)) + dot(o1_13, ldv_o(qb1, 52)) + dot(o1_14, ldv_o(qb1, 56)) + dot(o1_15, ldv_o(qb1, 60));
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
    const vec4 q2_8 = ldv_q(qb2, 32);
    vec4 a2_8 = vec4(0.0);
    const vec4 q2_9 = ldv_q(qb2, 36);
    vec4 a2_9 = vec4(0.0);
    const vec4 q2_10 = ldv_q(qb2, 40);
    vec4 a2_10 = vec4(0.0);
    const vec4 q2_11 = ldv_q(qb2, 44);
    vec4 a2_11 = vec4(0.0);
    const vec4 q2_12 = ldv_q(qb2, 48);
    vec4 a2_12 = vec4(0.0);
    const vec4 q2_13 = ldv_q(qb2, 52);
    vec4 a2_13 = vec4(0.0);
    const vec4 q2_14 = ldv_q(qb2, 56);
    vec4 a2_14 = vec4(0.0);
    const vec4 q2_15 = ldv_q(qb2, 60);
    vec4 a2_15 = vec4(0.0);
    const vec4 o2_0 = ldv_dout(qb2, 0);
    const vec4 o2_1 = ldv_dout(qb2, 4);
    const vec4 o2_2 = ldv_dout(qb2, 8);
    const vec4 o2_3 = ldv_dout(qb2, 12);
    const vec4 o2_4 = ldv_dout(qb2, 16);
    const vec4 o2_5 = ldv_dout(qb2, 20);
    const vec4 o2_6 = ldv_dout(qb2, 24);
    const vec4 o2_7 = ldv_dout(qb2, 28);
    const vec4 o2_8 = ldv_dout(qb2, 32);
    const vec4 o2_9 = ldv_dout(qb2, 36);
    const vec4 o2_10 = ldv_dout(qb2, 40);
    const vec4 o2_11 = ldv_dout(qb2, 44);
    const vec4 o2_12 = ldv_dout(qb2, 48);
    const vec4 o2_13 = ldv_dout(qb2, 52);
    const vec4 o2_14 = ldv_dout(qb2, 56);
    const vec4 o2_15 = ldv_dout(qb2, 60);
    const float D2 = dot(o2_0, ldv_o(qb2, 0)) + dot(o2_1, ldv_o(qb2, 4)) + dot(o2_2, ldv_o(qb2, 8)) + dot(o2_3, ldv_o(qb2, 12)) + dot(o2_4, ldv_o(qb2, 16)) + dot(o2_5, ldv_o(qb2, 20)) + dot(o2_6, ldv_o(qb2, 24)) + dot(o2_7, ldv_o(qb2, 28)) + dot(o2_8, ldv_o(qb2, 32)) + dot(o2_9, ldv_o(qb2, 36)) + dot(o2_10, ldv_o(qb2, 40)) + dot(o2_11, ldv_o(qb2, 44)) + dot(o2_12, ldv_o(qb2, 48)) + dot(o2_13, ldv_o(qb2, 52)) + dot(o2_14, ldv_o(qb2, 56)) + dot(o2_15, ldv_o(qb2, 60));
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
    const vec4 q3_8 = ldv_q(qb3, 32);
    vec4 a3_8 = vec4(0.0);
    const vec4 q3_9 = ldv_q(qb3, 36);
    vec4 a3_9 = vec4(0.0);
    const vec4 q3_10 = ldv_q(qb3, 40);
    vec4 a3_10 = vec4(0.0);
    const vec4 q3_11 = ldv_q(qb3, 44);
    vec4 a3_11 = vec4(0.0);
    const vec4 q3_12 = ldv_q(qb3, 48);
    vec4 a3_12 = vec4(0.0);
    const vec4 q3_13 = ldv_q(qb3, 52);
    vec4 a3_13 = vec4(0.0);
    const vec4 q3_14 = ldv_q(qb3, 56);
    vec4 a3_14 = vec4(0.0);
    const vec4 q3_15 = ldv_q(qb3, 60);
    vec4 a3_15 = vec4(0.0);
    const vec4 o3_0 = ldv_dout(qb3, 0);
    const vec4 o3_1 = ldv_dout(qb3, 4);
    const vec4 o3_2 = ldv_dout(qb3, 8);
    const vec4 o3_3 = ldv_dout(qb3, 12);
    const vec4 o3_4 = ldv_dout(qb3, 16);
    const vec4 o3_5 = ldv_dout(qb3, 20);
    const vec4 o3_6 = ldv_dout(qb3, 24);
    const vec4 o3_7 = ldv_dout(qb3, 28);
    const vec4 o3_8 = ldv_dout(qb3, 32);
    const vec4 o3_9 = ldv_dout(qb3, 36);
    const vec4 o3_10 = ldv_dout(qb3, 40);
    const vec4 o3_11 = ldv_dout(qb3, 44);
    const vec4 o3_12 = ldv_dout(qb3, 48);
    const vec4 o3_13 = ldv_dout(qb3, 52);
    const vec4 o3_14 = ldv_dout(qb3, 56);
    const vec4 o3_15 = ldv_dout(qb3, 60);
    const float D3 = dot(o3_0, ldv_o(qb3, 0)) + dot(o3_1, ldv_o(qb3, 4)) + dot(o3_2, ldv_o(qb3, 8)) + dot(o3_3, ldv_o(qb3, 12)) + dot(o3_4, ldv_o(qb3, 16)) + dot(o3_5, ldv_o(qb3, 20)) + dot(o3_6, ldv_o(qb3, 24)) + dot(o3_7, ldv_o(qb3, 28)) + dot(o3_8, ldv_o(qb3, 32)) + dot(o3_9, ldv_o(qb3, 36)) + dot(o3_10, ldv_o(qb3, 40)) + dot(o3_11, ldv_o(qb3, 44)) + dot(o3_12, ldv_o(qb3, 48)) + dot(o3_13, ldv_o(qb3, 52)) + dot(o3_14, ldv_o(qb3, 56)) + dot(o3_15, ldv_o(qb3, 60));
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
    const vec4 q4_8 = ldv_q(qb4, 32);
    vec4 a4_8 = vec4(0.0);
    const vec4 q4_9 = ldv_q(qb4, 36);
    vec4 a4_9 = vec4(0.0);
    const vec4 q4_10 = ldv_q(qb4, 40);
    vec4 a4_10 = vec4(0.0);
    const vec4 q4_11 = ldv_q(qb4, 44);
    vec4 a4_11 = vec4(0.0);
    const vec4 q4_12 = ldv_q(qb4, 48);
    vec4 a4_12 = vec4(0.0);
    const vec4 q4_13 = ldv_q(qb4, 52);
    vec4 a4_13 = vec4(0.0);
    const vec4 q4_14 = ldv_q(qb4, 56);
    vec4 a4_14 = vec4(0.0);
    const vec4 q4_15 = ldv_q(qb4, 60);
    vec4 a4_15 = vec4(0.0);
    const vec4 o4_0 = ldv_dout(qb4, 0);
    const vec4 o4_1 = ldv_dout(qb4, 4);
    const vec4 o4_2 = ldv_dout(qb4, 8);
    const vec4 o4_3 = ldv_dout(qb4, 12);
    const vec4 o4_4 = ldv_dout(qb4, 16);
    const vec4 o4_5 = ldv_dout(qb4, 20);
    const vec4 o4_6 = ldv_dout(qb4, 24);
    const vec4 o4_7 = ldv_dout(qb4, 28);
    const vec4 o4_8 = ldv_dout(qb4, 32);
    const vec4 o4_9 = ldv_dout(qb4, 36);
    const vec4 o4_10 = ldv_dout(qb4, 40);
    const vec4 o4_11 = ldv_dout(qb4, 44);
    const vec4 o4_12 = ldv_dout(qb4, 48);
    const vec4 o4_13 = ldv_dout(qb4, 52);
    const vec4 o4_14 = ldv_dout(qb4, 56);
    const vec4 o4_15 = ldv_dout(qb4, 60);
    const float D4 = dot(o4_0, ldv_o(qb4, 0)) + dot(o4_1, ldv_o(qb4, 4)) + dot(o4_2, ldv_o(qb4, 8)) + dot(o4_3, ldv_o(qb4, 12)) + dot(o4_4, ldv_o(qb4, 16)) + dot(o4_5, ldv_o(qb4, 20)) + dot(o4_6, ldv_o(qb4, 24)) + dot(o4_7, ldv_o(qb4, 28)) + dot(o4_8, ldv_o(qb4, 32)) + dot(o4_9, ldv_o(qb4, 36)) + dot(o4_10, ldv_o(qb4, 40)) + dot(o4_11, ldv_o(qb4, 44)) + dot(o4_12, ldv_o(qb4, 48)) + dot(o4_13, ldv_o(qb4, 52)) + dot(o4_14, ldv_o(qb4, 56)) + dot(o4_15, ldv_o(qb4, 60));
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
    const vec4 q5_8 = ldv_q(qb5, 32);
    vec4 a5_8 = vec4(0.0);
    const vec4 q5_9 = ldv_q(qb5, 36);
    vec4 a5_9 = vec4(0.0);
    const vec4 q5_10 = ldv_q(qb5, 40);
    vec4 a5_10 = vec4(0.0);
    const vec4 q5_11 = ldv_q(qb5, 44);
    vec4 a5_11 = vec4(0.0);
    const vec4 q5_12 = ldv_q(qb5, 48);
    vec4 a5_12 = vec4(0.0);
    const vec4 q5_13 = ldv_q(qb5, 52);
    vec4 a5_13 = vec4(0.0);
    const vec4 q5_14 = ldv_q(qb5, 56);
    vec4 a5_14 = vec4(0.0);
    const vec4 q5_15 = ldv_q(qb5, 60);
    vec4 a5_15 = vec4(0.0);
    const vec4 o5_0 = ldv_dout(qb5, 0);
    const vec4 o5_1 = ldv_dout(qb5, 4);
    const vec4 o5_2 = ldv_dout(qb5, 8);
    const vec4 o5_3 = ldv_dout(qb5, 12);
    const vec4 o5_4 = ldv_dout(qb5, 16);
    const vec4 o5_5 = ldv_dout(qb5, 20);
    const vec4 o5_6 = ldv_dout(qb5, 24);
    const vec4 o5_7 = ldv_dout(qb5, 28);
    const vec4 o5_8 = ldv_dout(qb5, 32);
    const vec4 o5_9 = ldv_dout(qb5, 36);
    const vec4 o5_10 = ldv_dout(qb5, 40);
    const vec4 o5_11 = ldv_dout(qb5, 44);
    const vec4 o5_12 = ldv_dout(qb5, 48);
    const vec4 o5_13 = ldv_dout(qb5, 52);
    const vec4 o5_14 = ldv_dout(qb5, 56);
    const vec4 o5_15 = ldv_dout(qb5, 60);
    const float D5 = dot(o5_0, ldv_o(qb5, 0)) + dot(o5_1, ldv_o(qb5, 4)) + dot(o5_2, ldv_o(qb5, 8)) + dot(o5_3, ldv_o(qb5, 12)) + dot(o5_4, ldv_o(qb5, 16)) + dot(o5_5, ldv_o(qb5, 20)) + dot(o5_6, ldv_o(qb5, 24)) + dot(o5_7, ldv_o(qb5, 28)) + dot(o5_8, ldv_o(qb5, 32)) + dot(o5_9, ldv_o(qb5, 36)) + dot(o5_10, ldv_o(qb5, 40)) + dot(o5_11, ldv_o(qb5, 44)) + dot(o5_12, ldv_o(qb5, 48)) + dot(o5_13, ldv_o(qb5, 52)) + dot(o5_14, ldv_o(qb5, 56)) + dot(o5_15, ldv_o(qb5, 60));
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
    const vec4 q6_8 = ldv_q(qb6, 32);
    vec4 a6_8 = vec4(0.0);
    const vec4 q6_9 = ldv_q(qb6, 36);
    vec4 a6_9 = vec4(0.0);
    const vec4 q6_10 = ldv_q(qb6, 40);
    vec4 a6_10 = vec4(0.0);
    const vec4 q6_11 = ldv_q(qb6, 44);
    vec4 a6_11 = vec4(0.0);
    const vec4 q6_12 = ldv_q(qb6, 48);
    vec4 a6_12 = vec4(0.0);
    const vec4 q6_13 = ldv_q(qb6, 52);
    vec4 a6_13 = vec4(0.0);
    const vec4 q6_14 = ldv_q(qb6, 56);
    vec4 a6_14 = vec4(0.0);
    const vec4 q6_15 = ldv_q(qb6, 60);
    vec4 a6_15 = vec4(0.0);
    const vec4 o6_0 = ldv_dout(qb6, 0);
    const vec4 o6_1 = ldv_dout(qb6, 4);
    const vec4 o6_2 = ldv_dout(qb6, 8);
    const vec4 o6_3 = ldv_dout(qb6, 12);
    const vec4 o6_4 = ldv_dout(qb6, 16);
    const vec4 o6_5 = ldv_dout(qb6, 20);
    const vec4 o6_6 = ldv_dout(qb6, 24);
    const vec4 o6_7 = ldv_dout(qb6, 28);
    const vec4 o6_8 = ldv_dout(qb6, 32);
    const vec4 o6_9 = ldv_dout(qb6, 36);
    const vec4 o6_10 = ldv_dout(qb6, 40);
    const vec4 o6_11 = ldv_dout(qb6, 44);
    const vec4 o6_12 = ldv_dout(qb6, 48);
    const vec4 o6_13 = ldv_dout(qb6, 52);
    const vec4 o6_14 = ldv_dout(qb6, 56);
    const vec4 o6_15 = ldv_dout(qb6, 60);
    const float D6 = dot(o6_0, ldv_o(qb6, 0)) + dot(o6_1, ldv_o(qb6, 4)) + dot(o6_2, ldv_o(qb6, 8)) + dot(o6_3, ldv_o(qb6, 12)) + dot(o6_4, ldv_o(qb6, 16)) + dot(o6_5, ldv_o(qb6, 20)) + dot(o6_6, ldv_o(qb6, 24)) + dot(o6_7, ldv_o(qb6, 28)) + dot(o6_8, ldv_o(qb6, 32)) + dot(o6_9, ldv_o(qb6, 36)) + dot(o6_10, ldv_o(qb6, 40)) + dot(o6_11, ldv_o(qb6, 44)) + dot(o6_12, ldv_o(qb6, 48)) + dot(o6_13, ldv_o(qb6, 52)) + dot(o6_14, ldv_o(qb6, 56)) + dot(o6_15, ldv_o(qb6, 60));
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
    const vec4 q7_8 = ldv_q(qb7, 32);
    vec4 a7_8 = vec4(0.0);
    const vec4 q7_9 = ldv_q(qb7, 36);
    vec4 a7_9 = vec4(0.0);
    const vec4 q7_10 = ldv_q(qb7, 40);
    vec4 a7_10 = vec4(0.0);
    const vec4 q7_11 = ldv_q(qb7, 44);
    vec4 a7_11 = vec4(0.0);
    const vec4 q7_12 = ldv_q(qb7, 48);
    vec4 a7_12 = vec4(0.0);
    const vec4 q7_13 = ldv_q(qb7, 52);
    vec4 a7_13 = vec4(0.0);
    const vec4 q7_14 = ldv_q(qb7, 56);
    vec4 a7_14 = vec4(0.0);
    const vec4 q7_15 = ldv_q(qb7, 60);
    vec4 a7_15 = vec4(0.0);
    const vec4 o7_0 = ldv_dout(qb7, 0);
    const vec4 o7_1 = ldv_dout(qb7, 4);
    const vec4 o7_2 = ldv_dout(qb7, 8);
    const vec4 o7_3 = ldv_dout(qb7, 12);
    const vec4 o7_4 = ldv_dout(qb7, 16);
    const vec4 o7_5 = ldv_dout(qb7, 20);
    const vec4 o7_6 = ldv_dout(qb7, 24);
    const vec4 o7_7 = ldv_dout(qb7, 28);
    const vec4 o7_8 = ldv_dout(qb7, 32);
    const vec4 o7_9 = ldv_dout(qb7, 36);
    const vec4 o7_10 = ldv_dout(qb7, 40);
    const vec4 o7_11 = ldv_dout(qb7, 44);
    const vec4 o7_12 = ldv_dout(qb7, 48);
    const vec4 o7_13 = ldv_dout(qb7, 52);
    const vec4 o7_14 = ldv_dout(qb7, 56);
    const vec4 o7_15 = ldv_dout(qb7, 60);
    const float D7 = dot(o7_0, ldv_o(qb7, 0)) + dot(o7_1, ldv_o(qb7, 4)) + dot(o7_2, ldv_o(qb7, 8)) + dot(o7_3, ldv_o(qb7, 12)) + dot(o7_4, ldv_o(qb7, 16)) + dot(o7_5, ldv_o(qb7, 20)) + dot(o7_6, ldv_o(qb7, 24)) + dot(o7_7, ldv_o(qb7, 28)) + dot(o7_8, ldv_o(qb7, 32)) + dot(o7_9, ldv_o(qb7, 36)) + dot(o7_10, ldv_o(qb7, 40)) + dot(o7_11, ldv_o(qb7, 44)) + dot(o7_12, ldv_o(qb7, 48)) + dot(o7_13, ldv_o(qb7, 52)) + dot(o7_14, ldv_o(qb7, 56)) + dot(o7_15, ldv_o(qb7, 60));
    const float L7 = lse[(b * p.H + h) * S + min(r0 + 7, S - 1u)];
    if (L == 0u && r0 + 7 < S) delta[(b * p.H + h) * S + r0 + 7] = D7;
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
                const float w = vis ? exp2((dot(q0_0, k0) + dot(q0_1, k1) + dot(q0_2, k2) + dot(q0_3, k3) + dot(q0_4, k4) + dot(q0_5, k5) + dot(q0_6, k6) + dot(q0_7, k7) + dot(q0_8, k8) + dot(q0_9, k9) + dot(q0_10, k10) + dot(q0_11, k11) + dot(q0_12, k12) + dot(q0_13, k13) + dot(q0_14, k14) + dot(q0_15, k15)) * c - L0) * ((dot(o0_0, v0) + dot(o0_1, v1) + dot(o0_2, v2) + dot(o0_3, v3) + dot(o0_4, v4) + dot(o0_5, v5) + dot(o0_6, v6) + dot(o0_7, v7) + dot(o0_8, v8) + dot(o0_9, v9) + dot(o0_10, v10) + dot(o0_11, v11) + dot(o0_12, v12) + dot(o0_13, v13) + dot(o0_14, v14) + dot(o0_15, v15)) - D0) : 0.0;
                a0_0 += w * k0;
                a0_1 += w * k1;
                a0_2 += w * k2;
                a0_3 += w * k3;
                a0_4 += w * k4;
                a0_5 += w * k5;
                a0_6 += w * k6;
                a0_7 += w * k7;
                a0_8 += w * k8;
                a0_9 += w * k9;
                a0_10 += w * k10;
                a0_11 += w * k11;
                a0_12 += w * k12;
                a0_13 += w * k13;
                a0_14 += w * k14;
                a0_15 += w * k15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 1);
                const float w = vis ? exp2((dot(q1_0, k0) + dot(q1_1, k1) + dot(q1_2, k2) + dot(q1_3, k3) + dot(q1_4, k4) + dot(q1_5, k5) + dot(q1_6, k6) + dot(q1_7, k7) + dot(q1_8, k8) + dot(q1_9, k9) + dot(q1_10, k10) + dot(q1_11, k11) + dot(q1_12, k12) + dot(q1_13, k13) + dot(q1_14, k14) + dot(q1_15, k15)) * c - L1) * ((dot(o1_0, v0) + dot(o1_1, v1) + dot(o1_2, v2) + dot(o1_3, v3) + dot(o1_4, v4) + dot(o1_5, v5) + dot(o1_6, v6) + dot(o1_7, v7) + dot(o1_8, v8) + dot(o1_9, v9) + dot(o1_10, v10) + dot(o1_11, v11) + dot(o1_12, v12) + dot(o1_13, v13) + dot(o1_14, v14) + dot(o1_15, v15)) - D1) : 0.0;
                a1_0 += w * k0;
                a1_1 += w * k1;
                a1_2 += w * k2;
                a1_3 += w * k3;
                a1_4 += w * k4;
                a1_5 += w * k5;
                a1_6 += w * k6;
                a1_7 += w * k7;
                a1_8 += w * k8;
                a1_9 += w * k9;
                a1_10 += w * k10;
                a1_11 += w * k11;
                a1_12 += w * k12;
                a1_13 += w * k13;
                a1_14 += w * k14;
                a1_15 += w * k15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 2);
                const float w = vis ? exp2((dot(q2_0, k0) + dot(q2_1, k1) + dot(q2_2, k2) + dot(q2_3, k3) + dot(q2_4, k4) + dot(q2_5, k5) + dot(q2_6, k6) + dot(q2_7, k7) + dot(q2_8, k8) + dot(q2_9, k9) + dot(q2_10, k10) + dot(q2_11, k11) + dot(q2_12, k12) + dot(q2_13, k13) + dot(q2_14, k14) + dot(q2_15, k15)) * c - L2) * ((dot(o2_0, v0) + dot(o2_1, v1) + dot(o2_2, v2) + dot(o2_3, v3) + dot(o2_4, v4) + dot(o2_5, v5) + dot(o2_6, v6) + dot(o2_7, v7) + dot(o2_8, v8) + dot(o2_9, v9) + dot(o2_10, v10) + dot(o2_11, v11) + dot(o2_12, v12) + dot(o2_13, v13) + dot(o2_14, v14) + dot(o2_15, v15)) - D2) : 0.0;
                a2_0 += w * k0;
                a2_1 += w * k1;
                a2_2 += w * k2;
                a2_3 += w * k3;
                a2_4 += w * k4;
                a2_5 += w * k5;
                a2_6 += w * k6;
                a2_7 += w * k7;
                a2_8 += w * k8;
                a2_9 += w * k9;
                a2_10 += w * k10;
                a2_11 += w * k11;
                a2_12 += w * k12;
                a2_13 += w * k13;
                a2_14 += w * k14;
                a2_15 += w * k15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 3);
                const float w = vis ? exp2((dot(q3_0, k0) + dot(q3_1, k1) + dot(q3_2, k2) + dot(q3_3, k3) + dot(q3_4, k4) + dot(q3_5, k5) + dot(q3_6, k6) + dot(q3_7, k7) + dot(q3_8, k8) + dot(q3_9, k9) + dot(q3_10, k10) + dot(q3_11, k11) + dot(q3_12, k12) + dot(q3_13, k13) + dot(q3_14, k14) + dot(q3_15, k15)) * c - L3) * ((dot(o3_0, v0) + dot(o3_1, v1) + dot(o3_2, v2) + dot(o3_3, v3) + dot(o3_4, v4) + dot(o3_5, v5) + dot(o3_6, v6) + dot(o3_7, v7) + dot(o3_8, v8) + dot(o3_9, v9) + dot(o3_10, v10) + dot(o3_11, v11) + dot(o3_12, v12) + dot(o3_13, v13) + dot(o3_14, v14) + dot(o3_15, v15)) - D3) : 0.0;
                a3_0 += w * k0;
                a3_1 += w * k1;
                a3_2 += w * k2;
                a3_3 += w * k3;
                a3_4 += w * k4;
                a3_5 += w * k5;
                a3_6 += w * k6;
                a3_7 += w * k7;
                a3_8 += w * k8;
                a3_9 += w * k9;
                a3_10 += w * k10;
                a3_11 += w * k11;
                a3_12 += w * k12;
                a3_13 += w * k13;
                a3_14 += w * k14;
                a3_15 += w * k15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 4);
                const float w = vis ? exp2((dot(q4_0, k0) + dot(q4_1, k1) + dot(q4_2, k2) + dot(q4_3, k3) + dot(q4_4, k4) + dot(q4_5, k5) + dot(q4_6, k6) + dot(q4_7, k7) + dot(q4_8, k8) + dot(q4_9, k9) + dot(q4_10, k10) + dot(q4_11, k11) + dot(q4_12, k12) + dot(q4_13, k13) + dot(q4_14, k14) + dot(q4_15, k15)) * c - L4) * ((dot(o4_0, v0) + dot(o4_1, v1) + dot(o4_2, v2) + dot(o4_3, v3) + dot(o4_4, v4) + dot(o4_5, v5) + dot(o4_6, v6) + dot(o4_7, v7) + dot(o4_8, v8) + dot(o4_9, v9) + dot(o4_10, v10) + dot(o4_11, v11) + dot(o4_12, v12) + dot(o4_13, v13) + dot(o4_14, v14) + dot(o4_15, v15)) - D4) : 0.0;
                a4_0 += w * k0;
                a4_1 += w * k1;
                a4_2 += w * k2;
                a4_3 += w * k3;
                a4_4 += w * k4;
                a4_5 += w * k5;
                a4_6 += w * k6;
                a4_7 += w * k7;
                a4_8 += w * k8;
                a4_9 += w * k9;
                a4_10 += w * k10;
                a4_11 += w * k11;
                a4_12 += w * k12;
                a4_13 += w * k13;
                a4_14 += w * k14;
                a4_15 += w * k15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 5);
                const float w = vis ? exp2((dot(q5_0, k0) + dot(q5_1, k1) + dot(q5_2, k2) + dot(q5_3, k3) + dot(q5_4, k4) + dot(q5_5, k5) + dot(q5_6, k6) + dot(q5_7, k7) + dot(q5_8, k8) + dot(q5_9, k9) + dot(q5_10, k10) + dot(q5_11, k11) + dot(q5_12, k12) + dot(q5_13, k13) + dot(q5_14, k14) + dot(q5_15, k15)) * c - L5) * ((dot(o5_0, v0) + dot(o5_1, v1) + dot(o5_2, v2) + dot(o5_3, v3) + dot(o5_4, v4) + dot(o5_5, v5) + dot(o5_6, v6) + dot(o5_7, v7) + dot(o5_8, v8) + dot(o5_9, v9) + dot(o5_10, v10) + dot(o5_11, v11) + dot(o5_12, v12) + dot(o5_13, v13) + dot(o5_14, v14) + dot(o5_15, v15)) - D5) : 0.0;
                a5_0 += w * k0;
                a5_1 += w * k1;
                a5_2 += w * k2;
                a5_3 += w * k3;
                a5_4 += w * k4;
                a5_5 += w * k5;
                a5_6 += w * k6;
                a5_7 += w * k7;
                a5_8 += w * k8;
                a5_9 += w * k9;
                a5_10 += w * k10;
                a5_11 += w * k11;
                a5_12 += w * k12;
                a5_13 += w * k13;
                a5_14 += w * k14;
                a5_15 += w * k15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 6);
                const float w = vis ? exp2((dot(q6_0, k0) + dot(q6_1, k1) + dot(q6_2, k2) + dot(q6_3, k3) + dot(q6_4, k4) + dot(q6_5, k5) + dot(q6_6, k6) + dot(q6_7, k7) + dot(q6_8, k8) + dot(q6_9, k9) + dot(q6_10, k10) + dot(q6_11, k11) + dot(q6_12, k12) + dot(q6_13, k13) + dot(q6_14, k14) + dot(q6_15, k15)) * c - L6) * ((dot(o6_0, v0) + dot(o6_1, v1) + dot(o6_2, v2) + dot(o6_3, v3) + dot(o6_4, v4) + dot(o6_5, v5) + dot(o6_6, v6) + dot(o6_7, v7) + dot(o6_8, v8) + dot(o6_9, v9) + dot(o6_10, v10) + dot(o6_11, v11) + dot(o6_12, v12) + dot(o6_13, v13) + dot(o6_14, v14) + dot(o6_15, v15)) - D6) : 0.0;
                a6_0 += w * k0;
                a6_1 += w * k1;
                a6_2 += w * k2;
                a6_3 += w * k3;
                a6_4 += w * k4;
                a6_5 += w * k5;
                a6_6 += w * k6;
                a6_7 += w * k7;
                a6_8 += w * k8;
                a6_9 += w * k9;
                a6_10 += w * k10;
                a6_11 += w * k11;
                a6_12 += w * k12;
                a6_13 += w * k13;
                a6_14 += w * k14;
                a6_15 += w * k15;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 7);
                const float w = vis ? exp2((dot(q7_0, k0) + dot(q7_1, k1) + dot(q7_2, k2) + dot(q7_3, k3) + dot(q7_4, k4) + dot(q7_5, k5) + dot(q7_6, k6) + dot(q7_7, k7) + dot(q7_8, k8) + dot(q7_9, k9) + dot(q7_10, k10) + dot(q7_11, k11) + dot(q7_12, k12) + dot(q7_13, k13) + dot(q7_14, k14) + dot(q7_15, k15)) * c - L7) * ((dot(o7_0, v0) + dot(o7_1, v1) + dot(o7_2, v2) + dot(o7_3, v3) + dot(o7_4, v4) + dot(o7_5, v5) + dot(o7_6, v6) + dot(o7_7, v7) + dot(o7_8, v8) + dot(o7_9, v9) + dot(o7_10, v10) + dot(o7_11, v11) + dot(o7_12, v12) + dot(o7_13, v13) + dot(o7_14, v14) + dot(o7_15, v15)) - D7) : 0.0;
                a7_0 += w * k0;
                a7_1 += w * k1;
                a7_2 += w * k2;
                a7_3 += w * k3;
                a7_4 += w * k4;
                a7_5 += w * k5;
                a7_6 += w * k6;
                a7_7 += w * k7;
                a7_8 += w * k8;
                a7_9 += w * k9;
                a7_10 += w * k10;
                a7_11 += w * k11;
                a7_12 += w * k12;
                a7_13 += w * k13;
                a7_14 += w * k14;
                a7_15 += w * k15;
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
    const vec4 as0_8 = subgroupAdd(a0_8);
    const vec4 as0_9 = subgroupAdd(a0_9);
    const vec4 as0_10 = subgroupAdd(a0_10);
    const vec4 as0_11 = subgroupAdd(a0_11);
    const vec4 as0_12 = subgroupAdd(a0_12);
    const vec4 as0_13 = subgroupAdd(a0_13);
    const vec4 as0_14 = subgroupAdd(a0_14);
    const vec4 as0_15 = subgroupAdd(a0_15);
    const vec4 as1_0 = subgroupAdd(a1_0);
    const vec4 as1_1 = subgroupAdd(a1_1);
    const vec4 as1_2 = subgroupAdd(a1_2);
    const vec4 as1_3 = subgroupAdd(a1_3);
    const vec4 as1_4 = subgroupAdd(a1_4);
    const vec4 as1_5 = subgroupAdd(a1_5);
    const vec4 as1_6 = subgroupAdd(a1_6);
    const vec4 as1_7 = subgroupAdd(a1_7);
    const vec4 as1_8 = subgroupAdd(a1_8);
    const vec4 as1_9 = subgroupAdd(a1_9);
    const vec4 as1_10 = subgroupAdd(a1_10);
    const vec4 as1_11 = subgroupAdd(a1_11);
    const vec4 as1_12 = subgroupAdd(a1_12);
    const vec4 as1_13 = subgroupAdd(a1_13);
    const vec4 as1_14 = subgroupAdd(a1_14);
    const vec4 as1_15 = subgroupAdd(a1_15);
    const vec4 as2_0 = subgroupAdd(a2_0);
    const vec4 as2_1 = subgroupAdd(a2_1);
    const vec4 as2_2 = subgroupAdd(a2_2);
    const vec4 as2_3 = subgroupAdd(a2_3);
    const vec4 as2_4 = subgroupAdd(a2_4);
    const vec4 as2_5 = subgroupAdd(a2_5);
    const vec4 as2_6 = subgroupAdd(a2_6);
    const vec4 as2_7 = subgroupAdd(a2_7);
    const vec4 as2_8 = subgroupAdd(a2_8);
    const vec4 as2_9 = subgroupAdd(a2_9);
    const vec4 as2_10 = subgroupAdd(a2_10);
    const vec4 as2_11 = subgroupAdd(a2_11);
    const vec4 as2_12 = subgroupAdd(a2_12);
    const vec4 as2_13 = subgroupAdd(a2_13);
    const vec4 as2_14 = subgroupAdd(a2_14);
    const vec4 as2_15 = subgroupAdd(a2_15);
    const vec4 as3_0 = subgroupAdd(a3_0);
    const vec4 as3_1 = subgroupAdd(a3_1);
    const vec4 as3_2 = subgroupAdd(a3_2);
    const vec4 as3_3 = subgroupAdd(a3_3);
    const vec4 as3_4 = subgroupAdd(a3_4);
    const vec4 as3_5 = subgroupAdd(a3_5);
    const vec4 as3_6 = subgroupAdd(a3_6);
    const vec4 as3_7 = subgroupAdd(a3_7);
    const vec4 as3_8 = subgroupAdd(a3_8);
    const vec4 as3_9 = subgroupAdd(a3_9);
    const vec4 as3_10 = subgroupAdd(a3_10);
    const vec4 as3_11 = subgroupAdd(a3_11);
    const vec4 as3_12 = subgroupAdd(a3_12);
    const vec4 as3_13 = subgroupAdd(a3_13);
    const vec4 as3_14 = subgroupAdd(a3_14);
    const vec4 as3_15 = subgroupAdd(a3_15);
    const vec4 as4_0 = subgroupAdd(a4_0);
    const vec4 as4_1 = subgroupAdd(a4_1);
    const vec4 as4_2 = subgroupAdd(a4_2);
    const vec4 as4_3 = subgroupAdd(a4_3);
    const vec4 as4_4 = subgroupAdd(a4_4);
    const vec4 as4_5 = subgroupAdd(a4_5);
    const vec4 as4_6 = subgroupAdd(a4_6);
    const vec4 as4_7 = subgroupAdd(a4_7);
    const vec4 as4_8 = subgroupAdd(a4_8);
    const vec4 as4_9 = subgroupAdd(a4_9);
    const vec4 as4_10 = subgroupAdd(a4_10);
    const vec4 as4_11 = subgroupAdd(a4_11);
    const vec4 as4_12 = subgroupAdd(a4_12);
    const vec4 as4_13 = subgroupAdd(a4_13);
    const vec4 as4_14 = subgroupAdd(a4_14);
    const vec4 as4_15 = subgroupAdd(a4_15);
    const vec4 as5_0 = subgroupAdd(a5_0);
    const vec4 as5_1 = subgroupAdd(a5_1);
    const vec4 as5_2 = subgroupAdd(a5_2);
    const vec4 as5_3 = subgroupAdd(a5_3);
    const vec4 as5_4 = subgroupAdd(a5_4);
    const vec4 as5_5 = subgroupAdd(a5_5);
    const vec4 as5_6 = subgroupAdd(a5_6);
    const vec4 as5_7 = subgroupAdd(a5_7);
    const vec4 as5_8 = subgroupAdd(a5_8);
    const vec4 as5_9 = subgroupAdd(a5_9);
    const vec4 as5_10 = subgroupAdd(a5_10);
    const vec4 as5_11 = subgroupAdd(a5_11);
    const vec4 as5_12 = subgroupAdd(a5_12);
    const vec4 as5_13 = subgroupAdd(a5_13);
    const vec4 as5_14 = subgroupAdd(a5_14);
    const vec4 as5_15 = subgroupAdd(a5_15);
    const vec4 as6_0 = subgroupAdd(a6_0);
    const vec4 as6_1 = subgroupAdd(a6_1);
    const vec4 as6_2 = subgroupAdd(a6_2);
    const vec4 as6_3 = subgroupAdd(a6_3);
    const vec4 as6_4 = subgroupAdd(a6_4);
    const vec4 as6_5 = subgroupAdd(a6_5);
    const vec4 as6_6 = subgroupAdd(a6_6);
    const vec4 as6_7 = subgroupAdd(a6_7);
    const vec4 as6_8 = subgroupAdd(a6_8);
    const vec4 as6_9 = subgroupAdd(a6_9);
    const vec4 as6_10 = subgroupAdd(a6_10);
    const vec4 as6_11 = subgroupAdd(a6_11);
    const vec4 as6_12 = subgroupAdd(a6_12);
    const vec4 as6_13 = subgroupAdd(a6_13);
    const vec4 as6_14 = subgroupAdd(a6_14);
    const vec4 as6_15 = subgroupAdd(a6_15);
    const vec4 as7_0 = subgroupAdd(a7_0);
    const vec4 as7_1 = subgroupAdd(a7_1);
    const vec4 as7_2 = subgroupAdd(a7_2);
    const vec4 as7_3 = subgroupAdd(a7_3);
    const vec4 as7_4 = subgroupAdd(a7_4);
    const vec4 as7_5 = subgroupAdd(a7_5);
    const vec4 as7_6 = subgroupAdd(a7_6);
    const vec4 as7_7 = subgroupAdd(a7_7);
    const vec4 as7_8 = subgroupAdd(a7_8);
    const vec4 as7_9 = subgroupAdd(a7_9);
    const vec4 as7_10 = subgroupAdd(a7_10);
    const vec4 as7_11 = subgroupAdd(a7_11);
    const vec4 as7_12 = subgroupAdd(a7_12);
    const vec4 as7_13 = subgroupAdd(a7_13);
    const vec4 as7_14 = subgroupAdd(a7_14);
    const vec4 as7_15 = subgroupAdd(a7_15);
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
        if (row < S) {
            const uint ob = ((b * S + row) * p.H + h) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dq(ob, 4 * e, o[e] * p.scale);
        }

    }

}
