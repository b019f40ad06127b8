#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

#extension GL_KHR_shader_subgroup_basic : require
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
layout(std430, binding = 1) readonly buffer Buf_k4 { uvec2 k4[]; };
vec4 ld_k(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) { uvec2 w = k4[(base + d) / 4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
    return vec4(float(k[base + d]), d + 1 < p.D ? float(k[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(k[base + d + 2]) : 0.0, d + 3 < p.D ? float(k[base + d + 3]) : 0.0);
}
layout(std430, binding = 2) readonly buffer Buf_v4 { uvec2 v4[]; };
vec4 ld_v(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) { uvec2 w = v4[(base + d) / 4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
    return vec4(float(v[base + d]), d + 1 < p.D ? float(v[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(v[base + d + 2]) : 0.0, d + 3 < p.D ? float(v[base + d + 3]) : 0.0);
}
layout(std430, binding = 3) readonly buffer Buf_dout4 { uvec2 dout4[]; };
vec4 ld_dout(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) { uvec2 w = dout4[(base + d) / 4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
    return vec4(float(dout[base + d]), d + 1 < p.D ? float(dout[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(dout[base + d + 2]) : 0.0, d + 3 < p.D ? float(dout[base + d + 3]) : 0.0);
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

const uint HD = 128, TPR = 1;
const uint DV = 32;        // vec4s of a row per thread
const uint HV = HD / 4;          // vec4s of a row
// A streamed row in shared memory: the TPR parts of DV vec4s each, one vec4 apart (HVP per row), so
// the parts the TPR threads of a row read at once fall in different banks.
const uint HVP = HV + TPR - 1;
const float LOG2E = 1.4426950408889634;
const float NEG = -3.0e38;       // masked score: exp2(NEG - m) == 0 for any finite row max m

shared vec4 t0[TILE * HVP];       // streamed tile: K (fwd, dq) or Q (dkv)
shared vec4 t1[TILE * HVP];       // V (fwd, dq) or dO (dkv)
shared float tl[TILE], td[TILE]; // lse and D of the q tile's rows
shared vec4 xch[TPR > 1 ? 4 * WG : 1];  // partial-sum exchange: 2 buffers x 2 quantities (the forward uses 1)

uint slot, row, lane;

// Sums of a and b over the TPR threads of this row (identical in each of them). Double-buffered by
// `buf` (alternate per call): the barrier of call n+1 orders every read of call n before a rewrite.
void allsum2(inout vec4 a, inout vec4 b, uint buf, bool two) {
    if (TPR == 1) return;
    xch[(2 * buf) * WG + slot] = a;
    if (two) xch[(2 * buf + 1) * WG + slot] = b;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    a = vec4(0.0);
    b = vec4(0.0);
    [[unroll]] for (uint t = 0; t < TPR; ++t) {
        a += xch[(2 * buf) * WG + row * TPR + t];
        if (two) b += xch[(2 * buf + 1) * WG + row * TPR + t];
    }
}

void main() {
    const uint tid = gl_LocalInvocationIndex;
    // Rows by subgroup, so the TPR threads of a row share one (any subgroup size that TPR divides).
    slot = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    row = slot / TPR;
    lane = slot % TPR;
    const uint S = p.S, b = gl_WorkGroupID.z;
    const bool causal = p.causal != 0u;
    const float c = p.scale * LOG2E;
    const uint r0 = gl_WorkGroupID.x * ROWS;  // the workgroup's first row
    const uint me = r0 + row;                 // this thread's row (query, or key in dkv)
    const uint d0 = lane * (HD / TPR);        // this thread's part of the row
    // dkv: this thread's row is key `me` of kv head g; loop over the q tiles of each head of the group.
    const uint g = gl_WorkGroupID.y, G = p.H / p.KVH;
    const uint kb = ((b * S + me) * p.KVH + g) * p.D;
    const bool live = me < S;
    vec4 kr0, vr0, dk_0, dv_0;
    vec4 kr1, vr1, dk_1, dv_1;
    vec4 kr2, vr2, dk_2, dv_2;
    vec4 kr3, vr3, dk_3, dv_3;
    vec4 kr4, vr4, dk_4, dv_4;
    vec4 kr5, vr5, dk_5, dv_5;
    vec4 kr6, vr6, dk_6, dv_6;
    vec4 kr7, vr7, dk_7, dv_7;
    vec4 kr8, vr8, dk_8, dv_8;
    vec4 kr9, vr9, dk_9, dv_9;
    vec4 kr10, vr10, dk_10, dv_10;
    vec4 kr11, vr11, dk_11, dv_11;
    vec4 kr12, vr12, dk_12, dv_12;
    vec4 kr13, vr13, dk_13, dv_13;
    vec4 kr14, vr14, dk_14, dv_14;
    vec4 kr15, vr15, dk_15, dv_15;
    vec4 kr16, vr16, dk_16, dv_16;
    vec4 kr17, vr17, dk_17, dv_17;
    vec4 kr18, vr18, dk_18, dv_18;
    vec4 kr19, vr19, dk_19, dv_19;
    vec4 kr20, vr20, dk_20, dv_20;
    vec4 kr21, vr21, dk_21, dv_21;
    vec4 kr22, vr22, dk_22, dv_22;
    vec4 kr23, vr23, dk_23, dv_23;
    vec4 kr24, vr24, dk_24, dv_24;
    vec4 kr25, vr25, dk_25, dv_25;
    vec4 kr26, vr26, dk_26, dv_26;
    vec4 kr27, vr27, dk_27, dv_27;
    vec4 kr28, vr28, dk_28, dv_28;
    vec4 kr29, vr29, dk_29, dv_29;
    vec4 kr30, vr30, dk_30, dv_30;
    vec4 kr31, vr31, dk_31, dv_31;
    {
        kr0 = live ? ld_k(kb, d0 + 4 * 0) : vec4(0.0);
        vr0 = live ? ld_v(kb, d0 + 4 * 0) : vec4(0.0);
        dk_0 = vec4(0.0);
        dv_0 = vec4(0.0);
    }
    {
        kr1 = live ? ld_k(kb, d0 + 4 * 1) : vec4(0.0);
        vr1 = live ? ld_v(kb, d0 + 4 * 1) : vec4(0.0);
        dk_1 = vec4(0.0);
        dv_1 = vec4(0.0);
    }
    {
        kr2 = live ? ld_k(kb, d0 + 4 * 2) : vec4(0.0);
        vr2 = live ? ld_v(kb, d0 + 4 * 2) : vec4(0.0);
        dk_2 = vec4(0.0);
        dv_2 = vec4(0.0);
    }
    {
        kr3 = live ? ld_k(kb, d0 + 4 * 3) : vec4(0.0);
        vr3 = live ? ld_v(kb, d0 + 4 * 3) : vec4(0.0);
        dk_3 = vec4(0.0);
        dv_3 = vec4(0.0);
    }
    {
        kr4 = live ? ld_k(kb, d0 + 4 * 4) : vec4(0.0);
        vr4 = live ? ld_v(kb, d0 + 4 * 4) : vec4(0.0);
        dk_4 = vec4(0.0);
        dv_4 = vec4(0.0);
    }
    {
        kr5 = live ? ld_k(kb, d0 + 4 * 5) : vec4(0.0);
        vr5 = live ? ld_v(kb, d0 + 4 * 5) : vec4(0.0);
        dk_5 = vec4(0.0);
        dv_5 = vec4(0.0);
    }
    {
        kr6 = live ? ld_k(kb, d0 + 4 * 6) : vec4(0.0);
        vr6 = live ? ld_v(kb, d0 + 4 * 6) : vec4(0.0);
        dk_6 = vec4(0.0);
        dv_6 = vec4(0.0);
    }
    {
        kr7 = live ? ld_k(kb, d0 + 4 * 7) : vec4(0.0);
        vr7 = live ? ld_v(kb, d0 + 4 * 7) : vec4(0.0);
        dk_7 = vec4(0.0);
        dv_7 = vec4(0.0);
    }
    {
        kr8 = live ? ld_k(kb, d0 + 4 * 8) : vec4(0.0);
        vr8 = live ? ld_v(kb, d0 + 4 * 8) : vec4(0.0);
        dk_8 = vec4(0.0);
        dv_8 = vec4(0.0);
    }
    {
        kr9 = live ? ld_k(kb, d0 + 4 * 9) : vec4(0.0);
        vr9 = live ? ld_v(kb, d0 + 4 * 9) : vec4(0.0);
        dk_9 = vec4(0.0);
        dv_9 = vec4(0.0);
    }
    {
        kr10 = live ? ld_k(kb, d0 + 4 * 10) : vec4(0.0);
        vr10 = live ? ld_v(kb, d0 + 4 * 10) : vec4(0.0);
        dk_10 = vec4(0.0);
        dv_10 = vec4(0.0);
    }
    {
        kr11 = live ? ld_k(kb, d0 + 4 * 11) : vec4(0.0);
        vr11 = live ? ld_v(kb, d0 + 4 * 11) : vec4(0.0);
        dk_11 = vec4(0.0);
        dv_11 = vec4(0.0);
    }
    {
        kr12 = live ? ld_k(kb, d0 + 4 * 12) : vec4(0.0);
        vr12 = live ? ld_v(kb, d0 + 4 * 12) : vec4(0.0);
        dk_12 = vec4(0.0);
        dv_12 = vec4(0.0);
    }
    {
        kr13 = live ? ld_k(kb, d0 + 4 * 13) : vec4(0.0);
        vr13 = live ? ld_v(kb, d0 + 4 * 13) : vec4(0.0);
        dk_13 = vec4(0.0);
        dv_13 = vec4(0.0);
    }
    {
        kr14 = live ? ld_k(kb, d0 + 4 * 14) : vec4(0.0);
        vr14 = live ? ld_v(kb, d0 + 4 * 14) : vec4(0.0);
        dk_14 = vec4(0.0);
        dv_14 = vec4(0.0);
    }
    {
        kr15 = live ? ld_k(kb, d0 + 4 * 15) : vec4(0.0);
        vr15 = live ? ld_v(kb, d0 + 4 * 15) : vec4(0.0);
        dk_15 = vec4(0.0);
        dv_15 = vec4(0.0);
    }
    {
        kr16 = live ? ld_k(kb, d0 + 4 * 16) : vec4(0.0);
        vr16 = live ? ld_v(kb, d0 + 4 * 16) : vec4(0.0);
        dk_16 = vec4(0.0);
        dv_16 = vec4(0.0);
    }
    {
        kr17 = live ? ld_k(kb, d0 + 4 * 17) : vec4(0.0);
        vr17 = live ? ld_v(kb, d0 + 4 * 17) : vec4(0.0);
        dk_17 = vec4(0.0);
        dv_17 = vec4(0.0);
    }
    {
        kr18 = live ? ld_k(kb, d0 + 4 * 18) : vec4(0.0);
        vr18 = live ? ld_v(kb, d0 + 4 * 18) : vec4(0.0);
        dk_18 = vec4(0.0);
        dv_18 = vec4(0.0);
    }
    {
        kr19 = live ? ld_k(kb, d0 + 4 * 19) : vec4(0.0);
        vr19 = live ? ld_v(kb, d0 + 4 * 19) : vec4(0.0);
        dk_19 = vec4(0.0);
        dv_19 = vec4(0.0);
    }
    {
        kr20 = live ? ld_k(kb, d0 + 4 * 20) : vec4(0.0);
        vr20 = live ? ld_v(kb, d0 + 4 * 20) : vec4(0.0);
        dk_20 = vec4(0.0);
        dv_20 = vec4(0.0);
    }
    {
        kr21 = live ? ld_k(kb, d0 + 4 * 21) : vec4(0.0);
        vr21 = live ? ld_v(kb, d0 + 4 * 21) : vec4(0.0);
        dk_21 = vec4(0.0);
        dv_21 = vec4(0.0);
    }
    {
        kr22 = live ? ld_k(kb, d0 + 4 * 22) : vec4(0.0);
        vr22 = live ? ld_v(kb, d0 + 4 * 22) : vec4(0.0);
        dk_22 = vec4(0.0);
        dv_22 = vec4(0.0);
    }
    {
        kr23 = live ? ld_k(kb, d0 + 4 * 23) : vec4(0.0);
        vr23 = live ? ld_v(kb, d0 + 4 * 23) : vec4(0.0);
        dk_23 = vec4(0.0);
        dv_23 = vec4(0.0);
    }
    {
        kr24 = live ? ld_k(kb, d0 + 4 * 24) : vec4(0.0);
        vr24 = live ? ld_v(kb, d0 + 4 * 24) : vec4(0.0);
        dk_24 = vec4(0.0);
        dv_24 = vec4(0.0);
    }
    {
        kr25 = live ? ld_k(kb, d0 + 4 * 25) : vec4(0.0);
        vr25 = live ? ld_v(kb, d0 + 4 * 25) : vec4(0.0);
        dk_25 = vec4(0.0);
        dv_25 = vec4(0.0);
    }
    {
        kr26 = live ? ld_k(kb, d0 + 4 * 26) : vec4(0.0);
        vr26 = live ? ld_v(kb, d0 + 4 * 26) : vec4(0.0);
        dk_26 = vec4(0.0);
        dv_26 = vec4(0.0);
    }
    {
        kr27 = live ? ld_k(kb, d0 + 4 * 27) : vec4(0.0);
        vr27 = live ? ld_v(kb, d0 + 4 * 27) : vec4(0.0);
        dk_27 = vec4(0.0);
        dv_27 = vec4(0.0);
    }
    {
        kr28 = live ? ld_k(kb, d0 + 4 * 28) : vec4(0.0);
        vr28 = live ? ld_v(kb, d0 + 4 * 28) : vec4(0.0);
        dk_28 = vec4(0.0);
        dv_28 = vec4(0.0);
    }
    {
        kr29 = live ? ld_k(kb, d0 + 4 * 29) : vec4(0.0);
        vr29 = live ? ld_v(kb, d0 + 4 * 29) : vec4(0.0);
        dk_29 = vec4(0.0);
        dv_29 = vec4(0.0);
    }
    {
        kr30 = live ? ld_k(kb, d0 + 4 * 30) : vec4(0.0);
        vr30 = live ? ld_v(kb, d0 + 4 * 30) : vec4(0.0);
        dk_30 = vec4(0.0);
        dv_30 = vec4(0.0);
    }
    {
        kr31 = live ? ld_k(kb, d0 + 4 * 31) : vec4(0.0);
        vr31 = live ? ld_v(kb, d0 + 4 * 31) : vec4(0.0);
        dk_31 = vec4(0.0);
        dv_31 = vec4(0.0);
    }
    const uint istart = causal ? (r0 / TILE) * TILE : 0;  // q tiles wholly before the key tile see none of it
    uint nb = 0;
    for (uint hh = 0; hh < G; ++hh) {
        const uint h = g * G + hh;
        for (uint i0 = istart; i0 < S; i0 += TILE) {
            barrier();
            for (uint e = tid; e < TILE * HV; e += WG) {
                const uint i = i0 + e / HV, d4 = e % HV, at = (e / HV) * HVP + d4 + d4 / DV;
                const uint qb = ((b * S + i) * p.H + h) * p.D;
                t0[at] = i < S ? ld_q(qb, 4 * d4) : vec4(0.0);
                t1[at] = i < S ? ld_dout(qb, 4 * d4) : vec4(0.0);
            }
            for (uint e = tid; e < TILE; e += WG) {
                const uint i = i0 + e;
                tl[e] = i < S ? lse[(b * p.H + h) * S + i] : 0.0;
                td[e] = i < S ? delta[(b * p.H + h) * S + i] : 0.0;
            }
            barrier();
            const uint n = min(TILE, S - i0);
            for (uint c0 = 0; c0 < n; c0 += 4, nb ^= 1u) {
                vec4 s = vec4(0.0), dp = vec4(0.0);
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 0;
                    s += vec4(dot(kr0, t0[x]), dot(kr0, t0[x + HVP]), dot(kr0, t0[x + 2 * HVP]), dot(kr0, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr0, t1[x]), dot(vr0, t1[x + HVP]), dot(vr0, t1[x + 2 * HVP]), dot(vr0, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 1;
                    s += vec4(dot(kr1, t0[x]), dot(kr1, t0[x + HVP]), dot(kr1, t0[x + 2 * HVP]), dot(kr1, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr1, t1[x]), dot(vr1, t1[x + HVP]), dot(vr1, t1[x + 2 * HVP]), dot(vr1, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 2;
                    s += vec4(dot(kr2, t0[x]), dot(kr2, t0[x + HVP]), dot(kr2, t0[x + 2 * HVP]), dot(kr2, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr2, t1[x]), dot(vr2, t1[x + HVP]), dot(vr2, t1[x + 2 * HVP]), dot(vr2, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 3;
                    s += vec4(dot(kr3, t0[x]), dot(kr3, t0[x + HVP]), dot(kr3, t0[x + 2 * HVP]), dot(kr3, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr3, t1[x]), dot(vr3, t1[x + HVP]), dot(vr3, t1[x + 2 * HVP]), dot(vr3, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 4;
                    s += vec4(dot(kr4, t0[x]), dot(kr4, t0[x + HVP]), dot(kr4, t0[x + 2 * HVP]), dot(kr4, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr4, t1[x]), dot(vr4, t1[x + HVP]), dot(vr4, t1[x + 2 * HVP]), dot(vr4, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 5;
                    s += vec4(dot(kr5, t0[x]), dot(kr5, t0[x + HVP]), dot(kr5, t0[x + 2 * HVP]), dot(kr5, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr5, t1[x]), dot(vr5, t1[x + HVP]), dot(vr5, t1[x + 2 * HVP]), dot(vr5, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 6;
                    s += vec4(dot(kr6, t0[x]), dot(kr6, t0[x + HVP]), dot(kr6, t0[x + 2 * HVP]), dot(kr6, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr6, t1[x]), dot(vr6, t1[x + HVP]), dot(vr6, t1[x + 2 * HVP]), dot(vr6, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 7;
                    s += vec4(dot(kr7, t0[x]), dot(kr7, t0[x + HVP]), dot(kr7, t0[x + 2 * HVP]), dot(kr7, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr7, t1[x]), dot(vr7, t1[x + HVP]), dot(vr7, t1[x + 2 * HVP]), dot(vr7, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 8;
                    s += vec4(dot(kr8, t0[x]), dot(kr8, t0[x + HVP]), dot(kr8, t0[x + 2 * HVP]), dot(kr8, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr8, t1[x]), dot(vr8, t1[x + HVP]), dot(vr8, t1[x + 2 * HVP]), dot(vr8, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 9;
                    s += vec4(dot(kr9, t0[x]), dot(kr9, t0[x + HVP]), dot(kr9, t0[x + 2 * HVP]), dot(kr9, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr9, t1[x]), dot(vr9, t1[x + HVP]), dot(vr9, t1[x + 2 * HVP]), dot(vr9, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 10;
                    s += vec4(dot(kr10, t0[x]), dot(kr10, t0[x + HVP]), dot(kr10, t0[x + 2 * HVP]), dot(kr10, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr10, t1[x]), dot(vr10, t1[x + HVP]), dot(vr10, t1[x + 2 * HVP]), dot(vr10, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 11;
                    s += vec4(dot(kr11, t0[x]), dot(kr11, t0[x + HVP]), dot(kr11, t0[x + 2 * HVP]), dot(kr11, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr11, t1[x]), dot(vr11, t1[x + HVP]), dot(vr11, t1[x + 2 * HVP]), dot(vr11, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 12;
                    s += vec4(dot(kr12, t0[x]), dot(kr12, t0[x + HVP]), dot(kr12, t0[x + 2 * HVP]), dot(kr12, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr12, t1[x]), dot(vr12, t1[x + HVP]), dot(vr12, t1[x + 2 * HVP]), dot(vr12, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 13;
                    s += vec4(dot(kr13, t0[x]), dot(kr13, t0[x + HVP]), dot(kr13, t0[x + 2 * HVP]), dot(kr13, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr13, t1[x]), dot(vr13, t1[x + HVP]), dot(vr13, t1[x + 2 * HVP]), dot(vr13, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 14;
                    s += vec4(dot(kr14, t0[x]), dot(kr14, t0[x + HVP]), dot(kr14, t0[x + 2 * HVP]), dot(kr14, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr14, t1[x]), dot(vr14, t1[x + HVP]), dot(vr14, t1[x + 2 * HVP]), dot(vr14, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 15;
                    s += vec4(dot(kr15, t0[x]), dot(kr15, t0[x + HVP]), dot(kr15, t0[x + 2 * HVP]), dot(kr15, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr15, t1[x]), dot(vr15, t1[x + HVP]), dot(vr15, t1[x + 2 * HVP]), dot(vr15, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 16;
                    s += vec4(dot(kr16, t0[x]), dot(kr16, t0[x + HVP]), dot(kr16, t0[x + 2 * HVP]), dot(kr16, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr16, t1[x]), dot(vr16, t1[x + HVP]), dot(vr16, t1[x + 2 * HVP]), dot(vr16, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 17;
                    s += vec4(dot(kr17, t0[x]), dot(kr17, t0[x + HVP]), dot(kr17, t0[x + 2 * HVP]), dot(kr17, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr17, t1[x]), dot(vr17, t1[x + HVP]), dot(vr17, t1[x + 2 * HVP]), dot(vr17, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 18;
                    s += vec4(dot(kr18, t0[x]), dot(kr18, t0[x + HVP]), dot(kr18, t0[x + 2 * HVP]), dot(kr18, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr18, t1[x]), dot(vr18, t1[x + HVP]), dot(vr18, t1[x + 2 * HVP]), dot(vr18, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 19;
                    s += vec4(dot(kr19, t0[x]), dot(kr19, t0[x + HVP]), dot(kr19, t0[x + 2 * HVP]), dot(kr19, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr19, t1[x]), dot(vr19, t1[x + HVP]), dot(vr19, t1[x + 2 * HVP]), dot(vr19, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 20;
                    s += vec4(dot(kr20, t0[x]), dot(kr20, t0[x + HVP]), dot(kr20, t0[x + 2 * HVP]), dot(kr20, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr20, t1[x]), dot(vr20, t1[x + HVP]), dot(vr20, t1[x + 2 * HVP]), dot(vr20, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 21;
                    s += vec4(dot(kr21, t0[x]), dot(kr21, t0[x + HVP]), dot(kr21, t0[x + 2 * HVP]), dot(kr21, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr21, t1[x]), dot(vr21, t1[x + HVP]), dot(vr21, t1[x + 2 * HVP]), dot(vr21, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 22;
                    s += vec4(dot(kr22, t0[x]), dot(kr22, t0[x + HVP]), dot(kr22, t0[x + 2 * HVP]), dot(kr22, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr22, t1[x]), dot(vr22, t1[x + HVP]), dot(vr22, t1[x + 2 * HVP]), dot(vr22, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 23;
                    s += vec4(dot(kr23, t0[x]), dot(kr23, t0[x + HVP]), dot(kr23, t0[x + 2 * HVP]), dot(kr23, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr23, t1[x]), dot(vr23, t1[x + HVP]), dot(vr23, t1[x + 2 * HVP]), dot(vr23, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 24;
                    s += vec4(dot(kr24, t0[x]), dot(kr24, t0[x + HVP]), dot(kr24, t0[x + 2 * HVP]), dot(kr24, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr24, t1[x]), dot(vr24, t1[x + HVP]), dot(vr24, t1[x + 2 * HVP]), dot(vr24, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 25;
                    s += vec4(dot(kr25, t0[x]), dot(kr25, t0[x + HVP]), dot(kr25, t0[x + 2 * HVP]), dot(kr25, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr25, t1[x]), dot(vr25, t1[x + HVP]), dot(vr25, t1[x + 2 * HVP]), dot(vr25, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 26;
                    s += vec4(dot(kr26, t0[x]), dot(kr26, t0[x + HVP]), dot(kr26, t0[x + 2 * HVP]), dot(kr26, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr26, t1[x]), dot(vr26, t1[x + HVP]), dot(vr26, t1[x + 2 * HVP]), dot(vr26, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 27;
                    s += vec4(dot(kr27, t0[x]), dot(kr27, t0[x + HVP]), dot(kr27, t0[x + 2 * HVP]), dot(kr27, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr27, t1[x]), dot(vr27, t1[x + HVP]), dot(vr27, t1[x + 2 * HVP]), dot(vr27, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 28;
                    s += vec4(dot(kr28, t0[x]), dot(kr28, t0[x + HVP]), dot(kr28, t0[x + 2 * HVP]), dot(kr28, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr28, t1[x]), dot(vr28, t1[x + HVP]), dot(vr28, t1[x + 2 * HVP]), dot(vr28, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 29;
                    s += vec4(dot(kr29, t0[x]), dot(kr29, t0[x + HVP]), dot(kr29, t0[x + 2 * HVP]), dot(kr29, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr29, t1[x]), dot(vr29, t1[x + HVP]), dot(vr29, t1[x + 2 * HVP]), dot(vr29, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 30;
                    s += vec4(dot(kr30, t0[x]), dot(kr30, t0[x + HVP]), dot(kr30, t0[x + 2 * HVP]), dot(kr30, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr30, t1[x]), dot(vr30, t1[x + HVP]), dot(vr30, t1[x + 2 * HVP]), dot(vr30, t1[x + 3 * HVP]));
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 31;
                    s += vec4(dot(kr31, t0[x]), dot(kr31, t0[x + HVP]), dot(kr31, t0[x + 2 * HVP]), dot(kr31, t0[x + 3 * HVP]));
                    dp += vec4(dot(vr31, t1[x]), dot(vr31, t1[x + HVP]), dot(vr31, t1[x + 2 * HVP]), dot(vr31, t1[x + 3 * HVP]));
                }
                allsum2(s, dp, nb, true);
                bvec4 vis;
                [[unroll]] for (uint u = 0; u < 4; ++u) {
                    const uint i = i0 + c0 + u;
                    vis[u] = i < S && (!causal || me <= i);
                }
                const vec4 L4 = vec4(tl[c0], tl[c0 + 1], tl[c0 + 2], tl[c0 + 3]);
                const vec4 D4 = vec4(td[c0], td[c0 + 1], td[c0 + 2], td[c0 + 3]);
                const vec4 pr = mix(vec4(0.0), exp2(s * c - L4), vis);
                const vec4 ds = pr * (dp - D4);
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 0;
                    dv_0 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_0 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 1;
                    dv_1 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_1 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 2;
                    dv_2 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_2 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 3;
                    dv_3 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_3 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 4;
                    dv_4 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_4 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 5;
                    dv_5 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_5 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 6;
                    dv_6 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_6 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 7;
                    dv_7 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_7 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 8;
                    dv_8 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_8 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 9;
                    dv_9 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_9 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 10;
                    dv_10 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_10 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 11;
                    dv_11 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_11 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 12;
                    dv_12 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_12 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 13;
                    dv_13 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_13 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 14;
                    dv_14 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_14 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 15;
                    dv_15 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_15 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 16;
                    dv_16 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_16 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 17;
                    dv_17 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_17 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 18;
                    dv_18 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_18 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 19;
                    dv_19 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_19 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 20;
                    dv_20 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_20 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 21;
                    dv_21 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_21 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 22;
                    dv_22 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_22 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 23;
                    dv_23 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_23 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 24;
                    dv_24 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_24 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 25;
                    dv_25 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_25 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 26;
                    dv_26 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_26 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 27;
                    dv_27 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_27 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 28;
                    dv_28 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_28 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 29;
                    dv_29 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_29 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 30;
                    dv_30 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_30 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
                {
                    const uint x = c0 * HVP + lane * (DV + 1) + 31;
                    dv_31 += pr.x * t1[x] + pr.y * t1[x + HVP] + pr.z * t1[x + 2 * HVP] + pr.w * t1[x + 3 * HVP];
                    dk_31 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
                }
            }
        }
    }
    if (!live) return;
    {
        st_dk(kb, d0 + 4 * 0, dk_0 * p.scale);
        st_dv(kb, d0 + 4 * 0, dv_0);
    }
    {
        st_dk(kb, d0 + 4 * 1, dk_1 * p.scale);
        st_dv(kb, d0 + 4 * 1, dv_1);
    }
    {
        st_dk(kb, d0 + 4 * 2, dk_2 * p.scale);
        st_dv(kb, d0 + 4 * 2, dv_2);
    }
    {
        st_dk(kb, d0 + 4 * 3, dk_3 * p.scale);
        st_dv(kb, d0 + 4 * 3, dv_3);
    }
    {
        st_dk(kb, d0 + 4 * 4, dk_4 * p.scale);
        st_dv(kb, d0 + 4 * 4, dv_4);
    }
    {
        st_dk(kb, d0 + 4 * 5, dk_5 * p.scale);
        st_dv(kb, d0 + 4 * 5, dv_5);
    }
    {
        st_dk(kb, d0 + 4 * 6, dk_6 * p.scale);
        st_dv(kb, d0 + 4 * 6, dv_6);
    }
    {
        st_dk(kb, d0 + 4 * 7, dk_7 * p.scale);
        st_dv(kb, d0 + 4 * 7, dv_7);
    }
    {
        st_dk(kb, d0 + 4 * 8, dk_8 * p.scale);
        st_dv(kb, d0 + 4 * 8, dv_8);
    }
    {
        st_dk(kb, d0 + 4 * 9, dk_9 * p.scale);
        st_dv(kb, d0 + 4 * 9, dv_9);
    }
    {
        st_dk(kb, d0 + 4 * 10, dk_10 * p.scale);
        st_dv(kb, d0 + 4 * 10, dv_10);
    }
    {
        st_dk(kb, d0 + 4 * 11, dk_11 * p.scale);
        st_dv(kb, d0 + 4 * 11, dv_11);
    }
    {
        st_dk(kb, d0 + 4 * 12, dk_12 * p.scale);
        st_dv(kb, d0 + 4 * 12, dv_12);
    }
    {
        st_dk(kb, d0 + 4 * 13, dk_13 * p.scale);
        st_dv(kb, d0 + 4 * 13, dv_13);
    }
    {
        st_dk(kb, d0 + 4 * 14, dk_14 * p.scale);
        st_dv(kb, d0 + 4 * 14, dv_14);
    }
    {
        st_dk(kb, d0 + 4 * 15, dk_15 * p.scale);
        st_dv(kb, d0 + 4 * 15, dv_15);
    }
    {
        st_dk(kb, d0 + 4 * 16, dk_16 * p.scale);
        st_dv(kb, d0 + 4 * 16, dv_16);
    }
    {
        st_dk(kb, d0 + 4 * 17, dk_17 * p.scale);
        st_dv(kb, d0 + 4 * 17, dv_17);
    }
    {
        st_dk(kb, d0 + 4 * 18, dk_18 * p.scale);
        st_dv(kb, d0 + 4 * 18, dv_18);
    }
    {
        st_dk(kb, d0 + 4 * 19, dk_19 * p.scale);
        st_dv(kb, d0 + 4 * 19, dv_19);
    }
    {
        st_dk(kb, d0 + 4 * 20, dk_20 * p.scale);
        st_dv(kb, d0 + 4 * 20, dv_20);
    }
    {
        st_dk(kb, d0 + 4 * 21, dk_21 * p.scale);
        st_dv(kb, d0 + 4 * 21, dv_21);
    }
    {
        st_dk(kb, d0 + 4 * 22, dk_22 * p.scale);
        st_dv(kb, d0 + 4 * 22, dv_22);
    }
    {
        st_dk(kb, d0 + 4 * 23, dk_23 * p.scale);
        st_dv(kb, d0 + 4 * 23, dv_23);
    }
    {
        st_dk(kb, d0 + 4 * 24, dk_24 * p.scale);
        st_dv(kb, d0 + 4 * 24, dv_24);
    }
    {
        st_dk(kb, d0 + 4 * 25, dk_25 * p.scale);
        st_dv(kb, d0 + 4 * 25, dv_25);
    }
    {
        st_dk(kb, d0 + 4 * 26, dk_26 * p.scale);
        st_dv(kb, d0 + 4 * 26, dv_26);
    }
    {
        st_dk(kb, d0 + 4 * 27, dk_27 * p.scale);
        st_dv(kb, d0 + 4 * 27, dv_27);
    }
    {
        st_dk(kb, d0 + 4 * 28, dk_28 * p.scale);
        st_dv(kb, d0 + 4 * 28, dv_28);
    }
    {
        st_dk(kb, d0 + 4 * 29, dk_29 * p.scale);
        st_dv(kb, d0 + 4 * 29, dv_29);
    }
    {
        st_dk(kb, d0 + 4 * 30, dk_30 * p.scale);
        st_dv(kb, d0 + 4 * 30, dv_30);
    }
    {
        st_dk(kb, d0 + 4 * 31, dk_31 * p.scale);
        st_dv(kb, d0 + 4 * 31, dv_31);
    }
}
