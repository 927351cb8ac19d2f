// Every output needs a far-field expression; `acc` has none.
fmm_macros::kernel! {
    kernel FarFieldMissingOutput {
        source m;
        output phi;
        output acc: vec3;
        strength m;
        far_field laplace {
            phi = potential;
        }
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        phi += m * inv;
        acc += m * inv * inv * inv * d;
    }
}

fn main() {}
