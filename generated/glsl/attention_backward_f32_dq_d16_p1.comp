#version 450
#extension GL_EXT_control_flow_attributes : enable

#extension GL_KHR_shader_subgroup_basic : require
// attention dq (f32 storage, f32 arithmetic)
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 64;
layout(constant_id = 2) const uint TILE = 64;
layout(std430, binding = 0) readonly buffer Buf_q { float q[]; };
layout(std430, binding = 1) readonly buffer Buf_k { float k[]; };
layout(std430, binding = 2) readonly buffer Buf_v { float v[]; };
layout(std430, binding = 3) readonly buffer Buf_o { float o[]; };
layout(std430, binding = 4) readonly buffer Buf_dout { float dout[]; };
layout(std430, binding = 5) readonly buffer Buf_lse { float lse[]; };
layout(std430, binding = 6) writeonly buffer Buf_delta { float delta[]; };
layout(std430, binding = 7) writeonly buffer Buf_dq { float dq[]; };
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
layout(std430, binding = 1) readonly buffer Buf_k4 { vec4 k4[]; };
vec4 ld_k(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) return k4[(base + d) / 4];
    return vec4(float(k[base + d]), d + 1 < p.D ? float(k[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(k[base + d + 2]) : 0.0, d + 3 < p.D ? float(k[base + d + 3]) : 0.0);
}
layout(std430, binding = 2) readonly buffer Buf_v4 { vec4 v4[]; };
vec4 ld_v(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) return v4[(base + d) / 4];
    return vec4(float(v[base + d]), d + 1 < p.D ? float(v[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(v[base + d + 2]) : 0.0, d + 3 < p.D ? float(v[base + d + 3]) : 0.0);
}
layout(std430, binding = 3) readonly buffer Buf_o4 { vec4 o4[]; };
vec4 ld_o(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) return o4[(base + d) / 4];
    return vec4(float(o[base + d]), d + 1 < p.D ? float(o[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(o[base + d + 2]) : 0.0, d + 3 < p.D ? float(o[base + d + 3]) : 0.0);
}
layout(std430, binding = 4) readonly buffer Buf_dout4 { vec4 dout4[]; };
vec4 ld_dout(uint base, uint d) {  // elements d..d+3 of the row starting at `base`, zeros past D
    if (d >= p.D) return vec4(0.0);
    if ((p.D & 3u) == 0u) return dout4[(base + d) / 4];
    return vec4(float(dout[base + d]), d + 1 < p.D ? float(dout[base + d + 1]) : 0.0,
                d + 2 < p.D ? float(dout[base + d + 2]) : 0.0, d + 3 < p.D ? float(dout[base + d + 3]) : 0.0);
}
layout(std430, binding = 7) writeonly buffer Buf_dq4 { vec4 dq4[]; };
void st_dq(uint base, uint d, vec4 x) {
    if (d >= p.D) return;
    if ((p.D & 3u) == 0u) { dq4[(base + d) / 4] = x; return; }
    for (uint u = 0; u < 4 && d + u < p.D; ++u) dq[base + d + u] = float(x[u]);
}

const uint HD = 16, TPR = 1;
const uint DV = 4;        // vec4s of a row per thread
const uint HV = HD / 4;          // vec4s of a row
// A streamed row in shared memory: the TPR parts of DV vec4s each, one vec4 apart (HVP per row), so
// the parts the TPR threads of a row read at once fall in different banks.
const uint HVP = HV + TPR - 1;
const float LOG2E = 1.4426950408889634;
const float NEG = -3.0e38;       // masked score: exp2(NEG - m) == 0 for any finite row max m

shared vec4 t0[TILE * HVP];       // streamed tile: K (fwd, dq) or Q (dkv)
shared vec4 t1[TILE * HVP];       // V (fwd, dq) or dO (dkv)
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
    const uint h = gl_WorkGroupID.y, g = h / (p.H / p.KVH);
    const uint qbase = ((b * S + me) * p.H + h) * p.D;
    const uint stat = (b * p.H + h) * S + me;  // lse / delta index
    const bool live = me < S;
    vec4 qr0, acc0;
    vec4 qr1, acc1;
    vec4 qr2, acc2;
    vec4 qr3, acc3;
    vec4 dor0;
    vec4 dor1;
    vec4 dor2;
    vec4 dor3;
    float dsum = 0.0;
    {
        qr0 = live ? ld_q(qbase, d0 + 4 * 0) : vec4(0.0);
        acc0 = vec4(0.0);
        dor0 = live ? ld_dout(qbase, d0 + 4 * 0) : vec4(0.0);
        dsum += live ? dot(dor0, ld_o(qbase, d0 + 4 * 0)) : 0.0;
    }
    {
        qr1 = live ? ld_q(qbase, d0 + 4 * 1) : vec4(0.0);
        acc1 = vec4(0.0);
        dor1 = live ? ld_dout(qbase, d0 + 4 * 1) : vec4(0.0);
        dsum += live ? dot(dor1, ld_o(qbase, d0 + 4 * 1)) : 0.0;
    }
    {
        qr2 = live ? ld_q(qbase, d0 + 4 * 2) : vec4(0.0);
        acc2 = vec4(0.0);
        dor2 = live ? ld_dout(qbase, d0 + 4 * 2) : vec4(0.0);
        dsum += live ? dot(dor2, ld_o(qbase, d0 + 4 * 2)) : 0.0;
    }
    {
        qr3 = live ? ld_q(qbase, d0 + 4 * 3) : vec4(0.0);
        acc3 = vec4(0.0);
        dor3 = live ? ld_dout(qbase, d0 + 4 * 3) : vec4(0.0);
        dsum += live ? dot(dor3, ld_o(qbase, d0 + 4 * 3)) : 0.0;
    }
    vec4 dd = vec4(dsum, 0.0, 0.0, 0.0), unused = vec4(0.0);
    allsum2(dd, unused, 1, false);
    const float D_i = dd.x;
    if (live && lane == 0) delta[stat] = D_i;
    const float L_i = live ? lse[stat] : 0.0;
    const uint kend = causal ? min(S, r0 + ROWS) : S;  // keys the workgroup's rows see (uniform)
    uint nb = 0;
    for (uint j0 = 0; j0 < kend; j0 += TILE) {
        barrier();  // the previous tile is consumed
        for (uint e = tid; e < TILE * HV; e += WG) {
            const uint j = j0 + e / HV, d4 = e % HV, at = (e / HV) * HVP + d4 + d4 / DV;
            const uint kb = ((b * S + j) * p.KVH + g) * p.D;
            t0[at] = j < S ? ld_k(kb, 4 * d4) : vec4(0.0);
            t1[at] = j < S ? ld_v(kb, 4 * d4) : vec4(0.0);
        }
        barrier();
        const uint n = min(TILE, kend - j0);
        for (uint c0 = 0; c0 < n; c0 += 4, nb ^= 1u) {
            vec4 s = vec4(0.0), dp = vec4(0.0);
            {
                const uint x = c0 * HVP + lane * (DV + 1) + 0;
                s += vec4(dot(qr0, t0[x]), dot(qr0, t0[x + HVP]), dot(qr0, t0[x + 2 * HVP]), dot(qr0, t0[x + 3 * HVP]));
                dp += vec4(dot(dor0, t1[x]), dot(dor0, t1[x + HVP]), dot(dor0, t1[x + 2 * HVP]), dot(dor0, t1[x + 3 * HVP]));
            }
            {
                const uint x = c0 * HVP + lane * (DV + 1) + 1;
                s += vec4(dot(qr1, t0[x]), dot(qr1, t0[x + HVP]), dot(qr1, t0[x + 2 * HVP]), dot(qr1, t0[x + 3 * HVP]));
                dp += vec4(dot(dor1, t1[x]), dot(dor1, t1[x + HVP]), dot(dor1, t1[x + 2 * HVP]), dot(dor1, t1[x + 3 * HVP]));
            }
            {
                const uint x = c0 * HVP + lane * (DV + 1) + 2;
                s += vec4(dot(qr2, t0[x]), dot(qr2, t0[x + HVP]), dot(qr2, t0[x + 2 * HVP]), dot(qr2, t0[x + 3 * HVP]));
                dp += vec4(dot(dor2, t1[x]), dot(dor2, t1[x + HVP]), dot(dor2, t1[x + 2 * HVP]), dot(dor2, t1[x + 3 * HVP]));
            }
            {
                const uint x = c0 * HVP + lane * (DV + 1) + 3;
                s += vec4(dot(qr3, t0[x]), dot(qr3, t0[x + HVP]), dot(qr3, t0[x + 2 * HVP]), dot(qr3, t0[x + 3 * HVP]));
                dp += vec4(dot(dor3, t1[x]), dot(dor3, t1[x + HVP]), dot(dor3, t1[x + 2 * HVP]), dot(dor3, t1[x + 3 * HVP]));
            }
            allsum2(s, dp, nb, true);
            bvec4 vis;
            [[unroll]] for (uint u = 0; u < 4; ++u) {
                const uint j = j0 + c0 + u;
                vis[u] = j < S && (!causal || j <= me);
            }
            const vec4 pr = mix(vec4(0.0), exp2(s * c - L_i), vis);
            const vec4 ds = pr * (dp - D_i);
            {
                const uint x = c0 * HVP + lane * (DV + 1) + 0;
                acc0 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
            }
            {
                const uint x = c0 * HVP + lane * (DV + 1) + 1;
                acc1 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
            }
            {
                const uint x = c0 * HVP + lane * (DV + 1) + 2;
                acc2 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
            }
            {
                const uint x = c0 * HVP + lane * (DV + 1) + 3;
                acc3 += ds.x * t0[x] + ds.y * t0[x + HVP] + ds.z * t0[x + 2 * HVP] + ds.w * t0[x + 3 * HVP];
            }
        }
    }
    if (!live) return;
    st_dq(qbase, d0 + 4 * 0, acc0 * p.scale);
    st_dq(qbase, d0 + 4 * 1, acc1 * p.scale);
    st_dq(qbase, d0 + 4 * 2, acc2 * p.scale);
    st_dq(qbase, d0 + 4 * 3, acc3 * p.scale);
}
