//! The FMM on the CPU with the Laplace expansions: the trees in the unit
//! box, the upward pass (P2M, M2M), the M2L and the downward pass (L2L,
//! L2P) as a [`FarPasses`] of the FMM's stages ([`skeleton`], which runs
//! the traversal and the near field), each pass parallel with rayon.
//! Expansions are in f64 whatever the particles' precision; the M2L reads
//! them scaled, in f32 lanes where the settings' error leaves room
//! ([`single_m2l`]).

use rayon::prelude::*;

use super::harmonics::{ncoef, C};
use super::images;
use super::operators::{l2l, l2p, l2p_hessian, m2l, m2m, p2m, ScaledMultipoles, Scratch};
use super::skeleton::{self, FarPasses, Frame};
use super::Plan;
use crate::domain::{Moments, PeriodicBox};
use crate::error::Error;
use crate::far::laplace::background;
use crate::far::terms::{far_outputs, FarValues};
use crate::kernel::Kernel;
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;
use crate::stats::{Clock, Stats};
use crate::tree::morton::{Bounds, Span};
use crate::tree::traversal::{children, spheres, split, Lists, Sphere};
use crate::tree::{positions_f64, sorted, to_unit_box, to_unit_cube, Octree, SoA};
use fmm_codegen::kernel::{FarTerm, Term};

fn points(pos: &[Vec<f64>; 3], order: &[u32]) -> Vec<[f64; 3]> {
    order
        .iter()
        .map(|&i| [0, 1, 2].map(|a| pos[a][i as usize]))
        .collect()
}

#[inline]
fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// The fast multipole method of kernel `K` on the CPU, as `plan` says
/// (its far field the Laplace expansions); the problem is not empty. The
/// far field is approximated to order `p`.
pub(crate) fn run<K: Kernel, R: Real>(
    plan: &Plan<'_, R>,
    targets: &Particles<R>,
    sources: &Particles<R>,
    clock: &mut Clock<'_>,
) -> Result<Outputs<R>, Error> {
    let (strength, terms) = plan.laplace();
    let order = plan.settings.p;
    let far = Laplace {
        plan,
        def: K::def(),
        strength,
        terms,
        order,
        nq: strength.len(),
        nc: ncoef(order),
    };
    skeleton::run::<K, R, _>(plan, far, targets, sources, clock)
}

/// The Laplace expansions' passes of the FMM on the CPU ([`skeleton`]):
/// the trees in the unit box (a periodic box the unit box), multipoles
/// and locals of order `order`, `nq` expansions a cell of the strengths
/// `strength`, `nc` coefficients each, the far outputs through the
/// kernel's far `terms`.
struct Laplace<'a, R> {
    plan: &'a Plan<'a, R>,
    def: &'static fmm_codegen::KernelDef,
    strength: &'a [usize],
    terms: &'a [FarTerm],
    order: usize,
    nq: usize,
    nc: usize,
}

/// What the Laplace expansions keep of the trees.
struct LaplaceOwn {
    /// The sources' and the targets' points in the unit box, tree order.
    sp: Vec<[f64; 3]>,
    tp: Vec<[f64; 3]>,
    /// The sources' strengths, tree order, one vector an expansion.
    q: Vec<Vec<f64>>,
    /// The cells' spheres (of their particles).
    ssph: Vec<Sphere>,
    tsph: Vec<Sphere>,
    /// The unit box's side in the particles' units.
    side: f64,
    /// A periodic box's moments (unit box).
    moments: Option<Moments>,
}

impl<R: Real> FarPasses<R> for Laplace<'_, R> {
    type Own = LaplaceOwn;
    type Multipoles = Vec<C>;
    type Locals = Vec<C>;

    /// Trees of the points moved into the unit box (the near field keeps
    /// the particles' own positions); a periodic box's points wrapped into
    /// it first, the box the unit box.
    fn trees(
        &self,
        targets: &Particles<R>,
        sources: &Particles<R>,
    ) -> Result<Frame<R, LaplaceOwn>, Error> {
        let ncrit = self.plan.opts.leaf_size(crate::far::FarField::Laplace);
        let periodic = self.plan.domain.periodic();
        let mut spos = positions_f64(sources);
        let mut tpos = positions_f64(targets);
        let side = match periodic {
            Some(b) => {
                b.wrap(&mut spos)?;
                b.wrap(&mut tpos)?;
                b.to_unit(&mut spos);
                b.to_unit(&mut tpos);
                b.side
            }
            None => match self.plan.cube {
                Some(c) => to_unit_cube(&mut spos, &mut tpos, &c),
                None => to_unit_box(&mut spos, &mut tpos),
            },
        };
        // The cell's moments (unit box): neutral, or an error before any work.
        let moments = match periodic {
            Some(b) => Some(neutral_moments(
                b,
                self.def,
                sources,
                (self.strength, self.terms),
                &spos,
            )?),
            None => None,
        };
        // The lattice shifts the traversal meets the source tree at (unit box).
        let images = periodic.map_or(vec![[0.0; 3]], |b| b.near_images());
        // Free space: both trees in the root cube of all the points, so
        // that their cells lie on one lattice (the GPU's the same): two
        // trees with roots of their own paired cells across lattices, and
        // a process's targets against its sources and the local essential
        // trees it got took up to 5 times the P2P (2 H200s, 2^24 a process).
        // A cube given with the problem is the unit cube here.
        let root = periodic.is_none().then(|| match self.plan.cube {
            Some(_) => Bounds::UNIT.holding(
                &Span::of([&spos[0], &spos[1], &spos[2]])
                    .join(&Span::of([&tpos[0], &tpos[1], &tpos[2]])),
            ),
            None => Bounds::of([&spos[0], &spos[1], &spos[2]])
                .union(&Bounds::of([&tpos[0], &tpos[1], &tpos[2]])),
        });
        let build = |pos: &[Vec<f64>; 3]| match root {
            Some(r) => Octree::build_in([&pos[0], &pos[1], &pos[2]], ncrit, r),
            None => Octree::build([&pos[0], &pos[1], &pos[2]], ncrit),
        };
        let stree = build(&spos);
        let mut src = sorted(sources, &stree.order);
        let sp = points(&spos, &stree.order);
        let q: Vec<Vec<f64>> = self
            .strength
            .iter()
            .map(|&k| src.slots[k].iter().map(|x| x.to_f64()).collect())
            .collect();
        // The target tree split as far as the sources around its targets
        // (`Octree::build_guided`), where both trees share the root cube.
        let ttree = match root {
            Some(r) => Octree::build_guided([&tpos[0], &tpos[1], &tpos[2]], ncrit, r, &stree.keys),
            None => build(&tpos),
        };
        let mut tgt = sorted(targets, &ttree.order);
        let tp = points(&tpos, &ttree.order);
        if let Some(b) = periodic {
            wrapped_positions(&mut src, &sp, b);
            wrapped_positions(&mut tgt, &tp, b);
        }
        let ssph = spheres(&stree, &sp);
        let tsph = spheres(&ttree, &tp);
        Ok(Frame {
            stree,
            ttree,
            src,
            tgt,
            images,
            unit: side,
            own: LaplaceOwn {
                sp,
                tp,
                q,
                ssph,
                tsph,
                side,
                moments,
            },
        })
    }

    fn spheres<'f>(&self, f: &'f Frame<R, LaplaceOwn>) -> [&'f [Sphere]; 2] {
        [&f.own.tsph, &f.own.ssph]
    }

    /// P2M at the leaves, then M2M level by level up.
    fn upward(&self, f: &Frame<R, LaplaceOwn>) -> Vec<C> {
        let (stree, o) = (&f.stree, &f.own);
        let (order, nq, nc) = (self.order, self.nq, self.nc);
        let block = nq * nc;
        let mut mult = vec![C::ZERO; stree.cells.len() * block];
        mult.par_chunks_mut(block).enumerate().for_each_init(
            || Passes::new(order),
            |s, (c, m)| {
                let cell = &stree.cells[c];
                if cell.is_leaf() {
                    let (b, e) = (cell.begin, cell.end);
                    for (k, qk) in o.q.iter().enumerate() {
                        s.p2m(
                            o.ssph[c].center,
                            &o.sp[b..e],
                            &qk[b..e],
                            &mut m[k * nc..(k + 1) * nc],
                        );
                    }
                }
            },
        );
        for level in stree.cells_by_level().iter().rev() {
            let parents: Vec<(usize, Vec<C>)> = level
                .par_iter()
                .filter(|&&c| !stree.cells[c].is_leaf())
                .map_init(
                    || Passes::new(order),
                    |s, &c| {
                        let mut m = vec![C::ZERO; block];
                        for k in 0..nq {
                            let kids: Vec<(&[C], [f64; 3])> = children(stree, c)
                                .map(|ch| {
                                    let at = ch * block + k * nc;
                                    (&mult[at..at + nc], sub(o.ssph[ch].center, o.ssph[c].center))
                                })
                                .collect();
                            s.m2m(&kids, &mut m[k * nc..(k + 1) * nc]);
                        }
                        (c, m)
                    },
                )
                .collect();
            for (c, m) in parents {
                mult[c * block..(c + 1) * block].copy_from_slice(&m);
            }
        }
        mult
    }

    /// M2L, one target cell at a time, from the multipoles in full range
    /// (scaled, in f32 where the settings' error leaves room); a periodic
    /// box's farther images into the target root's expansion.
    fn m2l(
        &self,
        f: &Frame<R, LaplaceOwn>,
        lists: &Lists,
        mult: Vec<C>,
        _: &mut Stats,
    ) -> (Vec<C>, f64) {
        let (o, plan) = (&f.own, self.plan);
        let (order, nq, nc) = (self.order, self.nq, self.nc);
        let single = single_m2l(plan.opts, plan.settings, R::NAME == "f32");
        let radius: Vec<f64> = o.ssph.iter().map(|s| s.radius).collect();
        let mut local = vec![C::ZERO; f.ttree.cells.len() * nq * nc];
        let (tsph, ssph, images) = (&o.tsph, &o.ssph, &f.images);
        if single {
            let scaled = ScaledMultipoles::<f32>::new(&mult, order, nq, &radius);
            m2l_pass(
                &scaled, order, nq, tsph, ssph, &lists.m2l, images, &mut local,
            );
        } else {
            let scaled = ScaledMultipoles::<f64>::new(&mult, order, nq, &radius);
            m2l_pass(
                &scaled, order, nq, tsph, ssph, &lists.m2l, images, &mut local,
            );
        }
        if let (Some(b), Some(m)) = (plan.domain.periodic(), &o.moments) {
            let image_levels = b.levels_for(super::expected_error(plan));
            let mut s = Scratch::new(order);
            for k in 0..nq {
                let root = &mult[k * nc..(k + 1) * nc];
                let mut centred = vec![C::ZERO; nc];
                m2m(root, ssph[0].center, &mut s, &mut centred);
                let far = images::periodic_local(&centred, order, b, m, k, image_levels);
                l2l(
                    &far,
                    tsph[0].center,
                    &mut s,
                    &mut local[k * nc..(k + 1) * nc],
                );
            }
        }
        (local, 0.0)
    }

    /// L2L level by level down, then L2P at every target of each leaf.
    fn downward(
        &self,
        f: &Frame<R, LaplaceOwn>,
        mut local: Vec<C>,
        leaves: &[usize],
    ) -> Vec<Vec<f64>> {
        let (ttree, o) = (&f.ttree, &f.own);
        let (order, nq, nc) = (self.order, self.nq, self.nc);
        let block = nq * nc;
        for level in &ttree.cells_by_level() {
            let shifted: Vec<(Vec<usize>, Vec<C>)> = level
                .par_iter()
                .filter(|&&c| !ttree.cells[c].is_leaf())
                .map_init(
                    || Passes::new(order),
                    |s, &c| {
                        let kids: Vec<usize> = children(ttree, c).collect();
                        let d: Vec<[f64; 3]> = kids
                            .iter()
                            .map(|&ch| sub(o.tsph[ch].center, o.tsph[c].center))
                            .collect();
                        // The children's shifted expansions, child after child.
                        let mut l = vec![C::ZERO; kids.len() * block];
                        for k in 0..nq {
                            let parent = &local[c * block + k * nc..c * block + (k + 1) * nc];
                            let mut views: Vec<&mut [C]> = l
                                .chunks_mut(block)
                                .map(|b| &mut b[k * nc..(k + 1) * nc])
                                .collect();
                            s.l2l(parent, &d, &mut views);
                        }
                        (kids, l)
                    },
                )
                .collect();
            for (kids, l) in shifted {
                for (&ch, l) in kids.iter().zip(l.chunks(block)) {
                    for (x, y) in local[ch * block..(ch + 1) * block].iter_mut().zip(l) {
                        *x += *y;
                    }
                }
            }
        }

        let (def, terms, side) = (self.def, self.terms, o.side);
        let no = def.n_outputs();
        let periodic = self.plan.domain.periodic();
        let hessians = terms.iter().any(|t| matches!(t.term, Term::Stretching(_)));
        leaves
            .par_iter()
            .map_init(
                || (Passes::new(order), Scratch::new(order)),
                |(passes, s), &a| {
                    let cell = &ttree.cells[a];
                    let centre = o.tsph[a].center;
                    let mut out = vec![0.0; cell.len() * no];
                    // Potential and gradient of each expansion at every target.
                    let values: Vec<Vec<(f64, [f64; 3])>> = (0..nq)
                        .map(|k| {
                            let l = &local[a * block + k * nc..a * block + (k + 1) * nc];
                            let mut v = vec![(0.0, [0.0; 3]); cell.len()];
                            passes.l2p(l, centre, &o.tp[cell.begin..cell.end], &mut v);
                            v
                        })
                        .collect();
                    for (j, (i, out)) in (cell.begin..cell.end).zip(out.chunks_mut(no)).enumerate()
                    {
                        let r = sub(o.tp[i], centre);
                        let mut x = FarValues::default();
                        for k in 0..nq {
                            // Back from the unit box: 1/r scales as 1/side.
                            let (phi, grad) = values[k][j];
                            x.phi[k] = phi / side;
                            x.grad[k] = grad.map(|g| g / (side * side));
                            if hessians {
                                let l = &local[a * block + k * nc..a * block + (k + 1) * nc];
                                let cube = side * side * side;
                                x.hess[k] = l2p_hessian(l, r, s).map(|row| row.map(|h| h / cube));
                            }
                        }
                        if let (Some(b), Some(m)) = (periodic, &o.moments) {
                            background::add_quadratic(b, &m.total, o.tp[i], &mut x);
                        }
                        far_outputs(
                            def,
                            terms,
                            nq,
                            &x,
                            |slot| f.tgt.slots[slot][i].to_f64(),
                            out,
                        );
                    }
                    out
                },
            )
            .collect()
    }
}

/// The positions of `soa` (tree order) set to the wrapped points `unit` of
/// the unit box, moved back into `b`: the near field sums the cell's own
/// images, whatever image of a particle was given.
fn wrapped_positions<R: Real>(soa: &mut SoA<R>, unit: &[[f64; 3]], b: &PeriodicBox) {
    let c = b.center();
    for (a, axis) in soa.pos.iter_mut().enumerate() {
        for (x, u) in axis.iter_mut().zip(unit) {
            *x = R::c(u[a] * b.side + c[a]);
        }
    }
}

/// The moments of the sources' strengths `strength` about the centre of
/// the unit box (`unit`: their points there), of a neutral cell or one
/// with a background the kernel's far `terms` take
/// ([`super::check_neutral`]).
fn neutral_moments<R: Real>(
    b: &PeriodicBox,
    def: &fmm_codegen::KernelDef,
    sources: &Particles<R>,
    (strength, terms): (&[usize], &[FarTerm]),
    unit: &[Vec<f64>; 3],
) -> Result<Moments, Error> {
    let q: Vec<Vec<f64>> = strength
        .iter()
        .map(|&k| sources.slots()[k].iter().map(|x| x.to_f64()).collect())
        .collect();
    let q: Vec<&[f64]> = q.iter().map(|v| &v[..]).collect();
    let m = Moments::of(unit, &q, [0.0; 3]);
    super::check_neutral(b, &m, def, terms, strength.len())?;
    Ok(m)
}

/// P2M, M2M, L2L and L2P in AVX-512 or AVX2 lanes where the CPU has them
/// ([`super::pass_lanes`]), else by the scalar operators.
pub(crate) enum Passes {
    #[cfg(target_arch = "x86_64")]
    Lanes512(super::pass_lanes::PassScratch<crate::simd::F64x8>),
    #[cfg(target_arch = "x86_64")]
    Lanes(super::pass_lanes::PassScratch<crate::simd::F64x4>),
    Scalar(Scratch),
}

// SAFETY (every `unsafe` block of `Passes`): a lanes variant is made only
// where the CPU has its instructions, and its scratch is for the order of
// the expansions passed.
impl Passes {
    pub(crate) fn new(p: usize) -> Self {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx512() {
            return Passes::Lanes512(unsafe { super::pass_lanes::PassScratch::new(p) });
        }
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx2_fma() {
            return Passes::Lanes(unsafe { super::pass_lanes::PassScratch::new(p) });
        }
        Passes::Scalar(Scratch::new(p))
    }

    pub(crate) fn p2m(&mut self, z: [f64; 3], x: &[[f64; 3]], q: &[f64], m: &mut [C]) {
        #[cfg(target_arch = "x86_64")]
        use super::pass_lanes::{avx2, avx512};
        match self {
            #[cfg(target_arch = "x86_64")]
            Passes::Lanes512(s) => unsafe { avx512::p2m(z, x, q, s, m) },
            #[cfg(target_arch = "x86_64")]
            Passes::Lanes(s) => unsafe { avx2::p2m(z, x, q, s, m) },
            Passes::Scalar(s) => p2m(z, x, q, s, m),
        }
    }

    /// Potential and gradient of `local` (about `z`) at each of `x`.
    fn l2p(&mut self, local: &[C], z: [f64; 3], x: &[[f64; 3]], out: &mut [(f64, [f64; 3])]) {
        #[cfg(target_arch = "x86_64")]
        use super::pass_lanes::{avx2, avx512};
        match self {
            #[cfg(target_arch = "x86_64")]
            Passes::Lanes512(s) => unsafe { avx512::l2p(local, z, x, s, out) },
            #[cfg(target_arch = "x86_64")]
            Passes::Lanes(s) => unsafe { avx2::l2p(local, z, x, s, out) },
            Passes::Scalar(s) => {
                for (xi, o) in x.iter().zip(out) {
                    *o = l2p(local, sub(*xi, z), s);
                }
            }
        }
    }

    /// Adds the children's expansions `(expansion, z_child - z_parent)`
    /// to `parent`.
    fn m2m(&mut self, children: &[(&[C], [f64; 3])], parent: &mut [C]) {
        #[cfg(target_arch = "x86_64")]
        use super::pass_lanes::{avx2, avx512};
        match self {
            #[cfg(target_arch = "x86_64")]
            Passes::Lanes512(s) => unsafe { avx512::m2m(children, s, parent) },
            #[cfg(target_arch = "x86_64")]
            Passes::Lanes(s) => unsafe { avx2::m2m(children, s, parent) },
            Passes::Scalar(s) => {
                for &(c, d) in children {
                    m2m(c, d, s, parent);
                }
            }
        }
    }

    /// Adds `parent` shifted by `d[i] = z_child - z_parent` to
    /// `children[i]`.
    fn l2l(&mut self, parent: &[C], d: &[[f64; 3]], children: &mut [&mut [C]]) {
        #[cfg(target_arch = "x86_64")]
        use super::pass_lanes::{avx2, avx512};
        match self {
            #[cfg(target_arch = "x86_64")]
            Passes::Lanes512(s) => unsafe { avx512::l2l(parent, d, s, children) },
            #[cfg(target_arch = "x86_64")]
            Passes::Lanes(s) => unsafe { avx2::l2l(parent, d, s, children) },
            Passes::Scalar(s) => {
                for (di, c) in d.iter().zip(children.iter_mut()) {
                    l2l(parent, *di, s, c);
                }
            }
        }
    }
}

/// The M2L of every target cell `a` (spheres `tsph`) from the source
/// cells of `m2l[a]` (spheres `ssph`) into `local`, `nq` expansions a
/// cell; `mult` holds expansion `k` of source cell `b` at `b * nq + k`,
/// scaled, in `T`.
#[allow(clippy::too_many_arguments)]
fn m2l_pass<T: Real>(
    mult: &ScaledMultipoles<T>,
    order: usize,
    nq: usize,
    tsph: &[Sphere],
    ssph: &[Sphere],
    m2l: &[Vec<u32>],
    images: &[[f64; 3]],
    local: &mut [C],
) {
    let nc = ncoef(order);
    local.par_chunks_mut(nq * nc).enumerate().for_each_init(
        || (M2lScratch::<T>::new(order), Vec::new()),
        |(s, list), (a, l)| {
            for k in 0..nq {
                // Each source image at its lattice shift (0 in free space).
                list.clear();
                list.extend(m2l[a].iter().map(|&e| {
                    let (b, image) = split(e);
                    let (z, v) = (ssph[b].center, images[image]);
                    (b * nq + k, [z[0] + v[0], z[1] + v[1], z[2] + v[2]])
                }));
                s.m2l_list(tsph[a].center, mult, list, &mut l[k * nc..(k + 1) * nc]);
            }
        },
    );
}

/// M2L of a whole list: in AVX-512 or AVX2 lanes of `T` where the CPU has
/// them, else one source cell at a time (in f64).
enum M2lScratch<T: Real> {
    #[cfg(target_arch = "x86_64")]
    Lanes512(super::m2l_lanes::LaneScratch<T::Wide512>),
    #[cfg(target_arch = "x86_64")]
    Lanes(super::m2l_lanes::LaneScratch<T::Wide>),
    Scalar(Scratch),
}

/// Whether the CPU's M2L runs in f32 lanes: `M2lChoice::Auto`, an order
/// within [`MAX_SINGLE_ORDER`](super::m2l_lanes::MAX_SINGLE_ORDER), and
/// f32 particles or an error asked for of at least
/// [`SINGLE_ERROR`](super::m2l_lanes::SINGLE_ERROR), where f32's rounding
/// is a tenth of it or less: the settings' expected error (the CPU's
/// table, [`super::tables::expected_error`]), or the tolerance where one
/// was asked for (a tolerance of 1e-6 met at p 13 ran its M2L in f64
/// lanes for an expected 9e-7: 0.32 s at 10^5 points where p 12 in f32
/// lanes took 0.17 s). Twice the lanes for the same work: the M2L of p 9,
/// theta 0.6 at 10^6 points (2 cores) takes 0.36 s where the f64 lanes
/// take 0.59 s, with the same error to four digits.
pub(crate) fn single_m2l(opts: &super::FmmOptions, settings: super::Settings, f32: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let asked = match opts.accuracy {
            super::Accuracy::Tolerance(tol) => tol,
            super::Accuracy::Fixed { .. } => 0.0,
        };
        let room = super::tables::expected_error(settings).max(asked);
        opts.cpu_m2l == super::M2lChoice::Auto
            && settings.p <= super::m2l_lanes::MAX_SINGLE_ORDER
            && (f32 || room >= super::m2l_lanes::SINGLE_ERROR)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (opts, settings, f32);
        false
    }
}

impl<T: Real> M2lScratch<T> {
    fn new(p: usize) -> Self {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx512() {
            // SAFETY: the CPU has AVX-512 F and DQ.
            return M2lScratch::Lanes512(unsafe { super::m2l_lanes::LaneScratch::new(p) });
        }
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA.
            return M2lScratch::Lanes(unsafe { super::m2l_lanes::LaneScratch::new(p) });
        }
        M2lScratch::Scalar(Scratch::new(p))
    }

    /// The M2L into the expansion about `center` of every multipole of
    /// `list` (its index in `mult`, its centre).
    fn m2l_list(
        &mut self,
        center: [f64; 3],
        mult: &ScaledMultipoles<T>,
        list: &[(usize, [f64; 3])],
        local: &mut [C],
    ) {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: made only where the CPU has AVX-512 F and DQ.
            M2lScratch::Lanes512(s) => unsafe {
                super::m2l_lanes::m2l_list_avx512(center, mult, list, s, local)
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: made only where the CPU has AVX2 and FMA.
            M2lScratch::Lanes(s) => unsafe {
                super::m2l_lanes::m2l_list_avx2(center, mult, list, s, local)
            },
            M2lScratch::Scalar(s) => {
                for &(i, z) in list {
                    m2l(&mult.full_range(i, s.p), sub(center, z), s, local);
                }
            }
        }
    }
}
