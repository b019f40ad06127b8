#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// One stage of a column sum, parallel over columns and row chunks: the thread for column c of
// chunk g (workgroup (x, g)) writes y[g, c] = sum of x[r, c] over the chunk's rows, in row order.
// The runtime repeats stages until one row is left (runtime.variants.colsum_plan): each thread loops at
// most `chunk` <= MAX_LOOP times. Fixed order: same inputs, same bits. colsum_cast: f32 rows in, the
// sums rounded once to T (the last stage of split-K into an f16 C: the S partials are added in f32).
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { float16_t y[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
    uint chunk;
} p;
layout(local_size_x_id = 0) in;

void main() {
    const uint c = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    const uint g = gl_WorkGroupID.y;
    if (c >= p.cols) return;
    const uint lo = g * p.chunk, hi = min(lo + p.chunk, p.rows);
    float s = 0.0;
    for (uint r = lo; r < hi; ++r) s += float(x[r * p.cols + c]);
    y[g * p.cols + c] = float16_t(s);
}
