#version 450
#extension GL_EXT_control_flow_attributes : enable

// group_norm_partials: one workgroup of WG threads per output (a chunk, a row or a channel), fixed order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) writeonly buffer Buf_part { float part[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint L;
    uint chunk;
    uint nchunk;
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
    // Chunk k of row r (the row's L elements are contiguous): its sum and its centred sum of squares.
    if (g >= p.rows * p.nchunk) return;
    const uint r = g / p.nchunk, k = g % p.nchunk;
    const uint lo = r * p.L + k * p.chunk, cnt = min(p.chunk, p.L - k * p.chunk);
    float s = 0.0;
    for (uint j = t; j < cnt; j += WG) s += float(x[lo + j]);
    s = wg_sum(s);
    const float m = s / float(cnt);
    float q = 0.0;
    for (uint j = t; j < cnt; j += WG) { float d = float(x[lo + j]) - m; q += d * d; }
    q = wg_sum(q);
    if (t == 0) { part[2 * g] = s; part[2 * g + 1] = q; }
}
