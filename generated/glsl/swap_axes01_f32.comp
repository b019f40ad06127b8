#version 450
#extension GL_EXT_control_flow_attributes : enable

// swap_axes01: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { float y[]; };
layout(push_constant) uniform Push {
    uint A;
    uint B;
    uint R;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // y[b, a, r] = x[a, b, r] for x [A, B, R].
    if (i >= p.A * p.B * p.R) return;
    const uint r = i % p.R, a = (i / p.R) % p.A, b = i / (p.R * p.A);
    y[i] = x[(a * p.B + b) * p.R + r];
}