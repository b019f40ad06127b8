#version 450
#extension GL_EXT_control_flow_attributes : enable

// loss_unscale: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) buffer Buf_grad { float grad[]; };
layout(std430, binding = 1) readonly buffer Buf_scale { float scale[]; };
layout(std430, binding = 2) readonly buffer Buf_state { float state[]; };
layout(push_constant) uniform Push {
    uint n;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    const float s = state[0];
    grad[i] = (isnan(s) || isinf(s)) ? uintBitsToFloat(0x7fc00000u) : grad[i] * scale[1];
}