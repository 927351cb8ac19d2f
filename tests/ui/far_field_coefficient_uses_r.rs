// A far-field coefficient cannot depend on the distance `r`.
fmm_core::kernel! {
    kernel FarFieldCoefficientUsesR {
        source m;
        output phi;
        far_field laplace(m) {
            phi = r * potential;
        }
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
