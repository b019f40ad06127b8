#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Elementwise add over n elements: c = a add b. WG threads, VEC elements each.
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint VEC = 1;
layout(std430, binding = 0) readonly buffer Buf_a { float16_t a[]; };
layout(std430, binding = 1) readonly buffer Buf_b { float16_t b[]; };
layout(std430, binding = 2) writeonly buffer Buf_c { float16_t c[]; };
layout(push_constant) uniform Push {
    uint n;
} p;
layout(local_size_x_id = 0) in;

void main() {
    uint base = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * (WG * VEC) + gl_LocalInvocationID.x;
    [[unroll]] for (uint v = 0; v < VEC; ++v) {
        uint i = base + v * WG;
        if (i < p.n) {
            float x = float(a[i]);
            float y = float(b[i]);
            c[i] = float16_t(x + y);
        }
    }
}
