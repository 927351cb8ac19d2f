// A comparison is a boolean, usable only as a condition.
fmm_macros::kernel! {
    kernel BooleanInArithmetic {
        source m;
        output phi;
        phi += m * (r2 > 1.0) * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
