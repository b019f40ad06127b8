#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// glu_backward: one thread per output element (WG threads a workgroup), fixed summation order.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) readonly buffer Buf_dy { float16_t dy[]; };
layout(std430, binding = 2) writeonly buffer Buf_dx { float16_t dx[]; };
layout(push_constant) uniform Push {
    uint rows;
    uint d;
    float limit;
} p;
layout(local_size_x_id = 0) in;
// Activations: the sigmoid and tanh arguments are clamped to +-15, as builderforce's kernels do
// (the derivatives silu_d and gelu_d use the same clamped arguments).
float sigmoid_c(float x) { return 1.0 / (1.0 + exp(-clamp(x, -15.0, 15.0))); }
float silu_f(float x) { return x * sigmoid_c(x); }
float silu_d(float x) { float s = sigmoid_c(x); return s * (1.0 + x * (1.0 - s)); }
const float GELU_C = 0.7978845608;
// GELU (tanh form) through 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): where tanh u is near -1 the tanh form
// loses the small 1 + tanh u to cancellation (2.6e-5 relative error at gelu'(x) ~ 1.6e-3, hypothesis found).
float gelu_u(float x) { return clamp(GELU_C * (x + 0.044715 * x * x * x), -15.0, 15.0); }
float gelu_f(float x) { return x / (1.0 + exp(-2.0 * gelu_u(x))); }
float gelu_d(float x) {
    float e = exp(-2.0 * gelu_u(x));
    float s = 1.0 / (1.0 + e);  // 0.5 (1 + t); 1 - s = e s and 1 - t^2 = 4 s (1 - s), both without cancellation
    return s * (1.0 + 2.0 * x * (e * s) * GELU_C * (1.0 + 3.0 * 0.044715 * x * x));
}


void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (1 * i >= p.rows * p.d) return;
    const uint r = (1 * i) / p.d, c0 = (1 * i) % p.d;
    [[unroll]] for (uint e = 0; e < 1; ++e) {
        const uint c = c0 + e, yi = 1 * i + e;
        // |act(gate) * up| > limit (strict, limit > 0) zeroes both gradients.
        uint gi = r * 2 * p.d + c, ui = gi + p.d;
        float g = float(x[gi]), u = float(x[ui]), dyv = float(dy[yi]);
        float a = silu_f(g), ad = silu_d(g);
        bool cut = p.limit > 0.0 && abs(a * u) > p.limit;
        dx[gi] = float16_t(cut ? 0.0 : dyv * ad * u);
        dx[ui] = float16_t(cut ? 0.0 : dyv * a);
    }
}