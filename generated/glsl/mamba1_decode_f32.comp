#version 450
#extension GL_EXT_control_flow_attributes : enable

// One mamba1 block of HybridMambaModel (models/mamba.py, _mamba1_step) for one new token of each item r (a
// sequence whose recurrent state is slot first + r of conv and hs), the whole block in one workgroup of WG
// threads for S consecutive items (S <= SQ; each load of a weight serves all S):
//   x (or, embed != 0, the embedding row of ids[ids_at + r]; ids >= V give 0) -> h = rms_norm(x, wn)
//   -> [xc | z] = h Win^T + bin -> c = the causal conv of xc (conv1d.comp.j2's "lag" taps: tap j reads the
//   input j tokens back, from the item's window conv [K - 1 rows, oldest first], shifted in place) + bconv
//   -> u = silu(c) -> [dt_raw | B | C] = u Wx^T + bx -> per channel Δ = softplus(dt_raw Wdt^T + bdt),
//   A = -exp(clamp(A_log, -10, 5)), h = exp(Δ A) h + b(Δ, A) B u per state (b by dtin: scan.comp.j2's input
//   term), the state hs [items, Di, N] updated in place, y = (C·h + D u) silu(z) (scan_output's arithmetic)
//   -> x += y Wout^T + bout, written back to x. final != 0 (the last block): y = rms_norm(x, wnf) to `y`;
//   head != 0 also logits = y Wh^T (wh [V, d]: the tied embedding).
// The vectors between phases live in shared memory, one region an item; phases are separated by barriers.
// Everything moves as vec4 (d, Di and N multiples of 4: select.decode.mamba_errors) but the conv taps,
// x_proj's bias and dt_proj's rows (any dt rank, any conv width): lavapipe runs every buffer or shared load
// or store as a loop over the SIMD lanes, so one vec4 load costs about what one float does and the count of
// load and store instructions sets the time. A thread computes four neighbouring outputs of a product (four
// rows of W share each load of the input vector; x_proj's four rows stay within one of dt_raw, B, C), four
// channels of the conv and of the scan (each load of u, z, dt_raw, B and C serves four channels; a channel's
// N states move as N/4 vec4s). f32 arithmetic throughout.
layout(constant_id = 0) const uint WG = 16;
layout(constant_id = 1) const uint SW = 1536;
layout(std430, binding = 0) buffer Buf_x { vec4 x[]; };
layout(std430, binding = 1) readonly buffer Buf_ids { uint ids[]; };
layout(std430, binding = 2) readonly buffer Buf_emb { vec4 emb[]; };
layout(std430, binding = 3) readonly buffer Buf_wn { vec4 wn[]; };
layout(std430, binding = 4) readonly buffer Buf_win { vec4 win[]; };
layout(std430, binding = 5) readonly buffer Buf_bin { vec4 bin[]; };
layout(std430, binding = 6) readonly buffer Buf_wconv { float wconv[]; };
layout(std430, binding = 7) readonly buffer Buf_bconv { vec4 bconv[]; };
layout(std430, binding = 8) readonly buffer Buf_wx { vec4 wx[]; };
layout(std430, binding = 9) readonly buffer Buf_bx { float bx[]; };
layout(std430, binding = 10) readonly buffer Buf_wdt { float wdt[]; };
layout(std430, binding = 11) readonly buffer Buf_bdt { vec4 bdt[]; };
layout(std430, binding = 12) readonly buffer Buf_alog { vec4 alog[]; };
layout(std430, binding = 13) readonly buffer Buf_dv { vec4 dv[]; };
layout(std430, binding = 14) readonly buffer Buf_wout { vec4 wout[]; };
layout(std430, binding = 15) readonly buffer Buf_bout { vec4 bout[]; };
layout(std430, binding = 16) buffer Buf_conv { vec4 conv[]; };
layout(std430, binding = 17) buffer Buf_hs { vec4 hs[]; };
layout(std430, binding = 18) readonly buffer Buf_wnf { vec4 wnf[]; };
layout(std430, binding = 19) writeonly buffer Buf_y { vec4 y[]; };
layout(std430, binding = 20) readonly buffer Buf_wh { vec4 wh[]; };
layout(std430, binding = 21) writeonly buffer Buf_logits { float logits[]; };
layout(push_constant) uniform Push {
    uint R;
    uint d;
    uint Di;
    uint N;
    uint K;
    uint DR;
    uint V;
    uint first;
    uint embed;
    uint final;
    uint head;
    uint S;
    uint ids_at;
    uint dtin;
    float eps;
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
const uint SQ = 1;  // the most sequences a workgroup runs (push S: 1..SQ; flag q8: 8, q4: 4, else 1)
shared vec4 sm[SW];  // SQ regions of P vec4s, one a sequence
shared vec4 red4[WG];

// A workgroup sum of each component (component s: sequence s).
vec4 wg_sum4(vec4 v) {
    const uint t = gl_LocalInvocationID.x;
    red4[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) red4[t] += red4[t + s];
        barrier();
    }
    const vec4 r = red4[0];
    barrier();
    return r;
}

vec4 silu4(vec4 v) { return v * (1.0 / (1.0 + exp(-clamp(v, -15.0, 15.0)))); }  // _act.glsl's silu_f
// scan.comp.j2's input term b(Δ, A) of four states from x = Δ A and a = exp(x): dtin 2 the zero-order hold
// Δ φ1(x), φ1(x) = (e^x - 1) / x, by its series Σ x^k / (k+1)! (k <= 10) where |x| < 1 (scan.comp.j2's, in
// Horner form with the coefficients as constants: no divisions), 1 Euler's Δ, 0 none (1).
const float PHI1[11] = float[11](1.0, 1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0,
                                 1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0);
vec4 input_b4(float dl, vec4 x, vec4 a) {
    if (p.dtin == 0u) return vec4(1.0);
    if (p.dtin == 1u) return vec4(dl);
    vec4 phi = vec4(PHI1[10]);
    [[unroll]] for (int k = 9; k >= 0; --k) phi = phi * x + PHI1[k];
    return dl * mix(phi, (a - 1.0) / x, greaterThanEqual(abs(x), vec4(1.0)));
}

void main() {
    const uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * p.S;
    if (r0 >= p.R) return;  // uniform per workgroup
    const uint ns = min(p.S, p.R - r0), t = gl_LocalInvocationID.x;
    const uint d4 = p.d / 4, D4 = p.Di / 4, N4 = p.N / 4, DR4 = (p.DR + 3) / 4, KW = p.K - 1;
    // a sequence's region: h, x, xc (the conv input, later y), z, u, dt_raw, B, C
    const uint oh = 0, ox = d4, oc = ox + d4, oz = oc + D4, ou = oz + D4, odt = ou + D4, ob = odt + DR4, occ = ob + N4;
    const uint P = occ + N4;
    // x and the norm
    vec4 ss = vec4(0.0);
    for (uint j = t; j < d4; j += WG) {
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            {
                vec4 v;
                if (p.embed != 0) {
                    const uint id = ids[p.ids_at + r0 + s];
                    v = id < p.V ? emb[id * d4 + j] : vec4(0.0);
                } else {
                    v = x[(r0 + s) * d4 + j];
                }
                sm[s * P + ox + j] = v;
                ss[s] += dot(v, v);
            }
        }
    }
    vec4 rs = inversesqrt(wg_sum4(ss) / float(p.d) + p.eps);
    for (uint j = t; j < d4; j += WG) {
        const vec4 w = wn[j];
        [[unroll]] for (uint s = 0; s < SQ; ++s) sm[s * P + oh + j] = sm[s * P + ox + j] * rs[s] * w;
    }
    barrier();
    // [xc | z] = h Win^T + bin
    for (uint m = t; m < 2 * D4; m += WG) {
        vec4 acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
        for (uint k = 0; k < d4; ++k) {
            const vec4 w0 = win[(4 * m) * d4 + k], w1 = win[(4 * m + 1) * d4 + k], w2 = win[(4 * m + 2) * d4 + k], w3 = win[(4 * m + 3) * d4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const vec4 hv = sm[s * P + oh + k];
                    acc[s] += vec4(dot(hv, w0), dot(hv, w1), dot(hv, w2), dot(hv, w3));
                }
            }
        }
        const vec4 b = bin[m];
        const uint o = m < D4 ? oc + m : oz + m - D4;
        [[unroll]] for (uint s = 0; s < SQ; ++s) sm[s * P + o] = acc[s] + b;
    }
    barrier();
    // u = silu(the conv): four channels a thread, the new input first (tap 0), then the window from its newest
    // row (tap 1) back; each row read is replaced by the one after it (the new input after the newest)
    for (uint m = t; m < D4; m += WG) {
        const uint c0 = 4 * m * p.K;  // channel 4m's taps
        const vec4 w0 = vec4(wconv[c0], wconv[c0 + p.K], wconv[c0 + 2 * p.K], wconv[c0 + 3 * p.K]);
        const vec4 b = bconv[m];
        vec4 acc[SQ], prev[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            {
                prev[s] = sm[s * P + oc + m];
                acc[s] = b + w0 * prev[s];
            }
        }
        for (uint j = 1; j < p.K; ++j) {
            const vec4 w = vec4(wconv[c0 + j], wconv[c0 + p.K + j], wconv[c0 + 2 * p.K + j], wconv[c0 + 3 * p.K + j]);
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const uint o = ((p.first + r0 + s) * KW + KW - j) * D4 + m;
                    const vec4 v = conv[o];
                    conv[o] = prev[s];
                    acc[s] += w * v;
                    prev[s] = v;
                }
            }
        }
        [[unroll]] for (uint s = 0; s < SQ; ++s) sm[s * P + ou + m] = silu4(acc[s]);
    }
    barrier();
    // [dt_raw | B | C] = u Wx^T + bx: quads of rows within dt_raw (rows past DR read row DR - 1 and store 0), B, C
    for (uint q = t; q < DR4 + 2 * N4; q += WG) {
        const bool isdt = q < DR4, isb = !isdt && q < DR4 + N4;
        const uint rb = isdt ? 4 * q : p.DR + 4 * (q - DR4), rl = isdt ? p.DR - 1 : rb + 3;
        const uint o = isdt ? odt + q : (isb ? ob + q - DR4 : occ + q - DR4 - N4);
        vec4 acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
        for (uint k = 0; k < D4; ++k) {
            const vec4 w0 = wx[(min(rb, rl)) * D4 + k], w1 = wx[(min(rb + 1, rl)) * D4 + k], w2 = wx[(min(rb + 2, rl)) * D4 + k], w3 = wx[(min(rb + 3, rl)) * D4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const vec4 hv = sm[s * P + ou + k];
                    acc[s] += vec4(dot(hv, w0), dot(hv, w1), dot(hv, w2), dot(hv, w3));
                }
            }
        }
        const vec4 b = vec4(bx[min(rb, rl)], bx[min(rb + 1, rl)], bx[min(rb + 2, rl)], bx[min(rb + 3, rl)]);
        const bvec4 past = greaterThanEqual(uvec4(rb, rb + 1, rb + 2, rb + 3), uvec4(isdt ? p.DR : 0xFFFFFFFFu));
        [[unroll]] for (uint s = 0; s < SQ; ++s) sm[s * P + o] = mix(acc[s] + b, vec4(0.0), past);
    }
    barrier();
    // the scan step: four channels a thread (4m .. 4m + 3), their states four at a time; y over xc
    for (uint m = t; m < D4; m += WG) {
        vec4 dl[SQ], uv[SQ], ya[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) dl[s] = vec4(0.0);
        // Δ = softplus(dt_raw Wdt^T + bdt), dt_raw four at a time (its components past DR are zeros: x_proj;
        // Wdt's columns past DR read column DR - 1)
        for (uint k4 = 0; k4 < DR4; ++k4) {
            vec4 w[4];
            [[unroll]] for (uint j = 0; j < 4; ++j) {
                const uint rb = (4 * m + j) * p.DR, k = 4 * k4, kl = p.DR - 1;
                w[j] = vec4(wdt[rb + min(k, kl)], wdt[rb + min(k + 1, kl)], wdt[rb + min(k + 2, kl)], wdt[rb + min(k + 3, kl)]);
            }
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const vec4 r = sm[s * P + odt + k4];
                    dl[s] += vec4(dot(r, w[0]), dot(r, w[1]), dot(r, w[2]), dot(r, w[3]));
                }
            }
        }
        const vec4 bd = bdt[m], Dd = dv[m];
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            {
                const vec4 v = dl[s] + bd;
                dl[s] = vec4(softplus_f(v.x), softplus_f(v.y), softplus_f(v.z), softplus_f(v.w));
                uv[s] = sm[s * P + ou + m];
                ya[s] = Dd * uv[s];
            }
        }
        for (uint n4 = 0; n4 < N4; ++n4) {
            vec4 Bv[SQ], Cv[SQ];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    Bv[s] = sm[s * P + ob + n4];
                    Cv[s] = sm[s * P + occ + n4];
                }
            }
            [[unroll]] for (uint j = 0; j < 4; ++j) {
                const uint c = 4 * m + j;
                const vec4 A = -exp(clamp(alog[c * N4 + n4], -10.0, 5.0));
                [[unroll]] for (uint s = 0; s < SQ; ++s) {
                    {
                        const uint o = ((p.first + r0 + s) * p.Di + c) * N4 + n4;
                        const vec4 xx = dl[s][j] * A, a = exp(xx);
                        const vec4 hn = a * hs[o] + input_b4(dl[s][j], xx, a) * uv[s][j] * Bv[s];
                        hs[o] = hn;
                        ya[s][j] += dot(Cv[s], hn);
                    }
                }
            }
        }
        [[unroll]] for (uint s = 0; s < SQ; ++s) sm[s * P + oc + m] = ya[s] * silu4(sm[s * P + oz + m]);
    }
    barrier();
    // x += y Wout^T + bout, then (the last block) the final norm
    ss = vec4(0.0);
    for (uint m = t; m < d4; m += WG) {
        vec4 acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
        for (uint k = 0; k < D4; ++k) {
            const vec4 w0 = wout[(4 * m) * D4 + k], w1 = wout[(4 * m + 1) * D4 + k], w2 = wout[(4 * m + 2) * D4 + k], w3 = wout[(4 * m + 3) * D4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const vec4 hv = sm[s * P + oc + k];
                    acc[s] += vec4(dot(hv, w0), dot(hv, w1), dot(hv, w2), dot(hv, w3));
                }
            }
        }
        const vec4 b = bout[m];
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            {
                const vec4 v = sm[s * P + ox + m] + (acc[s] + b);
                sm[s * P + ox + m] = v;
                x[(r0 + s) * d4 + m] = v;
                ss[s] += dot(v, v);
            }
        }
    }
    if (p.final == 0) return;  // uniform
    rs = inversesqrt(wg_sum4(ss) / float(p.d) + p.eps);
    for (uint m = t; m < d4; m += WG) {
        const vec4 w = wnf[m];
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            {
                const vec4 v = sm[s * P + ox + m] * rs[s] * w;
                y[(r0 + s) * d4 + m] = v;
                sm[s * P + oh + m] = v;
            }
        }
    }
    if (p.head != 0) {  // logits = y Wh^T (wh [V, d]), four rows a thread (rows past V read V - 1)
        barrier();
        for (uint m = t; 4 * m < p.V; m += WG) {
            vec4 acc[SQ];
            [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
        for (uint k = 0; k < d4; ++k) {
            const vec4 w0 = wh[(min(4 * m, p.V - 1)) * d4 + k], w1 = wh[(min(4 * m + 1, p.V - 1)) * d4 + k], w2 = wh[(min(4 * m + 2, p.V - 1)) * d4 + k], w3 = wh[(min(4 * m + 3, p.V - 1)) * d4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const vec4 hv = sm[s * P + oh + k];
                    acc[s] += vec4(dot(hv, w0), dot(hv, w1), dot(hv, w2), dot(hv, w3));
                }
            }
        }
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const uint lb = (r0 + s) * p.V + 4 * m;
                    logits[lb] = acc[s].x;
                    if (4 * m + 1 < p.V) logits[lb + 1] = acc[s].y;
                    if (4 * m + 2 < p.V) logits[lb + 2] = acc[s].z;
                    if (4 * m + 3 < p.V) logits[lb + 3] = acc[s].w;
                }
            }
        }
    }
}
