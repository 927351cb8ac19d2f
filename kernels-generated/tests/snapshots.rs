//! One snapshot of the generated CUDA per built-in kernel and module, and
//! one of the generated Rust per built-in kernel. Each GPU method has a
//! module of its own (`fmm_codegen::emit::Module`), so a change to one
//! method's code generation shows up in that method's snapshots only.

use fmm_core::fmm_codegen::emit::Module;
use fmm_core::fmm_codegen::{emit, KernelDef};
use fmm_core::kernels::*;
use fmm_core::Kernel;

/// A kernel's IR and its source of each module.
type Sources = (&'static KernelDef, fn(Module) -> &'static str);

fn of<K: Kernel>() -> Sources {
    (K::def(), K::cuda_source)
}

fn builtins() -> Vec<Sources> {
    vec![
        of::<Gravity>(),
        of::<Coulomb>(),
        of::<BiotSavart>(),
        of::<Stretching>(),
        of::<VelocityStretching>(),
        of::<HuBiotSavart>(),
        of::<Stokeslet>(),
        of::<StokesletSingular>(),
        of::<Yukawa>(),
    ]
}

#[test]
fn cuda_sources() {
    for (def, cuda) in builtins() {
        for module in Module::ALL {
            insta::assert_snapshot!(format!("{}.cu", module.module_name(def)), cuda(module));
        }
    }
}

#[test]
fn rust_evaluators() {
    for (def, _) in builtins() {
        let rust = emit::rust::emit_p2p_target(def, "::fmm_core");
        insta::assert_snapshot!(format!("{}.rs", def.symbol()), rust);
    }
}
