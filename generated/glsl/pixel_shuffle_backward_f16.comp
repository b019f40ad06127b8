#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// pixel_shuffle_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 1) writeonly buffer Buf_dx { float16_t dx[]; };
layout(push_constant) uniform Push {
    uint N;
    uint C;
    uint GH;
    uint GW;
    uint r;
    uint tokens;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // The same map read the other way, one thread per dx element: dx[i] = dy[where element i went].
    const uint rr = p.r * p.r, OW = p.GW * p.r, OH = p.GH * p.r;
    if (i >= p.N * p.C * OH * OW) return;
    uint n, c, gy, gx, sy, sx;
    if (p.tokens != 0) {  // dx [N, GH*GW, r*r*C]
        const uint pc = i % (rr * p.C), tok = (i / (rr * p.C)) % (p.GH * p.GW);
        n = i / (rr * p.C * p.GH * p.GW);
        c = pc % p.C; sx = (pc / p.C) % p.r; sy = pc / (p.C * p.r);
        gx = tok % p.GW; gy = tok / p.GW;
    } else {  // dx [N, C*r*r, GH, GW]
        gx = i % p.GW; gy = (i / p.GW) % p.GH;
        const uint ch = (i / (p.GW * p.GH)) % (rr * p.C);
        n = i / (p.GW * p.GH * rr * p.C);
        c = ch / rr; sy = (ch % rr) / p.r; sx = ch % p.r;
    }
    dx[i] = dy[((n * p.C + c) * OH + gy * p.r + sy) * OW + gx * p.r + sx];
}