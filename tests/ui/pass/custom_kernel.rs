// Valid custom kernels compile and implement `fmm_core::Kernel`: one
// without a far field, one with a scaled Laplace far field.
use fmm_core::Kernel;

fmm_core::kernel! {
    /// Screened Coulomb (Yukawa) potential and its field.
    pub kernel Screened {
        param kappa;
        source q;
        output phi;
        output e: vec3;
        strength q;
        far_field none;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        let s = exp(-kappa * r);
        phi += q * s * inv;
        e += q * s * (1.0 + kappa * r) * powi(inv, 3) * d;
    }
}

fmm_core::kernel! {
    /// Gravity in units where the far field carries 1 / (4 pi).
    kernel ScaledGravity {
        source m;
        output phi;
        output acc: vec3;
        strength m;
        far_field laplace {
            phi = -potential / (4.0 * PI);
            acc = gradient / (4.0 * PI);
        }
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        phi -= m * inv / (4.0 * PI);
        acc -= m * inv * inv * inv * d / (4.0 * PI);
    }
}

fn main() {
    assert_eq!(Screened::def().outputs.len(), 2);
    assert_eq!(ScaledGravity::def().outputs.len(), 2);
    for module in fmm_core::fmm_codegen::emit::Module::ALL {
        assert!(!Screened::cuda_source(module).is_empty());
    }
}
