#version 450
#extension GL_EXT_control_flow_attributes : enable

// qmatmul on q4_1 blocks (20 bytes per 32 weights).
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint TM = 1;
layout(std430, binding = 0) readonly buffer Buf_x { vec4 x[]; };
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
        uint q[5];
        [[unroll]] for (uint i = 0; i < 5; i++) q[i] = w[base + i];
        float d = unpackHalf2x16(q[0] >> 0).x;
        float m = unpackHalf2x16(q[0] >> 16).x;
        [[unroll]] for (uint j = 0; j < 16; j++) {
            uint b = (q[(4 + j) >> 2] >> (((4 + j) & 3u) << 3)) & 0xffu;
            v[j] = float(b & 0xfu) * d + m;
            v[j + 16] = float(b >> 4) * d + m;
        }
    } else {
        uint q[6];
        [[unroll]] for (uint i = 0; i < 6; i++) q[i] = w[base + i];
        float d = unpackHalf2x16(q[0] >> 16).x;
        float m = unpackHalf2x16(q[1] >> 0).x;
        [[unroll]] for (uint j = 0; j < 16; j++) {
            uint b = (q[(6 + j) >> 2] >> (((6 + j) & 3u) << 3)) & 0xffu;
            v[j] = float(b & 0xfu) * d + m;
            v[j + 16] = float(b >> 4) * d + m;
        }
    }
}

// One weight: element k of the row starting at byte `row`.
float dequant_one(uint row, uint k) {
    uint o = row + (k / 32u) * 20u, j = k % 32u;
    float d = half_at(o);
    uint b = byte_at(o + 4u + (j & 15u));
    uint q = j < 16u ? (b & 0xfu) : (b >> 4);
    return float(q) * d + half_at(o + 2u);
}

// The words of the block starting at byte o (blocks and rows have even sizes: o is 2-aligned).
void block_words(uint o, out uint u[5]) {
    [[unroll]] for (uint i = 0; i < 5; i++) u[i] = w[(o >> 2) + i];
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
float block_term(uint o, const uint u[5], const vec4 xv[8], float sx) {
    const vec2 dm = unpackHalf2x16(u[0]);  // 20-byte blocks in rows of 4-byte multiples: never odd
    precise vec4 s = vec4(0.0);
    [[unroll]] for (uint i = 0; i < 4; i++) {
        const uint q = u[1 + i];  // bytes 4i..4i+3: low nibbles weights 4i.., high nibbles weights 16 + 4i..
        s += vec4(uvec4(q, q >> 8, q >> 16, q >> 24) & 15u) * xv[i];
        s += vec4(uvec4(q >> 4, q >> 12, q >> 20, q >> 28) & 15u) * xv[4 + i];
    }
    precise float r = dm.x * ((s.x + s.y) + (s.z + s.w)) + dm.y * sx;
    return r;
}

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    const uint nb = p.K / 32u, row_bytes = nb * 20u;
    const uint TN = 1u;  // qmatmul: one column a thread
    // workgroup g: rows (g / nblocks) TM.. of X, columns ((g % nblocks) WG + thread) TN ..: X's loads are the
    // same in every invocation of a workgroup (a CPU driver runs them once per SIMD group, not per lane)
    const uint gi = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x), nblocks = (p.N + WG * TN - 1u) / (WG * TN);
    if (gi >= nblocks * ((p.M + TM - 1u) / TM)) return;  // uniform per workgroup
    const uint m0 = (gi / nblocks) * TM, n0 = ((gi % nblocks) * WG + gl_LocalInvocationID.x) * TN;
    if (n0 >= p.N) return;
    float acc[TM][TN];
    uint row[TN];  // columns past N repeat the last, rows past M the last (neither stored)
    [[unroll]] for (uint t = 0; t < TN; t++) {
        row[t] = min(n0 + t, p.N - 1u) * row_bytes;
        [[unroll]] for (uint r = 0; r < TM; r++) acc[r][t] = 0.0;
    }
    uint u[5];
    vec4 xv[TM][8];
    float sx[TM];
    for (uint b = 0; b < nb; b++) {
        [[unroll]] for (uint r = 0; r < TM; r++) {
            const uint xo = (min(m0 + r, p.M - 1u) * p.K + b * 32u) / 4u;
            [[unroll]] for (uint i = 0; i < 8; i++) xv[r][i] = x[xo + i];
            sx[r] = x_sum(xv[r]);
        }
        [[unroll]] for (uint t = 0; t < TN; t++) {
            const uint o = row[t] + b * 20u;
            block_words(o, u);
            [[unroll]] for (uint r = 0; r < TM; r++) acc[r][t] += block_term(o, u, xv[r], sx[r]);
        }
    }
    [[unroll]] for (uint r = 0; r < TM; r++)
        [[unroll]] for (uint t = 0; t < TN; t++)
            if (m0 + r < p.M && n0 + t < p.N) y[(m0 + r) * p.N + n0 + t] = float(acc[r][t]);
}
