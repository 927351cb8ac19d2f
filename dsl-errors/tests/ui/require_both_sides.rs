fmm_macros::kernel! {
    pub kernel RequireBothSides {
        source m;
        target w;
        output phi;
        require m < w;
        phi += select(r2 > 0.0, m * w * rsqrt(r2), 0.0);
    }
}

fn main() {}
