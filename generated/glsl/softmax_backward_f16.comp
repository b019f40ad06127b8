#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Row-wise softmax_backward: ROWS rows a workgroup, TPR = WG / ROWS consecutive threads a row (one workgroup a
// row when ROWS is 1; short rows take more, so fewer threads idle and each reduction has fewer steps);
// f32 arithmetic and reductions in a fixed order (deterministic for a given variant).
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 1;
layout(std430, binding = 0) readonly buffer Buf_y { float16_t y[]; };
layout(std430, binding = 1) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 2) writeonly buffer Buf_dx { float16_t dx[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
    uint causal;
    uint seq;
} p;
layout(local_size_x_id = 0) in;
const uint TPR = WG / ROWS;
shared float red_row_sum[WG];
float row_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    red_row_sum[t] = v;
    barrier();
    for (uint s = TPR / 2; s > 0; s >>= 1) {
        if (t % TPR < s) { float a = red_row_sum[t]; float b = red_row_sum[t + s]; red_row_sum[t] = a + b; }
        barrier();
    }
    float r = red_row_sum[t - t % TPR];
    barrier();
    return r;
}

void main() {
    const uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * ROWS + gl_LocalInvocationID.x / TPR;
    const uint t = gl_LocalInvocationID.x % TPR;
    // A row past the end still takes part in its workgroup's barriers, with no element of its own.
    const uint cols = row < p.rows ? p.cols : 0;
    const uint base = row * p.cols;
    // Causal: row r is query position i = r % seq of a sequence with `cols` keys ending at i's own
    // position, so key j is visible iff j <= i + (cols - seq). Masked entries are exactly 0 (the backward
    // reads none of them: y is 0 there, so dx is).
    const uint last = p.causal != 0 ? min(cols, (row % p.seq) + (p.cols - p.seq) + 1) : cols;
    float s = 0.0;
    for (uint j = t; j < last; j += TPR) s += float(y[base + j]) * float(dy[base + j]);
    s = row_sum(s);
    for (uint j = t; j < cols; j += TPR) dx[base + j] = float16_t(j < last ? float(y[base + j]) * (float(dy[base + j]) - s) : 0.0);
}
