// `%` is not a supported operator.
fmm_macros::kernel! {
    kernel RemainderOperator {
        source m;
        output phi;
        phi += (m % 2.0) * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
