//! A periodic box's neutralising background: a cell of net strength `Q`
//! and a uniform density `-Q / V` over the box, summed over the lattice in
//! Ewald's convention (the `k = 0` term dropped: the potential's mean over
//! the box is zero).
//!
//! The tree methods sum the cell's near images point by point and the
//! farther ones by expansions that leave the monopole out
//! ([`super::images::far_local`]): what they compute is the periodic sum of
//! the cell with a charge `-Q` at the box's centre, which is neutral. What
//! is left is `Q` times the periodic potential of a unit charge at the
//! centre with its background, less that charge's near images (which the
//! sums never met):
//!
//! `B(u) = (2 pi / 3) |u|^2 + H(u)` (box of side 1, centre 0),
//!
//! the quadratic from the background filling the near block of `5^3`
//! boxes (its Laplacian, `4 pi`, is the density's), and `H` harmonic
//! inside the block: that block's potential less the quadratic (`-h`,
//! from a uniform cube's closed form, projected onto the solid harmonics
//! on a sphere), the farther blocks' backgrounds by their multipoles
//! (a uniform cube's, by Gauss-Legendre), and the tin-foil boundary's
//! constant for the background's second moment. `H` rides in the root's
//! local expansion with the far images ([`super::images::periodic_local`]),
//! the quadratic is added at every target ([`add_quadratic`]).
//!
//! Three periodic axes and the tin-foil boundary only (a slab's net
//! strength has no such sum; the vacuum boundary needs a neutral cell),
//! and scalar strengths (charges, masses) with potential and gradient
//! terms: what Coulomb's and gravity's periodic users ask for.

use std::f64::consts::PI;
use std::sync::{Arc, Mutex};

use super::harmonics::{ncoef, regular, C};
use super::images::{add_linear, far_local};
use super::operators::{p2m, Scratch};
use crate::domain::{Moments, PeriodicBox, NEAR};
use crate::error::Error;
use crate::far::terms::FarValues;
use fmm_codegen::kernel::{FarTerm, Term};

/// Half the side of the near images' block, in boxes.
const BLOCK_HALF: f64 = NEAR as f64 + 0.5;

/// The radius of the sphere `h` is projected on: half the block's
/// half-side, so that a degree `n` of `h` weighs `2^-n` there.
const SPHERE: f64 = 0.5 * BLOCK_HALF;

/// Says why a neutralising background cannot run for `b` with a kernel of
/// `nq` strength components and far terms `terms`, if it cannot;
/// `kernel` names it.
pub(crate) fn check(
    b: &PeriodicBox,
    kernel: &str,
    terms: &[FarTerm],
    nq: usize,
) -> Result<(), Error> {
    if !b.background {
        return Ok(());
    }
    let scalar = nq == 1
        && terms
            .iter()
            .all(|t| matches!(t.term, Term::Potential | Term::Gradient));
    match scalar {
        true => Ok(()),
        false => Err(Error::BadDomain(format!(
            "a neutralising background balances scalar strengths (charges, masses) whose far \
             field is a potential and its gradient, not kernel {kernel}'s; a vector strength in \
             a {} (a vorticity) must sum to zero of itself: drop the background",
            b.name()
        ))),
    }
}

/// The potential and its gradient at `x` of a cube of unit density, of
/// half-side `half` about the origin, inside or outside it: the closed
/// form of the prism's integral (MacMillan 1930; Nagy, Papp and Benedek
/// 2000), summed over the corners relative to `x`.
pub(crate) fn cube_potential(x: [f64; 3], half: f64) -> (f64, [f64; 3]) {
    let (mut phi, mut grad) = (0.0, [0.0; 3]);
    for corner in 0..8 {
        let mut sign = 1.0;
        let d: [f64; 3] = [0, 1, 2].map(|a| {
            let upper = corner >> a & 1 == 1;
            if !upper {
                sign = -sign;
            }
            (if upper { half } else { -half }) - x[a]
        });
        let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        // ln(a + r) and a^2 atan(b c / (a r)), each 0 where its factor is.
        let ln = |a: f64| if r + a > 0.0 { (a + r).ln() } else { 0.0 };
        let at = |a: f64, b: f64, c: f64| {
            if a == 0.0 {
                0.0
            } else {
                a * (b * c / (a * r)).atan()
            }
        };
        let [u, v, w] = d;
        phi += sign
            * (v * w * ln(u) + u * w * ln(v) + u * v * ln(w)
                - 0.5 * (u * at(u, v, w) + v * at(v, u, w) + w * at(w, u, v)));
        // d/dx of the potential is minus d/du of the corner's term.
        let g = [
            v * ln(w) + w * ln(v) - at(u, v, w),
            u * ln(w) + w * ln(u) - at(v, u, w),
            u * ln(v) + v * ln(u) - at(w, u, v),
        ];
        for a in 0..3 {
            grad[a] -= sign * g[a];
        }
    }
    (phi, grad)
}

/// The `n` Gauss-Legendre nodes and weights on `[-1, 1]` (Newton's method
/// on the Legendre recurrence).
fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut x, mut w) = (vec![0.0; n], vec![0.0; n]);
    for i in 0..n {
        let mut z = (PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
        for _ in 0..100 {
            let (mut p0, mut p1) = (1.0, z);
            for k in 2..=n {
                let k = k as f64;
                let p2 = ((2.0 * k - 1.0) * z * p1 - (k - 1.0) * p0) / k;
                (p0, p1) = (p1, p2);
            }
            let dp = n as f64 * (z * p1 - p0) / (z * z - 1.0);
            let step = p1 / dp;
            z -= step;
            w[i] = 2.0 / ((1.0 - z * z) * dp * dp);
            if step.abs() < 1e-15 {
                break;
            }
        }
        x[i] = z;
    }
    (x, w)
}

/// The multipole of order `p` about its centre of the unit cube of unit
/// density (its moments exact: `R_n^m` is a polynomial of degree `n`).
fn cube_multipole(p: usize) -> Vec<C> {
    let (x, w) = gauss_legendre(p / 2 + 2);
    let mut points = Vec::new();
    let mut weights = Vec::new();
    for (i, xi) in x.iter().enumerate() {
        for (j, xj) in x.iter().enumerate() {
            for (k, xk) in x.iter().enumerate() {
                points.push([0.5 * xi, 0.5 * xj, 0.5 * xk]);
                weights.push(0.125 * w[i] * w[j] * w[k]);
            }
        }
    }
    let mut m = vec![C::ZERO; ncoef(p)];
    p2m([0.0; 3], &points, &weights, &mut Scratch::new(p), &mut m);
    m
}

/// The local expansion of order `p` about the centre of
/// `h(u) = Phi(u) + (2 pi / 3) |u|^2`, `Phi` the potential of the near
/// block (unit density, half-side [`BLOCK_HALF`]): harmonic inside the
/// block, its coefficients `L_n^m = int h R_n^m / int |R_n^m|^2` over a
/// sphere of radius [`SPHERE`] (the expansion is `sum L conj(R)`), by
/// Gauss-Legendre in `cos t` and the trapezoid in `phi`, exact for the
/// degrees kept and their products with degrees up to 40 past them.
fn near_block_local(p: usize) -> Vec<C> {
    let nt = p + 40;
    let nphi = 2 * nt;
    let (ct, wt) = gauss_legendre(nt);
    let nc = ncoef(p);
    let (mut num, mut den) = (vec![C::ZERO; nc], vec![0.0; nc]);
    let mut h = vec![C::ZERO; nc];
    for (c, wc) in ct.iter().zip(&wt) {
        let st = (1.0 - c * c).sqrt();
        for j in 0..nphi {
            let ph = 2.0 * PI * j as f64 / nphi as f64;
            let x = [SPHERE * st * ph.cos(), SPHERE * st * ph.sin(), SPHERE * c];
            let (phi, _) = cube_potential(x, BLOCK_HALF);
            let f = phi + 2.0 * PI / 3.0 * SPHERE * SPHERE;
            regular(x, p, &mut h);
            for i in 0..nc {
                num[i] += h[i].scale(wc * f);
                den[i] += wc * (h[i].re * h[i].re + h[i].im * h[i].im);
            }
        }
    }
    num.iter()
        .zip(&den)
        .map(|(n, d)| n.scale(1.0 / d))
        .collect()
}

/// `H` of the module doc for a unit net strength in the box of side 1
/// (three periodic axes, tin foil): order `p`, the far blocks up to
/// `levels` levels.
fn harmonic_local(p: usize, levels: u32) -> Arc<Vec<C>> {
    type Made = ((usize, u32), Arc<Vec<C>>);
    static MADE: Mutex<Vec<Made>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, l)) = made.iter().find(|(k, _)| *k == (p, levels)) {
        return l.clone();
    }
    // The farther blocks' backgrounds (the centre's unit charge, a
    // monopole, is left out with the cell's).
    let cube: Vec<C> = cube_multipole(p).iter().map(|c| c.scale(-1.0)).collect();
    let mut local = far_local(&cube, p, [true; 3], levels);
    // Tin foil's constant for the background's second moment (its total
    // and dipole are zero with the charge): int |u|^2 over the box is 1/4.
    let moments = Moments {
        total: vec![0.0],
        dipole: vec![[0.0; 3]],
        second: vec![-0.25],
        second_axes: vec![[-1.0 / 12.0; 3]],
        scale: 1.0,
    };
    let (phi, grad) = moments.beyond_images(&PeriodicBox::cube([0.0; 3], 1.0), 0, levels, [0.0; 3]);
    add_linear(&mut local, phi, grad);
    for (l, h) in local.iter_mut().zip(near_block_local(p)) {
        *l = *l - h;
    }
    let l = Arc::new(local);
    made.push(((p, levels), l.clone()));
    l
}

/// Adds the background's harmonic part for strength component `k` (net
/// strength `moments.total[k]`) to the far images' local expansion `local`
/// (order `p`, box of side 1, `levels` image levels); nothing where `b`
/// has no background.
pub(crate) fn add_harmonic(
    b: &PeriodicBox,
    moments: &Moments,
    k: usize,
    p: usize,
    levels: u32,
    local: &mut [C],
) {
    if !b.background {
        return;
    }
    let q = moments.total[k];
    for (l, h) in local.iter_mut().zip(harmonic_local(p, levels).iter()) {
        *l += h.scale(q);
    }
}

/// Adds the background's quadratic part at a target (`u`: about the box's
/// centre, over its side) to `v`, in the box's units: `Q (2 pi / 3) |u|^2 /
/// side`, its gradient and Hessian, `Q` each strength component's net
/// `total`; nothing where `b` has no background.
pub(crate) fn add_quadratic(b: &PeriodicBox, total: &[f64], u: [f64; 3], v: &mut FarValues) {
    if !b.background {
        return;
    }
    let l = b.side;
    for (k, &q) in total.iter().enumerate() {
        let (phi, grad, hess) = quadratic(q, u);
        v.phi[k] += phi / l;
        for (a, g) in grad.iter().enumerate() {
            v.grad[k][a] += g / (l * l);
            v.hess[k][a][a] += hess / (l * l * l);
        }
    }
}

/// `Q (2 pi / 3) |u|^2`, its gradient and its Hessian's diagonal.
pub(crate) fn quadratic(q: f64, u: [f64; 3]) -> (f64, [f64; 3], f64) {
    let f = 2.0 * PI / 3.0 * q;
    let r2 = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
    (f * r2, u.map(|x| 2.0 * f * x), 2.0 * f)
}

#[cfg(test)]
mod tests {
    use super::super::operators::l2p;
    use super::*;

    /// The potential at the centre of the unit cube, from its six faces'
    /// cones in spherical coordinates: `int dOmega R^2 / 2`, `R` the
    /// distance to the face, which over the face `z = 1/2` is `(1/8) int
    /// int (1 + s^2 + t^2)^(-1/2) ds dt` over `[-1, 1]^2`.
    #[test]
    fn the_cube_potential_at_its_centre_is_the_faces_integral() {
        let (x, w) = gauss_legendre(60);
        let mut face = 0.0;
        for (s, ws) in x.iter().zip(&w) {
            for (t, wt) in x.iter().zip(&w) {
                face += ws * wt / (1.0 + s * s + t * t).sqrt();
            }
        }
        let want = 6.0 * face / 8.0;
        let (phi, grad) = cube_potential([0.0; 3], 0.5);
        assert!((phi - want).abs() < 1e-12 * want, "{phi} {want}");
        assert!(grad.iter().all(|g| g.abs() < 1e-12), "{grad:?}");
        assert!((want - 2.380077).abs() < 1e-6, "{want}");
    }

    /// Outside the cube its potential is the quadrature of `1 / r` (a
    /// smooth integrand); inside and outside the gradient is the
    /// potential's difference quotient and the Laplacian is `-4 pi` inside,
    /// 0 outside.
    #[test]
    fn the_cube_potential_is_its_integral_and_differentiates() {
        let (x, w) = gauss_legendre(24);
        let at = [1.3, -0.4, 0.9];
        let mut want = 0.0;
        for (i, xi) in x.iter().enumerate() {
            for (j, xj) in x.iter().enumerate() {
                for (k, xk) in x.iter().enumerate() {
                    let y = [0.5 * xi, 0.5 * xj, 0.5 * xk];
                    let d = [0, 1, 2].map(|a| at[a] - y[a]);
                    let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                    want += 0.125 * w[i] * w[j] * w[k] / r;
                }
            }
        }
        let (phi, _) = cube_potential(at, 0.5);
        assert!((phi - want).abs() < 1e-10 * want, "{phi} {want}");
        let h = 1e-4;
        for (x, inside) in [
            ([0.1, -0.2, 0.3], true),
            (at, false),
            ([0.45, 0.4, -0.3], true),
        ] {
            let (_, g) = cube_potential(x, 0.5);
            let mut lap = 0.0;
            for a in 0..3 {
                let mut xp = x;
                let mut xm = x;
                xp[a] += h;
                xm[a] -= h;
                let (pp, _) = cube_potential(xp, 0.5);
                let (pm, _) = cube_potential(xm, 0.5);
                let fd = (pp - pm) / (2.0 * h);
                assert!((g[a] - fd).abs() < 1e-7, "{a}: {} {fd}", g[a]);
                lap += (pp - 2.0 * cube_potential(x, 0.5).0 + pm) / (h * h);
            }
            let want = if inside { -4.0 * PI } else { 0.0 };
            assert!((lap - want).abs() < 1e-4, "{x:?}: {lap} {want}");
        }
    }

    /// The near block's harmonic part by its local expansion equals the
    /// closed form less the quadratic, across the box.
    #[test]
    fn the_near_blocks_local_expansion_is_its_harmonic_part() {
        let p = 24;
        let local = near_block_local(p);
        let mut s = Scratch::new(p);
        for x in [
            [0.5, 0.5, 0.5],
            [-0.5, 0.3, -0.1],
            [0.0, 0.0, 0.0],
            [0.2, -0.45, 0.5],
        ] {
            let (phi, grad) = cube_potential(x, BLOCK_HALF);
            let r2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
            let want = phi + 2.0 * PI / 3.0 * r2;
            let (got, g) = l2p(&local, x, &mut s);
            assert!(
                (got - want).abs() < 1e-9 * want.abs(),
                "{x:?}: {got} {want}"
            );
            for a in 0..3 {
                let ga = grad[a] + 4.0 * PI / 3.0 * x[a];
                assert!((g[a] - ga).abs() < 1e-8, "{x:?} {a}: {} {ga}", g[a]);
            }
        }
    }

    /// Gauss-Legendre with `n` nodes integrates `x^k` exactly to `2n - 1`.
    #[test]
    fn gauss_legendre_integrates_polynomials() {
        for n in [1, 2, 5, 13] {
            let (x, w) = gauss_legendre(n);
            for k in 0..2 * n {
                let got: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(k as i32)).sum();
                let want = if k % 2 == 1 {
                    0.0
                } else {
                    2.0 / (k + 1) as f64
                };
                assert!((got - want).abs() < 1e-13, "{n} {k}: {got} {want}");
            }
        }
    }
}
