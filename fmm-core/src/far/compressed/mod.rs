//! M2L by precomputed operators compressed with their singular vectors:
//! the black-box FMM's M2L (Fong and Darve 2009, section 3.3), for both
//! node far fields on the CPU.
//!
//! Why: M2L by the kernel itself ([`super::nodes::m2l`]) costs `k^2`
//! kernel evaluations per pair of cells (`k` nodes a cell: 125 at order 4),
//! each with an `exp` for Yukawa; it was 90% of a 10^6-particle Yukawa FMM.
//! But the kernels are translation invariant and the two trees' cells lie
//! on one lattice (built in the same root cube), so the operator from a
//! source cell's node strengths to a target cell's node values depends only
//! on the two cells' levels and their offset: a few hundred operators a
//! level against millions of pairs. Each is computed once, by the kernel.
//! Then all the operators into one level share a basis `U` (the leading
//! left singular vectors of the operators set side by side) and all those
//! out of one level a basis `V` (the leading right singular vectors of
//! the operators stacked), so that `A ~ U C V^T` with `C = U^T A V` small
//! (`r x r`, `r` the rank kept). A pair's M2L is then one `r x r` product,
//! and the products of one operator are batched into one matrix product.
//!
//! It applies when the operator really is one per offset: the source
//! fields other than the strength (a core radius) the same in every cell
//! (a vortex method's uniform core), which is checked; otherwise the
//! caller keeps M2L by the kernel. The singular vectors come from the
//! eigenvectors of `sum A A^T` and `sum A^T A`; the rank keeps singular
//! values above [`rank_tolerance`] of the largest (or the caller's).
//!
//! The bases and compressed operators are kept for the next evaluation
//! with the same kernel, parameters, nodes, root cube and tolerance (an
//! iterative solver's or a benchmark's repeated products; exafmm-t and
//! PVFMM keep theirs in files): only the offsets not seen before are then
//! computed. The last [`CACHE_GEOMETRIES`] geometries are kept (a
//! tolerance met on the second run computes two orders' operators each
//! evaluation otherwise), up to [`CACHE_BYTES`] in all;
//! [`clear_operator_cache`] drops them.
//!
//! The files: [`setup`] (what the operators are built from, and an
//! operator by the kernel), [`cache`] (the operators kept by geometry),
//! [`bases`] (a level's `U` and `V`), [`build`] (the operators of a set of
//! keys), [`apply`] (the M2L of the lists by them); what a kernel's
//! structure lets operators share in [`scaling`] (homogeneous kernels),
//! [`symmetry`] (symmetric ones), [`cubic`] (the cube's rotations) and
//! [`skeleton`] (the nodes operators are projected from).

use std::sync::Arc;

use crate::tree::octree::Cell;

mod apply;
mod bases;
mod build;
mod cache;
mod cubic;
mod scaling;
mod setup;
mod skeleton;
mod symmetry;
pub(crate) use apply::m2l;
pub(crate) use bases::Bases;
use bases::*;
use build::*;
pub(crate) use build::{most_compressed_chebyshev, operator_set, too_large, Operators, Small};
pub use cache::clear_operator_cache;
use cache::*;
use cubic::Cubic;
use scaling::Scaling;
use setup::*;
use skeleton::Skeleton;

/// The largest operator side (nodes times channels) compressed: the
/// eigenproblems are cubic in it. 1400 takes order 6 (343 nodes) with four
/// outputs (a potential and its gradient).
const MAX_SIDE: usize = 1400;

/// Singular values kept, relative to the largest, at order `p`: a factor
/// 10 to 100 below the interpolation's own error at that order (measured,
/// `docs/FAR_FIELD.md`), so that compression adds little to it; at least
/// [`MIN_RANK_TOLERANCE`].
pub(crate) fn rank_tolerance(p: usize) -> f64 {
    10f64.powi(-(p as i32) - 2).max(MIN_RANK_TOLERANCE)
}

/// The smallest rank tolerance. The singular values come from the
/// eigenvalues of Gram matrices (their squares), rounded at about 1e-16 of
/// the largest: singular values at 1e-8 of theirs. Below that the rank
/// stops growing (the order-6 singular Stokeslet's: 241 at 1e-7, 277 at
/// 3e-8, 278 at 1e-8). With `nalgebra`'s eigensolver the rounded
/// eigenvalues were positive and the ranks grew on: the floor was 1e-7.
pub const MIN_RANK_TOLERANCE: f64 = 1e-8;

/// Pairs of cells an offset needs for its operator to be computed: fewer
/// are left to M2L by the kernel (measured, `docs/FAR_FIELD.md`).
pub(crate) const MIN_PAIRS: usize = 32;

/// The most bytes of operators kept for the next evaluation (past it they
/// are computed again each time).
pub const CACHE_BYTES: usize = 1 << 30;

/// The most geometries whose operators are kept: two, the orders of a
/// tolerance met on its second run (or an application alternating two).
pub const CACHE_GEOMETRIES: usize = 2;

/// The loosest rank tolerance whose operators are compressed from a
/// skeleton of their rows and columns ([`skeleton`]); past it, from all of
/// them. A looser tolerance is chosen near the interpolation's own error,
/// where the skeleton's amplification of the truncated part shows (Yukawa
/// order 5 at 1e-4: potential error 5.9e-5 from a skeleton, 3.1e-5 in
/// full), and its operators are small and cheap in full (measured,
/// `docs/FAR_FIELD.md`).
const SKELETON_TOLERANCE: f64 = 1e-6;

/// The loosest rank tolerance whose products run in f64: at it or past
/// it they run in f32, whose rounding (about 1e-7 a product, 1e-6 summed
/// over a cell's hundred-odd translations) is far below what the
/// truncation drops, and whose products take half the time.
const SINGLE_TOLERANCE: f64 = 1e-5;

/// Operators a level and side the bases are fitted to (those of the most
/// pairs): the other operators' ranges are close to theirs. A periodic
/// box meets more offsets (its cells' images): at 100, pseudo-particles
/// there read 8.8e-7 at p 8, theta 0.4 (20,000 charges) where the M2L by
/// the kernel reads 3.4e-9 and 300 reads 2.8e-8 (as every key fitted);
/// free space's error and time unchanged, the box's M2L 20% longer at
/// theta 0.5 (50,000 charges, 2 cores).
const BASIS_KEYS: usize = 300;

/// Two cells' levels and their offset in units of the deepest level's
/// half side: one M2L operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub(crate) target_level: u8,
    pub(crate) source_level: u8,
    pub(crate) offset: [i32; 3],
}

/// A cell's centre in units of the deepest level's half side, from the
/// corner of the root cube: `(2 i + 1) 2^(MAX_LEVEL - level)`.
pub(super) fn lattice(cell: &Cell, corner: [f64; 3], unit: f64) -> [i32; 3] {
    [0, 1, 2].map(|a| ((cell.center[a] - corner[a]) / unit).round() as i32)
}

/// An operator's key and its number of pairs (the bases are fitted to the
/// operators of the most pairs).
pub(super) type Counted = (Key, usize);

/// A compressed operator's entries, shared with the cache.
pub(super) type Dense = Arc<Vec<f64>>;

#[cfg(test)]
mod most_order_tests {
    use super::most_compressed_chebyshev;

    /// Gravity's four outputs take order 6 (343 nodes, 1372 a side);
    /// Biot-Savart's three, order 6; one output, order 10 (1331).
    #[test]
    fn the_highest_compressed_orders() {
        assert_eq!(most_compressed_chebyshev(4, 1), 6);
        assert_eq!(most_compressed_chebyshev(3, 3), 6);
        assert_eq!(most_compressed_chebyshev(1, 1), 10);
    }
}
