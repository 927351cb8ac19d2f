//! Applying them: the M2L of a traversal's lists by compressed operators
//! (the pairs of rare offsets left to the kernel), the products batched
//! by operator.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::super::linalg::{gemm, par_gemm, Element, View};
use super::super::nodes::{Basis, Local, Upward};
use super::super::Representation;
use super::*;
use crate::kernel::Kernel;
use crate::tree::morton::MAX_LEVEL;
use crate::tree::traversal::{split, Lists};
use crate::tree::Octree;

/// The source fields' common values, or `None` where a field other than
/// the strength differs between the cells `used` (relatively, past 1e-12).
pub(super) fn common_fields(up: &Upward, strength: &[usize], used: &[bool]) -> Option<Vec<f64>> {
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
/// Singular values are kept down to `tol` of the largest. A list entry's
/// image ([`split`]) moves its source cell by that image's lattice vector
/// of `images` (a periodic box's, whole root cubes; `[[0; 3]]` in free
/// space), which is only another offset: the same operators serve.
#[allow(clippy::too_many_arguments)]
pub(crate) fn m2l<K: Kernel>(
    basis: &dyn Basis,
    tol: f64,
    params: &[f64],
    rep: &Representation,
    n_outputs: usize,
    (ttree, stree): (&Octree, &Octree),
    images: &[[f64; 3]],
    up: &Upward,
    lists: &Lists,
    local: &mut Local,
) -> Option<Done> {
    if ttree.bounds.center != stree.bounds.center || ttree.bounds.half != stree.bounds.half {
        return None;
    }
    let mut used = vec![false; stree.cells.len()];
    for l in &lists.m2l {
        for &e in l {
            used[split(e).0] = true;
        }
    }
    let fields = common_fields(up, &rep.strength, &used)?;
    let setup = Setup::of(basis, params, rep, fields, n_outputs, ttree.bounds.half);
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
    let shifts: Vec<[i32; 3]> = images
        .iter()
        .map(|v| v.map(|x| (x / unit).round() as i32))
        .collect();
    // (key, target cell, list entry).
    let mut pairs: Vec<(Key, u32, u32)> = lists
        .m2l
        .par_iter()
        .enumerate()
        .flat_map_iter(|(t, l)| {
            let (tl, sl, shifts) = (&tl, &sl, &shifts);
            l.iter().map(move |&e| {
                let (s, image) = split(e);
                let key = Key {
                    target_level: ttree.cells[t].level as u8,
                    source_level: stree.cells[s].level as u8,
                    offset: [0, 1, 2].map(|a| tl[t][a] - sl[s][a] - shifts[image][a]),
                };
                (key, t as u32, e)
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
pub(super) struct Products<'a> {
    pub(super) bases: &'a [Bases],
    pub(super) small: &'a [Small],
    pub(super) groups: &'a [(Key, std::ops::Range<usize>)],
    /// (key, target cell, list entry) by key.
    pub(super) pairs: &'a [(Key, u32, u32)],
    pub(super) used: &'a [bool],
    pub(super) stree: &'a Octree,
    pub(super) ttree: &'a Octree,
    pub(super) rows: usize,
    pub(super) cols: usize,
}

impl Products<'_> {
    /// `V^T` on the source cells' node strengths `q`, the operators on
    /// those, `U` on the sums, added to the target cells' node values
    /// `local`: every product in `T` ([`SINGLE_TOLERANCE`]).
    pub(super) fn translate<T: Element>(&self, q: &[f64], local: &mut [f64]) {
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
                    for &(_, _, e) in batch {
                        let s = split(e).0;
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
