#version 450
#extension GL_EXT_control_flow_attributes : enable

// qmatmul_dx on q8_0 blocks (34 bytes per 32 weights).
layout(constant_id = 0) const uint WG = 64;
layout(std430, binding = 0) readonly buffer Buf_dy { float dy[]; };
layout(std430, binding = 1) readonly buffer Buf_w { uint w[]; };
layout(std430, binding = 2) buffer Buf_dx { float dx[]; };
layout(push_constant) uniform Push {
    uint M;
    uint N;
    uint K;
    uint n0;
    uint n1;
    float beta;
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

// The words of the block starting at byte o (blocks and rows have even sizes: o is 2-aligned).
void block_words(uint o, out uint u[9]) {
    [[unroll]] for (uint i = 0; i < 9; i++) u[i] = w[(o >> 2) + i];
}

// The sum of one block's 32 x values (xv: the block's x as 8 vec4), in a fixed order.
float x_sum(const vec4 xv[8]) {
    precise vec4 s = ((xv[0] + xv[1]) + (xv[2] + xv[3])) + ((xv[4] + xv[5]) + (xv[6] + xv[7]));
    precise float r = (s.x + s.y) + (s.z + s.w);
    return r;
}

// One block's term of an output: sum_j x_j w_j for the block at byte o (its words u) and its x (xv, sum sx),
// as d sum_j x_j q_j + m sum_j x_j (Q4_1), d (sum_j x_j q_j - 8 sum_j x_j) (Q4_0), d sum_j x_j q_j (Q8_0).
// `precise` (no fused multiply-adds): a compiler must not contract it differently where it is inlined.
float block_term(uint o, const uint u[9], const vec4 xv[8], float sx) {
    const bool odd = (o & 2u) != 0u;  // the block starts 2 bytes into its first word
    const float d = unpackHalf2x16(odd ? (u[0] >> 16) : u[0]).x;
    precise vec4 s = vec4(0.0);
    [[unroll]] for (uint i = 0; i < 8; i++) {
        const uint q = odd ? u[1 + i] : ((u[i] >> 16) | (u[i + 1] << 16));
        s += vec4(ivec4(q << 24, q << 16, q << 8, q) >> 24) * xv[i];  // four int8, sign-extended
    }
    precise float r = d * ((s.x + s.y) + (s.z + s.w));
    return r;
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    const uint nb = p.K / 32u, row_bytes = nb * 34u;
    if (i >= p.M * nb) return;
    const uint m = i / nb, b = i % nb;
    float acc[32], v[32];
    [[unroll]] for (uint j = 0; j < 32; j++) acc[j] = 0.0;
    for (uint n = p.n0; n < p.n1; n++) {  // a chunk of W's rows (lavapipe's loop cap: ops/quant.py)
        float g = float(dy[m * p.N + n]);
        dequant_block(n * row_bytes + b * 34u, v);
        [[unroll]] for (uint j = 0; j < 32; j++) acc[j] += g * v[j];
    }
    const uint o = m * p.K + b * 32u;
    if (p.beta != 0.0) {  // a later chunk: add into the earlier chunks' sums
        [[unroll]] for (uint j = 0; j < 32; j++) acc[j] += float(dx[o + j]);
    }
    [[unroll]] for (uint j = 0; j < 32; j++) dx[o + j] = float(acc[j]);
}
