#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
// Batched strided matmul: C[z] = alpha * A[z] . B[z / bdiv] + beta * C[z], f32 accumulation.
// A[m,k] = a[aoff + z*sab + m*sam + k*sak], B[k,n] = b[boff + (z/bdiv)*sbb + k*sbk + n*sbn],
// C[m,n] = c[coff + z*scb + m*scm + n*scn].
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
} p;
layout(local_size_x_id = 0, local_size_y_id = 1) in;

// cm: cooperative matrices (tensor cores), aligned case only: M % BM == N % BN ==
// K % BK == 0, scn == 1, beta == 0, sak == 1, sbn == 1 or sbk == 1, offsets and row strides multiples
// of 8 halves (the selector guarantees it). WM x WN subgroups of 32 (flag wWMxWN, default 2x2) each
// compute a (BM/WM) x (BN/WN) block as FM x FN named 16x16 f32 accumulators (a template parameter,
// as for rb); flag gG visits the tiles in groups of G tile rows (L2 reuse of B). Tiles go
// global -> registers -> shared as 16-byte words, two shared buffers, the next tile loaded while the
// current one is multiplied; B k-contiguous (transpose_b) is staged as it is and read column-major.
// Flag d: no shared memory and no barriers (BK must be 32). Each subgroup loads its own fragments straight from the
// buffers (the workgroup's subgroups share rows of A and columns of B through the L1 cache), the next
// k-step's fragments in flight while the current ones are multiplied.
void main() {
    const uint sg = gl_SubgroupID;
    const uint wm0 = (sg / 4) * (BM / 2), wn0 = (sg % 4) * (BN / 4);
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;

    const uint aoff = p.aoff + z * p.sab + (m0 + wm0) * p.sam;
    const uint boff = p.boff + (z / p.bdiv) * p.sbb;
    const uint coff = p.coff + z * p.scb;
    const bool bn = p.sbn == 1;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c0_0 =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c0_1 =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c1_0 =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c1_1 =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c2_0 =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c2_1 =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c3_0 =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c3_1 =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0, na0;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1, na1;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2, na2;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3, na3;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0, nb0;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1, nb1;
    // Two fragment sets in turn (BK = 32, K a multiple of it): one set is loaded while the other is
    // multiplied. (glslang 13.1.1 rejects assigning one coopmat variable to another, so no copies.)
    {
        coopMatLoad(a0, a, aoff + 0 * p.sam + 0, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(a1, a, aoff + 16 * p.sam + 0, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(a2, a, aoff + 32 * p.sam + 0, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(a3, a, aoff + 48 * p.sam + 0, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        if (bn) coopMatLoad(b0, b, boff + (0) * p.sbk + n0 + wn0 + 0, p.sbk, gl_CooperativeMatrixLayoutRowMajor);
        else coopMatLoad(b0, b, boff + (n0 + wn0 + 0) * p.sbn + 0, p.sbn, gl_CooperativeMatrixLayoutColumnMajor);
        if (bn) coopMatLoad(b1, b, boff + (0) * p.sbk + n0 + wn0 + 16, p.sbk, gl_CooperativeMatrixLayoutRowMajor);
        else coopMatLoad(b1, b, boff + (n0 + wn0 + 16) * p.sbn + 0, p.sbn, gl_CooperativeMatrixLayoutColumnMajor);

    }
    for (uint k0 = 0; k0 < p.K; k0 += 32) {
        {
        coopMatLoad(na0, a, aoff + 0 * p.sam + k0 + 16, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(na1, a, aoff + 16 * p.sam + k0 + 16, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(na2, a, aoff + 32 * p.sam + k0 + 16, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(na3, a, aoff + 48 * p.sam + k0 + 16, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        if (bn) coopMatLoad(nb0, b, boff + (k0 + 16) * p.sbk + n0 + wn0 + 0, p.sbk, gl_CooperativeMatrixLayoutRowMajor);
        else coopMatLoad(nb0, b, boff + (n0 + wn0 + 0) * p.sbn + k0 + 16, p.sbn, gl_CooperativeMatrixLayoutColumnMajor);
        if (bn) coopMatLoad(nb1, b, boff + (k0 + 16) * p.sbk + n0 + wn0 + 16, p.sbk, gl_CooperativeMatrixLayoutRowMajor);
        else coopMatLoad(nb1, b, boff + (n0 + wn0 + 16) * p.sbn + k0 + 16, p.sbn, gl_CooperativeMatrixLayoutColumnMajor);

        }
        c0_0 = coopMatMulAdd(a0, b0, c0_0);
        c0_1 = coopMatMulAdd(a0, b1, c0_1);
        c1_0 = coopMatMulAdd(a1, b0, c1_0);
        c1_1 = coopMatMulAdd(a1, b1, c1_1);
        c2_0 = coopMatMulAdd(a2, b0, c2_0);
        c2_1 = coopMatMulAdd(a2, b1, c2_1);
        c3_0 = coopMatMulAdd(a3, b0, c3_0);
        c3_1 = coopMatMulAdd(a3, b1, c3_1);
        if (k0 + 32 < p.K) {
        coopMatLoad(a0, a, aoff + 0 * p.sam + k0 + 32, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(a1, a, aoff + 16 * p.sam + k0 + 32, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(a2, a, aoff + 32 * p.sam + k0 + 32, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(a3, a, aoff + 48 * p.sam + k0 + 32, p.sam, gl_CooperativeMatrixLayoutRowMajor);
        if (bn) coopMatLoad(b0, b, boff + (k0 + 32) * p.sbk + n0 + wn0 + 0, p.sbk, gl_CooperativeMatrixLayoutRowMajor);
        else coopMatLoad(b0, b, boff + (n0 + wn0 + 0) * p.sbn + k0 + 32, p.sbn, gl_CooperativeMatrixLayoutColumnMajor);
        if (bn) coopMatLoad(b1, b, boff + (k0 + 32) * p.sbk + n0 + wn0 + 16, p.sbk, gl_CooperativeMatrixLayoutRowMajor);
        else coopMatLoad(b1, b, boff + (n0 + wn0 + 16) * p.sbn + k0 + 32, p.sbn, gl_CooperativeMatrixLayoutColumnMajor);

        }
        c0_0 = coopMatMulAdd(na0, nb0, c0_0);
        c0_1 = coopMatMulAdd(na0, nb1, c0_1);
        c1_0 = coopMatMulAdd(na1, nb0, c1_0);
        c1_1 = coopMatMulAdd(na1, nb1, c1_1);
        c2_0 = coopMatMulAdd(na2, nb0, c2_0);
        c2_1 = coopMatMulAdd(na2, nb1, c2_1);
        c3_0 = coopMatMulAdd(na3, nb0, c3_0);
        c3_1 = coopMatMulAdd(na3, nb1, c3_1);
    }
    {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c0_0 * p.alpha);
        coopMatStore(o, c, coff + (m0 + wm0 + 0) * p.scm + n0 + wn0 + 0, p.scm,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c0_1 * p.alpha);
        coopMatStore(o, c, coff + (m0 + wm0 + 0) * p.scm + n0 + wn0 + 16, p.scm,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c1_0 * p.alpha);
        coopMatStore(o, c, coff + (m0 + wm0 + 16) * p.scm + n0 + wn0 + 0, p.scm,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c1_1 * p.alpha);
        coopMatStore(o, c, coff + (m0 + wm0 + 16) * p.scm + n0 + wn0 + 16, p.scm,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c2_0 * p.alpha);
        coopMatStore(o, c, coff + (m0 + wm0 + 32) * p.scm + n0 + wn0 + 0, p.scm,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c2_1 * p.alpha);
        coopMatStore(o, c, coff + (m0 + wm0 + 32) * p.scm + n0 + wn0 + 16, p.scm,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c3_0 * p.alpha);
        coopMatStore(o, c, coff + (m0 + wm0 + 48) * p.scm + n0 + wn0 + 0, p.scm,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c3_1 * p.alpha);
        coopMatStore(o, c, coff + (m0 + wm0 + 48) * p.scm + n0 + wn0 + 16, p.scm,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
}
