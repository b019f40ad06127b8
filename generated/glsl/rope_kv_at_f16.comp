#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// rope_kv_at: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_q { float16_t q[]; };
layout(std430, binding = 1) readonly buffer Buf_k { float16_t k[]; };
layout(std430, binding = 2) readonly buffer Buf_v { float16_t v[]; };
layout(std430, binding = 3) readonly buffer Buf_hyper { uint hyper[]; };
layout(std430, binding = 4) writeonly buffer Buf_qo { float16_t qo[]; };
layout(std430, binding = 5) writeonly buffer Buf_kc { float16_t kc[]; };
layout(std430, binding = 6) writeonly buffer Buf_vc { float16_t vc[]; };
layout(push_constant) uniform Push {
    uint S;
    uint H;
    uint KVH;
    uint D;
    uint Q;
    uint L;
    float log2_theta;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // rope_at of q [S, H, D] into qo, rope_at of k [S, KVH, D] into its cache rows and v's rows into theirs
    // (kv_write): the decode step's four kernels after the q/k/v projections in one, with their arithmetic.
    // Threads: S H D/2 rotate q's pairs, then S KVH D/2 rotate k's, then S KVH D/2 copy v's pairs.
    const uint half_d = p.D / 2, nq = p.S * p.H * half_d, nk = p.S * p.KVH * half_d;
    if (i >= nq + 2 * nk) return;
    const bool isq = i < nq;
    const uint li = isq ? i : (i < nq + nk ? i - nq : i - nq - nk), heads = isq ? p.H : p.KVH;
    uint qd = li % half_d, th = li / half_d;
    uint tok = th / heads, o = th * p.D + qd;
    // the cache element of o: row (slot * L + position + tok % Q), the same head and dimension
    uint dst = (hyper[8 + 4 * (tok / p.Q) + 1] * p.L + (hyper[8 + 4 * (tok / p.Q)] + tok % p.Q)) * (p.KVH * p.D) + (o - tok * p.KVH * p.D);
    if (i >= nq + nk) {
        vc[dst] = v[o];
        vc[dst + half_d] = v[o + half_d];
        return;
    }
    float a = float(isq ? q[o] : k[o]), b = float(isq ? q[o + half_d] : k[o + half_d]);
    float freq = exp2(-2.0 * float(qd) / float(p.D) * p.log2_theta);
    float ang = float((hyper[8 + 4 * (tok / p.Q)] + tok % p.Q)) * freq;
    float rc = cos(ang), rs = sin(ang);
    float ya = a * rc - b * rs, yb = a * rs + b * rc;
    if (isq) {
        qo[o] = float16_t(ya);
        qo[o + half_d] = float16_t(yb);
    } else {
        kc[dst] = float16_t(ya);
        kc[dst + half_d] = float16_t(yb);
    }
}