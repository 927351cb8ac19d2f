//! The fast multipole method (yokota2009 section 3, yokota2012 sections
//! 3.1 to 3.6) for every kernel that declares a Laplace far field: solid
//! harmonic expansions of order `p` ([`harmonics`], [`operators`]), a dual
//! tree traversal with the MAC `theta` ([`traversal`]), and the near field
//! by the kernel's own generated evaluator, smoothing included (the far
//! field is the singular Laplace one, as `shared/KERNELS.md` says).
//!
//! A kernel's far field is `outputs = coefficient * term` with the terms
//! of the declaration: the potential and its gradient for a scalar
//! strength (gravity, Coulomb); for a vec3 strength `alpha`, three scalar
//! expansions of `psi = sum alpha_j / r` whose curl is the velocity
//! (Biot-Savart, hu2011).

pub mod accuracy;
pub mod cpu;
pub mod gpu;
pub mod harmonics;
#[cfg(target_arch = "x86_64")]
pub mod m2l_lanes;
pub mod operators;
pub mod traversal;

pub use accuracy::{fmm_cpu_tolerance, fmm_cuda_tolerance, Achieved};
pub use cpu::fmm_cpu;
pub use gpu::{fmm_cuda, MAX_GPU_ORDER};

/// Settings of the FMM.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FmmOptions {
    /// Expansion order (terms of degree 0 to `p`), 1 to [`MAX_ORDER`].
    pub p: usize,
    /// Multipole acceptance criterion: cells interact by M2L when
    /// `R_t + R_s < theta |z_t - z_s|`; smaller is more accurate.
    pub theta: f64,
    /// Most particles in a leaf (of both trees).
    pub ncrit: usize,
}

/// The highest expansion order the operators take.
pub const MAX_ORDER: usize = 30;

impl Default for FmmOptions {
    /// Order 6, theta 0.5, ncrit 64: 1.1e-5 relative L2 error in the
    /// gravity potential and acceleration of 10^6 points in a cube (f32;
    /// `docs/BENCHMARKS.md`).
    fn default() -> Self {
        FmmOptions {
            p: 6,
            theta: 0.5,
            ncrit: 64,
        }
    }
}

/// What an FMM evaluation did, and how long each stage took.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FmmStats {
    pub source_cells: usize,
    pub target_cells: usize,
    /// M2L translations.
    pub m2l: u64,
    /// Particle-particle interactions of the near field.
    pub p2p: u64,
    /// Seconds checking the inputs and loading the compiled operators and
    /// kernel (GPU only).
    pub setup_seconds: f64,
    /// Seconds copying the particles to the device (GPU only).
    pub upload_seconds: f64,
    /// Seconds building both trees.
    pub tree_seconds: f64,
    /// Seconds in P2M and M2M.
    pub upward_seconds: f64,
    /// Seconds in the traversal.
    pub traversal_seconds: f64,
    pub m2l_seconds: f64,
    /// Which M2L ran on the GPU: "f32 lanes" (float, lanes over source
    /// cells) or "f64"; empty on the CPU.
    pub m2l_kind: &'static str,
    /// Seconds in L2L and L2P.
    pub downward_seconds: f64,
    pub p2p_seconds: f64,
    /// Seconds putting the outputs back in the caller's order and copying
    /// them to the host (GPU only).
    pub download_seconds: f64,
}
