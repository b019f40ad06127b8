#version 450
#extension GL_EXT_control_flow_attributes : enable
// f16 storage with f32 arithmetic: needs storageBuffer16BitAccess only (no shaderFloat16).
#extension GL_EXT_shader_16bit_storage : require

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
layout(std430, binding = 2) buffer Buf_c { float c[]; };
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

// rb: for GPUs. A register block of RM x RN outputs per thread (RM = BM / WG_Y, RN = BN / WG_X; a
// template parameter: every register is a named variable, since NVIDIA's compiler places private
// arrays in local memory once they grow, ~10x slower) fed by 16-byte shared-memory reads; 16-byte
// global loads along the operand's unit stride; two shared buffers, the next tile loaded into
// registers while the current one is used, so one barrier per BK step. Operands: A with sak == 1 or
// sam == 1, B with sbn == 1 or sbk == 1, offsets and the other strides multiples of 4 (the selector
// guarantees it); any M, N, K (edges load zeros), except with flag al: M, N, K whole tiles loaded without
// bounds checks, and the operands' layout fixed by flag uAB (runtime.variants.variant_launch_errors).
// Thread (tx, ty) owns rows ty*4 + i*4*WG_Y + e and columns tx*4 + j*4*WG_X + e: a half-warp reads 256
// contiguous bytes of a B row and one A vector.
layout(std430, binding = 0) readonly buffer Buf_a4 { uvec2 a4[]; };
layout(std430, binding = 1) readonly buffer Buf_b4 { uvec2 b4[]; };
layout(std430, binding = 2) buffer Buf_c4 { vec4 c4[]; };
vec4 ld4a(uint i) { uvec2 w = a4[i]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
vec4 ld4b(uint i) { uvec2 w = b4[i]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
void st4c(uint i, vec4 v) { c4[i] = v; }
vec4 ld4c(uint i) { return c4[i]; }

const uint NT = WG_X * WG_Y;
const uint PA = BM / 4 + 1, PB = BN / 4 + 1;      // shared rows in vec4s, padded by one
const uint LA = BM * BK / (4 * NT), LB = BN * BK / (4 * NT);  // 16-byte loads per thread and tile, <= 4
shared vec4 As[2 * BK * PA];                       // As[buf][k][m], Bs[buf][k][n]
shared vec4 Bs[2 * BK * PB];

// Four consecutive elements along a unit stride from `i` (a multiple of 4), the first `n` in range.
vec4 gather4a(uint i, uint n) {
    if (n >= 4) return ld4a(i / 4);
    return vec4(float(a[i]), n > 1 ? float(a[i + 1]) : 0.0, n > 2 ? float(a[i + 2]) : 0.0, 0.0);
}
vec4 gather4b(uint i, uint n) {
    if (n >= 4) return ld4b(i / 4);
    return vec4(float(b[i]), n > 1 ? float(b[i + 1]) : 0.0, n > 2 ? float(b[i + 2]) : 0.0, 0.0);
}

void store(uint gm, uint gn, vec4 acc, uint coff, bool wide) {
    if (gm >= p.M || gn >= p.N) return;
    vec4 r = p.alpha * acc;
    if (wide && gn + 4 <= p.N) {
        const uint i4 = (coff + gm * p.scm + gn) / 4;
        if (p.beta != 0.0) r += p.beta * ld4c(i4);  // C read back: the sum in f32, one rounding
        st4c(i4, r);
        return;
    }
    for (uint e = 0; e < 4 && gn + e < p.N; ++e) {
        uint ci = coff + gm * p.scm + (gn + e) * p.scn;
        float v = r[e];
        if (p.beta != 0.0) v += p.beta * float(c[ci]);
        c[ci] = float(v);
    }
}

void main() {
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint tid = ty * WG_X + tx;
    const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;

    const uint z1_ = z / p.Z2, z2_ = z % p.Z2;
    const uint aoff = p.aoff + z1_ * p.sao + z2_ * p.sab;
    const uint boff = p.boff + z1_ * p.sbo + (z2_ / p.bdiv) * p.sbb;
    const uint coff = p.coff + z1_ * p.sco + z2_ * p.scb;
    const bool ak = true, bn = true;  // flag ukn
    vec4 ra0 = vec4(0.0), rb0 = vec4(0.0);
    vec4 ra1 = vec4(0.0), rb1 = vec4(0.0);
    vec4 ra2 = vec4(0.0), rb2 = vec4(0.0);
    vec4 ra3 = vec4(0.0), rb3 = vec4(0.0);
    vec4 c0_0 = vec4(0.0);
    vec4 c1_0 = vec4(0.0);
    vec4 c2_0 = vec4(0.0);
    vec4 c3_0 = vec4(0.0);

    const uint nk_ = (p.K + BK - 1) / BK;
    uint kb = 0u, ke = nk_;
    if (p.tri == 1u) ke = m0 + BM > p.kd ? min(nk_, (m0 + BM - p.kd + BK - 1) / BK) : 0u;
    if (p.tri == 2u) kb = m0 > p.kd ? min((m0 - p.kd) / BK, nk_) : 0u;
    if (p.tri == 3u && n0 >= m0 + BM) ke = 0u;
    for (uint t = kb; t <= ke; ++t) {
        // Stage 1: global loads of tile t into registers (A: vec4 along k or m; B: along n or k).
        if (t < ke) {
            const uint k0 = t * BK;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                uint mm = ak ? q / (BK / 4) : (q % (BM / 4)) * 4, kk = ak ? (q % (BK / 4)) * 4 : q / (BM / 4);
                uint gm = m0 + mm, gk = k0 + kk;
                ra0 = ld4a((aoff + (ak ? gm * p.sam + gk : gk * p.sak + gm)) / 4);
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                uint nn = bn ? (q % (BN / 4)) * 4 : q / (BK / 4), kk = bn ? q / (BN / 4) : (q % (BK / 4)) * 4;
                uint gn = n0 + nn, gk = k0 + kk;
                rb0 = ld4b((boff + (bn ? gk * p.sbk + gn : gn * p.sbn + gk)) / 4);
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                uint mm = ak ? q / (BK / 4) : (q % (BM / 4)) * 4, kk = ak ? (q % (BK / 4)) * 4 : q / (BM / 4);
                uint gm = m0 + mm, gk = k0 + kk;
                ra1 = ld4a((aoff + (ak ? gm * p.sam + gk : gk * p.sak + gm)) / 4);
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                uint nn = bn ? (q % (BN / 4)) * 4 : q / (BK / 4), kk = bn ? q / (BN / 4) : (q % (BK / 4)) * 4;
                uint gn = n0 + nn, gk = k0 + kk;
                rb1 = ld4b((boff + (bn ? gk * p.sbk + gn : gn * p.sbn + gk)) / 4);
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                uint mm = ak ? q / (BK / 4) : (q % (BM / 4)) * 4, kk = ak ? (q % (BK / 4)) * 4 : q / (BM / 4);
                uint gm = m0 + mm, gk = k0 + kk;
                ra2 = ld4a((aoff + (ak ? gm * p.sam + gk : gk * p.sak + gm)) / 4);
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                uint nn = bn ? (q % (BN / 4)) * 4 : q / (BK / 4), kk = bn ? q / (BN / 4) : (q % (BK / 4)) * 4;
                uint gn = n0 + nn, gk = k0 + kk;
                rb2 = ld4b((boff + (bn ? gk * p.sbk + gn : gn * p.sbn + gk)) / 4);
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                uint mm = ak ? q / (BK / 4) : (q % (BM / 4)) * 4, kk = ak ? (q % (BK / 4)) * 4 : q / (BM / 4);
                uint gm = m0 + mm, gk = k0 + kk;
                ra3 = ld4a((aoff + (ak ? gm * p.sam + gk : gk * p.sak + gm)) / 4);
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                uint nn = bn ? (q % (BN / 4)) * 4 : q / (BK / 4), kk = bn ? q / (BN / 4) : (q % (BK / 4)) * 4;
                uint gn = n0 + nn, gk = k0 + kk;
                rb3 = ld4b((boff + (bn ? gk * p.sbk + gn : gn * p.sbn + gk)) / 4);
            }
        }
        // Stage 2: multiply tile t - 1 out of shared memory while those loads are in flight.
        if (t > kb) {
            const uint sa = ((t - 1) & 1) * BK * PA + ty, sb = ((t - 1) & 1) * BK * PB + tx;
            [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
                vec4 a0 = As[sa + kk * PA + 0 * WG_Y];
                vec4 b0 = Bs[sb + kk * PB + 0 * WG_X];
                c0_0 = fma(vec4(a0.x), b0, c0_0);
                c1_0 = fma(vec4(a0.y), b0, c1_0);
                c2_0 = fma(vec4(a0.z), b0, c2_0);
                c3_0 = fma(vec4(a0.w), b0, c3_0);
            }
        }
        // Stage 3: registers -> the other shared buffer (last read in step t - 2, before the barrier).
        if (t < ke) {
            const uint sa = (t & 1) * BK * PA, sb = (t & 1) * BK * PB;
            if (0 < LA) {
                uint q = tid + 0 * NT;
                if (ak) {
                    uint mm = q / (BK / 4), kk = (q % (BK / 4)) * 4, o = sa + kk * PA + mm / 4, e = mm % 4;
                    As[o][e] = ra0.x; As[o + PA][e] = ra0.y; As[o + 2 * PA][e] = ra0.z; As[o + 3 * PA][e] = ra0.w;
                } else {
                    As[sa + (q / (BM / 4)) * PA + q % (BM / 4)] = ra0;
                }
            }
            if (0 < LB) {
                uint q = tid + 0 * NT;
                if (bn) {
                    Bs[sb + (q / (BN / 4)) * PB + q % (BN / 4)] = rb0;
                } else {
                    uint nn = q / (BK / 4), kk = (q % (BK / 4)) * 4, o = sb + kk * PB + nn / 4, e = nn % 4;
                    Bs[o][e] = rb0.x; Bs[o + PB][e] = rb0.y; Bs[o + 2 * PB][e] = rb0.z; Bs[o + 3 * PB][e] = rb0.w;
                }
            }
            if (1 < LA) {
                uint q = tid + 1 * NT;
                if (ak) {
                    uint mm = q / (BK / 4), kk = (q % (BK / 4)) * 4, o = sa + kk * PA + mm / 4, e = mm % 4;
                    As[o][e] = ra1.x; As[o + PA][e] = ra1.y; As[o + 2 * PA][e] = ra1.z; As[o + 3 * PA][e] = ra1.w;
                } else {
                    As[sa + (q / (BM / 4)) * PA + q % (BM / 4)] = ra1;
                }
            }
            if (1 < LB) {
                uint q = tid + 1 * NT;
                if (bn) {
                    Bs[sb + (q / (BN / 4)) * PB + q % (BN / 4)] = rb1;
                } else {
                    uint nn = q / (BK / 4), kk = (q % (BK / 4)) * 4, o = sb + kk * PB + nn / 4, e = nn % 4;
                    Bs[o][e] = rb1.x; Bs[o + PB][e] = rb1.y; Bs[o + 2 * PB][e] = rb1.z; Bs[o + 3 * PB][e] = rb1.w;
                }
            }
            if (2 < LA) {
                uint q = tid + 2 * NT;
                if (ak) {
                    uint mm = q / (BK / 4), kk = (q % (BK / 4)) * 4, o = sa + kk * PA + mm / 4, e = mm % 4;
                    As[o][e] = ra2.x; As[o + PA][e] = ra2.y; As[o + 2 * PA][e] = ra2.z; As[o + 3 * PA][e] = ra2.w;
                } else {
                    As[sa + (q / (BM / 4)) * PA + q % (BM / 4)] = ra2;
                }
            }
            if (2 < LB) {
                uint q = tid + 2 * NT;
                if (bn) {
                    Bs[sb + (q / (BN / 4)) * PB + q % (BN / 4)] = rb2;
                } else {
                    uint nn = q / (BK / 4), kk = (q % (BK / 4)) * 4, o = sb + kk * PB + nn / 4, e = nn % 4;
                    Bs[o][e] = rb2.x; Bs[o + PB][e] = rb2.y; Bs[o + 2 * PB][e] = rb2.z; Bs[o + 3 * PB][e] = rb2.w;
                }
            }
            if (3 < LA) {
                uint q = tid + 3 * NT;
                if (ak) {
                    uint mm = q / (BK / 4), kk = (q % (BK / 4)) * 4, o = sa + kk * PA + mm / 4, e = mm % 4;
                    As[o][e] = ra3.x; As[o + PA][e] = ra3.y; As[o + 2 * PA][e] = ra3.z; As[o + 3 * PA][e] = ra3.w;
                } else {
                    As[sa + (q / (BM / 4)) * PA + q % (BM / 4)] = ra3;
                }
            }
            if (3 < LB) {
                uint q = tid + 3 * NT;
                if (bn) {
                    Bs[sb + (q / (BN / 4)) * PB + q % (BN / 4)] = rb3;
                } else {
                    uint nn = q / (BK / 4), kk = (q % (BK / 4)) * 4, o = sb + kk * PB + nn / 4, e = nn % 4;
                    Bs[o][e] = rb3.x; Bs[o + PB][e] = rb3.y; Bs[o + 2 * PB][e] = rb3.z; Bs[o + 3 * PB][e] = rb3.w;
                }
            }
        }
        barrier();
    }

    // 16-byte loads (beta != 0) and stores where C rows are unit-stride and 4-aligned; elementwise otherwise.
    const bool wide = p.scn == 1 && coff % 4 == 0 && p.scm % 4 == 0;
    store(m0 + 0 * 4 * WG_Y + ty * 4 + 0, n0 + 0 * 4 * WG_X + tx * 4, c0_0, coff, wide);
    store(m0 + 0 * 4 * WG_Y + ty * 4 + 1, n0 + 0 * 4 * WG_X + tx * 4, c1_0, coff, wide);
    store(m0 + 0 * 4 * WG_Y + ty * 4 + 2, n0 + 0 * 4 * WG_X + tx * 4, c2_0, coff, wide);
    store(m0 + 0 * 4 * WG_Y + ty * 4 + 3, n0 + 0 * 4 * WG_X + tx * 4, c3_0, coff, wide);
}
