#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// kv_write: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) readonly buffer Buf_hyper { uint hyper[]; };
layout(std430, binding = 2) writeonly buffer Buf_cache { float16_t cache[]; };
layout(push_constant) uniform Push {
    uint S;
    uint row;
    uint Q;
    uint L;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // Row `tok` of x (S tokens, Q an item) into cache row (slot * L + position + tok % Q) of its item.
    if (i >= p.S * p.row) return;
    uint tok = i / p.row, c = i % p.row;
    uint dst = (hyper[8 + 4 * (tok / p.Q) + 1] * p.L + (hyper[8 + 4 * (tok / p.Q)] + tok % p.Q)) * p.row + c;
    cache[dst] = x[i];
}