#version 450
#extension GL_EXT_control_flow_attributes : enable

// channel_partials: one workgroup of WG threads per output (a chunk, a row or a channel), fixed order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) readonly buffer Buf_dy { float dy[]; };
layout(std430, binding = 2) readonly buffer Buf_stats { float stats[]; };
layout(std430, binding = 3) writeonly buffer Buf_part { float part[]; };
layout(push_constant) uniform Push {
    uint NC;
    uint C;
    uint HW;
    uint G;
    uint chunk;
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
    // Chunk k of plane (n, c) (HW contiguous elements): sum of dy and, with xhat, of dy * xhat where
    // xhat = (x - mean) * rstd of row (n, c / (C / G)).
    if (g >= p.NC * p.nchunk) return;
    const uint nc = g / p.nchunk, k = g % p.nchunk;
    const uint lo = nc * p.HW + k * p.chunk, cnt = min(p.chunk, p.HW - k * p.chunk);
    const uint row = (nc / p.C) * p.G + (nc % p.C) / (p.C / p.G);
    const float mean = p.xhat != 0 ? stats[2 * row] : 0.0, rstd = p.xhat != 0 ? stats[2 * row + 1] : 0.0;
    float a = 0.0, b = 0.0;
    for (uint j = t; j < cnt; j += WG) {
        float d = float(dy[lo + j]);
        a += d;
        if (p.xhat != 0) b += d * (float(x[lo + j]) - mean) * rstd;
    }
    a = wg_sum(a);
    b = wg_sum(b);
    if (t == 0) { part[2 * g] = a; part[2 * g + 1] = b; }
}
