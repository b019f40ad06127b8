#version 450
#extension GL_EXT_control_flow_attributes : enable

// moe_combine: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_y { float y[]; };
layout(std430, binding = 1) readonly buffer Buf_b2 { float b2[]; };
layout(std430, binding = 2) readonly buffer Buf_gates { float gates[]; };
layout(std430, binding = 3) writeonly buffer Buf_outp { float outp[]; };
layout(push_constant) uniform Push {
    uint N;
    uint Z;
    uint d;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // out[n, c] = sum_z gates[n, z] (y[n, z, c] + b2[z, c]), z in order (the shared expert first).
    if (i >= p.N * p.d) return;
    const uint n = i / p.d, c = i % p.d;
    float acc = 0.0;
    for (uint z = 0; z < p.Z; ++z) {
        const float g = gates[n * p.Z + z];
        if (g != 0.0) acc += g * (float(y[(n * p.Z + z) * p.d + c]) + b2[z * p.d + c]);
    }
    outp[i] = float(acc);
}