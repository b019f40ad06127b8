#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// attention dkv (f16 storage, f32 arithmetic)
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 64;
layout(constant_id = 2) const uint TILE = 64;
layout(std430, binding = 0) readonly buffer Buf_q { float16_t q[]; };
layout(std430, binding = 1) readonly buffer Buf_k { float16_t k[]; };
layout(std430, binding = 2) readonly buffer Buf_v { float16_t v[]; };
layout(std430, binding = 3) readonly buffer Buf_dout { float16_t dout[]; };
layout(std430, binding = 4) readonly buffer Buf_lse { float lse[]; };
layout(std430, binding = 5) readonly buffer Buf_delta { float delta[]; };
layout(std430, binding = 6) writeonly buffer Buf_dk { float16_t dk[]; };
layout(std430, binding = 7) writeonly buffer Buf_dv { float16_t dv[]; };
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
layout(std430, binding = 3) readonly buffer Buf_dout4 { uvec2 dout4[]; };
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
layout(std430, binding = 6) writeonly buffer Buf_dk4 { uvec2 dk4[]; };
void st_dk(uint base, uint d, vec4 x) {
    if (d >= p.D) return;
    if ((p.D & 3u) == 0u) { dk4[(base + d) / 4] = uvec2(packHalf2x16(x.xy), packHalf2x16(x.zw)); return; }
    for (uint u = 0; u < 4 && d + u < p.D; ++u) dk[base + d + u] = float16_t(x[u]);
}
layout(std430, binding = 7) writeonly buffer Buf_dv4 { uvec2 dv4[]; };
void st_dv(uint base, uint d, vec4 x) {
    if (d >= p.D) return;
    if ((p.D & 3u) == 0u) { dv4[(base + d) / 4] = uvec2(packHalf2x16(x.xy), packHalf2x16(x.zw)); return; }
    for (uint u = 0; u < 4 && d + u < p.D; ++u) dv[base + d + u] = float16_t(x[u]);
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
    // dkv: the rows are keys r0.. of kv head g; the lanes split the queries of each head of the group.
    const uint g = gl_WorkGroupID.y, G = p.H / p.KVH;
    const uint kb0 = ((b * S + min(r0 + 0, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k0_0 = ldv_k(kb0, 0), v0_0 = ldv_v(kb0, 0);
    vec4 dk0_0 = vec4(0.0), dv0_0 = vec4(0.0);
    const vec4 k0_1 = ldv_k(kb0, 4), v0_1 = ldv_v(kb0, 4);
    vec4 dk0_1 = vec4(0.0), dv0_1 = vec4(0.0);
    const uint kb1 = ((b * S + min(r0 + 1, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k1_0 = ldv_k(kb1, 0), v1_0 = ldv_v(kb1, 0);
    vec4 dk1_0 = vec4(0.0), dv1_0 = vec4(0.0);
    const vec4 k1_1 = ldv_k(kb1, 4), v1_1 = ldv_v(kb1, 4);
    vec4 dk1_1 = vec4(0.0), dv1_1 = vec4(0.0);
    const uint kb2 = ((b * S + min(r0 + 2, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k2_0 = ldv_k(kb2, 0), v2_0 = ldv_v(kb2, 0);
    vec4 dk2_0 = vec4(0.0), dv2_0 = vec4(0.0);
    const vec4 k2_1 = ldv_k(kb2, 4), v2_1 = ldv_v(kb2, 4);
    vec4 dk2_1 = vec4(0.0), dv2_1 = vec4(0.0);
    const uint kb3 = ((b * S + min(r0 + 3, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k3_0 = ldv_k(kb3, 0), v3_0 = ldv_v(kb3, 0);
    vec4 dk3_0 = vec4(0.0), dv3_0 = vec4(0.0);
    const vec4 k3_1 = ldv_k(kb3, 4), v3_1 = ldv_v(kb3, 4);
    vec4 dk3_1 = vec4(0.0), dv3_1 = vec4(0.0);
    const uint kb4 = ((b * S + min(r0 + 4, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k4_0 = ldv_k(kb4, 0), v4_0 = ldv_v(kb4, 0);
    vec4 dk4_0 = vec4(0.0), dv4_0 = vec4(0.0);
    const vec4 k4_1 = ldv_k(kb4, 4), v4_1 = ldv_v(kb4, 4);
    vec4 dk4_1 = vec4(0.0), dv4_1 = vec4(0.0);
    const uint kb5 = ((b * S + min(r0 + 5, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k5_0 = ldv_k(kb5, 0), v5_0 = ldv_v(kb5, 0);
    vec4 dk5_0 = vec4(0.0), dv5_0 = vec4(0.0);
    const vec4 k5_1 = ldv_k(kb5, 4), v5_1 = ldv_v(kb5, 4);
    vec4 dk5_1 = vec4(0.0), dv5_1 = vec4(0.0);
    const uint kb6 = ((b * S + min(r0 + 6, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k6_0 = ldv_k(kb6, 0), v6_0 = ldv_v(kb6, 0);
    vec4 dk6_0 = vec4(0.0), dv6_0 = vec4(0.0);
    const vec4 k6_1 = ldv_k(kb6, 4), v6_1 = ldv_v(kb6, 4);
    vec4 dk6_1 = vec4(0.0), dv6_1 = vec4(0.0);
    const uint kb7 = ((b * S + min(r0 + 7, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k7_0 = ldv_k(kb7, 0), v7_0 = ldv_v(kb7, 0);
    vec4 dk7_0 = vec4(0.0), dv7_0 = vec4(0.0);
    const vec4 k7_1 = ldv_k(kb7, 4), v7_1 = ldv_v(kb7, 4);
    vec4 dk7_1 = vec4(0.0), dv7_1 = vec4(0.0);
    const uint istart = causal ? r0 : 0u;  // queries before the first key see none of the rows
    for (uint hh = 0; hh < G; ++hh) {
        const uint h = g * G + hh;
        for (uint i0 = istart; i0 < S; i0 += TILE) {
            const uint in_ = min(i0 + TILE, S);
            for (uint ib = i0; ib < in_; ib += WG) {
                const uint i = ib + L, ic = min(i, S - 1u);  // this lane's query
                const uint qb = ((b * S + ic) * p.H + h) * p.D;
                const vec4 q0 = ldv_q(qb, 0), o0 = ldv_dout(qb, 0);
                const vec4 q1 = ldv_q(qb, 4), o1 = ldv_dout(qb, 4);
                const float li = lse[(b * p.H + h) * S + ic], di = delta[(b * p.H + h) * S + ic];
                {
                    const bool vis = i < S && (!causal || r0 + 0 <= i);
                    const float pr = vis ? exp2((dot(k0_0, q0) + dot(k0_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v0_0, o0) + dot(v0_1, o1)) - di);
                    dv0_0 += pr * o0;
                    dk0_0 += ds * q0;
                    dv0_1 += pr * o1;
                    dk0_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 1 <= i);
                    const float pr = vis ? exp2((dot(k1_0, q0) + dot(k1_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v1_0, o0) + dot(v1_1, o1)) - di);
                    dv1_0 += pr * o0;
                    dk1_0 += ds * q0;
                    dv1_1 += pr * o1;
                    dk1_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 2 <= i);
                    const float pr = vis ? exp2((dot(k2_0, q0) + dot(k2_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v2_0, o0) + dot(v2_1, o1)) - di);
                    dv2_0 += pr * o0;
                    dk2_0 += ds * q0;
                    dv2_1 += pr * o1;
                    dk2_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 3 <= i);
                    const float pr = vis ? exp2((dot(k3_0, q0) + dot(k3_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v3_0, o0) + dot(v3_1, o1)) - di);
                    dv3_0 += pr * o0;
                    dk3_0 += ds * q0;
                    dv3_1 += pr * o1;
                    dk3_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 4 <= i);
                    const float pr = vis ? exp2((dot(k4_0, q0) + dot(k4_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v4_0, o0) + dot(v4_1, o1)) - di);
                    dv4_0 += pr * o0;
                    dk4_0 += ds * q0;
                    dv4_1 += pr * o1;
                    dk4_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 5 <= i);
                    const float pr = vis ? exp2((dot(k5_0, q0) + dot(k5_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v5_0, o0) + dot(v5_1, o1)) - di);
                    dv5_0 += pr * o0;
                    dk5_0 += ds * q0;
                    dv5_1 += pr * o1;
                    dk5_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 6 <= i);
                    const float pr = vis ? exp2((dot(k6_0, q0) + dot(k6_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v6_0, o0) + dot(v6_1, o1)) - di);
                    dv6_0 += pr * o0;
                    dk6_0 += ds * q0;
                    dv6_1 += pr * o1;
                    dk6_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 7 <= i);
                    const float pr = vis ? exp2((dot(k7_0, q0) + dot(k7_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v7_0, o0) + dot(v7_1, o1)) - di);
                    dv7_0 += pr * o0;
                    dk7_0 += ds * q0;
                    dv7_1 += pr * o1;
                    dk7_1 += ds * q1;
                }
            }
        }
    }
    const vec4 dks0_0 = subgroupAdd(dk0_0);
    const vec4 dks0_1 = subgroupAdd(dk0_1);
    const vec4 dks1_0 = subgroupAdd(dk1_0);
    const vec4 dks1_1 = subgroupAdd(dk1_1);
    const vec4 dks2_0 = subgroupAdd(dk2_0);
    const vec4 dks2_1 = subgroupAdd(dk2_1);
    const vec4 dks3_0 = subgroupAdd(dk3_0);
    const vec4 dks3_1 = subgroupAdd(dk3_1);
    const vec4 dks4_0 = subgroupAdd(dk4_0);
    const vec4 dks4_1 = subgroupAdd(dk4_1);
    const vec4 dks5_0 = subgroupAdd(dk5_0);
    const vec4 dks5_1 = subgroupAdd(dk5_1);
    const vec4 dks6_0 = subgroupAdd(dk6_0);
    const vec4 dks6_1 = subgroupAdd(dk6_1);
    const vec4 dks7_0 = subgroupAdd(dk7_0);
    const vec4 dks7_1 = subgroupAdd(dk7_1);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? dks0_0 : (L == 1u ? dks1_0 : (L == 2u ? dks2_0 : (L == 3u ? dks3_0 : (L == 4u ? dks4_0 : (L == 5u ? dks5_0 : (L == 6u ? dks6_0 : dks7_0)))))));
        o[1] = (L == 0u ? dks0_1 : (L == 1u ? dks1_1 : (L == 2u ? dks2_1 : (L == 3u ? dks3_1 : (L == 4u ? dks4_1 : (L == 5u ? dks5_1 : (L == 6u ? dks6_1 : dks7_1)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.KVH + g) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dk(ob, 4 * e, o[e] * p.scale);
        }

    }

    const vec4 dvs0_0 = subgroupAdd(dv0_0);
    const vec4 dvs0_1 = subgroupAdd(dv0_1);
    const vec4 dvs1_0 = subgroupAdd(dv1_0);
    const vec4 dvs1_1 = subgroupAdd(dv1_1);
    const vec4 dvs2_0 = subgroupAdd(dv2_0);
    const vec4 dvs2_1 = subgroupAdd(dv2_1);
    const vec4 dvs3_0 = subgroupAdd(dv3_0);
    const vec4 dvs3_1 = subgroupAdd(dv3_1);
    const vec4 dvs4_0 = subgroupAdd(dv4_0);
    const vec4 dvs4_1 = subgroupAdd(dv4_1);
    const vec4 dvs5_0 = subgroupAdd(dv5_0);
    const vec4 dvs5_1 = subgroupAdd(dv5_1);
    const vec4 dvs6_0 = subgroupAdd(dv6_0);
    const vec4 dvs6_1 = subgroupAdd(dv6_1);
    const vec4 dvs7_0 = subgroupAdd(dv7_0);
    const vec4 dvs7_1 = subgroupAdd(dv7_1);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? dvs0_0 : (L == 1u ? dvs1_0 : (L == 2u ? dvs2_0 : (L == 3u ? dvs3_0 : (L == 4u ? dvs4_0 : (L == 5u ? dvs5_0 : (L == 6u ? dvs6_0 : dvs7_0)))))));
        o[1] = (L == 0u ? dvs0_1 : (L == 1u ? dvs1_1 : (L == 2u ? dvs2_1 : (L == 3u ? dvs3_1 : (L == 4u ? dvs4_1 : (L == 5u ? dvs5_1 : (L == 6u ? dvs6_1 : dvs7_1)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.KVH + g) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dv(ob, 4 * e, o[e]);
        }

    }

}
