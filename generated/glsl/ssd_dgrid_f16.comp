#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// ssd_dgrid: WG threads a workgroup, all of one (batch, chunk, head); f32 state and arithmetic.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint QMAX = 64;
layout(constant_id = 2) const uint NMAX = 64;
layout(std430, binding = 0) readonly buffer Buf_dt { float16_t dt[]; };
layout(std430, binding = 1) readonly buffer Buf_A_log { float A_log[]; };
layout(std430, binding = 2) readonly buffer Buf_Bm { float16_t Bm[]; };
layout(std430, binding = 3) readonly buffer Buf_Cm { float16_t Cm[]; };
layout(std430, binding = 4) readonly buffer Buf_X { float16_t X[]; };
layout(std430, binding = 5) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 6) writeonly buffer Buf_Wd { float Wd[]; };
layout(std430, binding = 7) writeonly buffer Buf_Wg { float Wg[]; };
layout(push_constant) uniform Push {
    uint nb;
    uint L;
    uint H;
    uint hd;
    uint N;
    uint G;
    uint Q;
    uint nc;
    uint mode;
} p;
layout(local_size_x_id = 0) in;
// Softplus, stable for any x (as scan.comp.j2), and its derivative, the unclamped sigmoid.
float softplus_f(float x) {
    const float e = exp(-abs(x));
    return max(x, 0.0) + (e < 1e-4 ? e * (1.0 - 0.5 * e) : log(1.0 + e));
}
float sigmoid_u(float x) { return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

shared float acs[QMAX];  // A_i: the cumulative sums of a_t = Δ_t A_h over the chunk (local index i)

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint Dc = p.H * p.hd, BS = p.G * p.N;
    const uint nsub = (p.Q * p.Q + WG - 1) / WG;
    const uint grp = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    const uint bch = grp / nsub, item = (grp % nsub) * WG + lid;
    if (bch >= p.nb * p.nc * p.H) return;  // uniform per workgroup
    const uint h = bch % p.H, bc = bch / p.H, c = bc % p.nc, b = bc / p.nc;
    const uint t0 = c * p.Q, Qc = min(p.Q, p.L - t0);
    const uint row0 = b * p.L + t0;                     // the chunk's first token row
    const uint gN = (h / (p.H / p.G)) * p.N;            // this head's group in the B/C rows
    const uint sb = bc * Dc + h * p.hd;                 // this (b, c, h)'s first channel in the chunk states
    const float Ah = -softplus_f(A_log[h]);
    if (lid < Qc) acs[lid] = softplus_f(float(dt[(row0 + lid) * p.H + h])) * Ah;
    barrier();
    if (lid == 0) {
        for (uint i = 1; i < Qc; ++i) acs[i] += acs[i - 1];
    }
    barrier();
    const float Aend = acs[Qc - 1];
    if (item >= p.Q * p.Q) return;
    const uint i = item / p.Q, j = item % p.Q;
    float wd = 0.0, wg = 0.0;
    if (i < Qc && j <= i) {
        float dg = 0.0, cb = 0.0;
        for (uint pp = 0; pp < p.hd; ++pp)
            dg += float(dy[(row0 + i) * Dc + h * p.hd + pp]) * float(X[(row0 + j) * Dc + h * p.hd + pp]);
        for (uint n = 0; n < p.N; ++n)
            cb += float(Cm[(row0 + i) * BS + gN + n]) * float(Bm[(row0 + j) * BS + gN + n]);
        wd = dg * exp(acs[i] - acs[j]);
        wg = wd * cb;
    }
    Wd[bch * p.Q * p.Q + item] = wd;
    Wg[bch * p.Q * p.Q + item] = wg;
}
