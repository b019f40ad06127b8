#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// mse_loss_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_y { float16_t y[]; };
layout(std430, binding = 1) readonly buffer Buf_t { float16_t t[]; };
layout(std430, binding = 2) readonly buffer Buf_g { float g[]; };
layout(std430, binding = 3) writeonly buffer Buf_dy { float16_t dy[]; };
layout(push_constant) uniform Push {
    uint n;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    dy[i] = float16_t(2.0 * g[0] / float(p.n) * (float(y[i]) - float(t[i])));
}