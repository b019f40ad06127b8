#version 450
#extension GL_EXT_control_flow_attributes : enable

// moe_router_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_dg { float dg[]; };
layout(std430, binding = 1) readonly buffer Buf_gates { float gates[]; };
layout(std430, binding = 2) readonly buffer Buf_sel { uint sel[]; };
layout(std430, binding = 3) readonly buffer Buf_probs { float probs[]; };
layout(std430, binding = 4) readonly buffer Buf_f { float f[]; };
layout(std430, binding = 5) writeonly buffer Buf_dlogits { float dlogits[]; };
layout(push_constant) uniform Push {
    uint N;
    uint E;
    uint k;
    float aux_scale;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // One thread per token: dlogit[e] = g_e (dg_e - sum_m g_m dg_m) over the selected experts (gates are
    // the softmax of their logits), plus the load-balance term aux_scale P_e (f_e - sum_j f_j P_j).
    if (i >= p.N) return;
    const uint base = i * p.E, gb = i * (p.E + 1);
    float dot = 0.0;
    for (uint r = 0; r < p.k; ++r) { const uint e = sel[i * p.k + r]; dot += gates[gb + 1 + e] * dg[gb + 1 + e]; }
    float fp = 0.0;
    if (p.aux_scale != 0.0)
        for (uint e = 0; e < p.E; ++e) fp += f[e] * probs[base + e];
    for (uint e = 0; e < p.E; ++e) {
        const float g = gates[gb + 1 + e];
        float v = g != 0.0 ? g * (dg[gb + 1 + e] - dot) : 0.0;
        if (p.aux_scale != 0.0) v += p.aux_scale * probs[base + e] * (f[e] - fp);
        dlogits[base + e] = float(v);
    }
}