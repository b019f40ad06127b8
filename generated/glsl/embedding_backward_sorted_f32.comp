#version 450
#extension GL_EXT_control_flow_attributes : enable

// embedding_backward_sorted: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_order { uint order[]; };
layout(std430, binding = 1) readonly buffer Buf_dy { float dy[]; };
layout(std430, binding = 2) buffer Buf_dtable { float dtable[]; };
layout(push_constant) uniform Push {
    uint T;
    uint D;
    uint V;
    uint transpose;
    uint p0;
    uint p1;
    uint accumulate;
    uint cols;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // embedding_backward over the tokens sorted by id (order from embedding_rank: ids ascending, then
    // token indices, tokens in token order within an id): the thread of table element(s) of id v finds
    // v's run [lo, hi) of the sorted ids by binary search and sums dy over the part of it in
    // [p0, p1) (the runtime's ordered dispatches of at most MAX_LOOP places), in token order: the same
    // sums as the scanning kernel, T / (number of ids) times fewer loop iterations.
    uint G = p.cols == 4 ? p.D / 4 : p.D;
    if (i >= p.V * G) return;
    uint id, d;
    if (p.cols == 4) { id = i / G; d = (i % G) * 4; }
    else { id = p.transpose != 0 ? i % p.V : i / p.D; d = p.transpose != 0 ? i / p.V : i % p.D; }
    uint lo = 0, hi = p.T;  // lo = first place with order[place] >= id
    while (lo < hi) { uint mid = (lo + hi) / 2; if (order[mid] < id) lo = mid + 1; else hi = mid; }
    uint end = lo;
    hi = p.T;               // end = first place with order[place] > id
    while (end < hi) { uint mid = (end + hi) / 2; if (order[mid] <= id) end = mid + 1; else hi = mid; }
    const uint k0 = max(lo, p.p0), k1 = min(end, p.p1);
    if (p.cols == 4) {
        const uint o = id * p.D + d;
        vec4 s = vec4(0.0);
        for (uint k = k0; k < k1; ++k) {
            const uint b = order[p.T + k] * p.D + d;
            s += vec4(float(dy[b]), float(dy[b + 1]), float(dy[b + 2]), float(dy[b + 3]));
        }
        if (p.accumulate != 0) s = vec4(dtable[o], dtable[o + 1], dtable[o + 2], dtable[o + 3]) + s;
        dtable[o] = s.x; dtable[o + 1] = s.y; dtable[o + 2] = s.z; dtable[o + 3] = s.w;
        return;
    }
    float s = 0.0;
    for (uint k = k0; k < k1; ++k) s += float(dy[order[p.T + k] * p.D + d]);
    dtable[i] = p.accumulate != 0 ? dtable[i] + s : s;
}