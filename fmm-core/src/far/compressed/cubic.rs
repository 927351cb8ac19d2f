//! Kernels unchanged by the cube's rotations and reflections: the bases
//! fitted to every offset of an orbit from one operator of it.
//!
//! Why: the Gram products `sum A A^T` that the bases come from were the
//! larger part of a first evaluation where nothing else is shared (Yukawa:
//! 0.53 s of 1.3 s for 572 operators of 864 x 216). But an isotropic kernel
//! (Yukawa, Coulomb and gravity with their gradients, the Stokeslets) gives
//! two offsets related by one of the cube's 48 symmetries `R` (the axes
//! permuted, their signs flipped) operators related by the same symmetry:
//! `A(R d) = P_R A(d) Q_R^T`, with `P_R` the signed permutation that maps
//! each target node `n` to the node at `R n` (the Chebyshev grid is
//! symmetric) and each output channel as its field transforms (a scalar
//! stays, a vector's components are permuted with their signs, a
//! pseudo-vector's also times `det R`), and `Q_R` the same for the source
//! nodes and strength components. So with `G` the Gram sum over one
//! offset of each orbit, `sum_R P_R G P_R^T` is the Gram sum over whole
//! orbits: a few dozen operators' products and 48 signed permutations of
//! the sum stand for a few hundred operators' products, and the bases fit
//! every offset of those orbits, not only the most frequent ones.
//!
//! As homogeneity and symmetry ([`super::scaling`], [`super::symmetry`]),
//! it is measured, not declared: for a probe key and three generators of
//! the group (two transpositions of axes and one reflection), the
//! operators of the moved keys are compared with the permuted operator, to
//! rounding, for each way of transforming the vec3 fields (vectors or
//! pseudo-vectors); the first way that holds is kept. It needs the outputs
//! not to depend on target fields (their channels would mix), and a basis
//! whose nodes the group maps onto nodes (the Chebyshev grid; the
//! pseudo-particles' t-designs are not).

use rayon::prelude::*;

use super::super::linalg::{gemm, View};
use super::{Key, Setup};
use crate::kernel::Kernel;
use fmm_codegen::ast::Shape;
use fmm_codegen::KernelDef;

/// Relative difference tolerated between a moved key's operator and the
/// permuted operator (rounding is about 1e-15 of the largest entry).
const TOLERANCE: f64 = 1e-11;

/// Nodes closer than this (in the cell's unit frame) are the same node.
const SAME_NODE: f64 = 1e-9;

/// One of the cube's symmetries: `(R v)[a] = sign[a] v[perm[a]]`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Element {
    perm: [usize; 3],
    sign: [i32; 3],
}

impl Element {
    /// All 48: the six permutations times the eight sign patterns.
    fn all() -> Vec<Element> {
        let perms = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        let mut out = Vec::with_capacity(48);
        for perm in perms {
            for bits in 0..8 {
                let sign = [0, 1, 2].map(|a| if bits >> a & 1 == 1 { -1 } else { 1 });
                out.push(Element { perm, sign });
            }
        }
        out
    }

    fn apply(&self, v: [f64; 3]) -> [f64; 3] {
        [0, 1, 2].map(|a| self.sign[a] as f64 * v[self.perm[a]])
    }

    fn apply_i(&self, v: [i32; 3]) -> [i32; 3] {
        [0, 1, 2].map(|a| self.sign[a] * v[self.perm[a]])
    }

    /// `det R`: the permutation's parity times the signs.
    fn det(&self) -> i32 {
        let p = self.perm;
        let inversions = (p[0] > p[1]) as i32 + (p[0] > p[2]) as i32 + (p[1] > p[2]) as i32;
        let parity = if inversions % 2 == 0 { 1 } else { -1 };
        parity * self.sign.iter().product::<i32>()
    }
}

/// A signed permutation of a matrix side: index `i` goes to `to[i]`,
/// times `sign[i]`.
#[derive(Clone, Debug, PartialEq)]
struct Signed {
    to: Vec<usize>,
    sign: Vec<f64>,
}

/// How each channel of one side transforms: `(component, sign)` of the
/// channel `c` goes to, per element.
type Channels = Vec<(usize, f64)>;

/// The measured symmetry: per element of the group, the rows' and the
/// columns' signed permutations.
#[derive(Debug)]
pub(crate) struct Cubic {
    elements: Vec<Element>,
    rows: Vec<Signed>,
    cols: Vec<Signed>,
}

impl Cubic {
    /// The key of `key`'s orbit that stands for it (the least of the moved
    /// keys; the levels stay).
    pub(super) fn canonical(&self, key: &Key) -> Key {
        self.elements
            .iter()
            .map(|e| Key {
                offset: e.apply_i(key.offset),
                ..*key
            })
            .min()
            .expect("48 elements")
    }

    /// `sum_R P_R g P_R^T` over the group, for `g` (`n x n`) of the rows'
    /// side (`cols` false) or the columns'.
    pub(super) fn symmetrize(&self, g: &[f64], n: usize, cols: bool) -> Vec<f64> {
        let side = if cols { &self.cols } else { &self.rows };
        let mut out = vec![0.0; n * n];
        for p in side {
            // (P g P^T)[to[i]][to[j]] = s_i s_j g[i][j].
            for j in 0..n {
                let (tj, sj) = (p.to[j], p.sign[j]);
                for i in 0..n {
                    out[p.to[i] + tj * n] += p.sign[i] * sj * g[i + j * n];
                }
            }
        }
        out
    }

    /// Whether one permutation serves both sides (a symmetric kernel's
    /// one basis): the rows' and the columns' the same up to one sign per
    /// element, which the Gram sums' `P g P^T` do not see and the
    /// rotations carry (Biot-Savart: of its velocity and its vorticity
    /// strength one is a vector and the other a pseudo-vector, so the
    /// sides differ by `det R`).
    pub(super) fn same_sides(&self) -> bool {
        self.rows.iter().zip(&self.cols).all(|(r, c)| {
            let s = match (r.sign.first(), c.sign.first()) {
                (Some(a), Some(b)) => a * b,
                _ => return r == c,
            };
            r.to == c.to && r.sign.iter().zip(&c.sign).all(|(a, b)| *a == s * b)
        })
    }

    /// The element that moves `from` to `to` (same levels), if any.
    pub(super) fn element_to(&self, from: &Key, to: &Key) -> Option<usize> {
        if (from.target_level, from.source_level) != (to.target_level, to.source_level) {
            return None;
        }
        self.elements
            .iter()
            .position(|e| e.apply_i(from.offset) == to.offset)
    }

    /// The rotations of the basis `b` (`n x r`, column-major, orthonormal
    /// columns, of singular values `sigma` over the largest, `r` of them)
    /// of the rows' side (`cols` false) or the columns': `M_R = b^T P_R b`
    /// for every element, where `P_R b = b M_R`; `None` where the basis's
    /// span misses a column's image by more than the rank tolerance `tol`
    /// allows ([`MISS`]).
    pub(super) fn rotations(
        &self,
        b: &[f64],
        n: usize,
        sigma: &[f64],
        cols: bool,
        tol: f64,
    ) -> Option<Rotations> {
        let r = sigma.len();
        let side = if cols { &self.cols } else { &self.rows };
        // The 48 in parallel: at order 6 a Stokeslet's basis is 1029 x 300,
        // and one after the other they took seconds of a first evaluation.
        let m = side
            .par_iter()
            .map(|p| {
                // (P b)[to[i]][j] = s_i b[i][j].
                let mut pb = vec![0.0; n * r];
                for j in 0..r {
                    for i in 0..n {
                        pb[p.to[i] + j * n] = p.sign[i] * b[i + j * n];
                    }
                }
                let mut mr = vec![0.0; r * r];
                gemm(
                    r,
                    n,
                    r,
                    1.0,
                    View::new(b, n).t(),
                    View::new(&pb, n),
                    0.0,
                    &mut mr,
                    r,
                );
                // P b - b M: what the span misses.
                gemm(
                    n,
                    r,
                    r,
                    -1.0,
                    View::new(b, n),
                    View::new(&mr, r),
                    1.0,
                    &mut pb,
                    n,
                );
                let miss = (0..r)
                    .map(|j| {
                        let m = pb[j * n..(j + 1) * n].iter().map(|x| x * x).sum::<f64>();
                        m.sqrt() * sigma[j]
                    })
                    .fold(0.0f64, f64::max);
                (miss <= MISS * tol).then_some(mr)
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Rotations { m, r })
    }
}

/// How far a basis's span may miss a column's image under the group,
/// weighted by the column's singular value, in rank tolerances.
///
/// Why weighted: the bases are fitted to whole orbits, so a Gram matrix's
/// kept span is invariant except where the cut splits a repeated
/// eigenvalue; the bases keep those whole ([`super::leading`]), but near
/// the cut the eigenproblem's rounding (about 1e-16 of the largest
/// eigenvalue, so 1e-8 of the largest singular value) splits them further
/// and mixes their vectors, and the last columns miss the span by up to
/// order 1 (session 8: the singular Stokeslet at order 6 and 1e-7 missed
/// by more than 1e-2, an unweighted test's limit, and none of its 824
/// operators were rotated). The rotated operator `M_t C M_s^T` differs
/// from the projected `U^T P A P^T V` by `E^T (I - U U^T) A` and its
/// source-side twin, `E` the miss: at most the part of `A` the bases
/// drop, which the rank tolerance bounds. The test is kept, weighted, for
/// what it would catch: a span cut inside a resolved cluster (a miss of
/// order 1 at a singular value of order 1).
const MISS: f64 = 10.0;

/// A basis's rotations under the group ([`Cubic::rotations`]).
pub(super) struct Rotations {
    /// `r x r`, column-major, per element.
    m: Vec<Vec<f64>>,
    r: usize,
}

/// The compressed operator of the key element `e` moves `c`'s key to:
/// `M_t c M_s^T` (`c` `rt x rs`, column-major), exact where the bases'
/// spans are invariant (`C' = U^T P A Q^T V = M_t U^T A V M_s^T`).
pub(super) fn moved(c: &[f64], t: &Rotations, s: &Rotations, e: usize) -> Vec<f64> {
    let (rt, rs) = (t.r, s.r);
    let mut tc = vec![0.0; rt * rs];
    gemm(
        rt,
        rt,
        rs,
        1.0,
        View::new(&t.m[e], rt),
        View::new(c, rt),
        0.0,
        &mut tc,
        rt,
    );
    let mut out = vec![0.0; rt * rs];
    gemm(
        rt,
        rs,
        rs,
        1.0,
        View::new(&tc, rt),
        View::new(&s.m[e], rs).t(),
        0.0,
        &mut out,
        rt,
    );
    out
}

/// The slots of `fields` as `(first slot of its field, component)` with
/// the field's shape, in slot order.
fn slot_fields(fields: &[fmm_codegen::kernel::Field]) -> Vec<(usize, usize, Shape)> {
    fields
        .iter()
        .flat_map(|f| {
            let n = f.slot_names().len();
            (0..n).map(move |c| (f.offset, c, f.shape))
        })
        .collect()
}

/// How the channels `slots` (indices into `fields`' slots, in the side's
/// channel order) transform under `e`, the vec3 fields as pseudo-vectors
/// where `pseudo` has their first slot; `None` where a vec3 field's
/// components are not all among the channels.
fn channels(
    e: &Element,
    all: &[(usize, usize, Shape)],
    slots: &[usize],
    pseudo: &[usize],
) -> Option<Channels> {
    slots
        .iter()
        .map(|&s| {
            let (first, comp, shape) = *all.get(s)?;
            match shape {
                Shape::Scalar => Some((slots.iter().position(|&x| x == s)?, 1.0)),
                Shape::Vec3 => {
                    // (R v)[a] = sign[a] v[perm[a]]: component perm[a] goes
                    // to a.
                    let a = (0..3).find(|&a| e.perm[a] == comp)?;
                    let det = if pseudo.contains(&first) { e.det() } else { 1 };
                    let to = slots.iter().position(|&x| x == first + a)?;
                    Some((to, (e.sign[a] * det) as f64))
                }
            }
        })
        .collect()
}

/// The side's signed permutation: node `n` to the node at `R n`, channel
/// as `ch`; `None` where a moved node is not a node.
fn side(e: &Element, nodes: &[[f64; 3]], ch: &Channels) -> Option<Signed> {
    let per = ch.len();
    let mut to = vec![0; nodes.len() * per];
    let mut sign = vec![0.0; nodes.len() * per];
    for (n, x) in nodes.iter().enumerate() {
        let y = e.apply(*x);
        let m = nodes
            .iter()
            .position(|z| (0..3).all(|a| (z[a] - y[a]).abs() <= SAME_NODE))?;
        for (c, &(tc, s)) in ch.iter().enumerate() {
            to[n * per + c] = m * per + tc;
            sign[n * per + c] = s;
        }
    }
    Some(Signed { to, sign })
}

/// The group's permutations of both sides with the vec3 fields whose first
/// slots are in `pseudo` taken as pseudo-vectors.
fn permutations(
    def: &KernelDef,
    setup: &Setup<'_>,
    pseudo: &[usize],
) -> Option<(Vec<Element>, Vec<Signed>, Vec<Signed>)> {
    let nodes = setup.basis.nodes();
    let outs = slot_fields(&def.outputs);
    let srcs = slot_fields(&def.sources);
    let out_slots: Vec<usize> = (0..setup.n_outputs).collect();
    // Pseudo-vector flags per side: outputs' first slots and sources'
    // first slots are numbered apart (outputs first).
    let n_out = outs.len();
    let out_pseudo: Vec<usize> = pseudo.iter().filter(|&&p| p < n_out).copied().collect();
    let src_pseudo: Vec<usize> = pseudo
        .iter()
        .filter(|&&p| p >= n_out)
        .map(|p| p - n_out)
        .collect();
    let elements = Element::all();
    let mut rows = Vec::with_capacity(48);
    let mut cols = Vec::with_capacity(48);
    for e in &elements {
        let rc = channels(e, &outs, &out_slots, &out_pseudo)?;
        let cc = channels(e, &srcs, setup.strength, &src_pseudo)?;
        rows.push(side(e, nodes, &rc)?);
        cols.push(side(e, nodes, &cc)?);
    }
    Some((elements, rows, cols))
}

/// The kernel's cube symmetry over `keys`, measured on the first key (at
/// a homogeneous kernel's reference level, as the operators are kept):
/// `None` where its outputs depend on target fields, the basis's nodes are
/// not mapped onto nodes, or no way of transforming its vec3 fields makes
/// the moved keys' operators the permuted one.
pub(super) fn measure<K: Kernel>(setup: &Setup<'_>, probe: Option<&Key>) -> Option<Cubic> {
    let key = probe?;
    if setup.target_slots != 0 {
        return None;
    }
    let def = K::def();
    // The vec3 fields' first slots, outputs first then sources offset by
    // the outputs' slots.
    let n_out = slot_fields(&def.outputs).len();
    let vec3: Vec<usize> = def
        .outputs
        .iter()
        .filter(|f| f.shape == Shape::Vec3)
        .map(|f| f.offset)
        .chain(
            def.sources
                .iter()
                .filter(|f| f.shape == Shape::Vec3)
                .map(|f| n_out + f.offset),
        )
        .collect();
    if vec3.len() > 4 {
        return None;
    }
    let (rows, cols) = (setup.rows(), setup.cols());
    let a = setup.operator::<K>(key);
    let big = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if big == 0.0 {
        return None;
    }
    // Two transpositions and a reflection generate the group.
    let generators = [
        Element {
            perm: [1, 0, 2],
            sign: [1, 1, 1],
        },
        Element {
            perm: [0, 2, 1],
            sign: [1, 1, 1],
        },
        Element {
            perm: [0, 1, 2],
            sign: [-1, 1, 1],
        },
    ];
    let moved: Vec<Vec<f64>> = generators
        .iter()
        .map(|g| {
            setup.operator::<K>(&Key {
                offset: g.apply_i(key.offset),
                ..*key
            })
        })
        .collect();
    (0..1usize << vec3.len()).find_map(|mask| {
        let pseudo: Vec<usize> = (0..vec3.len())
            .filter(|b| mask >> b & 1 == 1)
            .map(|b| vec3[b])
            .collect();
        let (elements, prow, pcol) = permutations(def, setup, &pseudo)?;
        let holds = generators.iter().zip(&moved).all(|(g, b)| {
            let i = elements.iter().position(|e| e == g).expect("a generator");
            let (pr, pc) = (&prow[i], &pcol[i]);
            // b[to_r[i]][to_c[j]] = s_i s_j a[i][j], both row by row.
            (0..rows).all(|r| {
                (0..cols).all(|c| {
                    let want = pr.sign[r] * pc.sign[c] * a[r * cols + c];
                    (b[pr.to[r] * cols + pc.to[c]] - want).abs() <= TOLERANCE * big
                })
            })
        });
        holds.then_some(Cubic {
            elements,
            rows: prow,
            cols: pcol,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::far::chebyshev::Chebyshev;
    use crate::far::compressed::Setup;
    use crate::far::pseudo::PseudoParticles;
    use crate::kernels::{BiotSavart, Stokeslet, StokesletSingular, Yukawa};

    /// Two cells of level 4 three, one and two cells apart.
    fn key() -> Key {
        Key {
            target_level: 4,
            source_level: 4,
            offset: [6 << 17, -(2 << 17), 4 << 17],
        }
    }

    /// Yukawa with its gradient, the Stokeslets and Biot-Savart (its
    /// strength a pseudo-vector's partner: velocity from vorticity) are
    /// unchanged by the cube's symmetries on the Chebyshev grid; the
    /// pseudo-particles' t-design is not mapped onto itself.
    #[test]
    fn the_cube_symmetry_is_measured_from_the_kernel() {
        let basis = Chebyshev::new(3);
        let yukawa = Setup::for_test(&basis, &[4.0], &[0.0], &[0], 4);
        assert!(measure::<Yukawa>(&yukawa, Some(&key())).is_some());
        let s = Setup::for_test(&basis, &[0.01, 1.0], &[0.0; 3], &[0, 1, 2], 3);
        assert!(measure::<Stokeslet>(&s, Some(&key())).is_some());
        assert!(measure::<StokesletSingular>(&s, Some(&key())).is_some());
        let bs = Setup::for_test(&basis, &[], &[0.0, 0.0, 0.0, 0.02], &[0, 1, 2], 3);
        let biot = measure::<BiotSavart>(&bs, Some(&key())).expect("isotropic");
        // Its sides differ by det R, so one basis serves both.
        assert!(biot.rows != biot.cols && biot.same_sides());
        let ppm = PseudoParticles::new(4);
        let p = Setup::for_test(&ppm, &[4.0], &[0.0], &[0], 4);
        assert!(measure::<Yukawa>(&p, Some(&key())).is_none());
    }

    /// Every element, not only the generators: the moved key's operator is
    /// the permuted one; and the symmetrized Gram sum of one operator is
    /// the Gram sum over its whole orbit (each key once per element that
    /// gives it).
    #[test]
    fn every_element_moves_the_operator_and_the_gram_sum() {
        let basis = Chebyshev::new(2);
        let setup = Setup::for_test(&basis, &[4.0], &[0.0], &[0], 4);
        let cubic = measure::<Yukawa>(&setup, Some(&key())).expect("isotropic");
        let (rows, cols) = (setup.rows(), setup.cols());
        let a = setup.operator::<Yukawa>(&key());
        let gram = |a: &[f64]| -> Vec<f64> {
            let mut g = vec![0.0; rows * rows];
            for i in 0..rows {
                for j in 0..rows {
                    g[i + j * rows] = (0..cols).map(|c| a[i * cols + c] * a[j * cols + c]).sum();
                }
            }
            g
        };
        let mut orbit = vec![0.0; rows * rows];
        for (i, e) in cubic.elements.iter().enumerate() {
            let moved = Key {
                offset: e.apply_i(key().offset),
                ..key()
            };
            let b = setup.operator::<Yukawa>(&moved);
            let (pr, pc) = (&cubic.rows[i], &cubic.cols[i]);
            let big = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for r in 0..rows {
                for c in 0..cols {
                    let want = pr.sign[r] * pc.sign[c] * a[r * cols + c];
                    let got = b[pr.to[r] * cols + pc.to[c]];
                    assert!((got - want).abs() <= 1e-11 * big, "{e:?} ({r}, {c})");
                }
            }
            orbit.iter_mut().zip(gram(&b)).for_each(|(o, x)| *o += x);
            assert_eq!(cubic.canonical(&moved), cubic.canonical(&key()));
        }
        let sym = cubic.symmetrize(&gram(&a), rows, false);
        let big = orbit.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (s, o) in sym.iter().zip(&orbit) {
            assert!((s - o).abs() <= 1e-11 * big, "{s} against {o}");
        }
    }

    /// Bases fitted to the symmetrized Gram sums, their repeated
    /// eigenvalues kept whole, have invariant spans, and a moved key's
    /// compressed operator is the first's rotated: `U^T A(R d) V = M_t
    /// U^T A(d) V M_s^T`.
    #[test]
    fn an_orbits_operators_are_one_rotated() {
        let basis = Chebyshev::new(3);
        let setup = Setup::for_test(&basis, &[4.0], &[0.0], &[0], 4);
        let cubic = measure::<Yukawa>(&setup, Some(&key())).expect("isotropic");
        let (rows, cols) = (setup.rows(), setup.cols());
        let a = setup.operator::<Yukawa>(&key());
        let mut gt = vec![0.0; rows * rows];
        let mut gs = vec![0.0; cols * cols];
        crate::far::linalg::gram_add(rows, cols, View::new(&a, cols).t(), &mut gt);
        crate::far::linalg::gram_add(cols, rows, View::new(&a, cols), &mut gs);
        let (u, rt, st) =
            super::super::leading(rows, &cubic.symmetrize(&gt, rows, false), 1e-6, true);
        let (v, rs, ss) =
            super::super::leading(cols, &cubic.symmetrize(&gs, cols, true), 1e-6, true);
        let mt = cubic
            .rotations(&u, rows, &st, false, 1e-6)
            .expect("invariant");
        let ms = cubic
            .rotations(&v, cols, &ss, true, 1e-6)
            .expect("invariant");
        // U^T A V, A row by row.
        let compress = |a: &[f64]| {
            let mut av = vec![0.0; rows * rs];
            gemm(
                rows,
                cols,
                rs,
                1.0,
                View::new(a, cols).t(),
                View::new(&v, cols),
                0.0,
                &mut av,
                rows,
            );
            let mut c = vec![0.0; rt * rs];
            gemm(
                rt,
                rows,
                rs,
                1.0,
                View::new(&u, rows).t(),
                View::new(&av, rows),
                0.0,
                &mut c,
                rt,
            );
            c
        };
        let c = compress(&a);
        let big = c.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (e, el) in cubic.elements.iter().enumerate() {
            let moved_key = Key {
                offset: el.apply_i(key().offset),
                ..key()
            };
            let want = compress(&setup.operator::<Yukawa>(&moved_key));
            let got = moved(&c, &mt, &ms, e);
            // Far below the rank tolerance's 1e-6.
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-9 * big, "{el:?}: {g} against {w}");
            }
        }
        // A basis cut inside a resolved repeated eigenvalue is refused: the
        // three largest eigenvalues are equal, and cut after two.
        assert!(cubic
            .rotations(&u[..2 * rows], rows, &st[..2], false, 1e-6)
            .is_none());
    }
}
