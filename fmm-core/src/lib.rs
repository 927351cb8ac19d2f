//! The runtime of the N-body kernel compiler, generic over kernels
//! declared with [`kernel!`].
//!
//! A kernel is declared once; this crate runs it. Today: direct summation
//! ([`direct`]) on the GPU through CUDA when one is there ([`cuda`]: the
//! generated source compiled at run time by NVRTC, cached on disk), else on
//! the CPU ([`direct_cpu`]: parallel over targets with rayon), in f32 or
//! f64. The built-in kernels of the papers are in [`kernels`].

// The built-in kernels are declared with the crate's own macro, whose
// expansion names `::fmm_core`.
extern crate self as fmm_core;

pub mod backend;
pub mod cuda;
pub mod direct;
pub mod distributions;
pub mod error;
pub mod fmm;
pub mod io;
pub mod kernel;
pub mod kernels;
pub mod particles;
pub mod real;
pub mod require;
#[cfg(target_arch = "x86_64")]
pub mod simd;
pub mod tree;

pub use backend::{resolve, Backend};
pub use direct::{check_params, direct, direct_cpu, Outputs};
pub use error::Error;
pub use fmm::{
    fmm_cpu, fmm_cpu_tolerance, fmm_cuda, fmm_cuda_tolerance, Achieved, FmmOptions, FmmStats,
};
pub use fmm_codegen;
pub use fmm_macros::kernel;
pub use kernel::{Kernel, SourceSlices, BLOCK, LANES, MAX_SLOTS};
pub use particles::Particles;
pub use real::Real;
