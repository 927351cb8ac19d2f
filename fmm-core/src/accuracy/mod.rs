//! Meeting an accuracy: the caller gives the relative L2 error it wants
//! and gets the outputs to that error, the way chosen for it and the error
//! measured, never predicted alone.
//!
//! Two requests reach here. `Method::tolerance(tol)` (any method) lets
//! [`choose`] weigh the direct sum, the treecode and the FMM by cost: the
//! direct sum's predicted from its pairs and this kernel's measured time a
//! pair, the tree methods' from the evaluations of the same problem
//! already made; below the size where the direct sum wins it runs, the
//! treecode ([`treecode`]: the monopole, theta from a measured table)
//! runs under the direct sum's time as a budget where the tolerance is
//! within its reach, and the FMM under the fastest time met so far.
//! `Method::fmm_tolerance(tol)` asks for the FMM alone.
//!
//! The FMM's settings: the first come from a table per backend and far
//! field (`methods::fmm::tables`: gravity without softening in a cube, f64,
//! the error of each order at the MAC the backend runs fastest with for
//! that error), the cheapest entry whose error is within the tolerance.
//! The error is then estimated on sampled targets against an f64 direct
//! sum (`reference::sample`: targets stratified over space, the estimate with its
//! own uncertainty, the safe side taken near the tolerance); while it is
//! above the tolerance the FMM runs again at the settings a cost model
//! fitted to the runs' own stage times predicts cheapest ([`cost`]): the
//! order this MAC needs by the error's fall an order (at most 4 orders a
//! step), or a narrower MAC at a lower order ([`driver`]).
//!
//! A tolerance out of reach is said quickly, with why and what to do: when
//! the error falls by less than a tenth an order over two steps running
//! (each of up to 4 orders), it has stopped falling (an error that
//! converges falls by about theta an order at worst), and more orders will
//! not help. The Laplace far field is the singular kernel's, so a
//! kernel's smoothing (Plummer softening, a core radius) that is not
//! negligible at the distance of well-separated cells sets a floor under
//! its error, as does f32's rounding (near 1e-6 to 1e-7).
//!
//! The far field chosen by default (`FarField::Auto`) follows the
//! tolerance too: where it took the Laplace expansions and their error
//! stopped above the tolerance for the smoothing, or at their highest
//! order (not at f32's rounding), the evaluation runs again with the
//! kernel-independent far field ([`driver::switch_to_nodes`]), which
//! interpolates the kernel itself, smoothing included (softened gravity: a
//! floor of 1e-3 against 1e-6 and below), and where that meets the
//! tolerance says so. The Laplace runs' time counts in the returned stats.
//! The switch and the settings that met a tolerance are remembered per
//! problem ([`memory`]) for the next evaluation; a tolerance that no far
//! field meets leaves what was remembered as it was.

pub(crate) mod choose;
pub(crate) mod cost;
pub(crate) mod driver;
pub(crate) mod floor;
pub(crate) mod memory;
pub(crate) mod treecode;

pub(crate) use choose::{choose, Ways};
pub(crate) use driver::{
    drive_within, on_to_nodes, predicted_switch, switch_to_nodes, Goal, Stopped,
};
pub(crate) use memory::{switched_before, ProblemKey};

use crate::far::FarField;
use crate::methods::fmm::Settings;

/// The fewest targets an error is estimated on (all of them where there
/// are fewer): their f64 sums cost a few percent of the FMM's time at any
/// size (64 N pairs on the CPU).
pub const ERROR_SAMPLES: usize = 64;

/// Targets the error is estimated on by the CPU in free space, where each
/// target's f64 reference costs `pairs` pairs (the sources; a periodic
/// box's references take [`ERROR_SAMPLES`]): 256 up to 2^16 pairs a
/// target, where their sums
/// take 2^24 pairs (25 ms on 2 cores), fewer above, down to
/// [`ERROR_SAMPLES`] from 2^18. The FMM's errors gather on a few targets
/// (half of 10^4 points at one spot, p 9 to 13: stratified samples drawn
/// at random within their strata missed the whole error with their
/// bound, [`crate::reference::Estimate::bound`], in 5 to 10% of draws of
/// 64 targets and 0.5 to 1.5% of 256: the `error_samples` example), and
/// the larger sample's bound is the tighter one too (1.5 to 1.6 times the
/// whole error on average against 1.8 to 1.9), so a tolerance is met at
/// cheaper settings.
pub fn cpu_error_samples(pairs: usize) -> usize {
    ((1usize << 24) / pairs.max(1)).clamp(ERROR_SAMPLES, 4 * ERROR_SAMPLES)
}

/// Targets the error is estimated on by the GPU for `sources` sources:
/// 256 up to about 10^6 sources, where their f64 sums cost about what 64
/// do (the stratifying sort is most of it) and the sample four times
/// larger halves the margin its safe side takes (the treecode at theta
/// 0.7 on 10^6 points, 8.4e-4 from the f64 sum, read 1.06e-3 on 64
/// targets against a tolerance of 1e-3, and took theta 0.59 at 1.4 times
/// the time); fewer above, down to [`ERROR_SAMPLES`] from 4x10^6 (256
/// targets' f64 sums of velocity + stretching over 10^7 sources took
/// 0.05 s of an evaluation of 0.44 s).
pub fn gpu_error_samples(sources: usize) -> usize {
    ((1usize << 28) / sources.max(1)).clamp(ERROR_SAMPLES, 4 * ERROR_SAMPLES)
}

/// What a tolerance-driven evaluation chose and achieved.
#[derive(Clone, Debug, PartialEq)]
pub struct Achieved {
    /// The tolerance asked for.
    pub tolerance: f64,
    /// The method that met it: `"fmm"` or `"direct"` (a
    /// `Method::tolerance` request the direct sum met more cheaply).
    pub method: &'static str,
    /// The FMM's settings of the evaluation returned (the direct sum has
    /// none: its `p` is 0).
    pub settings: Settings,
    /// Relative L2 error of all outputs on the sampled targets against an
    /// f64 direct sum, on the safe side: the sample's estimate plus three
    /// standard errors ([`crate::reference::Estimate::bound`]); within the
    /// tolerance. The direct sum of f64 particles is that reference: 0,
    /// with `samples` 0.
    pub estimated_error: f64,
    /// The targets sampled; 0 where every target was (no sampling
    /// uncertainty).
    pub samples: usize,
    /// The far field that met it (the kernel-independent one where the
    /// default's Laplace expansions stopped short:
    /// [`driver::switch_to_nodes`]).
    pub far_field: FarField,
    /// The FMM's near field: cells closer than this went particle to
    /// particle whatever the MAC, where the kernel's smoothing reaches
    /// past the distance the MAC accepts ([`FmmOptions::near`]; 0: the
    /// plain MAC).
    ///
    /// [`FmmOptions::near`]: crate::methods::fmm::FmmOptions::near
    pub near: f64,
}
