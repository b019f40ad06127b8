// Softplus, the Mamba scans' Δ = softplus(dt) (scan.comp.j2, decode.comp.j2's mamba1_decode), stable for any x:
// max(x, 0) + log1p(e^-|x|).
// log1p(e) is its series below e = 1/8 (truncation < 1e-9 relative): log(1 + e) there loses digits to the
// rounding of 1 + e (1.8e-4 relative at e = 3e-4), which the zero-order hold's Δ² in d/dA makes visible.
float softplus_f(float x) {
    const float e = exp(-abs(x));
    float l;
    if (e < 0.125) {
        l = 0.0;
        for (int k = 10; k >= 1; --k) l = 1.0 / float(k) - e * l;
        l *= e;
    } else {
        l = log(1.0 + e);
    }
    return max(x, 0.0) + l;
}
