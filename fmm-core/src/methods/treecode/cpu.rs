//! The Barnes-Hut treecode on the CPU, generic over DSL kernels.
//!
//! The far field of a cell is the kernel itself applied to a pseudo-source
//! at the cell's centre of strength that carries the cell's summed strength
//! (a monopole): it works for every kernel whose strength adds up, with no
//! expansion math. Targets walk the source tree in groups (the leaves of
//! their own tree): a cell is accepted for the whole group when the
//! distance from its centre of strength to the group's box exceeds
//! `size / theta + delta`, with `delta` the offset of the centre of strength
//! from the cell's centre (nakasato2009's modified criterion), and never
//! when the cell's box overlaps the group's. The walk follows the
//! `next`/`more` links, without a stack.

use rayon::prelude::*;

use super::{TreeOptions, IMAGE_ORDER};
use crate::domain::{Domain, PeriodicBox};
use crate::error::Error;
use crate::far::laplace::far_images::FarImages;
use crate::far::laplace::operators::Scratch;
use crate::far::monopole::{pseudo_sources, resolution, CellSources};
use crate::far::{self, nodes};
use crate::kernel::{Kernel, MAX_SLOTS};
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;
use crate::stats::{Clock, Stage};
use crate::tree::{positions_f64, sorted, Octree, SoA};

/// Squared distance from a point to a box (0 inside).
#[inline]
fn dist2_to_box(p: [f64; 3], lo: [f64; 3], hi: [f64; 3]) -> f64 {
    let mut d2 = 0.0;
    for a in 0..3 {
        let d = (lo[a] - p[a]).max(p[a] - hi[a]).max(0.0);
        d2 += d * d;
    }
    d2
}

#[inline]
fn boxes_overlap(lo: [f64; 3], hi: [f64; 3], center: [f64; 3], half: f64) -> bool {
    (0..3).all(|a| lo[a] <= center[a] + half && hi[a] >= center[a] - half)
}

/// Both trees, the sources and targets in tree order, the cells'
/// pseudo-sources and the target groups: what the CPU walk starts from.
pub(crate) struct Prepared<R> {
    pub(crate) stree: Octree,
    pub(crate) src: SoA<R>,
    pub(crate) cells: CellSources<R>,
    pub(crate) ttree: Octree,
    pub(crate) tgt: SoA<R>,
    /// `begin..end` in target tree order.
    pub(crate) groups: Vec<(usize, usize)>,
}

/// The target groups, as `begin..end` in target tree order: runs of
/// sibling leaves with at most `cap` targets together, so that groups are
/// nearly full (an adaptive octree's leaves hold a fraction of `ncrit` on
/// average) while each stays inside its parent cell; a leaf with more
/// (coincident targets at the depth bound) is a group of its own.
pub(crate) fn target_groups(tree: &Octree, cap: usize) -> Vec<(usize, usize)> {
    let root = &tree.cells[0];
    if root.is_leaf() {
        return vec![(root.begin, root.end)];
    }
    let mut groups = Vec::new();
    for c in 0..tree.cells.len() {
        if tree.cells[c].is_leaf() {
            continue;
        }
        // A run of consecutive leaf children.
        let mut run: Option<(usize, usize)> = None;
        for k in tree.children(c) {
            let child = &tree.cells[k];
            match run {
                Some((b, _)) if child.is_leaf() && child.end - b <= cap => {
                    run = Some((b, child.end));
                }
                _ => {
                    groups.extend(run.take());
                    if child.is_leaf() {
                        run = Some((child.begin, child.end));
                    }
                }
            }
        }
        groups.extend(run);
    }
    groups.sort_unstable();
    groups
}

/// The cells' node sources for a node far field: every cell's nodes
/// carrying its strength ([`far::nodes`]), accepted when the group's box is
/// farther from the cell's centre than the nodes' sphere over `theta` (and
/// the positions' resolution: the nodes of a cell of coincident particles
/// sit ulps apart).
fn node_cells<R: Real>(
    stree: &Octree,
    src: &SoA<R>,
    rep: &far::Representation,
    order: usize,
    theta: f64,
) -> CellSources<R> {
    let basis = nodes::basis(rep.far_field, order);
    let b = basis.as_ref();
    let up = nodes::upward(b, stree, src, rep);
    CellSources {
        soa: nodes::node_sources(
            b,
            stree,
            &up,
            &rep.strength,
            &(0..stree.cells.len()).collect::<Vec<_>>(),
        ),
        per_cell: b.len(),
        accept2: stree
            .cells
            .iter()
            .map(|c| (b.radius() * c.half / theta + resolution(c.center, c.half)).powi(2))
            .collect(),
        com: stree.cells.iter().map(|c| c.center).collect(),
    }
}

/// Builds what the CPU walk starts from; in a periodic box `pbox` the
/// points wrapped into it first.
pub(crate) fn prepare<R: Real>(
    targets: &Particles<R>,
    sources: &Particles<R>,
    far: &far::Plan,
    opts: &TreeOptions,
    pbox: Option<&PeriodicBox>,
) -> Result<Prepared<R>, Error> {
    let mut spos = positions_f64(sources);
    if let Some(b) = pbox {
        b.wrap(&mut spos)?;
    }
    let stree = Octree::build([&spos[0], &spos[1], &spos[2]], opts.ncrit);
    let mut src = sorted(sources, &stree.order);
    if pbox.is_some() {
        src.set_positions([&spos[0], &spos[1], &spos[2]], &stree.order);
    }
    let cells = match far {
        far::Plan::Monopole { strength } => pseudo_sources(&stree, &src, strength, opts.theta),
        far::Plan::Nodes(rep) => node_cells(&stree, &src, rep, opts.order, opts.theta),
        far::Plan::Laplace { .. } => unreachable!("the treecode has no Laplace expansions"),
    };
    let mut tpos = positions_f64(targets);
    if let Some(b) = pbox {
        b.wrap(&mut tpos)?;
    }
    let group = opts.group_size();
    let ttree = Octree::build([&tpos[0], &tpos[1], &tpos[2]], group);
    let mut tgt = sorted(targets, &ttree.order);
    if pbox.is_some() {
        tgt.set_positions([&tpos[0], &tpos[1], &tpos[2]], &ttree.order);
    }
    let groups = target_groups(&ttree, group);
    Ok(Prepared {
        stree,
        src,
        cells,
        ttree,
        tgt,
        groups,
    })
}

/// A thread's room for the walk: the near leaves and accepted cells of a
/// group, their sources in one list, and the far images' scratch.
type Walk<R> = (Vec<(usize, usize)>, Vec<u32>, SoA<R>, Scratch);

/// The Barnes-Hut treecode of kernel `K` on the CPU, with the parameters
/// `p` and the far field `far` (checked by the front door); the problem is
/// not empty. The result approximates the direct sum, more closely for
/// smaller `theta` (and, with nodes, higher order).
#[allow(clippy::needless_range_loop)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<K: Kernel, R: Real>(
    p: &[R],
    far: &far::Plan,
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &TreeOptions,
    domain: &Domain,
    clock: &mut Clock<'_>,
) -> Result<Outputs<R>, Error> {
    let def = K::def();
    let (m, no) = (targets.len(), def.n_outputs());
    let pbox = domain.periodic();
    // The walk meets the source tree at each near image's shift (the box
    // itself in free space); the farther images come by expansions.
    let shifts = PeriodicBox::near_shifts(pbox);
    let far_images = match pbox {
        Some(b) => Some(FarImages::new::<K, R>(
            b,
            sources,
            IMAGE_ORDER,
            "the treecode",
        )?),
        None => None,
    };

    let Prepared {
        stree,
        src,
        cells,
        ttree,
        tgt,
        groups,
    } = prepare(targets, sources, far, opts, pbox)?;
    clock.lap(Stage::Tree)?;

    let nt = def.n_targets();
    // Each group: (outputs of its targets in tree order, p2p, p2c).
    let results: Vec<(Vec<R>, u64, u64)> = groups
        .par_iter()
        .map_init(
            || {
                (
                    Vec::new(),
                    Vec::new(),
                    SoA::<R>::with_capacity(src.slots.len(), 4096),
                    Scratch::new(IMAGE_ORDER),
                )
            },
            |(near, far, list, scratch): &mut Walk<R>, &(gb, ge)| {
                let mut lo = [f64::INFINITY; 3];
                let mut hi = [f64::NEG_INFINITY; 3];
                for i in gb..ge {
                    for a in 0..3 {
                        let x = tgt.pos[a][i].to_f64();
                        lo[a] = lo[a].min(x);
                        hi[a] = hi[a].max(x);
                    }
                }
                // The walk: one list of the pseudo-sources of the accepted cells
                // followed by the particles of the leaves that are not, so each
                // target makes one long vectorised pass over it. In a periodic
                // box once per near image: the group moved by -v meets the
                // tree, what it takes moved by +v.
                list.clear();
                let (mut near_n, mut far_n) = (0, 0);
                let per = cells.per_cell;
                for v in &shifts {
                    let (lo, hi) = (
                        [0, 1, 2].map(|a| lo[a] - v[a]),
                        [0, 1, 2].map(|a| hi[a] - v[a]),
                    );
                    let at = list.pos[0].len();
                    let mut c = 0;
                    while c < stree.cells.len() {
                        let cell = &stree.cells[c];
                        let accept = dist2_to_box(cells.com[c], lo, hi) > cells.accept2[c]
                            && !boxes_overlap(lo, hi, cell.center, cell.half);
                        if accept {
                            far.push(c as u32);
                            c = cell.next;
                        } else if cell.is_leaf() {
                            near.push((cell.begin, cell.end));
                            near_n += cell.len();
                            c = cell.next;
                        } else {
                            c = cell.more;
                        }
                    }
                    if per == 1 {
                        list.gather_from(&cells.soa, far);
                    } else {
                        for &c in far.iter() {
                            let c = c as usize;
                            list.push_from(&cells.soa, c * per..(c + 1) * per);
                        }
                    }
                    far_n += far.len() * per;
                    for &(b, e) in near.iter() {
                        list.push_from(&src, b..e);
                    }
                    near.clear();
                    far.clear();
                    if *v != [0.0; 3] {
                        for (axis, &d) in list.pos.iter_mut().zip(v) {
                            axis[at..].iter_mut().for_each(|x| *x += R::c(d));
                        }
                    }
                }
                let slices = list.slices();
                let mut out = vec![R::zero(); (ge - gb) * no];
                let mut t = [R::zero(); MAX_SLOTS];
                for (i, o) in (gb..ge).zip(out.chunks_mut(no)) {
                    for k in 0..nt {
                        t[k] = tgt.slots[k][i];
                    }
                    let xi = [tgt.pos[0][i], tgt.pos[1][i], tgt.pos[2][i]];
                    K::p2p_target(p, xi, &t, &slices, 0..slices.len(), o);
                    if let (Some(f), Some(b)) = (&far_images, pbox) {
                        f.add(def, b, xi.map(|x| x.to_f64()), &t, o, scratch);
                    }
                }
                let g = (ge - gb) as u64;
                (out, g * near_n as u64, g * far_n as u64)
            },
        )
        .collect();

    // Back to the caller's order.
    let mut slots = vec![vec![R::zero(); m]; no];
    let stats = clock.stats();
    stats.source_cells = stree.cells.len();
    stats.target_groups = groups.len();
    for (&(gb, _), (out, p2p, p2c)) in groups.iter().zip(&results) {
        for (r, o) in out.chunks(no).enumerate() {
            let i = ttree.order[gb + r] as usize;
            for k in 0..no {
                slots[k][i] = o[k];
            }
        }
        stats.p2p += p2p;
        stats.p2c += p2c;
    }
    clock.lap(Stage::Walk)?;
    Ok(Outputs::new(def.name.as_str(), &def.outputs, slots))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributions::{plummer, uniform_cube};

    /// The groups cover every target once, in order, and hold at most `cap`
    /// targets unless they are one leaf.
    fn check_groups(pos: &[[f64; 3]], ncrit: usize, cap: usize) {
        let xs: [Vec<f64>; 3] = [0, 1, 2].map(|a| pos.iter().map(|p| p[a]).collect());
        let tree = Octree::build([&xs[0], &xs[1], &xs[2]], ncrit);
        let groups = target_groups(&tree, cap);
        let mut at = 0;
        for &(b, e) in &groups {
            assert_eq!(b, at, "groups are contiguous and in order");
            assert!(e > b, "no empty group");
            let one_leaf = tree.leaves().any(|(_, c)| c.begin == b && c.end == e);
            assert!(e - b <= cap || one_leaf, "group {b}..{e} over {cap}");
            at = e;
        }
        assert_eq!(at, pos.len(), "every target is in a group");
    }

    #[test]
    fn target_groups_partition_the_targets() {
        let cube = uniform_cube(20_000, 3);
        let sphere = plummer(20_000, 4).0;
        for (ncrit, cap) in [(64, 64), (64, 128), (16, 128), (128, 128), (8, 8)] {
            check_groups(&cube, ncrit, cap);
            check_groups(&sphere, ncrit, cap);
        }
        let same = vec![[0.5; 3]; 300];
        check_groups(&same, 16, 128);
        check_groups(&cube[..5], 16, 128);
    }
}
