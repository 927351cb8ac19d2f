//! Choosing the backend: parsing, the fallback to the CPU, and the error
//! when CUDA is asked for where there is none. Runs on any machine: each
//! test checks what must happen both with and without a GPU.

use fmm_core::cuda::{driver_available, Gpu};
use fmm_core::kernels::Gravity;
use fmm_core::{evaluate, resolve, Backend, Error, Method, Particles};
use fmm_tests::{direct_cpu, rel_l2};

#[test]
fn backend_names_parse_and_unknown_ones_are_named() {
    assert_eq!("cpu".parse::<Backend>().unwrap(), Backend::Cpu);
    assert_eq!("CUDA".parse::<Backend>().unwrap(), Backend::Cuda);
    assert_eq!("gpu".parse::<Backend>().unwrap(), Backend::Cuda);
    assert_eq!(" auto ".parse::<Backend>().unwrap(), Backend::Auto);
    let e = "opencl".parse::<Backend>().unwrap_err();
    assert_eq!(e, Error::UnknownBackend("opencl".into()));
    assert!(e.to_string().contains("use cpu, cuda or auto"), "{e}");
}

#[test]
fn asking_for_cuda_without_a_gpu_is_a_clear_error() {
    match (resolve(Backend::Cuda), Gpu::shared()) {
        (Ok(_), Ok(_)) => {}
        (Err(e), Err(shared)) => {
            assert_eq!(e, shared);
            assert!(matches!(e, Error::CudaUnavailable(_)), "{e:?}");
            assert!(
                e.to_string().starts_with("no CUDA GPU can be used: "),
                "{e}"
            );
            if !driver_available() {
                assert!(e.to_string().contains("libcuda.so"), "{e}");
            }
        }
        (a, b) => panic!("resolve and Gpu::shared disagree: {a:?} vs {b:?}"),
    }
}

#[test]
fn auto_runs_somewhere_and_agrees_with_the_cpu() {
    let pos: Vec<[f64; 3]> = (0..300)
        .map(|i| {
            let t = i as f64;
            [
                (t * 0.618).fract(),
                (t * 0.414).fract(),
                (t * 0.732).fract(),
            ]
        })
        .collect();
    let mut s = Particles::<f64>::sources::<Gravity>(&pos).unwrap();
    s.set(
        "m",
        &(0..300).map(|i| 1.0 + (i % 7) as f64).collect::<Vec<_>>(),
    )
    .unwrap();
    let t = Particles::<f64>::targets::<Gravity>(&pos).unwrap();
    // Every method, on whatever Auto finds: the same numbers as on the
    // CPU (the GPU's f64 treecode and FMM walk the same trees with the same
    // lists, so they agree to rounding).
    for method in [Method::direct(), Method::treecode(0.5), Method::fmm(6, 0.5)] {
        let auto = evaluate::<Gravity, f64>(Backend::Auto, &method, &[0.01], &t, &s).unwrap();
        let cpu = evaluate::<Gravity, f64>(Backend::Cpu, &method, &[0.01], &t, &s).unwrap();
        for (a, c) in auto.outputs.slots().iter().zip(cpu.outputs.slots()) {
            let e = rel_l2(a, c);
            assert!(e < 1e-12, "{}: {e:e} on {}", method.name(), auto.device);
        }
    }
    let cpu = direct_cpu::<Gravity, f64>(&[0.01], &t, &s).unwrap();
    let forced =
        evaluate::<Gravity, f64>(Backend::Cpu, &Method::direct(), &[0.01], &t, &s).unwrap();
    assert_eq!(forced.outputs, cpu, "Backend::Cpu is the CPU evaluator");
    assert!(forced.device.starts_with("CPU"), "{}", forced.device);
}
