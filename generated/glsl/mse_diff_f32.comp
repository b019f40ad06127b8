#version 450
#extension GL_EXT_control_flow_attributes : enable

// mse_diff: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_y { float y[]; };
layout(std430, binding = 1) readonly buffer Buf_t { float t[]; };
layout(std430, binding = 2) writeonly buffer Buf_d { float d[]; };
layout(push_constant) uniform Push {
    uint n;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    d[i] = float(float(y[i]) - float(t[i]));
}