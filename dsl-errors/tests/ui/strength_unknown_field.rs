// The strength names a source field; `mass` is not declared.
fmm_macros::kernel! {
    kernel StrengthUnknownField {
        source m;
        output phi;
        strength mass;
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
