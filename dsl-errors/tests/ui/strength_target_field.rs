// The strength is what each source carries; `w` belongs to the targets.
fmm_macros::kernel! {
    kernel StrengthTargetField {
        source m;
        target w;
        output phi;
        strength w;
        phi += w * m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
