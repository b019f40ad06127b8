#version 450
#extension GL_EXT_control_flow_attributes : enable

// Two-stage deterministic reduction. Stage 1 (partial_sums): workgroup g sums x[g*chunk .. (g+1)*chunk)
// (squared if `square`) into part[poff + g]. Stage 2 (final_sum): one workgroup sums part[0..n)
// into acc[oidx] (added to it if `accumulate`; then divided by max(div[0], 1) if `use_div`).
// Fixed order: same inputs, same bits.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_part { float part[]; };
layout(std430, binding = 1) buffer Buf_acc { float acc[]; };
layout(std430, binding = 2) readonly buffer Buf_div { float div[]; };
layout(push_constant) uniform Push {
    uint n;
    uint oidx;
    uint accumulate;
    uint use_div;
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

void main() {
    const uint t = gl_LocalInvocationID.x;
    float s = 0.0;
    for (uint j = t; j < p.n; j += WG) s += part[j];
    s = wg_sum(s);
    if (t == 0) {
        float r = p.accumulate != 0 ? acc[p.oidx] + s : s;
        acc[p.oidx] = p.use_div != 0 ? r / max(div[0], 1.0) : r;
    }
}
