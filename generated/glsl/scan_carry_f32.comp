#version 450
#extension GL_EXT_control_flow_attributes : enable

// scan_carry: one thread per work item (WG threads a workgroup); f32 state and arithmetic.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint NMAX = 64;
layout(std430, binding = 0) buffer Buf_S { float S[]; };
layout(std430, binding = 1) readonly buffer Buf_P { float P[]; };
layout(std430, binding = 2) readonly buffer Buf_hinit { float hinit[]; };
layout(std430, binding = 3) writeonly buffer Buf_hlast { float hlast[]; };
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
    uint rev;
    uint use_init;
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
// Softplus, stable for any x: max(x, 0) + log(1 + e^-|x|) (log1p's series where e^-|x| is tiny), and
// its derivative, the unclamped sigmoid.
float softplus_f(float x) {
    const float e = exp(-abs(x));
    return max(x, 0.0) + (e < 1e-4 ? e * (1.0 - 0.5 * e) : log(1.0 + e));
}
float sigmoid_u(float x) { return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // One (b, d, n): walk the nc chunk summaries (forward, or backward with rev), replacing S[c] by
    // the carry entering chunk c; hlast gets the carry leaving the last chunk.
    if (i >= p.nb * p.Dc * p.N) return;
    const uint n = i % p.N, bd = i / p.N, d = bd % p.Dc, b = bd / p.Dc;
    float carry = p.use_init != 0 ? hinit[i] : 0.0;
    for (uint k = 0; k < p.nc; ++k) {
        const uint c = p.rev != 0 ? p.nc - 1 - k : k;
        const uint o = ((b * p.nc + c) * p.Dc + d) * p.N + n;
        const float s = S[o];
        S[o] = carry;
        carry = P[o] * carry + s;
    }
    hlast[i] = carry;
}
