#version 450
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_ballot : require
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// rms_norm_backward: one workgroup of WG threads per block of rpw consecutive rows, each row in turn;
// f32 arithmetic and reductions in a fixed order (deterministic).
//   dx = r (w dy) - x r^3 mean(w dy x)
//   part[block] = sum over the block's rows, in row order, of dy x r (part's rows summed are dw).
// A thread keeps the sums of its first PK columns (t, t + WG, ...) in registers; columns past PK * WG
// (rows wider than the runtime plans blocks for) are summed in part itself, by the same thread.
layout(constant_id = 0) const uint WG = 128;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) readonly buffer Buf_w { float w[]; };
layout(std430, binding = 2) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 3) readonly buffer Buf_rstd { float rstd[]; };
layout(std430, binding = 4) writeonly buffer Buf_dx { float16_t dx[]; };
layout(std430, binding = 5) buffer Buf_part { float part[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
    uint rpw;
} p;
layout(local_size_x_id = 0) in;
float wg_sum_op(float a, float b) { return a + b; }
float wg_sum(float v) {
    const float s1_0 = subgroupBroadcast(v, 0);
    const float s1_1 = subgroupBroadcast(v, 1);
    const float s1_2 = subgroupBroadcast(v, 2);
    const float s1_3 = subgroupBroadcast(v, 3);
    const float s1_4 = subgroupBroadcast(v, 4);
    const float s1_5 = subgroupBroadcast(v, 5);
    const float s1_6 = subgroupBroadcast(v, 6);
    const float s1_7 = subgroupBroadcast(v, 7);
    const float s2_0 = wg_sum_op(s1_0, s1_4);
    const float s2_1 = wg_sum_op(s1_1, s1_5);
    const float s2_2 = wg_sum_op(s1_2, s1_6);
    const float s2_3 = wg_sum_op(s1_3, s1_7);
    const float s4_0 = wg_sum_op(s2_0, s2_2);
    const float s4_1 = wg_sum_op(s2_1, s2_3);
    const float s8_0 = wg_sum_op(s4_0, s4_1);
    return s8_0;
}
const uint PK = 8;

void main() {
    const uint blk = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x), row0 = blk * p.rpw;
    if (row0 >= p.rows) return;  // uniform per workgroup
    const uint t = gl_LocalInvocationID.x, row1 = min(row0 + p.rpw, p.rows), pb = blk * p.cols;
    float acc[PK];
    [[unroll]] for (uint k = 0; k < PK; ++k) acc[k] = 0.0;
    for (uint row = row0; row < row1; ++row) {
        const uint base = row * p.cols;
        const float r = rstd[row];
        float s = 0.0;
        // the first PK columns' x, dy and w are loaded once and kept in registers for the second pass
        float xk[PK], gk[PK], wk[PK];
        [[unroll]] for (uint k = 0; k < PK; ++k) {
            const uint j = t + k * WG;
            xk[k] = 0.0; gk[k] = 0.0; wk[k] = 0.0;
            if (j < p.cols) {
                xk[k] = float(x[base + j]); gk[k] = float(dy[base + j]); wk[k] = w[j];
                s += wk[k] * gk[k] * xk[k];
            }
        }
        for (uint j = t + PK * WG; j < p.cols; j += WG) s += w[j] * float(dy[base + j]) * float(x[base + j]);
        s = wg_sum(s) / float(p.cols);
        [[unroll]] for (uint k = 0; k < PK; ++k) {
            const uint j = t + k * WG;
            if (j < p.cols) {
                const float xv = xk[k], g = gk[k];
                dx[base + j] = float16_t(r * wk[k] * g - xv * r * r * r * s);
                acc[k] += g * xv * r;
            }
        }
        for (uint j = t + PK * WG; j < p.cols; j += WG) {
            float xv = float(x[base + j]), g = float(dy[base + j]);
            dx[base + j] = float16_t(r * w[j] * g - xv * r * r * r * s);
            part[pb + j] = (row == row0 ? 0.0 : part[pb + j]) + g * xv * r;
        }
    }
    [[unroll]] for (uint k = 0; k < PK; ++k) {
        const uint j = t + k * WG;
        if (j < p.cols) part[pb + j] = acc[k];
    }
}
