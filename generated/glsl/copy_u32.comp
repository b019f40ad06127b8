#version 450
#extension GL_EXT_control_flow_attributes : enable

// Elementwise copy over n elements. WG threads, VEC elements each.
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint VEC = 1;
layout(std430, binding = 0) readonly buffer Buf_x { uint x[]; };
layout(std430, binding = 1) writeonly buffer Buf_y { uint y[]; };
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
            y[i] = x[i];
        }
    }
}
