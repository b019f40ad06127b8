#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// pixel_shuffle: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { float16_t y[]; };
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
    // Output y [N, C, GH*r, GW*r]; pixel (c, gy*r + sy, gx*r + sx) comes from
    //   NCHW:   x [N, C*r*r, GH, GW] at channel c*r*r + sy*r + sx, pixel (gy, gx)  (torch.pixel_shuffle)
    //   tokens: x [N, GH*GW, r*r*C] at token gy*GW + gx, channel (sy*r + sx)*C + c  (doppler)
    const uint OW = p.GW * p.r, OH = p.GH * p.r;
    if (i >= p.N * p.C * OH * OW) return;
    const uint ox = i % OW, oy = (i / OW) % OH, c = (i / (OW * OH)) % p.C, n = i / (OW * OH * p.C);
    const uint gy = oy / p.r, sy = oy % p.r, gx = ox / p.r, sx = ox % p.r;
    y[i] = x[p.tokens != 0
        ? (n * p.GH * p.GW + gy * p.GW + gx) * (p.r * p.r * p.C) + (sy * p.r + sx) * p.C + c
        : ((n * p.C * p.r * p.r + c * p.r * p.r + sy * p.r + sx) * p.GH + gy) * p.GW + gx];
}