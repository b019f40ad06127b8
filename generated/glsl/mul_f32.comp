#version 450
#extension GL_EXT_control_flow_attributes : enable

// Elementwise mul over n elements: c = a mul b. WG threads, VEC elements each.
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint VEC = 1;
layout(std430, binding = 0) readonly buffer Buf_a { float a[]; };
layout(std430, binding = 1) readonly buffer Buf_b { float b[]; };
layout(std430, binding = 2) writeonly buffer Buf_c { float c[]; };
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
            c[i] = float(x * y);
        }
    }
}
