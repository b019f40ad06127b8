#version 450
#extension GL_EXT_control_flow_attributes : enable

// col2im: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_col { float col[]; };
layout(std430, binding = 1) writeonly buffer Buf_dx { float dx[]; };
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
    // dx[n, c, iy, ix] = sum over taps (ky, kx) with iy + ph - ky*dh = oy*sh exactly (0 <= oy < OH),
    // likewise for x, of dcol[(c*KH + ky)*KW + kx, n*P + oy*OW + ox]; taps in a fixed order.
    if (i >= p.N * p.C * p.H * p.W) return;
    const uint ix = i % p.W, iy = (i / p.W) % p.H, c = (i / (p.W * p.H)) % p.C, n = i / (p.W * p.H * p.C);
    const uint P = p.OH * p.OW, NP = p.N * P;
    float s = 0.0;
    for (uint ky = 0; ky < p.KH; ++ky) {
        const int ty = int(iy + p.ph) - int(ky * p.dh);
        if (ty < 0 || uint(ty) % p.sh != 0) continue;
        const uint oy = uint(ty) / p.sh;
        if (oy >= p.OH) continue;
        for (uint kx = 0; kx < p.KW; ++kx) {
            const int tx = int(ix + p.pw) - int(kx * p.dw);
            if (tx < 0 || uint(tx) % p.sw != 0) continue;
            const uint ox = uint(tx) / p.sw;
            if (ox >= p.OW) continue;
            s += float(col[((c * p.KH + ky) * p.KW + kx) * NP + n * P + oy * p.OW + ox]);
        }
    }
    dx[i] = float(s);
}