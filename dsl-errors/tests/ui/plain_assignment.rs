// Outputs are sums: `=` instead of `+=`.
fmm_macros::kernel! {
    kernel PlainAssignment {
        source m;
        output phi;
        phi = m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
