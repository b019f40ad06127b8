#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// One workgroup per item r: logits row hyper[8 + 4r + 2] of `cols` -> the chosen id in picked[slot] and
// whether it is a stop token in picked[slots + slot] (slot = hyper[8 + 4r + 1]). hyper's header words:
// [0] temperature (f32 bits; <= 0: greedy argmax, first maximum), [1] top_k (0: off), [2] top_p (f32 bits;
// >= 1: off), [3] repetition penalty (f32 bits), [4] stop-token count n, [5] [6] seed, [7] step; the stop
// ids follow the items' words. seen[slot * cols + id] != 0 marks ids already in the sequence (penalised);
// item flag bit 0 (hyper[8 + 4r + 3]) marks the chosen id seen. The draw is uniform from a counter-based
// hash of (seed, step, slot): reproducible, independent of the device and of the batch's other items.
// Order of the host sampler: penalty, / temperature, top-k (ties at the k-th value kept), softmax, top-p (the
// smallest most-likely prefix with mass >= top_p, ties broken by index), then inverse CDF in id order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_logits { float16_t logits[]; };
layout(std430, binding = 1) readonly buffer Buf_hyper { uint hyper[]; };
layout(std430, binding = 2) buffer Buf_seen { uint seen[]; };
layout(std430, binding = 3) writeonly buffer Buf_picked { uint picked[]; };
layout(push_constant) uniform Push {
    uint items;
    uint cols;
    uint slots;
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
shared float red_wg_max[WG];
float wg_max(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_max[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_max[t]; float b = red_wg_max[t + s]; red_wg_max[t] = max(a, b); }
        barrier();
    }
    float r = red_wg_max[0];
    barrier();
    return r;
}
shared float red_wg_min[WG];
float wg_min(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_min[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_min[t]; float b = red_wg_min[t + s]; red_wg_min[t] = min(a, b); }
        barrier();
    }
    float r = red_wg_min[0];
    barrier();
    return r;
}
shared float pre_w[WG + 1];
shared uint pre_n[WG + 1];
shared uint pick_first, pick_last;
shared float best_v[WG];
shared uint best_i[WG];

uint pcg(uint v) {
    uint state = v * 747796405u + 2891336453u;
    uint word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// A float's bits as a uint that orders like the float (for the top-k radix search).
uint okey(float v) {
    uint b = floatBitsToUint(v);
    return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

uint lbase, sbase;
float rp, temp;

float zval(uint j) {  // the penalised, tempered logit of id j
    float v = float(logits[lbase + j]);
    if (rp != 1.0 && seen[sbase + j] != 0u) v = v > 0.0 ? v / rp : v * rp;
    return temp > 0.0 ? v / temp : v;
}

void main() {
    const uint r = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    if (r >= p.items) return;  // uniform per workgroup
    const uint t = gl_LocalInvocationID.x, C = p.cols;
    const uint slot = hyper[8 + 4 * r + 1], flags = hyper[8 + 4 * r + 3];
    lbase = hyper[8 + 4 * r + 2] * C;
    sbase = slot * C;
    temp = uintBitsToFloat(hyper[0]);
    rp = uintBitsToFloat(hyper[3]);
    const uint topk = hyper[1];
    const float topp = uintBitsToFloat(hyper[2]);
    uint chosen;
    if (temp <= 0.0) {
        // greedy: the first maximum
        float bv = -1.0 / 0.0; uint bi = 0xFFFFFFFFu;
        for (uint j = t; j < C; j += WG) { float v = zval(j); if (v > bv || bi == 0xFFFFFFFFu) { bv = v; bi = j; } }
        best_v[t] = bv; best_i[t] = bi;
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
            if (t < s) {
                float ov = best_v[t + s]; uint oi = best_i[t + s];
                if (oi != 0xFFFFFFFFu && (best_i[t] == 0xFFFFFFFFu || ov > best_v[t] || (ov == best_v[t] && oi < best_i[t]))) {
                    best_v[t] = ov; best_i[t] = oi;
                }
            }
            barrier();
        }
        chosen = best_i[0];
    } else {
        // top-k: the k-th largest key, bit by bit (the largest c with #{key >= c} >= k)
        uint cut = 0u;
        if (topk > 0u && topk < C) {
            for (int bit = 31; bit >= 0; --bit) {
                uint cand = cut | (1u << uint(bit));
                float n = 0.0;
                for (uint j = t; j < C; j += WG) n += okey(zval(j)) >= cand ? 1.0 : 0.0;
                if (wg_sum(n) >= float(topk)) cut = cand;
            }
        }
        float m = -3.402823466e38;
        for (uint j = t; j < C; j += WG) { float v = zval(j); if (okey(v) >= cut) m = max(m, v); }
        m = wg_max(m);
        float s = 0.0;
        for (uint j = t; j < C; j += WG) { float v = zval(j); s += okey(v) >= cut ? exp(v - m) : 0.0; }
        s = wg_sum(s);
        // top-p over e = exp(z - m) (unnormalised; the bar is top_p * s): keep ids with mass strictly above
        // their value < bar: e > ev, where c is the largest bit pattern with mass(e > c) >= bar and ev the
        // smallest e above c; of the ids tied at ev, the first nk by index.
        uint above = 0u, nk = 0xFFFFFFFFu;
        float ev = 0.0;
        if (topp < 1.0) {
            const float bar = topp * s;
            for (int bit = 30; bit >= 0; --bit) {
                uint cand = above | (1u << uint(bit));
                float g = 0.0;
                for (uint j = t; j < C; j += WG) {
                    float v = zval(j); float e = okey(v) >= cut ? exp(v - m) : 0.0;
                    g += floatBitsToUint(e) > cand ? e : 0.0;
                }
                if (wg_sum(g) >= bar) above = cand;
            }
            float lo = 3.402823466e38, ga = 0.0, nt = 0.0;
            for (uint j = t; j < C; j += WG) {
                float v = zval(j); float e = okey(v) >= cut ? exp(v - m) : 0.0;
                if (floatBitsToUint(e) > above) lo = min(lo, e);
            }
            ev = wg_min(lo);
            for (uint j = t; j < C; j += WG) {
                float v = zval(j); float e = okey(v) >= cut ? exp(v - m) : 0.0;
                ga += e > ev ? e : 0.0;
                nt += e == ev ? 1.0 : 0.0;
            }
            ga = wg_sum(ga);
            nt = wg_sum(nt);
            nk = uint(clamp(ceil((bar - ga) / ev), 1.0, nt));
        }
        // inverse CDF in id order: each thread a contiguous chunk; prefix sums of the chunks' weights and tie counts
        const uint ch = (C + WG - 1) / WG, j0 = min(t * ch, C), j1 = min(j0 + ch, C);
        uint ties = 0u;
        if (topp < 1.0)
            for (uint j = j0; j < j1; ++j) {
                float v = zval(j);
                if (okey(v) >= cut && exp(v - m) == ev) ties++;
            }
        pre_n[t + 1] = ties;
        if (t == 0) { pick_first = 0xFFFFFFFFu; pick_last = 0u; }
        barrier();
        if (t == 0) {
            pre_n[0] = 0u;
            for (uint k = 1; k <= WG; ++k) pre_n[k] += pre_n[k - 1];
        }
        barrier();
        // recount with the ties of earlier chunks: id j tied at ev is kept iff its rank < nk
        const uint tb = pre_n[t];
        float w = 0.0;
        ties = tb;
        for (uint j = j0; j < j1; ++j) {
            float v = zval(j); float e = okey(v) >= cut ? exp(v - m) : 0.0;
            if (topp < 1.0 && e < ev) e = 0.0;
            if (topp < 1.0 && e == ev) { e = ties < nk ? e : 0.0; ties++; }
            w += e;
        }
        pre_w[t + 1] = w;
        barrier();
        if (t == 0) {
            pre_w[0] = 0.0;
            for (uint k = 1; k <= WG; ++k) pre_w[k] += pre_w[k - 1];
        }
        barrier();
        const uint seed0 = hyper[5], seed1 = hyper[6], step = hyper[7];
        const float u = float(pcg(seed0 ^ pcg(seed1 ^ pcg(step ^ pcg(slot)))) >> 8) * (1.0 / 16777216.0);
        const float target = u * pre_w[WG];
        float acc = pre_w[t];
        ties = tb;
        uint last = 0u;
        bool found = false;
        for (uint j = j0; j < j1; ++j) {
            float v = zval(j); float e = okey(v) >= cut ? exp(v - m) : 0.0;
            if (topp < 1.0 && e < ev) e = 0.0;
            if (topp < 1.0 && e == ev) { e = ties < nk ? e : 0.0; ties++; }
            if (e > 0.0) {
                last = j + 1;
                acc += e;
                if (!found && target < acc) { found = true; atomicMin(pick_first, j); }
            }
        }
        atomicMax(pick_last, last);
        barrier();
        chosen = pick_first != 0xFFFFFFFFu ? pick_first : pick_last - 1u;  // rounding past the total: the last kept id
    }
    if (t == 0) {
        uint stop = 0u;
        for (uint k = 0; k < hyper[4]; ++k) if (hyper[8 + 4 * p.items + k] == chosen) stop = 1u;
        picked[slot] = chosen;
        picked[p.slots + slot] = stop;
        if ((flags & 1u) != 0u) seen[sbase + chosen] = 1u;
    }
}
