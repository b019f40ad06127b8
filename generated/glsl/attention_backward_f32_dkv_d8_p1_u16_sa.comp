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

const uint HD = 8, TPR = 1;
const uint DV = 2;        // vec4s of a row per thread
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
    const uint kb8 = ((b * S + min(r0 + 8, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k8_0 = ldv_k(kb8, 0), v8_0 = ldv_v(kb8, 0);
    vec4 dk8_0 = vec4(0.0), dv8_0 = vec4(0.0);
    const vec4 k8_1 = ldv_k(kb8, 4), v8_1 = ldv_v(kb8, 4);
    vec4 dk8_1 = vec4(0.0), dv8_1 = vec4(0.0);
    const uint kb9 = ((b * S + min(r0 + 9, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k9_0 = ldv_k(kb9, 0), v9_0 = ldv_v(kb9, 0);
    vec4 dk9_0 = vec4(0.0), dv9_0 = vec4(0.0);
    const vec4 k9_1 = ldv_k(kb9, 4), v9_1 = ldv_v(kb9, 4);
    vec4 dk9_1 = vec4(0.0), dv9_1 = vec4(0.0);
    const uint kb10 = ((b * S + min(r0 + 10, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k10_0 = ldv_k(kb10, 0), v10_0 = ldv_v(kb10, 0);
    vec4 dk10_0 = vec4(0.0), dv10_0 = vec4(0.0);
    const vec4 k10_1 = ldv_k(kb10, 4), v10_1 = ldv_v(kb10, 4);
    vec4 dk10_1 = vec4(0.0), dv10_1 = vec4(0.0);
    const uint kb11 = ((b * S + min(r0 + 11, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k11_0 = ldv_k(kb11, 0), v11_0 = ldv_v(kb11, 0);
    vec4 dk11_0 = vec4(0.0), dv11_0 = vec4(0.0);
    const vec4 k11_1 = ldv_k(kb11, 4), v11_1 = ldv_v(kb11, 4);
    vec4 dk11_1 = vec4(0.0), dv11_1 = vec4(0.0);
    const uint kb12 = ((b * S + min(r0 + 12, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k12_0 = ldv_k(kb12, 0), v12_0 = ldv_v(kb12, 0);
    vec4 dk12_0 = vec4(0.0), dv12_0 = vec4(0.0);
    const vec4 k12_1 = ldv_k(kb12, 4), v12_1 = ldv_v(kb12, 4);
    vec4 dk12_1 = vec4(0.0), dv12_1 = vec4(0.0);
    const uint kb13 = ((b * S + min(r0 + 13, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k13_0 = ldv_k(kb13, 0), v13_0 = ldv_v(kb13, 0);
    vec4 dk13_0 = vec4(0.0), dv13_0 = vec4(0.0);
    const vec4 k13_1 = ldv_k(kb13, 4), v13_1 = ldv_v(kb13, 4);
    vec4 dk13_1 = vec4(0.0), dv13_1 = vec4(0.0);
    const uint kb14 = ((b * S + min(r0 + 14, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k14_0 = ldv_k(kb14, 0), v14_0 = ldv_v(kb14, 0);
    vec4 dk14_0 = vec4(0.0), dv14_0 = vec4(0.0);
    const vec4 k14_1 = ldv_k(kb14, 4), v14_1 = ldv_v(kb14, 4);
    vec4 dk14_1 = vec4(0.0), dv14_1 = vec4(0.0);
    const uint kb15 = ((b * S + min(r0 + 15, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k15_0 = ldv_k(kb15, 0), v15_0 = ldv_v(kb15, 0);
    vec4 dk15_0 = vec4(0.0), dv15_0 = vec4(0.0);
    const vec4 k15_1 = ldv_k(kb15, 4), v15_1 = ldv_v(kb15, 4);
    vec4 dk15_1 = vec4(0.0), dv15_1 = vec4(0.0);
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
                {
                    const bool vis = i < S && (!causal || r0 + 8 <= i);
                    const float pr = vis ? exp2((dot(k8_0, q0) + dot(k8_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v8_0, o0) + dot(v8_1, o1)) - di);
                    dv8_0 += pr * o0;
                    dk8_0 += ds * q0;
                    dv8_1 += pr * o1;
                    dk8_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 9 <= i);
                    const float pr = vis ? exp2((dot(k9_0, q0) + dot(k9_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v9_0, o0) + dot(v9_1, o1)) - di);
                    dv9_0 += pr * o0;
                    dk9_0 += ds * q0;
                    dv9_1 += pr * o1;
                    dk9_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 10 <= i);
                    const float pr = vis ? exp2((dot(k10_0, q0) + dot(k10_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v10_0, o0) + dot(v10_1, o1)) - di);
                    dv10_0 += pr * o0;
                    dk10_0 += ds * q0;
                    dv10_1 += pr * o1;
                    dk10_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 11 <= i);
                    const float pr = vis ? exp2((dot(k11_0, q0) + dot(k11_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v11_0, o0) + dot(v11_1, o1)) - di);
                    dv11_0 += pr * o0;
                    dk11_0 += ds * q0;
                    dv11_1 += pr * o1;
                    dk11_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 12 <= i);
                    const float pr = vis ? exp2((dot(k12_0, q0) + dot(k12_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v12_0, o0) + dot(v12_1, o1)) - di);
                    dv12_0 += pr * o0;
                    dk12_0 += ds * q0;
                    dv12_1 += pr * o1;
                    dk12_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 13 <= i);
                    const float pr = vis ? exp2((dot(k13_0, q0) + dot(k13_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v13_0, o0) + dot(v13_1, o1)) - di);
                    dv13_0 += pr * o0;
                    dk13_0 += ds * q0;
                    dv13_1 += pr * o1;
                    dk13_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 14 <= i);
                    const float pr = vis ? exp2((dot(k14_0, q0) + dot(k14_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v14_0, o0) + dot(v14_1, o1)) - di);
                    dv14_0 += pr * o0;
                    dk14_0 += ds * q0;
                    dv14_1 += pr * o1;
                    dk14_1 += ds * q1;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 15 <= i);
                    const float pr = vis ? exp2((dot(k15_0, q0) + dot(k15_1, q1)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v15_0, o0) + dot(v15_1, o1)) - di);
                    dv15_0 += pr * o0;
                    dk15_0 += ds * q0;
                    dv15_1 += pr * o1;
                    dk15_1 += ds * q1;
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
    const vec4 dks8_0 = subgroupAdd(dk8_0);
    const vec4 dks8_1 = subgroupAdd(dk8_1);
    const vec4 dks9_0 = subgroupAdd(dk9_0);
    const vec4 dks9_1 = subgroupAdd(dk9_1);
    const vec4 dks10_0 = subgroupAdd(dk10_0);
    const vec4 dks10_1 = subgroupAdd(dk10_1);
    const vec4 dks11_0 = subgroupAdd(dk11_0);
    const vec4 dks11_1 = subgroupAdd(dk11_1);
    const vec4 dks12_0 = subgroupAdd(dk12_0);
    const vec4 dks12_1 = subgroupAdd(dk12_1);
    const vec4 dks13_0 = subgroupAdd(dk13_0);
    const vec4 dks13_1 = subgroupAdd(dk13_1);
    const vec4 dks14_0 = subgroupAdd(dk14_0);
    const vec4 dks14_1 = subgroupAdd(dk14_1);
    const vec4 dks15_0 = subgroupAdd(dk15_0);
    const vec4 dks15_1 = subgroupAdd(dk15_1);
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
    {
        const uint r = L + 8u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? dks8_0 : (L == 1u ? dks9_0 : (L == 2u ? dks10_0 : (L == 3u ? dks11_0 : (L == 4u ? dks12_0 : (L == 5u ? dks13_0 : (L == 6u ? dks14_0 : dks15_0)))))));
        o[1] = (L == 0u ? dks8_1 : (L == 1u ? dks9_1 : (L == 2u ? dks10_1 : (L == 3u ? dks11_1 : (L == 4u ? dks12_1 : (L == 5u ? dks13_1 : (L == 6u ? dks14_1 : dks15_1)))))));
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
    const vec4 dvs8_0 = subgroupAdd(dv8_0);
    const vec4 dvs8_1 = subgroupAdd(dv8_1);
    const vec4 dvs9_0 = subgroupAdd(dv9_0);
    const vec4 dvs9_1 = subgroupAdd(dv9_1);
    const vec4 dvs10_0 = subgroupAdd(dv10_0);
    const vec4 dvs10_1 = subgroupAdd(dv10_1);
    const vec4 dvs11_0 = subgroupAdd(dv11_0);
    const vec4 dvs11_1 = subgroupAdd(dv11_1);
    const vec4 dvs12_0 = subgroupAdd(dv12_0);
    const vec4 dvs12_1 = subgroupAdd(dv12_1);
    const vec4 dvs13_0 = subgroupAdd(dv13_0);
    const vec4 dvs13_1 = subgroupAdd(dv13_1);
    const vec4 dvs14_0 = subgroupAdd(dv14_0);
    const vec4 dvs14_1 = subgroupAdd(dv14_1);
    const vec4 dvs15_0 = subgroupAdd(dv15_0);
    const vec4 dvs15_1 = subgroupAdd(dv15_1);
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
    {
        const uint r = L + 8u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? dvs8_0 : (L == 1u ? dvs9_0 : (L == 2u ? dvs10_0 : (L == 3u ? dvs11_0 : (L == 4u ? dvs12_0 : (L == 5u ? dvs13_0 : (L == 6u ? dvs14_0 : dvs15_0)))))));
        o[1] = (L == 0u ? dvs8_1 : (L == 1u ? dvs9_1 : (L == 2u ? dvs10_1 : (L == 3u ? dvs11_1 : (L == 4u ? dvs12_1 : (L == 5u ? dvs13_1 : (L == 6u ? dvs14_1 : dvs15_1)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.KVH + g) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dv(ob, 4 * e, o[e]);
        }

    }

}
