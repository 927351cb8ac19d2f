//! Valid custom kernels compile and implement `fmm_core::Kernel`: one
//! without a far field, one with a scaled Laplace far field. (A test here
//! rather than a trybuild pass case: with no pass case trybuild only
//! checks the DSL's mistakes, which needs no code generated for the
//! dependencies.)

use fmm_core::{kernel, Kernel};

kernel! {
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

kernel! {
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

#[test]
fn custom_kernels_compile_and_emit_every_cuda_module() {
    assert_eq!(Screened::def().outputs.len(), 2);
    assert_eq!(ScaledGravity::def().outputs.len(), 2);
    for module in fmm_core::fmm_codegen::emit::Module::ALL {
        assert!(!Screened::cuda_source(module).is_empty());
        assert!(!ScaledGravity::cuda_source(module).is_empty());
    }
}
