// A far-field coefficient may only use numbers and `PI`, not a parameter.
fmm_macros::kernel! {
    kernel FarFieldCoefficientNotConstant {
        param g;
        source m;
        output phi;
        strength m;
        far_field laplace {
            phi = g * potential;
        }
        phi += g * m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
