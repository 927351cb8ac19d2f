//! The runtime of the N-body kernel compiler, generic over kernels
//! declared with [`kernel!`].
//!
//! A kernel is declared once; this crate runs it, by every method, on the
//! GPU (CUDA: the generated source compiled at run time by NVRTC, cached on
//! disk) or the CPU (rayon, AVX2 where there is), through one front door:
//! [`evaluate`] with a [`Method`] ([`Method::Direct`], [`Method::Treecode`],
//! [`Method::Fmm`]) and a [`Backend`]. The built-in kernels of the papers
//! are in [`kernels`].
//!
//! The layout follows the method-as-sibling shape: [`methods`] holds one
//! folder per method, each with its CPU and CUDA parts, over the shared
//! floors ([`problem`] and its checks, [`outputs`], [`tree`], [`cuda`]'s
//! device helpers, [`reference`] for accuracy); a method never imports a
//! sibling.

// The built-in kernels are declared with the crate's own macro, whose
// expansion names `::fmm_core`.
extern crate self as fmm_core;

pub mod accuracy;
pub mod backend;
pub mod cuda;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod distributions;
pub mod domain;
pub mod error;
pub mod essential;
pub mod evaluate;
pub mod far;
pub mod io;
pub mod kernel;
pub mod kernels;
pub(crate) mod memory;
pub mod methods;
pub mod outputs;
pub mod particles;
pub mod problem;
pub mod real;
pub mod reference;
pub mod require;
#[cfg(target_arch = "x86_64")]
pub mod simd;
pub mod stats;
pub mod tree;

pub use accuracy::Achieved;
pub use backend::{resolve, Backend, Device};
pub use cuda::resident::{DeviceOutputs, DeviceParticles};
/// The CUDA driver bindings the GPU path is built on, for integrators of
/// the caller's own that update [`DeviceParticles`] in place.
pub use cudarc;
pub use domain::{Boundary, Domain, PeriodicBox, Wall};
pub use error::Error;
pub use evaluate::two_lots::{evaluate_resident_in_two_lots, evaluate_resident_sharing_the_tree};
pub use evaluate::{evaluate, evaluate_on, evaluate_resident, Evaluation, ResidentEvaluation};
pub use far::FarField;
pub use fmm_codegen;
pub use fmm_macros::kernel;
pub use kernel::{Kernel, SourceSlices, BLOCK, LANES, MAX_SLOTS};
pub use methods::fmm::{Accuracy, FmmOptions, GpuTuning, M2lChoice, NodeM2l, Settings};
pub use methods::{DirectOptions, Method, TreeOptions};
pub use outputs::Outputs;
pub use particles::Particles;
pub use problem::{check_params, Problem};
pub use real::Real;
pub use stats::{M2lKind, Stage, Stats};
