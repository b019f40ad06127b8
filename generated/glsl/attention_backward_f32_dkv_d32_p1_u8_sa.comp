#version 450
#extension GL_EXT_control_flow_attributes : enable

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// attention dkv (f32 storage, f32 arithmetic)
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 64;
layout(constant_id = 2) const uint TILE = 64;
layout(std430, binding = 0) readonly buffer Buf_q { float q[]; };
layout(std430, binding = 1) readonly buffer Buf_k { float k[]; };
layout(std430, binding = 2) readonly buffer Buf_v { float v[]; };
layout(std430, binding = 3) readonly buffer Buf_dout { float dout[]; };
layout(std430, binding = 4) readonly buffer Buf_lse { float lse[]; };
layout(std430, binding = 5) readonly buffer Buf_delta { float delta[]; };
layout(std430, binding = 6) writeonly buffer Buf_dk { float dk[]; };
layout(std430, binding = 7) writeonly buffer Buf_dv { float dv[]; };
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
layout(std430, binding = 3) readonly buffer Buf_dout4 { vec4 dout4[]; };
vec4 ld_dout(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) return dout4[(base + d) / 4];
    return vec4(float(dout[base + d]), d + 1 < p.D ? float(dout[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(dout[base + d + 2]) : 0.0, d + 3 < p.D ? float(dout[base + d + 3]) : 0.0);
}
// Mesa 22.3 lavapipe runs both sides of every branch (masked), ld_dout's unaligned path included:
// uR launches need D % 4 == 0 and load through this one branch-free 16-byte load (d past D: zeros, read
// from the row's last vec4, in bounds).
vec4 ldv_dout(uint base, uint d) {
    return mix(vec4(0.0), dout4[(base + min(d, p.D - 4u)) / 4], bvec4(d < p.D));
}
layout(std430, binding = 6) writeonly buffer Buf_dk4 { vec4 dk4[]; };
void st_dk(uint base, uint d, vec4 x) {
    if (d >= p.D) return;
    if ((p.D & 3u) == 0u) { dk4[(base + d) / 4] = x; return; }
    for (uint u = 0; u < 4 && d + u < p.D; ++u) dk[base + d + u] = float(x[u]);
}
layout(std430, binding = 7) writeonly buffer Buf_dv4 { vec4 dv4[]; };
void st_dv(uint base, uint d, vec4 x) {
    if (d >= p.D) return;
    if ((p.D & 3u) == 0u) { dv4[(base + d) / 4] = x; return; }
    for (uint u = 0; u < 4 && d + u < p.D; ++u) dv[base + d + u] = float(x[u]);
}

const uint HD = 32, TPR = 1;
const uint DV = 8;        // vec4s of a row per thread
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
    const vec4 k0_2 = ldv_k(kb0, 8), v0_2 = ldv_v(kb0, 8);
    vec4 dk0_2 = vec4(0.0), dv0_2 = vec4(0.0);
    const vec4 k0_3 = ldv_k(kb0, 12), v0_3 = ldv_v(kb0, 12);
    vec4 dk0_3 = vec4(0.0), dv0_3 = vec4(0.0);
    const vec4 k0_4 = ldv_k(kb0, 16), v0_4 = ldv_v(kb0, 16);
    vec4 dk0_4 = vec4(0.0), dv0_4 = vec4(0.0);
    const vec4 k0_5 = ldv_k(kb0, 20), v0_5 = ldv_v(kb0, 20);
    vec4 dk0_5 = vec4(0.0), dv0_5 = vec4(0.0);
    const vec4 k0_6 = ldv_k(kb0, 24), v0_6 = ldv_v(kb0, 24);
    vec4 dk0_6 = vec4(0.0), dv0_6 = vec4(0.0);
    const vec4 k0_7 = ldv_k(kb0, 28), v0_7 = ldv_v(kb0, 28);
    vec4 dk0_7 = vec4(0.0), dv0_7 = vec4(0.0);
    const uint kb1 = ((b * S + min(r0 + 1, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k1_0 = ldv_k(kb1, 0), v1_0 = ldv_v(kb1, 0);
    vec4 dk1_0 = vec4(0.0), dv1_0 = vec4(0.0);
    const vec4 k1_1 = ldv_k(kb1, 4), v1_1 = ldv_v(kb1, 4);
    vec4 dk1_1 = vec4(0.0), dv1_1 = vec4(0.0);
    const vec4 k1_2 = ldv_k(kb1, 8), v1_2 = ldv_v(kb1, 8);
    vec4 dk1_2 = vec4(0.0), dv1_2 = vec4(0.0);
    const vec4 k1_3 = ldv_k(kb1, 12), v1_3 = ldv_v(kb1, 12);
    vec4 dk1_3 = vec4(0.0), dv1_3 = vec4(0.0);
    const vec4 k1_4 = ldv_k(kb1, 16), v1_4 = ldv_v(kb1, 16);
    vec4 dk1_4 = vec4(0.0), dv1_4 = vec4(0.0);
    const vec4 k1_5 = ldv_k(kb1, 20), v1_5 = ldv_v(kb1, 20);
    vec4 dk1_5 = vec4(0.0), dv1_5 = vec4(0.0);
    const vec4 k1_6 = ldv_k(kb1, 24), v1_6 = ldv_v(kb1, 24);
    vec4 dk1_6 = vec4(0.0), dv1_6 = vec4(0.0);
    const vec4 k1_7 = ldv_k(kb1, 28), v1_7 = ldv_v(kb1, 28);
    vec4 dk1_7 = vec4(0.0), dv1_7 = vec4(0.0);
    const uint kb2 = ((b * S + min(r0 + 2, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k2_0 = ldv_k(kb2, 0), v2_0 = ldv_v(kb2, 0);
    vec4 dk2_0 = vec4(0.0), dv2_0 = vec4(0.0);
    const vec4 k2_1 = ldv_k(kb2, 4), v2_1 = ldv_v(kb2, 4);
    vec4 dk2_1 = vec4(0.0), dv2_1 = vec4(0.0);
    const vec4 k2_2 = ldv_k(kb2, 8), v2_2 = ldv_v(kb2, 8);
    vec4 dk2_2 = vec4(0.0), dv2_2 = vec4(0.0);
    const vec4 k2_3 = ldv_k(kb2, 12), v2_3 = ldv_v(kb2, 12);
    vec4 dk2_3 = vec4(0.0), dv2_3 = vec4(0.0);
    const vec4 k2_4 = ldv_k(kb2, 16), v2_4 = ldv_v(kb2, 16);
    vec4 dk2_4 = vec4(0.0), dv2_4 = vec4(0.0);
    const vec4 k2_5 = ldv_k(kb2, 20), v2_5 = ldv_v(kb2, 20);
    vec4 dk2_5 = vec4(0.0), dv2_5 = vec4(0.0);
    const vec4 k2_6 = ldv_k(kb2, 24), v2_6 = ldv_v(kb2, 24);
    vec4 dk2_6 = vec4(0.0), dv2_6 = vec4(0.0);
    const vec4 k2_7 = ldv_k(kb2, 28), v2_7 = ldv_v(kb2, 28);
    vec4 dk2_7 = vec4(0.0), dv2_7 = vec4(0.0);
    const uint kb3 = ((b * S + min(r0 + 3, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k3_0 = ldv_k(kb3, 0), v3_0 = ldv_v(kb3, 0);
    vec4 dk3_0 = vec4(0.0), dv3_0 = vec4(0.0);
    const vec4 k3_1 = ldv_k(kb3, 4), v3_1 = ldv_v(kb3, 4);
    vec4 dk3_1 = vec4(0.0), dv3_1 = vec4(0.0);
    const vec4 k3_2 = ldv_k(kb3, 8), v3_2 = ldv_v(kb3, 8);
    vec4 dk3_2 = vec4(0.0), dv3_2 = vec4(0.0);
    const vec4 k3_3 = ldv_k(kb3, 12), v3_3 = ldv_v(kb3, 12);
    vec4 dk3_3 = vec4(0.0), dv3_3 = vec4(0.0);
    const vec4 k3_4 = ldv_k(kb3, 16), v3_4 = ldv_v(kb3, 16);
    vec4 dk3_4 = vec4(0.0), dv3_4 = vec4(0.0);
    const vec4 k3_5 = ldv_k(kb3, 20), v3_5 = ldv_v(kb3, 20);
    vec4 dk3_5 = vec4(0.0), dv3_5 = vec4(0.0);
    const vec4 k3_6 = ldv_k(kb3, 24), v3_6 = ldv_v(kb3, 24);
    vec4 dk3_6 = vec4(0.0), dv3_6 = vec4(0.0);
    const vec4 k3_7 = ldv_k(kb3, 28), v3_7 = ldv_v(kb3, 28);
    vec4 dk3_7 = vec4(0.0), dv3_7 = vec4(0.0);
    const uint kb4 = ((b * S + min(r0 + 4, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k4_0 = ldv_k(kb4, 0), v4_0 = ldv_v(kb4, 0);
    vec4 dk4_0 = vec4(0.0), dv4_0 = vec4(0.0);
    const vec4 k4_1 = ldv_k(kb4, 4), v4_1 = ldv_v(kb4, 4);
    vec4 dk4_1 = vec4(0.0), dv4_1 = vec4(0.0);
    const vec4 k4_2 = ldv_k(kb4, 8), v4_2 = ldv_v(kb4, 8);
    vec4 dk4_2 = vec4(0.0), dv4_2 = vec4(0.0);
    const vec4 k4_3 = ldv_k(kb4, 12), v4_3 = ldv_v(kb4, 12);
    vec4 dk4_3 = vec4(0.0), dv4_3 = vec4(0.0);
    const vec4 k4_4 = ldv_k(kb4, 16), v4_4 = ldv_v(kb4, 16);
    vec4 dk4_4 = vec4(0.0), dv4_4 = vec4(0.0);
    const vec4 k4_5 = ldv_k(kb4, 20), v4_5 = ldv_v(kb4, 20);
    vec4 dk4_5 = vec4(0.0), dv4_5 = vec4(0.0);
    const vec4 k4_6 = ldv_k(kb4, 24), v4_6 = ldv_v(kb4, 24);
    vec4 dk4_6 = vec4(0.0), dv4_6 = vec4(0.0);
    const vec4 k4_7 = ldv_k(kb4, 28), v4_7 = ldv_v(kb4, 28);
    vec4 dk4_7 = vec4(0.0), dv4_7 = vec4(0.0);
    const uint kb5 = ((b * S + min(r0 + 5, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k5_0 = ldv_k(kb5, 0), v5_0 = ldv_v(kb5, 0);
    vec4 dk5_0 = vec4(0.0), dv5_0 = vec4(0.0);
    const vec4 k5_1 = ldv_k(kb5, 4), v5_1 = ldv_v(kb5, 4);
    vec4 dk5_1 = vec4(0.0), dv5_1 = vec4(0.0);
    const vec4 k5_2 = ldv_k(kb5, 8), v5_2 = ldv_v(kb5, 8);
    vec4 dk5_2 = vec4(0.0), dv5_2 = vec4(0.0);
    const vec4 k5_3 = ldv_k(kb5, 12), v5_3 = ldv_v(kb5, 12);
    vec4 dk5_3 = vec4(0.0), dv5_3 = vec4(0.0);
    const vec4 k5_4 = ldv_k(kb5, 16), v5_4 = ldv_v(kb5, 16);
    vec4 dk5_4 = vec4(0.0), dv5_4 = vec4(0.0);
    const vec4 k5_5 = ldv_k(kb5, 20), v5_5 = ldv_v(kb5, 20);
    vec4 dk5_5 = vec4(0.0), dv5_5 = vec4(0.0);
    const vec4 k5_6 = ldv_k(kb5, 24), v5_6 = ldv_v(kb5, 24);
    vec4 dk5_6 = vec4(0.0), dv5_6 = vec4(0.0);
    const vec4 k5_7 = ldv_k(kb5, 28), v5_7 = ldv_v(kb5, 28);
    vec4 dk5_7 = vec4(0.0), dv5_7 = vec4(0.0);
    const uint kb6 = ((b * S + min(r0 + 6, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k6_0 = ldv_k(kb6, 0), v6_0 = ldv_v(kb6, 0);
    vec4 dk6_0 = vec4(0.0), dv6_0 = vec4(0.0);
    const vec4 k6_1 = ldv_k(kb6, 4), v6_1 = ldv_v(kb6, 4);
    vec4 dk6_1 = vec4(0.0), dv6_1 = vec4(0.0);
    const vec4 k6_2 = ldv_k(kb6, 8), v6_2 = ldv_v(kb6, 8);
    vec4 dk6_2 = vec4(0.0), dv6_2 = vec4(0.0);
    const vec4 k6_3 = ldv_k(kb6, 12), v6_3 = ldv_v(kb6, 12);
    vec4 dk6_3 = vec4(0.0), dv6_3 = vec4(0.0);
    const vec4 k6_4 = ldv_k(kb6, 16), v6_4 = ldv_v(kb6, 16);
    vec4 dk6_4 = vec4(0.0), dv6_4 = vec4(0.0);
    const vec4 k6_5 = ldv_k(kb6, 20), v6_5 = ldv_v(kb6, 20);
    vec4 dk6_5 = vec4(0.0), dv6_5 = vec4(0.0);
    const vec4 k6_6 = ldv_k(kb6, 24), v6_6 = ldv_v(kb6, 24);
    vec4 dk6_6 = vec4(0.0), dv6_6 = vec4(0.0);
    const vec4 k6_7 = ldv_k(kb6, 28), v6_7 = ldv_v(kb6, 28);
    vec4 dk6_7 = vec4(0.0), dv6_7 = vec4(0.0);
    const uint kb7 = ((b * S + min(r0 + 7, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k7_0 = ldv_k(kb7, 0), v7_0 = ldv_v(kb7, 0);
    vec4 dk7_0 = vec4(0.0), dv7_0 = vec4(0.0);
    const vec4 k7_1 = ldv_k(kb7, 4), v7_1 = ldv_v(kb7, 4);
    vec4 dk7_1 = vec4(0.0), dv7_1 = vec4(0.0);
    const vec4 k7_2 = ldv_k(kb7, 8), v7_2 = ldv_v(kb7, 8);
    vec4 dk7_2 = vec4(0.0), dv7_2 = vec4(0.0);
    const vec4 k7_3 = ldv_k(kb7, 12), v7_3 = ldv_v(kb7, 12);
    vec4 dk7_3 = vec4(0.0), dv7_3 = vec4(0.0);
    const vec4 k7_4 = ldv_k(kb7, 16), v7_4 = ldv_v(kb7, 16);
    vec4 dk7_4 = vec4(0.0), dv7_4 = vec4(0.0);
    const vec4 k7_5 = ldv_k(kb7, 20), v7_5 = ldv_v(kb7, 20);
    vec4 dk7_5 = vec4(0.0), dv7_5 = vec4(0.0);
    const vec4 k7_6 = ldv_k(kb7, 24), v7_6 = ldv_v(kb7, 24);
    vec4 dk7_6 = vec4(0.0), dv7_6 = vec4(0.0);
    const vec4 k7_7 = ldv_k(kb7, 28), v7_7 = ldv_v(kb7, 28);
    vec4 dk7_7 = vec4(0.0), dv7_7 = vec4(0.0);
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
                const vec4 q2 = ldv_q(qb, 8), o2 = ldv_dout(qb, 8);
                const vec4 q3 = ldv_q(qb, 12), o3 = ldv_dout(qb, 12);
                const vec4 q4 = ldv_q(qb, 16), o4 = ldv_dout(qb, 16);
                const vec4 q5 = ldv_q(qb, 20), o5 = ldv_dout(qb, 20);
                const vec4 q6 = ldv_q(qb, 24), o6 = ldv_dout(qb, 24);
                const vec4 q7 = ldv_q(qb, 28), o7 = ldv_dout(qb, 28);
                const float li = lse[(b * p.H + h) * S + ic], di = delta[(b * p.H + h) * S + ic];
                {
                    const bool vis = i < S && (!causal || r0 + 0 <= i);
                    const float pr = vis ? exp2((dot(k0_0, q0) + dot(k0_1, q1) + dot(k0_2, q2) + dot(k0_3, q3) + dot(k0_4, q4) + dot(k0_5, q5) + dot(k0_6, q6) + dot(k0_7, q7)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v0_0, o0) + dot(v0_1, o1) + dot(v0_2, o2) + dot(v0_3, o3) + dot(v0_4, o4) + dot(v0_5, o5) + dot(v0_6, o6) + dot(v0_7, o7)) - di);
                    dv0_0 += pr * o0;
                    dk0_0 += ds * q0;
                    dv0_1 += pr * o1;
                    dk0_1 += ds * q1;
                    dv0_2 += pr * o2;
                    dk0_2 += ds * q2;
                    dv0_3 += pr * o3;
                    dk0_3 += ds * q3;
                    dv0_4 += pr * o4;
                    dk0_4 += ds * q4;
                    dv0_5 += pr * o5;
                    dk0_5 += ds * q5;
                    dv0_6 += pr * o6;
                    dk0_6 += ds * q6;
                    dv0_7 += pr * o7;
                    dk0_7 += ds * q7;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 1 <= i);
                    const float pr = vis ? exp2((dot(k1_0, q0) + dot(k1_1, q1) + dot(k1_2, q2) + dot(k1_3, q3) + dot(k1_4, q4) + dot(k1_5, q5) + dot(k1_6, q6) + dot(k1_7, q7)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v1_0, o0) + dot(v1_1, o1) + dot(v1_2, o2) + dot(v1_3, o3) + dot(v1_4, o4) + dot(v1_5, o5) + dot(v1_6, o6) + dot(v1_7, o7)) - di);
                    dv1_0 += pr * o0;
                    dk1_0 += ds * q0;
                    dv1_1 += pr * o1;
                    dk1_1 += ds * q1;
                    dv1_2 += pr * o2;
                    dk1_2 += ds * q2;
                    dv1_3 += pr * o3;
                    dk1_3 += ds * q3;
                    dv1_4 += pr * o4;
                    dk1_4 += ds * q4;
                    dv1_5 += pr * o5;
                    dk1_5 += ds * q5;
                    dv1_6 += pr * o6;
                    dk1_6 += ds * q6;
                    dv1_7 += pr * o7;
                    dk1_7 += ds * q7;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 2 <= i);
                    const float pr = vis ? exp2((dot(k2_0, q0) + dot(k2_1, q1) + dot(k2_2, q2) + dot(k2_3, q3) + dot(k2_4, q4) + dot(k2_5, q5) + dot(k2_6, q6) + dot(k2_7, q7)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v2_0, o0) + dot(v2_1, o1) + dot(v2_2, o2) + dot(v2_3, o3) + dot(v2_4, o4) + dot(v2_5, o5) + dot(v2_6, o6) + dot(v2_7, o7)) - di);
                    dv2_0 += pr * o0;
                    dk2_0 += ds * q0;
                    dv2_1 += pr * o1;
                    dk2_1 += ds * q1;
                    dv2_2 += pr * o2;
                    dk2_2 += ds * q2;
                    dv2_3 += pr * o3;
                    dk2_3 += ds * q3;
                    dv2_4 += pr * o4;
                    dk2_4 += ds * q4;
                    dv2_5 += pr * o5;
                    dk2_5 += ds * q5;
                    dv2_6 += pr * o6;
                    dk2_6 += ds * q6;
                    dv2_7 += pr * o7;
                    dk2_7 += ds * q7;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 3 <= i);
                    const float pr = vis ? exp2((dot(k3_0, q0) + dot(k3_1, q1) + dot(k3_2, q2) + dot(k3_3, q3) + dot(k3_4, q4) + dot(k3_5, q5) + dot(k3_6, q6) + dot(k3_7, q7)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v3_0, o0) + dot(v3_1, o1) + dot(v3_2, o2) + dot(v3_3, o3) + dot(v3_4, o4) + dot(v3_5, o5) + dot(v3_6, o6) + dot(v3_7, o7)) - di);
                    dv3_0 += pr * o0;
                    dk3_0 += ds * q0;
                    dv3_1 += pr * o1;
                    dk3_1 += ds * q1;
                    dv3_2 += pr * o2;
                    dk3_2 += ds * q2;
                    dv3_3 += pr * o3;
                    dk3_3 += ds * q3;
                    dv3_4 += pr * o4;
                    dk3_4 += ds * q4;
                    dv3_5 += pr * o5;
                    dk3_5 += ds * q5;
                    dv3_6 += pr * o6;
                    dk3_6 += ds * q6;
                    dv3_7 += pr * o7;
                    dk3_7 += ds * q7;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 4 <= i);
                    const float pr = vis ? exp2((dot(k4_0, q0) + dot(k4_1, q1) + dot(k4_2, q2) + dot(k4_3, q3) + dot(k4_4, q4) + dot(k4_5, q5) + dot(k4_6, q6) + dot(k4_7, q7)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v4_0, o0) + dot(v4_1, o1) + dot(v4_2, o2) + dot(v4_3, o3) + dot(v4_4, o4) + dot(v4_5, o5) + dot(v4_6, o6) + dot(v4_7, o7)) - di);
                    dv4_0 += pr * o0;
                    dk4_0 += ds * q0;
                    dv4_1 += pr * o1;
                    dk4_1 += ds * q1;
                    dv4_2 += pr * o2;
                    dk4_2 += ds * q2;
                    dv4_3 += pr * o3;
                    dk4_3 += ds * q3;
                    dv4_4 += pr * o4;
                    dk4_4 += ds * q4;
                    dv4_5 += pr * o5;
                    dk4_5 += ds * q5;
                    dv4_6 += pr * o6;
                    dk4_6 += ds * q6;
                    dv4_7 += pr * o7;
                    dk4_7 += ds * q7;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 5 <= i);
                    const float pr = vis ? exp2((dot(k5_0, q0) + dot(k5_1, q1) + dot(k5_2, q2) + dot(k5_3, q3) + dot(k5_4, q4) + dot(k5_5, q5) + dot(k5_6, q6) + dot(k5_7, q7)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v5_0, o0) + dot(v5_1, o1) + dot(v5_2, o2) + dot(v5_3, o3) + dot(v5_4, o4) + dot(v5_5, o5) + dot(v5_6, o6) + dot(v5_7, o7)) - di);
                    dv5_0 += pr * o0;
                    dk5_0 += ds * q0;
                    dv5_1 += pr * o1;
                    dk5_1 += ds * q1;
                    dv5_2 += pr * o2;
                    dk5_2 += ds * q2;
                    dv5_3 += pr * o3;
                    dk5_3 += ds * q3;
                    dv5_4 += pr * o4;
                    dk5_4 += ds * q4;
                    dv5_5 += pr * o5;
                    dk5_5 += ds * q5;
                    dv5_6 += pr * o6;
                    dk5_6 += ds * q6;
                    dv5_7 += pr * o7;
                    dk5_7 += ds * q7;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 6 <= i);
                    const float pr = vis ? exp2((dot(k6_0, q0) + dot(k6_1, q1) + dot(k6_2, q2) + dot(k6_3, q3) + dot(k6_4, q4) + dot(k6_5, q5) + dot(k6_6, q6) + dot(k6_7, q7)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v6_0, o0) + dot(v6_1, o1) + dot(v6_2, o2) + dot(v6_3, o3) + dot(v6_4, o4) + dot(v6_5, o5) + dot(v6_6, o6) + dot(v6_7, o7)) - di);
                    dv6_0 += pr * o0;
                    dk6_0 += ds * q0;
                    dv6_1 += pr * o1;
                    dk6_1 += ds * q1;
                    dv6_2 += pr * o2;
                    dk6_2 += ds * q2;
                    dv6_3 += pr * o3;
                    dk6_3 += ds * q3;
                    dv6_4 += pr * o4;
                    dk6_4 += ds * q4;
                    dv6_5 += pr * o5;
                    dk6_5 += ds * q5;
                    dv6_6 += pr * o6;
                    dk6_6 += ds * q6;
                    dv6_7 += pr * o7;
                    dk6_7 += ds * q7;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 7 <= i);
                    const float pr = vis ? exp2((dot(k7_0, q0) + dot(k7_1, q1) + dot(k7_2, q2) + dot(k7_3, q3) + dot(k7_4, q4) + dot(k7_5, q5) + dot(k7_6, q6) + dot(k7_7, q7)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v7_0, o0) + dot(v7_1, o1) + dot(v7_2, o2) + dot(v7_3, o3) + dot(v7_4, o4) + dot(v7_5, o5) + dot(v7_6, o6) + dot(v7_7, o7)) - di);
                    dv7_0 += pr * o0;
                    dk7_0 += ds * q0;
                    dv7_1 += pr * o1;
                    dk7_1 += ds * q1;
                    dv7_2 += pr * o2;
                    dk7_2 += ds * q2;
                    dv7_3 += pr * o3;
                    dk7_3 += ds * q3;
                    dv7_4 += pr * o4;
                    dk7_4 += ds * q4;
                    dv7_5 += pr * o5;
                    dk7_5 += ds * q5;
                    dv7_6 += pr * o6;
                    dk7_6 += ds * q6;
                    dv7_7 += pr * o7;
                    dk7_7 += ds * q7;
                }
            }
        }
    }
    const vec4 dks0_0 = subgroupAdd(dk0_0);
    const vec4 dks0_1 = subgroupAdd(dk0_1);
    const vec4 dks0_2 = subgroupAdd(dk0_2);
    const vec4 dks0_3 = subgroupAdd(dk0_3);
    const vec4 dks0_4 = subgroupAdd(dk0_4);
    const vec4 dks0_5 = subgroupAdd(dk0_5);
    const vec4 dks0_6 = subgroupAdd(dk0_6);
    const vec4 dks0_7 = subgroupAdd(dk0_7);
    const vec4 dks1_0 = subgroupAdd(dk1_0);
    const vec4 dks1_1 = subgroupAdd(dk1_1);
    const vec4 dks1_2 = subgroupAdd(dk1_2);
    const vec4 dks1_3 = subgroupAdd(dk1_3);
    const vec4 dks1_4 = subgroupAdd(dk1_4);
    const vec4 dks1_5 = subgroupAdd(dk1_5);
    const vec4 dks1_6 = subgroupAdd(dk1_6);
    const vec4 dks1_7 = subgroupAdd(dk1_7);
    const vec4 dks2_0 = subgroupAdd(dk2_0);
    const vec4 dks2_1 = subgroupAdd(dk2_1);
    const vec4 dks2_2 = subgroupAdd(dk2_2);
    const vec4 dks2_3 = subgroupAdd(dk2_3);
    const vec4 dks2_4 = subgroupAdd(dk2_4);
    const vec4 dks2_5 = subgroupAdd(dk2_5);
    const vec4 dks2_6 = subgroupAdd(dk2_6);
    const vec4 dks2_7 = subgroupAdd(dk2_7);
    const vec4 dks3_0 = subgroupAdd(dk3_0);
    const vec4 dks3_1 = subgroupAdd(dk3_1);
    const vec4 dks3_2 = subgroupAdd(dk3_2);
    const vec4 dks3_3 = subgroupAdd(dk3_3);
    const vec4 dks3_4 = subgroupAdd(dk3_4);
    const vec4 dks3_5 = subgroupAdd(dk3_5);
    const vec4 dks3_6 = subgroupAdd(dk3_6);
    const vec4 dks3_7 = subgroupAdd(dk3_7);
    const vec4 dks4_0 = subgroupAdd(dk4_0);
    const vec4 dks4_1 = subgroupAdd(dk4_1);
    const vec4 dks4_2 = subgroupAdd(dk4_2);
    const vec4 dks4_3 = subgroupAdd(dk4_3);
    const vec4 dks4_4 = subgroupAdd(dk4_4);
    const vec4 dks4_5 = subgroupAdd(dk4_5);
    const vec4 dks4_6 = subgroupAdd(dk4_6);
    const vec4 dks4_7 = subgroupAdd(dk4_7);
    const vec4 dks5_0 = subgroupAdd(dk5_0);
    const vec4 dks5_1 = subgroupAdd(dk5_1);
    const vec4 dks5_2 = subgroupAdd(dk5_2);
    const vec4 dks5_3 = subgroupAdd(dk5_3);
    const vec4 dks5_4 = subgroupAdd(dk5_4);
    const vec4 dks5_5 = subgroupAdd(dk5_5);
    const vec4 dks5_6 = subgroupAdd(dk5_6);
    const vec4 dks5_7 = subgroupAdd(dk5_7);
    const vec4 dks6_0 = subgroupAdd(dk6_0);
    const vec4 dks6_1 = subgroupAdd(dk6_1);
    const vec4 dks6_2 = subgroupAdd(dk6_2);
    const vec4 dks6_3 = subgroupAdd(dk6_3);
    const vec4 dks6_4 = subgroupAdd(dk6_4);
    const vec4 dks6_5 = subgroupAdd(dk6_5);
    const vec4 dks6_6 = subgroupAdd(dk6_6);
    const vec4 dks6_7 = subgroupAdd(dk6_7);
    const vec4 dks7_0 = subgroupAdd(dk7_0);
    const vec4 dks7_1 = subgroupAdd(dk7_1);
    const vec4 dks7_2 = subgroupAdd(dk7_2);
    const vec4 dks7_3 = subgroupAdd(dk7_3);
    const vec4 dks7_4 = subgroupAdd(dk7_4);
    const vec4 dks7_5 = subgroupAdd(dk7_5);
    const vec4 dks7_6 = subgroupAdd(dk7_6);
    const vec4 dks7_7 = subgroupAdd(dk7_7);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? dks0_0 : (L == 1u ? dks1_0 : (L == 2u ? dks2_0 : (L == 3u ? dks3_0 : (L == 4u ? dks4_0 : (L == 5u ? dks5_0 : (L == 6u ? dks6_0 : dks7_0)))))));
        o[1] = (L == 0u ? dks0_1 : (L == 1u ? dks1_1 : (L == 2u ? dks2_1 : (L == 3u ? dks3_1 : (L == 4u ? dks4_1 : (L == 5u ? dks5_1 : (L == 6u ? dks6_1 : dks7_1)))))));
        o[2] = (L == 0u ? dks0_2 : (L == 1u ? dks1_2 : (L == 2u ? dks2_2 : (L == 3u ? dks3_2 : (L == 4u ? dks4_2 : (L == 5u ? dks5_2 : (L == 6u ? dks6_2 : dks7_2)))))));
        o[3] = (L == 0u ? dks0_3 : (L == 1u ? dks1_3 : (L == 2u ? dks2_3 : (L == 3u ? dks3_3 : (L == 4u ? dks4_3 : (L == 5u ? dks5_3 : (L == 6u ? dks6_3 : dks7_3)))))));
        o[4] = (L == 0u ? dks0_4 : (L == 1u ? dks1_4 : (L == 2u ? dks2_4 : (L == 3u ? dks3_4 : (L == 4u ? dks4_4 : (L == 5u ? dks5_4 : (L == 6u ? dks6_4 : dks7_4)))))));
        o[5] = (L == 0u ? dks0_5 : (L == 1u ? dks1_5 : (L == 2u ? dks2_5 : (L == 3u ? dks3_5 : (L == 4u ? dks4_5 : (L == 5u ? dks5_5 : (L == 6u ? dks6_5 : dks7_5)))))));
        o[6] = (L == 0u ? dks0_6 : (L == 1u ? dks1_6 : (L == 2u ? dks2_6 : (L == 3u ? dks3_6 : (L == 4u ? dks4_6 : (L == 5u ? dks5_6 : (L == 6u ? dks6_6 : dks7_6)))))));
        o[7] = (L == 0u ? dks0_7 : (L == 1u ? dks1_7 : (L == 2u ? dks2_7 : (L == 3u ? dks3_7 : (L == 4u ? dks4_7 : (L == 5u ? dks5_7 : (L == 6u ? dks6_7 : dks7_7)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.KVH + g) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dk(ob, 4 * e, o[e] * p.scale);
        }

    }

    const vec4 dvs0_0 = subgroupAdd(dv0_0);
    const vec4 dvs0_1 = subgroupAdd(dv0_1);
    const vec4 dvs0_2 = subgroupAdd(dv0_2);
    const vec4 dvs0_3 = subgroupAdd(dv0_3);
    const vec4 dvs0_4 = subgroupAdd(dv0_4);
    const vec4 dvs0_5 = subgroupAdd(dv0_5);
    const vec4 dvs0_6 = subgroupAdd(dv0_6);
    const vec4 dvs0_7 = subgroupAdd(dv0_7);
    const vec4 dvs1_0 = subgroupAdd(dv1_0);
    const vec4 dvs1_1 = subgroupAdd(dv1_1);
    const vec4 dvs1_2 = subgroupAdd(dv1_2);
    const vec4 dvs1_3 = subgroupAdd(dv1_3);
    const vec4 dvs1_4 = subgroupAdd(dv1_4);
    const vec4 dvs1_5 = subgroupAdd(dv1_5);
    const vec4 dvs1_6 = subgroupAdd(dv1_6);
    const vec4 dvs1_7 = subgroupAdd(dv1_7);
    const vec4 dvs2_0 = subgroupAdd(dv2_0);
    const vec4 dvs2_1 = subgroupAdd(dv2_1);
    const vec4 dvs2_2 = subgroupAdd(dv2_2);
    const vec4 dvs2_3 = subgroupAdd(dv2_3);
    const vec4 dvs2_4 = subgroupAdd(dv2_4);
    const vec4 dvs2_5 = subgroupAdd(dv2_5);
    const vec4 dvs2_6 = subgroupAdd(dv2_6);
    const vec4 dvs2_7 = subgroupAdd(dv2_7);
    const vec4 dvs3_0 = subgroupAdd(dv3_0);
    const vec4 dvs3_1 = subgroupAdd(dv3_1);
    const vec4 dvs3_2 = subgroupAdd(dv3_2);
    const vec4 dvs3_3 = subgroupAdd(dv3_3);
    const vec4 dvs3_4 = subgroupAdd(dv3_4);
    const vec4 dvs3_5 = subgroupAdd(dv3_5);
    const vec4 dvs3_6 = subgroupAdd(dv3_6);
    const vec4 dvs3_7 = subgroupAdd(dv3_7);
    const vec4 dvs4_0 = subgroupAdd(dv4_0);
    const vec4 dvs4_1 = subgroupAdd(dv4_1);
    const vec4 dvs4_2 = subgroupAdd(dv4_2);
    const vec4 dvs4_3 = subgroupAdd(dv4_3);
    const vec4 dvs4_4 = subgroupAdd(dv4_4);
    const vec4 dvs4_5 = subgroupAdd(dv4_5);
    const vec4 dvs4_6 = subgroupAdd(dv4_6);
    const vec4 dvs4_7 = subgroupAdd(dv4_7);
    const vec4 dvs5_0 = subgroupAdd(dv5_0);
    const vec4 dvs5_1 = subgroupAdd(dv5_1);
    const vec4 dvs5_2 = subgroupAdd(dv5_2);
    const vec4 dvs5_3 = subgroupAdd(dv5_3);
    const vec4 dvs5_4 = subgroupAdd(dv5_4);
    const vec4 dvs5_5 = subgroupAdd(dv5_5);
    const vec4 dvs5_6 = subgroupAdd(dv5_6);
    const vec4 dvs5_7 = subgroupAdd(dv5_7);
    const vec4 dvs6_0 = subgroupAdd(dv6_0);
    const vec4 dvs6_1 = subgroupAdd(dv6_1);
    const vec4 dvs6_2 = subgroupAdd(dv6_2);
    const vec4 dvs6_3 = subgroupAdd(dv6_3);
    const vec4 dvs6_4 = subgroupAdd(dv6_4);
    const vec4 dvs6_5 = subgroupAdd(dv6_5);
    const vec4 dvs6_6 = subgroupAdd(dv6_6);
    const vec4 dvs6_7 = subgroupAdd(dv6_7);
    const vec4 dvs7_0 = subgroupAdd(dv7_0);
    const vec4 dvs7_1 = subgroupAdd(dv7_1);
    const vec4 dvs7_2 = subgroupAdd(dv7_2);
    const vec4 dvs7_3 = subgroupAdd(dv7_3);
    const vec4 dvs7_4 = subgroupAdd(dv7_4);
    const vec4 dvs7_5 = subgroupAdd(dv7_5);
    const vec4 dvs7_6 = subgroupAdd(dv7_6);
    const vec4 dvs7_7 = subgroupAdd(dv7_7);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? dvs0_0 : (L == 1u ? dvs1_0 : (L == 2u ? dvs2_0 : (L == 3u ? dvs3_0 : (L == 4u ? dvs4_0 : (L == 5u ? dvs5_0 : (L == 6u ? dvs6_0 : dvs7_0)))))));
        o[1] = (L == 0u ? dvs0_1 : (L == 1u ? dvs1_1 : (L == 2u ? dvs2_1 : (L == 3u ? dvs3_1 : (L == 4u ? dvs4_1 : (L == 5u ? dvs5_1 : (L == 6u ? dvs6_1 : dvs7_1)))))));
        o[2] = (L == 0u ? dvs0_2 : (L == 1u ? dvs1_2 : (L == 2u ? dvs2_2 : (L == 3u ? dvs3_2 : (L == 4u ? dvs4_2 : (L == 5u ? dvs5_2 : (L == 6u ? dvs6_2 : dvs7_2)))))));
        o[3] = (L == 0u ? dvs0_3 : (L == 1u ? dvs1_3 : (L == 2u ? dvs2_3 : (L == 3u ? dvs3_3 : (L == 4u ? dvs4_3 : (L == 5u ? dvs5_3 : (L == 6u ? dvs6_3 : dvs7_3)))))));
        o[4] = (L == 0u ? dvs0_4 : (L == 1u ? dvs1_4 : (L == 2u ? dvs2_4 : (L == 3u ? dvs3_4 : (L == 4u ? dvs4_4 : (L == 5u ? dvs5_4 : (L == 6u ? dvs6_4 : dvs7_4)))))));
        o[5] = (L == 0u ? dvs0_5 : (L == 1u ? dvs1_5 : (L == 2u ? dvs2_5 : (L == 3u ? dvs3_5 : (L == 4u ? dvs4_5 : (L == 5u ? dvs5_5 : (L == 6u ? dvs6_5 : dvs7_5)))))));
        o[6] = (L == 0u ? dvs0_6 : (L == 1u ? dvs1_6 : (L == 2u ? dvs2_6 : (L == 3u ? dvs3_6 : (L == 4u ? dvs4_6 : (L == 5u ? dvs5_6 : (L == 6u ? dvs6_6 : dvs7_6)))))));
        o[7] = (L == 0u ? dvs0_7 : (L == 1u ? dvs1_7 : (L == 2u ? dvs2_7 : (L == 3u ? dvs3_7 : (L == 4u ? dvs4_7 : (L == 5u ? dvs5_7 : (L == 6u ? dvs6_7 : dvs7_7)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.KVH + g) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dv(ob, 4 * e, o[e]);
        }

    }

}
