#version 450
#extension GL_EXT_control_flow_attributes : enable

// moe_aux: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_counts { float counts[]; };
layout(std430, binding = 1) readonly buffer Buf_psum { float psum[]; };
layout(std430, binding = 2) writeonly buffer Buf_f { float f[]; };
layout(std430, binding = 3) writeonly buffer Buf_aux { float aux[]; };
layout(push_constant) uniform Push {
    uint N;
    uint E;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // Load balance over N tokens: f[e] = counts[e] / sum(counts) (dispatch fractions), mean router
    // probability P[e] = psum[e] / N, aux[0] = E sum_e f[e] P[e]. One thread.
    if (i != 0) return;
    float total = 0.0;
    for (uint e = 0; e < p.E; ++e) total += counts[e];
    if (total == 0.0) total = 1.0;
    float a = 0.0;
    for (uint e = 0; e < p.E; ++e) { const float fe = counts[e] / total; f[e] = fe; a += fe * (psum[e] / float(max(p.N, 1u))); }
    aux[0] = float(p.E) * a;
}