#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// upsample2d_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 1) writeonly buffer Buf_dx { float16_t dx[]; };
layout(push_constant) uniform Push {
    uint NC;
    uint H;
    uint W;
    uint sh;
    uint sw;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // dx[nc, y, x] = sum over a < sh, b < sw of dy[nc, y*sh + a, x*sw + b], in order.
    if (i >= p.NC * p.H * p.W) return;
    const uint xx = i % p.W, yy = (i / p.W) % p.H, nc = i / (p.W * p.H);
    const uint OW = p.W * p.sw, OH = p.H * p.sh;
    float s = 0.0;
    for (uint a = 0; a < p.sh; ++a)
        for (uint b = 0; b < p.sw; ++b)
            s += float(dy[(nc * OH + yy * p.sh + a) * OW + xx * p.sw + b]);
    dx[i] = float16_t(s);
}