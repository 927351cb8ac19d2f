//! The Laplace far field's floor, predicted from the declaration before
//! anything runs.
//!
//! The expansions are those of the singular kernel; a kernel's smoothing
//! (Plummer softening, a Gaussian core) differs from it by an amount that
//! falls with distance, so cells that interact by M2L at a distance `d`
//! carry an error of about the kernel's relative difference from its
//! singular form at `d`. That difference is measured on the kernel itself:
//! its outputs from a few of the problem's sources at `d`, against its
//! outputs at `FAR * d` scaled back by the power of distance its far field
//! falls with (read off the kernel at `FAR * d` and `2 FAR * d`). The
//! nearest M2L pairs are leaves `2 R / theta` apart, `R` a leaf's radius
//! with `leaf` particles a leaf in the points' bounding cube, and `d` is
//! that of their near particles: halfway between their nearest corners
//! and faces (Biot-Savart with cores of three spacings stalled at 7e-2 at
//! theta 0.5 where the leaves' centres alone predicted 1e-4); the MAC
//! chosen is the widest whose predicted floor is below the tolerance.
//! Clustered points make smaller leaves than a uniform cube's, so the
//! prediction can be short: the driver's measured error still decides,
//! and narrows theta further where it stalls.

use crate::kernel::{Kernel, MAX_SLOTS};
use crate::particles::Particles;
use crate::real::Real;

/// How much further than `d` the kernel is taken to be singular.
const FAR: f64 = 1e4;

/// Sources the difference is measured from.
pub(crate) const SOURCES: usize = 4;

/// The relative difference of kernel `K` (parameters `params`) from its
/// singular far field at distance `d`: the largest over a few sources of
/// `sources` and four directions, the fields of a target of `targets`.
pub(crate) fn smoothing_at<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    d: f64,
) -> f64 {
    let no = K::def().n_outputs();
    let (m, n) = (targets.len(), sources.len());
    if m == 0 || n == 0 || no == 0 || d.is_nan() || d <= 0.0 {
        return 0.0;
    }
    let picks: Vec<usize> = (0..SOURCES.min(n))
        .map(|s| s * n / SOURCES.min(n))
        .collect();
    let src = sources.to_f64(Some(&picks));
    let slices = src.source_slices();
    let tgt = targets.to_f64(Some(&[m / 2]));
    let mut fields = [0.0f64; MAX_SLOTS];
    tgt.target_slots(0, &mut fields);
    let at = |j: usize, x: [f64; 3]| -> Vec<f64> {
        let mut out = vec![0.0; no];
        K::p2p_target(params, x, &fields, &slices, j..j + 1, &mut out);
        out
    };
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let s3 = 1.0 / 3f64.sqrt();
    let mut worst = 0.0f64;
    for j in 0..picks.len() {
        let xj = src.position(j);
        for u in [
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
            [s3, s3, s3],
        ] {
            let point = |r: f64| [xj[0] + r * u[0], xj[1] + r * u[1], xj[2] + r * u[2]];
            let near = at(j, point(d));
            let far = at(j, point(FAR * d));
            let farther = at(j, point(2.0 * FAR * d));
            // Each output on its own: outputs fall with their own power
            // of distance (a potential as 1/d, its gradient as 1/d^2).
            let scale = norm(&far);
            for s in 0..no {
                let (f, ff) = (far[s], farther[s]);
                if !(f.abs() > 1e-12 * scale && ff != 0.0 && f.is_finite()) {
                    continue;
                }
                // The far field falls as d^-k: the kernel's own power.
                let k = (f / ff).abs().log2();
                let singular = f * FAR.powf(k);
                if singular != 0.0 && singular.is_finite() {
                    worst = worst.max(((near[s] - singular) / singular).abs());
                }
            }
        }
    }
    worst
}

/// The widest MAC, from the tables' widest (0.7) down by the driver's
/// steps to its narrowest, whose predicted floor is below `tol`
/// (1.0: no limit, the floor is below it at 0.7); where even the
/// narrowest's is not, `Err` with the floor predicted there.
#[cfg(test)]
pub(crate) fn widest_theta<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    leaf: usize,
    tol: f64,
) -> Result<f64, f64> {
    let m = targets.len().max(sources.len());
    let side = cube_side(targets).max(cube_side(sources));
    widest_theta_in::<K, R>(params, targets, sources, side, m, leaf, tol)
}

/// [`widest_theta`] for `m` points in a cube of side `side`, the
/// kernel's smoothing measured at `targets` from `sources` (a few of the
/// problem's: the GPU's particles stay on the device, and a few are
/// copied back).
pub(crate) fn widest_theta_in<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    side: f64,
    m: usize,
    leaf: usize,
    tol: f64,
) -> Result<f64, f64> {
    if m == 0 || !(side > 0.0 && side.is_finite()) {
        return Ok(1.0);
    }
    // A leaf's radius in a uniform cube with `leaf` points a leaf.
    let h = side * (leaf.min(m) as f64 / m as f64).cbrt();
    let radius = 0.5 * 3f64.sqrt() * h;
    // Near particles of two leaves the MAC accepts, their centres
    // `2 R / theta` apart: halfway between the nearest corners (each
    // particle `R` from its centre) and the nearest faces (`h / 2`). A
    // Gaussian core's floor is set by such pairs (it falls faster than the
    // pairs grow in number). The corners overstate it (velocity +
    // stretching, cores of one spacing, theta 0.56: 8e-5 there, where p 9
    // at theta 0.55 meets 5.3e-5 over every target; taken, the GPU ran
    // theta 0.448 at 1.5 times the time), the faces understate it
    // (Biot-Savart, cores of three spacings, theta 0.5: 1e-2 there, where
    // the expansions stalled at 7e-2; halfway, 5e-2). For an algebraic
    // smoothing this overstates the floor, on the safe side.
    let near = |theta: f64| 0.5 * (2.0 * radius * (1.0 / theta - 1.0) + 2.0 * radius / theta - h);
    let floor = |theta: f64| smoothing_at::<K, R>(params, targets, sources, near(theta));
    let mut theta = 0.7;
    if floor(theta) <= tol {
        return Ok(1.0);
    }
    loop {
        match super::driver::narrower(theta) {
            Some(t) => theta = t,
            None => return Err(floor(theta)),
        }
        if floor(theta) <= tol {
            return Ok(theta);
        }
    }
}

/// Where the Laplace far field runs for a kernel: the widest MAC its
/// predicted floor allows, and the near radius inside which cells sum
/// directly (`tree::traversal::well_separated`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Mac {
    /// As [`widest_theta`]: 1.0 for no limit, `Err` with the floor the
    /// narrowest MAC leaves.
    pub theta: Result<f64, f64>,
    /// 0: the plain MAC.
    pub near: f64,
}

/// How many points a problem has and the cube they fill: the larger of
/// its targets' and sources' counts and cubes, and the sources' own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extent {
    pub points: usize,
    pub side: f64,
    pub sources: usize,
    pub source_side: f64,
}

impl Mac {
    /// No limit and the plain MAC (fixed settings, the node far fields).
    pub(crate) const FREE: Mac = Mac {
        theta: Ok(1.0),
        near: 0.0,
    };
}

/// The near radius is taken where a target's sources within it (and a
/// source leaf's radius more), counted as if the sources filled their
/// cube evenly, are at most this many leaves' worth: cores of one spacing
/// at 64^3 (about 48 leaves of 64) take it; cores of three spacings
/// (hundreds of leaves: close to the direct sum) are left to the MAC and
/// the node far fields, which met them sooner.
const NEAR_LEAVES: f64 = 64.0;

/// [`widest_theta_in`] with a near radius: where the kernel's smoothing
/// reaches a measurable distance ([`smoothing_radius`]) holding at most
/// [`NEAR_LEAVES`] leaves of sources (as if they filled their cube,
/// `extent`) and falls fast past it (a hundredfold by twice the distance:
/// a Gaussian core, not an algebraic softening, whose pairs at twice the
/// radius still carry a quarter of the floor), cells nearer than it sum
/// directly and the MAC is free (the floor is then below `tol` at any
/// theta). The prediction of the nearest M2L pairs from a uniform cube
/// misses clustered points: a rotor's wake of vortex filaments over 10^6 dust
/// particles (Gaussian cores) stalled at 2.6e-4 at theta 0.4 where the
/// cube predicted theta 0.7 safe, and the node far field it switched to
/// ran 2.1 times slower than the expansions with this radius (one H100).
pub(crate) fn widest_mac_in<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    extent: Extent,
    leaf: usize,
    tol: f64,
) -> Mac {
    let Extent {
        points: m,
        side,
        sources: n_sources,
        source_side,
    } = extent;
    if m > 0 && n_sources > 0 && side > 0.0 && side.is_finite() {
        let near = smoothing_radius::<K, R>(params, targets, sources, side, tol);
        let n = n_sources as f64;
        let cube = source_side.max(1e-300 * side);
        let leaf_radius = 0.5 * 3f64.sqrt() * cube * (leaf.min(n_sources) as f64 / n).cbrt();
        let within = n
            * (4.0 / 3.0 * std::f64::consts::PI * (near + leaf_radius).powi(3) / cube.powi(3))
                .min(1.0);
        if crate::stats::trace() {
            eprintln!(
                "[fmm] tolerance {tol:e}: the kernel is its far field to it past {near:.3e}, \
                 about {within:.0} sources a target within it ({n_sources} in a cube of side \
                 {source_side:.3e})"
            );
        }
        // A radius past a quarter of the cube is close to the direct sum
        // (an infinite one: the smoothing reaches past the cube).
        if near > 0.0
            && near < 0.25 * side
            && within <= NEAR_LEAVES * leaf as f64
            && smoothing_at::<K, R>(params, targets, sources, 2.0 * near) <= 1e-2 * tol
        {
            return Mac {
                theta: Ok(1.0),
                near,
            };
        }
    }
    Mac {
        theta: widest_theta_in::<K, R>(params, targets, sources, side, m, leaf, tol),
        near: 0.0,
    }
}

/// [`widest_mac_in`] for particles on the host.
pub(crate) fn widest_mac<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    leaf: usize,
    tol: f64,
) -> Mac {
    let m = targets.len().max(sources.len());
    let source_side = cube_side(sources);
    let side = cube_side(targets).max(source_side);
    let extent = Extent {
        points: m,
        side,
        sources: sources.len(),
        source_side,
    };
    widest_mac_in::<K, R>(params, targets, sources, extent, leaf, tol)
}

/// The distance past which kernel `K` is its singular far field to `tol`
/// ([`smoothing_at`] at most `tol`), found by bisection in the logarithm
/// between a millionth of `side` and `side`: 0 where the smoothing is
/// within `tol` already at the first (a singular kernel), infinite where
/// not even at the second.
pub(crate) fn smoothing_radius<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    side: f64,
    tol: f64,
) -> f64 {
    let within = |d: f64| smoothing_at::<K, R>(params, targets, sources, d) <= tol;
    let (mut lo, mut hi) = (1e-6 * side, side);
    if within(lo) {
        return 0.0;
    }
    if !within(hi) {
        return f64::INFINITY;
    }
    // 40 halvings of the logarithm's range of 14: to a part in 10^11.
    for _ in 0..40 {
        let mid = (lo * hi).sqrt();
        if within(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The side of the bounding cube of `p`'s points.
fn cube_side<R: Real>(p: &Particles<R>) -> f64 {
    let pos = p.positions();
    (0..3)
        .map(|a| {
            let (lo, hi) = pos[a].iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| {
                (lo.min(x.to_f64()), hi.max(x.to_f64()))
            });
            hi - lo
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{BiotSavart, Gravity};

    fn gravity(n: usize) -> (Particles<f64>, Particles<f64>) {
        let pos = crate::distributions::uniform_cube(n, 1);
        let mut s = Particles::sources::<Gravity>(&pos).unwrap();
        s.set("m", &vec![1.0; n]).unwrap();
        (Particles::targets::<Gravity>(&pos).unwrap(), s)
    }

    /// Plummer softening differs from 1/r by about (3/2)(eps/d)^2 in the
    /// field; no softening, by nothing; a Gaussian core, by nothing a few
    /// cores away.
    #[test]
    fn the_smoothing_of_known_kernels() {
        let (t, s) = gravity(100);
        let eps = 0.01;
        let at = |d: f64| smoothing_at::<Gravity, f64>(&[eps], &t, &s, d);
        let expected = 1.5 * (eps / 0.1f64).powi(2);
        assert!(
            (at(0.1) / expected - 1.0).abs() < 0.05,
            "{} vs {expected}",
            at(0.1)
        );
        assert!(at(0.2) < 0.3 * at(0.1));
        assert!(smoothing_at::<Gravity, f64>(&[0.0], &t, &s, 0.1) < 1e-12);
        let pos = crate::distributions::uniform_cube(10, 2);
        let mut v = Particles::sources::<BiotSavart>(&pos).unwrap();
        v.set_vec3("alpha", &vec![[1.0, 0.5, -0.2]; 10]).unwrap();
        v.set("sigma", &[0.01; 10]).unwrap();
        let vt = Particles::targets::<BiotSavart>(&pos).unwrap();
        assert!(smoothing_at::<BiotSavart, f64>(&[], &vt, &v, 0.1) < 1e-12);
        assert!(smoothing_at::<BiotSavart, f64>(&[], &vt, &v, 0.02) > 1e-3);
    }

    /// A softening that is large against the leaves narrows the MAC or
    /// leaves no MAC; none leaves it as the tables have it.
    #[test]
    fn the_widest_theta_follows_the_floor() {
        let (t, s) = gravity(20_000);
        let h = 1.0 / 20_000f64.cbrt();
        assert_eq!(
            widest_theta::<Gravity, f64>(&[0.0], &t, &s, 64, 1e-8),
            Ok(1.0)
        );
        let narrowed = widest_theta::<Gravity, f64>(&[0.1 * h], &t, &s, 64, 5e-4);
        assert!(matches!(narrowed, Ok(x) if x < 0.7), "{narrowed:?}");
        let none = widest_theta::<Gravity, f64>(&[0.5 * h], &t, &s, 64, 1e-8);
        assert!(matches!(none, Err(f) if f > 1e-8), "{none:?}");
    }

    /// A Gaussian core's velocity is the singular one times
    /// `g(rho) = erf(rho / sqrt 2) - sqrt(2 / pi) rho exp(-rho^2 / 2)`:
    /// within 1e-4 of it from rho = 4.5943 (the closed form's root, by
    /// bisection in f64); the MAC then takes that radius and no theta
    /// limit. A softening falls only as d^-2: the plain MAC, as before.
    /// None: no radius.
    #[test]
    fn a_gaussian_core_sets_the_near_radius() {
        let n = 20_000;
        let pos = crate::distributions::uniform_cube(n, 3);
        let sigma = 0.004;
        let mut v = Particles::sources::<BiotSavart>(&pos).unwrap();
        v.set_vec3("alpha", &vec![[1.0, 0.5, -0.2]; n]).unwrap();
        v.set("sigma", &vec![sigma; n]).unwrap();
        let vt = Particles::targets::<BiotSavart>(&pos).unwrap();
        let r = smoothing_radius::<BiotSavart, f64>(&[], &vt, &v, 1.0, 1e-4);
        assert!((r / (4.594_291_4 * sigma) - 1.0).abs() < 2e-3, "{r}");
        let mac = widest_mac::<BiotSavart, f64>(&[], &vt, &v, 64, 1e-4);
        assert_eq!(mac.theta, Ok(1.0));
        assert!((mac.near / r - 1.0).abs() < 1e-9, "{} vs {r}", mac.near);
        let (t, s) = gravity(n);
        let h = 1.0 / (n as f64).cbrt();
        for eps in [0.0, 0.1 * h] {
            let mac = widest_mac::<Gravity, f64>(&[eps], &t, &s, 64, 5e-4);
            assert_eq!(mac.near, 0.0, "eps {eps}");
            assert_eq!(
                mac.theta,
                widest_theta::<Gravity, f64>(&[eps], &t, &s, 64, 5e-4)
            );
        }
        assert_eq!(
            smoothing_radius::<Gravity, f64>(&[0.0], &t, &s, 1.0, 1e-4),
            0.0
        );
    }
}
