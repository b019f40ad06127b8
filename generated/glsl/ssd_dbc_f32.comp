#version 450
#extension GL_EXT_control_flow_attributes : enable

// ssd_dbc: WG threads a workgroup, all of one (batch, chunk, head); f32 state and arithmetic.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint QMAX = 64;
layout(constant_id = 2) const uint NMAX = 64;
layout(std430, binding = 0) readonly buffer Buf_dt { float dt[]; };
layout(std430, binding = 1) readonly buffer Buf_A_log { float A_log[]; };
layout(std430, binding = 2) readonly buffer Buf_Bm { float Bm[]; };
layout(std430, binding = 3) readonly buffer Buf_Cm { float Cm[]; };
layout(std430, binding = 4) readonly buffer Buf_X { float X[]; };
layout(std430, binding = 5) readonly buffer Buf_dy { float dy[]; };
layout(std430, binding = 6) readonly buffer Buf_H0 { float H0[]; };
layout(std430, binding = 7) readonly buffer Buf_K { float K[]; };
layout(std430, binding = 8) readonly buffer Buf_Wd { float Wd[]; };
layout(std430, binding = 9) readonly buffer Buf_Wg { float Wg[]; };
layout(std430, binding = 10) writeonly buffer Buf_dBh { float dBh[]; };
layout(std430, binding = 11) writeonly buffer Buf_dCh { float dCh[]; };
layout(std430, binding = 12) writeonly buffer Buf_E { float E[]; };
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
    const uint nsub = (p.Q * p.N + WG - 1) / WG;
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
    if (item >= p.Q * p.N) return;
    const uint i = item / p.N, n = item % p.N;
    if (i >= Qc) return;
    const uint r = row0 + i, wb = bch * p.Q * p.Q;
    // dC_i[n] = Σ_{j<=i} W_d[i, j] B_j[n] + dCoff, dCoff = exp(A_i) Σ_p dy_i[p] H[p, n]
    float dC = 0.0, dCoff = 0.0;
    for (uint j = 0; j <= i; ++j) dC += Wd[wb + i * p.Q + j] * float(Bm[(row0 + j) * BS + gN + n]);
    for (uint pp = 0; pp < p.hd; ++pp) dCoff += float(dy[r * Dc + h * p.hd + pp]) * H0[(sb + pp) * p.N + n];
    dCoff *= exp(acs[i]);
    // dB_i[n] = Σ_{k>=i} W_d[k, i] C_k[n] + dBs, dBs = exp(A_end - A_i) Σ_p x_i[p] R[p, n]
    float dB = 0.0, dBs = 0.0;
    for (uint k = i; k < Qc; ++k) dB += Wd[wb + k * p.Q + i] * float(Cm[(row0 + k) * BS + gN + n]);
    for (uint pp = 0; pp < p.hd; ++pp) dBs += float(X[r * Dc + h * p.hd + pp]) * K[(sb + pp) * p.N + n];
    dBs *= exp(Aend - acs[i]);
    const uint o = (r * p.H + h) * p.N + n;
    dCh[o] = dC + dCoff;
    dBh[o] = dB + dBs;
    // d/dA_i: Y_off gives C_i · dCoff; the end state's exp(-A_i) gives -B_i · dBs; G gives its row sum of
    // W_g minus its column sum (added once, by the n = 0 item).
    float e = float(Cm[r * BS + gN + n]) * dCoff - float(Bm[r * BS + gN + n]) * dBs;
    if (n == 0) {
        for (uint j = 0; j <= i; ++j) e += Wg[wb + i * p.Q + j];
        for (uint k = i; k < Qc; ++k) e -= Wg[wb + k * p.Q + i];
    }
    E[o] = e;
}
