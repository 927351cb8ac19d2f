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

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::linalg::{gemm, gram_add, par_gemm, symmetric_eigen, Element, View};
use super::nodes::{Basis, Local, Upward};
use super::Representation;
use crate::kernel::{Kernel, SourceSlices, MAX_SLOTS};
use crate::tree::morton::MAX_LEVEL;
use crate::tree::octree::Cell;
use crate::tree::traversal::Lists;
use crate::tree::Octree;

mod cubic;
mod scaling;
mod skeleton;
mod symmetry;
use cubic::Cubic;
use scaling::Scaling;
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
/// pairs): the other operators' ranges are close to theirs.
const BASIS_KEYS: usize = 100;

/// Two cells' levels and their offset in units of the deepest level's
/// half side: one M2L operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub(crate) target_level: u8,
    pub(crate) source_level: u8,
    pub(crate) offset: [i32; 3],
}

/// What the operators depend on besides the offsets: two evaluations with
/// the same `Geometry` share their bases and operators.
#[derive(Clone, Debug, PartialEq)]
struct Geometry {
    kernel: &'static str,
    /// Bit patterns of the f64 values (parameters, fields, nodes, root,
    /// tolerance): equal means the same operators.
    params: Vec<u64>,
    fields: Vec<u64>,
    strength: Vec<usize>,
    target_slots: usize,
    n_outputs: usize,
    nodes: Vec<[u64; 3]>,
    root_half: u64,
    tol: u64,
    /// A homogeneous kernel's factors ([`Scaling`]): its operators are
    /// kept by their shape at the reference level.
    scaling: Option<Vec<u64>>,
    /// A symmetric kernel's ([`symmetry`]): one basis for both sides.
    symmetric: bool,
    /// Bases fitted to whole orbits of the cube's symmetries ([`cubic`]).
    cubic: bool,
}

/// The operators of one geometry.
struct Cached {
    geometry: Geometry,
    bases: Arc<Vec<Bases>>,
    /// A homogeneous kernel's bases at the reference level, which `bases`
    /// are scaled from (and the operators projected on).
    reference: Option<Arc<Bases>>,
    ops: HashMap<Key, Dense>,
    bytes: usize,
}

/// The geometries kept, the most recently used last.
static CACHE: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

/// Drops the compressed M2L operators kept from the last evaluations.
pub fn clear_operator_cache() {
    if let Ok(mut c) = CACHE.lock() {
        c.clear();
    }
}

/// A cell's centre in units of the deepest level's half side, from the
/// corner of the root cube: `(2 i + 1) 2^(MAX_LEVEL - level)`.
fn lattice(cell: &Cell, corner: [f64; 3], unit: f64) -> [i32; 3] {
    [0, 1, 2].map(|a| ((cell.center[a] - corner[a]) / unit).round() as i32)
}

/// What the operators need to know of the kernel and the trees.
struct Setup<'a> {
    basis: &'a dyn Basis,
    params: Vec<f64>,
    /// One value per source slot: the strength slots 0 (set to 1 one at a
    /// time), the others the cells' common mean.
    fields: Vec<f64>,
    strength: &'a [usize],
    n_outputs: usize,
    target_slots: usize,
    /// The root's half side (both trees).
    root_half: f64,
}

#[cfg(test)]
impl<'a> Setup<'a> {
    /// The setup of the compressed modules' unit tests: root half side
    /// 0.5, no target slots.
    fn for_test(
        basis: &'a dyn Basis,
        params: &[f64],
        fields: &[f64],
        strength: &'a [usize],
        n_outputs: usize,
    ) -> Self {
        Setup {
            basis,
            params: params.to_vec(),
            fields: fields.to_vec(),
            strength,
            n_outputs,
            target_slots: 0,
            root_half: 0.5,
        }
    }
}

impl Setup<'_> {
    fn k(&self) -> usize {
        self.basis.len()
    }
    /// A target node's values: each output, and its differences per
    /// target slot.
    fn channels(&self) -> usize {
        self.n_outputs * (1 + self.target_slots)
    }
    fn rows(&self) -> usize {
        self.k() * self.channels()
    }
    fn cols(&self) -> usize {
        self.k() * self.strength.len()
    }
    fn half(&self, level: u8) -> f64 {
        self.root_half / (1u64 << level) as f64
    }

    /// The operator of `key`, `rows x cols` stored row by row (so
    /// `View::new(&a, cols).t()` is it; a target node's values for all
    /// the source nodes are then written contiguously, where column by
    /// column they were a strided scatter that took longer than the kernel
    /// evaluations): row `node * channels + channel` of the target cell's
    /// values (as [`Local`]), column `node * nq + component` of the source
    /// cell's strengths (as [`Upward`]).
    fn operator<K: Kernel>(&self, key: &Key) -> Vec<f64> {
        let all: Vec<usize> = (0..self.k()).collect();
        self.operator_on::<K>(key, &all, &all)
    }

    /// The rows of the target nodes `tn` and the columns of the source
    /// nodes `sn` of [`Setup::operator`], in their order.
    fn operator_on<K: Kernel>(&self, key: &Key, tn: &[usize], sn: &[usize]) -> Vec<f64> {
        let (no, nq) = (self.n_outputs, self.strength.len());
        let channels = self.channels();
        let (rows, cols) = (tn.len() * channels, sn.len() * nq);
        let unit = self.half(MAX_LEVEL as u8);
        let d = key.offset.map(|x| x as f64 * unit);
        let (ht, hs) = (self.half(key.target_level), self.half(key.source_level));
        let all = self.basis.nodes();
        let k = sn.len();
        let mut a = vec![0.0; rows * cols];
        // The source nodes, all at once; each strength component in turn.
        let pos: [Vec<f64>; 3] = [0, 1, 2].map(|ax| sn.iter().map(|&n| hs * all[n][ax]).collect());
        let mut fields: Vec<Vec<f64>> = self.fields.iter().map(|&v| vec![v; k]).collect();
        let mut out = vec![0.0; k * no];
        let mut base = vec![0.0; k * no];
        for (s, &slot) in self.strength.iter().enumerate() {
            fields[slot].iter_mut().for_each(|v| *v = 1.0);
            let mut sl: [&[f64]; MAX_SLOTS] = [&[]; MAX_SLOTS];
            for (f, v) in sl.iter_mut().zip(&fields) {
                *f = v;
            }
            let src = SourceSlices {
                pos: [&pos[0], &pos[1], &pos[2]],
                fields: sl,
                n_fields: fields.len(),
            };
            for (tn, xt) in tn.iter().map(|&n| &all[n]).enumerate() {
                let y = [0, 1, 2].map(|ax| d[ax] + ht * xt[ax]);
                for basis in 0..=self.target_slots {
                    let mut t = [0.0; MAX_SLOTS];
                    if basis > 0 {
                        t[basis - 1] = 1.0;
                    }
                    out.iter_mut().for_each(|o| *o = 0.0);
                    K::p2p_each(&self.params, y, &t, &src, 0..k, &mut out);
                    if basis == 0 {
                        base.copy_from_slice(&out);
                    }
                    for o in 0..no {
                        let at = (tn * channels + basis * no + o) * cols;
                        let row = &mut a[at..at + cols];
                        let (v, b) = (&out[o * k..(o + 1) * k], &base[o * k..(o + 1) * k]);
                        for sn in 0..k {
                            row[sn * nq + s] = if basis == 0 { v[sn] } else { v[sn] - b[sn] };
                        }
                    }
                }
            }
            fields[slot].iter_mut().for_each(|v| *v = 0.0);
        }
        a
    }
}

/// A level's bases: `u` (`rows x rank_t`) and `v` (`cols x rank_s`),
/// column-major.
#[derive(Default, Clone)]
pub(crate) struct Bases {
    pub(crate) u: Vec<f64>,
    pub(crate) rank_t: usize,
    pub(crate) v: Vec<f64>,
    pub(crate) rank_s: usize,
    /// The singular values of `u`'s and `v`'s columns over the largest
    /// (of the fitted bases; the cube's rotations weigh with them).
    pub(crate) sigma_t: Vec<f64>,
    pub(crate) sigma_s: Vec<f64>,
    /// The nodes the operators are projected on `u` and `v` from (None
    /// for a homogeneous kernel's scaled levels: the reference's serve).
    skeleton_t: Option<Arc<Skeleton>>,
    skeleton_s: Option<Arc<Skeleton>>,
}

/// The leading eigenvectors of the Gram matrix `g` (`n x n`): those whose
/// singular value (the eigenvalue's root) is above `tol` of the largest;
/// with `clusters`, and those equal to the last one kept (to 1e-6 of it),
/// so that a symmetric `g`'s kept span is invariant under its symmetries
/// ([`cubic`]: their repeated eigenvalues are not split; where rounding
/// splits them further near the cut, the rotations weigh the columns'
/// misses by their singular values). With their count and their singular
/// values over the largest.
fn leading(n: usize, g: &[f64], tol: f64, clusters: bool) -> (Vec<f64>, usize, Vec<f64>) {
    let (values, vectors) = symmetric_eigen(n, g);
    let top = values.first().copied().unwrap_or(0.0).max(0.0);
    let mut r = values
        .iter()
        .take_while(|&&l| l > 0.0 && l >= tol * tol * top)
        .count()
        .max(1);
    while clusters && r < n && values[r] > 0.0 && values[r - 1] - values[r] <= 1e-6 * values[r - 1]
    {
        r += 1;
    }
    let sigma = values[..r]
        .iter()
        .map(|&l| (l.max(0.0) / top.max(f64::MIN_POSITIVE)).sqrt())
        .collect();
    (vectors[..n * r].to_vec(), r, sigma)
}

/// The source fields' common values, or `None` where a field other than
/// the strength differs between the cells `used` (relatively, past 1e-12).
fn common_fields(up: &Upward, strength: &[usize], used: &[bool]) -> Option<Vec<f64>> {
    let first = used.iter().position(|&u| u)?;
    let mut fields = up.mean[first].clone();
    for (s, f) in fields.iter_mut().enumerate() {
        if strength.contains(&s) {
            *f = 0.0;
            continue;
        }
        let v = *f;
        let same = up
            .mean
            .iter()
            .zip(used)
            .all(|(m, &u)| !u || (m[s] - v).abs() <= 1e-12 * v.abs().max(1e-300));
        if !same {
            return None;
        }
    }
    Some(fields)
}

/// What [`m2l`] did: the pairs it left to the kernel (their offsets too
/// rare to pay for an operator), how many it translated with how many
/// operators, and how many of those were kept from an earlier evaluation.
pub(crate) struct Done {
    pub(crate) rest: Lists,
    pub(crate) pairs: u64,
    pub(crate) operators: usize,
    pub(crate) reused: usize,
    /// Seconds spent building the operators not kept from before: a cost
    /// of the first evaluation of a geometry, not of every one.
    pub(crate) build_seconds: f64,
}

/// The M2L of the lists `lists` (target cells of `ttree`, source cells of
/// `stree`) by compressed operators, adding to `local`, but for the pairs
/// of rare offsets, which it returns. `None`, having done nothing, where
/// it does not apply: the trees' root cubes differ, a source field other
/// than the strength varies between cells, or the operators are too large.
/// Singular values are kept down to `tol` of the largest.
#[allow(clippy::too_many_arguments)]
pub(crate) fn m2l<K: Kernel>(
    basis: &dyn Basis,
    tol: f64,
    params: &[f64],
    rep: &Representation,
    n_outputs: usize,
    ttree: &Octree,
    stree: &Octree,
    up: &Upward,
    lists: &Lists,
    local: &mut Local,
) -> Option<Done> {
    if ttree.bounds.center != stree.bounds.center || ttree.bounds.half != stree.bounds.half {
        return None;
    }
    let mut used = vec![false; stree.cells.len()];
    for l in &lists.m2l {
        for &s in l {
            used[s as usize] = true;
        }
    }
    let fields = common_fields(up, &rep.strength, &used)?;
    let setup = Setup {
        basis,
        params: params.to_vec(),
        fields,
        strength: &rep.strength,
        n_outputs,
        target_slots: rep.target_slots,
        root_half: ttree.bounds.half,
    };
    let (rows, cols) = (setup.rows(), setup.cols());
    if too_large(rows, cols) {
        return None;
    }

    // The pairs by operator.
    let unit = setup.half(MAX_LEVEL as u8);
    let corner = ttree.bounds.center.map(|c| c - ttree.bounds.half);
    let tl: Vec<[i32; 3]> = ttree
        .cells
        .iter()
        .map(|c| lattice(c, corner, unit))
        .collect();
    let sl: Vec<[i32; 3]> = stree
        .cells
        .iter()
        .map(|c| lattice(c, corner, unit))
        .collect();
    let mut pairs: Vec<(Key, u32, u32)> = lists
        .m2l
        .par_iter()
        .enumerate()
        .flat_map_iter(|(t, l)| {
            let (tl, sl) = (&tl, &sl);
            l.iter().map(move |&s| {
                let key = Key {
                    target_level: ttree.cells[t].level as u8,
                    source_level: stree.cells[s as usize].level as u8,
                    offset: [0, 1, 2].map(|a| tl[t][a] - sl[s as usize][a]),
                };
                (key, t as u32, s)
            })
        })
        .collect();
    pairs.par_sort_unstable_by_key(|x| x.0);
    let mut groups: Vec<(Key, std::ops::Range<usize>)> = Vec::new();
    for (i, &(key, _, _)) in pairs.iter().enumerate() {
        match groups.last_mut() {
            Some((g, r)) if *g == key => r.end = i + 1,
            _ => groups.push((key, i..i + 1)),
        }
    }
    // An operator pays for itself past a few dozen pairs; the pairs of
    // rarer offsets are left to the kernel.
    let counted: Vec<Counted> = groups.iter().map(|(k, r)| (*k, r.len())).collect();
    let (frequent, sharing) = frequent::<K>(&setup, &counted);
    let mut rest = Lists {
        m2l: vec![Vec::new(); lists.m2l.len()],
        p2p: Vec::new(),
    };
    let mut keep = frequent.into_iter();
    groups.retain(|(_, r)| {
        if keep.next().unwrap_or(false) {
            return true;
        }
        for &(_, t, s) in &pairs[r.clone()] {
            rest.m2l[t as usize].push(s);
        }
        false
    });
    if groups.is_empty() {
        return Some(Done {
            rest,
            pairs: 0,
            operators: 0,
            reused: 0,
            build_seconds: 0.0,
        });
    }

    let counted: Vec<Counted> = groups.iter().map(|(k, r)| (*k, r.len())).collect();
    let built = std::time::Instant::now();
    let Operators {
        bases,
        small,
        distinct,
        reused,
        ..
    } = operators::<K>(&setup, &counted, tol, &sharing);
    let build_seconds = if reused < distinct {
        built.elapsed().as_secs_f64()
    } else {
        0.0
    };

    let products = Products {
        bases: &bases,
        small: &small,
        groups: &groups,
        pairs: &pairs,
        used: &used,
        stree,
        ttree,
        rows,
        cols,
    };
    if tol >= SINGLE_TOLERANCE {
        products.translate::<f32>(&up.q, &mut local.v);
    } else {
        products.translate::<f64>(&up.q, &mut local.v);
    }
    Some(Done {
        rest,
        pairs: groups.iter().map(|(_, r)| r.len() as u64).sum(),
        operators: distinct,
        reused,
        build_seconds,
    })
}

/// The products of [`m2l`] once its operators are known, in `T`.
struct Products<'a> {
    bases: &'a [Bases],
    small: &'a [Small],
    groups: &'a [(Key, std::ops::Range<usize>)],
    pairs: &'a [(Key, u32, u32)],
    used: &'a [bool],
    stree: &'a Octree,
    ttree: &'a Octree,
    rows: usize,
    cols: usize,
}

impl Products<'_> {
    /// `V^T` on the source cells' node strengths `q`, the operators on
    /// those, `U` on the sums, added to the target cells' node values
    /// `local`: every product in `T` ([`SINGLE_TOLERANCE`]).
    fn translate<T: Element>(&self, q: &[f64], local: &mut [f64]) {
        let Products {
            bases,
            small,
            groups,
            pairs,
            used,
            stree,
            ttree,
            rows,
            cols,
        } = *self;
        let one = T::c(1.0);
        let u: Vec<Cow<'_, [T]>> = bases.iter().map(|b| T::from_f64s(&b.u)).collect();
        let v: Vec<Cow<'_, [T]>> = bases.iter().map(|b| T::from_f64s(&b.v)).collect();
        // The operators in `T`, each distinct one once (a homogeneous
        // kernel's keys of one shape share one).
        let mut at: HashMap<*const Vec<f64>, usize> = HashMap::new();
        let mut ops: Vec<Cow<'_, [T]>> = Vec::new();
        let op_of: Vec<usize> = small
            .iter()
            .map(|s| {
                *at.entry(Arc::as_ptr(&s.data)).or_insert_with(|| {
                    ops.push(T::from_f64s(&s.data));
                    ops.len() - 1
                })
            })
            .collect();
        // The source cells' strengths in their level's basis: V^T q.
        let rs_max = bases.iter().map(|b| b.rank_s).max().unwrap_or(0);
        let mut hat_q = vec![T::zero(); stree.cells.len() * rs_max];
        for (l, b) in bases.iter().enumerate().filter(|(_, b)| b.rank_s > 0) {
            let cells: Vec<usize> = (0..stree.cells.len())
                .filter(|&c| used[c] && stree.cells[c].level as usize == l)
                .collect();
            let mut gathered = Vec::with_capacity(cells.len() * cols);
            for &c in &cells {
                gathered.extend(q[c * cols..(c + 1) * cols].iter().map(|&x| T::c(x)));
            }
            let mut h = vec![T::zero(); cells.len() * b.rank_s];
            par_gemm(
                b.rank_s,
                cols,
                cells.len(),
                View::new(&v[l], cols).t(),
                &gathered,
                &mut h,
            );
            for (i, &c) in cells.iter().enumerate() {
                hat_q[c * rs_max..c * rs_max + b.rank_s]
                    .copy_from_slice(&h[i * b.rank_s..(i + 1) * b.rank_s]);
            }
        }

        // The pairs, an operator's in batches: C times the gathered sources,
        // added to the targets' compressed values (one copy per worker).
        const BATCH: usize = 1024;
        let items: Vec<(usize, std::ops::Range<usize>)> = groups
            .iter()
            .enumerate()
            .flat_map(|(g, (_, r))| {
                (r.start..r.end)
                    .step_by(BATCH)
                    .map(move |a| (g, a..(a + BATCH).min(r.end)))
            })
            .collect();
        let rt_max = bases.iter().map(|b| b.rank_t).max().unwrap_or(0);
        let nt_cells = ttree.cells.len();
        let workers = rayon::current_num_threads().max(1);
        let hat_l = (0..workers)
            .into_par_iter()
            .map(|w| {
                let mut acc = vec![T::zero(); nt_cells * rt_max];
                let (mut x, mut y) = (Vec::new(), Vec::new());
                for (g, r) in items.iter().skip(w).step_by(workers) {
                    let key = &groups[*g].0;
                    let (rt, rs) = (
                        bases[key.target_level as usize].rank_t,
                        bases[key.source_level as usize].rank_s,
                    );
                    let (c, by) = small[*g].view_of(&ops[op_of[*g]], rt);
                    let batch = &pairs[r.clone()];
                    x.clear();
                    for &(_, _, s) in batch {
                        let s = s as usize;
                        x.extend_from_slice(&hat_q[s * rs_max..s * rs_max + rs]);
                    }
                    y.resize(rt * batch.len(), T::zero());
                    gemm(
                        rt,
                        rs,
                        batch.len(),
                        T::c(by),
                        c,
                        View::new(&x, rs),
                        T::zero(),
                        &mut y,
                        rt,
                    );
                    for (&(_, t, _), yc) in batch.iter().zip(y.chunks(rt)) {
                        let t = t as usize;
                        for (a, &b) in acc[t * rt_max..t * rt_max + rt].iter_mut().zip(yc) {
                            *a += b;
                        }
                    }
                }
                acc
            })
            .reduce_with(|mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, &y)| *x += y);
                a
            })
            .unwrap_or_default();

        // Back to the nodes: U times the compressed values, added to `local`.
        let mut received = vec![false; nt_cells];
        for (_, r) in groups {
            for &(_, t, _) in &pairs[r.clone()] {
                received[t as usize] = true;
            }
        }
        // In runs of cells, each run's cells of one level as one product (no
        // copy of all the nodes' values at once).
        const RUN: usize = 256;
        local.par_chunks_mut(rows * RUN).enumerate().for_each_init(
            || (Vec::new(), Vec::new(), Vec::new()),
            |(cells, h, w): &mut (Vec<usize>, Vec<T>, Vec<T>), (i, lv)| {
                let first = i * RUN;
                let n = lv.len() / rows;
                for (l, b) in bases.iter().enumerate().filter(|(_, b)| b.rank_t > 0) {
                    cells.clear();
                    cells.extend(
                        (first..first + n)
                            .filter(|&c| received[c] && ttree.cells[c].level as usize == l),
                    );
                    if cells.is_empty() {
                        continue;
                    }
                    h.clear();
                    for &c in cells.iter() {
                        h.extend_from_slice(&hat_l[c * rt_max..c * rt_max + b.rank_t]);
                    }
                    w.resize(cells.len() * rows, T::zero());
                    gemm(
                        rows,
                        b.rank_t,
                        cells.len(),
                        one,
                        View::new(&u[l], rows),
                        View::new(h, b.rank_t),
                        T::zero(),
                        w,
                        rows,
                    );
                    for (j, &c) in cells.iter().enumerate() {
                        let o = (c - first) * rows;
                        for (a, x) in lv[o..o + rows].iter_mut().zip(&w[j * rows..(j + 1) * rows]) {
                            *a += x.to_f64();
                        }
                    }
                }
            },
        );
    }
}

/// An operator's key and its number of pairs (the bases are fitted to the
/// operators of the most pairs).
type Counted = (Key, usize);

/// A compressed operator's entries, shared with the cache.
type Dense = Arc<Vec<f64>>;

/// One operator `C = U^T A V` (`r_t x r_s`): its own entries
/// (column-major), or a symmetric kernel's partner's `P` (`r_s x r_t`,
/// column-major) with `C = by P^T`, which is never copied.
#[derive(Clone)]
pub(crate) struct Small {
    data: Dense,
    /// `Some(by)`: `data` is the partner's.
    transposed: Option<f64>,
}

impl Small {
    /// `C` as a product's factor, of `rt` rows: its view and the factor
    /// it is scaled by.
    #[cfg(test)]
    pub(crate) fn view(&self, rt: usize) -> (View<'_>, f64) {
        self.view_of(&self.data, rt)
    }

    /// [`Small::view`] of `data`: this operator's entries, perhaps in
    /// another type.
    fn view_of<'a, T>(&self, data: &'a [T], rt: usize) -> (View<'a, T>, f64) {
        match self.transposed {
            None => (View::new(data, rt), 1.0),
            Some(by) => (View::new(data, data.len() / rt.max(1)).t(), by),
        }
    }

    /// `C`'s entries, column-major, of `rt` rows.
    pub(crate) fn column_major(&self, rt: usize) -> std::borrow::Cow<'_, [f64]> {
        let Some(by) = self.transposed else {
            return std::borrow::Cow::Borrowed(&self.data);
        };
        let rs = self.data.len() / rt.max(1);
        let p = &self.data;
        std::borrow::Cow::Owned(
            (0..rs)
                .flat_map(|j| (0..rt).map(move |i| by * p[j + i * rs]))
                .collect(),
        )
    }
}

/// The operators of a set of keys: the bases of every level and one
/// compressed operator a key, in the keys' order.
pub(crate) struct Operators {
    pub(crate) bases: Arc<Vec<Bases>>,
    pub(crate) small: Vec<Small>,
    /// Operators distinct among `small` (a homogeneous kernel's keys of
    /// one shape share one), and how many of those were kept from an
    /// earlier evaluation.
    pub(crate) distinct: usize,
    pub(crate) reused: usize,
    /// Of the keys asked for ([`operator_set`]), those frequent enough to
    /// have an operator (`small` is theirs, in order); the others' pairs
    /// are left to the kernel.
    pub(crate) frequent: Vec<bool>,
}

/// What the kernel's structure lets operators share, as measured:
/// homogeneous, one set for every level ([`scaling`]); symmetric, one
/// basis for both sides and an operator for two keys ([`symmetry`]).
#[derive(Clone, Debug, Default)]
struct Sharing {
    scaling: Option<Scaling>,
    symmetric: bool,
    /// The cube's symmetries: the bases fitted to whole orbits of offsets
    /// ([`cubic`]).
    cubic: Option<Arc<Cubic>>,
}

/// Which keys have pairs enough for an operator (at least [`MIN_PAIRS`]),
/// and what the kernel lets them share ([`Sharing`]): a homogeneous
/// kernel's keys of one shape at any level share an operator, so their
/// pairs count together.
fn frequent<K: Kernel>(setup: &Setup<'_>, counted: &[Counted]) -> (Vec<bool>, Sharing) {
    let keys: Vec<Key> = counted.iter().map(|(k, _)| *k).collect();
    let scaling = scaling::measure::<K>(setup, &keys);
    let symmetric = symmetry::measure::<K>(setup, &keys, scaling.as_ref());
    // Measured where the operators are kept: a homogeneous kernel's at the
    // reference level. One basis for both sides needs one permutation.
    let probe = match &scaling {
        Some(sc) => keys.first().and_then(|k| sc.canonical(k)),
        None => keys.first().copied(),
    };
    let cubic = cubic::measure::<K>(setup, probe.as_ref())
        .filter(|c| !symmetric || c.same_sides())
        .map(Arc::new);
    let Some(sc) = &scaling else {
        let frequent = counted.iter().map(|&(_, n)| n >= MIN_PAIRS).collect();
        return (
            frequent,
            Sharing {
                scaling,
                symmetric,
                cubic,
            },
        );
    };
    let mut by_shape: HashMap<Key, usize> = HashMap::new();
    let shapes: Vec<Key> = keys
        .iter()
        .map(|k| sc.canonical(k).expect("measured: every key moves"))
        .collect();
    for (shape, &(_, n)) in shapes.iter().zip(counted) {
        *by_shape.entry(*shape).or_default() += n;
    }
    let frequent = shapes.iter().map(|s| by_shape[s] >= MIN_PAIRS).collect();
    (
        frequent,
        Sharing {
            scaling,
            symmetric,
            cubic,
        },
    )
}

/// The highest Chebyshev degree whose operators the compressed M2L takes
/// for a kernel of `channels` local values and `strengths` strength
/// components a node (`(p + 1)^3` nodes a side): past it the M2L runs by
/// the kernel between node sets ([`too_large`]).
pub(crate) fn most_compressed_chebyshev(channels: usize, strengths: usize) -> usize {
    let per_node = channels.max(strengths).max(1);
    (1..)
        .take_while(|&p: &usize| (p + 1).pow(3) * per_node <= MAX_SIDE)
        .last()
        .unwrap_or(0)
}

/// Whether operators of `rows x cols` are past [`MAX_SIDE`] (said once per
/// run: the caller then runs M2L by the kernel).
pub(crate) fn too_large(rows: usize, cols: usize) -> bool {
    if rows <= MAX_SIDE && cols <= MAX_SIDE {
        return false;
    }
    // The fallback is correct but can be a hundred times slower (Coulomb
    // ki p 6 at 10^6 took 185 s by the kernel when this side was 1100;
    // compressed, 16.8 s the first evaluation).
    eprintln!(
        "[fmm] compressed M2L: operators of {rows} x {cols} (nodes times channels) are past \
         its largest side, {MAX_SIDE}; M2L runs by the kernel between node sets, which is \
         far slower: a lower order keeps it compressed"
    );
    true
}

/// The operators of `keys` (each with its number of pairs) for a source
/// tree whose fields are `fields` in every cell (the strength slots' 0;
/// the GPU's FMM checks that the others are common to all cells), in a
/// root cube of half side `root_half`, for the keys of enough pairs
/// ([`Operators::frequent`], as the CPU chooses); `None` where they are
/// [`too_large`] or no key is frequent.
#[allow(clippy::too_many_arguments)]
pub(crate) fn operator_set<K: Kernel>(
    basis: &dyn Basis,
    tol: f64,
    params: &[f64],
    rep: &Representation,
    fields: Vec<f64>,
    n_outputs: usize,
    root_half: f64,
    keys: &[(Key, usize)],
) -> Option<Operators> {
    let setup = Setup {
        basis,
        params: params.to_vec(),
        fields,
        strength: &rep.strength,
        n_outputs,
        target_slots: rep.target_slots,
        root_half,
    };
    if too_large(setup.rows(), setup.cols()) {
        return None;
    }
    let (frequent, sharing) = frequent::<K>(&setup, keys);
    let kept: Vec<Counted> = keys
        .iter()
        .zip(&frequent)
        .filter(|(_, &f)| f)
        .map(|(k, _)| *k)
        .collect();
    if kept.is_empty() {
        return None;
    }
    let mut ops = operators::<K>(&setup, &kept, tol, &sharing);
    ops.frequent = frequent;
    Some(ops)
}

/// The bases and the compressed operator of every key, those kept from the
/// last evaluation of the same geometry reused, the others computed and
/// kept. With a homogeneous kernel's `scaling`, the operators are those
/// of the keys' shapes at the reference level, and the levels' bases are
/// the reference level's scaled; with a symmetric kernel, of two partner
/// keys only one operator is compressed, the other is its transpose.
fn operators<K: Kernel>(
    setup: &Setup<'_>,
    groups: &[Counted],
    tol: f64,
    sharing: &Sharing,
) -> Operators {
    let scaling = sharing.scaling.as_ref();
    let geometry = Geometry {
        kernel: K::name(),
        params: setup.params.iter().map(|x| x.to_bits()).collect(),
        fields: setup.fields.iter().map(|x| x.to_bits()).collect(),
        strength: setup.strength.to_vec(),
        target_slots: setup.target_slots,
        n_outputs: setup.n_outputs,
        nodes: setup
            .basis
            .nodes()
            .iter()
            .map(|x| x.map(f64::to_bits))
            .collect(),
        root_half: setup.root_half.to_bits(),
        tol: tol.to_bits(),
        scaling: scaling.map(|s| s.doubled.iter().map(|x| x.to_bits()).collect()),
        symmetric: sharing.symmetric,
        cubic: sharing.cubic.is_some(),
    };
    let rows = setup.rows();
    // The operators' own keys: one per key, or per shape (with the shape's
    // pairs summed) for a homogeneous kernel.
    let own: Vec<Key> = groups
        .iter()
        .map(|(k, _)| scaling.map_or(*k, |s| s.canonical(k).expect("measured: every key moves")))
        .collect();
    let mut distinct: Vec<Counted> = Vec::with_capacity(groups.len());
    let mut at: HashMap<Key, usize> = HashMap::new();
    let index: Vec<usize> = own
        .iter()
        .zip(groups)
        .map(|(key, &(_, n))| {
            let i = *at.entry(*key).or_insert_with(|| {
                distinct.push((*key, 0));
                distinct.len() - 1
            });
            distinct[i].1 += n;
            i
        })
        .collect();
    let covered = |bases: &[Bases]| {
        groups.iter().all(|(k, _)| {
            bases
                .get(k.target_level as usize)
                .is_some_and(|b| b.rank_t > 0)
                && bases
                    .get(k.source_level as usize)
                    .is_some_and(|b| b.rank_s > 0)
        })
    };
    // The kept bases serve if they are of this geometry and cover its
    // levels (a homogeneous kernel's cover every level: its reference
    // level's are scaled to the others). Each operator is then projected
    // on them, as the operators the bases were not fitted to always are.
    type Kept = (Arc<Vec<Bases>>, Option<Arc<Bases>>, Vec<Option<Dense>>);
    let kept: Option<Kept> = CACHE.lock().ok().and_then(|cache| {
        let c = cache.iter().find(|c| c.geometry == geometry)?;
        let serves = c.reference.is_some() || covered(&c.bases);
        serves.then(|| {
            let ops = distinct
                .iter()
                .map(|(k, _)| c.ops.get(k).cloned())
                .collect();
            (c.bases.clone(), c.reference.clone(), ops)
        })
    });
    let (mut bases, reference, kept_ops) = match kept {
        Some(k) => k,
        None => {
            let fitted = fit_bases::<K>(setup, &distinct, tol, sharing);
            let reference = scaling
                .is_some()
                .then(|| Arc::new(fitted[scaling::REFERENCE_LEVEL as usize].clone()));
            let bases = if reference.is_some() {
                Vec::new()
            } else {
                fitted
            };
            (Arc::new(bases), reference, vec![None; distinct.len()])
        }
    };
    if let (Some(s), Some(r)) = (scaling, &reference) {
        if !covered(&bases) {
            bases = Arc::new(scaled_bases(r, s, &bases, groups, rows, setup.channels()));
        }
    }
    // The compressed operators C = U^T A V. The operators the bases were
    // fitted to are computed again rather than kept: a few hundred of
    // them at 500 x 125 doubles (Yukawa, order 4) would hold 100s of MB,
    // and recomputing is a small part of the precomputation (the Gram
    // products dominate it).
    // A symmetric kernel's key whose partner is among the keys, and
    // before it, takes the partner's operator transposed ([`Small`]); its
    // own is not computed.
    let from_partner: Vec<Option<(usize, f64)>> = distinct
        .iter()
        .enumerate()
        .map(|(i, (key, _))| {
            let (p, phi) = symmetry::partner(key, scaling).filter(|_| sharing.symmetric)?;
            let j = *at.get(&p)?;
            // A(key) = A(p)^T / phi.
            (j < i).then_some((j, 1.0 / phi))
        })
        .collect();
    // Kept, or the transpose of one kept.
    let reused = (0..distinct.len())
        .filter(|&i| {
            kept_ops[i].is_some() || from_partner[i].is_some_and(|(j, _)| kept_ops[j].is_some())
        })
        .count();
    // A key's two bases: a homogeneous kernel's are the reference's.
    let bases_of = |key: &Key| match &reference {
        Some(r) => (&**r, &**r),
        None => (
            &bases[key.target_level as usize],
            &bases[key.source_level as usize],
        ),
    };
    let compute = |key: &Key| -> Dense {
        let (bt, bs) = bases_of(key);
        let (st, ss) = (
            bt.skeleton_t.as_ref().expect("fitted bases have skeletons"),
            bs.skeleton_s.as_ref().expect("fitted bases have skeletons"),
        );
        let a = setup.operator_on::<K>(key, &st.nodes, &ss.nodes);
        Arc::new(skeleton::compress(&a, st, ss))
    };
    let to_compute: Vec<usize> = (0..distinct.len())
        .filter(|&i| kept_ops[i].is_none() && from_partner[i].is_none())
        .collect();
    // With the cube's symmetries, an orbit's operators are its first
    // key's rotated ([`cubic::moved`]), where both bases' spans are
    // invariant: one operator computed per orbit.
    type Rotations = HashMap<(usize, bool), Option<cubic::Rotations>>;
    let (orbit, orbit_rotations): (Vec<Option<(Key, usize)>>, Rotations) = match &sharing.cubic {
        Some(c) => {
            // Each level's and side's rotations, once, in parallel.
            let mut sides: Vec<(usize, bool)> = to_compute
                .iter()
                .flat_map(|&i| {
                    let key = &distinct[i].0;
                    [
                        (key.target_level as usize, false),
                        (key.source_level as usize, true),
                    ]
                })
                .collect();
            sides.sort_unstable();
            sides.dedup();
            let rotations: Rotations = sides
                .par_iter()
                .map(|&(l, cols)| {
                    let b = match &reference {
                        Some(r) => &**r,
                        None => &bases[l],
                    };
                    let rot = if cols {
                        c.rotations(&b.v, setup.cols(), &b.sigma_s, true, tol)
                    } else {
                        c.rotations(&b.u, rows, &b.sigma_t, false, tol)
                    };
                    ((l, cols), rot)
                })
                .collect();
            let plan = (0..distinct.len())
                .map(|i| {
                    let key = &distinct[i].0;
                    let (lt, ls) = (key.target_level as usize, key.source_level as usize);
                    let both = matches!(rotations.get(&(lt, false)), Some(Some(_)))
                        && matches!(rotations.get(&(ls, true)), Some(Some(_)));
                    let rep = c.canonical(key);
                    (both && to_compute.binary_search(&i).is_ok())
                        .then(|| Some((rep, c.element_to(&rep, key)?)))
                        .flatten()
                })
                .collect::<Vec<_>>();
            (plan, rotations)
        }
        None => (vec![None; distinct.len()], HashMap::new()),
    };
    let mut reps: Vec<Key> = orbit.iter().flatten().map(|(r, _)| *r).collect();
    reps.sort_unstable();
    reps.dedup();
    let rep_ops: HashMap<Key, Dense> = reps
        .par_iter()
        .map(|rep| {
            let op = match at.get(rep).and_then(|&j| kept_ops[j].clone()) {
                Some(kept) => kept,
                None => compute(rep),
            };
            (*rep, op)
        })
        .collect();
    let computed: Vec<Option<Dense>> = distinct
        .par_iter()
        .zip(kept_ops)
        .zip(&from_partner)
        .zip(&orbit)
        .map(|((((key, _), kept), from), orbit)| {
            if kept.is_some() || from.is_some() {
                return kept;
            }
            Some(match orbit {
                Some((rep, e)) => {
                    let (lt, ls) = (key.target_level as usize, key.source_level as usize);
                    let rot = |k| {
                        orbit_rotations
                            .get(&k)
                            .and_then(Option::as_ref)
                            .expect("both rotations")
                    };
                    Arc::new(cubic::moved(
                        &rep_ops[rep],
                        rot((lt, false)),
                        rot((ls, true)),
                        *e,
                    ))
                }
                None => compute(key),
            })
        })
        .collect();
    let own: Vec<Small> = (computed.iter().zip(&from_partner))
        .map(|(c, from)| match (c, from) {
            (Some(c), _) => Small {
                data: c.clone(),
                transposed: None,
            },
            (None, Some((j, by))) => Small {
                data: computed[*j]
                    .clone()
                    .expect("a partner before computes its own"),
                transposed: Some(*by),
            },
            (None, None) => unreachable!("every operator is kept, computed or a partner's"),
        })
        .collect();
    let small: Vec<Small> = index.iter().map(|&i| own[i].clone()).collect();

    // Kept for the next evaluation, within the cache's bytes: the
    // operators are valid while the bases they were projected on are.
    if let Ok(mut cache) = CACHE.lock() {
        // This geometry's entry, moved last; a new one replaces the
        // geometry's old (other bases), else the least recently used.
        let same = cache.iter().position(|c| {
            c.geometry == geometry
                && match (&c.reference, &reference) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => Arc::ptr_eq(&c.bases, &bases),
                    _ => false,
                }
        });
        let bytes = |b: &[Bases]| b.iter().map(|b| (b.u.len() + b.v.len()) * 8).sum::<usize>();
        let mut c = match same {
            Some(i) => cache.remove(i),
            None => {
                cache.retain(|c| c.geometry != geometry);
                if cache.len() >= CACHE_GEOMETRIES {
                    cache.remove(0);
                }
                Cached {
                    geometry,
                    bases: bases.clone(),
                    reference: reference.clone(),
                    ops: HashMap::new(),
                    bytes: 0,
                }
            }
        };
        c.bases = bases.clone();
        c.bytes = bytes(&bases)
            + reference
                .as_deref()
                .map_or(0, |r| bytes(std::slice::from_ref(r)))
            + c.ops.values().map(|o| o.len() * 8).sum::<usize>();
        // The others' bytes count against this one's room; where it needs
        // more, the least recently used others go (the geometry in use now
        // is the one the next evaluation most likely repeats).
        let mut others: usize = cache.iter().map(|o| o.bytes).sum();
        // Not those taken from a partner: they are its again.
        let dense =
            (distinct.iter().zip(&computed)).filter_map(|((key, _), op)| Some((key, op.as_ref()?)));
        for (key, op) in dense {
            while others + c.bytes + op.len() * 8 > CACHE_BYTES && !cache.is_empty() {
                others -= cache.remove(0).bytes;
            }
            if others + c.bytes + op.len() * 8 > CACHE_BYTES {
                break;
            }
            if !c.ops.contains_key(key) {
                c.bytes += op.len() * 8;
                c.ops.insert(*key, op.clone());
            }
        }
        cache.push(c);
    }
    Operators {
        bases,
        small,
        distinct: distinct.len(),
        reused,
        frequent: vec![true; groups.len()],
    }
}

/// A homogeneous kernel's bases for the levels of `groups`, those of
/// `kept` kept: `U_l` the reference's `U` with each channel's rows scaled
/// to level `l`, `V_l` the reference's `V` (strengths do not scale).
fn scaled_bases(
    reference: &Bases,
    scaling: &Scaling,
    kept: &[Bases],
    groups: &[Counted],
    rows: usize,
    channels: usize,
) -> Vec<Bases> {
    let mut out = kept.to_vec();
    out.resize(MAX_LEVEL as usize + 1, Bases::default());
    for (k, _) in groups {
        let t = &mut out[k.target_level as usize];
        if t.rank_t == 0 {
            let f: Vec<f64> = (0..channels)
                .map(|c| scaling.factor(c, k.target_level))
                .collect();
            t.rank_t = reference.rank_t;
            t.skeleton_t = None;
            t.u = (reference.u.iter().enumerate())
                .map(|(i, &x)| x * f[(i % rows) % channels])
                .collect();
        }
        let s = &mut out[k.source_level as usize];
        if s.rank_s == 0 {
            s.rank_s = reference.rank_s;
            s.skeleton_s = None;
            s.v = reference.v.clone();
        }
    }
    out
}

/// The bases of every level, from the Gram matrices of its operators.
/// A homogeneous kernel's (whose keys are shapes at the reference level)
/// has one source basis for every source level, at the reference level; a
/// symmetric kernel's source basis is its target basis, fitted to both
/// sides' operators (of two partner keys, one: their sides are each
/// other's).
fn fit_bases<K: Kernel>(
    setup: &Setup<'_>,
    groups: &[Counted],
    tol: f64,
    sharing: &Sharing,
) -> Vec<Bases> {
    let joint = sharing.scaling.is_some();
    let (rows, cols) = (setup.rows(), setup.cols());
    // With the cube's symmetries, one key of each orbit (its pairs the
    // orbit's), the Gram sums symmetrized below.
    let reps: Vec<Counted>;
    let groups = match &sharing.cubic {
        Some(c) => {
            let mut at: HashMap<Key, usize> = HashMap::new();
            let mut r: Vec<Counted> = Vec::new();
            for &(k, n) in groups {
                let rep = c.canonical(&k);
                let i = *at.entry(rep).or_insert_with(|| {
                    r.push((rep, 0));
                    r.len() - 1
                });
                r[i].1 += n;
            }
            reps = r;
            &reps[..]
        }
        None => groups,
    };
    let levels = MAX_LEVEL as usize + 1;
    let source_level = |key: &Key| {
        if joint {
            scaling::REFERENCE_LEVEL as usize
        } else {
            key.source_level as usize
        }
    };
    // The bases of every level, from the Gram matrices of its operators.
    type Grams = (Vec<Vec<f64>>, Vec<Vec<f64>>);
    // The bases are fitted to the operators of the most pairs: at most
    // BASIS_KEYS per level and side.
    let mut fit = vec![(false, false); groups.len()];
    for side in 0..2 {
        let mut by: Vec<usize> = (0..groups.len()).collect();
        by.sort_by_key(|&g| std::cmp::Reverse(groups[g].1));
        let mut taken = vec![0usize; levels];
        for g in by {
            let key = &groups[g].0;
            let l = if side == 0 {
                key.target_level as usize
            } else {
                source_level(key)
            };
            if taken[l] < BASIS_KEYS {
                taken[l] += 1;
                if side == 0 {
                    fit[g].0 = true
                } else {
                    fit[g].1 = true
                }
            }
        }
    }
    if sharing.symmetric {
        // Both sides of each key fitted, once per pair of partners (the
        // first).
        let at: HashMap<Key, usize> = (groups.iter().enumerate())
            .map(|(i, (k, _))| (*k, i))
            .collect();
        for g in 0..groups.len() {
            let chosen = fit[g].0 || fit[g].1;
            let partner = symmetry::partner(&groups[g].0, sharing.scaling.as_ref())
                .and_then(|(p, _)| at.get(&p).copied());
            let twin = partner.is_some_and(|p| p < g && (fit[p].0 || fit[p].1));
            fit[g] = if chosen && !twin {
                (true, true)
            } else {
                (false, false)
            };
        }
    }
    // The Gram sums in a fixed number of partial sums, each over a fixed
    // share of the keys in order, added in order: the same bases every
    // run (rayon's fold splits the work as the threads steal it, and the
    // rounding of the sums then varied from run to run). A symmetric
    // kernel's both sides are summed in the target side's.
    let chosen: Vec<(&Counted, (bool, bool))> = groups
        .iter()
        .zip(&fit)
        .filter(|(_, f)| f.0 || f.1)
        .map(|(g, f)| (g, *f))
        .collect();
    let shares = rayon::current_num_threads().clamp(1, 8);
    let partial: Vec<Grams> = (0..shares)
        .into_par_iter()
        .map(|w| {
            let (mut gt, mut gs): Grams = (vec![Vec::new(); levels], vec![Vec::new(); levels]);
            for &((key, _), (fit_t, fit_s)) in chosen.iter().skip(w).step_by(shares) {
                let a = setup.operator::<K>(key);
                let av = View::new(&a, cols).t();
                if fit_t {
                    let t = &mut gt[key.target_level as usize];
                    if t.is_empty() {
                        *t = vec![0.0; rows * rows];
                    }
                    gram_add(rows, cols, av, t);
                }
                if fit_s {
                    let side = if sharing.symmetric { &mut gt } else { &mut gs };
                    let s = &mut side[source_level(key)];
                    if s.is_empty() {
                        *s = vec![0.0; cols * cols];
                    }
                    gram_add(cols, rows, av.t(), s);
                }
            }
            (gt, gs)
        })
        .collect();
    let add = |x: Vec<Vec<f64>>, y: Vec<Vec<f64>>| -> Vec<Vec<f64>> {
        x.into_iter()
            .zip(y)
            .map(|(x, y)| match (x.is_empty(), y.is_empty()) {
                (true, _) => y,
                (_, true) => x,
                _ => x.iter().zip(&y).map(|(p, q)| p + q).collect(),
            })
            .collect()
    };
    let (mut gt, mut gs): Grams = partial
        .into_iter()
        .reduce(|a, b| (add(a.0, b.0), add(a.1, b.1)))
        .unwrap_or_else(|| (vec![Vec::new(); levels], vec![Vec::new(); levels]));
    if let Some(c) = &sharing.cubic {
        // Over whole orbits: a symmetric kernel's both sides are in `gt`,
        // whose permutation serves both (`Cubic::same_sides`).
        gt.par_iter_mut()
            .filter(|g| !g.is_empty())
            .for_each(|g| *g = c.symmetrize(g, rows, false));
        gs.par_iter_mut()
            .filter(|g| !g.is_empty())
            .for_each(|g| *g = c.symmetrize(g, cols, true));
    }
    let whole = tol > SKELETON_TOLERANCE;
    let bases: Vec<Bases> = (0..levels)
        .into_par_iter()
        .map(|l| {
            let mut b = Bases::default();
            if !gt[l].is_empty() {
                (b.u, b.rank_t, b.sigma_t) = leading(rows, &gt[l], tol, sharing.cubic.is_some());
                b.skeleton_t = Some(Arc::new(Skeleton::of(
                    &b.u,
                    rows,
                    b.rank_t,
                    setup.channels(),
                    whole,
                )));
            }
            if sharing.symmetric {
                (b.v, b.rank_s, b.sigma_s, b.skeleton_s) = (
                    b.u.clone(),
                    b.rank_t,
                    b.sigma_t.clone(),
                    b.skeleton_t.clone(),
                );
            } else if !gs[l].is_empty() {
                (b.v, b.rank_s, b.sigma_s) = leading(cols, &gs[l], tol, sharing.cubic.is_some());
                b.skeleton_s = Some(Arc::new(Skeleton::of(
                    &b.v,
                    cols,
                    b.rank_s,
                    setup.strength.len(),
                    whole,
                )));
            }
            b
        })
        .collect();
    bases
}

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
