#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Batched strided matmul: C[z] = alpha * A[z] . B[z] + beta * C[z], f32 accumulation, over a two-level
// batch z = z1 * Z2 + z2 (z1 outer, z2 inner; B's inner index divided by bdiv, for grouped-query heads):
// A[m,k] = a[aoff + z1*sao + z2*sab + m*sam + k*sak], B[k,n] = b[boff + z1*sbo + (z2/bdiv)*sbb + k*sbk + n*sbn],
// C[m,n] = c[coff + z1*sco + z2*scb + m*scm + n*scn].
// Strides express transpose_a / transpose_b, so one kernel serves the forward and both backward products.
layout(constant_id = 0) const uint WG_X = 16;
layout(constant_id = 1) const uint WG_Y = 16;
layout(constant_id = 2) const uint BM = 64;
layout(constant_id = 3) const uint BN = 64;
layout(constant_id = 4) const uint BK = 16;
layout(std430, binding = 0) readonly buffer Buf_a { float16_t a[]; };
layout(std430, binding = 1) readonly buffer Buf_b { float16_t b[]; };
layout(std430, binding = 2) buffer Buf_c { float16_t c[]; };
layout(push_constant) uniform Push {
    uint M;
    uint N;
    uint K;
    uint sam;
    uint sak;
    uint sbk;
    uint sbn;
    uint scm;
    uint scn;
    uint sab;
    uint sbb;
    uint scb;
    uint bdiv;
    uint aoff;
    uint boff;
    uint coff;
    float alpha;
    float beta;
    uint Z2;
    uint sao;
    uint sbo;
    uint sco;
    uint tri;
    uint kd;
} p;
layout(local_size_x_id = 0, local_size_y_id = 1) in;

// v4: for CPU devices (lavapipe). No shared memory or barriers; each thread computes an R x 4CV block
// from 16-byte loads: A k-contiguous (sak == 1) or m-contiguous (sam == 1, M % 4 == 0: four loads
// along m transposed in registers), B n-contiguous (sbn == 1) or k-contiguous (sbk == 1);
// K % 4 == N % 4 == 0 and 4-aligned offsets and strides (the selector guarantees it). Fewer, wider
// memory operations suit SIMD-across-invocations CPU drivers.
layout(std430, binding = 0) readonly buffer Buf_a4 { uvec2 a4[]; };
layout(std430, binding = 1) readonly buffer Buf_b4 { uvec2 b4[]; };
vec4 ld4a(uint i) { uvec2 w = a4[i]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
vec4 ld4b(uint i) { uvec2 w = b4[i]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }

// Each thread: R rows x (4 CV) columns, R = BM / WG_Y (a multiple of 4 where A is m-contiguous),
// CV = BN / (4 WG_X).
const uint R = BM / WG_Y, CV = BN / (4 * WG_X);

void main() {
    const uint m0 = (gl_WorkGroupID.y * WG_Y + gl_LocalInvocationID.y) * R;
    const uint n0 = (gl_WorkGroupID.x * WG_X + gl_LocalInvocationID.x) * 4 * CV;
    if (m0 >= p.M || n0 >= p.N) return;
    const uint z = gl_WorkGroupID.z;
    const uint z1_ = z / p.Z2, z2_ = z % p.Z2;
    const uint aoff = p.aoff + z1_ * p.sao + z2_ * p.sab;
    const uint boff = p.boff + z1_ * p.sbo + (z2_ / p.bdiv) * p.sbb;
    const uint coff = p.coff + z1_ * p.sco + z2_ * p.scb;
    uint arow[R];
    [[unroll]] for (uint i = 0; i < R; ++i) arow[i] = aoff + min(m0 + i, p.M - 1) * p.sam;
    uint ncol = min(n0, p.N - 4 * CV);  // columns past N are computed on clamped data, not stored
    vec4 acc[R][CV];
    [[unroll]] for (uint i = 0; i < R; ++i) [[unroll]] for (uint v = 0; v < CV; ++v) acc[i][v] = vec4(0.0);
    const uint nk_ = (p.K + 4 - 1) / 4;
    uint kb = 0u, ke = nk_;
    if (p.tri == 1u) ke = m0 + R > p.kd ? min(nk_, (m0 + R - p.kd + 4 - 1) / 4) : 0u;
    if (p.tri == 2u) kb = m0 > p.kd ? min((m0 - p.kd) / 4, nk_) : 0u;
    if (p.tri == 3u && n0 >= m0 + R) ke = 0u;
    if (p.sbn == 1) {
        for (uint k = 4 * kb; k < 4 * ke; k += 4) {
            vec4 a[R];
            if (p.sak == 1) {
                [[unroll]] for (uint i = 0; i < R; ++i) a[i] = ld4a((arow[i] + k) / 4);
            } else {  // sam == 1: rows g..g+3 of one k in one load; M % 4 == 0, so a group is all in or all out
                [[unroll]] for (uint g = 0; g < R; g += 4) {
                    const uint r = aoff + min(m0 + g, p.M - 4) + k * p.sak;
                    vec4 c0 = ld4a(r / 4), c1 = ld4a((r + p.sak) / 4), c2 = ld4a((r + 2 * p.sak) / 4),
                         c3 = ld4a((r + 3 * p.sak) / 4);
                    a[g] = vec4(c0.x, c1.x, c2.x, c3.x);
                    a[g + 1] = vec4(c0.y, c1.y, c2.y, c3.y);
                    a[g + 2] = vec4(c0.z, c1.z, c2.z, c3.z);
                    a[g + 3] = vec4(c0.w, c1.w, c2.w, c3.w);
                }
            }
            vec4 bk[4][CV];
            [[unroll]] for (uint kk = 0; kk < 4; ++kk)
                [[unroll]] for (uint v = 0; v < CV; ++v) bk[kk][v] = ld4b((boff + (k + kk) * p.sbk + ncol + 4 * v) / 4);
            [[unroll]] for (uint i = 0; i < R; ++i)
                [[unroll]] for (uint v = 0; v < CV; ++v)
                    acc[i][v] += a[i].x * bk[0][v] + a[i].y * bk[1][v] + a[i].z * bk[2][v] + a[i].w * bk[3][v];
        }
    } else {
        for (uint k = 4 * kb; k < 4 * ke; k += 4) {
            vec4 a[R];
            if (p.sak == 1) {
                [[unroll]] for (uint i = 0; i < R; ++i) a[i] = ld4a((arow[i] + k) / 4);
            } else {  // sam == 1: rows g..g+3 of one k in one load; M % 4 == 0, so a group is all in or all out
                [[unroll]] for (uint g = 0; g < R; g += 4) {
                    const uint r = aoff + min(m0 + g, p.M - 4) + k * p.sak;
                    vec4 c0 = ld4a(r / 4), c1 = ld4a((r + p.sak) / 4), c2 = ld4a((r + 2 * p.sak) / 4),
                         c3 = ld4a((r + 3 * p.sak) / 4);
                    a[g] = vec4(c0.x, c1.x, c2.x, c3.x);
                    a[g + 1] = vec4(c0.y, c1.y, c2.y, c3.y);
                    a[g + 2] = vec4(c0.z, c1.z, c2.z, c3.z);
                    a[g + 3] = vec4(c0.w, c1.w, c2.w, c3.w);
                }
            }
            vec4 bt[4 * CV];
            [[unroll]] for (uint j = 0; j < 4 * CV; ++j) bt[j] = ld4b((boff + min(ncol + j, p.N - 1) * p.sbn + k) / 4);
            [[unroll]] for (uint i = 0; i < R; ++i)
                [[unroll]] for (uint v = 0; v < CV; ++v)
                    acc[i][v] += vec4(dot(a[i], bt[4 * v]), dot(a[i], bt[4 * v + 1]), dot(a[i], bt[4 * v + 2]), dot(a[i], bt[4 * v + 3]));
        }
    }
    [[unroll]] for (uint i = 0; i < R; ++i) {
        if (m0 + i >= p.M) break;
        [[unroll]] for (uint j = 0; j < 4 * CV; ++j) {
            uint n = ncol + j;
            if (n < n0 || n >= p.N) continue;
            uint ci = coff + (m0 + i) * p.scm + n * p.scn;
            float r = p.alpha * acc[i][j / 4][j % 4];
            if (p.beta != 0.0) r += p.beta * float(c[ci]);
            c[ci] = float16_t(r);
        }
    }
}
