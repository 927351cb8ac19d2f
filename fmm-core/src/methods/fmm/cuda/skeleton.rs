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
    near_field, near_field_and_scatter, traverse, Cube, DeviceLists, FmmTree, Ops, Pairs,
    SharedTrees, Trees,
};
use crate::cuda::device::{alloc, refs3, zeros};
use crate::cuda::laps::Laps;
use crate::cuda::launch::Entry;
use crate::cuda::primitives::add_into;
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::PeriodicBox;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::methods::fmm::Plan;
use crate::real::Real;
use crate::stats::{Clock, Stage, Stats};
use crate::tree::{DeviceOctree, TreeOrdered};
use fmm_codegen::emit::p2p_list::P2P_BLOCK;
use std::time::Instant;

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
    far: &F,
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

/// The sources of an FMM's second lot, asked for once the first lot's
/// work is on the GPU ([`run_in_two_lots`]): `None` where none came.
pub(crate) type Later<'l, R> = Box<dyn FnOnce() -> Result<Option<DeviceParticles<R>>, Error> + 'l>;

/// Where the first lot's source tree goes, once built (a copy, its
/// sources in its order: a distributed evaluation's local essential trees
/// are cut from it); `None` where it is not built.
pub(crate) type Share<'l, R> = Box<dyn FnOnce(Option<TreeOrdered<R>>) + 'l>;

/// What an FMM of two lots gives back.
pub(crate) struct TwoLots<R> {
    /// The outputs, in the targets' input order, on the device.
    pub(crate) outputs: Vec<CudaSlice<R>>,
    /// The second lot (`None` where none came).
    pub(crate) more: Option<DeviceParticles<R>>,
    /// The targets' Morton order (the input index at each place of their
    /// tree), kept for the sum's error to be sampled along.
    pub(crate) order: CudaSlice<u32>,
}

/// The FMM of kernel `K` at `targets` from two lots of sources as one
/// evaluation (yokota2012 section 3.4: a process's own sources while the
/// others' local essential trees are on their way): the first lot's
/// trees, upward pass, M2L and near field run before `later` is asked for
/// the second; the second lot's tree is built in the first's root cube,
/// its M2L added to the same target cells' locals and its near field to
/// the same outputs, and one downward pass serves both. In free space, in
/// the problem's cube (`plan.cube`), which holds both lots where they are
/// a distributed evaluation's; a second lot reaching past the first's
/// root cube is evaluated on its own and added. The first lot's source
/// tree, once built, is copied to `share`.
///
/// `beside`: the same GPU on a second stream with its far field's passes
/// there, where the second lot's tree, traversal, upward pass and M2L run
/// while the first lot's near field is still running on `gpu`'s stream
/// (they are many small kernels, each waited for: on one H200 at 2^24
/// gravity targets and 1.7 million arrivals they took 0.01 to 0.02 s
/// after a 0.04 s near field). `later` should leave the second lot's
/// copy made on that stream, not `gpu`'s, which the near field holds (a
/// copy there waits for the near field, whose time is then booked as the
/// wait for the lot).
/// Returns the outputs in the targets' input order, on the device, the
/// second lot and the targets' Morton order.
pub(super) fn run_in_two_lots<K: Kernel, R: Real, F: DeviceFarPasses<R>>(
    gpu: &Gpu,
    plan: &Plan<'_, R>,
    (far, beside): (F, Option<(&Gpu, F)>),
    (targets, first): (&DeviceParticles<R>, &DeviceParticles<R>),
    (share, later): (Share<'_, R>, Later<'_, R>),
    clock: &mut Clock<'_>,
) -> Result<TwoLots<R>, Error> {
    let (Some(cube), None) = (plan.cube, plan.domain.periodic()) else {
        return Err(Error::BadOption(
            "the FMM of sources in two lots runs in free space, in the problem's cube".into(),
        ));
    };
    let p2p = Entry::p2p_list::<K, R>(gpu)?;
    clock.lap(Stage::Setup)?;
    let ncrit = plan.opts.leaf_size(plan.far.far_field());
    let (ops, cube) = (far.ops(), Cube::Given(cube));
    let trees = Trees::build(gpu, ops, targets, first, ncrit, cube, |t| far.adjust(t))?;
    let own = far.own(&trees)?;
    clock.stats().source_cells = trees.source.tree.n_cells;
    clock.stats().target_cells = trees.target().tree.n_cells;
    clock.lap(Stage::Tree)?;
    let st = &trees.source;
    share(Some(TreeOrdered::copy_of(
        gpu,
        &st.tree,
        &st.pos,
        &trees.sslots,
    )?));
    clock.lap(Stage::Tree)?;

    // The first lot's far field into the locals, its near field into
    // outputs of its own (the downward pass writes, not adds).
    let images = Images::<R>::of(gpu, None)?;
    let mac = (plan.settings.theta, plan.near);
    let lists = traverse(gpu, ops, trees.target(), &trees.source, mac, &images)?;
    let groups = trees.target().tree.groups(gpu, 0, P2P_BLOCK as usize)?;
    clock.stats().m2l = lists.n_m2l as u64;
    clock.lap(Stage::Traversal)?;
    let up = far.upward(&trees, &own)?;
    clock.lap(Stage::Upward)?;
    let (mut local, building) = far.m2l(&trees, &lists, &images, up, &own, clock.stats())?;
    clock.lap(Stage::M2l)?;
    clock.stats().rebook(Stage::M2l, Stage::Setup, building);
    let s = gpu.stream();
    let outputs = || -> Result<Vec<CudaSlice<R>>, Error> {
        (0..K::def().n_outputs())
            .map(|_| zeros::<R>(s, targets.len()))
            .collect()
    };
    // The one downward pass into fresh outputs, the first lot's near
    // field added (the downward pass writes, not adds).
    let downward =
        |trees: &Trees<R>, own: &F::Own, local: CudaSlice<f64>, near: Vec<CudaSlice<R>>| {
            let mut out = outputs()?;
            far.downward(trees, own, local, &mut out)?;
            for (o, n) in out.iter_mut().zip(&near) {
                add_into(gpu, n, o, targets.len())?;
            }
            Ok::<_, Error>(out)
        };
    let mut first_near = outputs()?;
    let (params, near) = (plan.params, lists.into_near());
    // Launched, not waited for where the second lot's front runs beside.
    let pairs = near_field(
        gpu,
        &p2p,
        params,
        &trees,
        &groups,
        near,
        &images,
        &mut first_near,
    )?;
    let (on, far_on, pending) = match &beside {
        Some((b, f)) => (*b, f, Some(pairs)),
        None => {
            clock.stats().p2p = pairs.read(gpu)?;
            clock.lap(Stage::P2p)?;
            (gpu, &far, None)
        }
    };

    // The second lot, waited for (not a stage of the evaluation), then
    // grafted where the first's root cube holds it: its tree, traversal,
    // upward pass and M2L on `on`'s stream.
    let waiting = Instant::now();
    let more = later()?.filter(|m| !m.is_empty());
    let waited = waiting.elapsed().as_secs_f64();
    let mut front = Front::from_now();
    let mut lap = Laps::new(Some(on), "the second lot");
    let root = trees.source.tree.bounds;
    let inside = match more.as_ref().and_then(|m| m.positions()) {
        Some(pos) => {
            let span = DeviceOctree::span(on, refs3(pos))?;
            lap.say("its box")?;
            root.holding(&span) == root
        }
        None => false,
    };
    let grafted = match more.as_ref().map(|m| (m, m.positions())) {
        Some((m, Some(pos))) if inside => {
            let built = TreeOrdered::build_guided(
                on,
                refs3(pos),
                m.slots(),
                ncrit,
                Some(root),
                None,
                false,
            )?;
            lap.say("its points in tree order")?;
            let (mut tree, sslots) = FmmTree::of(on, far_on.ops(), built)?;
            far_on.adjust(&mut tree)?;
            lap.say("its cells")?;
            Some((tree, sslots))
        }
        _ => None,
    };
    front.lap(on, Stage::Tree)?;
    let Some((tree, sslots)) = grafted else {
        front.book(clock, pending, waited, gpu)?;
        // The first lot alone, the second (if any) evaluated apart.
        let out = downward(&trees, &own, local, first_near)?;
        clock.lap(Stage::Downward)?;
        let mut out = trees.target().tree.scatter_all(gpu, out)?;
        if let Some(m) = &more {
            // Its run sets the counts: the first lot's added after.
            let st = clock.stats();
            let counts = (st.source_cells, st.m2l, st.p2p, st.target_cells);
            // Targets at the first lot's points have them as their own.
            let placed = targets.placed_if_at(gpu, first)?;
            let at = placed.as_ref().unwrap_or(targets);
            let apart = run::<K, R, F>(gpu, plan, &far, at, m, &SharedTrees::default(), clock)?;
            let st = clock.stats();
            st.source_cells += counts.0;
            st.m2l += counts.1;
            st.p2p += counts.2;
            st.target_cells = counts.3;
            for (o, a) in out.iter_mut().zip(&apart) {
                add_into(gpu, a, o, targets.len())?;
            }
        }
        let order = trees.into_target_order();
        return Ok(TwoLots {
            outputs: out,
            more,
            order,
        });
    };
    let Trees {
        source,
        target,
        tslots,
        ..
    } = trees;
    let trees = Trees {
        source: tree,
        target: Some(target.unwrap_or(source)),
        sslots,
        tslots,
    };
    let own_on = far_on.own(&trees)?;
    clock.stats().source_cells += trees.source.tree.n_cells;
    front.lap(on, Stage::Tree)?;
    let lists = traverse(
        on,
        far_on.ops(),
        trees.target(),
        &trees.source,
        mac,
        &images,
    )?;
    clock.stats().m2l += lists.n_m2l as u64;
    front.lap(on, Stage::Traversal)?;
    lap.say("its traversal")?;
    let up = far_on.upward(&trees, &own_on)?;
    front.lap(on, Stage::Upward)?;
    let (second, building) = far_on.m2l(&trees, &lists, &images, up, &own_on, clock.stats())?;
    front.lap(on, Stage::M2l)?;
    lap.say("its upward pass and M2L")?;
    front.book(clock, pending, waited, gpu)?;
    add_into(gpu, &second, &mut local, second.len())?;
    drop(second);
    clock.lap(Stage::M2l)?;
    clock.stats().rebook(Stage::M2l, Stage::Setup, building);
    let own = far.own(&trees)?;
    let mut out = downward(&trees, &own, local, first_near)?;
    clock.lap(Stage::Downward)?;
    let near = lists.into_near();
    let pairs = near_field(gpu, &p2p, params, &trees, &groups, near, &images, &mut out)?;
    clock.stats().p2p += pairs.read(gpu)?;
    clock.lap(Stage::P2p)?;
    drop(groups);
    let mut lap = Laps::new(Some(gpu), "the second lot");
    let out = trees.target().tree.scatter_all(gpu, out)?;
    lap.say("its downward pass, P2P, the outputs in input order")?;
    Ok(TwoLots {
        outputs: out,
        more,
        order: trees.into_target_order(),
    })
}

/// The second lot's front (its tree, traversal, upward pass and M2L),
/// timed stage by stage on its stream: where it runs beside the first
/// lot's near field, the clock's lap over both is booked as the front's
/// stages and what the near field took past them
/// ([`run_in_two_lots`]).
struct Front {
    last: Instant,
    stages: Vec<(Stage, f64)>,
}

impl Front {
    /// A front starting now.
    fn from_now() -> Self {
        Front {
            last: Instant::now(),
            stages: Vec::new(),
        }
    }

    /// The time since the last lap booked to `stage`, once `gpu`'s stream
    /// is done.
    fn lap(&mut self, gpu: &Gpu, stage: Stage) -> Result<(), Error> {
        gpu.stream()
            .synchronize()
            .map_err(crate::cuda::device::cuda_err(stage.name()))?;
        let now = Instant::now();
        self.stages.push((stage, (now - self.last).as_secs_f64()));
        self.last = now;
        Ok(())
    }

    /// Books the front's stages, and where it ran beside the first lot's
    /// near field (`pending`: its pairs, read once it is done) the near
    /// field: the clock's lap since the first lot's M2L less the front's
    /// stages and the wait for the second lot to come (`waited`), at
    /// least nothing. The clock goes on from now.
    fn book(
        self,
        clock: &mut Clock<'_>,
        pending: Option<Pairs>,
        waited: f64,
        gpu: &Gpu,
    ) -> Result<(), Error> {
        let front: f64 = self.stages.iter().map(|(_, t)| t).sum();
        for &(stage, t) in &self.stages {
            clock.stats().add(stage, t);
        }
        match pending {
            Some(pairs) => {
                clock.stats().p2p = pairs.read(gpu)?;
                let before = clock.stats().seconds(Stage::P2p);
                clock.lap(Stage::P2p)?;
                let lap = clock.stats().seconds(Stage::P2p) - before;
                let near = (lap - front - waited).max(0.0);
                clock.stats().add(Stage::P2p, near - lap);
            }
            None => clock.restart(),
        }
        Ok(())
    }
}
