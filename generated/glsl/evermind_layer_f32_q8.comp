#version 450
#extension GL_EXT_control_flow_attributes : enable

// One EvermindLM block (models/evermind_lm.py) for the newest token of item r (a sequence whose conv window is
// row block hyper[8 + 4r + 1] of win: its last K - 1 conv inputs, oldest first), one workgroup of WG threads:
//   x (or, embed != 0, the embedding row of hyper[ids_at + r]; ids >= V give 0) -> n = rms_norm(x, wn1)
//   -> a = x + conv (tap j of channel c, conv[c K + j], reads the input t - j: n for j = 0, window row K-1-j
//   else; the window shifts, n its newest row) -> m = rms_norm(a, wn2) -> router logits m wr^T -> the top k
//   (ops.moe_route: the largest logit first, ties to the lower index; gates exp(l - top) / their sum)
//   -> hidden rows relu(m w1_z^T + b1_z) of the shared expert z = 0 and the selected ones only
//   -> x = a + sum over those experts in index order, zero gates skipped, of g_z (w2_z hid_z + b2_z)
//   (ops.moe_combine), written back to x; head != 0 (the last block): logits = x wh^T, V of them.
// Flag q4: up to 4 consecutive items a workgroup (push S), each load of a weight serving all of them that use
// it (the router, the conv, the head; each expert any of them selected, the shared one always); q8: up to 8;
// else one.
// The vectors between phases (x, the norm's output, the active experts' hidden rows) live in shared memory,
// one region an item;
// everything moves as vec4 (d and h multiples of 4: select.decode.conv_layer_errors): lavapipe runs every
// buffer load as a loop over its SIMD lanes, so a vec4 load costs about what a float does. A thread computes
// four neighbouring outputs of a product (four rows of W share each load of the vector). f32 throughout.
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint SW = 1024;
layout(std430, binding = 0) buffer Buf_x { vec4 x[]; };
layout(std430, binding = 1) readonly buffer Buf_hyper { uint hyper[]; };
layout(std430, binding = 2) readonly buffer Buf_emb { vec4 emb[]; };
layout(std430, binding = 3) readonly buffer Buf_conv { float conv[]; };
layout(std430, binding = 4) readonly buffer Buf_wn1 { vec4 wn1[]; };
layout(std430, binding = 5) readonly buffer Buf_wn2 { vec4 wn2[]; };
layout(std430, binding = 6) readonly buffer Buf_wr { vec4 wr[]; };
layout(std430, binding = 7) readonly buffer Buf_w1 { vec4 w1[]; };
layout(std430, binding = 8) readonly buffer Buf_b1 { vec4 b1[]; };
layout(std430, binding = 9) readonly buffer Buf_w2 { vec4 w2[]; };
layout(std430, binding = 10) readonly buffer Buf_b2 { vec4 b2[]; };
layout(std430, binding = 11) buffer Buf_win { vec4 win[]; };
layout(std430, binding = 12) readonly buffer Buf_wh { vec4 wh[]; };
layout(std430, binding = 13) writeonly buffer Buf_logits { float logits[]; };
layout(push_constant) uniform Push {
    uint R;
    uint d;
    uint h;
    uint E;
    uint k;
    uint K;
    uint V;
    uint embed;
    uint head;
    float eps;
    uint ids_at;
    uint S;
} p;
layout(local_size_x_id = 0) in;
const uint SQ = 8;  // the most items a workgroup runs (push S: 1..SQ)
const uint EMAX = 64;  // the most experts (select.decode.CONV_EMAX)
const uint NONE = 0xFFFFFFFFu;
shared vec4 sm[SW];  // SQ regions of P vec4s: x, the norm's output, the active experts' hidden rows
shared vec4 red4[WG];
shared float rl[SQ * EMAX];  // each item's router logits
shared float ag[SQ * (EMAX + 1)];  // each item's active experts' gates (the shared expert's 1 first), in expert order
shared uint az[SQ * (EMAX + 1)];  // their experts (0 the shared one, e + 1 routed expert e)
shared uint slotof[SQ * (EMAX + 1)];  // expert z's place in item s's list, NONE where s does not use it
shared uint un[EMAX + 1];  // the experts any item uses, in order
shared uint nu_s;

// A workgroup sum of each component (component s: item s).
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

void main() {
    const uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * p.S;
    if (r0 >= p.R) return;  // uniform per workgroup
    const uint ns = min(p.S, p.R - r0), t = gl_LocalInvocationID.x;
    const uint d4 = p.d / 4, h4 = p.h / 4, K1 = p.K - 1, Z = p.E + 1;
    const uint ox = 0, on = d4, oh = 2 * d4, P = oh + (p.k + 1) * h4;
    uint wb0[SQ];  // the first row of each item's window, in vec4s
    [[unroll]] for (uint s = 0; s < SQ; ++s) wb0[s] = hyper[8 + 4 * min(r0 + s, p.R - 1) + 1] * K1 * d4;
    // x and the conv's norm
    float ss[SQ]; [[unroll]] for (uint s = 0; s < SQ; ++s) ss[s] = 0.0;
    for (uint j = t; j < d4; j += WG) {
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            if (s < ns) {
                vec4 v;
                if (p.embed != 0) {
                    const uint id = hyper[p.ids_at + r0 + s];
                    v = id < p.V ? emb[id * d4 + j] : vec4(0.0);
                } else {
                    v = x[(r0 + s) * d4 + j];
                }
                sm[s * P + ox + j] = v;
                ss[s] += dot(v, v);
            }
        }
    }
    float rs[SQ];
    [[unroll]] for (uint q = 0; q < SQ; q += 4) {
        const vec4 r4 = inversesqrt(wg_sum4(vec4(ss[q], ss[q + 1], ss[q + 2], ss[q + 3])) / float(p.d) + p.eps);
        [[unroll]] for (uint c = 0; c < 4; ++c) rs[q + c] = r4[c];
    }
    // the causal conv of four channels a thread, their window columns shifted; a = x + conv, the MoE's norm
    [[unroll]] for (uint s = 0; s < SQ; ++s) ss[s] = 0.0;
    for (uint j = t; j < d4; j += WG) {
        const vec4 w1j = wn1[j];
        const uint c0 = 4 * j * p.K;
        const vec4 tap0 = vec4(conv[c0], conv[c0 + p.K], conv[c0 + 2 * p.K], conv[c0 + 3 * p.K]);
        vec4 nv[SQ], acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            nv[s] = sm[s * P + ox + j] * rs[s] * w1j;
            acc[s] = tap0 * nv[s];
        }
        for (uint q = 1; q < p.K; ++q) {
            const uint c = c0 + q;
            const vec4 tq = vec4(conv[c], conv[c + p.K], conv[c + 2 * p.K], conv[c + 3 * p.K]);
            [[unroll]] for (uint s = 0; s < SQ; ++s) if (s < ns) acc[s] += tq * win[wb0[s] + j + (K1 - q) * d4];
        }
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            if (s < ns) {
                const uint wb = wb0[s] + j;
                for (uint q = 0; q + 1 < K1; ++q) win[wb + q * d4] = win[wb + (q + 1) * d4];
                if (K1 > 0) win[wb + (K1 - 1) * d4] = nv[s];
                const vec4 a = sm[s * P + ox + j] + acc[s];
                sm[s * P + ox + j] = a;
                ss[s] += dot(a, a);
            }
        }
    }
    
    [[unroll]] for (uint q = 0; q < SQ; q += 4) {
        const vec4 r4 = inversesqrt(wg_sum4(vec4(ss[q], ss[q + 1], ss[q + 2], ss[q + 3])) / float(p.d) + p.eps);
        [[unroll]] for (uint c = 0; c < 4; ++c) rs[q + c] = r4[c];
    }
    for (uint j = t; j < d4; j += WG) {
        const vec4 w = wn2[j];
        [[unroll]] for (uint s = 0; s < SQ; ++s) if (s < ns) sm[s * P + on + j] = sm[s * P + ox + j] * rs[s] * w;
    }
    barrier();
    // the router's logits, one expert a thread
    for (uint e = t; e < p.E; e += WG) {
        vec4 acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
        for (uint k = 0; k < d4; ++k) {
            const vec4 w = wr[e * d4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) if (s < ns) acc[s] += sm[s * P + on + k] * w;
        }
        [[unroll]] for (uint s = 0; s < SQ; ++s) rl[s * EMAX + e] = (acc[s].x + acc[s].y) + (acc[s].z + acc[s].w);
    }
    barrier();
    // the route (thread s: item s): selection q takes the largest (logit, -index) strictly after selection
    // q - 1; gates exp(l - top) / their sum; the list of active experts in expert order
    if (t < ns) {
        const uint lb = t * EMAX, gb = t * (EMAX + 1);
        for (uint z = 0; z < Z; ++z) {
            ag[gb + z] = 0.0;  // by expert until the list is built
            slotof[gb + z] = NONE;
        }
        float prev_l = 0.0, top = 0.0, gsum = 0.0;
        uint prev_e = 0;
        for (uint q = 0; q < p.k; ++q) {
            uint best = p.E;
            float bl = 0.0;
            for (uint e = 0; e < p.E; ++e) {
                const float l = rl[lb + e];
                const bool after = q == 0 || l < prev_l || (l == prev_l && e > prev_e);
                if (after && (best == p.E || l > bl)) { best = e; bl = l; }
            }
            if (q == 0) top = bl;
            ag[gb + 1 + best] = exp(bl - top);
            gsum += exp(bl - top);
            prev_l = bl;
            prev_e = best;
        }
        // compacted in place: place n <= 1 + e is never one still to be read
        const float inv = 1.0 / gsum;
        uint n = 1;
        for (uint e = 0; e < p.E; ++e) {
            const float g = ag[gb + 1 + e] * inv;
            if (g != 0.0) {
                ag[gb + n] = g;
                az[gb + n] = 1 + e;
                slotof[gb + 1 + e] = n;
                ++n;
            }
        }
        ag[gb] = 1.0;
        az[gb] = 0u;
        slotof[gb] = 0u;
    }
    barrier();
    if (t == 0) {  // the experts any item uses, in order
        uint n = 0;
        for (uint z = 0; z < Z; ++z) {
            bool used = false;
            [[unroll]] for (uint s = 0; s < SQ; ++s) if (s < ns) used = used || slotof[s * (EMAX + 1) + z] != NONE;
            if (used) un[n++] = z;
        }
        nu_s = n;
    }
    barrier();
    const uint nu = nu_s;
    // the active experts' hidden rows relu(m w1^T + b1), four rows a thread, for each item using the expert
    for (uint i = t; i < nu * h4; i += WG) {
        const uint z = un[i / h4], m = i % h4, rb = (z * p.h + 4 * m) * d4;
        uint at[SQ];
        vec4 acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            at[s] = s < ns ? slotof[s * (EMAX + 1) + z] : NONE;
            acc[s] = vec4(0.0);
        }
        for (uint k = 0; k < d4; ++k) {
            const vec4 w0 = w1[rb + k], w1r = w1[rb + d4 + k], w2r = w1[rb + 2 * d4 + k], w3 = w1[rb + 3 * d4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                if (at[s] != NONE) {
                    const vec4 v = sm[s * P + on + k];
                    acc[s] += vec4(dot(v, w0), dot(v, w1r), dot(v, w2r), dot(v, w3));
                }
            }
        }
        const vec4 bias = b1[z * h4 + m];
        [[unroll]] for (uint s = 0; s < SQ; ++s)
            if (at[s] != NONE) sm[s * P + oh + at[s] * h4 + m] = max(acc[s] + bias, vec4(0.0));
    }
    barrier();
    // x = a + the gated sum of each item's active experts' outputs (expert order), four channels a thread
    for (uint j = t; j < d4; j += WG) {
        vec4 acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
        for (uint u = 0; u < nu; ++u) {
            const uint z = un[u], rb = (z * p.d + 4 * j) * h4;
            uint at[SQ];
            vec4 y[SQ];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                at[s] = s < ns ? slotof[s * (EMAX + 1) + z] : NONE;
                y[s] = vec4(0.0);
            }
            for (uint k = 0; k < h4; ++k) {
                const vec4 w0 = w2[rb + k], w1r = w2[rb + h4 + k], w2r = w2[rb + 2 * h4 + k], w3 = w2[rb + 3 * h4 + k];
                [[unroll]] for (uint s = 0; s < SQ; ++s) {
                    if (at[s] != NONE) {
                        const vec4 hv = sm[s * P + oh + at[s] * h4 + k];
                        y[s] += vec4(dot(hv, w0), dot(hv, w1r), dot(hv, w2r), dot(hv, w3));
                    }
                }
            }
            const vec4 bias = b2[z * d4 + j];
            [[unroll]] for (uint s = 0; s < SQ; ++s)
                if (at[s] != NONE) acc[s] += ag[s * (EMAX + 1) + at[s]] * (y[s] + bias);
        }
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            if (s < ns) {
                const vec4 v = sm[s * P + ox + j] + acc[s];
                x[(r0 + s) * d4 + j] = v;
                sm[s * P + ox + j] = v;
            }
        }
    }
    if (p.head != 0) {  // the last block: logits = x wh^T (wh [V, d]), four rows a thread (rows past V read V - 1)
        barrier();
        for (uint m = t; 4 * m < p.V; m += WG) {
            const uvec4 rows = min(uvec4(4 * m, 4 * m + 1, 4 * m + 2, 4 * m + 3), uvec4(p.V - 1)) * d4;
            vec4 acc[SQ];
            [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
            for (uint k = 0; k < d4; ++k) {
                const vec4 w0 = wh[rows.x + k], w1r = wh[rows.y + k], w2r = wh[rows.z + k], w3 = wh[rows.w + k];
                [[unroll]] for (uint s = 0; s < SQ; ++s) {
                    if (s < ns) {
                        const vec4 v = sm[s * P + ox + k];
                        acc[s] += vec4(dot(v, w0), dot(v, w1r), dot(v, w2r), dot(v, w3));
                    }
                }
            }
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                if (s < ns) {
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
