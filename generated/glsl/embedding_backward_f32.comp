#version 450
#extension GL_EXT_control_flow_attributes : enable

// embedding_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_ids { uint ids[]; };
layout(std430, binding = 1) readonly buffer Buf_dy { float dy[]; };
layout(std430, binding = 2) writeonly buffer Buf_dtable { float dtable[]; };
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
    // One thread per table element sums dy over the tokens with that id, in token order (deterministic).
    if (i >= p.V * p.D) return;
    uint id = p.transpose != 0 ? i % p.V : i / p.D;
    uint d = p.transpose != 0 ? i / p.V : i % p.D;
    float s = 0.0;
    for (uint t = 0; t < p.T; ++t)
        if (ids[t + p.offset] == id) s += float(dy[t * p.D + d]);
    dtable[i] = s;
}