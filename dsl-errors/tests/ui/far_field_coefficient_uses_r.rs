// A far-field coefficient cannot depend on the distance `r`.
fmm_macros::kernel! {
    kernel FarFieldCoefficientUsesR {
        source m;
        output phi;
        strength m;
        far_field laplace {
            phi = r * potential;
        }
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
