// An `if` in a kernel body is a value and needs an `else`.
fmm_macros::kernel! {
    kernel IfWithoutElse {
        source m;
        output phi;
        phi += if r2 > 0.0 { m * rsqrt(r2) };
    }
}

fn main() {}
