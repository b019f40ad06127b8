#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// embedding_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_ids { uint ids[]; };
layout(std430, binding = 1) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 2) buffer Buf_dtable { float dtable[]; };
layout(push_constant) uniform Push {
    uint T;
    uint D;
    uint V;
    uint transpose;
    uint offset;
    uint t0;
    uint t1;
    uint accumulate;
    uint cols;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // One thread per table element sums dy over the tokens t0 <= t < t1 with that id, in token order,
    // into dtable (added to it if `accumulate`). The runtime splits the tokens into dispatches of at
    // most MAX_LOOP (runtime.variants.loop_chunks), run in order: deterministic.
    // cols == 4 (runtime.variants.embedding_backward_cols: [V, D] with D % 4 == 0): one thread per four
    // neighbouring columns of one id, so each id comparison serves four sums (same order, same bits).
    if (p.cols == 4) {
        uint G = p.D / 4;
        if (i >= p.V * G) return;
        uint id = i / G, o = id * p.D + (i % G) * 4;
        vec4 s = vec4(0.0);
        for (uint t = p.t0; t < p.t1; ++t) {
            if (ids[t + p.offset] == id) {
                uint b = t * p.D + (i % G) * 4;
                s += vec4(float(dy[b]), float(dy[b + 1]), float(dy[b + 2]), float(dy[b + 3]));
            }
        }
        if (p.accumulate != 0) s = vec4(dtable[o], dtable[o + 1], dtable[o + 2], dtable[o + 3]) + s;
        dtable[o] = s.x; dtable[o + 1] = s.y; dtable[o + 2] = s.z; dtable[o + 3] = s.w;
        return;
    }
    if (i >= p.V * p.D) return;
    uint id = p.transpose != 0 ? i % p.V : i / p.D;
    uint d = p.transpose != 0 ? i / p.V : i % p.D;
    float s = 0.0;
    for (uint t = p.t0; t < p.t1; ++t)
        if (ids[t + p.offset] == id) s += float(dy[t * p.D + d]);
    dtable[i] = p.accumulate != 0 ? dtable[i] + s : s;
}