#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
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

// cm: cooperative matrices (tensor cores), aligned case only: M % BM == N % BN ==
// K % BK == 0, scn == 1, A with sak == 1 or sam == 1, B with sbn == 1 or sbk == 1, offsets, batch
// strides and the operands' other strides multiples of 8 halves (the selector guarantees it); beta != 0
// reads C back as a 16x16 fragment and adds beta * C in f32 before the f16 store. WM x WN subgroups of 32 (flag wWMxWN, default 2x2) each
// compute a (BM/WM) x (BN/WN) block as FM x FN named 16x16 f32 accumulators (a template parameter,
// as for rb); flag gG visits the tiles in groups of G tile rows (L2 reuse of B). Tiles go
// global -> registers -> shared as 16-byte words, two shared buffers, the next tile loaded while the
// current one is multiplied; B k-contiguous (transpose_b) and A m-contiguous (a transposed A, e.g. the
// dS^T Q and P^T dO products of attention and the weight gradients X^T dY) are staged as they are and
// read column-major.
const uint NT = WG_X * WG_Y;
const uint PA = BK + 8, PAT = BM + 8, PB = BN + 8, PT = BK + 8;  // shared row strides in halves (multiples of 8)
const uint SA = (BM * PA > BK * PAT ? BM * PA : BK * PAT) / 8, SB = (BK * PB > BN * PT ? BK * PB : BN * PT) / 8;  // one buffer, in uvec4
const uint LA = BM * BK / (8 * NT), LB = BN * BK / (8 * NT);  // 16-byte loads per thread, <= 8
shared uvec4 As[2 * SA];
shared uvec4 Bs[2 * SB];
layout(std430, binding = 0) readonly buffer Buf_a4 { uvec4 a4[]; };
layout(std430, binding = 1) readonly buffer Buf_b4 { uvec4 b4[]; };



void main() {
    const uint tid = gl_LocalInvocationID.y * WG_X + gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID;
    const uint wm0 = (sg / 4) * (BM / 2), wn0 = (sg % 4) * (BN / 4);
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;

    const uint z1_ = z / p.Z2, z2_ = z % p.Z2;
    const uint aoff = p.aoff + z1_ * p.sao + z2_ * p.sab;
    const uint boff = p.boff + z1_ * p.sbo + (z2_ / p.bdiv) * p.sbb;
    const uint coff = p.coff + z1_ * p.sco + z2_ * p.scb;
    uvec4 ra0_0 = uvec4(0), rb0_0 = uvec4(0);
    uvec4 ra0_1 = uvec4(0), rb0_1 = uvec4(0);
    uvec4 ra0_2 = uvec4(0), rb0_2 = uvec4(0);
    uvec4 ra0_3 = uvec4(0), rb0_3 = uvec4(0);
    uvec4 ra0_4 = uvec4(0), rb0_4 = uvec4(0);
    uvec4 ra0_5 = uvec4(0), rb0_5 = uvec4(0);
    uvec4 ra0_6 = uvec4(0), rb0_6 = uvec4(0);
    uvec4 ra0_7 = uvec4(0), rb0_7 = uvec4(0);
    uvec4 ra1_0 = uvec4(0), rb1_0 = uvec4(0);
    uvec4 ra1_1 = uvec4(0), rb1_1 = uvec4(0);
    uvec4 ra1_2 = uvec4(0), rb1_2 = uvec4(0);
    uvec4 ra1_3 = uvec4(0), rb1_3 = uvec4(0);
    uvec4 ra1_4 = uvec4(0), rb1_4 = uvec4(0);
    uvec4 ra1_5 = uvec4(0), rb1_5 = uvec4(0);
    uvec4 ra1_6 = uvec4(0), rb1_6 = uvec4(0);
    uvec4 ra1_7 = uvec4(0), rb1_7 = uvec4(0);
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

    const uint nk_ = (p.K + BK - 1) / BK;
    uint kb = 0u, ke = nk_;
    if (p.tri == 1u) ke = m0 + BM > p.kd ? min(nk_, (m0 + BM - p.kd + BK - 1) / BK) : 0u;
    if (p.tri == 2u) kb = m0 > p.kd ? min((m0 - p.kd) / BK, nk_) : 0u;
    if (p.tri == 3u && n0 >= m0 + BM) ke = 0u;
    // The operands' layouts pick one of four copies of the k loop, each with its layouts as constants (a layout
    // test inside the loop: bench/results/evidence/h200-cm-layout-loops.txt).
    if (p.sak != 1) {
        if (p.sbn == 1)         {
            const bool am = true, bn = true;
            // Flag p2: two register sets; tile t + 1 is loaded in step t and stored at the end of step t + 1,
            // so each load has two tiles' multiplications to arrive in. Steps go in pairs (set 0, set 1).
            if (kb < ke)         {
            const uint k0 = (kb) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra0_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb0_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra0_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb0_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra0_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb0_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra0_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb0_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra0_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb0_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra0_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb0_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra0_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb0_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra0_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb0_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

            for (uint t = kb; t <= ke; t += 2) {
                if (t + 1 < ke)         {
            const uint k0 = (t + 1) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra1_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb1_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra1_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb1_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra1_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb1_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra1_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb1_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra1_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb1_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra1_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb1_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra1_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb1_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra1_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb1_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

                if (t > kb)         {
            const uint sa = ((t - 1) & 1) * SA, sb = ((t - 1) & 1) * SB;
            [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0;
                if (am) coopMatLoad(a0, As, sa + (kk * PAT + wm0 + 0) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a0, As, sa + ((wm0 + 0) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1;
                if (am) coopMatLoad(a1, As, sa + (kk * PAT + wm0 + 16) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a1, As, sa + ((wm0 + 16) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2;
                if (am) coopMatLoad(a2, As, sa + (kk * PAT + wm0 + 32) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a2, As, sa + ((wm0 + 32) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3;
                if (am) coopMatLoad(a3, As, sa + (kk * PAT + wm0 + 48) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a3, As, sa + ((wm0 + 48) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0;
                if (bn) coopMatLoad(b0, Bs, sb + (kk * PB + wn0 + 0) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b0, Bs, sb + ((wn0 + 0) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1;
                if (bn) coopMatLoad(b1, Bs, sb + (kk * PB + wn0 + 16) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b1, Bs, sb + ((wn0 + 16) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                c0_0 = coopMatMulAdd(a0, b0, c0_0);
                c0_1 = coopMatMulAdd(a0, b1, c0_1);
                c1_0 = coopMatMulAdd(a1, b0, c1_0);
                c1_1 = coopMatMulAdd(a1, b1, c1_1);
                c2_0 = coopMatMulAdd(a2, b0, c2_0);
                c2_1 = coopMatMulAdd(a2, b1, c2_1);
                c3_0 = coopMatMulAdd(a3, b0, c3_0);
                c3_1 = coopMatMulAdd(a3, b1, c3_1);
            }
        }

                if (t < ke)         {
            const uint sa = ((t) & 1) * SA, sb = ((t) & 1) * SB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_0;
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_0;
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_1;
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_1;
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_2;
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_2;
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_3;
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_3;
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_4;
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_4;
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_5;
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_5;
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_6;
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_6;
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_7;
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_7;
            }
        }

                barrier();
                if (t + 1 <= ke) {
                    if (t + 2 < ke)         {
            const uint k0 = (t + 2) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra0_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb0_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra0_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb0_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra0_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb0_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra0_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb0_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra0_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb0_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra0_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb0_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra0_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb0_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra0_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb0_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

                            {
            const uint sa = ((t) & 1) * SA, sb = ((t) & 1) * SB;
            [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0;
                if (am) coopMatLoad(a0, As, sa + (kk * PAT + wm0 + 0) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a0, As, sa + ((wm0 + 0) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1;
                if (am) coopMatLoad(a1, As, sa + (kk * PAT + wm0 + 16) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a1, As, sa + ((wm0 + 16) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2;
                if (am) coopMatLoad(a2, As, sa + (kk * PAT + wm0 + 32) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a2, As, sa + ((wm0 + 32) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3;
                if (am) coopMatLoad(a3, As, sa + (kk * PAT + wm0 + 48) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a3, As, sa + ((wm0 + 48) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0;
                if (bn) coopMatLoad(b0, Bs, sb + (kk * PB + wn0 + 0) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b0, Bs, sb + ((wn0 + 0) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1;
                if (bn) coopMatLoad(b1, Bs, sb + (kk * PB + wn0 + 16) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b1, Bs, sb + ((wn0 + 16) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                c0_0 = coopMatMulAdd(a0, b0, c0_0);
                c0_1 = coopMatMulAdd(a0, b1, c0_1);
                c1_0 = coopMatMulAdd(a1, b0, c1_0);
                c1_1 = coopMatMulAdd(a1, b1, c1_1);
                c2_0 = coopMatMulAdd(a2, b0, c2_0);
                c2_1 = coopMatMulAdd(a2, b1, c2_1);
                c3_0 = coopMatMulAdd(a3, b0, c3_0);
                c3_1 = coopMatMulAdd(a3, b1, c3_1);
            }
        }

                    if (t + 1 < ke)         {
            const uint sa = ((t + 1) & 1) * SA, sb = ((t + 1) & 1) * SB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_0;
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_0;
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_1;
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_1;
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_2;
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_2;
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_3;
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_3;
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_4;
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_4;
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_5;
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_5;
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_6;
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_6;
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_7;
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_7;
            }
        }

                    barrier();
                }
            }
        }
        else         {
            const bool am = true, bn = false;
            // Flag p2: two register sets; tile t + 1 is loaded in step t and stored at the end of step t + 1,
            // so each load has two tiles' multiplications to arrive in. Steps go in pairs (set 0, set 1).
            if (kb < ke)         {
            const uint k0 = (kb) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra0_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb0_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra0_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb0_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra0_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb0_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra0_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb0_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra0_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb0_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra0_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb0_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra0_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb0_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra0_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb0_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

            for (uint t = kb; t <= ke; t += 2) {
                if (t + 1 < ke)         {
            const uint k0 = (t + 1) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra1_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb1_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra1_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb1_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra1_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb1_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra1_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb1_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra1_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb1_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra1_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb1_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra1_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb1_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra1_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb1_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

                if (t > kb)         {
            const uint sa = ((t - 1) & 1) * SA, sb = ((t - 1) & 1) * SB;
            [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0;
                if (am) coopMatLoad(a0, As, sa + (kk * PAT + wm0 + 0) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a0, As, sa + ((wm0 + 0) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1;
                if (am) coopMatLoad(a1, As, sa + (kk * PAT + wm0 + 16) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a1, As, sa + ((wm0 + 16) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2;
                if (am) coopMatLoad(a2, As, sa + (kk * PAT + wm0 + 32) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a2, As, sa + ((wm0 + 32) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3;
                if (am) coopMatLoad(a3, As, sa + (kk * PAT + wm0 + 48) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a3, As, sa + ((wm0 + 48) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0;
                if (bn) coopMatLoad(b0, Bs, sb + (kk * PB + wn0 + 0) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b0, Bs, sb + ((wn0 + 0) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1;
                if (bn) coopMatLoad(b1, Bs, sb + (kk * PB + wn0 + 16) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b1, Bs, sb + ((wn0 + 16) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                c0_0 = coopMatMulAdd(a0, b0, c0_0);
                c0_1 = coopMatMulAdd(a0, b1, c0_1);
                c1_0 = coopMatMulAdd(a1, b0, c1_0);
                c1_1 = coopMatMulAdd(a1, b1, c1_1);
                c2_0 = coopMatMulAdd(a2, b0, c2_0);
                c2_1 = coopMatMulAdd(a2, b1, c2_1);
                c3_0 = coopMatMulAdd(a3, b0, c3_0);
                c3_1 = coopMatMulAdd(a3, b1, c3_1);
            }
        }

                if (t < ke)         {
            const uint sa = ((t) & 1) * SA, sb = ((t) & 1) * SB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_0;
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_0;
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_1;
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_1;
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_2;
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_2;
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_3;
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_3;
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_4;
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_4;
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_5;
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_5;
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_6;
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_6;
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_7;
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_7;
            }
        }

                barrier();
                if (t + 1 <= ke) {
                    if (t + 2 < ke)         {
            const uint k0 = (t + 2) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra0_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb0_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra0_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb0_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra0_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb0_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra0_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb0_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra0_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb0_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra0_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb0_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra0_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb0_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra0_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb0_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

                            {
            const uint sa = ((t) & 1) * SA, sb = ((t) & 1) * SB;
            [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0;
                if (am) coopMatLoad(a0, As, sa + (kk * PAT + wm0 + 0) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a0, As, sa + ((wm0 + 0) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1;
                if (am) coopMatLoad(a1, As, sa + (kk * PAT + wm0 + 16) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a1, As, sa + ((wm0 + 16) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2;
                if (am) coopMatLoad(a2, As, sa + (kk * PAT + wm0 + 32) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a2, As, sa + ((wm0 + 32) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3;
                if (am) coopMatLoad(a3, As, sa + (kk * PAT + wm0 + 48) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a3, As, sa + ((wm0 + 48) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0;
                if (bn) coopMatLoad(b0, Bs, sb + (kk * PB + wn0 + 0) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b0, Bs, sb + ((wn0 + 0) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1;
                if (bn) coopMatLoad(b1, Bs, sb + (kk * PB + wn0 + 16) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b1, Bs, sb + ((wn0 + 16) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                c0_0 = coopMatMulAdd(a0, b0, c0_0);
                c0_1 = coopMatMulAdd(a0, b1, c0_1);
                c1_0 = coopMatMulAdd(a1, b0, c1_0);
                c1_1 = coopMatMulAdd(a1, b1, c1_1);
                c2_0 = coopMatMulAdd(a2, b0, c2_0);
                c2_1 = coopMatMulAdd(a2, b1, c2_1);
                c3_0 = coopMatMulAdd(a3, b0, c3_0);
                c3_1 = coopMatMulAdd(a3, b1, c3_1);
            }
        }

                    if (t + 1 < ke)         {
            const uint sa = ((t + 1) & 1) * SA, sb = ((t + 1) & 1) * SB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_0;
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_0;
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_1;
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_1;
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_2;
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_2;
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_3;
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_3;
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_4;
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_4;
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_5;
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_5;
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_6;
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_6;
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_7;
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_7;
            }
        }

                    barrier();
                }
            }
        }
    } else {
        if (p.sbn == 1)         {
            const bool am = false, bn = true;
            // Flag p2: two register sets; tile t + 1 is loaded in step t and stored at the end of step t + 1,
            // so each load has two tiles' multiplications to arrive in. Steps go in pairs (set 0, set 1).
            if (kb < ke)         {
            const uint k0 = (kb) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra0_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb0_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra0_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb0_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra0_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb0_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra0_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb0_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra0_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb0_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra0_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb0_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra0_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb0_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra0_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb0_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

            for (uint t = kb; t <= ke; t += 2) {
                if (t + 1 < ke)         {
            const uint k0 = (t + 1) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra1_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb1_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra1_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb1_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra1_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb1_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra1_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb1_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra1_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb1_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra1_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb1_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra1_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb1_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra1_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb1_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

                if (t > kb)         {
            const uint sa = ((t - 1) & 1) * SA, sb = ((t - 1) & 1) * SB;
            [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0;
                if (am) coopMatLoad(a0, As, sa + (kk * PAT + wm0 + 0) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a0, As, sa + ((wm0 + 0) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1;
                if (am) coopMatLoad(a1, As, sa + (kk * PAT + wm0 + 16) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a1, As, sa + ((wm0 + 16) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2;
                if (am) coopMatLoad(a2, As, sa + (kk * PAT + wm0 + 32) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a2, As, sa + ((wm0 + 32) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3;
                if (am) coopMatLoad(a3, As, sa + (kk * PAT + wm0 + 48) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a3, As, sa + ((wm0 + 48) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0;
                if (bn) coopMatLoad(b0, Bs, sb + (kk * PB + wn0 + 0) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b0, Bs, sb + ((wn0 + 0) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1;
                if (bn) coopMatLoad(b1, Bs, sb + (kk * PB + wn0 + 16) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b1, Bs, sb + ((wn0 + 16) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                c0_0 = coopMatMulAdd(a0, b0, c0_0);
                c0_1 = coopMatMulAdd(a0, b1, c0_1);
                c1_0 = coopMatMulAdd(a1, b0, c1_0);
                c1_1 = coopMatMulAdd(a1, b1, c1_1);
                c2_0 = coopMatMulAdd(a2, b0, c2_0);
                c2_1 = coopMatMulAdd(a2, b1, c2_1);
                c3_0 = coopMatMulAdd(a3, b0, c3_0);
                c3_1 = coopMatMulAdd(a3, b1, c3_1);
            }
        }

                if (t < ke)         {
            const uint sa = ((t) & 1) * SA, sb = ((t) & 1) * SB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_0;
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_0;
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_1;
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_1;
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_2;
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_2;
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_3;
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_3;
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_4;
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_4;
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_5;
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_5;
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_6;
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_6;
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_7;
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_7;
            }
        }

                barrier();
                if (t + 1 <= ke) {
                    if (t + 2 < ke)         {
            const uint k0 = (t + 2) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra0_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb0_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra0_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb0_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra0_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb0_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra0_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb0_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra0_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb0_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra0_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb0_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra0_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb0_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra0_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb0_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

                            {
            const uint sa = ((t) & 1) * SA, sb = ((t) & 1) * SB;
            [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0;
                if (am) coopMatLoad(a0, As, sa + (kk * PAT + wm0 + 0) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a0, As, sa + ((wm0 + 0) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1;
                if (am) coopMatLoad(a1, As, sa + (kk * PAT + wm0 + 16) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a1, As, sa + ((wm0 + 16) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2;
                if (am) coopMatLoad(a2, As, sa + (kk * PAT + wm0 + 32) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a2, As, sa + ((wm0 + 32) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3;
                if (am) coopMatLoad(a3, As, sa + (kk * PAT + wm0 + 48) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a3, As, sa + ((wm0 + 48) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0;
                if (bn) coopMatLoad(b0, Bs, sb + (kk * PB + wn0 + 0) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b0, Bs, sb + ((wn0 + 0) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1;
                if (bn) coopMatLoad(b1, Bs, sb + (kk * PB + wn0 + 16) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b1, Bs, sb + ((wn0 + 16) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                c0_0 = coopMatMulAdd(a0, b0, c0_0);
                c0_1 = coopMatMulAdd(a0, b1, c0_1);
                c1_0 = coopMatMulAdd(a1, b0, c1_0);
                c1_1 = coopMatMulAdd(a1, b1, c1_1);
                c2_0 = coopMatMulAdd(a2, b0, c2_0);
                c2_1 = coopMatMulAdd(a2, b1, c2_1);
                c3_0 = coopMatMulAdd(a3, b0, c3_0);
                c3_1 = coopMatMulAdd(a3, b1, c3_1);
            }
        }

                    if (t + 1 < ke)         {
            const uint sa = ((t + 1) & 1) * SA, sb = ((t + 1) & 1) * SB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_0;
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_0;
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_1;
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_1;
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_2;
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_2;
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_3;
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_3;
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_4;
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_4;
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_5;
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_5;
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_6;
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_6;
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_7;
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_7;
            }
        }

                    barrier();
                }
            }
        }
        else         {
            const bool am = false, bn = false;
            // Flag p2: two register sets; tile t + 1 is loaded in step t and stored at the end of step t + 1,
            // so each load has two tiles' multiplications to arrive in. Steps go in pairs (set 0, set 1).
            if (kb < ke)         {
            const uint k0 = (kb) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra0_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb0_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra0_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb0_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra0_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb0_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra0_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb0_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra0_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb0_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra0_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb0_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra0_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb0_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra0_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb0_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

            for (uint t = kb; t <= ke; t += 2) {
                if (t + 1 < ke)         {
            const uint k0 = (t + 1) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra1_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb1_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra1_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb1_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra1_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb1_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra1_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb1_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra1_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb1_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra1_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb1_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra1_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb1_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra1_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb1_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

                if (t > kb)         {
            const uint sa = ((t - 1) & 1) * SA, sb = ((t - 1) & 1) * SB;
            [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0;
                if (am) coopMatLoad(a0, As, sa + (kk * PAT + wm0 + 0) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a0, As, sa + ((wm0 + 0) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1;
                if (am) coopMatLoad(a1, As, sa + (kk * PAT + wm0 + 16) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a1, As, sa + ((wm0 + 16) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2;
                if (am) coopMatLoad(a2, As, sa + (kk * PAT + wm0 + 32) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a2, As, sa + ((wm0 + 32) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3;
                if (am) coopMatLoad(a3, As, sa + (kk * PAT + wm0 + 48) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a3, As, sa + ((wm0 + 48) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0;
                if (bn) coopMatLoad(b0, Bs, sb + (kk * PB + wn0 + 0) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b0, Bs, sb + ((wn0 + 0) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1;
                if (bn) coopMatLoad(b1, Bs, sb + (kk * PB + wn0 + 16) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b1, Bs, sb + ((wn0 + 16) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                c0_0 = coopMatMulAdd(a0, b0, c0_0);
                c0_1 = coopMatMulAdd(a0, b1, c0_1);
                c1_0 = coopMatMulAdd(a1, b0, c1_0);
                c1_1 = coopMatMulAdd(a1, b1, c1_1);
                c2_0 = coopMatMulAdd(a2, b0, c2_0);
                c2_1 = coopMatMulAdd(a2, b1, c2_1);
                c3_0 = coopMatMulAdd(a3, b0, c3_0);
                c3_1 = coopMatMulAdd(a3, b1, c3_1);
            }
        }

                if (t < ke)         {
            const uint sa = ((t) & 1) * SA, sb = ((t) & 1) * SB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_0;
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_0;
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_1;
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_1;
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_2;
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_2;
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_3;
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_3;
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_4;
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_4;
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_5;
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_5;
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_6;
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_6;
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra0_7;
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb0_7;
            }
        }

                barrier();
                if (t + 1 <= ke) {
                    if (t + 2 < ke)         {
            const uint k0 = (t + 2) * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                ra0_0 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                rb0_0 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                ra0_1 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                rb0_1 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                ra0_2 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                rb0_2 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                ra0_3 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                rb0_3 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                ra0_4 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                rb0_4 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                ra0_5 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                rb0_5 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                ra0_6 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                rb0_6 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                ra0_7 = am ? a4[(aoff + (k0 + q / (BM / 8)) * p.sak + m0 + (q % (BM / 8)) * 8) / 8]
                               : a4[(aoff + (m0 + q / (BK / 8)) * p.sam + k0 + (q % (BK / 8)) * 8) / 8];
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                rb0_7 = bn ? b4[(boff + (k0 + q / (BN / 8)) * p.sbk + n0 + (q % (BN / 8)) * 8) / 8]
                               : b4[(boff + (n0 + q / (BK / 8)) * p.sbn + k0 + (q % (BK / 8)) * 8) / 8];
            }
        }

                            {
            const uint sa = ((t) & 1) * SA, sb = ((t) & 1) * SB;
            [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a0;
                if (am) coopMatLoad(a0, As, sa + (kk * PAT + wm0 + 0) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a0, As, sa + ((wm0 + 0) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a1;
                if (am) coopMatLoad(a1, As, sa + (kk * PAT + wm0 + 16) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a1, As, sa + ((wm0 + 16) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a2;
                if (am) coopMatLoad(a2, As, sa + (kk * PAT + wm0 + 32) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a2, As, sa + ((wm0 + 32) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a3;
                if (am) coopMatLoad(a3, As, sa + (kk * PAT + wm0 + 48) / 8, PAT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                else coopMatLoad(a3, As, sa + ((wm0 + 48) * PA + kk) / 8, PA / 8, gl_CooperativeMatrixLayoutRowMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b0;
                if (bn) coopMatLoad(b0, Bs, sb + (kk * PB + wn0 + 0) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b0, Bs, sb + ((wn0 + 0) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b1;
                if (bn) coopMatLoad(b1, Bs, sb + (kk * PB + wn0 + 16) / 8, PB / 8, gl_CooperativeMatrixLayoutRowMajor);
                else coopMatLoad(b1, Bs, sb + ((wn0 + 16) * PT + kk) / 8, PT / 8, gl_CooperativeMatrixLayoutColumnMajor);
                c0_0 = coopMatMulAdd(a0, b0, c0_0);
                c0_1 = coopMatMulAdd(a0, b1, c0_1);
                c1_0 = coopMatMulAdd(a1, b0, c1_0);
                c1_1 = coopMatMulAdd(a1, b1, c1_1);
                c2_0 = coopMatMulAdd(a2, b0, c2_0);
                c2_1 = coopMatMulAdd(a2, b1, c2_1);
                c3_0 = coopMatMulAdd(a3, b0, c3_0);
                c3_1 = coopMatMulAdd(a3, b1, c3_1);
            }
        }

                    if (t + 1 < ke)         {
            const uint sa = ((t + 1) & 1) * SA, sb = ((t + 1) & 1) * SB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_0;
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_0;
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_1;
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_1;
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_2;
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_2;
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_3;
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_3;
            }
            if (4 < LA) {
                uint q = tid + 4 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_4;
            }
            if (4 < LB) {
                uint q = tid + 4 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_4;
            }
            if (5 < LA) {
                uint q = tid + 5 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_5;
            }
            if (5 < LB) {
                uint q = tid + 5 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_5;
            }
            if (6 < LA) {
                uint q = tid + 6 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_6;
            }
            if (6 < LB) {
                uint q = tid + 6 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_6;
            }
            if (7 < LA) {
                uint q = tid + 7 * NT;
                As[sa + (am ? (q / (BM / 8)) * (PAT / 8) + q % (BM / 8) : (q / (BK / 8)) * (PA / 8) + q % (BK / 8))] = ra1_7;
            }
            if (7 < LB) {
                uint q = tid + 7 * NT;
                Bs[sb + (bn ? (q / (BN / 8)) * (PB / 8) + q % (BN / 8) : (q / (BK / 8)) * (PT / 8) + q % (BK / 8))] = rb1_7;
            }
        }

                    barrier();
                }
            }
        }
    }
    {
        const uint ci = coff + (m0 + wm0 + 0) * p.scm + n0 + wn0 + 0;
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> r = c0_0 * p.alpha;
        if (p.beta != 0.0) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> old;
            coopMatLoad(old, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
            r = r + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(old) * p.beta;
        }
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(r);
        coopMatStore(o, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        const uint ci = coff + (m0 + wm0 + 0) * p.scm + n0 + wn0 + 16;
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> r = c0_1 * p.alpha;
        if (p.beta != 0.0) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> old;
            coopMatLoad(old, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
            r = r + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(old) * p.beta;
        }
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(r);
        coopMatStore(o, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        const uint ci = coff + (m0 + wm0 + 16) * p.scm + n0 + wn0 + 0;
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> r = c1_0 * p.alpha;
        if (p.beta != 0.0) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> old;
            coopMatLoad(old, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
            r = r + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(old) * p.beta;
        }
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(r);
        coopMatStore(o, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        const uint ci = coff + (m0 + wm0 + 16) * p.scm + n0 + wn0 + 16;
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> r = c1_1 * p.alpha;
        if (p.beta != 0.0) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> old;
            coopMatLoad(old, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
            r = r + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(old) * p.beta;
        }
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(r);
        coopMatStore(o, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        const uint ci = coff + (m0 + wm0 + 32) * p.scm + n0 + wn0 + 0;
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> r = c2_0 * p.alpha;
        if (p.beta != 0.0) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> old;
            coopMatLoad(old, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
            r = r + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(old) * p.beta;
        }
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(r);
        coopMatStore(o, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        const uint ci = coff + (m0 + wm0 + 32) * p.scm + n0 + wn0 + 16;
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> r = c2_1 * p.alpha;
        if (p.beta != 0.0) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> old;
            coopMatLoad(old, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
            r = r + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(old) * p.beta;
        }
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(r);
        coopMatStore(o, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        const uint ci = coff + (m0 + wm0 + 48) * p.scm + n0 + wn0 + 0;
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> r = c3_0 * p.alpha;
        if (p.beta != 0.0) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> old;
            coopMatLoad(old, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
            r = r + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(old) * p.beta;
        }
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(r);
        coopMatStore(o, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
    }
    {
        const uint ci = coff + (m0 + wm0 + 48) * p.scm + n0 + wn0 + 16;
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> r = c3_1 * p.alpha;
        if (p.beta != 0.0) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> old;
            coopMatLoad(old, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
            r = r + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(old) * p.beta;
        }
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o =
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(r);
        coopMatStore(o, c, ci, p.scm, gl_CooperativeMatrixLayoutRowMajor);
    }
}
