// A far-field entry for a name that is not an output.
fmm_macros::kernel! {
    kernel FarFieldUnknownOutput {
        source m;
        output phi;
        strength m;
        far_field laplace {
            phi = potential;
            psi = potential;
        }
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
