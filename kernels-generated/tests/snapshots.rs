//! One snapshot of the generated CUDA and one of the generated Rust per
//! built-in kernel.

use fmm_core::fmm_codegen::{emit, KernelDef};
use fmm_core::kernels::*;
use fmm_core::Kernel;

fn of<K: Kernel>() -> (&'static KernelDef, &'static str) {
    (K::def(), K::cuda_source())
}

fn builtins() -> Vec<(&'static KernelDef, &'static str)> {
    vec![
        of::<Gravity>(),
        of::<Coulomb>(),
        of::<BiotSavart>(),
        of::<Stretching>(),
        of::<VelocityStretching>(),
        of::<HuBiotSavart>(),
    ]
}

#[test]
fn cuda_sources() {
    for (def, cuda) in builtins() {
        insta::assert_snapshot!(format!("{}.cu", def.symbol()), cuda);
    }
}

#[test]
fn rust_evaluators() {
    for (def, _) in builtins() {
        let rust = emit::rust::emit_p2p_target(def, "::fmm_core");
        insta::assert_snapshot!(format!("{}.rs", def.symbol()), rust);
    }
}
