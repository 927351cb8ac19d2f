// The first form of the DSL named the strength in `laplace(..)`; the
// strength is now declared on its own.
fmm_macros::kernel! {
    kernel FarFieldLaplaceNamesStrength {
        source m;
        output phi;
        far_field laplace(m) {
            phi = potential;
        }
        phi += m * select(r2 > 0.0, rsqrt(r2), 0.0);
    }
}

fn main() {}
