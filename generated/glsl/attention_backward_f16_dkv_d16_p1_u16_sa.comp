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

const uint HD = 16, TPR = 1;
const uint DV = 4;        // vec4s of a row per thread
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
    const vec4 k0_2 = ldv_k(kb0, 8), v0_2 = ldv_v(kb0, 8);
    vec4 dk0_2 = vec4(0.0), dv0_2 = vec4(0.0);
    const vec4 k0_3 = ldv_k(kb0, 12), v0_3 = ldv_v(kb0, 12);
    vec4 dk0_3 = vec4(0.0), dv0_3 = vec4(0.0);
    const uint kb1 = ((b * S + min(r0 + 1, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k1_0 = ldv_k(kb1, 0), v1_0 = ldv_v(kb1, 0);
    vec4 dk1_0 = vec4(0.0), dv1_0 = vec4(0.0);
    const vec4 k1_1 = ldv_k(kb1, 4), v1_1 = ldv_v(kb1, 4);
    vec4 dk1_1 = vec4(0.0), dv1_1 = vec4(0.0);
    const vec4 k1_2 = ldv_k(kb1, 8), v1_2 = ldv_v(kb1, 8);
    vec4 dk1_2 = vec4(0.0), dv1_2 = vec4(0.0);
    const vec4 k1_3 = ldv_k(kb1, 12), v1_3 = ldv_v(kb1, 12);
    vec4 dk1_3 = vec4(0.0), dv1_3 = vec4(0.0);
    const uint kb2 = ((b * S + min(r0 + 2, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k2_0 = ldv_k(kb2, 0), v2_0 = ldv_v(kb2, 0);
    vec4 dk2_0 = vec4(0.0), dv2_0 = vec4(0.0);
    const vec4 k2_1 = ldv_k(kb2, 4), v2_1 = ldv_v(kb2, 4);
    vec4 dk2_1 = vec4(0.0), dv2_1 = vec4(0.0);
    const vec4 k2_2 = ldv_k(kb2, 8), v2_2 = ldv_v(kb2, 8);
    vec4 dk2_2 = vec4(0.0), dv2_2 = vec4(0.0);
    const vec4 k2_3 = ldv_k(kb2, 12), v2_3 = ldv_v(kb2, 12);
    vec4 dk2_3 = vec4(0.0), dv2_3 = vec4(0.0);
    const uint kb3 = ((b * S + min(r0 + 3, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k3_0 = ldv_k(kb3, 0), v3_0 = ldv_v(kb3, 0);
    vec4 dk3_0 = vec4(0.0), dv3_0 = vec4(0.0);
    const vec4 k3_1 = ldv_k(kb3, 4), v3_1 = ldv_v(kb3, 4);
    vec4 dk3_1 = vec4(0.0), dv3_1 = vec4(0.0);
    const vec4 k3_2 = ldv_k(kb3, 8), v3_2 = ldv_v(kb3, 8);
    vec4 dk3_2 = vec4(0.0), dv3_2 = vec4(0.0);
    const vec4 k3_3 = ldv_k(kb3, 12), v3_3 = ldv_v(kb3, 12);
    vec4 dk3_3 = vec4(0.0), dv3_3 = vec4(0.0);
    const uint kb4 = ((b * S + min(r0 + 4, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k4_0 = ldv_k(kb4, 0), v4_0 = ldv_v(kb4, 0);
    vec4 dk4_0 = vec4(0.0), dv4_0 = vec4(0.0);
    const vec4 k4_1 = ldv_k(kb4, 4), v4_1 = ldv_v(kb4, 4);
    vec4 dk4_1 = vec4(0.0), dv4_1 = vec4(0.0);
    const vec4 k4_2 = ldv_k(kb4, 8), v4_2 = ldv_v(kb4, 8);
    vec4 dk4_2 = vec4(0.0), dv4_2 = vec4(0.0);
    const vec4 k4_3 = ldv_k(kb4, 12), v4_3 = ldv_v(kb4, 12);
    vec4 dk4_3 = vec4(0.0), dv4_3 = vec4(0.0);
    const uint kb5 = ((b * S + min(r0 + 5, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k5_0 = ldv_k(kb5, 0), v5_0 = ldv_v(kb5, 0);
    vec4 dk5_0 = vec4(0.0), dv5_0 = vec4(0.0);
    const vec4 k5_1 = ldv_k(kb5, 4), v5_1 = ldv_v(kb5, 4);
    vec4 dk5_1 = vec4(0.0), dv5_1 = vec4(0.0);
    const vec4 k5_2 = ldv_k(kb5, 8), v5_2 = ldv_v(kb5, 8);
    vec4 dk5_2 = vec4(0.0), dv5_2 = vec4(0.0);
    const vec4 k5_3 = ldv_k(kb5, 12), v5_3 = ldv_v(kb5, 12);
    vec4 dk5_3 = vec4(0.0), dv5_3 = vec4(0.0);
    const uint kb6 = ((b * S + min(r0 + 6, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k6_0 = ldv_k(kb6, 0), v6_0 = ldv_v(kb6, 0);
    vec4 dk6_0 = vec4(0.0), dv6_0 = vec4(0.0);
    const vec4 k6_1 = ldv_k(kb6, 4), v6_1 = ldv_v(kb6, 4);
    vec4 dk6_1 = vec4(0.0), dv6_1 = vec4(0.0);
    const vec4 k6_2 = ldv_k(kb6, 8), v6_2 = ldv_v(kb6, 8);
    vec4 dk6_2 = vec4(0.0), dv6_2 = vec4(0.0);
    const vec4 k6_3 = ldv_k(kb6, 12), v6_3 = ldv_v(kb6, 12);
    vec4 dk6_3 = vec4(0.0), dv6_3 = vec4(0.0);
    const uint kb7 = ((b * S + min(r0 + 7, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k7_0 = ldv_k(kb7, 0), v7_0 = ldv_v(kb7, 0);
    vec4 dk7_0 = vec4(0.0), dv7_0 = vec4(0.0);
    const vec4 k7_1 = ldv_k(kb7, 4), v7_1 = ldv_v(kb7, 4);
    vec4 dk7_1 = vec4(0.0), dv7_1 = vec4(0.0);
    const vec4 k7_2 = ldv_k(kb7, 8), v7_2 = ldv_v(kb7, 8);
    vec4 dk7_2 = vec4(0.0), dv7_2 = vec4(0.0);
    const vec4 k7_3 = ldv_k(kb7, 12), v7_3 = ldv_v(kb7, 12);
    vec4 dk7_3 = vec4(0.0), dv7_3 = vec4(0.0);
    const uint kb8 = ((b * S + min(r0 + 8, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k8_0 = ldv_k(kb8, 0), v8_0 = ldv_v(kb8, 0);
    vec4 dk8_0 = vec4(0.0), dv8_0 = vec4(0.0);
    const vec4 k8_1 = ldv_k(kb8, 4), v8_1 = ldv_v(kb8, 4);
    vec4 dk8_1 = vec4(0.0), dv8_1 = vec4(0.0);
    const vec4 k8_2 = ldv_k(kb8, 8), v8_2 = ldv_v(kb8, 8);
    vec4 dk8_2 = vec4(0.0), dv8_2 = vec4(0.0);
    const vec4 k8_3 = ldv_k(kb8, 12), v8_3 = ldv_v(kb8, 12);
    vec4 dk8_3 = vec4(0.0), dv8_3 = vec4(0.0);
    const uint kb9 = ((b * S + min(r0 + 9, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k9_0 = ldv_k(kb9, 0), v9_0 = ldv_v(kb9, 0);
    vec4 dk9_0 = vec4(0.0), dv9_0 = vec4(0.0);
    const vec4 k9_1 = ldv_k(kb9, 4), v9_1 = ldv_v(kb9, 4);
    vec4 dk9_1 = vec4(0.0), dv9_1 = vec4(0.0);
    const vec4 k9_2 = ldv_k(kb9, 8), v9_2 = ldv_v(kb9, 8);
    vec4 dk9_2 = vec4(0.0), dv9_2 = vec4(0.0);
    const vec4 k9_3 = ldv_k(kb9, 12), v9_3 = ldv_v(kb9, 12);
    vec4 dk9_3 = vec4(0.0), dv9_3 = vec4(0.0);
    const uint kb10 = ((b * S + min(r0 + 10, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k10_0 = ldv_k(kb10, 0), v10_0 = ldv_v(kb10, 0);
    vec4 dk10_0 = vec4(0.0), dv10_0 = vec4(0.0);
    const vec4 k10_1 = ldv_k(kb10, 4), v10_1 = ldv_v(kb10, 4);
    vec4 dk10_1 = vec4(0.0), dv10_1 = vec4(0.0);
    const vec4 k10_2 = ldv_k(kb10, 8), v10_2 = ldv_v(kb10, 8);
    vec4 dk10_2 = vec4(0.0), dv10_2 = vec4(0.0);
    const vec4 k10_3 = ldv_k(kb10, 12), v10_3 = ldv_v(kb10, 12);
    vec4 dk10_3 = vec4(0.0), dv10_3 = vec4(0.0);
    const uint kb11 = ((b * S + min(r0 + 11, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k11_0 = ldv_k(kb11, 0), v11_0 = ldv_v(kb11, 0);
    vec4 dk11_0 = vec4(0.0), dv11_0 = vec4(0.0);
    const vec4 k11_1 = ldv_k(kb11, 4), v11_1 = ldv_v(kb11, 4);
    vec4 dk11_1 = vec4(0.0), dv11_1 = vec4(0.0);
    const vec4 k11_2 = ldv_k(kb11, 8), v11_2 = ldv_v(kb11, 8);
    vec4 dk11_2 = vec4(0.0), dv11_2 = vec4(0.0);
    const vec4 k11_3 = ldv_k(kb11, 12), v11_3 = ldv_v(kb11, 12);
    vec4 dk11_3 = vec4(0.0), dv11_3 = vec4(0.0);
    const uint kb12 = ((b * S + min(r0 + 12, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k12_0 = ldv_k(kb12, 0), v12_0 = ldv_v(kb12, 0);
    vec4 dk12_0 = vec4(0.0), dv12_0 = vec4(0.0);
    const vec4 k12_1 = ldv_k(kb12, 4), v12_1 = ldv_v(kb12, 4);
    vec4 dk12_1 = vec4(0.0), dv12_1 = vec4(0.0);
    const vec4 k12_2 = ldv_k(kb12, 8), v12_2 = ldv_v(kb12, 8);
    vec4 dk12_2 = vec4(0.0), dv12_2 = vec4(0.0);
    const vec4 k12_3 = ldv_k(kb12, 12), v12_3 = ldv_v(kb12, 12);
    vec4 dk12_3 = vec4(0.0), dv12_3 = vec4(0.0);
    const uint kb13 = ((b * S + min(r0 + 13, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k13_0 = ldv_k(kb13, 0), v13_0 = ldv_v(kb13, 0);
    vec4 dk13_0 = vec4(0.0), dv13_0 = vec4(0.0);
    const vec4 k13_1 = ldv_k(kb13, 4), v13_1 = ldv_v(kb13, 4);
    vec4 dk13_1 = vec4(0.0), dv13_1 = vec4(0.0);
    const vec4 k13_2 = ldv_k(kb13, 8), v13_2 = ldv_v(kb13, 8);
    vec4 dk13_2 = vec4(0.0), dv13_2 = vec4(0.0);
    const vec4 k13_3 = ldv_k(kb13, 12), v13_3 = ldv_v(kb13, 12);
    vec4 dk13_3 = vec4(0.0), dv13_3 = vec4(0.0);
    const uint kb14 = ((b * S + min(r0 + 14, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k14_0 = ldv_k(kb14, 0), v14_0 = ldv_v(kb14, 0);
    vec4 dk14_0 = vec4(0.0), dv14_0 = vec4(0.0);
    const vec4 k14_1 = ldv_k(kb14, 4), v14_1 = ldv_v(kb14, 4);
    vec4 dk14_1 = vec4(0.0), dv14_1 = vec4(0.0);
    const vec4 k14_2 = ldv_k(kb14, 8), v14_2 = ldv_v(kb14, 8);
    vec4 dk14_2 = vec4(0.0), dv14_2 = vec4(0.0);
    const vec4 k14_3 = ldv_k(kb14, 12), v14_3 = ldv_v(kb14, 12);
    vec4 dk14_3 = vec4(0.0), dv14_3 = vec4(0.0);
    const uint kb15 = ((b * S + min(r0 + 15, S - 1u)) * p.KVH + g) * p.D;
    const vec4 k15_0 = ldv_k(kb15, 0), v15_0 = ldv_v(kb15, 0);
    vec4 dk15_0 = vec4(0.0), dv15_0 = vec4(0.0);
    const vec4 k15_1 = ldv_k(kb15, 4), v15_1 = ldv_v(kb15, 4);
    vec4 dk15_1 = vec4(0.0), dv15_1 = vec4(0.0);
    const vec4 k15_2 = ldv_k(kb15, 8), v15_2 = ldv_v(kb15, 8);
    vec4 dk15_2 = vec4(0.0), dv15_2 = vec4(0.0);
    const vec4 k15_3 = ldv_k(kb15, 12), v15_3 = ldv_v(kb15, 12);
    vec4 dk15_3 = vec4(0.0), dv15_3 = vec4(0.0);
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
                const float li = lse[(b * p.H + h) * S + ic], di = delta[(b * p.H + h) * S + ic];
                {
                    const bool vis = i < S && (!causal || r0 + 0 <= i);
                    const float pr = vis ? exp2((dot(k0_0, q0) + dot(k0_1, q1) + dot(k0_2, q2) + dot(k0_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v0_0, o0) + dot(v0_1, o1) + dot(v0_2, o2) + dot(v0_3, o3)) - di);
                    dv0_0 += pr * o0;
                    dk0_0 += ds * q0;
                    dv0_1 += pr * o1;
                    dk0_1 += ds * q1;
                    dv0_2 += pr * o2;
                    dk0_2 += ds * q2;
                    dv0_3 += pr * o3;
                    dk0_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 1 <= i);
                    const float pr = vis ? exp2((dot(k1_0, q0) + dot(k1_1, q1) + dot(k1_2, q2) + dot(k1_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v1_0, o0) + dot(v1_1, o1) + dot(v1_2, o2) + dot(v1_3, o3)) - di);
                    dv1_0 += pr * o0;
                    dk1_0 += ds * q0;
                    dv1_1 += pr * o1;
                    dk1_1 += ds * q1;
                    dv1_2 += pr * o2;
                    dk1_2 += ds * q2;
                    dv1_3 += pr * o3;
                    dk1_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 2 <= i);
                    const float pr = vis ? exp2((dot(k2_0, q0) + dot(k2_1, q1) + dot(k2_2, q2) + dot(k2_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v2_0, o0) + dot(v2_1, o1) + dot(v2_2, o2) + dot(v2_3, o3)) - di);
                    dv2_0 += pr * o0;
                    dk2_0 += ds * q0;
                    dv2_1 += pr * o1;
                    dk2_1 += ds * q1;
                    dv2_2 += pr * o2;
                    dk2_2 += ds * q2;
                    dv2_3 += pr * o3;
                    dk2_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 3 <= i);
                    const float pr = vis ? exp2((dot(k3_0, q0) + dot(k3_1, q1) + dot(k3_2, q2) + dot(k3_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v3_0, o0) + dot(v3_1, o1) + dot(v3_2, o2) + dot(v3_3, o3)) - di);
                    dv3_0 += pr * o0;
                    dk3_0 += ds * q0;
                    dv3_1 += pr * o1;
                    dk3_1 += ds * q1;
                    dv3_2 += pr * o2;
                    dk3_2 += ds * q2;
                    dv3_3 += pr * o3;
                    dk3_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 4 <= i);
                    const float pr = vis ? exp2((dot(k4_0, q0) + dot(k4_1, q1) + dot(k4_2, q2) + dot(k4_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v4_0, o0) + dot(v4_1, o1) + dot(v4_2, o2) + dot(v4_3, o3)) - di);
                    dv4_0 += pr * o0;
                    dk4_0 += ds * q0;
                    dv4_1 += pr * o1;
                    dk4_1 += ds * q1;
                    dv4_2 += pr * o2;
                    dk4_2 += ds * q2;
                    dv4_3 += pr * o3;
                    dk4_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 5 <= i);
                    const float pr = vis ? exp2((dot(k5_0, q0) + dot(k5_1, q1) + dot(k5_2, q2) + dot(k5_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v5_0, o0) + dot(v5_1, o1) + dot(v5_2, o2) + dot(v5_3, o3)) - di);
                    dv5_0 += pr * o0;
                    dk5_0 += ds * q0;
                    dv5_1 += pr * o1;
                    dk5_1 += ds * q1;
                    dv5_2 += pr * o2;
                    dk5_2 += ds * q2;
                    dv5_3 += pr * o3;
                    dk5_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 6 <= i);
                    const float pr = vis ? exp2((dot(k6_0, q0) + dot(k6_1, q1) + dot(k6_2, q2) + dot(k6_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v6_0, o0) + dot(v6_1, o1) + dot(v6_2, o2) + dot(v6_3, o3)) - di);
                    dv6_0 += pr * o0;
                    dk6_0 += ds * q0;
                    dv6_1 += pr * o1;
                    dk6_1 += ds * q1;
                    dv6_2 += pr * o2;
                    dk6_2 += ds * q2;
                    dv6_3 += pr * o3;
                    dk6_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 7 <= i);
                    const float pr = vis ? exp2((dot(k7_0, q0) + dot(k7_1, q1) + dot(k7_2, q2) + dot(k7_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v7_0, o0) + dot(v7_1, o1) + dot(v7_2, o2) + dot(v7_3, o3)) - di);
                    dv7_0 += pr * o0;
                    dk7_0 += ds * q0;
                    dv7_1 += pr * o1;
                    dk7_1 += ds * q1;
                    dv7_2 += pr * o2;
                    dk7_2 += ds * q2;
                    dv7_3 += pr * o3;
                    dk7_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 8 <= i);
                    const float pr = vis ? exp2((dot(k8_0, q0) + dot(k8_1, q1) + dot(k8_2, q2) + dot(k8_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v8_0, o0) + dot(v8_1, o1) + dot(v8_2, o2) + dot(v8_3, o3)) - di);
                    dv8_0 += pr * o0;
                    dk8_0 += ds * q0;
                    dv8_1 += pr * o1;
                    dk8_1 += ds * q1;
                    dv8_2 += pr * o2;
                    dk8_2 += ds * q2;
                    dv8_3 += pr * o3;
                    dk8_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 9 <= i);
                    const float pr = vis ? exp2((dot(k9_0, q0) + dot(k9_1, q1) + dot(k9_2, q2) + dot(k9_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v9_0, o0) + dot(v9_1, o1) + dot(v9_2, o2) + dot(v9_3, o3)) - di);
                    dv9_0 += pr * o0;
                    dk9_0 += ds * q0;
                    dv9_1 += pr * o1;
                    dk9_1 += ds * q1;
                    dv9_2 += pr * o2;
                    dk9_2 += ds * q2;
                    dv9_3 += pr * o3;
                    dk9_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 10 <= i);
                    const float pr = vis ? exp2((dot(k10_0, q0) + dot(k10_1, q1) + dot(k10_2, q2) + dot(k10_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v10_0, o0) + dot(v10_1, o1) + dot(v10_2, o2) + dot(v10_3, o3)) - di);
                    dv10_0 += pr * o0;
                    dk10_0 += ds * q0;
                    dv10_1 += pr * o1;
                    dk10_1 += ds * q1;
                    dv10_2 += pr * o2;
                    dk10_2 += ds * q2;
                    dv10_3 += pr * o3;
                    dk10_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 11 <= i);
                    const float pr = vis ? exp2((dot(k11_0, q0) + dot(k11_1, q1) + dot(k11_2, q2) + dot(k11_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v11_0, o0) + dot(v11_1, o1) + dot(v11_2, o2) + dot(v11_3, o3)) - di);
                    dv11_0 += pr * o0;
                    dk11_0 += ds * q0;
                    dv11_1 += pr * o1;
                    dk11_1 += ds * q1;
                    dv11_2 += pr * o2;
                    dk11_2 += ds * q2;
                    dv11_3 += pr * o3;
                    dk11_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 12 <= i);
                    const float pr = vis ? exp2((dot(k12_0, q0) + dot(k12_1, q1) + dot(k12_2, q2) + dot(k12_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v12_0, o0) + dot(v12_1, o1) + dot(v12_2, o2) + dot(v12_3, o3)) - di);
                    dv12_0 += pr * o0;
                    dk12_0 += ds * q0;
                    dv12_1 += pr * o1;
                    dk12_1 += ds * q1;
                    dv12_2 += pr * o2;
                    dk12_2 += ds * q2;
                    dv12_3 += pr * o3;
                    dk12_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 13 <= i);
                    const float pr = vis ? exp2((dot(k13_0, q0) + dot(k13_1, q1) + dot(k13_2, q2) + dot(k13_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v13_0, o0) + dot(v13_1, o1) + dot(v13_2, o2) + dot(v13_3, o3)) - di);
                    dv13_0 += pr * o0;
                    dk13_0 += ds * q0;
                    dv13_1 += pr * o1;
                    dk13_1 += ds * q1;
                    dv13_2 += pr * o2;
                    dk13_2 += ds * q2;
                    dv13_3 += pr * o3;
                    dk13_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 14 <= i);
                    const float pr = vis ? exp2((dot(k14_0, q0) + dot(k14_1, q1) + dot(k14_2, q2) + dot(k14_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v14_0, o0) + dot(v14_1, o1) + dot(v14_2, o2) + dot(v14_3, o3)) - di);
                    dv14_0 += pr * o0;
                    dk14_0 += ds * q0;
                    dv14_1 += pr * o1;
                    dk14_1 += ds * q1;
                    dv14_2 += pr * o2;
                    dk14_2 += ds * q2;
                    dv14_3 += pr * o3;
                    dk14_3 += ds * q3;
                }
                {
                    const bool vis = i < S && (!causal || r0 + 15 <= i);
                    const float pr = vis ? exp2((dot(k15_0, q0) + dot(k15_1, q1) + dot(k15_2, q2) + dot(k15_3, q3)) * c - li) : 0.0;
                    const float ds = pr * ((dot(v15_0, o0) + dot(v15_1, o1) + dot(v15_2, o2) + dot(v15_3, o3)) - di);
                    dv15_0 += pr * o0;
                    dk15_0 += ds * q0;
                    dv15_1 += pr * o1;
                    dk15_1 += ds * q1;
                    dv15_2 += pr * o2;
                    dk15_2 += ds * q2;
                    dv15_3 += pr * o3;
                    dk15_3 += ds * q3;
                }
            }
        }
    }
    const vec4 dks0_0 = subgroupAdd(dk0_0);
    const vec4 dks0_1 = subgroupAdd(dk0_1);
    const vec4 dks0_2 = subgroupAdd(dk0_2);
    const vec4 dks0_3 = subgroupAdd(dk0_3);
    const vec4 dks1_0 = subgroupAdd(dk1_0);
    const vec4 dks1_1 = subgroupAdd(dk1_1);
    const vec4 dks1_2 = subgroupAdd(dk1_2);
    const vec4 dks1_3 = subgroupAdd(dk1_3);
    const vec4 dks2_0 = subgroupAdd(dk2_0);
    const vec4 dks2_1 = subgroupAdd(dk2_1);
    const vec4 dks2_2 = subgroupAdd(dk2_2);
    const vec4 dks2_3 = subgroupAdd(dk2_3);
    const vec4 dks3_0 = subgroupAdd(dk3_0);
    const vec4 dks3_1 = subgroupAdd(dk3_1);
    const vec4 dks3_2 = subgroupAdd(dk3_2);
    const vec4 dks3_3 = subgroupAdd(dk3_3);
    const vec4 dks4_0 = subgroupAdd(dk4_0);
    const vec4 dks4_1 = subgroupAdd(dk4_1);
    const vec4 dks4_2 = subgroupAdd(dk4_2);
    const vec4 dks4_3 = subgroupAdd(dk4_3);
    const vec4 dks5_0 = subgroupAdd(dk5_0);
    const vec4 dks5_1 = subgroupAdd(dk5_1);
    const vec4 dks5_2 = subgroupAdd(dk5_2);
    const vec4 dks5_3 = subgroupAdd(dk5_3);
    const vec4 dks6_0 = subgroupAdd(dk6_0);
    const vec4 dks6_1 = subgroupAdd(dk6_1);
    const vec4 dks6_2 = subgroupAdd(dk6_2);
    const vec4 dks6_3 = subgroupAdd(dk6_3);
    const vec4 dks7_0 = subgroupAdd(dk7_0);
    const vec4 dks7_1 = subgroupAdd(dk7_1);
    const vec4 dks7_2 = subgroupAdd(dk7_2);
    const vec4 dks7_3 = subgroupAdd(dk7_3);
    const vec4 dks8_0 = subgroupAdd(dk8_0);
    const vec4 dks8_1 = subgroupAdd(dk8_1);
    const vec4 dks8_2 = subgroupAdd(dk8_2);
    const vec4 dks8_3 = subgroupAdd(dk8_3);
    const vec4 dks9_0 = subgroupAdd(dk9_0);
    const vec4 dks9_1 = subgroupAdd(dk9_1);
    const vec4 dks9_2 = subgroupAdd(dk9_2);
    const vec4 dks9_3 = subgroupAdd(dk9_3);
    const vec4 dks10_0 = subgroupAdd(dk10_0);
    const vec4 dks10_1 = subgroupAdd(dk10_1);
    const vec4 dks10_2 = subgroupAdd(dk10_2);
    const vec4 dks10_3 = subgroupAdd(dk10_3);
    const vec4 dks11_0 = subgroupAdd(dk11_0);
    const vec4 dks11_1 = subgroupAdd(dk11_1);
    const vec4 dks11_2 = subgroupAdd(dk11_2);
    const vec4 dks11_3 = subgroupAdd(dk11_3);
    const vec4 dks12_0 = subgroupAdd(dk12_0);
    const vec4 dks12_1 = subgroupAdd(dk12_1);
    const vec4 dks12_2 = subgroupAdd(dk12_2);
    const vec4 dks12_3 = subgroupAdd(dk12_3);
    const vec4 dks13_0 = subgroupAdd(dk13_0);
    const vec4 dks13_1 = subgroupAdd(dk13_1);
    const vec4 dks13_2 = subgroupAdd(dk13_2);
    const vec4 dks13_3 = subgroupAdd(dk13_3);
    const vec4 dks14_0 = subgroupAdd(dk14_0);
    const vec4 dks14_1 = subgroupAdd(dk14_1);
    const vec4 dks14_2 = subgroupAdd(dk14_2);
    const vec4 dks14_3 = subgroupAdd(dk14_3);
    const vec4 dks15_0 = subgroupAdd(dk15_0);
    const vec4 dks15_1 = subgroupAdd(dk15_1);
    const vec4 dks15_2 = subgroupAdd(dk15_2);
    const vec4 dks15_3 = subgroupAdd(dk15_3);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? dks0_0 : (L == 1u ? dks1_0 : (L == 2u ? dks2_0 : (L == 3u ? dks3_0 : (L == 4u ? dks4_0 : (L == 5u ? dks5_0 : (L == 6u ? dks6_0 : dks7_0)))))));
        o[1] = (L == 0u ? dks0_1 : (L == 1u ? dks1_1 : (L == 2u ? dks2_1 : (L == 3u ? dks3_1 : (L == 4u ? dks4_1 : (L == 5u ? dks5_1 : (L == 6u ? dks6_1 : dks7_1)))))));
        o[2] = (L == 0u ? dks0_2 : (L == 1u ? dks1_2 : (L == 2u ? dks2_2 : (L == 3u ? dks3_2 : (L == 4u ? dks4_2 : (L == 5u ? dks5_2 : (L == 6u ? dks6_2 : dks7_2)))))));
        o[3] = (L == 0u ? dks0_3 : (L == 1u ? dks1_3 : (L == 2u ? dks2_3 : (L == 3u ? dks3_3 : (L == 4u ? dks4_3 : (L == 5u ? dks5_3 : (L == 6u ? dks6_3 : dks7_3)))))));
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
        o[2] = (L == 0u ? dks8_2 : (L == 1u ? dks9_2 : (L == 2u ? dks10_2 : (L == 3u ? dks11_2 : (L == 4u ? dks12_2 : (L == 5u ? dks13_2 : (L == 6u ? dks14_2 : dks15_2)))))));
        o[3] = (L == 0u ? dks8_3 : (L == 1u ? dks9_3 : (L == 2u ? dks10_3 : (L == 3u ? dks11_3 : (L == 4u ? dks12_3 : (L == 5u ? dks13_3 : (L == 6u ? dks14_3 : dks15_3)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.KVH + g) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dk(ob, 4 * e, o[e] * p.scale);
        }

    }

    const vec4 dvs0_0 = subgroupAdd(dv0_0);
    const vec4 dvs0_1 = subgroupAdd(dv0_1);
    const vec4 dvs0_2 = subgroupAdd(dv0_2);
    const vec4 dvs0_3 = subgroupAdd(dv0_3);
    const vec4 dvs1_0 = subgroupAdd(dv1_0);
    const vec4 dvs1_1 = subgroupAdd(dv1_1);
    const vec4 dvs1_2 = subgroupAdd(dv1_2);
    const vec4 dvs1_3 = subgroupAdd(dv1_3);
    const vec4 dvs2_0 = subgroupAdd(dv2_0);
    const vec4 dvs2_1 = subgroupAdd(dv2_1);
    const vec4 dvs2_2 = subgroupAdd(dv2_2);
    const vec4 dvs2_3 = subgroupAdd(dv2_3);
    const vec4 dvs3_0 = subgroupAdd(dv3_0);
    const vec4 dvs3_1 = subgroupAdd(dv3_1);
    const vec4 dvs3_2 = subgroupAdd(dv3_2);
    const vec4 dvs3_3 = subgroupAdd(dv3_3);
    const vec4 dvs4_0 = subgroupAdd(dv4_0);
    const vec4 dvs4_1 = subgroupAdd(dv4_1);
    const vec4 dvs4_2 = subgroupAdd(dv4_2);
    const vec4 dvs4_3 = subgroupAdd(dv4_3);
    const vec4 dvs5_0 = subgroupAdd(dv5_0);
    const vec4 dvs5_1 = subgroupAdd(dv5_1);
    const vec4 dvs5_2 = subgroupAdd(dv5_2);
    const vec4 dvs5_3 = subgroupAdd(dv5_3);
    const vec4 dvs6_0 = subgroupAdd(dv6_0);
    const vec4 dvs6_1 = subgroupAdd(dv6_1);
    const vec4 dvs6_2 = subgroupAdd(dv6_2);
    const vec4 dvs6_3 = subgroupAdd(dv6_3);
    const vec4 dvs7_0 = subgroupAdd(dv7_0);
    const vec4 dvs7_1 = subgroupAdd(dv7_1);
    const vec4 dvs7_2 = subgroupAdd(dv7_2);
    const vec4 dvs7_3 = subgroupAdd(dv7_3);
    const vec4 dvs8_0 = subgroupAdd(dv8_0);
    const vec4 dvs8_1 = subgroupAdd(dv8_1);
    const vec4 dvs8_2 = subgroupAdd(dv8_2);
    const vec4 dvs8_3 = subgroupAdd(dv8_3);
    const vec4 dvs9_0 = subgroupAdd(dv9_0);
    const vec4 dvs9_1 = subgroupAdd(dv9_1);
    const vec4 dvs9_2 = subgroupAdd(dv9_2);
    const vec4 dvs9_3 = subgroupAdd(dv9_3);
    const vec4 dvs10_0 = subgroupAdd(dv10_0);
    const vec4 dvs10_1 = subgroupAdd(dv10_1);
    const vec4 dvs10_2 = subgroupAdd(dv10_2);
    const vec4 dvs10_3 = subgroupAdd(dv10_3);
    const vec4 dvs11_0 = subgroupAdd(dv11_0);
    const vec4 dvs11_1 = subgroupAdd(dv11_1);
    const vec4 dvs11_2 = subgroupAdd(dv11_2);
    const vec4 dvs11_3 = subgroupAdd(dv11_3);
    const vec4 dvs12_0 = subgroupAdd(dv12_0);
    const vec4 dvs12_1 = subgroupAdd(dv12_1);
    const vec4 dvs12_2 = subgroupAdd(dv12_2);
    const vec4 dvs12_3 = subgroupAdd(dv12_3);
    const vec4 dvs13_0 = subgroupAdd(dv13_0);
    const vec4 dvs13_1 = subgroupAdd(dv13_1);
    const vec4 dvs13_2 = subgroupAdd(dv13_2);
    const vec4 dvs13_3 = subgroupAdd(dv13_3);
    const vec4 dvs14_0 = subgroupAdd(dv14_0);
    const vec4 dvs14_1 = subgroupAdd(dv14_1);
    const vec4 dvs14_2 = subgroupAdd(dv14_2);
    const vec4 dvs14_3 = subgroupAdd(dv14_3);
    const vec4 dvs15_0 = subgroupAdd(dv15_0);
    const vec4 dvs15_1 = subgroupAdd(dv15_1);
    const vec4 dvs15_2 = subgroupAdd(dv15_2);
    const vec4 dvs15_3 = subgroupAdd(dv15_3);
    {
        const uint r = L + 0u;
        const uint row = r0 + r;
        vec4 o[DV];
        o[0] = (L == 0u ? dvs0_0 : (L == 1u ? dvs1_0 : (L == 2u ? dvs2_0 : (L == 3u ? dvs3_0 : (L == 4u ? dvs4_0 : (L == 5u ? dvs5_0 : (L == 6u ? dvs6_0 : dvs7_0)))))));
        o[1] = (L == 0u ? dvs0_1 : (L == 1u ? dvs1_1 : (L == 2u ? dvs2_1 : (L == 3u ? dvs3_1 : (L == 4u ? dvs4_1 : (L == 5u ? dvs5_1 : (L == 6u ? dvs6_1 : dvs7_1)))))));
        o[2] = (L == 0u ? dvs0_2 : (L == 1u ? dvs1_2 : (L == 2u ? dvs2_2 : (L == 3u ? dvs3_2 : (L == 4u ? dvs4_2 : (L == 5u ? dvs5_2 : (L == 6u ? dvs6_2 : dvs7_2)))))));
        o[3] = (L == 0u ? dvs0_3 : (L == 1u ? dvs1_3 : (L == 2u ? dvs2_3 : (L == 3u ? dvs3_3 : (L == 4u ? dvs4_3 : (L == 5u ? dvs5_3 : (L == 6u ? dvs6_3 : dvs7_3)))))));
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
        o[2] = (L == 0u ? dvs8_2 : (L == 1u ? dvs9_2 : (L == 2u ? dvs10_2 : (L == 3u ? dvs11_2 : (L == 4u ? dvs12_2 : (L == 5u ? dvs13_2 : (L == 6u ? dvs14_2 : dvs15_2)))))));
        o[3] = (L == 0u ? dvs8_3 : (L == 1u ? dvs9_3 : (L == 2u ? dvs10_3 : (L == 3u ? dvs11_3 : (L == 4u ? dvs12_3 : (L == 5u ? dvs13_3 : (L == 6u ? dvs14_3 : dvs15_3)))))));
        if (row < S) {
            const uint ob = ((b * S + row) * p.KVH + g) * p.D;
            [[unroll]] for (uint e = 0; e < DV; ++e) st_dv(ob, 4 * e, o[e]);
        }

    }

}
