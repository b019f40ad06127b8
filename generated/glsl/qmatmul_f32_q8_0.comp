#version 450
#extension GL_EXT_control_flow_attributes : enable

// qmatmul on q8_0 blocks (34 bytes per 32 weights).
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint TM = 1;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) readonly buffer Buf_w { uint w[]; };
layout(std430, binding = 2) writeonly buffer Buf_y { float y[]; };
layout(push_constant) uniform Push {
    uint M;
    uint N;
    uint K;
} p;
layout(local_size_x_id = 0) in;

uint byte_at(uint o) { return (w[o >> 2] >> ((o & 3u) << 3)) & 0xffu; }
float half_at(uint o) { return unpackHalf2x16(byte_at(o) | (byte_at(o + 1u) << 8)).x; }

// The 32 weights of the block starting at byte o (blocks and rows have even sizes: o is 2-aligned).
void dequant_block(uint o, out float v[32]) {
    const uint base = o >> 2;
    if ((o & 2u) == 0u) {
        uint q[9];
        [[unroll]] for (uint i = 0; i < 9; i++) q[i] = w[base + i];
        float d = unpackHalf2x16(q[0] >> 0).x;
        [[unroll]] for (uint j = 0; j < 32; j++) {
            uint b = (q[(2 + j) >> 2] >> (((2 + j) & 3u) << 3)) & 0xffu;
            v[j] = d * float(int(b) - int((b & 0x80u) << 1));
        }
    } else {
        uint q[9];
        [[unroll]] for (uint i = 0; i < 9; i++) q[i] = w[base + i];
        float d = unpackHalf2x16(q[0] >> 16).x;
        [[unroll]] for (uint j = 0; j < 32; j++) {
            uint b = (q[(4 + j) >> 2] >> (((4 + j) & 3u) << 3)) & 0xffu;
            v[j] = d * float(int(b) - int((b & 0x80u) << 1));
        }
    }
}

// One weight: element k of the row starting at byte `row`.
float dequant_one(uint row, uint k) {
    uint o = row + (k / 32u) * 34u, j = k % 32u;
    float d = half_at(o);
    uint b = byte_at(o + 2u + j);
    return d * float(int(b) - int((b & 0x80u) << 1));
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    const uint nb = p.K / 32u, row_bytes = nb * 34u;
    // workgroup g: columns (g % nblocks) WG + thread, rows (g / nblocks) TM..: m0 is the same in every
    // invocation of a workgroup, so X's loads are too (a CPU driver loads each once, not once a lane)
    const uint gi = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x), nblocks = (p.N + WG - 1u) / WG;
    if (gi >= nblocks * ((p.M + TM - 1u) / TM)) return;  // uniform per workgroup
    const uint n = (gi % nblocks) * WG + gl_LocalInvocationID.x, m0 = (gi / nblocks) * TM;
    if (n >= p.N) return;
    float acc[TM];
    [[unroll]] for (uint t = 0; t < TM; t++) acc[t] = 0.0;
    float v[32];
    for (uint b = 0; b < nb; b++) {
        dequant_block(n * row_bytes + b * 34u, v);
        [[unroll]] for (uint t = 0; t < TM; t++) {
            uint m = min(m0 + t, p.M - 1u);  // rows past M repeat the last (their sums are not stored)
            uint xo = m * p.K + b * 32u;
            float s = 0.0;
            [[unroll]] for (uint j = 0; j < 32; j++) s += float(x[xo + j]) * v[j];
            acc[t] += s;
        }
    }
    [[unroll]] for (uint t = 0; t < TM; t++)
        if (m0 + t < p.M) y[(m0 + t) * p.N + n] = float(acc[t]);
}
