//! The bases the operators are compressed on: a level's `U` and `V`,
//! fitted to the Gram matrices of its operators (or a homogeneous
//! kernel's reference level's, scaled).

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::super::linalg::{gram_add, symmetric_eigen, View};
use super::*;
use crate::kernel::Kernel;
use crate::tree::morton::MAX_LEVEL;

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
    pub(super) skeleton_t: Option<Arc<Skeleton>>,
    pub(super) skeleton_s: Option<Arc<Skeleton>>,
}

/// The leading eigenvectors of the Gram matrix `g` (`n x n`): those whose
/// singular value (the eigenvalue's root) is above `tol` of the largest;
/// with `clusters`, and those equal to the last one kept (to 1e-6 of it),
/// so that a symmetric `g`'s kept span is invariant under its symmetries
/// ([`cubic`]: their repeated eigenvalues are not split; where rounding
/// splits them further near the cut, the rotations weigh the columns'
/// misses by their singular values). With their count and their singular
/// values over the largest.
pub(super) fn leading(
    n: usize,
    g: &[f64],
    tol: f64,
    clusters: bool,
) -> (Vec<f64>, usize, Vec<f64>) {
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

/// A homogeneous kernel's bases for the levels of `groups`, those of
/// `kept` kept: `U_l` the reference's `U` with each channel's rows scaled
/// to level `l`, `V_l` the reference's `V` (strengths do not scale).
pub(super) fn scaled_bases(
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
pub(super) fn fit_bases<K: Kernel>(
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
