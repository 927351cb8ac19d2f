//! A pseudo-spectral Navier-Stokes solver in a periodic box: the reference
//! the turbulence cases are checked against (yokota2009 section 5 checks
//! its vortex method against one). Fourier-Galerkin in a cube of side `L`
//! on `n^3` points, the nonlinear term in rotational form `u x omega` made
//! on a grid of `3n/2` a side and truncated back (the 3/2 rule: no
//! aliasing of quadratic terms), the pressure by projection onto
//! divergence-free fields, and the classical fourth-order Runge-Kutta
//! scheme with the viscous term integrated exactly (an integrating
//! factor `exp(-nu k^2 t)`, so the step is limited by advection alone).
//!
//! Conventions: `u(x) = sum_k u_k exp(i k . x)` (the coefficients are the
//! Fourier series', not rustfft's unnormalised sums), `k = 2 pi / L` times
//! an integer from `-n/2 + 1` to `n/2 - 1` on each axis (the Nyquist
//! modes are kept zero), grid points `x = L (i, j, l) / n` from the
//! origin. Energy and dissipation are means over the box, per unit mass:
//! `K = <|u|^2> / 2`, `epsilon = nu <|omega|^2>`.

mod fft3;
mod isotropic;

use rayon::prelude::*;
use rustfft::num_complex::Complex64;

use crate::error::VortexError;
pub use fft3::Fft3;
pub use isotropic::passot_pouquet;

/// A velocity field in a periodic box and its evolution.
pub struct SpectralNs {
    n: usize,
    side: f64,
    nu: f64,
    t: f64,
    /// The velocity's coefficients, three components of `n^3`.
    u: [Vec<Complex64>; 3],
    /// The wavenumber of each index along an axis (0 at the Nyquist
    /// index, whose modes are zero).
    k: Vec<f64>,
    fft: Fft3,
    pad: Fft3,
}

type Field = [Vec<Complex64>; 3];

impl SpectralNs {
    /// The flow `u(x)` sampled on `n^3` points of a box of side `side`,
    /// viscosity `nu`, made divergence-free (its projection).
    pub fn from_fn(
        n: usize,
        side: f64,
        nu: f64,
        u: impl Fn([f64; 3]) -> [f64; 3] + Sync,
    ) -> Result<Self, VortexError> {
        check(n, side, nu)?;
        let h = side / n as f64;
        let samples: Vec<[f64; 3]> = (0..n * n * n)
            .into_par_iter()
            .map(|i| {
                u([
                    (i % n) as f64 * h,
                    ((i / n) % n) as f64 * h,
                    (i / (n * n)) as f64 * h,
                ])
            })
            .collect();
        let fields = [0, 1, 2].map(|c| samples.iter().map(|v| v[c]).collect::<Vec<f64>>());
        Self::from_velocity(n, side, nu, &fields)
    }

    /// The velocity `u` on `n^3` points (x fastest), made divergence-free.
    pub fn from_velocity(
        n: usize,
        side: f64,
        nu: f64,
        u: &[Vec<f64>; 3],
    ) -> Result<Self, VortexError> {
        check(n, side, nu)?;
        for (c, v) in u.iter().enumerate() {
            if v.len() != n * n * n {
                return Err(VortexError::LengthMismatch {
                    what: "a velocity component on the grid",
                    got: v.len(),
                    expected: n * n * n,
                });
            }
            if let Some(&x) = v.iter().find(|x| !x.is_finite()) {
                return Err(VortexError::BadSetting {
                    what: ["the velocity's x", "the velocity's y", "the velocity's z"][c],
                    value: x,
                    why: "must be finite",
                });
            }
        }
        let fft = Fft3::new(n);
        let scale = 1.0 / (n * n * n) as f64;
        let coefficients = u.clone().map(|v| {
            let mut a: Vec<Complex64> = v.iter().map(|&x| Complex64::new(x, 0.0)).collect();
            fft.forward(&mut a);
            a.iter_mut().for_each(|z| *z *= scale);
            a
        });
        Self::from_coefficients(n, side, nu, coefficients)
    }

    /// The velocity's Fourier coefficients `u_k` (index `(z n + y) n + x`
    /// of each wavenumber's integers taken modulo `n`), made
    /// divergence-free, the Nyquist modes dropped. For a real velocity
    /// the coefficients must be Hermitian (`u_{-k}` the conjugate of
    /// `u_k`); the solver keeps what it is given.
    pub fn from_coefficients(
        n: usize,
        side: f64,
        nu: f64,
        mut u: Field,
    ) -> Result<Self, VortexError> {
        check(n, side, nu)?;
        let k: Vec<f64> = (0..n)
            .map(|i| {
                let m = if i < n / 2 {
                    i as f64
                } else if i == n / 2 {
                    0.0
                } else {
                    i as f64 - n as f64
                };
                std::f64::consts::TAU / side * m
            })
            .collect();
        let s = SpectralNs {
            n,
            side,
            nu,
            t: 0.0,
            u: Default::default(),
            k,
            fft: Fft3::new(n),
            pad: Fft3::new(3 * n / 2),
        };
        s.project(&mut u);
        Ok(SpectralNs { u, ..s })
    }

    /// Points a side.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The box's side.
    pub fn side(&self) -> f64 {
        self.side
    }

    /// The time stepped so far.
    pub fn time(&self) -> f64 {
        self.t
    }

    /// The velocity's coefficients.
    pub fn coefficients(&self) -> &Field {
        &self.u
    }

    /// The wavenumber vector of index `i` and whether it is a kept mode
    /// (not on a Nyquist plane).
    fn wave(&self, i: usize) -> ([f64; 3], bool) {
        let n = self.n;
        let (x, y, z) = (i % n, (i / n) % n, i / (n * n));
        let kept = x != n / 2 && y != n / 2 && z != n / 2;
        ([self.k[x], self.k[y], self.k[z]], kept)
    }

    /// `u` projected onto divergence-free fields, Nyquist modes zeroed.
    fn project(&self, u: &mut Field) {
        let [ux, uy, uz] = u;
        ux.par_iter_mut()
            .zip(uy.par_iter_mut())
            .zip(uz.par_iter_mut())
            .enumerate()
            .for_each(|(i, ((a, b), c))| {
                let (k, kept) = self.wave(i);
                let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
                if !kept {
                    (*a, *b, *c) = Default::default();
                } else if k2 > 0.0 {
                    let d = (*a * k[0] + *b * k[1] + *c * k[2]) / k2;
                    *a -= d * k[0];
                    *b -= d * k[1];
                    *c -= d * k[2];
                }
            });
    }

    /// The vorticity's coefficients, `i k x u_k`.
    fn curl(&self, u: &Field) -> Field {
        let len = u[0].len();
        let mut w: Field = [(); 3].map(|_| vec![Complex64::default(); len]);
        let [wx, wy, wz] = &mut w;
        wx.par_iter_mut()
            .zip(wy.par_iter_mut())
            .zip(wz.par_iter_mut())
            .enumerate()
            .for_each(|(i, ((a, b), c))| {
                let (k, _) = self.wave(i);
                let ik = k.map(|x| Complex64::new(0.0, x));
                *a = ik[1] * u[2][i] - ik[2] * u[1][i];
                *b = ik[2] * u[0][i] - ik[0] * u[2][i];
                *c = ik[0] * u[1][i] - ik[1] * u[0][i];
            });
        w
    }

    /// Coefficients `a` on the padded grid's physical points.
    fn padded_values(&self, a: &[Complex64]) -> Vec<Complex64> {
        let (n, m) = (self.n, 3 * self.n / 2);
        let mut p = vec![Complex64::default(); m * m * m];
        let to = |i: usize| if i < n / 2 { i } else { i + m - n };
        for (i, &v) in a.iter().enumerate() {
            let (x, y, z) = (i % n, (i / n) % n, i / (n * n));
            if x != n / 2 && y != n / 2 && z != n / 2 {
                p[(to(z) * m + to(y)) * m + to(x)] = v;
            }
        }
        self.pad.inverse(&mut p);
        p
    }

    /// The padded grid's values `p` back to the kept coefficients.
    fn kept_modes(&self, mut p: Vec<Complex64>) -> Vec<Complex64> {
        let (n, m) = (self.n, 3 * self.n / 2);
        self.pad.forward(&mut p);
        let scale = 1.0 / (m * m * m) as f64;
        let from = |i: usize| if i < n / 2 { i } else { i + m - n };
        (0..n * n * n)
            .map(|i| {
                let (x, y, z) = (i % n, (i / n) % n, i / (n * n));
                if x == n / 2 || y == n / 2 || z == n / 2 {
                    Complex64::default()
                } else {
                    p[(from(z) * m + from(y)) * m + from(x)] * scale
                }
            })
            .collect()
    }

    /// The right-hand side without viscosity: the projection of `u x
    /// omega`, dealiased by the 3/2 rule.
    fn nonlinear(&self, u: &Field) -> Field {
        let w = self.curl(u);
        let ug = u.each_ref().map(|a| self.padded_values(a));
        let wg = w.each_ref().map(|a| self.padded_values(a));
        let cross = |c: usize| -> Vec<Complex64> {
            let (a, b) = ((c + 1) % 3, (c + 2) % 3);
            (0..ug[0].len())
                .into_par_iter()
                .map(|i| Complex64::new(ug[a][i].re * wg[b][i].re - ug[b][i].re * wg[a][i].re, 0.0))
                .collect()
        };
        let mut out = [0, 1, 2].map(|c| self.kept_modes(cross(c)));
        self.project(&mut out);
        out
    }

    /// `exp(-nu k^2 t)` of each mode.
    fn decay(&self, t: f64) -> Vec<f64> {
        (0..self.n * self.n * self.n)
            .into_par_iter()
            .map(|i| {
                let (k, _) = self.wave(i);
                (-self.nu * (k[0] * k[0] + k[1] * k[1] + k[2] * k[2]) * t).exp()
            })
            .collect()
    }

    /// One step of `dt`: RK4 with the viscous term integrated exactly.
    pub fn step(&mut self, dt: f64) -> Result<(), VortexError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(VortexError::BadSetting {
                what: "the spectral solver's step",
                value: dt,
                why: "must be finite and positive",
            });
        }
        let (half, full) = (self.decay(0.5 * dt), self.decay(dt));
        // y = e u + s e2 k: the stages' states.
        let combine = |u: &Field, e: &[f64], s: f64, k: &Field, e2: Option<&[f64]>| -> Field {
            [0, 1, 2].map(|c| {
                (0..u[c].len())
                    .into_par_iter()
                    .map(|i| e[i] * u[c][i] + s * e2.map_or(1.0, |e2| e2[i]) * k[c][i])
                    .collect()
            })
        };
        let u = &self.u;
        let k1 = self.nonlinear(u);
        let k2 = self.nonlinear(&combine(u, &half, 0.5 * dt, &k1, Some(&half)));
        let k3 = self.nonlinear(&combine(u, &half, 0.5 * dt, &k2, None));
        let k4 = self.nonlinear(&combine(u, &full, dt, &k3, Some(&half)));
        let next: Field = [0, 1, 2].map(|c| {
            (0..u[c].len())
                .into_par_iter()
                .map(|i| {
                    full[i] * u[c][i]
                        + dt / 6.0
                            * (full[i] * k1[c][i]
                                + 2.0 * half[i] * (k2[c][i] + k3[c][i])
                                + k4[c][i])
                })
                .collect()
        });
        if let Some(i) = next[0]
            .iter()
            .chain(&next[1])
            .chain(&next[2])
            .position(|z| !(z.re.is_finite() && z.im.is_finite()))
        {
            return Err(VortexError::BadSetting {
                what: "a velocity coefficient after a spectral step (shorten the step)",
                value: i as f64,
                why: "not finite",
            });
        }
        self.u = next;
        self.t += dt;
        Ok(())
    }

    /// The kinetic energy per unit mass, `<|u|^2> / 2` (Parseval).
    pub fn energy(&self) -> f64 {
        0.5 * self.sum_modes(|_, u| u)
    }

    /// The kinetic energy of the field smoothed by a Gaussian of standard
    /// deviation `sigma` (each mode times `exp(-|k|^2 sigma^2 / 2)`): what
    /// a vortex blob method of cores `sigma` represents of this field, to
    /// set beside its energy.
    pub fn smoothed_energy(&self, sigma: f64) -> f64 {
        0.5 * self.sum_modes(|k2, u| (-k2 * sigma * sigma).exp() * u)
    }

    /// The dissipation rate `nu <|omega|^2>` (`-dK/dt`).
    pub fn dissipation(&self) -> f64 {
        self.nu * self.sum_modes(|k2, u| k2 * u)
    }

    /// `sum_k f(|k|^2, |u_k|^2)`.
    fn sum_modes(&self, f: impl Fn(f64, f64) -> f64 + Sync) -> f64 {
        (0..self.u[0].len())
            .into_par_iter()
            .map(|i| {
                let (k, _) = self.wave(i);
                let u2: f64 = (0..3).map(|c| self.u[c][i].norm_sqr()).sum();
                f(k[0] * k[0] + k[1] * k[1] + k[2] * k[2], u2)
            })
            .sum()
    }

    /// The energy spectrum: `E[j]` the energy of the modes with `|k| L /
    /// 2 pi` in `[j - 1/2, j + 1/2)`, so that `sum E = K`.
    pub fn spectrum(&self) -> Vec<f64> {
        self.smoothed_spectrum(0.0)
    }

    /// The spectrum of the field smoothed by a Gaussian of standard
    /// deviation `sigma` ([`Self::smoothed_energy`]'s).
    pub fn smoothed_spectrum(&self, sigma: f64) -> Vec<f64> {
        shells(self.n, |i| {
            let (k, _) = self.wave(i);
            let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
            (-k2 * sigma * sigma).exp() * (0..3).map(|c| self.u[c][i].norm_sqr()).sum::<f64>()
        })
    }

    /// The velocity on the `n^3` grid points (x fastest).
    pub fn velocity(&self) -> [Vec<f64>; 3] {
        self.u.each_ref().map(|a| self.to_grid(a))
    }

    /// The vorticity on the grid points.
    pub fn vorticity(&self) -> [Vec<f64>; 3] {
        self.curl(&self.u).each_ref().map(|a| self.to_grid(a))
    }

    fn to_grid(&self, a: &[Complex64]) -> Vec<f64> {
        let mut g = a.to_vec();
        self.fft.inverse(&mut g);
        g.iter().map(|z| z.re).collect()
    }

    /// The largest `|k . u_k| / |k| |u_k|` over the modes: zero for a
    /// divergence-free field (a check).
    pub fn divergence(&self) -> f64 {
        (0..self.u[0].len())
            .into_par_iter()
            .map(|i| {
                let (k, _) = self.wave(i);
                let d = self.u[0][i] * k[0] + self.u[1][i] * k[1] + self.u[2][i] * k[2];
                let kk = (k[0] * k[0] + k[1] * k[1] + k[2] * k[2]).sqrt();
                let uu = (0..3).map(|c| self.u[c][i].norm_sqr()).sum::<f64>().sqrt();
                if kk * uu > 0.0 {
                    d.norm() / (kk * uu)
                } else {
                    0.0
                }
            })
            .reduce(|| 0.0, f64::max)
    }

    /// A step for a Courant number `courant` at the largest speed on
    /// the grid.
    pub fn stable_dt(&self, courant: f64) -> f64 {
        let u = self.velocity();
        let umax = (0..u[0].len())
            .map(|i| u[0][i].abs() + u[1][i].abs() + u[2][i].abs())
            .fold(0.0f64, f64::max);
        courant * self.side / self.n as f64 / umax.max(f64::MIN_POSITIVE)
    }
}

/// The energy spectrum of the velocity `u` on the `n^3` points of a
/// periodic box (x fastest; [`SpectralNs::spectrum`]'s shells, every mode
/// counted, so that `sum E = <|u|^2> / 2` whatever the field's content
/// at the grid's Nyquist wavenumber).
pub fn spectrum_of(u: &[Vec<f64>; 3], n: usize) -> Result<Vec<f64>, VortexError> {
    if let Some(c) = u.iter().find(|c| c.len() != n * n * n) {
        return Err(VortexError::LengthMismatch {
            what: "a velocity component on the grid",
            got: c.len(),
            expected: n * n * n,
        });
    }
    let fft = Fft3::new(n);
    let scale = 1.0 / (n * n * n) as f64;
    let hat = u.each_ref().map(|v| {
        let mut a: Vec<Complex64> = v.iter().map(|&x| Complex64::new(x * scale, 0.0)).collect();
        fft.forward(&mut a);
        a
    });
    Ok(shells(n, |i| (0..3).map(|c| hat[c][i].norm_sqr()).sum()))
}

/// Half of `u2(i)` (a mode's `|u_k|^2`) summed over the shells of
/// integer `|k| L / 2 pi`, rounded; `n` shells, the last holding any
/// past it.
fn shells(n: usize, u2: impl Fn(usize) -> f64) -> Vec<f64> {
    let m = |i: usize| {
        let i = i as f64;
        if i < n as f64 / 2.0 {
            i
        } else {
            i - n as f64
        }
    };
    let mut e = vec![0.0; n];
    for i in 0..n * n * n {
        let k = [m(i % n), m((i / n) % n), m(i / (n * n))];
        let j = (k[0] * k[0] + k[1] * k[1] + k[2] * k[2]).sqrt().round() as usize;
        e[j.min(n - 1)] += 0.5 * u2(i);
    }
    e
}

/// An even side of at least 4 points, a finite positive box, a finite
/// viscosity of at least 0.
fn check(n: usize, side: f64, nu: f64) -> Result<(), VortexError> {
    let bad = |what, value, why| Err(VortexError::BadSetting { what, value, why });
    if n < 4 || !n.is_multiple_of(2) {
        return bad(
            "the spectral grid's points a side",
            n as f64,
            "must be even and at least 4",
        );
    }
    if !(side.is_finite() && side > 0.0) {
        return bad("the box's side", side, "must be finite and positive");
    }
    if !(nu.is_finite() && nu >= 0.0) {
        return bad("the viscosity", nu, "must be finite and at least 0");
    }
    Ok(())
}
