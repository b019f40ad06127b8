#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 0) buffer Buf_param { float param[]; };
layout(std430, binding = 1) readonly buffer Buf_grad { float grad[]; };
layout(std430, binding = 2) buffer Buf_m { float m[]; };
layout(std430, binding = 3) buffer Buf_v { float v[]; };
layout(std430, binding = 4) readonly buffer Buf_hyper { float hyper[]; };
layout(std430, binding = 5) buffer Buf_nonfinite { uint nonfinite[]; };
layout(std430, binding = 6) readonly buffer Buf_clip { float clip[]; };
layout(std430, binding = 7) readonly buffer Buf_scale { float scale[]; };
layout(std430, binding = 8) readonly buffer Buf_overflow { float overflow[]; };
layout(push_constant) uniform Push {
    uint n;
    float max_norm;
    uint unscale;
} p;
layout(local_size_x_id = 0) in;

void main() {
    const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    // AdamW (decoupled decay, bias-corrected moments) with a per-element trust region.
    // hyper = [lr, beta1, beta2, eps, weight_decay, 1 - beta1^t, 1 - beta2^t, max_delta]: written by the
    // host each step into a device buffer, so a recorded step replays unchanged.
    // A non-finite gradient leaves this element's parameter and moments untouched and is counted; so
    // does a finite gradient whose moments or step would overflow (g^2 = inf for |g| >~ 1e19: stored,
    // v = inf would freeze the element forever), checked before anything is stored.
    // max_norm > 0: gradient clipping fused in (the train loop's clip_grad_norm(defer=True)): g is
    // scaled as clip_scale would have scaled it in place (the same float operations, same bits) by the
    // norm in clip[0]; the gradient buffer itself is left unscaled.
    // unscale != 0: dynamic loss scaling fused in (the train loop's unscale_grads(in_place=False)): the
    // gradient holds loss-scaled values; g = grad * scale[1] (1 / the scale: the same product ops.loss_unscale
    // would have stored, same bits), unless overflow[0] (the norm of every scaled gradient) is inf or NaN:
    // then the step overflowed and every element is skipped and counted, as after loss_unscale's NaN.
    float g = grad[i];
    if (p.unscale != 0u) {
        const float o = overflow[0];
        if (isnan(o) || isinf(o)) { atomicAdd(nonfinite[0], 1u); return; }
        g = g * scale[1];
    }
    if (p.max_norm > 0.0) {
        const float norm = clip[0];
        if (!(isnan(norm) || isinf(norm))) {
            const float s = min(p.max_norm / (norm + 1e-6), 1.0);
            if (s < 1.0) g = g * s;
        }
    }
    if (isnan(g) || isinf(g)) { atomicAdd(nonfinite[0], 1u); return; }
    const float lr = hyper[0], b1 = hyper[1], b2 = hyper[2], eps = hyper[3], wd = hyper[4];
    const float mi = b1 * m[i] + (1.0 - b1) * g;
    const float vi = b2 * v[i] + (1.0 - b2) * g * g;
    float step = lr * (mi / hyper[5]) / (sqrt(vi / hyper[6]) + eps);
    if (isnan(mi) || isinf(mi) || isnan(vi) || isinf(vi) || isnan(step) || isinf(step)) {
        atomicAdd(nonfinite[0], 1u);
        return;
    }
    m[i] = mi;
    v[i] = vi;
    const float md = hyper[7];
    if (md > 0.0) step = clamp(step, -md, md);  // the trust region bounds the Adam step, not the decay
    param[i] = param[i] * (1.0 - lr * wd) - step;
}
