#version 450
#extension GL_EXT_control_flow_attributes : enable

// scatter_strided: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { uint x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { uint y[]; };
layout(push_constant) uniform Push {
    uint n;
    uint off;
    uint d1;
    uint d2;
    uint d3;
    uint s0;
    uint s1;
    uint s2;
    uint s3;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    uint r = i;
    const uint i3 = r % p.d3; r /= p.d3;
    const uint i2 = r % p.d2; r /= p.d2;
    const uint i1 = r % p.d1; const uint i0 = r / p.d1;
    const uint at = p.off + i0 * p.s0 + i1 * p.s1 + i2 * p.s2 + i3 * p.s3;
    y[at] = x[i];
}