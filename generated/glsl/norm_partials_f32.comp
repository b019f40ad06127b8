#version 450
#extension GL_EXT_control_flow_attributes : enable

// An L2 norm that cannot overflow for finite inputs: pass 0 finds m = max |x| (NaN
// propagates), pass 1 sums (x / m)^2 <= 1 per element, so the sum is at most the element count, and
// the norm is m * sqrt(sum). Each pass is two-stage (norm_partials: one partial per `chunk` elements
// into part[poff + g]; norm_final: one workgroup combines part[0..n) into acc[oidx]). Pass 0 leaves m
// in acc[oidx], which pass 1 reads and replaces with the norm. Fixed order: same inputs, same bits.
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) readonly buffer Buf_x { float x[]; };
layout(std430, binding = 1) writeonly buffer Buf_part { float part[]; };
layout(std430, binding = 2) readonly buffer Buf_acc { float acc[]; };
layout(push_constant) uniform Push {
    uint n;
    uint chunk;
    uint poff;
    uint oidx;
    uint pass_;
} p;
layout(local_size_x_id = 0) in;
shared float red_wg_sum[WG];
float wg_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_sum[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_sum[t]; float b = red_wg_sum[t + s]; red_wg_sum[t] = a + b; }
        barrier();
    }
    float r = red_wg_sum[0];
    barrier();
    return r;
}
shared float red_wg_maxnan[WG];
float wg_maxnan(float v) {
    uint t = gl_LocalInvocationID.x;
    red_wg_maxnan[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { float a = red_wg_maxnan[t]; float b = red_wg_maxnan[t + s]; red_wg_maxnan[t] = (isnan(a) || isnan(b)) ? a + b : max(a, b); }
        barrier();
    }
    float r = red_wg_maxnan[0];
    barrier();
    return r;
}

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint g = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
    const float m = p.pass_ == 0 ? 0.0 : acc[p.oidx];
    float s = 0.0;
    {
        const uint lg = g;
        const uint lo = lg * p.chunk, hi = min(lo + p.chunk, p.n);
        if (p.pass_ == 0) {
            for (uint j = lo + t; j < hi; j += WG) { float a = abs(float(x[j])); s = (isnan(a) || isnan(s)) ? a + s : max(s, a); }
        } else if (m > 0.0 && !isinf(m)) {  // m = 0: all zero; m = inf or NaN: the sum is unused
            // Divide (not multiply by 1/m, which overflows for a subnormal m): |x / m| <= 1.
            for (uint j = lo + t; j < hi; j += WG) { float a = float(x[j]) / m; s += a * a; }
        }

    }
    if (p.pass_ == 0) s = wg_maxnan(s);
    else s = wg_sum(s);
    if (t == 0) part[p.poff + g] = s;
}
