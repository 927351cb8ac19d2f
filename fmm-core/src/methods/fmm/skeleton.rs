//! The FMM's stages on the CPU written once over its far fields, as
//! exafmm-t's `fmm_base.h` writes the upward and downward passes once over
//! a kernel's operators: the trees, the upward pass, the dual tree
//! traversal, the M2L, the downward pass (L2L, L2P) and the near field,
//! each timed, in that order. What differs between the Laplace expansions
//! ([`super::cpu::Laplace`]) and the node far fields
//! ([`super::cpu_nodes::NodeField`]) is a [`FarPasses`]: the coordinates
//! the trees are built in, the cells' spheres the MAC compares, and the
//! upward pass, the M2L and the downward pass themselves. The near field
//! (P2P by the kernel's generated evaluator) and putting the outputs back
//! in the caller's order are every far field's ([`super::cpu`]).

use super::cpu::{near_field, scatter};
use super::Plan;
use crate::domain::PeriodicBox;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;
use crate::stats::{Clock, Stage, Stats};
use crate::tree::traversal::{traverse_images, Lists, Sphere};
use crate::tree::{Octree, SoA};

/// The trees of a run and the particles in their orders, with what the
/// far field keeps of them (`own`).
pub(crate) struct Frame<R, E> {
    pub stree: Octree,
    pub ttree: Octree,
    /// The sources and targets in tree order, their positions where the
    /// near field reads them (a periodic box's points wrapped into it).
    pub src: SoA<R>,
    pub tgt: SoA<R>,
    /// The lattice shifts the traversal meets the source tree at, in the
    /// trees' coordinates (free space: one, of no shift).
    pub images: Vec<[f64; 3]>,
    pub own: E,
}

/// One far field's part of the FMM on the CPU (see the module's doc).
pub(crate) trait FarPasses<R: Real> {
    /// What the far field keeps of the trees (points in its coordinates,
    /// strengths, spheres, a periodic box's moments or far images).
    type Own;
    /// The upward pass's result: the source cells' far fields.
    type Multipoles;
    /// The M2L's result: the target cells' local fields.
    type Locals;

    /// The trees of `targets` and `sources` in the far field's
    /// coordinates; a periodic cell's neutrality (or its background)
    /// checked before any more work.
    fn trees(
        &self,
        targets: &Particles<R>,
        sources: &Particles<R>,
    ) -> Result<Frame<R, Self::Own>, Error>;

    /// The cells' spheres the MAC compares: the target tree's, then the
    /// source tree's.
    fn spheres<'f>(&self, f: &'f Frame<R, Self::Own>) -> [&'f [Sphere]; 2];

    /// The upward pass: the source cells' far fields (P2M, M2M).
    fn upward(&self, f: &Frame<R, Self::Own>) -> Self::Multipoles;

    /// The M2L over `lists`, and a periodic box's farther images; the
    /// seconds of it spent building operators the first time (setup, not
    /// M2L: the tolerance's cost model weighs what every evaluation pays).
    fn m2l(
        &self,
        f: &Frame<R, Self::Own>,
        lists: &Lists,
        up: Self::Multipoles,
        stats: &mut Stats,
    ) -> (Self::Locals, f64);

    /// The downward pass: L2L down, then L2P at every target leaf of
    /// `leaves`; per leaf, its targets' far outputs (tree order, f64).
    fn downward(
        &self,
        f: &Frame<R, Self::Own>,
        local: Self::Locals,
        leaves: &[usize],
    ) -> Vec<Vec<f64>>;
}

/// The FMM of kernel `K` on the CPU with the far field `far`, as `plan`
/// says; the problem is not empty. Returns the outputs in the targets'
/// input order.
pub(crate) fn run<K: Kernel, R: Real, F: FarPasses<R>>(
    plan: &Plan<'_, R>,
    far: F,
    targets: &Particles<R>,
    sources: &Particles<R>,
    clock: &mut Clock<'_>,
) -> Result<Outputs<R>, Error> {
    let f = far.trees(targets, sources)?;
    clock.stats().source_cells = f.stree.cells.len();
    clock.stats().target_cells = f.ttree.cells.len();
    clock.lap(Stage::Tree)?;

    let up = far.upward(&f);
    clock.lap(Stage::Upward)?;

    let [tsph, ssph] = far.spheres(&f);
    let lists = traverse_images(
        &f.ttree,
        tsph,
        &f.stree,
        ssph,
        plan.settings.theta,
        &f.images,
    );
    clock.stats().m2l += lists.m2l_count() as u64;
    clock.lap(Stage::Traversal)?;

    let (local, building) = far.m2l(&f, &lists, up, clock.stats());
    clock.lap(Stage::M2l)?;
    if building > 0.0 {
        clock.stats().rebook(Stage::M2l, Stage::Setup, building);
    }

    let leaves: Vec<usize> = f.ttree.leaves().map(|(c, _)| c).collect();
    let far_out = far.downward(&f, local, &leaves);
    clock.lap(Stage::Downward)?;

    let shifts = PeriodicBox::near_shifts(plan.domain.periodic());
    let near = near_field::<K, R>(
        plan.params,
        &f.ttree,
        &f.tgt,
        &f.stree,
        &f.src,
        &lists,
        &shifts,
        &leaves,
    );
    clock.lap(Stage::P2p)?;
    Ok(scatter::<K, R>(
        targets.len(),
        &f.ttree,
        &leaves,
        &far_out,
        &near,
        clock,
    ))
}
