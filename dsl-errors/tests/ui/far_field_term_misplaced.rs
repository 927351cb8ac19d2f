// A Laplace term can only be scaled: `potential + 1.0` is not a multiple
// of the potential, so the far field cannot represent it.
fmm_macros::kernel! {
    kernel FarFieldTermMisplaced {
        source m;
        output phi;
        strength m;
        far_field laplace {
            phi = 2.0 * (potential + 1.0);
        }
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
