#version 450
#extension GL_EXT_control_flow_attributes : enable

// group_norm: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) readonly buffer Buf_w { float w[]; };
layout(std430, binding = 2) readonly buffer Buf_b { float b[]; };
layout(std430, binding = 3) readonly buffer Buf_stats { float stats[]; };
layout(std430, binding = 4) writeonly buffer Buf_y { float y[]; };
layout(push_constant) uniform Push {
    uint n;
    uint C;
    uint HW;
    uint G;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // y = (x - mean) rstd w[c] + b[c], statistics of row (n, c / (C / G)).
    if (i >= p.n) return;
    const uint nc = i / p.HW, c = nc % p.C, row = (nc / p.C) * p.G + c / (p.C / p.G);
    y[i] = float((float(x[i]) - stats[2 * row]) * stats[2 * row + 1] * w[c] + b[c]);
}