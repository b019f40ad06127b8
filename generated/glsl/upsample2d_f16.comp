#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// upsample2d: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { float16_t y[]; };
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
    // Nearest: y[nc, oy, ox] = x[nc, oy / sh, ox / sw], y [NC, H*sh, W*sw].
    const uint OW = p.W * p.sw, OH = p.H * p.sh;
    if (i >= p.NC * OH * OW) return;
    const uint ox = i % OW, oy = (i / OW) % OH, nc = i / (OW * OH);
    y[i] = x[(nc * p.H + oy / p.sh) * p.W + ox / p.sw];
}