// `select` takes three arguments.
fmm_macros::kernel! {
    kernel WrongArity {
        source m;
        output phi;
        phi += m * select(r2 > 0.0, rsqrt(r2));
    }
}

fn main() {}
