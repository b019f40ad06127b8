#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Elementwise scale over n elements. WG threads, VEC elements each.
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint VEC = 1;
layout(std430, binding = 0) readonly buffer Buf_x { float16_t x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { float16_t y[]; };
layout(push_constant) uniform Push {
    uint n;
    float alpha;
} p;
layout(local_size_x_id = 0) in;

void main() {
    uint base = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * (WG * VEC) + gl_LocalInvocationID.x;
    [[unroll]] for (uint v = 0; v < VEC; ++v) {
        uint i = base + v * WG;
        if (i < p.n) {
            y[i] = float16_t(p.alpha * float(x[i]));
        }
    }
}
