#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

// Batched strided matmul: C[z] = alpha * A[z] . B[z] + beta * C[z], f32 accumulation, over a two-level
// batch z = z1 * Z2 + z2 (z1 outer, z2 inner; B's inner index divided by bdiv, for grouped-query heads):
// A[m,k] = a[aoff + z1*sao + z2*sab + m*sam + k*sak], B[k,n] = b[boff + z1*sbo + (z2/bdiv)*sbb + k*sbk + n*sbn],
// C[m,n] = c[coff + z1*sco + z2*scb + m*scm + n*scn].
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
    uint Z2;
    uint sao;
    uint sbo;
    uint sco;
    uint tri;
    uint kd;
} p;
layout(local_size_x_id = 0, local_size_y_id = 1) in;

const uint TM = BM / WG_Y;
const uint TN = BN / WG_X;
const uint NT = WG_X * WG_Y;
shared float As[BK * BM];
shared float Bs[BK * BN];

void main() {
    const uint tx = gl_LocalInvocationID.x;
    const uint ty = gl_LocalInvocationID.y;
    const uint tid = ty * WG_X + tx;
    const uint m0 = gl_WorkGroupID.y * BM;
    const uint n0 = gl_WorkGroupID.x * BN;
    const uint z = gl_WorkGroupID.z;
    const uint z1_ = z / p.Z2, z2_ = z % p.Z2;
    const uint aoff = p.aoff + z1_ * p.sao + z2_ * p.sab;
    const uint boff = p.boff + z1_ * p.sbo + (z2_ / p.bdiv) * p.sbb;
    const uint coff = p.coff + z1_ * p.sco + z2_ * p.scb;

    float acc[TM][TN];
    [[unroll]] for (uint i = 0; i < TM; ++i)
        [[unroll]] for (uint j = 0; j < TN; ++j)
            acc[i][j] = 0.0;

    const uint nk_ = (p.K + BK - 1) / BK;
    uint kb = 0u, ke = nk_;
    if (p.tri == 1u) ke = m0 + BM > p.kd ? min(nk_, (m0 + BM - p.kd + BK - 1) / BK) : 0u;
    if (p.tri == 2u) kb = m0 > p.kd ? min((m0 - p.kd) / BK, nk_) : 0u;
    if (p.tri == 3u && n0 >= m0 + BM) ke = 0u;
    for (uint k0 = kb * BK; k0 < ke * BK; k0 += BK) {
        // Stage the A tile (BK x BM) and the B tile (BK x BN); out-of-range elements load as zero.
        // The index order follows the unit stride so global reads coalesce.
        for (uint idx = tid; idx < BK * BM; idx += NT) {
            uint kk, mm;
            if (p.sak == 1) { mm = idx / BK; kk = idx % BK; } else { kk = idx / BM; mm = idx % BM; }
            uint gm = m0 + mm, gk = k0 + kk;
            As[kk * BM + mm] = (gm < p.M && gk < p.K) ? float(a[aoff + gm * p.sam + gk * p.sak]) : 0.0;
        }
        for (uint idx = tid; idx < BK * BN; idx += NT) {
            uint kk, nn;
            if (p.sbn == 1) { kk = idx / BN; nn = idx % BN; } else { nn = idx / BK; kk = idx % BK; }
            uint gn = n0 + nn, gk = k0 + kk;
            Bs[kk * BN + nn] = (gn < p.N && gk < p.K) ? float(b[boff + gk * p.sbk + gn * p.sbn]) : 0.0;
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
            float ar[TM];
            float br[TN];
            [[unroll]] for (uint i = 0; i < TM; ++i) ar[i] = As[kk * BM + ty + i * WG_Y];
            [[unroll]] for (uint j = 0; j < TN; ++j) br[j] = Bs[kk * BN + tx + j * WG_X];
            [[unroll]] for (uint i = 0; i < TM; ++i)
                [[unroll]] for (uint j = 0; j < TN; ++j)
                    acc[i][j] = fma(ar[i], br[j], acc[i][j]);
        }
        barrier();
    }

    [[unroll]] for (uint i = 0; i < TM; ++i) {
        uint gm = m0 + ty + i * WG_Y;
        if (gm >= p.M) continue;
        [[unroll]] for (uint j = 0; j < TN; ++j) {
            uint gn = n0 + tx + j * WG_X;
            if (gn >= p.N) continue;
            uint ci = coff + gm * p.scm + gn * p.scn;
            float r = p.alpha * acc[i][j];
            if (p.beta != 0.0) r += p.beta * float(c[ci]);
            c[ci] = float16_t(r);
        }
    }
}
