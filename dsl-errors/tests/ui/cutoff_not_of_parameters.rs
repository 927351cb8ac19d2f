// A cutoff is one radius for every pair: of the parameters only, not of a
// particle's fields.
fmm_macros::kernel! {
    kernel CutoffOfSource {
        param kappa;
        source q;
        source h;
        output phi;
        cutoff 2.0 * h;
        phi += select(r2 > 0.0, q * exp(-kappa * r) * rsqrt(r2), 0.0);
    }
}

fn main() {}
