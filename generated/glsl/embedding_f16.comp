#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// embedding: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_ids { uint ids[]; };
layout(std430, binding = 1) readonly buffer Buf_table { float16_t table[]; };
layout(std430, binding = 2) writeonly buffer Buf_y { float16_t y[]; };
layout(push_constant) uniform Push {
    uint T;
    uint D;
    uint V;
    uint transpose;
    uint offset;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // y[t, d] = table[id, d] (table [V, D]) or table[d, id] (transpose: [D, V]); id = ids[t + offset]; id >= V gives 0.
    if (i >= p.T * p.D) return;
    uint t = i / p.D, d = i % p.D, id = ids[t + p.offset];
    y[i] = id < p.V ? table[p.transpose != 0 ? d * p.V + id : id * p.D + d] : float16_t(0.0);
}