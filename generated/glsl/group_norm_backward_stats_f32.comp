#version 450
#extension GL_EXT_control_flow_attributes : enable

// group_norm_backward_stats: one workgroup of WG threads per output (a chunk, a row or a channel), fixed order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_part { float part[]; };
layout(std430, binding = 1) readonly buffer Buf_w { float w[]; };
layout(std430, binding = 2) writeonly buffer Buf_rsum { float rsum[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint C;
    uint G;
    uint nchunk;
    uint L;
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
    // Row r = (n, group): mean over the row of w*dy and of w*dy*xhat, from the per-(n, c) partials.
    if (g >= p.rows) return;
    const uint cg = p.C / p.G, n = g / p.G, c0 = (g % p.G) * cg;
    const uint per = cg * p.nchunk;
    float a = 0.0, b = 0.0;
    for (uint j = t; j < per; j += WG) {
        uint c = c0 + j / p.nchunk, idx = (n * p.C + c) * p.nchunk + j % p.nchunk;
        a += w[c] * part[2 * idx];
        b += w[c] * part[2 * idx + 1];
    }
    a = wg_sum(a);
    b = wg_sum(b);
    if (t == 0) { rsum[2 * g] = a / float(p.L); rsum[2 * g + 1] = b / float(p.L); }
}
