#version 450
#extension GL_EXT_control_flow_attributes : enable

// cscan_carry: one thread per work item (WG threads a workgroup); f32 complex state and arithmetic.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint NMAX = 32;
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
    uint rev;
    uint use_init;
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

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.nb * p.Dc * p.N) return;
    const uint n = i % p.N, bd = i / p.N, d = bd % p.Dc, b = bd / p.Dc;
    vec2 carry = p.use_init != 0 ? vec2(hinit[2 * i], hinit[2 * i + 1]) : vec2(0.0);
    for (uint k = 0; k < p.nc; ++k) {
        const uint c = p.rev != 0 ? p.nc - 1 - k : k;
        const uint o = 2 * (((b * p.nc + c) * p.Dc + d) * p.N + n);
        const vec2 s = vec2(S[o], S[o + 1]);
        S[o] = carry.x; S[o + 1] = carry.y;
        carry = cmul(vec2(P[o], P[o + 1]), carry) + s;
    }
    hlast[2 * i] = carry.x; hlast[2 * i + 1] = carry.y;
}
