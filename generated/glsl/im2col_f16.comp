#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// im2col: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) writeonly buffer Buf_col { float16_t col[]; };
layout(push_constant) uniform Push {
    uint N;
    uint C;
    uint H;
    uint W;
    uint KH;
    uint KW;
    uint OH;
    uint OW;
    uint sh;
    uint sw;
    uint ph;
    uint pw;
    uint dh;
    uint dw;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // col[k, n*P + q] with k = (c*KH + ky)*KW + kx, q = oy*OW + ox, P = OH*OW:
    // x[n, c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw], zero outside the image.
    const uint P = p.OH * p.OW, NP = p.N * P;
    if (i >= p.C * p.KH * p.KW * NP) return;
    const uint k = i / NP, j = i % NP;
    const uint n = j / P, q = j % P;
    const uint kx = k % p.KW, ky = (k / p.KW) % p.KH, c = k / (p.KW * p.KH);
    const int iy = int((q / p.OW) * p.sh + ky * p.dh) - int(p.ph);
    const int ix = int((q % p.OW) * p.sw + kx * p.dw) - int(p.pw);
    if (iy >= 0 && iy < int(p.H) && ix >= 0 && ix < int(p.W))
        col[i] = x[((n * p.C + c) * p.H + uint(iy)) * p.W + uint(ix)];
    else
        col[i] = float16_t(0.0);
}