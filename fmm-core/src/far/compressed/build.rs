//! Building the operators of a set of keys: which keys are frequent
//! enough, the bases, the compressed operators, those kept from an earlier
//! evaluation reused.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::super::linalg::View;
use super::super::nodes::Basis;
use super::super::Representation;
use super::*;
use crate::kernel::Kernel;

/// One operator `C = U^T A V` (`r_t x r_s`): its own entries
/// (column-major), or a symmetric kernel's partner's `P` (`r_s x r_t`,
/// column-major) with `C = by P^T`, which is never copied.
#[derive(Clone)]
pub(crate) struct Small {
    pub(super) data: Dense,
    /// `Some(by)`: `data` is the partner's.
    pub(super) transposed: Option<f64>,
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
    pub(super) fn view_of<'a, T>(&self, data: &'a [T], rt: usize) -> (View<'a, T>, f64) {
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
pub(super) struct Sharing {
    pub(super) scaling: Option<Scaling>,
    pub(super) symmetric: bool,
    /// The cube's symmetries: the bases fitted to whole orbits of offsets
    /// ([`cubic`]).
    pub(super) cubic: Option<Arc<Cubic>>,
}

/// Which keys have pairs enough for an operator (at least [`MIN_PAIRS`]),
/// and what the kernel lets them share ([`Sharing`]): a homogeneous
/// kernel's keys of one shape at any level share an operator, so their
/// pairs count together.
pub(super) fn frequent<K: Kernel>(setup: &Setup<'_>, counted: &[Counted]) -> (Vec<bool>, Sharing) {
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

/// Whether operators of `rows x cols` are past [`MAX_SIDE`] (said once a
/// process for each size: a time-stepping run evaluates thousands of
/// times, and said each time it filled a brown-out run's log; the caller
/// then runs M2L by the kernel).
pub(crate) fn too_large(rows: usize, cols: usize) -> bool {
    if rows <= MAX_SIDE && cols <= MAX_SIDE {
        return false;
    }
    static SAID: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.contains(&(rows, cols)) {
        return true;
    }
    said.push((rows, cols));
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
    let setup = Setup::of(basis, params, rep, fields, n_outputs, root_half);
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
pub(super) fn operators<K: Kernel>(
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
