#version 450
#extension GL_EXT_control_flow_attributes : enable

// embedding_rank: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_ids { uint ids[]; };
layout(std430, binding = 1) buffer Buf_rank { uint rank[]; };
layout(std430, binding = 2) writeonly buffer Buf_order { uint order[]; };
layout(push_constant) uniform Push {
    uint T;
    uint offset;
    uint c0;
    uint c1;
    uint first;
    uint last;
} p;
layout(local_size_x_id = 0) in;

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // The stable sort of the tokens by id, by counting (embedding_backward's sorted path): token t's
    // place is the number of tokens with a smaller id, plus those with its id before it. One thread per
    // token counts over the tokens c0 <= u < c1 (the runtime splits them into dispatches of at most
    // MAX_LOOP, adding into rank[t]); the last dispatch writes order[r] = id and order[T + r] = t.
    if (i >= p.T) return;
    const uint id = ids[i + p.offset];
    uint r = p.first != 0 ? 0u : rank[i];
    for (uint u = p.c0; u < p.c1; ++u) {
        const uint x = ids[u + p.offset];
        r += (x < id || (x == id && u < i)) ? 1u : 0u;
    }
    if (p.last != 0) { order[r] = id; order[p.T + r] = i; }
    else rank[i] = r;
}