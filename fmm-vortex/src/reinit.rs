//! Reinitialisation: the particles' vorticity put back onto a fresh
//! lattice (Barba, Leonard and Allen 2004/2005; yokota2009 section 2).
//!
//! As a run goes on, the particles drift apart or bunch, and with core
//! spreading their cores outgrow their spacing: the vorticity they carry
//! stops being resolved. Reinitialisation samples the vorticity field the
//! particles make, `w(x) = sum_j alpha_j zeta_sigma_j(x - x_j)` with the
//! Gaussian blob `zeta` ([`GaussianVorticity`], a kernel of the DSL), at
//! the points of a lattice of spacing `h` (aligned to the origin, so each
//! reinitialisation lands on the same lattice), and finds new particles
//! there, of cores `overlap h`, whose field takes those values at every
//! lattice point: radial basis function interpolation, the symmetric
//! positive definite system `sum_k beta_k zeta(y_i - y_k) = w(y_i)`
//! solved by conjugate gradients, each product one evaluation through the
//! front door (its diagonal, the blob at zero separation, added here: a
//! kernel of the DSL adds nothing for a source on its target). The start
//! is the naive remeshing `beta = w h^3`. Lattice points where the
//! vorticity is below `cull` of its largest are dropped.

use fmm_core::{kernel, Particles};

use crate::error::VortexError;
use crate::particles::{coincident, VortexParticles};
use crate::rates::Solver;

kernel! {
    /// The vorticity of Gaussian blobs: `w(x) = sum_j alpha_j
    /// exp(-|x - x_j|^2 / (2 sigma_j^2)) / ((2 pi)^(3/2) sigma_j^3)`, the
    /// field whose curl-free part the fused `VelocityStretching` kernel's
    /// velocity induces (`shared/KERNELS.md`); zero for a source on its
    /// target (the blob's value there is added by whoever needs it).
    /// No far field is declared: the blob decays faster than any
    /// expansion is needed for.
    pub kernel GaussianVorticity {
        source alpha: vec3;
        source sigma;
        output w: vec3;
        require sigma > 0.0;
        strength alpha;
        let s2 = sigma * sigma;
        let g = select(r2 > 0.0, exp(-0.5 * r2 / s2) / (s2 * sigma * 2.0 * PI * sqrt(2.0 * PI)), 0.0);
        w += g * alpha;
    }
}

/// The blob's value at zero separation, `1 / ((2 pi)^(3/2) sigma^3)`.
pub fn blob_at_centre(sigma: f64) -> f64 {
    1.0 / ((2.0 * std::f64::consts::PI).powf(1.5) * sigma.powi(3))
}

/// The lattice a reinitialisation puts the particles on, and its solve.
#[derive(Clone, Copy, Debug)]
pub struct Lattice {
    /// The spacing `h`.
    pub spacing: f64,
    /// The new cores over the spacing (1: cores of one spacing).
    pub overlap: f64,
    /// Lattice points whose vorticity is below this fraction of the
    /// largest are left empty.
    pub cull: f64,
    /// The relative residual the interpolation is solved to.
    pub tolerance: f64,
    /// The most conjugate-gradient iterations before the solve says it
    /// cannot meet `tolerance`.
    pub max_iterations: usize,
}

impl Lattice {
    /// A lattice of spacing `h`, cores of one spacing, points below 1e-6
    /// of the largest vorticity dropped, solved to a residual of 1e-4
    /// (the sums' usual tolerance).
    ///
    /// Gaussians of one spacing make an ill-conditioned system (the
    /// blob's transform at the lattice's Nyquist wavenumber is
    /// `exp(-pi^2 / 2)` an axis): past a residual near the lattice's own
    /// interpolation error the solve costs iterations and buys little
    /// between the points (docs/VORTEX.md: a ring on a lattice of its
    /// cores' spacing takes 10 to 23 iterations to 1e-4, 134 to 1e-6).
    pub fn new(spacing: f64) -> Self {
        Lattice {
            spacing,
            overlap: 1.0,
            cull: 1e-6,
            tolerance: 1e-4,
            max_iterations: 300,
        }
    }
}

/// What a reinitialisation did.
#[derive(Clone, Debug)]
pub struct Reinitialised {
    pub particles: VortexParticles,
    /// Conjugate-gradient iterations (evaluations of the interpolation).
    pub iterations: usize,
    /// The relative residual reached, `|w - A beta| / |w|` over the
    /// lattice.
    pub residual: f64,
    /// The relative residual of the naive remeshing (`beta = w h^3`), for
    /// comparison.
    pub naive_residual: f64,
    /// Lattice points sampled, and kept.
    pub sampled: usize,
}

impl Solver {
    /// The vorticity of the particles `p` at the points `at`, a particle
    /// on a point included, by this solver's backend and method in f64
    /// whatever its precision (the interpolation's conjugate gradients
    /// stall at the products' rounding; and one precision instantiates
    /// every method for this kernel once, not twice).
    pub fn vorticity(
        &self,
        p: &VortexParticles,
        at: &[[f64; 3]],
    ) -> Result<Vec<[f64; 3]>, VortexError> {
        let mut sources = Particles::sources::<GaussianVorticity>(&p.x)?;
        sources
            .set_vec3("alpha", &p.alpha)?
            .set("sigma", &p.sigma)?;
        let targets = Particles::targets::<GaussianVorticity>(at)?;
        let e = self.evaluate::<GaussianVorticity, f64>(&targets, &sources)?;
        let [x, y, z] = e.outputs.vec3("w")?;
        let mut w: Vec<[f64; 3]> = (0..at.len()).map(|i| [x[i], y[i], z[i]]).collect();
        // The blobs of the sources that sit exactly on a point (the
        // kernel, as every kernel of the DSL, adds nothing there).
        for (j, i) in coincident(&p.x, at) {
            let g = blob_at_centre(p.sigma[j]);
            for (wc, ac) in w[i].iter_mut().zip(p.alpha[j]) {
                *wc += g * ac;
            }
        }
        Ok(w)
    }
}

/// The particles `p` put back on `lattice`, their vorticity kept (at the
/// lattice points, to the lattice's tolerance), the sums by `solver`.
pub fn reinitialise(
    p: &VortexParticles,
    lattice: &Lattice,
    solver: &Solver,
) -> Result<Reinitialised, VortexError> {
    p.check()?;
    let h = lattice.spacing;
    let bad = |what, value, why| Err(VortexError::BadSetting { what, value, why });
    if !(h.is_finite() && h > 0.0) {
        return bad("the lattice spacing", h, "must be finite and positive");
    }
    if !(lattice.overlap.is_finite() && lattice.overlap > 0.0) {
        return bad(
            "the lattice's overlap",
            lattice.overlap,
            "must be finite and positive",
        );
    }
    if !(lattice.tolerance > 0.0 && lattice.tolerance < 1.0) {
        return bad(
            "the interpolation's tolerance",
            lattice.tolerance,
            "must be in (0, 1)",
        );
    }
    if !(0.0..1.0).contains(&lattice.cull) {
        return bad("the lattice's cull", lattice.cull, "must be in [0, 1)");
    }
    let smallest = p.sigma.iter().copied().fold(f64::INFINITY, f64::min);
    if h > smallest {
        return bad(
            "the lattice spacing",
            h,
            "is coarser than the smallest core: the lattice cannot resolve the vorticity (use a spacing of at most the cores)",
        );
    }
    if p.is_empty() {
        return Ok(Reinitialised {
            particles: p.clone(),
            iterations: 0,
            residual: 0.0,
            naive_residual: 0.0,
            sampled: 0,
        });
    }
    // The lattice over the particles' support (three cores past them).
    let reach = 3.0 * p.sigma.iter().copied().fold(0.0, f64::max);
    let mut lo = [i64::MAX; 3];
    let mut hi = [i64::MIN; 3];
    for x in &p.x {
        for c in 0..3 {
            lo[c] = lo[c].min(((x[c] - reach) / h).floor() as i64);
            hi[c] = hi[c].max(((x[c] + reach) / h).ceil() as i64);
        }
    }
    let count: u128 = (0..3).map(|c| (hi[c] - lo[c] + 1) as u128).product();
    if count > 200_000_000 {
        return Err(VortexError::BadSetting {
            what: "the lattice spacing",
            value: h,
            why: "gives more than 2 x 10^8 lattice points over the particles' bounding box",
        });
    }
    let mut points = Vec::with_capacity(count as usize);
    for i in lo[0]..=hi[0] {
        for j in lo[1]..=hi[1] {
            for k in lo[2]..=hi[2] {
                points.push([i as f64 * h, j as f64 * h, k as f64 * h]);
            }
        }
    }
    let sampled = points.len();
    let w_all = solver.vorticity(p, &points)?;
    let biggest = w_all.iter().map(|w| norm(*w)).fold(0.0, f64::max);
    let keep: Vec<usize> = (0..sampled)
        .filter(|&i| norm(w_all[i]) > lattice.cull * biggest)
        .collect();
    let y: Vec<[f64; 3]> = keep.iter().map(|&i| points[i]).collect();
    let b: Vec<f64> = keep.iter().flat_map(|&i| w_all[i]).collect();
    let sigma = lattice.overlap * h;
    let volume = h * h * h;
    // A beta: the field of blobs `beta` at the lattice points.
    let apply = |beta: &[f64]| -> Result<Vec<f64>, VortexError> {
        let q = VortexParticles {
            x: y.clone(),
            alpha: beta.chunks(3).map(|c| [c[0], c[1], c[2]]).collect(),
            sigma: vec![sigma; y.len()],
            volume: vec![volume; y.len()],
        };
        Ok(solver.vorticity(&q, &y)?.into_iter().flatten().collect())
    };
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let b_norm = dot(&b, &b).sqrt();
    // Conjugate gradients from the naive remeshing.
    let mut beta: Vec<f64> = b.iter().map(|w| w * volume).collect();
    let ab = apply(&beta)?;
    let mut r: Vec<f64> = b.iter().zip(&ab).map(|(b, a)| b - a).collect();
    let naive_residual = dot(&r, &r).sqrt() / b_norm;
    let mut d = r.clone();
    let mut rr = dot(&r, &r);
    let mut iterations = 0;
    while rr.sqrt() > lattice.tolerance * b_norm {
        if iterations == lattice.max_iterations {
            return Err(VortexError::NotConverged {
                what: "the reinitialisation's interpolation",
                iterations,
                residual: rr.sqrt() / b_norm,
                tolerance: lattice.tolerance,
                hint: "the sums may be too coarse for the tolerance (ask the solver for a smaller error), or the overlap too large (the system is worse conditioned as it grows)",
            });
        }
        let ad = apply(&d)?;
        let step = rr / dot(&d, &ad);
        for i in 0..beta.len() {
            beta[i] += step * d[i];
            r[i] -= step * ad[i];
        }
        let next = dot(&r, &r);
        for i in 0..d.len() {
            d[i] = r[i] + next / rr * d[i];
        }
        rr = next;
        iterations += 1;
    }
    let n = y.len();
    Ok(Reinitialised {
        particles: VortexParticles::new(
            y,
            beta.chunks(3).map(|c| [c[0], c[1], c[2]]).collect(),
            vec![sigma; n],
            vec![volume; n],
        )?,
        iterations,
        residual: rr.sqrt() / b_norm,
        naive_residual,
        sampled,
    })
}

fn norm(v: [f64; 3]) -> f64 {
    crate::diagnostics::norm(v)
}
