#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) buffer Buf_grad { float grad[]; };
layout(std430, binding = 1) readonly buffer Buf_state { float state[]; };
layout(push_constant) uniform Push {
    uint n;
    float max_norm;
} p;
layout(local_size_x_id = 0) in;

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    // g *= min(max_norm / (norm + 1e-6), 1), norm = state[0] (ops.l2_norm, overflow-free) read from
    // device memory (no host sync). A non-finite norm leaves the gradients untouched (it is reported,
    // never spread).
    const float norm = state[0];
    if (isnan(norm) || isinf(norm)) return;
    const float s = min(p.max_norm / (norm + 1e-6), 1.0);
    if (s < 1.0) grad[i] = grad[i] * s;
}
