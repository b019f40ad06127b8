#version 450
#extension GL_EXT_control_flow_attributes : enable

// moe_gate_grad: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_dout { float dout[]; };
layout(std430, binding = 1) readonly buffer Buf_y { float y[]; };
layout(std430, binding = 2) readonly buffer Buf_b2 { float b2[]; };
layout(std430, binding = 3) writeonly buffer Buf_dg { float dg[]; };
layout(push_constant) uniform Push {
    uint N;
    uint Z;
    uint d;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // dg[n, z] = sum_c dout[n, c] (y[n, z, c] + b2[z, c]): the gradient of each combine weight.
    if (i >= p.N * p.Z) return;
    const uint n = i / p.Z, z = i % p.Z;
    float acc = 0.0;
    for (uint c = 0; c < p.d; ++c) acc += float(dout[n * p.d + c]) * (float(y[i * p.d + c]) + b2[z * p.d + c]);
    dg[i] = acc;
}