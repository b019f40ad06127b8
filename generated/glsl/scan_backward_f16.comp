#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// scan_backward: one thread per work item (WG threads a workgroup); f32 state and arithmetic.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint NMAX = 64;
layout(std430, binding = 0) readonly buffer Buf_u { float16_t u[]; };
layout(std430, binding = 1) readonly buffer Buf_dt { float16_t dt[]; };
layout(std430, binding = 2) readonly buffer Buf_A_log { float A_log[]; };
layout(std430, binding = 3) readonly buffer Buf_Bm { float16_t Bm[]; };
layout(std430, binding = 4) readonly buffer Buf_Cm { float16_t Cm[]; };
layout(std430, binding = 5) readonly buffer Buf_Dv { float Dv[]; };
layout(std430, binding = 6) readonly buffer Buf_z { float16_t z[]; };
layout(std430, binding = 7) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 8) readonly buffer Buf_H0 { float H0[]; };
layout(std430, binding = 9) readonly buffer Buf_K0 { float K0[]; };
layout(std430, binding = 10) buffer Buf_Hs { float Hs[]; };
layout(std430, binding = 11) writeonly buffer Buf_du { float16_t du[]; };
layout(std430, binding = 12) writeonly buffer Buf_ddt { float16_t ddt[]; };
layout(std430, binding = 13) writeonly buffer Buf_dz { float16_t dz[]; };
layout(std430, binding = 14) writeonly buffer Buf_dA_part { float dA_part[]; };
layout(std430, binding = 15) writeonly buffer Buf_dD_part { float dD_part[]; };
layout(push_constant) uniform Push {
    uint nb;
    uint L;
    uint Dc;
    uint N;
    uint CH;
    uint nc;
    uint G;
    uint hd;
    uint amode;
    uint dtin;
    uint has_z;
} p;
layout(local_size_x_id = 0) in;
// Activations: the sigmoid and tanh arguments are clamped to +-15, as builderforce's kernels do
// (the derivatives silu_d and gelu_d use the same clamped arguments).
float sigmoid_c(float x) { return 1.0 / (1.0 + exp(-clamp(x, -15.0, 15.0))); }
float silu_f(float x) { return x * sigmoid_c(x); }
float silu_d(float x) { float s = sigmoid_c(x); return s * (1.0 + x * (1.0 - s)); }
const float GELU_C = 0.7978845608;
// GELU (tanh form) through 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): where tanh u is near -1 the tanh form
// loses the small 1 + tanh u to cancellation (2.6e-5 relative error at gelu'(x) ~ 1.6e-3, hypothesis found).
float gelu_u(float x) { return clamp(GELU_C * (x + 0.044715 * x * x * x), -15.0, 15.0); }
float gelu_f(float x) { return x / (1.0 + exp(-2.0 * gelu_u(x))); }
float gelu_d(float x) {
    float e = exp(-2.0 * gelu_u(x));
    float s = 1.0 / (1.0 + e);  // 0.5 (1 + t); 1 - s = e s and 1 - t^2 = 4 s (1 - s), both without cancellation
    return s * (1.0 + 2.0 * x * (e * s) * GELU_C * (1.0 + 3.0 * 0.044715 * x * x));
}
// Softplus, the Mamba scans' Δ = softplus(dt) (scan.comp.j2, decode.comp.j2's mamba1_decode), stable for any x:
// max(x, 0) + log1p(e^-|x|).
// log1p(e) is its series below e = 1/8 (truncation < 1e-9 relative): log(1 + e) there loses digits to the
// rounding of 1 + e (1.8e-4 relative at e = 3e-4), which the zero-order hold's Δ² in d/dA makes visible.
float softplus_f(float x) {
    const float e = exp(-abs(x));
    float l;
    if (e < 0.125) {
        l = 0.0;
        for (int k = 10; k >= 1; --k) l = 1.0 / float(k) - e * l;
        l *= e;
    } else {
        l = log(1.0 + e);
    }
    return max(x, 0.0) + l;
}
// softplus' derivative, the unclamped sigmoid
float sigmoid_u(float x) { return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
// The input term b (by p.dtin, see the header) and its derivatives in Δ and in A, from x = Δ A and
// a = exp(x). The zero-order hold is Δ φ1(x), φ1(x) = (e^x - 1) / x, with dφ1/dx = ψ(x) = (e^x - φ1(x)) / x;
// both cancel catastrophically as x -> 0 (A -> 0 or Δ -> 0), so |x| < 1 takes their Taylor series
// (φ1 = Σ x^k / (k+1)!, ψ = Σ (k+1) x^k / (k+2)!; truncation below 3e-9): the expm1 form of the limit
// b -> Δ, never dividing by a vanishing A or x.
void input_term(float dl, float x, float a, out float b, out float db_ddl, out float db_dA) {
    if (p.dtin == 0u) { b = 1.0; db_ddl = 0.0; db_dA = 0.0; return; }
    if (p.dtin == 1u) { b = dl; db_ddl = 1.0; db_dA = 0.0; return; }
    float phi, psi;
    if (abs(x) < 1.0) {
        phi = 1.0;
        for (int k = 11; k >= 2; --k) phi = 1.0 + x * phi / float(k);
        psi = 1.0;
        for (int k = 9; k >= 0; --k) psi = 1.0 + x * psi * float(k + 2) / float((k + 1) * (k + 3));
        psi *= 0.5;
    } else {
        phi = (a - 1.0) / x;
        psi = (a - phi) / x;
    }
    b = dl * phi;
    db_ddl = a;  // d/dΔ of (e^{ΔA} - 1) / A
    db_dA = dl * dl * psi;  // d/dA of (e^{ΔA} - 1) / A
}
float input_b(float dl, float x, float a) {
    float b, b_dl, b_dA;
    input_term(dl, x, a, b, b_dl, b_dA);
    return b;
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // One (b, c, d): the tokens [t0, t1) of chunk c of sequence b, channel d; N states in registers.
    if (i >= p.nb * p.nc * p.Dc) return;
    const uint d = i % p.Dc, bc = i / p.Dc, c = bc % p.nc, b = bc / p.nc;
    const uint t0 = c * p.CH, t1 = min(t0 + p.CH, p.L);
    const uint sbase = (bc * p.Dc + d) * p.N;  // this (b, c, d)'s chunk states
    const uint BS = p.G * p.N, gN = (d / (p.Dc / p.G)) * p.N;  // B/C row stride, this channel's group
    float A[NMAX];
    if (p.amode == 0) {
        for (uint n = 0; n < p.N; ++n) A[n] = -exp(clamp(A_log[d * p.N + n], -10.0, 5.0));
    } else {  // one A per head of hd channels: A = -softplus(A_log[head]) (builderforce's mamba2)
        const float ah = -softplus_f(A_log[d / p.hd]);
        for (uint n = 0; n < p.N; ++n) A[n] = ah;
    }
    // Reverse time from the true carry K0 (= a_{t1} g_{t1} from the right). Hs holds h_t on entry;
    // slot t is overwritten with g_t b_t u_t (the terms of dB) once h_t has been used.
    float K[NMAX], dA[NMAX];
    for (uint n = 0; n < p.N; ++n) { K[n] = K0[sbase + n]; dA[n] = 0.0; }
    const float Dd = Dv[d];
    float dDs = 0.0;
    for (uint t = t1; t > t0; --t) {
        const uint r = b * p.L + t - 1;
        const uint ri = r * p.Dc + d;
        const float uv = float(u[ri]), dtv = float(dt[ri]), dov = float(dy[ri]);
        const float dl = softplus_f(dtv);
        float yy = Dd * uv;
        for (uint n = 0; n < p.N; ++n) yy += float(Cm[r * BS + gN + n]) * Hs[ri * p.N + n];
        float dyy = dov;
        if (p.has_z != 0) {
            const float zv = float(z[ri]);
            dyy = dov * silu_f(zv);
            dz[ri] = float16_t(dov * yy * silu_d(zv));
        }
        dDs += dyy * uv;
        float duv = Dd * dyy, ddl = 0.0;
        for (uint n = 0; n < p.N; ++n) {
            const float hp = t - 1 > t0 ? Hs[(ri - p.Dc) * p.N + n] : H0[sbase + n];
            const float x = dl * A[n], a = exp(x), bv = float(Bm[r * BS + gN + n]);
            const float g = K[n] + float(Cm[r * BS + gN + n]) * dyy;
            float sc, sc_dl, sc_dA;
            input_term(dl, x, a, sc, sc_dl, sc_dA);
            duv += g * sc * bv;
            ddl += g * (A[n] * a * hp + sc_dl * bv * uv);
            dA[n] += g * (a * hp * dl + sc_dA * bv * uv);
            Hs[ri * p.N + n] = g * sc * uv;
            K[n] = a * g;
        }
        du[ri] = float16_t(duv);
        ddt[ri] = float16_t(ddl * sigmoid_u(dtv));
    }
    for (uint n = 0; n < p.N; ++n) {
        float dAl;
        if (p.amode == 0) {  // d/dA_log of -exp(clamp(A_log)) is A inside the clamp range, 0 outside
            const float al = A_log[d * p.N + n];
            dAl = (al > -10.0 && al < 5.0) ? dA[n] * A[n] : 0.0;
        } else {  // d/dA_log of -softplus(A_log) is -sigmoid(A_log); the ops sum a head's (channel, state)s
            dAl = -dA[n] * sigmoid_u(A_log[d / p.hd]);
        }
        dA_part[bc * p.Dc * p.N + d * p.N + n] = dAl;
    }
    dD_part[bc * p.Dc + d] = dDs;
}
