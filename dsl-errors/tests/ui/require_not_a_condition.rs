fmm_macros::kernel! {
    pub kernel RequireNumber {
        source sigma;
        output phi;
        require sigma * 2.0;
        phi += select(r2 > 0.0, sigma * rsqrt(r2), 0.0);
    }
}

fn main() {}
