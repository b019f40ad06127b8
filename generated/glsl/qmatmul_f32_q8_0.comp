#version 450
#extension GL_EXT_control_flow_attributes : enable

// qmatmul on q8_0 blocks (34 bytes per 32 weights).
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
    uint u[9];
    vec4 xv[TM][8];
    float sx[TM];
    for (uint b = 0; b < nb; b++) {
        [[unroll]] for (uint r = 0; r < TM; r++) {
            const uint xo = (min(m0 + r, p.M - 1u) * p.K + b * 32u) / 4u;
            [[unroll]] for (uint i = 0; i < 8; i++) xv[r][i] = x[xo + i];
            sx[r] = x_sum(xv[r]);
        }
        [[unroll]] for (uint t = 0; t < TN; t++) {
            const uint o = row[t] + b * 34u;
            block_words(o, u);
            [[unroll]] for (uint r = 0; r < TM; r++) acc[r][t] += block_term(o, u, xv[r], sx[r]);
        }
    }
    [[unroll]] for (uint r = 0; r < TM; r++)
        [[unroll]] for (uint t = 0; t < TN; t++)
            if (m0 + r < p.M && n0 + t < p.N) y[(m0 + r) * p.N + n0 + t] = float(acc[r][t]);
}
