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

use super::octree::Octree;
use crate::direct::Outputs;
use crate::error::Error;
use crate::kernel::{Kernel, SourceSlices, MAX_SLOTS};
use crate::particles::Particles;
use crate::real::Real;

/// Targets per group when the options leave it at 0: one block of the GPU
/// walk, and on the CPU the fastest of 16 to 128 (1e6 Plummer, 2 cores).
pub const DEFAULT_GROUP: usize = 128;

/// Settings of the treecode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TreeOptions {
    /// Opening angle: smaller is more accurate; 0 opens every cell (a
    /// direct sum through the tree).
    pub theta: f64,
    /// Most particles in a source leaf.
    pub ncrit: usize,
    /// Most targets in a group that walks the tree together (0:
    /// [`DEFAULT_GROUP`]). Smaller groups accept cells sooner, larger ones
    /// share the walk.
    pub group: usize,
}

impl TreeOptions {
    /// The group size these options ask for.
    pub fn group_size(&self) -> usize {
        if self.group == 0 {
            DEFAULT_GROUP
        } else {
            self.group
        }
    }
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            theta: 0.5,
            ncrit: 32,
            group: 0,
        }
    }
}

/// What a treecode evaluation did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeStats {
    pub source_cells: usize,
    pub target_groups: usize,
    /// Particle-particle interactions.
    pub p2p: u64,
    /// Particle-cell (monopole) interactions.
    pub p2c: u64,
    /// Seconds building the two trees and the pseudo-sources.
    pub build_seconds: f64,
    /// Seconds walking and evaluating.
    pub eval_seconds: f64,
}

/// Positions and slots in one order, as contiguous arrays.
pub(crate) struct SoA<R> {
    pub(crate) pos: [Vec<R>; 3],
    pub(crate) slots: Vec<Vec<R>>,
}

impl<R: Real> SoA<R> {
    pub(crate) fn with_capacity(n_slots: usize, n: usize) -> Self {
        SoA {
            pos: [0, 1, 2].map(|_| Vec::with_capacity(n)),
            slots: (0..n_slots).map(|_| Vec::with_capacity(n)).collect(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.pos.iter_mut().for_each(Vec::clear);
        self.slots.iter_mut().for_each(Vec::clear);
    }

    /// Appends the entries `idx` of `other` (a gather: one pass per slot,
    /// where a `push_from` per entry would copy one number per call).
    pub(crate) fn gather_from(&mut self, other: &SoA<R>, idx: &[u32]) {
        for a in 0..3 {
            let o = &other.pos[a];
            self.pos[a].extend(idx.iter().map(|&c| o[c as usize]));
        }
        for (s, o) in self.slots.iter_mut().zip(&other.slots) {
            s.extend(idx.iter().map(|&c| o[c as usize]));
        }
    }

    /// Appends the entries `range` of `other`.
    pub(crate) fn push_from(&mut self, other: &SoA<R>, range: std::ops::Range<usize>) {
        for a in 0..3 {
            self.pos[a].extend_from_slice(&other.pos[a][range.clone()]);
        }
        for (s, o) in self.slots.iter_mut().zip(&other.slots) {
            s.extend_from_slice(&o[range.clone()]);
        }
    }

    pub(crate) fn slices(&self) -> SourceSlices<'_, R> {
        let mut fields: [&[R]; MAX_SLOTS] = [&[]; MAX_SLOTS];
        for (f, s) in fields.iter_mut().zip(&self.slots) {
            *f = s;
        }
        SourceSlices {
            pos: [&self.pos[0], &self.pos[1], &self.pos[2]],
            fields,
            n_fields: self.slots.len(),
        }
    }
}

/// Which source slots are the additive strength (`strength FIELD;`): any
/// kernel that declares one runs, with or without a far field, since the
/// monopoles need only that the strength adds up.
pub(crate) fn strength_slots<K: Kernel>() -> Result<Vec<usize>, Error> {
    let def = K::def();
    match def.strength_slots() {
        Some(slots) => Ok(slots.collect()),
        None => Err(Error::NoStrength {
            kernel: def.name.clone(),
            method: "the treecode",
        }),
    }
}

/// Per-cell pseudo-source: summed strength at the centre of strength, other
/// fields averaged with the strength's magnitude as weight; and the square
/// of the acceptance distance `size / theta + delta`.
pub(crate) struct CellSources<R> {
    pub(crate) soa: SoA<R>,
    pub(crate) accept2: Vec<f64>,
    /// Centre of strength, in f64 for the acceptance test.
    pub(crate) com: Vec<[f64; 3]>,
}

// Index loops over the axes and slots of parallel per-cell arrays read more
// plainly than zipped iterators here.
#[allow(clippy::needless_range_loop)]
fn pseudo_sources<R: Real>(
    tree: &Octree,
    src: &SoA<R>,
    strength: &[usize],
    theta: f64,
) -> CellSources<R> {
    let nc = tree.cells.len();
    let ns = src.slots.len();
    let is_strength: Vec<bool> = (0..ns).map(|k| strength.contains(&k)).collect();
    // Accumulated per cell: weight, weight * position, slot sums (strength
    // plain, other slots weighted), count.
    let mut w = vec![0.0f64; nc];
    let mut wx = vec![[0.0f64; 3]; nc];
    let mut acc = vec![vec![0.0f64; ns]; nc];
    let mut plain = vec![vec![0.0f64; ns]; nc];
    // Children come after their parent, so a reverse sweep sees every child
    // before its parent.
    for c in (0..nc).rev() {
        let cell = &tree.cells[c];
        if cell.is_leaf() {
            for j in cell.begin..cell.end {
                let wj = strength
                    .iter()
                    .map(|&k| src.slots[k][j].to_f64().powi(2))
                    .sum::<f64>()
                    .sqrt();
                w[c] += wj;
                for a in 0..3 {
                    wx[c][a] += wj * src.pos[a][j].to_f64();
                }
                for k in 0..ns {
                    let v = src.slots[k][j].to_f64();
                    acc[c][k] += if is_strength[k] { v } else { wj * v };
                    plain[c][k] += v;
                }
            }
        } else {
            for child in tree.children(c) {
                w[c] += w[child];
                for a in 0..3 {
                    wx[c][a] += wx[child][a];
                }
                for k in 0..ns {
                    acc[c][k] += acc[child][k];
                    plain[c][k] += plain[child][k];
                }
            }
        }
    }
    let mut soa = SoA::with_capacity(ns, nc);
    let mut com = Vec::with_capacity(nc);
    let mut accept2 = Vec::with_capacity(nc);
    for c in 0..nc {
        let cell = &tree.cells[c];
        let n = cell.len().max(1) as f64;
        // Without strength (all zero) the pseudo-source adds nothing; place
        // it at the cell's centre.
        let p = if w[c] > 0.0 {
            wx[c].map(|x| x / w[c])
        } else {
            cell.center
        };
        for a in 0..3 {
            soa.pos[a].push(R::c(p[a]));
        }
        for k in 0..ns {
            let v = if is_strength[k] {
                acc[c][k]
            } else if w[c] > 0.0 {
                acc[c][k] / w[c]
            } else {
                plain[c][k] / n
            };
            soa.slots[k].push(R::c(v));
        }
        let delta = (0..3)
            .map(|a| (p[a] - cell.center[a]).powi(2))
            .sum::<f64>()
            .sqrt();
        let reach = if theta > 0.0 {
            2.0 * cell.half / theta + delta
        } else {
            f64::INFINITY
        };
        accept2.push(reach * reach);
        com.push(p);
    }
    CellSources { soa, accept2, com }
}

/// The CPU's pseudo-sources of `tree` from sources already in tree order,
/// in the form [`super::device_build::PseudoSources`] has: the reference
/// the device version is tested against.
#[doc(hidden)]
pub fn pseudo_sources_on_host<R: Real>(
    tree: &Octree,
    pos: &[Vec<R>; 3],
    slots: &[Vec<R>],
    strength: &[usize],
    theta: f64,
) -> super::device_build::PseudoSources<R> {
    let src = SoA {
        pos: pos.clone(),
        slots: slots.to_vec(),
    };
    let c = pseudo_sources(tree, &src, strength, theta);
    super::device_build::PseudoSources {
        pos: c.soa.pos,
        slots: c.soa.slots,
        com: c.com,
        accept2: c.accept2,
    }
}

/// Copies particles into tree order.
pub(crate) fn sorted<R: Real>(p: &Particles<R>, order: &[u32]) -> SoA<R> {
    let mut s = SoA::with_capacity(p.slots().len(), order.len());
    for &i in order {
        let i = i as usize;
        for a in 0..3 {
            s.pos[a].push(p.positions()[a][i]);
        }
        for (k, slot) in p.slots().iter().enumerate() {
            s.slots[k].push(slot[i]);
        }
    }
    s
}

pub(crate) fn positions_f64<R: Real>(p: &Particles<R>) -> [Vec<f64>; 3] {
    p.positions()
        .map(|v| v.iter().map(|x| x.to_f64()).collect())
}

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

/// The parameters converted to `R` and the strength slots.
pub(crate) type Started<R> = (Vec<R>, Vec<usize>);

/// The checks a treecode evaluation starts with: the parameters (converted)
/// and the strength slots, or `None` when there is nothing to evaluate (no
/// targets, no sources or no outputs: the outputs are zeros).
pub(crate) fn start<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &TreeOptions,
) -> Result<Option<Started<R>>, Error> {
    let p = crate::direct::check_inputs::<K, R>(params, targets, sources)?;
    if !(opts.theta >= 0.0 && opts.theta.is_finite()) {
        return Err(Error::BadOption(format!(
            "theta must be a finite number >= 0, not {}",
            opts.theta
        )));
    }
    let strength = strength_slots::<K>()?;
    let empty = targets.is_empty() || sources.is_empty() || K::def().n_outputs() == 0;
    Ok((!empty).then_some((p, strength)))
}

/// Both trees, the sources and targets in tree order, the cells'
/// pseudo-sources and the target groups: what the CPU and the GPU walks
/// both start from.
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

/// Builds what the CPU walk starts from.
pub(crate) fn prepare<R: Real>(
    targets: &Particles<R>,
    sources: &Particles<R>,
    strength: &[usize],
    opts: &TreeOptions,
) -> Prepared<R> {
    let spos = positions_f64(sources);
    let stree = Octree::build([&spos[0], &spos[1], &spos[2]], opts.ncrit);
    let src = sorted(sources, &stree.order);
    let cells = pseudo_sources(&stree, &src, strength, opts.theta);
    let tpos = positions_f64(targets);
    let group = opts.group_size();
    let ttree = Octree::build([&tpos[0], &tpos[1], &tpos[2]], group);
    let tgt = sorted(targets, &ttree.order);
    let groups = target_groups(&ttree, group);
    Prepared {
        stree,
        src,
        cells,
        ttree,
        tgt,
        groups,
    }
}

/// The Barnes-Hut treecode of kernel `K` on the CPU. Same contract as
/// [`crate::direct_cpu`]; the result approximates the direct sum, more
/// closely for smaller `theta`.
#[allow(clippy::needless_range_loop)]
pub fn treecode_cpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &TreeOptions,
) -> Result<(Outputs<R>, TreeStats), Error> {
    let def = K::def();
    let Some((p, strength)) = start::<K, R>(params, targets, sources, opts)? else {
        return Ok((Outputs::zeros::<K>(targets.len()), TreeStats::default()));
    };
    let (m, no) = (targets.len(), def.n_outputs());

    let t0 = std::time::Instant::now();
    let Prepared {
        stree,
        src,
        cells,
        ttree,
        tgt,
        groups,
    } = prepare(targets, sources, &strength, opts);
    let build_seconds = t0.elapsed().as_secs_f64();

    let t1 = std::time::Instant::now();
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
                )
            },
            |(near, far, list): &mut (Vec<(usize, usize)>, Vec<u32>, SoA<R>), &(gb, ge)| {
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
                // target makes one long vectorised pass over it.
                list.clear();
                let mut near_n = 0;
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
                list.gather_from(&cells.soa, far);
                let far_n = far.len();
                for &(b, e) in near.iter() {
                    list.push_from(&src, b..e);
                }
                near.clear();
                far.clear();
                let slices = list.slices();
                let mut out = vec![R::zero(); (ge - gb) * no];
                let mut t = [R::zero(); MAX_SLOTS];
                for (i, o) in (gb..ge).zip(out.chunks_mut(no)) {
                    for k in 0..nt {
                        t[k] = tgt.slots[k][i];
                    }
                    let xi = [tgt.pos[0][i], tgt.pos[1][i], tgt.pos[2][i]];
                    K::p2p_target(&p, xi, &t, &slices, 0..slices.len(), o);
                }
                let g = (ge - gb) as u64;
                (out, g * near_n as u64, g * far_n as u64)
            },
        )
        .collect();

    // Back to the caller's order.
    let mut slots = vec![vec![R::zero(); m]; no];
    let mut stats = TreeStats {
        source_cells: stree.cells.len(),
        target_groups: groups.len(),
        build_seconds,
        ..Default::default()
    };
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
    stats.eval_seconds = t1.elapsed().as_secs_f64();
    Ok((Outputs::new(def.name.as_str(), &def.outputs, slots), stats))
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
