#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// cssd_dbc: WG threads a workgroup, all of one (batch, chunk, head); f32 complex state and arithmetic.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint QMAX = 64;
layout(constant_id = 2) const uint NMAX = 32;
layout(std430, binding = 0) readonly buffer Buf_dt { float16_t dt[]; };
layout(std430, binding = 1) readonly buffer Buf_A_log { float A_log[]; };
layout(std430, binding = 2) readonly buffer Buf_Bm { float16_t Bm[]; };
layout(std430, binding = 3) readonly buffer Buf_Cm { float16_t Cm[]; };
layout(std430, binding = 4) readonly buffer Buf_X { float16_t X[]; };
layout(std430, binding = 5) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 6) readonly buffer Buf_H0 { float H0[]; };
layout(std430, binding = 7) readonly buffer Buf_K { float K[]; };
layout(std430, binding = 8) readonly buffer Buf_Wd { float Wd[]; };
layout(std430, binding = 9) readonly buffer Buf_Wb { float Wb[]; };
layout(std430, binding = 10) writeonly buffer Buf_dBh { float dBh[]; };
layout(std430, binding = 11) writeonly buffer Buf_dCh { float dCh[]; };
layout(std430, binding = 12) writeonly buffer Buf_Et { float Et[]; };
layout(std430, binding = 13) writeonly buffer Buf_Eb { float Eb[]; };
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
float softplus_f(float x) {
    const float e = exp(-abs(x));
    return max(x, 0.0) + (e < 1e-4 ? e * (1.0 - 0.5 * e) : log(1.0 + e));
}
float sigmoid_u(float x) { return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
vec2 cmul(vec2 a, vec2 b) { return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
vec2 conjg(vec2 a) { return vec2(a.x, -a.y); }
vec2 cexp(vec2 z) { return exp(z.x) * vec2(cos(z.y), sin(z.y)); }

shared float acs[QMAX];  // s_i: the cumulative sums of Δ over the chunk (θ_i = λ s_i)
shared float dls[QMAX];  // Δ_i

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint Dc = p.H * p.hd, BS = 2 * p.G * p.N;
    const uint nsub = (p.Q * p.N + WG - 1) / WG;
    const uint grp = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    const uint bch = grp / nsub, item = (grp % nsub) * WG + lid;
    if (bch >= p.nb * p.nc * p.H) return;  // uniform per workgroup
    const uint h = bch % p.H, bc = bch / p.H, c = bc % p.nc, b = bc / p.nc;
    const uint t0 = c * p.Q, Qc = min(p.Q, p.L - t0);
    const uint row0 = b * p.L + t0;
    const uint gN = 2 * (h / (p.H / p.G)) * p.N;  // this head's group in the B/C rows (floats)
    const uint sb = bc * Dc + h * p.hd;
    const vec2 lam = vec2(A_log[2 * h], A_log[2 * h + 1]);
    const vec2 einv = cexp(-lam);
    if (lid < Qc) {
        const float dl = softplus_f(float(dt[(row0 + lid) * p.H + h]));
        acs[lid] = dl;
        dls[lid] = dl;
    }
    barrier();
    if (lid == 0) {
        for (uint i = 1; i < Qc; ++i) acs[i] += acs[i - 1];
    }
    barrier();
    const float send = acs[Qc - 1];
    if (item >= p.Q * p.N) return;
    const uint i = item / p.N, n = item % p.N;
    if (i >= Qc) return;
    const uint r = row0 + i, wb0 = bch * p.Q * p.Q;
    const vec2 Ci = vec2(float(Cm[r * BS + gN + 2 * n]), float(Cm[r * BS + gN + 2 * n + 1]));
    const vec2 Bi = vec2(float(Bm[r * BS + gN + 2 * n]), float(Bm[r * BS + gN + 2 * n + 1]));
    // dC_i[n] = Σ_{j<=i} B_j[n] conj(W_d[i, j]) + dCoff, dCoff = exp(θ_i) Σ_p dy_i[p] H[p, n]
    vec2 dC = vec2(0.0), dCoff = vec2(0.0);
    for (uint j = 0; j <= i; ++j) {
        const uint q = 2 * (wb0 + i * p.Q + j);
        dC += cmul(vec2(float(Bm[(row0 + j) * BS + gN + 2 * n]), float(Bm[(row0 + j) * BS + gN + 2 * n + 1])),
                   conjg(vec2(Wd[q], Wd[q + 1])));
    }
    for (uint pp = 0; pp < p.hd; ++pp) {
        const uint q = 2 * ((sb + pp) * p.N + n);
        dCoff += float(dy[r * Dc + h * p.hd + pp]) * vec2(H0[q], H0[q + 1]);
    }
    dCoff = cmul(cexp(lam * acs[i]), dCoff);
    // dB_i[n] = Σ_{k>=i} C_k[n] W_d[k, i] + dBs, dBs = conj(w_i) Σ_p x_i[p] R[p, n], w_i = exp(θ_end − θ_i) b̄_i
    vec2 dB = vec2(0.0), Xr = vec2(0.0);
    for (uint k = i; k < Qc; ++k) {
        const uint q = 2 * (wb0 + k * p.Q + i);
        dB += cmul(vec2(float(Cm[(row0 + k) * BS + gN + 2 * n]), float(Cm[(row0 + k) * BS + gN + 2 * n + 1])),
                   vec2(Wd[q], Wd[q + 1]));
    }
    for (uint pp = 0; pp < p.hd; ++pp) {
        const uint q = 2 * ((sb + pp) * p.N + n);
        Xr += float(X[r * Dc + h * p.hd + pp]) * vec2(K[q], K[q + 1]);
    }
    const vec2 Ei = cexp(lam * (send - acs[i]));
    const vec2 bbi = cmul(cexp(lam * dls[i]) - vec2(1.0, 0.0), einv);
    const vec2 dBs = cmul(conjg(cmul(Ei, bbi)), Xr);
    const uint o = 2 * ((r * p.H + h) * p.N + n);
    dC += dCoff;
    dB += dBs;
    dCh[o] = dC.x; dCh[o + 1] = dC.y;
    dBh[o] = dB.x; dBh[o + 1] = dB.y;
    // ∂/∂θ_i: Y_off gives C_i conj(dCoff); the end state's exp(−θ_i) gives −conj(B_i) dBs; G gives the row sum
    // of W_g minus its column sum, W_g[i, j] = W_b[i, j] conj(b̄_j) (added once, by the n = 0 item).
    // ∂/∂b̄_i: conj(B_i) conj(exp(θ_end − θ_i)) Xr, and the column sum of W_b (n = 0 item).
    vec2 et = cmul(Ci, conjg(dCoff)) - cmul(conjg(Bi), dBs);
    vec2 eb = cmul(conjg(Bi), cmul(conjg(Ei), Xr));
    if (n == 0) {
        for (uint j = 0; j <= i; ++j) {
            const uint q = 2 * (wb0 + i * p.Q + j);
            const vec2 bbj = cmul(cexp(lam * dls[j]) - vec2(1.0, 0.0), einv);
            et += cmul(vec2(Wb[q], Wb[q + 1]), conjg(bbj));
        }
        vec2 col = vec2(0.0);
        for (uint k = i; k < Qc; ++k) {
            const uint q = 2 * (wb0 + k * p.Q + i);
            col += vec2(Wb[q], Wb[q + 1]);
        }
        et -= cmul(col, conjg(bbi));
        eb += col;
    }
    Et[o] = et.x; Et[o + 1] = et.y;
    Eb[o] = eb.x; Eb[o + 1] = eb.y;
}
