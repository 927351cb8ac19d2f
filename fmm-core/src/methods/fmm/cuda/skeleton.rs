//! The FMM's stages on the GPU written once over its far fields, as the
//! CPU's are ([`crate::methods::fmm::skeleton`]): the trees (an
//! evaluation's, shared by its runs: [`SharedTrees`]), the dual tree
//! traversal, the upward pass, the M2L, the downward pass and the near
//! field, each timed, in that order. What differs between the Laplace
//! expansions ([`super::Laplace`]) and the node far fields
//! ([`super::nodes::NodeField`]) is a [`DeviceFarPasses`]: the trees' root
//! cube and cell radii, and the upward pass, the M2L and the downward pass
//! themselves. The near field (the P2P lists by the kernel's generated
//! entry) and the outputs put back in the caller's order are every far
//! field's ([`super::near_field_and_scatter`]).

use cudarc::driver::CudaSlice;

use super::periodic::Images;
use super::{
    near_field_and_scatter, traverse, Cube, DeviceLists, FmmTree, Ops, SharedTrees, Trees,
};
use crate::cuda::device::alloc;
use crate::cuda::launch::Entry;
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::PeriodicBox;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::methods::fmm::Plan;
use crate::real::Real;
use crate::stats::{Clock, Stage, Stats};
use fmm_codegen::emit::p2p_list::P2P_BLOCK;

/// One far field's part of the FMM on the GPU (see the module's doc).
pub(super) trait DeviceFarPasses<R: Real> {
    /// What the far field needs of the trees before its passes (a periodic
    /// box's moments or image sources).
    type Own;
    /// The upward pass's result: the source cells' far fields.
    type Multipoles;

    /// The operators the trees and the traversal take (of any order:
    /// they do not depend on it).
    fn ops(&self) -> &Ops;

    /// The trees' root cube in a periodic box `pbox`, or free space.
    fn cube<'b>(&self, pbox: Option<&'b PeriodicBox>) -> Cube<'b>;

    /// The cells' radii the MAC compares, set on each tree once built
    /// (the node far fields' node spheres).
    fn adjust(&self, tree: &mut FmmTree<R>) -> Result<(), Error>;

    /// What the far field needs of the trees, checked before any more
    /// work: a periodic cell's neutrality (or its background), the node
    /// counts the kernels index.
    fn own(&self, trees: &Trees<R>) -> Result<Self::Own, Error>;

    /// The upward pass: the source cells' far fields (P2M, M2M).
    fn upward(&self, trees: &Trees<R>, own: &Self::Own) -> Result<Self::Multipoles, Error>;

    /// The M2L over `lists` (against the source tree's `images`), and a
    /// periodic box's farther images where they go into the locals: the
    /// target cells' locals (f64), and the seconds of it spent building
    /// operators the first time (setup, not M2L: the tolerance's cost
    /// model weighs what every evaluation pays).
    #[allow(clippy::too_many_arguments)]
    fn m2l(
        &self,
        trees: &Trees<R>,
        lists: &DeviceLists,
        images: &Images<R>,
        up: Self::Multipoles,
        own: &Self::Own,
        stats: &mut Stats,
    ) -> Result<(CudaSlice<f64>, f64), Error>;

    /// The downward pass: L2L down, then L2P at every target, written
    /// into `out` (one array a slot, target tree order), with a periodic
    /// box's far images or background where they come at the targets.
    fn downward(
        &self,
        trees: &Trees<R>,
        own: &Self::Own,
        local: CudaSlice<f64>,
        out: &mut [CudaSlice<R>],
    ) -> Result<(), Error>;
}

/// The FMM of kernel `K` on `gpu` with the far field `far`, as `plan`
/// says, on particles already there (input order); the problem is not
/// empty. Its trees are `shared`'s where an earlier run of the evaluation
/// built them, else built and left there. Returns the outputs in the
/// targets' input order, on the device.
pub(super) fn run<K: Kernel, R: Real, F: DeviceFarPasses<R>>(
    gpu: &Gpu,
    plan: &Plan<'_, R>,
    far: F,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
    shared: &SharedTrees<R>,
    clock: &mut Clock<'_>,
) -> Result<Vec<CudaSlice<R>>, Error> {
    let p2p = Entry::p2p_list::<K, R>(gpu)?;
    clock.lap(Stage::Setup)?;

    // Both trees, their cells' radii, the particles in tree order (a
    // periodic box's points wrapped into it, the box the root cube).
    let ncrit = plan.opts.leaf_size(plan.far.far_field());
    let pbox = plan.domain.periodic();
    let trees = shared.get_or_build(|| {
        Trees::build(
            gpu,
            far.ops(),
            targets,
            sources,
            ncrit,
            far.cube(pbox).or_given(plan.cube),
            |t| far.adjust(t),
        )
    })?;
    let own = far.own(trees)?;
    let (st, tt) = (&trees.source, trees.target());
    clock.stats().source_cells = st.tree.n_cells;
    clock.stats().target_cells = tt.tree.n_cells;
    clock.lap(Stage::Tree)?;

    // Dual tree traversal, and the P2P groups (every target leaf cut into
    // pieces of a block).
    let images = Images::<R>::of(gpu, pbox)?;
    let lists = traverse(
        gpu,
        far.ops(),
        tt,
        st,
        (plan.settings.theta, plan.near),
        &images,
    )?;
    clock.stats().m2l = lists.n_m2l as u64;
    let groups = tt.tree.groups(gpu, 0, P2P_BLOCK as usize)?;
    clock.lap(Stage::Traversal)?;

    let up = far.upward(trees, &own)?;
    clock.lap(Stage::Upward)?;

    let (local, building) = far.m2l(trees, &lists, &images, up, &own, clock.stats())?;
    let near = lists.into_near();
    clock.lap(Stage::M2l)?;
    if building > 0.0 {
        clock.stats().rebook(Stage::M2l, Stage::Setup, building);
    }

    let s = gpu.stream();
    let mut out: Vec<CudaSlice<R>> = (0..K::def().n_outputs())
        .map(|_| alloc::<R>(s, targets.len()))
        .collect::<Result<_, _>>()?;
    far.downward(trees, &own, local, &mut out)?;
    clock.lap(Stage::Downward)?;

    near_field_and_scatter(
        gpu,
        &p2p,
        plan.params,
        trees,
        groups,
        near,
        &images,
        out,
        clock,
    )
}
