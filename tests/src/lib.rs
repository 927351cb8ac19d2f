//! Shared helpers of the integration tests in `tests/tests/`: each method
//! through the front door on the CPU or the GPU, the independent naive f64
//! sums of the built-in kernels ([`naive`]), and the particle sets every
//! test draws from ([`sets`]), so that no test file keeps a copy of its
//! own.

/// Every output slot of `o`, one after the other, in f64.
pub fn flat_f64<R: fmm_core::Real>(o: &fmm_core::Outputs<R>) -> Vec<f64> {
    o.slots().concat().iter().map(|&x| x.to_f64()).collect()
}

/// Relative L2 error of `got` against `want`: `|got - want| / |want|`.
pub fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

use fmm_core::{evaluate, Backend, Error, FmmOptions, Kernel, Method, Outputs, Particles, Real};
use fmm_core::{Stats, TreeOptions};

/// `method` on `backend` through the front door: the outputs and what ran.
pub fn run<K: Kernel, R: Real>(
    backend: Backend,
    method: Method,
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<(Outputs<R>, Stats), Error> {
    let ev = evaluate::<K, R>(backend, &method, params, targets, sources)?;
    Ok((ev.outputs, ev.stats))
}

/// The direct sum on the CPU: the reference the tests compare with.
pub fn direct_cpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Outputs<R>, Error> {
    Ok(run::<K, R>(Backend::Cpu, Method::direct(), params, targets, sources)?.0)
}

/// The direct sum on the GPU (`Backend::Cuda`: the process's GPU).
pub fn direct_gpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &fmm_core::DirectOptions,
) -> Result<Outputs<R>, Error> {
    let method = Method::Direct(opts.clone());
    Ok(run::<K, R>(Backend::Cuda, method, params, targets, sources)?.0)
}

/// The treecode on the CPU.
pub fn treecode_cpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &TreeOptions,
) -> Result<(Outputs<R>, Stats), Error> {
    run::<K, R>(
        Backend::Cpu,
        Method::Treecode(*opts),
        params,
        targets,
        sources,
    )
}

/// The treecode on the GPU.
pub fn treecode_gpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &TreeOptions,
) -> Result<(Outputs<R>, Stats), Error> {
    run::<K, R>(
        Backend::Cuda,
        Method::Treecode(*opts),
        params,
        targets,
        sources,
    )
}

/// The FMM on the CPU.
pub fn fmm_cpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &FmmOptions,
) -> Result<(Outputs<R>, Stats), Error> {
    run::<K, R>(
        Backend::Cpu,
        Method::Fmm(opts.clone()),
        params,
        targets,
        sources,
    )
}

/// The FMM on the GPU.
pub fn fmm_gpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &FmmOptions,
) -> Result<(Outputs<R>, Stats), Error> {
    run::<K, R>(
        Backend::Cuda,
        Method::Fmm(opts.clone()),
        params,
        targets,
        sources,
    )
}

/// The user kernel the tests share, declared as a user would.
pub mod user {
    fmm_core::kernel! {
        /// Screened Coulomb (Yukawa), the kernel of `examples/custom_kernel.rs`:
        /// a strength that adds up, so the treecode takes it, and no far
        /// field, so the FMM refuses it.
        pub kernel Yukawa {
            param kappa;
            source q;
            output phi;
            output e: vec3;
            strength q;
            let inv_r = select(r2 > 0.0, rsqrt(r2), 0.0);
            let screened = q * exp(-kappa * r) * inv_r;
            phi += screened;
            e += screened * (1.0 + kappa * r) * inv_r * inv_r * d;
        }
    }
}

/// FMM options of order `p`, MAC `theta` and leaves of at most `ncrit`.
pub fn fmm_options(p: usize, theta: f64, ncrit: usize) -> FmmOptions {
    FmmOptions {
        ncrit,
        ..FmmOptions::fixed(p, theta)
    }
}

/// Independent f64 references of the built-in kernels, written from the
/// formulas of `shared/KERNELS.md` rather than from the `kernel!`
/// declarations, by a different route where one exists (see
/// `tests/tests/reference.rs`, which checks them against mpmath and by
/// finite differences): gravity through `powf`, Coulomb and Hu's law with
/// `r` from `hypot`, the Gaussian core without `erf` (series of positive
/// terms, and an `erfc` continued fraction past `rho = 6`), every sum
/// compensated. `reference.rs` and the conformance matrix compare the
/// direct sums with them.
pub mod naive {
    use std::f64::consts::PI;

    pub type V3 = [f64; 3];

    pub fn add(a: V3, b: V3) -> V3 {
        [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
    }

    pub fn sub(a: V3, b: V3) -> V3 {
        [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
    }

    pub fn mul(s: f64, a: V3) -> V3 {
        [s * a[0], s * a[1], s * a[2]]
    }

    pub fn dot(a: V3, b: V3) -> f64 {
        a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
    }

    pub fn cross(a: V3, b: V3) -> V3 {
        [
            a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0],
        ]
    }

    pub fn norm(a: V3) -> f64 {
        a[0].hypot(a[1]).hypot(a[2])
    }

    pub fn flat(v: &[V3]) -> Vec<f64> {
        v.iter().flatten().copied().collect()
    }

    pub fn unflat(v: &[f64]) -> Vec<V3> {
        v.chunks(3).map(|c| [c[0], c[1], c[2]]).collect()
    }

    /// `sqrt(2 / pi)`.
    pub fn sqrt_2_pi() -> f64 {
        (2.0 / PI).sqrt()
    }

    /// Compensated (Neumaier) sum.
    #[derive(Clone, Copy, Default)]
    pub struct Acc {
        s: f64,
        c: f64,
    }

    impl Acc {
        pub fn add(&mut self, x: f64) {
            let t = self.s + x;
            if self.s.abs() >= x.abs() {
                self.c += (self.s - t) + x;
            } else {
                self.c += (x - t) + self.s;
            }
            self.s = t;
        }

        pub fn get(self) -> f64 {
            self.s + self.c
        }
    }

    #[derive(Clone, Copy, Default)]
    pub struct Acc3(pub [Acc; 3]);

    impl Acc3 {
        pub fn add(&mut self, v: V3) {
            for (a, x) in self.0.iter_mut().zip(v) {
                a.add(x);
            }
        }

        pub fn get(self) -> V3 {
            self.0.map(Acc::get)
        }
    }

    // ---------------------------------------------------------------------------
    // erf and the Gaussian core, without libm.

    /// `erf(x)` for `0 <= x < 3` from the series of positive terms
    /// `erf x = 2/sqrt(pi) exp(-x^2) sum_{n>=0} 2^n x^(2n+1) / (2n+1)!!`.
    pub fn erf_series(x: f64) -> f64 {
        let x2 = x * x;
        let mut term = x;
        let mut sum = Acc::default();
        sum.add(term);
        let mut n = 0.0;
        while term > 1e-18 * sum.get() {
            n += 1.0;
            term *= 2.0 * x2 / (2.0 * n + 1.0);
            sum.add(term);
        }
        2.0 / PI.sqrt() * (-x2).exp() * sum.get()
    }

    /// `erfc(x)` for `x >= 3` from its continued fraction
    /// `erfc x = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`.
    pub fn erfc_cf(x: f64) -> f64 {
        let mut t = x;
        for k in (1..=120).rev() {
            t = x + 0.5 * k as f64 / t;
        }
        (-x * x).exp() / (PI.sqrt() * t)
    }

    pub fn erf_ref(x: f64) -> f64 {
        if x < 0.0 {
            -erf_ref(-x)
        } else if x < 3.0 {
            erf_series(x)
        } else {
            1.0 - erfc_cf(x)
        }
    }

    /// `h(rho) = g(rho) / rho^3` and `h'(rho) / rho`, with
    /// `g(rho) = erf(rho / sqrt 2) - sqrt(2/pi) rho exp(-rho^2 / 2)`.
    ///
    /// Below `rho = 6` from `g = sqrt(2/pi) exp(-rho^2/2) sum_{n>=1}
    /// rho^(2n+1) / (2n+1)!!` (the erf series above, with its first term
    /// cancelled analytically), so with `y = rho^2`:
    /// `h = sqrt(2/pi) exp(-y/2) sum_m y^m / (2m+3)!!` and
    /// `h'/rho = -3 sqrt(2/pi) exp(-y/2) sum_m y^m / (2m+5)!!`.
    /// Above, from the closed form with `erfc`, where nothing cancels.
    pub fn core(rho: f64) -> (f64, f64) {
        let y = rho * rho;
        if rho < 6.0 {
            let (mut a, mut b) = (1.0 / 3.0, 1.0 / 15.0);
            let (mut t, mut u) = (Acc::default(), Acc::default());
            let mut m = 0.0;
            loop {
                t.add(a);
                u.add(b);
                if a <= 1e-18 * t.get() && b <= 1e-18 * u.get() {
                    break;
                }
                m += 1.0;
                a *= y / (2.0 * m + 3.0);
                b *= y / (2.0 * m + 5.0);
            }
            let pre = sqrt_2_pi() * (-0.5 * y).exp();
            (pre * t.get(), -3.0 * pre * u.get())
        } else {
            let e = (-0.5 * y).exp();
            let g = 1.0 - erfc_cf(rho / 2f64.sqrt()) - sqrt_2_pi() * rho * e;
            let dg = sqrt_2_pi() * y * e;
            (g / (y * rho), dg / (y * y) - 3.0 * g / (y * y * rho))
        }
    }

    /// `K(r) = g(r / sigma) / (4 pi r^3)` and `K'(r) / r`.
    pub fn core_k(r: f64, sigma: f64) -> (f64, f64) {
        let (h, dh) = core(r / sigma);
        let s3 = sigma * sigma * sigma;
        (h / (4.0 * PI * s3), dh / (4.0 * PI * s3 * sigma * sigma))
    }

    // ---------------------------------------------------------------------------
    // The reference sums. A pair at r = 0 adds nothing (the convention of
    // KERNELS.md), whether it is the self pair or two particles on one spot.

    #[derive(Clone, Debug)]
    pub struct Case {
        pub tpos: Vec<V3>,
        pub spos: Vec<V3>,
        /// Gravity mass.
        pub m: Vec<f64>,
        /// Coulomb charge.
        pub q: Vec<f64>,
        /// Vortex strength (BiotSavart, Stretching, VelocityStretching).
        pub alpha: Vec<V3>,
        pub sigma: Vec<f64>,
        /// Vector strength of HuBiotSavart, and the force `f` of the
        /// Stokeslets.
        pub qv: Vec<V3>,
        /// Target vortex strength of stretching.
        pub alpha_i: Vec<V3>,
    }

    pub type Named = Vec<(&'static str, Vec<f64>)>;

    pub fn ref_gravity(eps: f64, c: &Case) -> Named {
        let (mut phi, mut acc) = (vec![], vec![]);
        for &xi in &c.tpos {
            let (mut p, mut a) = (Acc::default(), Acc3::default());
            for (&xj, &mj) in c.spos.iter().zip(&c.m) {
                let dx = sub(xj, xi);
                let r2 = dot(dx, dx);
                if r2 == 0.0 {
                    continue;
                }
                let s = r2 + eps * eps;
                p.add(-mj / s.sqrt());
                a.add(mul(mj * s.powf(-1.5), dx));
            }
            phi.push(p.get());
            acc.push(a.get());
        }
        vec![("phi", phi), ("acc", flat(&acc))]
    }

    pub fn ref_coulomb(c: &Case) -> Named {
        let (mut phi, mut e) = (vec![], vec![]);
        for &xi in &c.tpos {
            let (mut p, mut f) = (Acc::default(), Acc3::default());
            for (&xj, &qj) in c.spos.iter().zip(&c.q) {
                let d = sub(xi, xj);
                let r = norm(d);
                if r == 0.0 {
                    continue;
                }
                p.add(qj / r);
                f.add(mul(qj / r.powi(3), d));
            }
            phi.push(p.get());
            e.push(f.get());
        }
        vec![("phi", phi), ("e", flat(&e))]
    }

    /// Velocity and stretching of the Gaussian-core Biot-Savart law.
    pub fn ref_vortex(c: &Case) -> (Vec<V3>, Vec<V3>) {
        let (mut u, mut s) = (vec![], vec![]);
        for (&xi, &ai) in c.tpos.iter().zip(&c.alpha_i) {
            let (mut ui, mut si) = (Acc3::default(), Acc3::default());
            for ((&xj, &aj), &sj) in c.spos.iter().zip(&c.alpha).zip(&c.sigma) {
                let d = sub(xi, xj);
                let r = norm(d);
                if r == 0.0 {
                    continue;
                }
                let (k, dk) = core_k(r, sj);
                let ajd = cross(aj, d);
                ui.add(mul(k, ajd));
                si.add(mul(k, cross(aj, ai)));
                si.add(mul(dk * dot(ai, d), ajd));
            }
            u.push(ui.get());
            s.push(si.get());
        }
        (u, s)
    }

    pub fn ref_biot_savart(c: &Case) -> Named {
        vec![("u", flat(&ref_vortex(c).0))]
    }

    pub fn ref_stretching(c: &Case) -> Named {
        vec![("s", flat(&ref_vortex(c).1))]
    }

    pub fn ref_velocity_stretching(c: &Case) -> Named {
        let (u, s) = ref_vortex(c);
        vec![("u", flat(&u)), ("s", flat(&s))]
    }

    pub fn ref_hu(eps: f64, c: &Case) -> Named {
        let mut v = vec![];
        for &y in &c.tpos {
            let mut vi = Acc3::default();
            for (&xj, &qj) in c.spos.iter().zip(&c.qv) {
                let d = sub(y, xj);
                let r = norm(d);
                if r == 0.0 {
                    continue;
                }
                let w = if r <= eps {
                    1.0 / (eps * eps * r)
                } else {
                    1.0 / (r * r * r)
                };
                vi.add(mul(w, cross(qj, d)));
            }
            v.push(vi.get());
        }
        vec![("v", flat(&v))]
    }

    /// The regularised Stokeslet (Cortez, Fauci & Medovikov 2005) of blob
    /// size `eps` and viscosity `mu` as the explicit 3x3 tensor
    /// `S_ab = delta_ab (r^2 + 2 eps^2) / s^3 + d_a d_b / s^3`,
    /// `s = sqrt(r^2 + eps^2)`, applied to `f` row by row, over `8 pi mu`;
    /// `eps = 0` is the singular Stokeslet (Oseen tensor). `r` from
    /// `hypot`, `s^3` through `powf`, the sums compensated.
    pub fn ref_stokeslet(eps: f64, mu: f64, c: &Case) -> Named {
        let mut u = vec![];
        for &xi in &c.tpos {
            let mut ui = Acc3::default();
            for (&xj, &fj) in c.spos.iter().zip(&c.qv) {
                let d = sub(xi, xj);
                let r = norm(d);
                if r == 0.0 {
                    continue;
                }
                let s3 = (r * r + eps * eps).powf(1.5);
                let mut row = [0.0; 3];
                for (a, ra) in row.iter_mut().enumerate() {
                    let mut acc = Acc::default();
                    for (b, fb) in fj.iter().enumerate() {
                        let delta = if a == b { r * r + 2.0 * eps * eps } else { 0.0 };
                        acc.add((delta + d[a] * d[b]) / s3 * fb);
                    }
                    *ra = acc.get() / (8.0 * PI * mu);
                }
                ui.add(row);
            }
            u.push(ui.get());
        }
        vec![("u", flat(&u))]
    }

    /// The singular Stokeslet of viscosity 1 (FMM3D 2.1's stfmm3d):
    /// [`ref_stokeslet`] at `eps = 0`, `mu = 1`.
    pub fn ref_stokeslet_singular(c: &Case) -> Named {
        ref_stokeslet(0.0, 1.0, c)
    }

    /// Screened Coulomb (Yukawa) with screening `kappa`, the user kernel of
    /// `examples/custom_kernel.rs` and the built-in `kernels::Yukawa`: `phi_i = sum_j q_j exp(-kappa r) / r`,
    /// `e_i = -grad phi_i = sum_j q_j exp(-kappa r) (1 + kappa r) d / r^3`,
    /// with `r` from `hypot` and the sums compensated.
    pub fn ref_yukawa(kappa: f64, c: &Case) -> Named {
        let (mut phi, mut e) = (vec![], vec![]);
        for &xi in &c.tpos {
            let (mut p, mut f) = (Acc::default(), Acc3::default());
            for (&xj, &qj) in c.spos.iter().zip(&c.q) {
                let d = sub(xi, xj);
                let r = norm(d);
                if r == 0.0 {
                    continue;
                }
                let screened = qj * (-kappa * r).exp() / r;
                p.add(screened);
                f.add(mul(screened * (1.0 + kappa * r) / (r * r), d));
            }
            phi.push(p.get());
            e.push(f.get());
        }
        vec![("phi", phi), ("e", flat(&e))]
    }
}

/// Particle sets for the tests, every kernel from one description: where
/// the particles are ([`Dist`]), the strengths' signs ([`Strengths`]), the
/// core radius, and whether the targets are the sources. A set is drawn
/// as a [`Case`] (every field of every built-in kernel, values rounded to
/// f32 so that the f32 and f64 evaluations and the f64 reference all see
/// the same problem) and made into the particles of a kernel by
/// [`build`]. Seeded, so every run sees the same particles.
pub mod sets {
    use super::naive::{Case, V3};
    use fmm_core::fmm_codegen::ast::Shape;
    use fmm_core::{Kernel, Particles, Real};

    /// Where the particles are.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Dist {
        /// Uniform in the unit cube.
        Cube,
        /// A Plummer sphere in Henon units (`fmm_core::distributions::plummer`):
        /// a dense core and a sparse halo, so the trees are deep and uneven.
        Plummer,
    }

    /// The signs of the strengths.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Strengths {
        /// Of one sign: masses and charges in `[0.5, 1.5)`, vortex strengths
        /// a swirl about the z axis through the set's centre (a vortex
        /// tube), the targets' `alpha_i` that of the same point. The sums
        /// add up, as a mass or a vortex does.
        Coherent,
        /// Every component uniform in `[-1, 1)`, `alpha_i` drawn apart from
        /// `alpha`: the sums cancel, so the relative error of a method (and
        /// of f32) is larger.
        RandomSign,
    }

    /// Where the targets are.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Targets {
        /// At the sources (each feels the others, not itself).
        Same,
        /// This many other points: for the cube, uniform in `[-0.2, 1.2)^3`
        /// (some outside the sources' box); for Plummer, another Plummer
        /// sphere.
        Apart(usize),
    }

    /// A set: `n` sources at `dist`, strengths `strengths`, every core
    /// radius `sigma`, targets `targets`, drawn from `seed`.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Spec {
        pub dist: Dist,
        pub n: usize,
        pub strengths: Strengths,
        pub sigma: f64,
        pub targets: Targets,
        pub seed: u64,
    }

    impl Spec {
        /// `n` particles of `dist` with `strengths` from `seed`, their own
        /// targets, core radii the mean spacing.
        pub fn new(dist: Dist, n: usize, strengths: Strengths, seed: u64) -> Self {
            Spec {
                dist,
                n,
                strengths,
                sigma: mean_spacing(dist, n),
                targets: Targets::Same,
                seed,
            }
        }
    }

    /// Rounded to f32, so that f32 particles hold the very values of the
    /// f64 ones and of the reference: only the arithmetic is measured.
    pub fn r32(x: f64) -> f64 {
        x as f32 as f64
    }

    /// SplitMix64 (Steele, Lea and Flood 2014): a small seeded generator,
    /// so that this library needs no dependency of its own.
    pub struct SplitMix(u64);

    impl SplitMix {
        pub fn new(seed: u64) -> Self {
            SplitMix(seed)
        }

        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// Uniform in `[lo, hi)`.
        pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        }

        pub fn v3(&mut self, lo: f64, hi: f64) -> V3 {
            [(); 3].map(|_| self.uniform(lo, hi))
        }
    }

    /// `n` points of `dist` from `seed`, rounded to f32.
    pub fn positions(dist: Dist, n: usize, seed: u64) -> Vec<V3> {
        let pos = match dist {
            Dist::Cube => fmm_core::distributions::uniform_cube(n, seed),
            Dist::Plummer => fmm_core::distributions::plummer(n, seed).0,
        };
        pos.iter().map(|p| p.map(r32)).collect()
    }

    /// The mean spacing of `n` points of `dist`: `n^(-1/3)` in the unit
    /// cube; in a Plummer sphere that of the half-mass sphere (radius
    /// 1.305 `a`, `a = 3 pi / 16`), where half the points are.
    pub fn mean_spacing(dist: Dist, n: usize) -> f64 {
        match dist {
            Dist::Cube => (n as f64).cbrt().recip(),
            Dist::Plummer => {
                let rh = 1.305 * 3.0 * std::f64::consts::PI / 16.0;
                let volume = 4.0 / 3.0 * std::f64::consts::PI * rh.powi(3);
                (volume / (0.5 * n as f64)).cbrt()
            }
        }
    }

    /// The set `spec` describes.
    pub fn case(spec: &Spec) -> Case {
        let spos = positions(spec.dist, spec.n, spec.seed);
        let tpos = match (spec.targets, spec.dist) {
            (Targets::Same, _) => spos.clone(),
            (Targets::Apart(m), Dist::Cube) => positions(Dist::Cube, m, spec.seed + 1)
                .iter()
                .map(|p| p.map(|c| r32(1.4 * c - 0.2)))
                .collect(),
            (Targets::Apart(m), Dist::Plummer) => positions(Dist::Plummer, m, spec.seed + 1),
        };
        case_at(spos, tpos, spec.strengths, spec.sigma, spec.seed)
    }

    /// Sources at `spos` and targets at `tpos` with strengths `strengths`
    /// drawn from `seed` and every core radius `sigma` (all rounded to
    /// f32).
    pub fn case_at(
        spos: Vec<V3>,
        tpos: Vec<V3>,
        strengths: Strengths,
        sigma: f64,
        seed: u64,
    ) -> Case {
        let mut rng = SplitMix::new(seed ^ 0x5eed_5eed);
        let (n, m) = (spos.len(), tpos.len());
        let centre = [0, 1, 2].map(|c| spos.iter().map(|p| p[c]).sum::<f64>() / n.max(1) as f64);
        let swirl = |p: &V3| [p[1] - centre[1], centre[0] - p[0], 0.1].map(r32);
        let r3 = |v: V3| v.map(r32);
        let mut c = Case {
            m: vec![],
            q: vec![],
            alpha: vec![],
            sigma: vec![r32(sigma); n],
            qv: vec![],
            alpha_i: vec![],
            tpos,
            spos,
        };
        match strengths {
            Strengths::Coherent => {
                c.m = (0..n).map(|_| r32(rng.uniform(0.5, 1.5))).collect();
                c.q = (0..n).map(|_| r32(rng.uniform(0.5, 1.5))).collect();
                c.alpha = c.spos.iter().map(swirl).collect();
                c.qv = c.alpha.clone();
                c.alpha_i = c.tpos.iter().map(swirl).collect();
            }
            Strengths::RandomSign => {
                c.m = (0..n).map(|_| r32(rng.uniform(-1.0, 1.0))).collect();
                c.q = (0..n).map(|_| r32(rng.uniform(-1.0, 1.0))).collect();
                c.alpha = (0..n).map(|_| r3(rng.v3(-1.0, 1.0))).collect();
                c.qv = (0..n).map(|_| r3(rng.v3(-1.0, 1.0))).collect();
                c.alpha_i = (0..m).map(|_| r3(rng.v3(-1.0, 1.0))).collect();
            }
        }
        c
    }

    /// The targets and sources of kernel `K` for `spec`.
    pub fn set<K: Kernel, R: Real>(spec: &Spec) -> (Particles<R>, Particles<R>) {
        build::<K, R>(&case(spec))
    }

    /// Values in `R`.
    pub fn to_r<R: Real>(v: &[f64]) -> Vec<R> {
        v.iter().map(|&x| R::c(x)).collect()
    }

    /// Vectors in `R`.
    pub fn to_r3<R: Real>(v: &[V3]) -> Vec<[R; 3]> {
        v.iter().map(|p| p.map(R::c)).collect()
    }

    /// The targets and sources of kernel `K` for case `c`, every field the
    /// kernel declares set from the case.
    pub fn build<K: Kernel, R: Real>(c: &Case) -> (Particles<R>, Particles<R>) {
        let def = K::def();
        let mut src = Particles::<R>::sources::<K>(&to_r3(&c.spos)).unwrap();
        for f in &def.sources {
            match (f.name.as_str(), &f.shape) {
                ("m", Shape::Scalar) => src.set("m", &to_r(&c.m)),
                ("q", Shape::Scalar) => src.set("q", &to_r(&c.q)),
                ("q", Shape::Vec3) => src.set_vec3("q", &to_r3(&c.qv)),
                ("f", Shape::Vec3) => src.set_vec3("f", &to_r3(&c.qv)),
                ("alpha", Shape::Vec3) => src.set_vec3("alpha", &to_r3(&c.alpha)),
                ("sigma", Shape::Scalar) => src.set("sigma", &to_r(&c.sigma)),
                (name, _) => panic!("no data for source field `{name}` of {}", K::name()),
            }
            .unwrap();
        }
        let mut tgt = Particles::<R>::targets::<K>(&to_r3(&c.tpos)).unwrap();
        for f in &def.targets {
            match (f.name.as_str(), &f.shape) {
                ("alpha_i", Shape::Vec3) => tgt.set_vec3("alpha_i", &to_r3(&c.alpha_i)),
                (name, _) => panic!("no data for target field `{name}` of {}", K::name()),
            }
            .unwrap();
        }
        (tgt, src)
    }
}

/// Vortex filaments over a cloud of targets: points so clustered that a
/// uniform cube's leaves mispredict an FMM's nearest M2L pairs.
pub mod filaments {
    use fmm_core::kernels::BiotSavart;
    use fmm_core::{Particles, Real};
    use std::f64::consts::TAU;

    /// Three helical filaments of radius 1 (`per_turn` segments a turn,
    /// `turns` turns, pitch 0.15 a turn), their segments as `BiotSavart`
    /// sources (strength the segment, Gaussian core `sigma`), and `n`
    /// targets uniform in the cube of side 3 about the origin.
    pub fn over_a_cloud<R: Real>(
        sigma: f64,
        per_turn: usize,
        turns: usize,
        n: usize,
    ) -> (Particles<R>, Particles<R>) {
        let (mut x, mut alpha) = (Vec::new(), Vec::new());
        for f in 0..3 {
            let phase = TAU * f as f64 / 3.0;
            let at = |k: f64| {
                let a = TAU * k / per_turn as f64 + phase;
                [a.cos(), a.sin(), -0.15 * k / per_turn as f64]
            };
            for k in 0..turns * per_turn {
                let (a, b) = (at(k as f64), at(k as f64 + 1.0));
                x.push([0, 1, 2].map(|c| R::c(0.5 * (a[c] + b[c]))));
                alpha.push([0, 1, 2].map(|c| R::c(b[c] - a[c])));
            }
        }
        let mut s = Particles::sources::<BiotSavart>(&x).unwrap();
        s.set_vec3("alpha", &alpha)
            .unwrap()
            .set("sigma", &vec![R::c(sigma); x.len()])
            .unwrap();
        let cloud: Vec<[R; 3]> = fmm_core::distributions::uniform_cube(n, 4)
            .iter()
            .map(|p| p.map(|c| R::c(3.0 * c - 1.5)))
            .collect();
        (Particles::targets::<BiotSavart>(&cloud).unwrap(), s)
    }
}
