//! The generated CUDA of every built-in kernel compiles with NVRTC, for
//! the GPU architectures we target. NVRTC needs no GPU, only its library:
//! `pip install nvidia-cuda-nvrtc` provides one, and `.ci/run` does so and
//! runs these with `--ignored`; the GPU host runs them too.

use fmm_core::cuda::nvrtc;
use fmm_core::kernels::*;
use fmm_core::Kernel;

fn compile<K: Kernel>(arch: i32) {
    let def = K::def();
    let cubin = nvrtc::compile_cubin(
        &def.symbol(),
        K::cuda_source(),
        arch,
        &nvrtc::default_options(),
    )
    .unwrap_or_else(|e| panic!("{} for sm_{arch}: {e}", def.name));
    // An ELF image, with every entry point the runtime may launch.
    assert_eq!(&cubin[..4], b"\x7fELF", "{}", def.name);
    let text = String::from_utf8_lossy(&cubin);
    for (prec, _) in fmm_core::fmm_codegen::emit::cuda::PRECISIONS {
        for shape in fmm_core::fmm_codegen::emit::cuda::CudaOptions::default().shapes {
            let entry = fmm_core::fmm_codegen::emit::cuda::entry_name(def, prec, shape);
            assert!(
                text.contains(&entry),
                "{entry} missing from the sm_{arch} module"
            );
        }
        for entry in [
            fmm_core::fmm_codegen::emit::walk::walk_entry_name(def, prec),
            fmm_core::fmm_codegen::emit::p2p_list::p2p_list_entry_name(def, prec),
        ] {
            assert!(
                text.contains(&entry),
                "{entry} missing from the sm_{arch} module"
            );
        }
    }
}

#[test]
#[ignore = "needs libnvrtc (pip install nvidia-cuda-nvrtc; .ci/run does)"]
fn nvrtc_compiles_every_builtin_for_hopper_and_ampere() {
    for arch in [90, 80] {
        compile::<Gravity>(arch);
        compile::<Coulomb>(arch);
        compile::<BiotSavart>(arch);
        compile::<Stretching>(arch);
        compile::<VelocityStretching>(arch);
        compile::<HuBiotSavart>(arch);
    }
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

#[test]
#[ignore = "needs libnvrtc (pip install nvidia-cuda-nvrtc; .ci/run does)"]
fn nvrtc_compiles_the_tree_build_kernels() {
    use fmm_core::tree::device_build::{BUILD_ENTRIES, BUILD_MODULE, BUILD_SOURCE};
    for arch in [90, 80] {
        let cubin =
            nvrtc::compile_cubin(BUILD_MODULE, BUILD_SOURCE, arch, &nvrtc::default_options())
                .unwrap_or_else(|e| panic!("tree build for sm_{arch}: {e}"));
        assert_eq!(&cubin[..4], b"\x7fELF");
        let text = String::from_utf8_lossy(&cubin);
        for entry in BUILD_ENTRIES {
            assert!(
                text.contains(entry),
                "{entry} missing from the sm_{arch} module"
            );
        }
    }
}

#[test]
#[ignore = "needs libnvrtc (pip install nvidia-cuda-nvrtc; .ci/run does)"]
fn nvrtc_compiles_the_fmm_operators_at_every_order() {
    use fmm_core::fmm::gpu::{MAX_GPU_ORDER, OPS_SOURCE};
    for p in [1, 4, 6, 10, 16, MAX_GPU_ORDER] {
        let source = format!("#define FMM_P {p}\n{OPS_SOURCE}");
        let cubin = nvrtc::compile_cubin("fmm_ops", &source, 90, &nvrtc::default_options())
            .unwrap_or_else(|e| panic!("FMM operators at p = {p}: {e}"));
        let text = String::from_utf8_lossy(&cubin);
        for entry in [
            "fmm_m2l_lanes_1",
            "fmm_m2l_lanes_3",
            "fmm_full_range_f32",
            "fmm_m2l",
            "fmm_m2m",
            "fmm_l2l",
            "fmm_p2m_f32",
            "fmm_l2p_f64",
        ] {
            assert!(text.contains(entry), "{entry} missing at p = {p}");
        }
    }
}
