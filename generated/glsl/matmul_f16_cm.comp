#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// Batched strided matmul: C[z] = alpha * A[z] . B[z / bdiv] + beta * C[z], f32 accumulation.
// A[m,k] = a[aoff + z*sab + m*sam + k*sak], B[k,n] = b[boff + (z/bdiv)*sbb + k*sbk + n*sbn],
// C[m,n] = c[coff + z*scb + m*scm + n*scn].
// Strides express transpose_a / transpose_b, so one kernel serves the forward and both backward products.
// A WG_X x WG_Y workgroup computes a BM x BN tile; each thread holds (BM/WG_Y) x (BN/WG_X) outputs,
// strided by the workgroup size so shared-memory reads are conflict-free and stores coalesce.
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
} p;
layout(local_size_x_id = 0, local_size_y_id = 1) in;

// cm: cooperative matrices (tensor cores) for the aligned case only: M % BM == N % BN == K % BK == 0,
// scn == 1, beta == 0, sak == 1, sbn == 1 or sbk == 1, offsets and row strides multiples of 8 halves
// (the runtime's selector guarantees it). A workgroup of 4 subgroups of 32
// computes a BM x BN tile, each subgroup a (BM/2) x (BN/2) quadrant of 16x16x16 f16 products with
// f32 accumulators; operands are staged through shared memory (rows padded against bank conflicts).
const uint NT = WG_X * WG_Y;
const uint WM = BM / 2, WN = BN / 2, FM = WM / 16, FN = WN / 16;
const uint PA = BK + 8, PB = BN + 8;
shared float16_t As[BM * PA];
shared float16_t Bs[BK * PB];
// The same a and b buffers seen as 16-byte words (descriptor aliasing) for vector loads.
layout(std430, binding = 0) readonly buffer Buf_a4 { uvec4 a4[]; };
layout(std430, binding = 1) readonly buffer Buf_b4 { uvec4 b4[]; };

void store8(uint o, uint step, uvec4 w, bool to_a) {
    f16vec2 h[4] = f16vec2[4](unpackFloat2x16(w.x), unpackFloat2x16(w.y), unpackFloat2x16(w.z), unpackFloat2x16(w.w));
    [[unroll]] for (uint e = 0; e < 4; ++e) {
        if (to_a) { As[o + (2 * e) * step] = h[e].x; As[o + (2 * e + 1) * step] = h[e].y; }
        else { Bs[o + (2 * e) * step] = h[e].x; Bs[o + (2 * e + 1) * step] = h[e].y; }
    }
}

void main() {
    const uint tid = gl_LocalInvocationID.y * WG_X + gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID;
    const uint wm0 = (sg / 2) * WM, wn0 = (sg % 2) * WN;
    const uint m0 = gl_WorkGroupID.y * BM;
    const uint n0 = gl_WorkGroupID.x * BN;
    const uint z = gl_WorkGroupID.z;
    const uint aoff = p.aoff + z * p.sab;
    const uint boff = p.boff + (z / p.bdiv) * p.sbb;
    const uint coff = p.coff + z * p.scb;

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[FM][FN];
    [[unroll]] for (uint i = 0; i < FM; ++i)
        [[unroll]] for (uint j = 0; j < FN; ++j)
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        // 16-byte loads (8 halves): A is k-contiguous (sak == 1); B is n- or k-contiguous.
        for (uint idx = tid; idx < BM * BK / 8; idx += NT) {
            uint mm = idx / (BK / 8), kk = (idx % (BK / 8)) * 8;
            uvec4 w = a4[(aoff + (m0 + mm) * p.sam + k0 + kk) / 8];
            store8(mm * PA + kk, 1, w, true);
        }
        if (p.sbn == 1) {
            for (uint idx = tid; idx < BK * BN / 8; idx += NT) {
                uint kk = idx / (BN / 8), nn = (idx % (BN / 8)) * 8;
                store8(kk * PB + nn, 1, b4[(boff + (k0 + kk) * p.sbk + n0 + nn) / 8], false);
            }
        } else {
            for (uint idx = tid; idx < BN * BK / 8; idx += NT) {
                uint nn = idx / (BK / 8), kk = (idx % (BK / 8)) * 8;
                store8(kk * PB + nn, PB, b4[(boff + (n0 + nn) * p.sbn + k0 + kk) / 8], false);
            }
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[FM];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[FN];
            [[unroll]] for (uint i = 0; i < FM; ++i)
                coopMatLoad(fa[i], As, (wm0 + i * 16) * PA + kk, PA, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0; j < FN; ++j)
                coopMatLoad(fb[j], Bs, kk * PB + wn0 + j * 16, PB, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint i = 0; i < FM; ++i)
                [[unroll]] for (uint j = 0; j < FN; ++j)
                    acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0; i < FM; ++i)
        [[unroll]] for (uint j = 0; j < FN; ++j) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(acc[i][j] * p.alpha);
            coopMatStore(o, c, coff + (m0 + wm0 + i * 16) * p.scm + n0 + wn0 + j * 16, p.scm,
                         gl_CooperativeMatrixLayoutRowMajor);
        }
}
