#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// attention fwd (f16 storage, f32 arithmetic)
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 64;
layout(constant_id = 2) const uint TILE = 64;
layout(std430, binding = 0) readonly buffer Buf_q { float16_t q[]; };
layout(std430, binding = 1) readonly buffer Buf_k { float16_t k[]; };
layout(std430, binding = 2) readonly buffer Buf_v { float16_t v[]; };
layout(std430, binding = 3) writeonly buffer Buf_o { float16_t o[]; };
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
layout(std430, binding = 3) writeonly buffer Buf_o4 { uvec2 o4[]; };
void st_o(uint base, uint d, vec4 x) {
    if (d >= p.D) return;
    if ((p.D & 3u) == 0u) { o4[(base + d) / 4] = uvec2(packHalf2x16(x.xy), packHalf2x16(x.zw)); return; }
    for (uint u = 0; u < 4 && d + u < p.D; ++u) o[base + d + u] = float16_t(x[u]);
}

const uint HD = 16, TPR = 1;
const uint DV = 4;        // vec4s of a row per thread
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
            {
                const bool vis = j < S && (!causal || j <= r0 + 0);
                const float s = vis ? dot(q0_0, k0) + dot(q0_1, k1) + dot(q0_2, k2) + dot(q0_3, k3) : NEG;
                const float mn = max(m0, s);
                const float a = exp2(m0 - mn), w = vis ? exp2(s - mn) : 0.0;
                l0 = l0 * a + w;
                m0 = mn;
                a0_0 = a0_0 * a + w * v0;
                a0_1 = a0_1 * a + w * v1;
                a0_2 = a0_2 * a + w * v2;
                a0_3 = a0_3 * a + w * v3;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 1);
                const float s = vis ? dot(q1_0, k0) + dot(q1_1, k1) + dot(q1_2, k2) + dot(q1_3, k3) : NEG;
                const float mn = max(m1, s);
                const float a = exp2(m1 - mn), w = vis ? exp2(s - mn) : 0.0;
                l1 = l1 * a + w;
                m1 = mn;
                a1_0 = a1_0 * a + w * v0;
                a1_1 = a1_1 * a + w * v1;
                a1_2 = a1_2 * a + w * v2;
                a1_3 = a1_3 * a + w * v3;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 2);
                const float s = vis ? dot(q2_0, k0) + dot(q2_1, k1) + dot(q2_2, k2) + dot(q2_3, k3) : NEG;
                const float mn = max(m2, s);
                const float a = exp2(m2 - mn), w = vis ? exp2(s - mn) : 0.0;
                l2 = l2 * a + w;
                m2 = mn;
                a2_0 = a2_0 * a + w * v0;
                a2_1 = a2_1 * a + w * v1;
                a2_2 = a2_2 * a + w * v2;
                a2_3 = a2_3 * a + w * v3;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 3);
                const float s = vis ? dot(q3_0, k0) + dot(q3_1, k1) + dot(q3_2, k2) + dot(q3_3, k3) : NEG;
                const float mn = max(m3, s);
                const float a = exp2(m3 - mn), w = vis ? exp2(s - mn) : 0.0;
                l3 = l3 * a + w;
                m3 = mn;
                a3_0 = a3_0 * a + w * v0;
                a3_1 = a3_1 * a + w * v1;
                a3_2 = a3_2 * a + w * v2;
                a3_3 = a3_3 * a + w * v3;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 4);
                const float s = vis ? dot(q4_0, k0) + dot(q4_1, k1) + dot(q4_2, k2) + dot(q4_3, k3) : NEG;
                const float mn = max(m4, s);
                const float a = exp2(m4 - mn), w = vis ? exp2(s - mn) : 0.0;
                l4 = l4 * a + w;
                m4 = mn;
                a4_0 = a4_0 * a + w * v0;
                a4_1 = a4_1 * a + w * v1;
                a4_2 = a4_2 * a + w * v2;
                a4_3 = a4_3 * a + w * v3;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 5);
                const float s = vis ? dot(q5_0, k0) + dot(q5_1, k1) + dot(q5_2, k2) + dot(q5_3, k3) : NEG;
                const float mn = max(m5, s);
                const float a = exp2(m5 - mn), w = vis ? exp2(s - mn) : 0.0;
                l5 = l5 * a + w;
                m5 = mn;
                a5_0 = a5_0 * a + w * v0;
                a5_1 = a5_1 * a + w * v1;
                a5_2 = a5_2 * a + w * v2;
                a5_3 = a5_3 * a + w * v3;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 6);
                const float s = vis ? dot(q6_0, k0) + dot(q6_1, k1) + dot(q6_2, k2) + dot(q6_3, k3) : NEG;
                const float mn = max(m6, s);
                const float a = exp2(m6 - mn), w = vis ? exp2(s - mn) : 0.0;
                l6 = l6 * a + w;
                m6 = mn;
                a6_0 = a6_0 * a + w * v0;
                a6_1 = a6_1 * a + w * v1;
                a6_2 = a6_2 * a + w * v2;
                a6_3 = a6_3 * a + w * v3;
            }
            {
                const bool vis = j < S && (!causal || j <= r0 + 7);
                const float s = vis ? dot(q7_0, k0) + dot(q7_1, k1) + dot(q7_2, k2) + dot(q7_3, k3) : NEG;
                const float mn = max(m7, s);
                const float a = exp2(m7 - mn), w = vis ? exp2(s - mn) : 0.0;
                l7 = l7 * a + w;
                m7 = mn;
                a7_0 = a7_0 * a + w * v0;
                a7_1 = a7_1 * a + w * v1;
                a7_2 = a7_2 * a + w * v2;
                a7_3 = a7_3 * a + w * v3;
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
    const float aM1 = subgroupMax(m1);
    const float af1 = exp2(m1 - aM1);  // 0 for a lane that saw no key of the row
    const float al1 = subgroupAdd(l1 * af1);
    const vec4 as1_0 = subgroupAdd(af1 * a1_0);
    const vec4 as1_1 = subgroupAdd(af1 * a1_1);
    const vec4 as1_2 = subgroupAdd(af1 * a1_2);
    const vec4 as1_3 = subgroupAdd(af1 * a1_3);
    const float aM2 = subgroupMax(m2);
    const float af2 = exp2(m2 - aM2);  // 0 for a lane that saw no key of the row
    const float al2 = subgroupAdd(l2 * af2);
    const vec4 as2_0 = subgroupAdd(af2 * a2_0);
    const vec4 as2_1 = subgroupAdd(af2 * a2_1);
    const vec4 as2_2 = subgroupAdd(af2 * a2_2);
    const vec4 as2_3 = subgroupAdd(af2 * a2_3);
    const float aM3 = subgroupMax(m3);
    const float af3 = exp2(m3 - aM3);  // 0 for a lane that saw no key of the row
    const float al3 = subgroupAdd(l3 * af3);
    const vec4 as3_0 = subgroupAdd(af3 * a3_0);
    const vec4 as3_1 = subgroupAdd(af3 * a3_1);
    const vec4 as3_2 = subgroupAdd(af3 * a3_2);
    const vec4 as3_3 = subgroupAdd(af3 * a3_3);
    const float aM4 = subgroupMax(m4);
    const float af4 = exp2(m4 - aM4);  // 0 for a lane that saw no key of the row
    const float al4 = subgroupAdd(l4 * af4);
    const vec4 as4_0 = subgroupAdd(af4 * a4_0);
    const vec4 as4_1 = subgroupAdd(af4 * a4_1);
    const vec4 as4_2 = subgroupAdd(af4 * a4_2);
    const vec4 as4_3 = subgroupAdd(af4 * a4_3);
    const float aM5 = subgroupMax(m5);
    const float af5 = exp2(m5 - aM5);  // 0 for a lane that saw no key of the row
    const float al5 = subgroupAdd(l5 * af5);
    const vec4 as5_0 = subgroupAdd(af5 * a5_0);
    const vec4 as5_1 = subgroupAdd(af5 * a5_1);
    const vec4 as5_2 = subgroupAdd(af5 * a5_2);
    const vec4 as5_3 = subgroupAdd(af5 * a5_3);
    const float aM6 = subgroupMax(m6);
    const float af6 = exp2(m6 - aM6);  // 0 for a lane that saw no key of the row
    const float al6 = subgroupAdd(l6 * af6);
    const vec4 as6_0 = subgroupAdd(af6 * a6_0);
    const vec4 as6_1 = subgroupAdd(af6 * a6_1);
    const vec4 as6_2 = subgroupAdd(af6 * a6_2);
    const vec4 as6_3 = subgroupAdd(af6 * a6_3);
    const float aM7 = subgroupMax(m7);
    const float af7 = exp2(m7 - aM7);  // 0 for a lane that saw no key of the row
    const float al7 = subgroupAdd(l7 * af7);
    const vec4 as7_0 = subgroupAdd(af7 * a7_0);
    const vec4 as7_1 = subgroupAdd(af7 * a7_1);
    const vec4 as7_2 = subgroupAdd(af7 * a7_2);
    const vec4 as7_3 = subgroupAdd(af7 * a7_3);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? as0_0 : (L == 1u ? as1_0 : (L == 2u ? as2_0 : (L == 3u ? as3_0 : (L == 4u ? as4_0 : (L == 5u ? as5_0 : (L == 6u ? as6_0 : as7_0)))))));
        o[1] = (L == 0u ? as0_1 : (L == 1u ? as1_1 : (L == 2u ? as2_1 : (L == 3u ? as3_1 : (L == 4u ? as4_1 : (L == 5u ? as5_1 : (L == 6u ? as6_1 : as7_1)))))));
        o[2] = (L == 0u ? as0_2 : (L == 1u ? as1_2 : (L == 2u ? as2_2 : (L == 3u ? as3_2 : (L == 4u ? as4_2 : (L == 5u ? as5_2 : (L == 6u ? as6_2 : as7_2)))))));
        o[3] = (L == 0u ? as0_3 : (L == 1u ? as1_3 : (L == 2u ? as2_3 : (L == 3u ? as3_3 : (L == 4u ? as4_3 : (L == 5u ? as5_3 : (L == 6u ? as6_3 : as7_3)))))));
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
