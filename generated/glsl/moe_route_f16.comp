#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// moe_route: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_logits { float16_t logits[]; };
layout(std430, binding = 1) writeonly buffer Buf_probs { float probs[]; };
layout(std430, binding = 2) buffer Buf_gates { float gates[]; };
layout(std430, binding = 3) writeonly buffer Buf_sel { uint sel[]; };
layout(std430, binding = 4) writeonly buffer Buf_dispatch { float dispatch[]; };
layout(push_constant) uniform Push {
    uint N;
    uint E;
    uint k;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // One thread per token: probs = softmax(logits); the k largest logits in descending order, ties to the
    // lower index (a stable sort); combine gates = softmax over the selected logits.
    if (i >= p.N) return;
    const uint base = i * p.E;
    float mx = float(logits[base]);
    for (uint e = 1; e < p.E; ++e) mx = max(mx, float(logits[base + e]));
    float s = 0.0;
    for (uint e = 0; e < p.E; ++e) s += exp(float(logits[base + e]) - mx);
    for (uint e = 0; e < p.E; ++e) { probs[base + e] = exp(float(logits[base + e]) - mx) / s; dispatch[base + e] = 0.0; }
    // Selection r takes the largest (logit, -index) strictly after selection r - 1 in that order.
    float prev_l = 0.0;
    uint prev_e = 0;
    float top = 0.0, gsum = 0.0;
    const uint gb = i * (p.E + 1);
    gates[gb] = 1.0;  // the shared expert
    for (uint e = 0; e < p.E; ++e) gates[gb + 1 + e] = 0.0;
    for (uint r = 0; r < p.k; ++r) {
        uint best = p.E;
        float bl = 0.0;
        for (uint e = 0; e < p.E; ++e) {
            const float l = float(logits[base + e]);
            const bool after = r == 0 || l < prev_l || (l == prev_l && e > prev_e);
            if (after && (best == p.E || l > bl)) { best = e; bl = l; }
        }
        if (r == 0) top = bl;
        sel[i * p.k + r] = best;
        dispatch[base + best] = 1.0;
        gates[gb + 1 + best] = exp(bl - top);  // normalised below
        gsum += exp(bl - top);
        prev_l = bl;
        prev_e = best;
    }
    const float inv = 1.0 / gsum;
    for (uint e = 0; e < p.E; ++e) gates[gb + 1 + e] *= inv;
}