//! The fast multipole method (yokota2009 section 3, yokota2012 sections
//! 3.1 to 3.6) for every kernel that declares a Laplace far field: solid
//! harmonic expansions of order `p` ([`harmonics`], [`operators`]), a dual
//! tree traversal with the MAC `theta` ([`traversal`]), and the near field
//! by the kernel's own generated evaluator, smoothing included (the far
//! field is the singular Laplace one, as `shared/KERNELS.md` says). On the
//! CPU ([`cpu`]) and entirely on the GPU ([`cuda`]); [`tables`] holds the
//! errors measured per setting, from which `crate::accuracy` chooses.
//!
//! A kernel's far field is `outputs = coefficient * term` with the terms
//! of the declaration: the potential and its gradient for a scalar
//! strength (gravity, Coulomb); for a vec3 strength `alpha`, three scalar
//! expansions of `psi = sum alpha_j / r` whose curl is the velocity
//! (Biot-Savart, hu2011).

pub mod cpu;
pub mod cpu_nodes;
pub mod cuda;
#[cfg(target_arch = "x86_64")]
pub mod m2l_lanes;
#[cfg(target_arch = "x86_64")]
pub mod pass_lanes;

// The Laplace expansions are a far field (`far::laplace`), under every tree
// method; the FMM's paths to them kept.
pub(crate) use crate::far::laplace::images;
pub use crate::far::laplace::{harmonics, operators};
pub mod periodic_reference;
pub(crate) mod skeleton;
pub mod tables;
pub use crate::tree::traversal;

pub use cuda::{MAX_F32_M2L_ORDER, MAX_GPU_ORDER};

use crate::domain::{Moments, PeriodicBox};
use crate::error::Error;
use crate::far::FarField;
use fmm_codegen::kernel::FarTerm;

/// The smallest tolerance taken: the f64 direct sum that errors are
/// measured against rounds at about 1e-16 a term, and its sums of many
/// terms of both signs lose more.
pub const MIN_TOLERANCE: f64 = 1e-13;

/// The highest expansion order the operators take (the Laplace far
/// field's, defined with the far fields).
pub use crate::far::LAPLACE_MAX_ORDER as MAX_ORDER;

/// How accurate the FMM is asked to be.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Accuracy {
    /// Expansion order `p` (terms of degree 0 to `p`, 1 to [`MAX_ORDER`])
    /// and the MAC `theta`: cells interact by M2L when
    /// `R_t + R_s < theta |z_t - z_s|`; smaller is more accurate.
    Fixed { p: usize, theta: f64 },
    /// A relative L2 error: the settings are chosen for it from measured
    /// tables and the error achieved is measured on sampled targets
    /// against an f64 direct sum (`crate::accuracy`).
    Tolerance(f64),
}

/// Settings of the FMM.
#[derive(Clone, Debug, PartialEq)]
pub struct FmmOptions {
    pub accuracy: Accuracy,
    /// How cells' far fields are represented ([`FarField`]): from the
    /// declaration by default. `p` is the far field's order: the expansion
    /// order, the pseudo-particles' order (yokota2009 Table 1), or the
    /// Chebyshev nodes' degree (`p + 1` a side).
    pub far_field: FarField,
    /// Most particles in a leaf (of both trees); 0: the far field's own
    /// ([`FmmOptions::leaf_size`]).
    pub ncrit: usize,
    /// How the node far fields' M2L runs (CPU and GPU).
    pub node_m2l: NodeM2l,
    /// The compressed M2L's rank: singular values kept down to this
    /// fraction of the largest, from [`crate::far::MIN_RANK_TOLERANCE`]
    /// (1e-8) to below 1. `None`: `10^-(p+2)` but at least 1e-8, 10 to
    /// 100 below the interpolation's own error (`docs/FAR_FIELD.md`); a
    /// larger one is faster where the error has room (Yukawa: 1e-4 at
    /// order 5 leaves the error as it is).
    pub rank_tolerance: Option<f64>,
    /// Whether the CPU's M2L of the Laplace expansions may run in f32
    /// lanes (`cpu::single_m2l`): `Auto` where the settings' error leaves
    /// room, `Double` never (to compare).
    pub cpu_m2l: M2lChoice,
    /// Tuning of the GPU's M2L (defaults are measured; see the fields).
    pub gpu: GpuTuning,
    /// Cells closer than this interact particle to particle whatever the
    /// MAC (the Laplace expansions): a smoothed kernel (a core radius,
    /// softening) is not its far field within its smoothing's reach. 0:
    /// the plain MAC. A tolerance finds it from the kernel itself
    /// (`Achieved::near` says what it took).
    pub near: f64,
}

/// How the node far fields' (`ppm`, `ki`) M2L runs. The GPU compresses
/// where the CPU does (both trees in one root cube, the source fields other
/// than the strength the same in every cell, operators within the largest
/// side); elsewhere it runs the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeM2l {
    /// Precomputed operators per cell offset, compressed by their singular
    /// vectors ([`crate::far`]'s `compressed`), where they apply (the
    /// source fields other than the strength the same in every cell);
    /// else the kernel.
    #[default]
    Compressed,
    /// The kernel between node sets for every pair of cells (to compare).
    Kernel,
}

impl FmmOptions {
    /// Order `p` and MAC `theta`, ncrit 64.
    pub fn fixed(p: usize, theta: f64) -> Self {
        FmmOptions {
            accuracy: Accuracy::Fixed { p, theta },
            ..FmmOptions::default()
        }
    }

    /// The leaf size with the far field `far_field`: `ncrit`, or where it
    /// is 0 what measured fastest for that far field (2 CPU cores, 5e4 to
    /// 1e6 points, 2026-11-23): 64 for the Laplace expansions, whose M2L is
    /// cheap; 200 for Chebyshev nodes and 128 for pseudo-particles, whose
    /// M2L (the kernel between node sets) costs as much as a few hundred
    /// particles' P2P. A uniform cube splits a whole level at once, so
    /// where `N / 8^L` is just above `ncrit` the leaves are 8 times
    /// smaller than they could be: Laplace at 3x10^5 points has 9 a leaf
    /// at 64 and 73 at 128, and 128 was faster there (p 9, theta 0.58:
    /// 0.45 s at 7.3e-6 against 0.63 s at 1.5e-5), 64 at 5x10^4 (p 8, theta
    /// 0.6: 0.065 s at 2.1e-5 against 98 a leaf, p 7, 0.074 s at 1.5e-5).
    pub fn leaf_size(&self, far_field: FarField) -> usize {
        match (self.ncrit, far_field) {
            (0, FarField::KernelIndependent) => 200,
            (0, FarField::Ppm) => 128,
            (0, _) => 64,
            (n, _) => n,
        }
    }

    /// These options with the far field `far_field`.
    pub fn with_far_field(self, far_field: FarField) -> Self {
        FmmOptions { far_field, ..self }
    }

    /// The settings chosen for the relative L2 error `tol`.
    pub fn tolerance(tol: f64) -> Self {
        FmmOptions {
            accuracy: Accuracy::Tolerance(tol),
            ..FmmOptions::default()
        }
    }

    /// Checks the options: an order the operators take, a MAC that keeps
    /// the expansions convergent (`theta < 1`), a tolerance above 0, at
    /// least one particle a leaf.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if let Some(t) = self.rank_tolerance {
            if !((crate::far::MIN_RANK_TOLERANCE..1.0).contains(&t)) {
                return Err(Error::BadOption(format!(
                    "the rank tolerance is a fraction of the largest singular value, from {:e} \
                     (below it the singular values, from the eigenvalues of Gram matrices, are \
                     f64 rounding) to below 1, not {t}",
                    crate::far::MIN_RANK_TOLERANCE
                )));
            }
        }
        match self.accuracy {
            // The order is checked against the far field the kernel
            // resolves to (`Method::check`).
            Accuracy::Fixed { theta, .. } => check_theta(theta)?,
            Accuracy::Tolerance(tol) => {
                if !(tol > 0.0 && tol.is_finite()) {
                    return Err(Error::BadOption(format!(
                        "the tolerance must be a finite number above 0, not {tol}"
                    )));
                }
                if tol < MIN_TOLERANCE {
                    return Err(Error::BadOption(format!(
                        "a tolerance of {tol:e} is below {MIN_TOLERANCE:e}, what the f64 direct \
                         sum it is measured against can be trusted to (its own rounding): ask \
                         for {MIN_TOLERANCE:e} or more"
                    )));
                }
            }
        }
        Ok(())
    }
}

impl Default for FmmOptions {
    /// Order 6, theta 0.5, the far field from the declaration and its
    /// leaf size (`docs/BENCHMARKS.md` has what they give).
    fn default() -> Self {
        FmmOptions {
            accuracy: Accuracy::Fixed { p: 6, theta: 0.5 },
            far_field: FarField::Auto,
            ncrit: 0,
            node_m2l: NodeM2l::default(),
            rank_tolerance: None,
            cpu_m2l: M2lChoice::Auto,
            gpu: GpuTuning::default(),
            near: 0.0,
        }
    }
}

/// Checks a MAC.
pub(crate) fn check_theta(theta: f64) -> Result<(), Error> {
    if !(theta > 0.0 && theta < 1.0) {
        return Err(Error::BadOption(format!(
            "theta must be above 0 and below 1 for the expansions to converge, not {theta}"
        )));
    }
    Ok(())
}

/// Which M2L the GPU (`GpuTuning::m2l`) or the CPU (`FmmOptions::cpu_m2l`)
/// runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum M2lChoice {
    /// The float M2L where it applies, else the double one. On the GPU,
    /// with lanes over source cells: f32 particles, one tree, p up to
    /// [`MAX_F32_M2L_ORDER`]. On the CPU, f32 lanes: f32 particles or an
    /// expected error of at least 1e-6, p up to 12 (`cpu::single_m2l`).
    #[default]
    Auto,
    /// Always the double M2L (to compare).
    Double,
}

/// Tuning of the GPU's M2L. The defaults are what measured fastest on the
/// H100 and H200 (`docs/BENCHMARKS.md`); benchmarks set these from flags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuTuning {
    pub m2l: M2lChoice,
    /// Shared memory per block of the double M2L, in bytes (0: 8 KB), which
    /// sets how many source cells a block takes at once.
    pub m2l_shared_bytes: usize,
    /// Warps per block of the float M2L (0: 8 for one expansion, 16 for
    /// more; at most 32 and 16).
    pub m2l_warps: usize,
    /// At most this many levels apart may a float M2L pair's cells be (the
    /// default, 64 / p, keeps the scale factors in range); a negative
    /// value sends every M2L to the double one (tests use it).
    pub m2l_max_levels_apart: Option<i32>,
}

/// The expansion order and MAC of one evaluation: given, or chosen for a
/// tolerance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub p: usize,
    pub theta: f64,
}

/// The one value every FMM runner takes (the Laplace expansions' and the
/// node far fields', on the CPU and the GPU): the checked parameters, the
/// far field, the settings, the options and the domain. A new domain or a
/// distributed run adds a field here, not an argument to four runners.
pub(crate) struct Plan<'a, R> {
    pub params: &'a [R],
    /// The far field: the Laplace expansions' strength slots and terms, or
    /// a node far field's representation.
    pub far: &'a crate::far::Plan,
    pub settings: Settings,
    pub opts: &'a FmmOptions,
    /// Free space or a periodic box.
    pub domain: &'a crate::domain::Domain,
    /// The trees' root cube outside a periodic box, where given
    /// ([`crate::Problem::cube`]).
    pub cube: Option<crate::tree::Bounds>,
    /// Cells whose spheres are nearer than this (particles' units) sum
    /// directly (`tree::traversal::well_separated`): the radius past which
    /// a smoothed kernel is its singular far field to the tolerance; 0
    /// for the plain MAC.
    pub near: f64,
}

impl<'a, R> Plan<'a, R> {
    /// The Laplace expansions' strength slots and terms: what the Laplace
    /// runners are handed (the front door dispatches on the far field).
    pub fn laplace(&self) -> (&'a [usize], &'a [FarTerm]) {
        match self.far {
            crate::far::Plan::Laplace { strength, terms } => (strength, terms),
            _ => unreachable!("the Laplace FMM is run with the Laplace far field"),
        }
    }

    /// The node far field's representation: what the node runners are
    /// handed.
    pub fn nodes(&self) -> &'a crate::far::Representation {
        match self.far {
            crate::far::Plan::Nodes(rep) => rep,
            _ => unreachable!("the node FMM is run with a node far field"),
        }
    }
}

/// The error a run's settings are expected to reach (the tolerance where
/// one was asked for), what a periodic box's image levels follow.
pub(crate) fn expected_error<R>(plan: &Plan<'_, R>) -> f64 {
    match plan.opts.accuracy {
        Accuracy::Tolerance(tol) => tol,
        Accuracy::Fixed { .. } => tables::expected_error(plan.settings),
    }
}

/// A periodic box's cell must be neutral (to [`crate::domain::NEUTRAL`]),
/// or have a neutralising background that the kernel (`def`, its far
/// `terms`, `nq` strength components) can take
/// ([`crate::far::laplace::background::check`]).
pub(crate) fn check_neutral(
    b: &PeriodicBox,
    m: &Moments,
    def: &fmm_codegen::KernelDef,
    terms: &[FarTerm],
    nq: usize,
) -> Result<(), Error> {
    crate::far::laplace::background::check(b, &def.name, terms, nq)?;
    m.check(b)
}
