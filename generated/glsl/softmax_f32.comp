#version 450
#extension GL_EXT_control_flow_attributes : enable

// Row-wise softmax: ROWS rows a workgroup, TPR = WG / ROWS consecutive threads a row (one workgroup a
// row when ROWS is 1; short rows take more, so fewer threads idle and each reduction has fewer steps);
// f32 arithmetic and reductions in a fixed order (deterministic for a given variant).
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 1;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { float y[]; };
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
shared float red_row_max[WG];
float row_max(float v) {
    uint t = gl_LocalInvocationID.x;
    red_row_max[t] = v;
    barrier();
    for (uint s = TPR / 2; s > 0; s >>= 1) {
        if (t % TPR < s) { float a = red_row_max[t]; float b = red_row_max[t + s]; red_row_max[t] = max(a, b); }
        barrier();
    }
    float r = red_row_max[t - t % TPR];
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
    float m = -3.402823466e38;
    for (uint j = t; j < last; j += TPR) m = max(m, float(x[base + j]));
    m = row_max(m);
    float s = 0.0;
    for (uint j = t; j < last; j += TPR) s += exp(float(x[base + j]) - m);
    s = row_sum(s);
    const float inv = 1.0 / s;
    for (uint j = t; j < cols; j += TPR) y[base + j] = float(j < last ? exp(float(x[base + j]) - m) * inv : 0.0);
}
