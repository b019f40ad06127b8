#version 450
#extension GL_EXT_control_flow_attributes : enable

// rope_at: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) readonly buffer Buf_hyper { uint hyper[]; };
layout(std430, binding = 2) writeonly buffer Buf_y { float y[]; };
layout(push_constant) uniform Push {
    uint S;
    uint H;
    uint D;
    uint Q;
    float log2_theta;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // rope (templates/rope.comp.j2) at position hyper[8 + 4 (token / Q)] + token % Q: Q tokens an item.
    const uint half_d = p.D / 2;
    if (i >= p.S * p.H * half_d) return;
    uint qd = i % half_d, th = i / half_d;
    uint tok = th / p.H;
    uint o = th * p.D + qd;
    float a = float(x[o]), b = float(x[o + half_d]);
    float freq = exp2(-2.0 * float(qd) / float(p.D) * p.log2_theta);
    float ang = float((hyper[8 + 4 * (tok / p.Q)] + tok % p.Q)) * freq;
    float rc = cos(ang), rs = sin(ang);
    float ya = a * rc - b * rs, yb = a * rs + b * rc;
    y[o] = float(ya);
    y[o + half_d] = float(yb);
}