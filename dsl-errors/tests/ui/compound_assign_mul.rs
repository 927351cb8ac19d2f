// Outputs are sums: only `+=` and `-=` accumulate.
fmm_macros::kernel! {
    kernel CompoundAssignMul {
        source m;
        output phi;
        phi *= m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
