#version 450
#extension GL_EXT_control_flow_attributes : enable

// One transformer block (models/transformer.py) for the newest token of each item r (a sequence at position
// pos = hyper[8 + 4r], cache slot hyper[8 + 4r + 1]), the whole block in one workgroup of WG threads for S
// consecutive items (S <= SQ; each load of a weight serves all S):
//   x (or, embed != 0, the embedding row of ids[ids_at + r]; ids >= V give 0) -> h = rms_norm(x, wn1)
//   -> q, k, v = h Wq^T, h Wk^T, h Wv^T -> RoPE of q and k at pos (rope_kv_at's arithmetic), k and v into the
//   cache row (slot, pos) -> softmax(q k^T scale) v over positions 0..pos (GQA: head h reads kv head
//   h / (H / KVH)) -> x += a Wo^T -> h = rms_norm(x, wn2) -> g = act(h Wg^T) * (h Wu^T) (glu: SiLU,
//   clamped to +-limit when limit > 0) -> x += g Wd^T, written back to x -> y = rms_norm(x, wn3) (the next
//   block's attention norm or the final norm); head != 0 (the last block): logits = y Wh^T, V of them.
// The vectors between phases (h, x, q, k, the attention output, g, each head's scores and softmax sum) live
// in shared memory, one region an item; phases are separated by barriers. Everything moves as vec4 (d, F multiples of 4, head
// dim of 8: select.decode.layer_errors): lavapipe runs every buffer or shared load as a loop over the SIMD
// lanes, so one vec4 load costs about what one float does. A thread computes four neighbouring outputs of a
// product (four rows of W share each load of h), each a dot product in k order of vec4 steps; four
// neighbouring positions of a head's scores; four dimensions of a head's output. f32 arithmetic throughout.
// hybrid_attn_decode: HybridMambaModel's attention layer (models/mamba.py, _attention_step) the same way, the
// block above without RoPE, without the MLP and its norm, with biases:
//   x (or the embedding row) -> h = rms_norm(x, wn1) -> [q | k | v] = h Wqkv^T + bqkv (rows [q | k | v] of one
//   matrix) -> k and v into the cache row (slot, pos) -> softmax(q k^T scale) v over positions 0..pos
//   -> x += a Wo^T + bo, written back to x; final != 0 (the last layer): y = rms_norm(x, wnf), and head != 0
//   also logits = y Wh^T (the tied embedding), V of them. Head dim a multiple of 4 (no RoPE pairs:
//   select.decode.hattn_errors).
layout(constant_id = 0) const uint WG = 16;
layout(constant_id = 1) const uint SW = 1536;
layout(std430, binding = 0) buffer Buf_x { vec4 x[]; };
layout(std430, binding = 1) readonly buffer Buf_ids { uint ids[]; };
layout(std430, binding = 2) readonly buffer Buf_emb { vec4 emb[]; };
layout(std430, binding = 3) readonly buffer Buf_wn1 { vec4 wn1[]; };
layout(std430, binding = 4) readonly buffer Buf_wqkv { vec4 wqkv[]; };
layout(std430, binding = 5) readonly buffer Buf_bqkv { vec4 bqkv[]; };
layout(std430, binding = 6) readonly buffer Buf_wo { vec4 wo[]; };
layout(std430, binding = 7) readonly buffer Buf_bo { vec4 bo[]; };
layout(std430, binding = 8) buffer Buf_kc { vec4 kc[]; };
layout(std430, binding = 9) buffer Buf_vc { vec4 vc[]; };
layout(std430, binding = 10) readonly buffer Buf_hyper { uint hyper[]; };
layout(std430, binding = 11) readonly buffer Buf_wnf { vec4 wnf[]; };
layout(std430, binding = 12) writeonly buffer Buf_y { vec4 y[]; };
layout(std430, binding = 13) readonly buffer Buf_wh { vec4 wh[]; };
layout(std430, binding = 14) writeonly buffer Buf_logits { float logits[]; };
layout(push_constant) uniform Push {
    uint R;
    uint d;
    uint H;
    uint KVH;
    uint D;
    uint L;
    uint V;
    uint embed;
    uint final;
    uint head;
    float eps;
    float scale;
    uint S;
    uint ids_at;
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
const uint SQ = 1;  // the most sequences a workgroup runs (push S: 1..SQ; flag q4: 4, else 1)
shared vec4 sm[SW];  // SQ regions of P vec4s, one a sequence
shared vec4 red4[WG];
const float NEG = -3.402823466e38;

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

void main() {
    const uint r0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * p.S;
    if (r0 >= p.R) return;  // uniform per workgroup
    const uint ns = min(p.S, p.R - r0), t = gl_LocalInvocationID.x;
    const uint d4 = p.d / 4, HD4 = p.H * p.D / 4, KD4 = p.KVH * p.D / 4, D4 = p.D / 4;
    const uint G = p.H / p.KVH, L4 = (p.L + 3) / 4 + 1;  // a head's row: its scores, then its softmax sum
    // a sequence's region: h, x, q, the attention output, the heads' score rows
    const uint oh = 0, ox = d4, oq = ox + d4, oa = oq + HD4, os = oa + HD4;
    const uint P = os + p.H * L4;
    uint cpos[SQ];  // each sequence's cache row of its new position, in vec4s
    [[unroll]] for (uint s = 0; s < SQ; ++s) {
        const uint rr = min(r0 + s, p.R - 1);
        cpos[s] = (hyper[8 + 4 * rr + 1] * p.L + hyper[8 + 4 * rr]) * KD4;
    }
    // x and the attention norm
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
        const vec4 w = wn1[j];
        [[unroll]] for (uint s = 0; s < SQ; ++s) sm[s * P + oh + j] = sm[s * P + ox + j] * rs[s] * w;
    }
    barrier();
    // [q | k | v] = h Wqkv^T + bqkv (k and v straight into their cache rows)
    for (uint m = t; m < HD4; m += WG) {
        vec4 acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
        for (uint k = 0; k < d4; ++k) {
            const vec4 w0 = wqkv[(4 * m) * d4 + k], w1 = wqkv[(4 * m + 1) * d4 + k], w2 = wqkv[(4 * m + 2) * d4 + k], w3 = wqkv[(4 * m + 3) * d4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const vec4 hv = sm[s * P + oh + k];
                    acc[s] += vec4(dot(hv, w0), dot(hv, w1), dot(hv, w2), dot(hv, w3));
                }
            }
        }
        const vec4 b = bqkv[m];
        [[unroll]] for (uint s = 0; s < SQ; ++s) sm[s * P + oq + m] = acc[s] + b;
    }
    for (uint m = t; m < KD4; m += WG) {
        vec4 ak[SQ], av[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) ak[s] = av[s] = vec4(0.0);
        for (uint k = 0; k < d4; ++k) {
            const vec4 w0 = wqkv[(4 * (HD4 + m)) * d4 + k], w1 = wqkv[(4 * (HD4 + m) + 1) * d4 + k], w2 = wqkv[(4 * (HD4 + m) + 2) * d4 + k], w3 = wqkv[(4 * (HD4 + m) + 3) * d4 + k];
            const vec4 u0 = wqkv[(4 * (HD4 + KD4 + m)) * d4 + k], u1 = wqkv[(4 * (HD4 + KD4 + m) + 1) * d4 + k], u2 = wqkv[(4 * (HD4 + KD4 + m) + 2) * d4 + k], u3 = wqkv[(4 * (HD4 + KD4 + m) + 3) * d4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const vec4 hv = sm[s * P + oh + k];
                    ak[s] += vec4(dot(hv, w0), dot(hv, w1), dot(hv, w2), dot(hv, w3));
                    av[s] += vec4(dot(hv, u0), dot(hv, u1), dot(hv, u2), dot(hv, u3));
                }
            }
        }
        const vec4 bk = bqkv[HD4 + m], bv = bqkv[HD4 + KD4 + m];
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            {
                kc[cpos[s] + m] = ak[s] + bk;
                vc[cpos[s] + m] = av[s] + bv;
            }
        }
    }
    memoryBarrierBuffer();  // the cache rows written above are read by other threads below
    barrier();
    // scores: four positions of a head a thread (positions past pos read row pos and score NEG)
    for (uint s = 0; s < ns; ++s) {
        const uint kv = hyper[8 + 4 * (r0 + s)] + 1, kv4 = (kv + 3) / 4, cb = hyper[8 + 4 * (r0 + s) + 1] * p.L * KD4;
        for (uint e = t; e < p.H * kv4; e += WG) {
            const uint hh = e / kv4, j0 = 4 * (e % kv4), qb = s * P + oq + hh * D4, kb = cb + (hh / G) * D4;
            const uvec4 jj = min(uvec4(j0, j0 + 1, j0 + 2, j0 + 3), uvec4(kv - 1)) * KD4 + kb;
            vec4 sc = vec4(0.0);
            for (uint dd = 0; dd < D4; ++dd) {
                const vec4 qv = sm[qb + dd];
                sc += vec4(dot(qv, kc[jj.x + dd]), dot(qv, kc[jj.y + dd]), dot(qv, kc[jj.z + dd]), dot(qv, kc[jj.w + dd]));
            }
            sc *= p.scale;
            sm[s * P + os + hh * L4 + e % kv4] = mix(sc, vec4(NEG), greaterThanEqual(uvec4(j0, j0 + 1, j0 + 2, j0 + 3), uvec4(kv)));
        }
    }
    barrier();
    // each head's softmax (one thread a head of a sequence): exp(score - max) in place, their sum after the row
    for (uint i = t; i < ns * p.H; i += WG) {
        const uint s = i / p.H, sb = s * P + os + (i % p.H) * L4, kv4 = (hyper[8 + 4 * (r0 + s)] + 4) / 4;
        vec4 m4 = vec4(NEG);
        for (uint j = 0; j < kv4; ++j) m4 = max(m4, sm[sb + j]);
        const float m = max(max(m4.x, m4.y), max(m4.z, m4.w));
        vec4 l4 = vec4(0.0);
        for (uint j = 0; j < kv4; ++j) {
            vec4 ex = exp(sm[sb + j] - m);
            sm[sb + j] = ex;
            l4 += ex;
        }
        sm[sb + L4 - 1] = vec4((l4.x + l4.y) + (l4.z + l4.w));
    }
    barrier();
    // the attention output: four dimensions of a head a thread
    for (uint s = 0; s < ns; ++s) {
        const uint kv = hyper[8 + 4 * (r0 + s)] + 1, kv4 = (kv + 3) / 4, cb = hyper[8 + 4 * (r0 + s) + 1] * p.L * KD4;
        for (uint e = t; e < HD4; e += WG) {
            const uint hh = e / D4, sb = s * P + os + hh * L4, vb = cb + (hh / G) * D4 + e % D4;
            vec4 acc = vec4(0.0);
            for (uint j = 0; j < kv4; ++j) {
                const vec4 pr = sm[sb + j];
                const uvec4 jj = min(uvec4(4 * j, 4 * j + 1, 4 * j + 2, 4 * j + 3), uvec4(kv - 1)) * KD4 + vb;
                acc += pr.x * vc[jj.x] + pr.y * vc[jj.y] + pr.z * vc[jj.z] + pr.w * vc[jj.w];
            }
            sm[s * P + oa + e] = acc / sm[sb + L4 - 1].x;
        }
    }
    barrier();
    // x += a Wo^T + bo, written back to x
    ss = vec4(0.0);
    for (uint m = t; m < d4; m += WG) {
        vec4 acc[SQ];
        [[unroll]] for (uint s = 0; s < SQ; ++s) acc[s] = vec4(0.0);
        for (uint k = 0; k < HD4; ++k) {
            const vec4 w0 = wo[(4 * m) * HD4 + k], w1 = wo[(4 * m + 1) * HD4 + k], w2 = wo[(4 * m + 2) * HD4 + k], w3 = wo[(4 * m + 3) * HD4 + k];
            [[unroll]] for (uint s = 0; s < SQ; ++s) {
                {
                    const vec4 hv = sm[s * P + oa + k];
                    acc[s] += vec4(dot(hv, w0), dot(hv, w1), dot(hv, w2), dot(hv, w3));
                }
            }
        }
        const vec4 b = bo[m];
        [[unroll]] for (uint s = 0; s < SQ; ++s) {
            {
                const vec4 v = sm[s * P + ox + m] + (acc[s] + b);
                sm[s * P + ox + m] = v;
                x[(r0 + s) * d4 + m] = v;
                ss[s] += dot(v, v);
            }
        }
    }
    if (p.final == 0) return;  // uniform; else the final norm
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
    if (p.head != 0) {  // the last block: logits = y Wh^T (wh [V, d]), four rows a thread (rows past V read V - 1)
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
