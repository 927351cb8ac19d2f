// Outputs are sums: `=` instead of `+=`.
fmm_core::kernel! {
    kernel PlainAssignment {
        source m;
        output phi;
        phi = m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
