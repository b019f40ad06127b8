#version 450
#extension GL_EXT_control_flow_attributes : enable

// moe_combine_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_dout { float dout[]; };
layout(std430, binding = 1) readonly buffer Buf_gates { float gates[]; };
layout(std430, binding = 2) writeonly buffer Buf_dy { float dy[]; };
layout(push_constant) uniform Push {
    uint N;
    uint Z;
    uint d;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // dy[n, z, c] = gates[n, z] dout[n, c] (0 for experts the token did not select).
    if (i >= p.N * p.Z * p.d) return;
    const uint c = i % p.d, nz = i / p.d, n = nz / p.Z;
    dy[i] = float(gates[nz] * float(dout[n * p.d + c]));
}