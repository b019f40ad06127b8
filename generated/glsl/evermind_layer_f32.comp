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
// The vectors between phases (x, the norm's output, the active experts' hidden rows) live in shared memory;
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
} p;
layout(local_size_x_id = 0) in;
shared float red_wg_sum[WG];
float wg_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_sum[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_sum[t]; float b = red_wg_sum[t + s]; red_wg_sum[t] = a + b; }
        barrier();
    }
    float r = red_wg_sum[0];
    barrier();
    return r;
}
const uint EMAX = 64;  // the most experts (select.decode.CONV_EMAX)
shared vec4 sm[SW];  // x, the norm's output, the active experts' hidden rows
shared float rl[EMAX];  // the router's logits, then each expert's gate
shared float ag[EMAX + 1];  // the active experts' gates (the shared expert's 1 first), in expert order
shared uint az[EMAX + 1];  // their experts (0 the shared one, e + 1 routed expert e)
shared uint na_s;  // how many

void main() {
    const uint r = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    if (r >= p.R) return;  // uniform per workgroup
    const uint t = gl_LocalInvocationID.x, d4 = p.d / 4, h4 = p.h / 4, K1 = p.K - 1;
    const uint ox = 0, on = d4, oh = 2 * d4;
    const uint wb0 = hyper[8 + 4 * r + 1] * K1 * d4;  // the first row of the item's window, in vec4s
    // x and the conv's norm
    float ss = 0.0;
    for (uint j = t; j < d4; j += WG) {
        vec4 v;
        if (p.embed != 0) {
            const uint id = hyper[p.ids_at + r];
            v = id < p.V ? emb[id * d4 + j] : vec4(0.0);
        } else {
            v = x[r * d4 + j];
        }
        sm[ox + j] = v;
        ss += dot(v, v);
    }
    float rs = inversesqrt(wg_sum(ss) / float(p.d) + p.eps);
    // the causal conv of four channels a thread, their window columns shifted; a = x + conv, the MoE's norm
    ss = 0.0;
    for (uint j = t; j < d4; j += WG) {
        const vec4 xv = sm[ox + j];
        const vec4 nv = xv * rs * wn1[j];
        const uint c0 = 4 * j * p.K, wb = wb0 + j;
        vec4 acc = vec4(conv[c0], conv[c0 + p.K], conv[c0 + 2 * p.K], conv[c0 + 3 * p.K]) * nv;
        for (uint q = 1; q < p.K; ++q) {
            const uint c = c0 + q;
            acc += vec4(conv[c], conv[c + p.K], conv[c + 2 * p.K], conv[c + 3 * p.K]) * win[wb + (K1 - q) * d4];
        }
        for (uint q = 0; q + 1 < K1; ++q) win[wb + q * d4] = win[wb + (q + 1) * d4];
        if (K1 > 0) win[wb + (K1 - 1) * d4] = nv;
        const vec4 a = xv + acc;
        sm[ox + j] = a;
        ss += dot(a, a);
    }
    rs = inversesqrt(wg_sum(ss) / float(p.d) + p.eps);
    for (uint j = t; j < d4; j += WG) sm[on + j] = sm[ox + j] * rs * wn2[j];
    barrier();
    // the router's logits, one expert a thread
    for (uint e = t; e < p.E; e += WG) {
        vec4 acc = vec4(0.0);
        for (uint k = 0; k < d4; ++k) acc += sm[on + k] * wr[e * d4 + k];
        rl[e] = (acc.x + acc.y) + (acc.z + acc.w);
    }
    barrier();
    // the route (one thread): selection q takes the largest (logit, -index) strictly after selection q - 1
    if (t == 0) {
        for (uint e = 0; e < p.E; ++e) ag[1 + e] = 0.0;  // by expert until the list is built
        float prev_l = 0.0, top = 0.0, gsum = 0.0;
        uint prev_e = 0;
        for (uint q = 0; q < p.k; ++q) {
            uint best = p.E;
            float bl = 0.0;
            for (uint e = 0; e < p.E; ++e) {
                const float l = rl[e];
                const bool after = q == 0 || l < prev_l || (l == prev_l && e > prev_e);
                if (after && (best == p.E || l > bl)) { best = e; bl = l; }
            }
            if (q == 0) top = bl;
            ag[1 + best] = exp(bl - top);
            gsum += exp(bl - top);
            prev_l = bl;
            prev_e = best;
        }
        // the list, in expert order (compacted in place: slot n <= 1 + e is never one still to be read)
        const float inv = 1.0 / gsum;
        uint n = 1;
        for (uint e = 0; e < p.E; ++e) {
            const float g = ag[1 + e] * inv;
            if (g != 0.0) {
                ag[n] = g;
                az[n] = 1 + e;
                ++n;
            }
        }
        ag[0] = 1.0;
        az[0] = 0u;
        na_s = n;
    }
    barrier();
    const uint na = na_s;
    // the active experts' hidden rows relu(m w1^T + b1), four rows a thread
    for (uint i = t; i < na * h4; i += WG) {
        const uint z = az[i / h4], m = i % h4, rb = (z * p.h + 4 * m) * d4;
        vec4 acc = vec4(0.0);
        for (uint k = 0; k < d4; ++k) {
            const vec4 v = sm[on + k];
            acc += vec4(dot(v, w1[rb + k]), dot(v, w1[rb + d4 + k]), dot(v, w1[rb + 2 * d4 + k]),
                        dot(v, w1[rb + 3 * d4 + k]));
        }
        sm[oh + i] = max(acc + b1[z * h4 + m], vec4(0.0));
    }
    barrier();
    // x = a + the gated sum of the active experts' outputs, four channels a thread
    for (uint j = t; j < d4; j += WG) {
        vec4 acc = vec4(0.0);
        for (uint a = 0; a < na; ++a) {
            const uint z = az[a], rb = (z * p.d + 4 * j) * h4, hb = oh + a * h4;
            vec4 y = vec4(0.0);
            for (uint k = 0; k < h4; ++k) {
                const vec4 hv = sm[hb + k];
                y += vec4(dot(hv, w2[rb + k]), dot(hv, w2[rb + h4 + k]), dot(hv, w2[rb + 2 * h4 + k]),
                          dot(hv, w2[rb + 3 * h4 + k]));
            }
            acc += ag[a] * (y + b2[z * d4 + j]);
        }
        const vec4 v = sm[ox + j] + acc;
        x[r * d4 + j] = v;
        sm[ox + j] = v;
    }
    if (p.head != 0) {  // the last block: logits = x wh^T (wh [V, d]), four rows a thread (rows past V read V - 1)
        barrier();
        for (uint m = t; 4 * m < p.V; m += WG) {
            const uvec4 rows = min(uvec4(4 * m, 4 * m + 1, 4 * m + 2, 4 * m + 3), uvec4(p.V - 1)) * d4;
            vec4 acc = vec4(0.0);
            for (uint k = 0; k < d4; ++k) {
                const vec4 v = sm[ox + k];
                acc += vec4(dot(v, wh[rows.x + k]), dot(v, wh[rows.y + k]), dot(v, wh[rows.z + k]), dot(v, wh[rows.w + k]));
            }
            const uint lb = r * p.V + 4 * m;
            logits[lb] = acc.x;
            if (4 * m + 1 < p.V) logits[lb + 1] = acc.y;
            if (4 * m + 2 < p.V) logits[lb + 2] = acc.z;
            if (4 * m + 3 < p.V) logits[lb + 3] = acc.w;
        }
    }
}
