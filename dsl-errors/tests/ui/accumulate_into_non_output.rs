// Only declared outputs can be accumulated into.
fmm_macros::kernel! {
    kernel AccumulateIntoNonOutput {
        source m;
        output phi;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        phi += m * inv;
        psi += m * inv;
    }
}

fn main() {}
