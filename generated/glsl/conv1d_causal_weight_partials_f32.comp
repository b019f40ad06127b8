#version 450
#extension GL_EXT_control_flow_attributes : enable

// conv1d_causal_weight_partials: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) readonly buffer Buf_dy { float dy[]; };
layout(std430, binding = 2) writeonly buffer Buf_part { float part[]; };
layout(push_constant) uniform Push {
    uint T;
    uint C;
    uint K;
    uint period;
    uint torch_order;
    uint chunk;
    uint with_bias;
} p;
layout(local_size_x_id = 0) in;


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    // Stage 1 of dkernel (and dbias): part[g, c * K + j] = sum over the g-th chunk of tokens t of
    // dy[t, c] x[t - lag(j), c]; with_bias adds columns part[g, C * K + c] = sum over the chunk of dy[t, c].
    // Stage 2 (colsum over g) adds the chunks in order: deterministic, and no invocation loops over all of T.
    const uint CK = p.C * p.K, W = CK + (p.with_bias != 0 ? p.C : 0);
    const uint chunks = (p.T + p.chunk - 1) / p.chunk;
    if (i >= chunks * W) return;
    const uint g = i / W, col = i % W;
    const uint lo = g * p.chunk, hi = min(lo + p.chunk, p.T);
    float acc = 0.0;
    if (col >= CK) {
        const uint c = col - CK;
        for (uint t = lo; t < hi; ++t) acc += float(dy[t * p.C + c]);
    } else {
        const uint c = col / p.K, j = col % p.K;
        const uint lag = p.torch_order != 0 ? p.K - 1 - j : j;
        for (uint t = lo; t < hi; ++t)
            if (lag <= t % p.period) acc += float(dy[t * p.C + c]) * float(x[(t - lag) * p.C + c]);
    }
    part[i] = acc;
}