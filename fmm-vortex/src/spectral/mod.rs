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
//!
//! The nonlinear term's transforms are most of a step's work: the six
//! real fields of `u` and `omega` go to the padded grid two to a complex
//! transform (the real and imaginary parts) and the three of `u x omega`
//! come back in two, each transform pruned of the lines the padding
//! leaves zero or the truncation drops ([`fft3::PaddedFft3`]).

mod fft3;
mod half;
mod isotropic;

use rayon::prelude::*;
use rustfft::num_complex::Complex64;

use crate::error::VortexError;
use crate::grid::Grid;
use crate::particles::VortexParticles;
pub use fft3::Fft3;
use fft3::{pair_real, unpair_real, PaddedFft3};
use fmm_core::PeriodicBox;
pub use half::HalfFft3;
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
    pad: PaddedFft3,
    /// A step's room, kept from step to step (empty until the first).
    work: Work,
}

type Field = [Vec<Complex64>; 3];

/// What a step works in, kept from step to step: allocated afresh, each
/// array's pages would be faulted in and cleared at every stage (at `n =
/// 128` the padded grids alone are 340 MB).
#[derive(Default)]
struct Work {
    /// The nonlinear term's.
    scratch: Scratch,
    /// A stage's state, then the step's result.
    stage: Field,
    /// The stages' right-hand sides `k1`, `k2` (then `k2 + k3`) and `k3`
    /// (then `k4`).
    k: [Field; 3],
    /// `exp(-nu k^2 dt / 2)` and `exp(-nu k^2 dt)` of each mode, and the
    /// `dt` they are for.
    decay: Option<(f64, Vec<f64>, Vec<f64>)>,
}

/// What the nonlinear term works in.
#[derive(Default)]
struct Scratch {
    /// The three padded grids.
    grids: Field,
    /// The coefficients of a pair of real fields.
    pair: Vec<Complex64>,
    /// The vorticity's coefficients.
    curl: Field,
}

/// Each component `len` long (new values zero, old ones kept).
fn fit(f: &mut Field, len: usize) {
    for c in f {
        c.resize(len, Complex64::default());
    }
}

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
            pad: PaddedFft3::new(n),
            work: Work::default(),
        };
        s.project(&mut u);
        Ok(SpectralNs { u, ..s })
    }

    /// The velocity times `factor` (its energy times `factor^2`): a
    /// spectrum's shape made once, then scaled to an energy.
    pub fn scaled(mut self, factor: f64) -> Self {
        for c in &mut self.u {
            c.par_iter_mut().for_each(|v| *v *= factor);
        }
        self
    }

    /// Points a side.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The grid's points as vortex particles, strengths the vorticity
    /// times a cell's volume and cores `overlap` spacings wide; with the
    /// periodic box whose cell centres they are and the grid. The
    /// turbulence and Taylor-Green cases start from them, on one process
    /// or on many (`remesh::interpolate_on_lattice` then makes the blobs
    /// give the field at the points).
    pub fn lattice_particles(
        &self,
        overlap: f64,
    ) -> Result<(VortexParticles, PeriodicBox, Grid), VortexError> {
        let (n, side) = (self.n, self.side);
        let h = side / n as f64;
        let grid = Grid {
            origin: [0.0; 3],
            side,
            n,
        };
        let w = self.vorticity();
        let volume = h * h * h;
        let alpha: Vec<[f64; 3]> = (0..n * n * n)
            .map(|i| [w[0][i] * volume, w[1][i] * volume, w[2][i] * volume])
            .collect();
        let count = alpha.len();
        let p = VortexParticles::new(
            grid.points(),
            alpha,
            vec![overlap * h; count],
            vec![volume; count],
        )?;
        Ok((p, PeriodicBox::cube([-0.5 * h; 3], side), grid))
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

    /// [`Self::wave`] of each index of row `r = z n + y`, in order (the
    /// row's indices `r n + x`), without a division each.
    fn row_waves(&self, r: usize) -> impl Iterator<Item = ([f64; 3], bool)> + '_ {
        let n = self.n;
        let (y, z) = (r % n, r / n);
        let row_kept = y != n / 2 && z != n / 2;
        (0..n).map(move |x| ([self.k[x], self.k[y], self.k[z]], row_kept && x != n / 2))
    }

    /// `u` projected onto divergence-free fields, Nyquist modes zeroed.
    fn project(&self, u: &mut Field) {
        let n = self.n;
        let [ux, uy, uz] = u;
        ux.par_chunks_mut(n)
            .zip(uy.par_chunks_mut(n))
            .zip(uz.par_chunks_mut(n))
            .enumerate()
            .for_each(|(r, ((ux, uy), uz))| {
                let row = ux.iter_mut().zip(uy.iter_mut()).zip(uz.iter_mut());
                for (((a, b), c), (k, kept)) in row.zip(self.row_waves(r)) {
                    let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
                    if !kept {
                        (*a, *b, *c) = Default::default();
                    } else if k2 > 0.0 {
                        let d = (*a * k[0] + *b * k[1] + *c * k[2]) / k2;
                        *a -= d * k[0];
                        *b -= d * k[1];
                        *c -= d * k[2];
                    }
                }
            });
    }

    /// The vorticity's coefficients, `i k x u_k`.
    fn curl(&self, u: &Field) -> Field {
        let mut w = Field::default();
        self.curl_into(u, &mut w);
        w
    }

    /// [`Self::curl`] into `w`.
    fn curl_into(&self, u: &Field, w: &mut Field) {
        let n = self.n;
        fit(w, n * n * n);
        let [wx, wy, wz] = w;
        wx.par_chunks_mut(n)
            .zip(wy.par_chunks_mut(n))
            .zip(wz.par_chunks_mut(n))
            .enumerate()
            .for_each(|(r, ((wx, wy), wz))| {
                let row = wx.iter_mut().zip(wy.iter_mut()).zip(wz.iter_mut());
                for ((x, ((a, b), c)), (k, _)) in row.enumerate().zip(self.row_waves(r)) {
                    let i = r * n + x;
                    let ik = k.map(|x| Complex64::new(0.0, x));
                    *a = ik[1] * u[2][i] - ik[2] * u[1][i];
                    *b = ik[2] * u[0][i] - ik[0] * u[2][i];
                    *c = ik[0] * u[1][i] - ik[1] * u[0][i];
                }
            });
    }

    /// The right-hand side without viscosity: the projection of `u x
    /// omega`, dealiased by the 3/2 rule, into `out`.
    ///
    /// The fields on the padded grid are the real parts of the inverse
    /// transforms of `u` and `omega` (their coefficients' Hermitian
    /// parts, [`pair_real`]: the real fields themselves when the
    /// coefficients are Hermitian), two to a transform: `ux + i uy`, `uz
    /// + i wx`, `wy + i wz`. Their product's three real components come
    /// back two to a transform, `(u x omega)_x + i (u x omega)_y`
    /// ([`unpair_real`]), and the z component alone.
    fn nonlinear(&self, u: &Field, scratch: &mut Scratch, out: &mut Field) {
        let (n, m) = (self.n, self.pad.m());
        let Scratch { grids, pair, curl } = scratch;
        self.curl_into(u, curl);
        pair.resize(n * n * n, Complex64::default());
        let fields = [&u[0], &u[1], &u[2], &curl[0], &curl[1], &curl[2]];
        for (j, grid) in grids.iter_mut().enumerate() {
            grid.resize(m * m * m, Complex64::default());
            pair_real(n, fields[2 * j], fields[2 * j + 1], pair);
            self.pad.inverse(pair, grid);
        }
        let [g0, g1, g2] = grids;
        g0.par_iter_mut()
            .zip(g1.par_iter_mut())
            .zip(g2.par_iter())
            .for_each(|((a, b), c)| {
                let ([ux, uy], [uz, wx], [wy, wz]) = ([a.re, a.im], [b.re, b.im], [c.re, c.im]);
                *a = Complex64::new(uy * wz - uz * wy, uz * wx - ux * wz);
                *b = Complex64::new(ux * wy - uy * wx, 0.0);
            });
        let scale = 1.0 / (m * m * m) as f64;
        fit(out, n * n * n);
        let [ox, oy, oz] = out;
        self.pad.forward(g0, pair);
        unpair_real(n, pair, scale, ox, oy);
        self.pad.forward(g1, oz);
        oz.par_iter_mut().for_each(|z| *z *= scale);
        self.project(out);
    }

    /// `exp(-nu k^2 t)` of each mode.
    fn decay(&self, t: f64) -> Vec<f64> {
        let n = self.n;
        let mut e = vec![0.0; n * n * n];
        e.par_chunks_mut(n).enumerate().for_each(|(r, e)| {
            for (e, (k, _)) in e.iter_mut().zip(self.row_waves(r)) {
                *e = (-self.nu * (k[0] * k[0] + k[1] * k[1] + k[2] * k[2]) * t).exp();
            }
        });
        e
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
        let mut work = std::mem::take(&mut self.work);
        let Work {
            scratch,
            stage,
            k: [k1, k2, k3],
            decay,
        } = &mut work;
        let (half, full) = match decay {
            Some((t, half, full)) if *t == dt => (&*half, &*full),
            _ => {
                let (half, full) = (self.decay(0.5 * dt), self.decay(dt));
                let (_, half, full) = decay.insert((dt, half, full));
                (&*half, &*full)
            }
        };
        // y = e u + s e2 k: the stages' states.
        let combine =
            |y: &mut Field, u: &Field, e: &[f64], s: f64, k: &Field, e2: Option<&[f64]>| {
                fit(y, u[0].len());
                for c in 0..3 {
                    y[c].par_iter_mut().enumerate().for_each(|(i, y)| {
                        *y = e[i] * u[c][i] + s * e2.map_or(1.0, |e2| e2[i]) * k[c][i];
                    });
                }
            };
        let u = &self.u;
        self.nonlinear(u, scratch, k1);
        combine(stage, u, half, 0.5 * dt, k1, Some(half));
        self.nonlinear(stage, scratch, k2);
        combine(stage, u, half, 0.5 * dt, k2, None);
        self.nonlinear(stage, scratch, k3);
        combine(stage, u, full, dt, k3, Some(half));
        // k2 + k3, all the result takes of them; k3's room then takes k4.
        for (k2, k3) in k2.iter_mut().zip(k3.iter()) {
            k2.par_iter_mut().zip(k3).for_each(|(k2, k3)| *k2 += k3);
        }
        let (k23, k4) = (k2, k3);
        self.nonlinear(stage, scratch, k4);
        let next = stage;
        for c in 0..3 {
            next[c].par_iter_mut().enumerate().for_each(|(i, y)| {
                *y = full[i] * u[c][i]
                    + dt / 6.0 * (full[i] * k1[c][i] + 2.0 * half[i] * k23[c][i] + k4[c][i]);
            });
        }
        let bad = next[0]
            .par_iter()
            .chain(&next[1])
            .chain(&next[2])
            .position_first(|z| !(z.re.is_finite() && z.im.is_finite()));
        if bad.is_none() {
            std::mem::swap(&mut self.u, next);
            self.t += dt;
        }
        self.work = work;
        match bad {
            Some(i) => Err(VortexError::BadSetting {
                what: "a velocity coefficient after a spectral step (shorten the step)",
                value: i as f64,
                why: "not finite",
            }),
            None => Ok(()),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The nonlinear term the plain way: each of the six fields alone on
    /// the padded grid by the full transform, its real part, the three
    /// products back alone.
    fn nonlinear_by_full_transforms(s: &SpectralNs, u: &Field) -> Field {
        let (n, m) = (s.n, 3 * s.n / 2);
        let full = Fft3::new(m);
        let to = |i: usize| if i < n / 2 { i } else { i + m - n };
        let nyquist = |i: usize| i % n == n / 2 || (i / n) % n == n / 2 || i / (n * n) == n / 2;
        let at = |i: usize| (to(i / (n * n)) * m + to((i / n) % n)) * m + to(i % n);
        let grid = |a: &[Complex64]| {
            let mut p = vec![Complex64::default(); m * m * m];
            for (i, &v) in a.iter().enumerate() {
                if !nyquist(i) {
                    p[at(i)] = v;
                }
            }
            full.inverse(&mut p);
            p.iter().map(|z| z.re).collect::<Vec<f64>>()
        };
        let w = s.curl(u);
        let ug = u.each_ref().map(|a| grid(a));
        let wg = w.each_ref().map(|a| grid(a));
        let mut out = [0, 1, 2].map(|c| {
            let (a, b) = ((c + 1) % 3, (c + 2) % 3);
            let mut p: Vec<Complex64> = (0..m * m * m)
                .map(|i| Complex64::new(ug[a][i] * wg[b][i] - ug[b][i] * wg[a][i], 0.0))
                .collect();
            full.forward(&mut p);
            let scale = 1.0 / (m * m * m) as f64;
            (0..n * n * n)
                .map(|i| {
                    if nyquist(i) {
                        Complex64::default()
                    } else {
                        p[at(i)] * scale
                    }
                })
                .collect()
        });
        s.project(&mut out);
        out
    }

    #[test]
    fn the_nonlinear_term_is_that_of_each_field_transformed_alone() {
        // n = 12; 22 (a padded side of 33, odd, wider than a tile).
        for n in [12, 22] {
            let tau = std::f64::consts::TAU;
            let real = SpectralNs::isotropic(n, tau, 0.01, |k| passot_pouquet(k, 2.0), 3).unwrap();
            // Coefficients of no symmetry too: the nonlinear term takes
            // the real parts of their fields.
            let len = n * n * n;
            let skew = real.u.clone().map(|c| {
                c.iter()
                    .enumerate()
                    .map(|(i, &z)| {
                        z + 0.1 * Complex64::new((i as f64).sin(), (0.3 * i as f64).cos())
                    })
                    .collect()
            });
            let skew = SpectralNs::from_coefficients(n, tau, 0.01, skew).unwrap();
            for (what, s) in [("real", &real), ("skew", &skew)] {
                let mut got = Field::default();
                s.nonlinear(&s.u, &mut Scratch::default(), &mut got);
                let want = nonlinear_by_full_transforms(s, &s.u);
                let size = want.iter().flatten().map(|z| z.norm()).fold(0.0, f64::max);
                let err = (0..3)
                    .flat_map(|c| (0..len).map(move |i| (c, i)))
                    .map(|(c, i)| (got[c][i] - want[c][i]).norm())
                    .fold(0.0, f64::max);
                println!("{what} n = {n}: off by {err:.1e} of {size:.1e}");
                assert!(
                    size > 1e-3 && err < 1e-13 * size,
                    "{what} n = {n}: {err:e} of {size:e}"
                );
            }
        }
    }

    /// The step's time and the energies after a few steps, for
    /// comparing versions of the solver (not a check): `SPECTRAL_N=64
    /// cargo test --release -p fmm-vortex --lib spectral::tests::step_time
    /// -- --ignored --nocapture`. `SPECTRAL_STEPS` sets the steps (the
    /// first untimed); `SPECTRAL_DUMP`, a folder, has the coefficients
    /// written there (little-endian `f64`s, re and im, x then y then z)
    /// for a comparison mode by mode.
    #[test]
    #[ignore = "a timing harness: SPECTRAL_N=128 cargo test --release -p fmm-vortex --lib spectral::tests::step_time -- --ignored --nocapture"]
    fn step_time() {
        let n: usize = std::env::var("SPECTRAL_N")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(64);
        let steps: usize = std::env::var("SPECTRAL_STEPS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5);
        let tau = std::f64::consts::TAU;
        let tg = |x: [f64; 3]| {
            [
                x[0].sin() * x[1].cos() * x[2].cos(),
                -x[0].cos() * x[1].sin() * x[2].cos(),
                0.0,
            ]
        };
        let mut cases = [
            (
                "Taylor-Green",
                SpectralNs::from_fn(n, tau, 0.01, tg).unwrap(),
            ),
            (
                "isotropic",
                SpectralNs::isotropic(n, tau, 0.01, |k| passot_pouquet(k, 2.0), 5).unwrap(),
            ),
        ];
        for (name, s) in &mut cases {
            let dt = 0.01;
            let e0 = s.energy();
            s.step(dt).unwrap();
            let start = std::time::Instant::now();
            for _ in 1..steps {
                s.step(dt).unwrap();
            }
            let each = start.elapsed().as_secs_f64() / (steps - 1).max(1) as f64;
            println!(
                "{name} n = {n}: {each:.4} s a step ({} threads); K {e0:.17e} -> {:.17e} after {steps} steps",
                rayon::current_num_threads(),
                s.energy()
            );
            // The coefficients, raw, for a comparison of versions.
            if let Ok(dir) = std::env::var("SPECTRAL_DUMP") {
                let bytes: Vec<u8> =
                    s.u.iter()
                        .flatten()
                        .flat_map(|z| [z.re, z.im])
                        .flat_map(f64::to_le_bytes)
                        .collect();
                std::fs::write(format!("{dir}/{name}-{n}.bin"), bytes).unwrap();
            }
        }
    }
}
