// What a source adds must be linear in its strength, so that strengths add
// up over a cell; `m * m` is not.
fmm_macros::kernel! {
    kernel StrengthNotLinear {
        source m;
        output phi;
        strength m;
        phi += m * m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
