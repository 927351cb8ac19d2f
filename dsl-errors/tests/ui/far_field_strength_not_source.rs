// The strength must be a source field; `eps` is a parameter.
fmm_macros::kernel! {
    kernel FarFieldStrengthNotSource {
        param eps;
        source m;
        output phi;
        strength eps;
        far_field laplace {
            phi = potential;
        }
        phi += m * select(r2 > 0.0, rsqrt(r2 + eps * eps), 0.0);
    }
}

fn main() {}
