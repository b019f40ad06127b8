#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// One query per item r (a sequence's newest token at position pos = hyper[8 + 4r]) over its cache slot's
// keys and values 0..pos: one workgroup of WG threads per (item, head). Scores go to `score` (f32 [R*H, L]),
// then max, exp and sum by workgroup reductions; the output sums split the keys over WG / D thread groups.
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_q { float16_t q[]; };
layout(std430, binding = 1) readonly buffer Buf_kc { float16_t kc[]; };
layout(std430, binding = 2) readonly buffer Buf_vc { float16_t vc[]; };
layout(std430, binding = 3) readonly buffer Buf_hyper { uint hyper[]; };
layout(std430, binding = 4) buffer Buf_score { float score[]; };
layout(std430, binding = 5) writeonly buffer Buf_o { float16_t o[]; };
layout(push_constant) uniform Push {
    uint R;
    uint H;
    uint KVH;
    uint D;
    uint L;
    float scale;
} p;
layout(local_size_x_id = 0) in;
shared float red_wg_sum[WG];
float wg_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_sum[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_sum[t]; float b = red_wg_sum[t + s]; red_wg_sum[t] = a + b; }
        barrier();
    }
    float r = red_wg_sum[0];
    barrier();
    return r;
}
shared float red_wg_max[WG];
float wg_max(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_max[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_max[t]; float b = red_wg_max[t + s]; red_wg_max[t] = max(a, b); }
        barrier();
    }
    float r = red_wg_max[0];
    barrier();
    return r;
}
shared float part[WG];

void main() {
    const uint g = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    if (g >= p.R * p.H) return;  // uniform per workgroup
    const uint r = g / p.H, h = g % p.H, t = gl_LocalInvocationID.x;
    const uint kv = hyper[8 + 4 * r] + 1, slot = hyper[8 + 4 * r + 1];
    const uint kh = h / (p.H / p.KVH);
    const uint qb = (r * p.H + h) * p.D, sb = g * p.L;
    const uint kstride = p.KVH * p.D, cb = slot * p.L * kstride + kh * p.D;
    float m = -3.402823466e38;
    for (uint j = t; j < kv; j += WG) {
        float s = 0.0;
        for (uint d = 0; d < p.D; ++d) s += float(q[qb + d]) * float(kc[cb + j * kstride + d]);
        s *= p.scale;
        score[sb + j] = s;
        m = max(m, s);
    }
    m = wg_max(m);
    float l = 0.0;
    for (uint j = t; j < kv; j += WG) {
        float e = exp(score[sb + j] - m);
        score[sb + j] = e;
        l += e;
    }
    l = wg_sum(l);  // its barriers also order the score writes before the reads below
    const uint groups = WG / p.D;  // D <= WG (ops.attention_decode checks)
    const uint d = t % p.D, jg = t / p.D;
    float acc = 0.0;
    if (jg < groups)
        for (uint j = jg; j < kv; j += groups) acc += score[sb + j] * float(vc[cb + j * kstride + d]);
    part[t] = acc;
    barrier();
    if (t < p.D) {
        float s = 0.0;
        for (uint k = 0; k < groups; ++k) s += part[k * p.D + t];
        o[qb + t] = float16_t(s / l);
    }
}
