#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Row-wise cross_entropy: one workgroup of WG threads per row of `cols` elements; f32 arithmetic and
// reductions in a fixed order (deterministic).
layout(constant_id = 0) const uint WG = 128;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) readonly buffer Buf_target { uint target[]; };
layout(std430, binding = 2) writeonly buffer Buf_loss { float loss[]; };
layout(std430, binding = 3) writeonly buffer Buf_valid { float valid[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
} p;
layout(local_size_x_id = 0) in;
shared float red_wg_sum[WG];
float wg_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_sum[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_sum[t]; float b = red_wg_sum[t + s]; red_wg_sum[t] = a + b; }
        barrier();
    }
    float r = red_wg_sum[0];
    barrier();
    return r;
}
shared float red_wg_max[WG];
float wg_max(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_max[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_max[t]; float b = red_wg_max[t + s]; red_wg_max[t] = max(a, b); }
        barrier();
    }
    float r = red_wg_max[0];
    barrier();
    return r;
}

void main() {
    const uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    if (row >= p.rows) return;  // uniform per workgroup
    const uint t = gl_LocalInvocationID.x;
    const uint base = row * p.cols;
    // loss = logsumexp(x) - x[target]; a target >= cols is ignored (loss 0, valid 0).
    const uint tg = target[row];
    const uint PK = 8;
    float xr[PK];
    float m = -3.402823466e38;
    [[unroll]] for (uint q = 0; q < PK; ++q) {
        const uint j = t + q * WG;
        xr[q] = 0.0;
        if (j < p.cols) { xr[q] = float(x[base + j]); m = max(m, xr[q]); }
    }
    for (uint j = t + PK * WG; j < p.cols; j += WG) m = max(m, float(x[base + j]));
    m = wg_max(m);
    float s = 0.0;
    [[unroll]] for (uint q = 0; q < PK; ++q) {
        const uint j = t + q * WG;
        if (j < p.cols) { xr[q] = exp(xr[q] - m); s += xr[q]; }
    }
    for (uint j = t + PK * WG; j < p.cols; j += WG) s += exp(float(x[base + j]) - m);
    s = wg_sum(s);
    if (t == 0) {
        bool ok = tg < p.cols;
        loss[row] = ok ? (log(s) + m - float(x[base + tg])) : 0.0;
        valid[row] = ok ? 1.0 : 0.0;
    }
}