//! The generated CUDA of every built-in kernel compiles with NVRTC, for
//! the GPU architectures we target, one module per GPU method; each module
//! holds exactly the entry points the host may load from it. NVRTC needs
//! no GPU, only its library: `pip install nvidia-cuda-nvrtc` provides one,
//! and `.ci/run` does so and runs these with `--ignored`; the GPU host runs
//! them too.

use fmm_core::cuda::module::kernels_in_cubin;
use fmm_core::cuda::nvrtc;
use fmm_core::fmm_codegen::emit::cuda::CudaOptions;
use fmm_core::fmm_codegen::emit::Module;
use fmm_core::kernels::*;
use fmm_core::Kernel;

fn compile<K: Kernel>(arch: i32) {
    let def = K::def();
    for module in Module::ALL {
        let name = module.module_name(def);
        let cubin = nvrtc::compile_cubin(
            &name,
            K::cuda_source(module),
            arch,
            &nvrtc::default_options(),
        )
        .unwrap_or_else(|e| panic!("{name} for sm_{arch}: {e}"));
        // An ELF image, with every entry point the runtime may launch from
        // this module and no other.
        assert_eq!(&cubin[..4], b"\x7fELF", "{name}");
        let mut want: Vec<String> = module
            .entry_points(def, &CudaOptions::default())
            .into_iter()
            .map(|e| e.name)
            .collect();
        want.sort();
        assert_eq!(
            kernels_in_cubin(&cubin),
            want,
            "{name} for sm_{arch}: the kernels of the module and the entry points the host expects"
        );
    }
}

#[test]
#[ignore = "needs libnvrtc (pip install nvidia-cuda-nvrtc; .ci/run does)"]
fn nvrtc_compiles_every_builtin_for_hopper_and_ampere() {
    compile::<Gravity>(90);
    compile::<Coulomb>(90);
    compile::<BiotSavart>(90);
    compile::<Stretching>(90);
    compile::<VelocityStretching>(90);
    compile::<HuBiotSavart>(90);
    compile::<Stokeslet>(90);
    compile::<StokesletSingular>(90);
    compile::<Yukawa>(90);
    // The generated source does not depend on the architecture (the
    // hand-written modules do: their test compiles both): one kernel, the
    // largest, for Ampere (every kernel for both took twice CI's time).
    compile::<VelocityStretching>(80);
}

#[test]
#[ignore = "needs libnvrtc (pip install nvidia-cuda-nvrtc; .ci/run does)"]
fn nvrtc_compiles_the_vortex_layers_transpose_kernel() {
    // A kernel declared outside fmm-core, with no far field of its own.
    compile::<fmm_vortex::VelocityStretchingTranspose>(90);
}

#[test]
#[ignore = "needs libnvrtc (pip install nvidia-cuda-nvrtc; .ci/run does)"]
fn nvrtc_errors_show_the_generated_line() {
    let source =
        "extern \"C\" __global__ void broken(float* x) {\n    x[0] = not_a_function(1.0f);\n}\n";
    let e = nvrtc::compile_cubin("broken", source, 90, &nvrtc::default_options()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("NVRTC could not compile the generated CUDA for kernel broken"),
        "{text}"
    );
    assert!(text.contains("not_a_function"), "{text}");
    assert!(
        text.contains("      2 |     x[0] = not_a_function(1.0f);"),
        "{text}"
    );
}

/// Every hand-written module compiles, holds every entry point its loader
/// declares, and no kernel its loader does not declare: the entry lists on
/// the host are checked against the sources, and the sources' constants
/// come from the host (`fmm_core::cuda::module`).
#[test]
#[ignore = "needs libnvrtc (pip install nvidia-cuda-nvrtc; .ci/run does)"]
fn nvrtc_compiles_every_hand_written_module_with_the_entries_its_loader_declares() {
    use fmm_core::cuda::module::{expand, kernels_in_cubin, EntryList};
    use fmm_core::cuda::primitives::{self, Primitives};
    use fmm_core::essential::gpu::{self as essential, EssentialOps};
    use fmm_core::far::cuda::{self as far_nodes, NodeOps};
    use fmm_core::far::monopole::cuda::{self as monopole, MonopoleOps};
    use fmm_core::methods::fmm::cuda::compressed::{self, CompressedOps};
    use fmm_core::methods::fmm::cuda::periodic::{self, PeriodicOps};
    use fmm_core::methods::fmm::cuda::{ops_module, ops_source, Ops};
    use fmm_core::methods::fmm::MAX_GPU_ORDER;
    use fmm_core::methods::treecode::cuda::cells::{self, Cells};
    use fmm_core::tree::device::{build_source, Kernels, BUILD_MODULE};
    let mut modules: Vec<(String, String, EntryList)> = vec![
        (
            primitives::MODULE.into(),
            primitives::source(),
            Primitives::ENTRIES,
        ),
        (BUILD_MODULE.into(), build_source(), Kernels::ENTRIES),
        (cells::MODULE.into(), cells::source(), Cells::ENTRIES),
        (
            essential::MODULE.into(),
            essential::source(),
            EssentialOps::ENTRIES,
        ),
        (
            monopole::MODULE.into(),
            monopole::source(),
            MonopoleOps::ENTRIES,
        ),
        // One module for every order of both node far fields: the basis is
        // passed as arguments.
        (
            far_nodes::MODULE.into(),
            far_nodes::source(),
            NodeOps::ENTRIES,
        ),
        (
            compressed::MODULE.into(),
            compressed::source(),
            CompressedOps::ENTRIES,
        ),
        (
            periodic::MODULE.into(),
            periodic::source(),
            PeriodicOps::ENTRIES,
        ),
    ];
    for p in [1, 4, 6, 10, 16, MAX_GPU_ORDER] {
        modules.push((ops_module(p), ops_source(p), Ops::ENTRIES));
    }
    let jobs: Vec<_> = modules
        .iter()
        .flat_map(|m| [90, 80].map(|arch| (m, arch)))
        .collect();
    // Two threads taking the next job (NVRTC compiles separate programs at
    // once): one thread took 43 s of CI's two cores while the builtins'
    // test took 19 on the other.
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&((name, source, entries), arch)) = jobs.get(i) else {
                        break;
                    };
                    let options = nvrtc::default_options();
                    let cubin = nvrtc::compile_cubin(name, source, arch, &options)
                        .unwrap_or_else(|e| panic!("{name} for sm_{arch}: {e}"));
                    assert_eq!(&cubin[..4], b"\x7fELF");
                    let mut want = expand(entries);
                    want.sort();
                    assert_eq!(
                        kernels_in_cubin(&cubin),
                        want,
                        "{name} for sm_{arch}: the kernels of the source and the entries of its loader"
                    );
                })
            })
            .collect();
        for worker in workers {
            worker
                .join()
                .expect("a worker's checks (its panic is above)");
        }
    });
}

#[test]
#[ignore = "needs libnvrtc (pip install nvidia-cuda-nvrtc; .ci/run does)"]
fn nvrtc_compiles_the_vortex_layers_resident_state() {
    use fmm_vortex::resident::{cuda_source, ENTRY_POINTS};
    for arch in [90, 80] {
        for (what, source) in [("f32", cuda_source::<f32>()), ("f64", cuda_source::<f64>())] {
            let cubin =
                nvrtc::compile_cubin("vortex_state", &source, arch, &nvrtc::default_options())
                    .unwrap_or_else(|e| panic!("vortex_state {what} for sm_{arch}: {e}"));
            assert_eq!(
                kernels_in_cubin(&cubin),
                ENTRY_POINTS.to_vec(),
                "{what} sm_{arch}"
            );
        }
    }
}
