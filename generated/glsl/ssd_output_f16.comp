#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// ssd_output: WG threads a workgroup, all of one (batch, chunk, head); f32 state and arithmetic.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint QMAX = 64;
layout(constant_id = 2) const uint NMAX = 64;
layout(std430, binding = 0) readonly buffer Buf_U { float16_t U[]; };
layout(std430, binding = 1) readonly buffer Buf_dt { float16_t dt[]; };
layout(std430, binding = 2) readonly buffer Buf_A_log { float A_log[]; };
layout(std430, binding = 3) readonly buffer Buf_Bm { float16_t Bm[]; };
layout(std430, binding = 4) readonly buffer Buf_Cm { float16_t Cm[]; };
layout(std430, binding = 5) readonly buffer Buf_Dv { float Dv[]; };
layout(std430, binding = 6) readonly buffer Buf_Hst { float Hst[]; };
layout(std430, binding = 7) readonly buffer Buf_X { float16_t X[]; };
layout(std430, binding = 8) writeonly buffer Buf_o { float16_t o[]; };
layout(std430, binding = 9) writeonly buffer Buf_dD_part { float dD_part[]; };
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
shared float Gt[QMAX * QMAX];  // the chunk's Q×Q block (C Bᵀ ∘ L), row i, column j

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint Dc = p.H * p.hd, BS = p.G * p.N;
    const uint nsub = (p.hd + WG - 1) / WG;
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
    // The Q×Q block into shared memory: G[i, j] = (C_i · B_j) exp(A_i - A_j) for j <= i, else 0.
    for (uint e = lid; e < Qc * Qc; e += WG) {
        const uint i = e / Qc, j = e % Qc;
        float g = 0.0;
        if (j <= i) {
            for (uint n = 0; n < p.N; ++n)
                g += float(Cm[(row0 + i) * BS + gN + n]) * float(Bm[(row0 + j) * BS + gN + n]);
            g *= exp(acs[i] - acs[j]);
        }
        Gt[i * QMAX + j] = g;
    }
    barrier();
    const uint pp = item;
    if (pp >= p.hd) return;
    const uint d = h * p.hd + pp;
    float hs[NMAX];  // the state entering the chunk (mode 0), or the gradient of its end state (mode 1)
    for (uint n = 0; n < p.N; ++n) hs[n] = Hst[(sb + pp) * p.N + n];
    const float Dd = Dv[d];
    if (p.mode == 0) {
        for (uint i = 0; i < Qc; ++i) {
            const uint r = row0 + i;
            float acc = Dd * float(U[r * Dc + d]);
            for (uint j = 0; j <= i; ++j) acc += Gt[i * QMAX + j] * float(U[(row0 + j) * Dc + d]);
            float off = 0.0;
            for (uint n = 0; n < p.N; ++n) off += float(Cm[r * BS + gN + n]) * hs[n];
            o[r * Dc + d] = float16_t(acc + exp(acs[i]) * off);
        }
    } else {
        float dDs = 0.0;
        for (uint j = 0; j < Qc; ++j) {
            const uint r = row0 + j;
            const float dyj = float(U[r * Dc + d]);
            float acc = Dd * dyj;
            for (uint i = j; i < Qc; ++i) acc += Gt[i * QMAX + j] * float(U[(row0 + i) * Dc + d]);
            float st = 0.0;
            for (uint n = 0; n < p.N; ++n) st += float(Bm[r * BS + gN + n]) * hs[n];
            o[r * Dc + d] = float16_t(acc + exp(Aend - acs[j]) * st);
            dDs += dyj * float(X[r * Dc + d]);
        }
        dD_part[bc * Dc + d] = dDs;
    }
}
