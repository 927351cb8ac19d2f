// A Laplace far field expands the sum of the strength, so it needs one.
fmm_macros::kernel! {
    kernel FarFieldWithoutStrength {
        source m;
        output phi;
        far_field laplace {
            phi = potential;
        }
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
