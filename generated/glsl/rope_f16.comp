#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// rope: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { float16_t y[]; };
layout(push_constant) uniform Push {
    uint S;
    uint H;
    uint D;
    uint start;
    uint period;
    float log2_theta;
    float sign;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // Half-split (NeoX) rotary embedding on token-major [S, H, D]; position = start + (token % period)
    // (period = tokens per sequence when S packs several sequences).
    // sign = -1 applies the inverse rotation (the backward).
    const uint half_d = p.D / 2;
    // One thread per (token, head, pair).
    if (i >= p.S * p.H * half_d) return;
    const uint q = i % half_d, th = i / half_d;
    const uint tok = th / p.H;
    const uint pos = p.start + tok % p.period;
    {
        float freq = exp2(-2.0 * float(q) / float(p.D) * p.log2_theta);
        float ang = float(pos) * freq;
        float c = cos(ang), s = p.sign * sin(ang);
        uint o = th * p.D + q;
        float a = float(x[o]), b = float(x[o + half_d]);
        y[o] = float16_t(a * c - b * s);
        y[o + half_d] = float16_t(a * s + b * c);
    }
}