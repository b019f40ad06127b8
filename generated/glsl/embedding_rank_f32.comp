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
    uint lanes;
} p;
layout(local_size_x_id = 0) in;
shared uint cnt[WG];

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // The stable sort of the tokens by id, by counting (embedding_backward's sorted path): token t's
    // place is the number of tokens with a smaller id, plus those with its id before it. `lanes`
    // consecutive threads (a power of two dividing WG) count for one token, lane l over the tokens
    // u = c0 + l, c0 + l + lanes, ... < c1 (the runtime splits them into dispatches of at most MAX_LOOP
    // steps a lane, adding into rank[t]), and a shared-memory sum adds the lanes' counts (integers: the
    // same whatever the order); the last dispatch writes order[r] = id and order[T + r] = t.
    const uint tok = i / p.lanes, lane = i % p.lanes, l = gl_LocalInvocationID.x;
    uint r = 0u;
    if (tok < p.T) {
        const uint id = ids[tok + p.offset];
        for (uint u = p.c0 + lane; u < p.c1; u += p.lanes) {
            const uint x = ids[u + p.offset];
            r += (x < id || (x == id && u < tok)) ? 1u : 0u;
        }
    }
    cnt[l] = r;
    barrier();
    for (uint s = p.lanes / 2; s > 0; s >>= 1) {  // every thread reaches each barrier (p.lanes is uniform)
        if (lane < s) cnt[l] += cnt[l + s];
        barrier();
    }
    if (tok >= p.T || lane != 0) return;
    r = cnt[l] + (p.first != 0 ? 0u : rank[tok]);
    if (p.last != 0) { order[r] = ids[tok + p.offset]; order[p.T + r] = tok; }
    else rank[tok] = r;
}