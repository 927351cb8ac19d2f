//! The Ewald sum (Ewald 1921; the splitting as in Deserno and Holm 1998) of
//! a Laplace-family kernel in a box periodic along all three axes, in f64:
//! the reference every periodic result is checked against, and the
//! periodic direct sum of the front door.
//!
//! The lattice sum of `q / r` is split by `erf(alpha r) + erfc(alpha r)`:
//! the short-range `erfc` part summed over the pairs and images within
//! `r_cut` (where `erfc(alpha r_cut) < 1e-16`), the smooth `erf` part by
//! Fourier series over the reciprocal lattice (`|k| <= k_cut`, where
//! `exp(-k_cut^2 / 4 alpha^2) < 1e-16`). A kernel's outputs are its declared
//! Laplace terms (potential, gradient, curl, stretching: [`far::terms`]) of
//! these sums, one per strength component. What the kernel adds to `q / r`
//! near a source (a Plummer softening, a Gaussian core) is added where it
//! acts: the short-range part is the kernel's own P2P minus the `erf` part,
//! `k(r) - erf(alpha r) / r`, which is the Ewald `erfc` term for a singular
//! kernel and adds the smoothing for the others (exact where the smoothing
//! has died out within `r_cut`: Gaussian cores of radius up to `r_cut / 8`).
//!
//! Tin foil at infinity (Ewald's own sum); vacuum adds the surface term
//! ([`Boundary::Vacuum`]). A cell with a net strength takes the uniform
//! background's constant, `-pi Q / (alpha^2 V)`, in the potential.

// Axes and strength components index several arrays at once.
#![allow(clippy::needless_range_loop)]

use rayon::prelude::*;

use crate::domain::{Boundary, Moments, PeriodicBox};
use crate::error::Error;
use crate::far::terms::{far_outputs, FarValues};
use crate::far::{self, FarField};
use crate::kernel::{Kernel, SourceSlices, MAX_SLOTS};
use crate::particles::Particles;
use crate::real::Real;
use crate::tree::SoA;
use fmm_codegen::kernel::Term;

use std::f64::consts::PI;

/// `alpha r` (and `k / 2 alpha`) past which the neglected parts are below
/// 1e-16: `erfc(6.2) = 3e-19`, `exp(-6.2^2) = 2e-17`.
const REACH: f64 = 6.2;

/// The splitting of one Ewald sum, in the box's length unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ewald {
    /// The splitting parameter (1 / length).
    pub alpha: f64,
    /// The real-space cut-off.
    pub r_cut: f64,
    /// Reciprocal vectors `2 pi n / side` with `|n| <= n_cut`.
    pub n_cut: i32,
}

impl Ewald {
    /// The splitting for `m` targets and `n` sources in a box of `side`: the
    /// real-space pairs (`m n (4 pi / 3) r_cut^3 / V`) balanced against the
    /// reciprocal vectors' work (`(m + n)` times their count), both parts
    /// below 1e-16.
    pub fn for_sizes(side: f64, m: usize, n: usize) -> Ewald {
        let (m, n) = (m.max(1) as f64, n.max(1) as f64);
        let a = (28.0 * m * n / (m + n)).powf(1.0 / 6.0).clamp(3.0, 14.0);
        Ewald::with_alpha(a / side, side)
    }

    /// The splitting parameter `alpha` in a box of `side`, both parts cut
    /// where they fall below 1e-16.
    pub fn with_alpha(alpha: f64, side: f64) -> Ewald {
        let k_cut = 2.0 * alpha * REACH;
        Ewald {
            alpha,
            r_cut: REACH / alpha,
            n_cut: (k_cut * side / (2.0 * PI)).ceil() as i32,
        }
    }
}

/// The periodic sum of kernel `K` (`params` its parameters) at the targets
/// `idx` of `targets` from every source and its images in `pbox` (periodic
/// along all three axes): one vector per output slot, one value per target
/// of `idx`.
pub fn ewald_at<K: Kernel, R: Real>(
    params: &[f64],
    pbox: &PeriodicBox,
    targets: &Particles<R>,
    idx: &[usize],
    sources: &Particles<f64>,
) -> Result<Vec<Vec<f64>>, Error> {
    let ewald = Ewald::for_sizes(pbox.side, idx.len(), sources.len());
    ewald_with::<K, R>(params, pbox, ewald, targets, idx, sources)
}

/// [`ewald_at`] with the splitting `ewald`.
pub fn ewald_with<K: Kernel, R: Real>(
    params: &[f64],
    pbox: &PeriodicBox,
    ewald: Ewald,
    targets: &Particles<R>,
    idx: &[usize],
    sources: &Particles<f64>,
) -> Result<Vec<Vec<f64>>, Error> {
    pbox.check()?;
    if pbox.periodic_axes() < 3 {
        return Err(Error::DomainUnsupported {
            method: "the Ewald sum".into(),
            domain: pbox.name(),
            instead: "use the FMM, whose images need no Ewald splitting".into(),
        });
    }
    let def = K::def();
    let (strength, terms) = match far::plan::<K>(FarField::Laplace, far::Tree::Fmm) {
        Ok(far::Plan::Laplace { strength, terms }) => (strength, terms),
        _ => {
            return Err(Error::DomainUnsupported {
                method: format!("the periodic direct sum of kernel {}", def.name),
                domain: pbox.name(),
                instead: "it is an Ewald sum, which needs a declared Laplace far field \
                          (`strength` and `far_field laplace { .. }`)"
                    .into(),
            })
        }
    };
    let no = def.n_outputs();
    let nq = strength.len();
    crate::far::laplace::background::check(pbox, &def.name, &terms, nq)?;
    let (l, c) = (pbox.side, pbox.center());

    // The sources wrapped into the box (the surface term needs the cell's
    // own particles; every other part is the same for every image).
    let mut spos = [0, 1, 2].map(|a| sources.positions()[a].to_vec());
    pbox.wrap(&mut spos)?;
    let q: Vec<&[f64]> = strength.iter().map(|&k| &sources.slots()[k][..]).collect();
    let moments = Moments::of(&spos, &q, c);
    moments.check(pbox)?;

    let hessians = terms.iter().any(|t| matches!(t.term, Term::Stretching(_)));
    let kspace = Reciprocal::new(&ewald, l, &spos, &q);
    let nt = def.n_targets();
    let src = sources.source_slices();
    let rows: Vec<Vec<f64>> = idx
        .par_iter()
        .map_init(
            || ShiftedSources::new(src.n_fields),
            |list, &i| {
                let mut x = [0, 1, 2].map(|a| targets.positions()[a][i].to_f64());
                let mut w = [vec![x[0]], vec![x[1]], vec![x[2]]];
                pbox.wrap(&mut w)
                    .expect("three periodic axes wrap everything");
                x = [w[0][0], w[1][0], w[2][0]];
                let mut t = [0.0f64; MAX_SLOTS];
                for (tk, slot) in t.iter_mut().zip(targets.slots()).take(nt) {
                    *tk = slot[i].to_f64();
                }
                // The kernel on the pairs within reach, the erf part of
                // the same pairs taken off.
                let mut v = FarValues::default();
                list.gather(&src, &spos, x, l, ewald.r_cut);
                let mut out = vec![0.0; no];
                let slices = list.soa.slices();
                K::p2p_target(params, x, &t, &slices, 0..slices.len(), &mut out);
                for (s, &j) in list.index.iter().enumerate() {
                    let d = [0, 1, 2].map(|a| x[a] - list.soa.pos[a][s]);
                    let (g, b, cc) = erf_over_r(ewald.alpha, d);
                    for k in 0..nq {
                        let qk = q[k][j];
                        add(&mut v, k, -qk, g, b, cc, d, hessians);
                    }
                }
                kspace.add_at(x, hessians, &mut v);
                add_constants(&moments, pbox, ewald.alpha, x, &mut v);
                let mut far = vec![0.0; no];
                far_outputs(def, &terms, nq, &v, |s| t[s], &mut far);
                out.iter().zip(&far).map(|(a, b)| a + b).collect()
            },
        )
        .collect();
    Ok(super::by_slot(&rows, no))
}

/// Adds `s` times `erf(alpha r) / r` (value `g`, gradient `-b d`, Hessian
/// `-b I + cc d d^T`) to expansion `k` of `v`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn add(v: &mut FarValues, k: usize, s: f64, g: f64, b: f64, cc: f64, d: [f64; 3], hess: bool) {
    v.phi[k] += s * g;
    for a in 0..3 {
        v.grad[k][a] -= s * b * d[a];
    }
    if hess {
        for a in 0..3 {
            for e in 0..3 {
                let id = if a == e { 1.0 } else { 0.0 };
                v.hess[k][a][e] += s * (-b * id + cc * d[a] * d[e]);
            }
        }
    }
}

/// `erf(alpha r) / r` at `d` and the two radial functions of its
/// derivatives, `b` (gradient `-b d`) and `cc` (Hessian `-b I + cc d d^T`);
/// by their series where `alpha r` is small (the closed forms cancel), so
/// `r = 0` gives the limits (the self term `2 alpha / sqrt(pi)`).
fn erf_over_r(alpha: f64, d: [f64; 3]) -> (f64, f64, f64) {
    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    let r = r2.sqrt();
    let x = alpha * r;
    let two_over_sqrt_pi = 2.0 / PI.sqrt();
    if x < 0.5 {
        // erf(x) / x = 2/sqrt(pi) sum_n (-1)^n x^2n / (n! (2n + 1));
        // b = 2/sqrt(pi) alpha^3 sum_{n >= 1} c_n x^(2n - 2),
        // cc = -2/sqrt(pi) alpha^5 sum_{n >= 2} c_n (2n - 2) x^(2n - 4),
        // c_n = (-1)^(n + 1) 2n / (n! (2n + 1)).
        let x2 = x * x;
        let mut pw = [1.0f64; 20]; // x^(2n)
        for n in 1..20 {
            pw[n] = pw[n - 1] * x2;
        }
        let (mut g, mut b, mut cc) = (0.0, 0.0, 0.0);
        let mut fact = 1.0;
        for n in 0..18usize {
            if n > 0 {
                fact *= n as f64;
            }
            let (nf, sign) = (n as f64, if n % 2 == 0 { 1.0 } else { -1.0 });
            g += sign * pw[n] / (fact * (2.0 * nf + 1.0));
            let cn = -sign * 2.0 * nf / (fact * (2.0 * nf + 1.0));
            if n >= 1 {
                b += cn * pw[n - 1];
            }
            if n >= 2 {
                cc -= cn * (2.0 * nf - 2.0) * pw[n - 2];
            }
        }
        let a3 = alpha * alpha * alpha;
        return (
            two_over_sqrt_pi * alpha * g,
            two_over_sqrt_pi * a3 * b,
            two_over_sqrt_pi * a3 * alpha * alpha * cc,
        );
    }
    let e = (-x * x).exp();
    let erf = libm::erf(x);
    let g = erf / r;
    let b = (erf - two_over_sqrt_pi * x * e) / (r2 * r);
    let cc = (3.0 * b - two_over_sqrt_pi * 2.0 * alpha * alpha * alpha * e) / r2;
    (g, b, cc)
}

/// The sources within `r_cut` of one target, over every image, at their
/// image's position.
struct ShiftedSources {
    soa: SoA<f64>,
    /// Which source each is.
    index: Vec<usize>,
}

impl ShiftedSources {
    fn new(n_slots: usize) -> Self {
        ShiftedSources {
            soa: SoA::with_capacity(n_slots, 0),
            index: Vec::new(),
        }
    }

    fn gather(
        &mut self,
        src: &SourceSlices<'_, f64>,
        spos: &[Vec<f64>; 3],
        x: [f64; 3],
        l: f64,
        r_cut: f64,
    ) {
        self.soa.clear();
        self.index.clear();
        let rc2 = r_cut * r_cut;
        for j in 0..spos[0].len() {
            let d0 = [0, 1, 2].map(|a| x[a] - spos[a][j]);
            let lo = d0.map(|d| ((d - r_cut) / l).ceil() as i64);
            let hi = d0.map(|d| ((d + r_cut) / l).floor() as i64);
            for n0 in lo[0]..=hi[0] {
                let dx = d0[0] - n0 as f64 * l;
                for n1 in lo[1]..=hi[1] {
                    let dy = d0[1] - n1 as f64 * l;
                    for n2 in lo[2]..=hi[2] {
                        let dz = d0[2] - n2 as f64 * l;
                        if dx * dx + dy * dy + dz * dz < rc2 {
                            self.soa.pos[0].push(x[0] - dx);
                            self.soa.pos[1].push(x[1] - dy);
                            self.soa.pos[2].push(x[2] - dz);
                            for (s, f) in self.soa.slots.iter_mut().zip(&src.fields) {
                                s.push(f[j]);
                            }
                            self.index.push(j);
                        }
                    }
                }
            }
        }
    }
}

/// The reciprocal-space part: the structure factor `S_k = sum_j q_j
/// exp(i k . x_j)` of every strength component at every reciprocal vector
/// of the half space (the other half are their conjugates).
struct Reciprocal {
    /// `k` and its weight `2 (4 pi / V) exp(-k^2 / 4 alpha^2) / k^2`.
    ks: Vec<([f64; 3], f64)>,
    /// `S` of component `c` at vector `i`: `(re, im)` at `i * nq + c`.
    s: Vec<(f64, f64)>,
    nq: usize,
}

impl Reciprocal {
    fn new(ewald: &Ewald, l: f64, spos: &[Vec<f64>; 3], q: &[&[f64]]) -> Self {
        let nc = ewald.n_cut;
        let two_pi_l = 2.0 * PI / l;
        let k_cut = 2.0 * ewald.alpha * REACH;
        let volume = l * l * l;
        let mut ks = Vec::new();
        for a in 0..=nc {
            for b in -nc..=nc {
                for c in -nc..=nc {
                    // The half space: the first non-zero index positive.
                    if a == 0 && (b < 0 || (b == 0 && c <= 0)) {
                        continue;
                    }
                    let k = [a, b, c].map(|n| n as f64 * two_pi_l);
                    let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
                    if k2.sqrt() > k_cut {
                        continue;
                    }
                    let w =
                        2.0 * 4.0 * PI / volume * (-k2 / (4.0 * ewald.alpha.powi(2))).exp() / k2;
                    ks.push((k, w));
                }
            }
        }
        let nq = q.len();
        let nk = ks.len();
        let n = spos[0].len();
        let chunk = 256;
        let s = (0..n.div_ceil(chunk))
            .into_par_iter()
            .map(|c| {
                let mut acc = vec![(0.0, 0.0); nk * nq];
                for j in c * chunk..((c + 1) * chunk).min(n) {
                    let e = Phases::of([spos[0][j], spos[1][j], spos[2][j]], two_pi_l, nc);
                    for (i, (k, _)) in ks.iter().enumerate() {
                        let (re, im) = e.at(*k, two_pi_l);
                        for (cq, qc) in q.iter().enumerate() {
                            let v = &mut acc[i * nq + cq];
                            v.0 += qc[j] * re;
                            v.1 += qc[j] * im;
                        }
                    }
                }
                acc
            })
            .reduce(
                || vec![(0.0, 0.0); nk * nq],
                |mut a, b| {
                    for (x, y) in a.iter_mut().zip(b) {
                        x.0 += y.0;
                        x.1 += y.1;
                    }
                    a
                },
            );
        Reciprocal { ks, s, nq }
    }

    /// Adds the reciprocal part at `x` to `v`.
    fn add_at(&self, x: [f64; 3], hess: bool, v: &mut FarValues) {
        for (i, (k, w)) in self.ks.iter().enumerate() {
            let kx = k[0] * x[0] + k[1] * x[1] + k[2] * x[2];
            let (sn, cs) = kx.sin_cos();
            for c in 0..self.nq {
                // z = S exp(-i k.x)
                let (sr, si) = self.s[i * self.nq + c];
                let zr = sr * cs + si * sn;
                let zi = si * cs - sr * sn;
                v.phi[c] += w * zr;
                for a in 0..3 {
                    v.grad[c][a] += w * k[a] * zi;
                }
                if hess {
                    for a in 0..3 {
                        for b in 0..3 {
                            v.hess[c][a][b] -= w * k[a] * k[b] * zr;
                        }
                    }
                }
            }
        }
    }
}

/// `exp(i 2 pi n x_a / l)` for `|n| <= nc` on each axis, made by
/// recurrence.
struct Phases {
    e: [Vec<(f64, f64)>; 3],
    nc: i32,
}

impl Phases {
    fn of(x: [f64; 3], two_pi_l: f64, nc: i32) -> Self {
        let e = [0, 1, 2].map(|a| {
            let (s, c) = (two_pi_l * x[a]).sin_cos();
            let mut v = vec![(0.0, 0.0); (2 * nc + 1) as usize];
            v[nc as usize] = (1.0, 0.0);
            for n in 1..=nc as usize {
                let (pr, pi) = v[nc as usize + n - 1];
                v[nc as usize + n] = (pr * c - pi * s, pr * s + pi * c);
                v[nc as usize - n] = (v[nc as usize + n].0, -v[nc as usize + n].1);
            }
            v
        });
        Phases { e, nc }
    }

    #[inline]
    fn at(&self, k: [f64; 3], two_pi_l: f64) -> (f64, f64) {
        let mut z = (1.0, 0.0);
        for a in 0..3 {
            let n = (k[a] / two_pi_l).round() as i32;
            let w = self.e[a][(n + self.nc) as usize];
            z = (z.0 * w.0 - z.1 * w.1, z.0 * w.1 + z.1 * w.0);
        }
        z
    }
}

/// The background's constant and, for the vacuum boundary, the surface
/// term at `x`, added to `v`.
fn add_constants(m: &Moments, pbox: &PeriodicBox, alpha: f64, x: [f64; 3], v: &mut FarValues) {
    let volume = pbox.volume();
    let c = pbox.center();
    for k in 0..m.total.len() {
        if pbox.background {
            v.phi[k] -= PI * m.total[k] / (alpha * alpha * volume);
        }
        if pbox.boundary == Boundary::Vacuum {
            let (phi, grad) = m.surface(k, volume, x, c);
            v.phi[k] += phi;
            for a in 0..3 {
                v.grad[k][a] += grad[a];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The series and the closed forms of `erf(alpha r) / r` and its
    /// radial functions meet at `alpha r = 0.5`, and the gradient is the
    /// derivative of the value.
    #[test]
    fn erf_over_r_is_continuous_and_differentiates() {
        let alpha = 3.0;
        for r in [0.5 / alpha * (1.0 - 1e-9), 0.5 / alpha * (1.0 + 1e-9)] {
            let (g, b, cc) = erf_over_r(alpha, [r, 0.0, 0.0]);
            let (g2, b2, cc2) = erf_over_r(alpha, [0.5 / alpha, 0.0, 0.0]);
            assert!((g - g2).abs() < 1e-7 * g2.abs());
            assert!((b - b2).abs() < 1e-7 * b2.abs());
            assert!((cc - cc2).abs() < 1e-6 * cc2.abs());
        }
        for r in [0.01, 0.1, 0.3, 1.0] {
            let h = 1e-6;
            let d = [r * 0.6, r * 0.8, 0.0];
            let (_, b, cc) = erf_over_r(alpha, d);
            let (gp, bp, _) = erf_over_r(alpha, [d[0] + h, d[1], d[2]]);
            let (gm, bm, _) = erf_over_r(alpha, [d[0] - h, d[1], d[2]]);
            let dg = (gp - gm) / (2.0 * h);
            assert!((dg + b * d[0]).abs() < 1e-6 * (b * d[0]).abs(), "r {r}");
            // d/dx of the gradient's x: -b - b' x ... = -b + cc x^2
            let dgx = (-bp * (d[0] + h) + bm * (d[0] - h)) / (2.0 * h);
            let want = -b + cc * d[0] * d[0];
            assert!(
                (dgx - want).abs() < 1e-5 * want.abs().max(1.0),
                "r {r}: {dgx} {want}"
            );
        }
        let (g0, b0, cc0) = erf_over_r(alpha, [0.0; 3]);
        assert!((g0 - 2.0 * alpha / PI.sqrt()).abs() < 1e-14);
        assert!((b0 - 4.0 * alpha.powi(3) / (3.0 * PI.sqrt())).abs() < 1e-12);
        assert!((cc0 - 8.0 * alpha.powi(5) / (5.0 * PI.sqrt())).abs() < 1e-10);
    }
}
