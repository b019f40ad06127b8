#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// moe_relu_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_h { float16_t h[]; };
layout(std430, binding = 1) readonly buffer Buf_dh { float16_t dh[]; };
layout(std430, binding = 2) writeonly buffer Buf_dpre { float16_t dpre[]; };
layout(push_constant) uniform Push {
    uint n;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // dpre = dh where the ReLU output h is positive (pre-activation > 0), else 0.
    if (i >= p.n) return;
    dpre[i] = float(h[i]) > 0.0 ? dh[i] : float16_t(0.0);
}