#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Row-wise rms_norm_backward: one workgroup of WG threads per row of `cols` elements; f32 arithmetic and
// reductions in a fixed order (deterministic).
layout(constant_id = 0) const uint WG = 128;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) readonly buffer Buf_w { float w[]; };
layout(std430, binding = 2) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 3) readonly buffer Buf_rstd { float rstd[]; };
layout(std430, binding = 4) writeonly buffer Buf_dx { float16_t dx[]; };
layout(std430, binding = 5) writeonly buffer Buf_part { float part[]; };
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
    // dx = r (w dy) - x r^3 mean(w dy x); part = dy x r (summed over rows it is dw).
    const float r = rstd[row];
    float s = 0.0;
    for (uint j = t; j < p.cols; j += WG) s += w[j] * float(dy[base + j]) * float(x[base + j]);
    s = wg_sum(s) / float(p.cols);
    for (uint j = t; j < p.cols; j += WG) {
        float xv = float(x[base + j]), g = float(dy[base + j]);
        dx[base + j] = float16_t(r * w[j] * g - xv * r * r * r * s);
        part[base + j] = g * xv * r;
    }
}