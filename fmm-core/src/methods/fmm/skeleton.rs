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
//! in the caller's order are every far field's, here.

use rayon::prelude::*;

use super::Plan;
use crate::domain::PeriodicBox;
use crate::error::Error;
use crate::kernel::{Kernel, MAX_SLOTS};
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;
use crate::stats::{Clock, Stage, Stats};
use crate::tree::traversal::{split, traverse_images, Lists, Sphere};
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
    /// One of the trees' units in the particles' (the Laplace far
    /// field's unit box: its side; the node far fields: 1).
    pub unit: f64,
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
        plan.near / f.unit,
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

/// P2P of every target leaf `leaves` with the source leaves of its list
/// (each at its image's lattice shift of `shifts`, `[[0; 3]]` in free
/// space): per leaf, the outputs of its targets in tree order and the
/// pairs.
#[allow(clippy::too_many_arguments)]
fn near_field<K: Kernel, R: Real>(
    p: &[R],
    ttree: &Octree,
    tgt: &SoA<R>,
    stree: &Octree,
    src: &SoA<R>,
    lists: &Lists,
    shifts: &[[f64; 3]],
    leaves: &[usize],
) -> Vec<(Vec<R>, u64)> {
    let def = K::def();
    let (no, nt) = (def.n_outputs(), def.n_targets());
    leaves
        .par_iter()
        .map_init(
            || SoA::<R>::with_capacity(src.slots.len(), 4096),
            |list, &a| {
                let cell = &ttree.cells[a];
                list.clear();
                for &e in &lists.p2p[a] {
                    let (b, image) = split(e);
                    let b = &stree.cells[b];
                    let at = list.pos[0].len();
                    list.push_from(src, b.begin..b.end);
                    if image != 0 {
                        for (axis, &d) in list.pos.iter_mut().zip(&shifts[image]) {
                            axis[at..].iter_mut().for_each(|x| *x += R::c(d));
                        }
                    }
                }
                let slices = list.slices();
                let mut out = vec![R::zero(); cell.len() * no];
                let mut t = [R::zero(); MAX_SLOTS];
                for (i, o) in (cell.begin..cell.end).zip(out.chunks_mut(no)) {
                    for (tk, slot) in t.iter_mut().zip(&tgt.slots).take(nt) {
                        *tk = slot[i];
                    }
                    let xi = [tgt.pos[0][i], tgt.pos[1][i], tgt.pos[2][i]];
                    K::p2p_target(p, xi, &t, &slices, 0..slices.len(), o);
                }
                (out, (cell.len() * slices.len()) as u64)
            },
        )
        .collect()
}

/// The far (f64) and near parts of every target leaf, added and put back
/// in the caller's order of the `m` targets; counts the P2P pairs.
fn scatter<K: Kernel, R: Real>(
    m: usize,
    ttree: &Octree,
    leaves: &[usize],
    far: &[Vec<f64>],
    near: &[(Vec<R>, u64)],
    clock: &mut Clock<'_>,
) -> Outputs<R> {
    let def = K::def();
    let no = def.n_outputs();
    let mut slots = vec![vec![R::zero(); m]; no];
    for ((&a, f), (n, pairs)) in leaves.iter().zip(far).zip(near) {
        let cell = &ttree.cells[a];
        for r in 0..cell.len() {
            let i = ttree.order[cell.begin + r] as usize;
            for k in 0..no {
                slots[k][i] = n[r * no + k] + R::c(f[r * no + k]);
            }
        }
        clock.stats().p2p += pairs;
    }
    Outputs::new(def.name.as_str(), &def.outputs, slots)
}
