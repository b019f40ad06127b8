#version 450
#extension GL_EXT_control_flow_attributes : enable

// channel_totals: one workgroup of WG threads per output (a chunk, a row or a channel), fixed order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_part { float part[]; };
layout(std430, binding = 1) writeonly buffer Buf_db { float db[]; };
layout(std430, binding = 2) writeonly buffer Buf_dw { float dw[]; };
layout(push_constant) uniform Push {
    uint N;
    uint C;
    uint nchunk;
    uint xhat;
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
    const uint g = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    const uint t = gl_LocalInvocationID.x;
    // Channel c: db[c] = sum over (n, k) of the first partials; with xhat, dw[c] of the second.
    if (g >= p.C) return;
    const uint per = p.N * p.nchunk;
    float a = 0.0, b = 0.0;
    for (uint j = t; j < per; j += WG) {
        uint idx = ((j / p.nchunk) * p.C + g) * p.nchunk + j % p.nchunk;
        a += part[2 * idx];
        b += part[2 * idx + 1];
    }
    a = wg_sum(a);
    b = wg_sum(b);
    if (t == 0) { db[g] = a; if (p.xhat != 0) dw[g] = b; }
}
