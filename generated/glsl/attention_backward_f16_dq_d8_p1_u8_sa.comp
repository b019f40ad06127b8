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

const uint HD = 8, TPR = 1;
const uint DV = 2;        // vec4s of a row per thread
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
    const vec4 o0_0 = ldv_dout(qb0, 0);
    const vec4 o0_1 = ldv_dout(qb0, 4);
    const float D0 = dot(o0_0, ldv_o(qb0, 0)) + dot(o0_1, ldv_o(qb0, 4));
    const float L0 = lse[(b * p.H + h) * S + min(r0 + 0, S - 1u)];
    if (L == 0u && r0 + 0 < S) delta[(b * p.H + h) * S + r0 + 0] = D0;
    const uint qb1 = ((b * S + min(r0 + 1, S - 1u)) * p.H + h) * p.D;
    const vec4 q1_0 = ldv_q(qb1, 0);
    vec4 a1_0 = vec4(0.0);
    const vec4 q1_1 = ldv_q(qb1, 4);
    vec4 a1_1 = vec4(0.0);
    const vec4 o1_0 = ldv_dout(qb1, 0);
    const vec4 o1_1 = ldv_dout(qb1, 4);
    const float D1 = dot(o1_0, ldv_o(qb1, 0)) + dot(o1_1, ldv_o(qb1, 4));
    const float L1 = lse[(b * p.H + h) * S + min(r0 + 1, S - 1u)];
    if (L == 0u && r0 + 1 < S) delta[(b * p.H + h) * S + r0 + 1] = D1;
    const uint qb2 = ((b * S + min(r0 + 2, S - 1u)) * p.H + h) * p.D;
    const vec4 q2_0 = ldv_q(qb2, 0);
    vec4 a2_0 = vec4(0.0);
    const vec4 q2_1 = ldv_q(qb2, 4);
    vec4 a2_1 = vec4(0.0);
    const vec4 o2_0 = ldv_dout(qb2, 0);
    const vec4 o2_1 = ldv_dout(qb2, 4);
    const float D2 = dot(o2_0, ldv_o(qb2, 0)) + dot(o2_1, ldv_o(qb2, 4));
    const float L2 = lse[(b * p.H + h) * S + min(r0 + 2, S - 1u)];
    if (L == 0u && r0 + 2 < S) delta[(b * p.H + h) * S + r0 + 2] = D2;
    const uint qb3 = ((b * S + min(r0 + 3, S - 1u)) * p.H + h) * p.D;
    const vec4 q3_0 = ldv_q(qb3, 0);
    vec4 a3_0 = vec4(0.0);
    const vec4 q3_1 = ldv_q(qb3, 4);
    vec4 a3_1 = vec4(0.0);
    const vec4 o3_0 = ldv_dout(qb3, 0);
    const vec4 o3_1 = ldv_dout(qb3, 4);
    const float D3 = dot(o3_0, ldv_o(qb3, 0)) + dot(o3_1, ldv_o(qb3, 4));
    const float L3 = lse[(b * p.H + h) * S + min(r0 + 3, S - 1u)];
    if (L == 0u && r0 + 3 < S) delta[(b * p.H + h) * S + r0 + 3] = D3;
    const uint qb4 = ((b * S + min(r0 + 4, S - 1u)) * p.H + h) * p.D;
    const vec4 q4_0 = ldv_q(qb4, 0);
    vec4 a4_0 = vec4(0.0);
    const vec4 q4_1 = ldv_q(qb4, 4);
    vec4 a4_1 = vec4(0.0);
    const vec4 o4_0 = ldv_dout(qb4, 0);
    const vec4 o4_1 = ldv_dout(qb4, 4);
    const float D4 = dot(o4_0, ldv_o(qb4, 0)) + dot(o4_1, ldv_o(qb4, 4));
    const float L4 = lse[(b * p.H + h) * S + min(r0 + 4, S - 1u)];
    if (L == 0u && r0 + 4 < S) delta[(b * p.H + h) * S + r0 + 4] = D4;
    const uint qb5 = ((b * S + min(r0 + 5, S - 1u)) * p.H + h) * p.D;
    const vec4 q5_0 = ldv_q(qb5, 0);
    vec4 a5_0 = vec4(0.0);
    const vec4 q5_1 = ldv_q(qb5, 4);
    vec4 a5_1 = vec4(0.0);
    const vec4 o5_0 = ldv_dout(qb5, 0);
    const vec4 o5_1 = ldv_dout(qb5, 4);
    const float D5 = dot(o5_0, ldv_o(qb5, 0)) + dot(o5_1, ldv_o(qb5, 4));
    const float L5 = lse[(b * p.H + h) * S + min(r0 + 5, S - 1u)];
    if (L == 0u && r0 + 5 < S) delta[(b * p.H + h) * S + r0 + 5] = D5;
    const uint qb6 = ((b * S + min(r0 + 6, S - 1u)) * p.H + h) * p.D;
    const vec4 q6_0 = ldv_q(qb6, 0);
    vec4 a6_0 = vec4(0.0);
    const vec4 q6_1 = ldv_q(qb6, 4);
    vec4 a6_1 = vec4(0.0);
    const vec4 o6_0 = ldv_dout(qb6, 0);
    const vec4 o6_1 = ldv_dout(qb6, 4);
    const float D6 = dot(o6_0, ldv_o(qb6, 0)) + dot(o6_1, ldv_o(qb6, 4));
    const float L6 = lse[(b * p.H + h) * S + min(r0 + 6, S - 1u)];
    if (L == 0u && r0 + 6 < S) delta[(b * p.H + h) * S + r0 + 6] = D6;
    const uint qb7 = ((b * S + min(r0 + 7, S - 1u)) * p.H + h) * p.D;
    const vec4 q7_0 = ldv_q(qb7, 0);
    vec4 a7_0 = vec4(0.0);
    const vec4 q7_1 = ldv_q(qb7, 4);
    vec4 a7_1 = vec4(0.0);
    const vec4 o7_0 = ldv_dout(qb7, 0);
    const vec4 o7_1 = ldv_dout(qb7, 4);
    const float D7 = dot(o7_0, ldv_o(qb7, 0)) + dot(o7_1, ldv_o(qb7, 4));
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
            {
                const bool vis = j < S && (!causal || j <= r0 + 0);
                const float w = vis ? exp2((dot(q0_0, k0) + dot(q0_1, k1)) * c - L0) * ((dot(o0_0, v0) + dot(o0_1, v1)) - D0) : 0.0;
                a0_0 += w * k0;
                a0_1 += w * k1;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 1);
                const float w = vis ? exp2((dot(q1_0, k0) + dot(q1_1, k1)) * c - L1) * ((dot(o1_0, v0) + dot(o1_1, v1)) - D1) : 0.0;
                a1_0 += w * k0;
                a1_1 += w * k1;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 2);
                const float w = vis ? exp2((dot(q2_0, k0) + dot(q2_1, k1)) * c - L2) * ((dot(o2_0, v0) + dot(o2_1, v1)) - D2) : 0.0;
                a2_0 += w * k0;
                a2_1 += w * k1;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 3);
                const float w = vis ? exp2((dot(q3_0, k0) + dot(q3_1, k1)) * c - L3) * ((dot(o3_0, v0) + dot(o3_1, v1)) - D3) : 0.0;
                a3_0 += w * k0;
                a3_1 += w * k1;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 4);
                const float w = vis ? exp2((dot(q4_0, k0) + dot(q4_1, k1)) * c - L4) * ((dot(o4_0, v0) + dot(o4_1, v1)) - D4) : 0.0;
                a4_0 += w * k0;
                a4_1 += w * k1;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 5);
                const float w = vis ? exp2((dot(q5_0, k0) + dot(q5_1, k1)) * c - L5) * ((dot(o5_0, v0) + dot(o5_1, v1)) - D5) : 0.0;
                a5_0 += w * k0;
                a5_1 += w * k1;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 6);
                const float w = vis ? exp2((dot(q6_0, k0) + dot(q6_1, k1)) * c - L6) * ((dot(o6_0, v0) + dot(o6_1, v1)) - D6) : 0.0;
                a6_0 += w * k0;
                a6_1 += w * k1;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 7);
                const float w = vis ? exp2((dot(q7_0, k0) + dot(q7_1, k1)) * c - L7) * ((dot(o7_0, v0) + dot(o7_1, v1)) - D7) : 0.0;
                a7_0 += w * k0;
                a7_1 += w * k1;
            }
        }
    }
    const vec4 as0_0 = subgroupAdd(a0_0);
    const vec4 as0_1 = subgroupAdd(a0_1);
    const vec4 as1_0 = subgroupAdd(a1_0);
    const vec4 as1_1 = subgroupAdd(a1_1);
    const vec4 as2_0 = subgroupAdd(a2_0);
    const vec4 as2_1 = subgroupAdd(a2_1);
    const vec4 as3_0 = subgroupAdd(a3_0);
    const vec4 as3_1 = subgroupAdd(a3_1);
    const vec4 as4_0 = subgroupAdd(a4_0);
    const vec4 as4_1 = subgroupAdd(a4_1);
    const vec4 as5_0 = subgroupAdd(a5_0);
    const vec4 as5_1 = subgroupAdd(a5_1);
    const vec4 as6_0 = subgroupAdd(a6_0);
    const vec4 as6_1 = subgroupAdd(a6_1);
    const vec4 as7_0 = subgroupAdd(a7_0);
    const vec4 as7_1 = subgroupAdd(a7_1);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? as0_0 : (L == 1u ? as1_0 : (L == 2u ? as2_0 : (L == 3u ? as3_0 : (L == 4u ? as4_0 : (L == 5u ? as5_0 : (L == 6u ? as6_0 : as7_0)))))));
        o[1] = (L == 0u ? as0_1 : (L == 1u ? as1_1 : (L == 2u ? as2_1 : (L == 3u ? as3_1 : (L == 4u ? as4_1 : (L == 5u ? as5_1 : (L == 6u ? as6_1 : as7_1)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.H + h) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dq(ob, 4 * e, o[e] * p.scale);
        }

    }

}
