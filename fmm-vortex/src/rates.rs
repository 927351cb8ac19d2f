//! The particles' velocity and vortex stretching, `dx/dt = u(x)` and
//! `d alpha/dt = (alpha . grad) u(x)`, by one evaluation of the fused
//! `VelocityStretching` kernel (Gaussian cores, `shared/KERNELS.md`)
//! through the front door, targets at the sources' points; or the
//! transpose scheme's `d alpha/dt = (alpha . grad^T) u(x)`
//! ([`StretchingScheme::Transpose`], the [`VelocityStretchingTranspose`]
//! kernel).

use std::time::Instant;

use fmm_core::kernels::VelocityStretching;
use fmm_core::{
    evaluate, kernel, Achieved, Backend, Domain, Evaluation, Kernel, Method, Particles, Problem,
    Real, Wall,
};

use crate::error::VortexError;
use crate::particles::VortexParticles;

kernel! {
    /// The velocity of Gaussian blobs and the transpose scheme's
    /// stretching, `s = (grad u)^T alpha_i = grad (u . alpha_i)` with the
    /// target's `alpha_i` held fixed (Winckelmans and Leonard 1993): for
    /// a pair, `k w + k' / r (d . w) d` with `w = alpha_i x alpha`, `k`
    /// and `k' / r` those of [`VelocityStretching`], `d` from the source to
    /// the target. A pair's two terms cancel when their cores are equal,
    /// so the sum of the strengths, the total vorticity, is kept by the
    /// sums (the classical scheme keeps it only as the particles' field
    /// stays divergence-free). No far field is declared: the tree
    /// methods take the pseudo-particles' or the Chebyshev nodes'.
    pub kernel VelocityStretchingTranspose {
        source alpha: vec3;
        source sigma;
        target alpha_i: vec3;
        output u: vec3;
        output s: vec3;
        require sigma > 0.0;
        strength alpha;
        let rho = r / sigma;
        let e = exp(-0.5 * rho * rho);
        let g = erf(rho * sqrt(0.5)) - sqrt(2.0 / PI) * rho * e;
        let inv_r = select(r2 > 0.0, 1.0 / r, 0.0);
        let inv_r2 = inv_r * inv_r;
        let g_r3 = g * inv_r2 * inv_r;
        let k = g_r3 / (4.0 * PI);
        let dk = (sqrt(2.0 / PI) * e / (sigma * sigma * sigma) - 3.0 * g_r3) * inv_r2 / (4.0 * PI);
        u += k * cross(alpha, d);
        let w = cross(alpha_i, alpha);
        s += k * w + dk * dot(d, w) * d;
    }
}

/// The vortex stretching's form: `(alpha . grad) u` (classical, the
/// papers'), or `(alpha . grad^T) u` (the transpose scheme, which keeps
/// the total vorticity when the particles' field is not divergence-free).
/// The two are equal for a divergence-free field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StretchingScheme {
    #[default]
    Classical,
    Transpose,
}

/// The precision the sums run in (the particles stay in f64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    F32,
    F64,
}

/// How the rates are summed: a backend, a method of the front door, a
/// precision and the domain. The default: a relative tolerance of 1e-4
/// (the papers' accuracy), on the GPU where there is one, in f32, in free
/// space.
#[derive(Clone, Debug)]
pub struct Solver {
    pub backend: Backend,
    pub method: Method,
    pub precision: Precision,
    /// Free space, or the half-space above a ground plane
    /// ([`ground_plane`]): the front door adds the particles' images.
    pub domain: Domain,
    /// The stretching's form (classical unless set).
    pub stretching: StretchingScheme,
}

impl Default for Solver {
    fn default() -> Self {
        Solver {
            backend: Backend::Auto,
            method: Method::tolerance(1e-4),
            precision: Precision::F32,
            domain: Domain::FreeSpace,
            stretching: StretchingScheme::Classical,
        }
    }
}

/// The half-space `z >= z0` above a ground plane: each particle's image
/// is its reflection in the plane with its strength an axial vector
/// (`(-alpha_x, -alpha_y, alpha_z)`) and its core kept, which makes the
/// normal velocity vanish on the plane (no flow through it; the flow
/// slips along it: the images make no boundary layer). Every kernel of
/// this crate names its strength `alpha`, so one domain serves the rates,
/// the vorticity and the field's integrals (which are then the
/// half-space's: the images' share of each sum is the particles' by
/// symmetry).
pub fn ground_plane(z0: f64) -> Domain {
    Domain::Wall(Wall::new(2, z0).with_odd(&["alpha"]))
}

/// The rates of every particle, and what their evaluation took.
#[derive(Clone, Debug)]
pub struct Rates {
    /// Velocity at each particle.
    pub u: Vec<[f64; 3]>,
    /// Vortex stretching, `d alpha/dt`.
    pub dalpha: Vec<[f64; 3]>,
    /// Wall-clock seconds of the evaluation.
    pub seconds: f64,
    /// What a tolerance achieved (its estimated error, the settings).
    pub achieved: Option<Achieved>,
    /// The device the front door ran on.
    pub device: String,
}

impl Rates {
    /// The rates of the particles of `range` (a copy).
    pub fn range(&self, range: std::ops::Range<usize>) -> Self {
        Rates {
            u: self.u[range.clone()].to_vec(),
            dalpha: self.dalpha[range].to_vec(),
            seconds: self.seconds,
            achieved: self.achieved.clone(),
            device: self.device.clone(),
        }
    }
}

impl Solver {
    /// The f64 direct sum on `backend`, in free space: the reference the
    /// fast sums are checked against.
    pub fn direct_f64(backend: Backend) -> Self {
        Solver {
            backend,
            method: Method::direct(),
            precision: Precision::F64,
            domain: Domain::FreeSpace,
            stretching: StretchingScheme::Classical,
        }
    }

    /// f32 sums at the relative tolerance `tol` on `backend`, in free
    /// space (the default's method at another tolerance).
    pub fn f32_at(backend: Backend, tol: f64) -> Self {
        Solver {
            backend,
            method: Method::tolerance(tol),
            precision: Precision::F32,
            domain: Domain::FreeSpace,
            stretching: StretchingScheme::Classical,
        }
    }

    /// The same solver in `domain`.
    pub fn in_domain(self, domain: Domain) -> Self {
        Solver { domain, ..self }
    }

    /// The same solver with the stretching's form `stretching`.
    pub fn with_stretching(self, stretching: StretchingScheme) -> Self {
        Solver { stretching, ..self }
    }

    /// The front door's problem: no parameters, this solver's domain.
    pub(crate) fn problem(&self) -> Problem<'static> {
        Problem::new(&[]).in_domain(self.domain)
    }

    /// Kernel `K` (of no parameters) from `sources` at `targets` by this
    /// solver's backend, method and domain.
    pub(crate) fn evaluate<K: Kernel, R: Real>(
        &self,
        targets: &Particles<R>,
        sources: &Particles<R>,
    ) -> Result<Evaluation<R>, VortexError> {
        Ok(evaluate::<K, R>(
            self.backend,
            &self.method,
            self.problem(),
            targets,
            sources,
        )?)
    }

    /// The rates of `p`.
    pub fn rates(&self, p: &VortexParticles) -> Result<Rates, VortexError> {
        Ok(self.rates_with(p, &[])?.0)
    }

    /// The rates of `p` and the velocity the particles induce at the
    /// points `at` (passive particles: targets that are not sources), in
    /// one evaluation.
    pub fn rates_with(
        &self,
        p: &VortexParticles,
        at: &[[f64; 3]],
    ) -> Result<(Rates, Vec<[f64; 3]>), VortexError> {
        match self.precision {
            Precision::F32 => self.rates_in::<f32>(p, at),
            Precision::F64 => self.rates_in::<f64>(p, at),
        }
    }

    fn rates_in<R: Real>(
        &self,
        p: &VortexParticles,
        at: &[[f64; 3]],
    ) -> Result<(Rates, Vec<[f64; 3]>), VortexError> {
        let t = Instant::now();
        let n = p.len();
        let strengths = self.strengths(p);
        let e = match self.stretching {
            StretchingScheme::Classical => {
                let (targets, sources) =
                    front_door_sets::<VelocityStretching, R>(p, &strengths, at)?;
                self.evaluate::<VelocityStretching, R>(&targets, &sources)?
            }
            StretchingScheme::Transpose => {
                let (targets, sources) =
                    front_door_sets::<VelocityStretchingTranspose, R>(p, &strengths, at)?;
                self.evaluate::<VelocityStretchingTranspose, R>(&targets, &sources)?
            }
        };
        let back = |v: [&[R]; 3], range: std::ops::Range<usize>| -> Vec<[f64; 3]> {
            range
                .map(|i| [v[0][i].to_f64(), v[1][i].to_f64(), v[2][i].to_f64()])
                .collect()
        };
        let u = e.outputs.vec3("u")?;
        let rates = Rates {
            u: back(u, 0..n),
            dalpha: back(e.outputs.vec3("s")?, 0..n),
            seconds: t.elapsed().as_secs_f64(),
            achieved: e.achieved,
            device: e.device,
        };
        Ok((rates, back(u, n..n + at.len())))
    }
}

/// The velocity the particles induce at points that are not sources,
/// and what its evaluation took.
#[derive(Clone, Debug)]
pub struct Velocities {
    pub u: Vec<[f64; 3]>,
    pub seconds: f64,
    pub achieved: Option<Achieved>,
    pub device: String,
}

impl Solver {
    /// The velocity the particles `p` induce at the points `at` (targets
    /// that are not sources: nothing is evaluated at `p`).
    pub fn velocity_at(
        &self,
        p: &VortexParticles,
        at: &[[f64; 3]],
    ) -> Result<Velocities, VortexError> {
        match self.precision {
            Precision::F32 => self.velocity_at_in::<f32>(p, at),
            Precision::F64 => self.velocity_at_in::<f64>(p, at),
        }
    }

    fn velocity_at_in<R: Real>(
        &self,
        p: &VortexParticles,
        at: &[[f64; 3]],
    ) -> Result<Velocities, VortexError> {
        let t = Instant::now();
        let points: Vec<[R; 3]> = at.iter().map(|x| x.map(|c| R::c(c))).collect();
        // The targets carry no strength: the stretching there is zero.
        let targets = Particles::targets::<VelocityStretching>(&points)?;
        let sources = sources_of::<VelocityStretching, R>(p, &self.strengths(p))?;
        let e = self.evaluate::<VelocityStretching, R>(&targets, &sources)?;
        let u = e.outputs.vec3("u")?;
        Ok(Velocities {
            u: (0..at.len())
                .map(|i| [u[0][i].to_f64(), u[1][i].to_f64(), u[2][i].to_f64()])
                .collect(),
            seconds: t.elapsed().as_secs_f64(),
            achieved: e.achieved,
            device: e.device,
        })
    }
}

/// The front door's targets (at the particles, carrying `alpha_i`, then
/// at the points `at`, carrying none) and sources (`alpha`, `sigma`) of
/// the particles `p`, in precision `R`, for kernel `K`
/// ([`VelocityStretching`] or [`VelocityStretchingTranspose`]).
pub(crate) fn front_door_sets<K: Kernel, R: Real>(
    p: &VortexParticles,
    strengths: &[[f64; 3]],
    at: &[[f64; 3]],
) -> Result<(Particles<R>, Particles<R>), VortexError> {
    let to = |v: &[[f64; 3]]| -> Vec<[R; 3]> { v.iter().map(|a| a.map(|c| R::c(c))).collect() };
    let x = to(&p.x);
    let alpha = to(strengths);
    let sources = sources_of::<K, R>(p, strengths)?;
    let (tx, talpha) = if at.is_empty() {
        (x, alpha)
    } else {
        let mut tx = x;
        tx.extend(to(at));
        let mut talpha = alpha;
        talpha.resize(tx.len(), [R::zero(); 3]);
        (tx, talpha)
    };
    let mut targets = Particles::targets::<K>(&tx)?;
    targets.set_vec3("alpha_i", &talpha)?;
    Ok((targets, sources))
}

/// The front door's sources (`alpha`, `sigma`) of the particles `p` for
/// kernel `K`, in precision `R`, their strengths `alpha` (from
/// [`Solver::strengths`]).
pub(crate) fn sources_of<K: Kernel, R: Real>(
    p: &VortexParticles,
    alpha: &[[f64; 3]],
) -> Result<Particles<R>, VortexError> {
    let to = |v: &[[f64; 3]]| -> Vec<[R; 3]> { v.iter().map(|a| a.map(|c| R::c(c))).collect() };
    let sigma: Vec<R> = p.sigma.iter().map(|&s| R::c(s)).collect();
    let mut sources = Particles::sources::<K>(&to(&p.x))?;
    sources
        .set_vec3("alpha", &to(alpha))?
        .set("sigma", &sigma)?;
    Ok(sources)
}

impl Solver {
    /// The strengths the sums take: the particles', less their mean in a
    /// box periodic along all three axes. A periodic velocity's curl has
    /// no mean, and the periodic sums refuse a net strength; the
    /// stretching's truncation and rounding let the strengths' sum drift
    /// from zero (by 1e-6 of them within a step of decaying turbulence
    /// with cores of 0.6 spacings), which this takes out as a uniform
    /// background would.
    pub(crate) fn strengths(&self, p: &VortexParticles) -> Vec<[f64; 3]> {
        if !self.takes_mean_out() || p.is_empty() {
            return p.alpha.clone();
        }
        let sum = p
            .alpha
            .iter()
            .fold([0.0; 3], |m, a| [m[0] + a[0], m[1] + a[1], m[2] + a[2]]);
        let mean = sum.map(|s| s / p.len() as f64);
        p.alpha
            .iter()
            .map(|a| [a[0] - mean[0], a[1] - mean[1], a[2] - mean[2]])
            .collect()
    }

    /// Whether the sums take the strengths less their mean: in a box
    /// periodic along all three axes ([`Solver::strengths`]; the resident
    /// particles' `vortex_mean` on the device).
    pub(crate) fn takes_mean_out(&self) -> bool {
        matches!(self.domain, Domain::Periodic(b) if b.periodic_axes() == 3)
    }
}
