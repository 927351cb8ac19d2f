//! An axisymmetric Navier-Stokes solver in the meridional plane, with a
//! no-slip wall: the reference the ring against the ground is checked
//! against (the published trajectories of that flow are figures; Orlandi
//! and Verzicco 1993 computed its axisymmetric phase this way). The
//! azimuthal vorticity `omega` and Stokes' stream function `psi` on a
//! uniform grid of `(r, z)`, the wall at `z = 0`:
//!
//! ```text
//! d(omega)/dt + d(u_r omega)/dr + d(u_z omega)/dz
//!     = nu (d/dr[(1/r) d(r omega)/dr] + d^2(omega)/dz^2)
//! psi_rr - psi_r / r + psi_zz = -r omega,   u_r = -psi_z / r,   u_z = psi_r / r
//! ```
//!
//! The fluxes in conservative form, so that the circulation `int omega dr
//! dz` changes only through the boundaries (the wall's flux of vorticity,
//! and diffusion across the axis); the advected vorticity's face values by
//! the third-order upwind-biased interpolation (`kappa = 1/3`), diffusion
//! and the stream function by second-order differences, the wall's
//! vorticity by Thom's formula (`psi = psi_z = 0` there: `omega_w = -2
//! psi_1 / (r dz^2)`), the stream function by a sine transform along z
//! and, for each mode, a tridiagonal solve along r; the three-stage
//! strong-stability-preserving Runge-Kutta scheme (Shu and Osher 1988),
//! each step as long as the Courant number and the diffusion limit let
//! it be (with `nu = 0` the wall slips: Euler's equations). The far sides (`r = reach`, `z = height`) hold `psi = 0` and
//! `omega = 0`: the box should be a few ring radii larger than the flow.
//!
//! A second way to the same flow as the particles: a grid instead of
//! particles, the stream function instead of Biot-Savart sums, Thom's
//! wall instead of the vorticity flux, and two dimensions instead of
//! three (it holds while the three-dimensional flow stays axisymmetric).

use std::sync::Arc;

use rayon::prelude::*;
use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

use crate::error::VortexError;

/// The flow in the meridional half-plane over a no-slip wall.
pub struct AxisymmetricNs {
    /// Intervals along r and z (nodes `0..=nr`, `0..=nz`).
    nr: usize,
    nz: usize,
    spacing: f64,
    nu: f64,
    courant: f64,
    t: f64,
    /// The azimuthal vorticity at the nodes, `i (nz + 1) + j` (z
    /// fastest); the wall's row `j = 0` by Thom's formula.
    omega: Vec<f64>,
    /// The stream function of `omega`.
    psi: Vec<f64>,
    poisson: Poisson,
    /// A step's room: the field at its start, a stage's field and its
    /// rate (kept from step to step).
    start: Vec<f64>,
    stage: Vec<f64>,
    rate: Vec<f64>,
}

/// One node's share of the meridional plane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeridionalNode {
    pub r: f64,
    pub z: f64,
    pub omega: f64,
    /// Its area (`spacing^2`, half of it on the wall).
    pub area: f64,
}

impl AxisymmetricNs {
    /// The flow of the azimuthal vorticity `omega(r, z)` in `0 <= r <=
    /// reach`, `0 <= z <= height` on a grid of `spacing`, viscosity `nu`.
    pub fn new(
        reach: f64,
        height: f64,
        spacing: f64,
        nu: f64,
        omega: impl Fn(f64, f64) -> f64 + Sync,
    ) -> Result<Self, VortexError> {
        if !(spacing > 0.0 && spacing.is_finite()) {
            return Err(VortexError::BadSetting {
                what: "the grid's spacing",
                value: spacing,
                why: "must be positive and finite",
            });
        }
        if !(nu >= 0.0 && nu.is_finite()) {
            return Err(VortexError::BadSetting {
                what: "the viscosity",
                value: nu,
                why: "must be zero or positive, and finite",
            });
        }
        for (what, side) in [
            ("the box's reach along r", reach),
            ("the box's height", height),
        ] {
            if !(side >= 8.0 * spacing && side.is_finite()) {
                return Err(VortexError::BadSetting {
                    what,
                    value: side,
                    why: "must be finite and at least eight spacings",
                });
            }
        }
        let (nr, nz) = (
            (reach / spacing).round() as usize,
            (height / spacing).round() as usize,
        );
        if (nr + 1) * (nz + 1) > 100_000_000 {
            return Err(VortexError::BadSetting {
                what: "the grid's spacing",
                value: spacing,
                why: "gives more than 10^8 nodes: take a coarser grid or a smaller box",
            });
        }
        let stride = nz + 1;
        let mut w = vec![0.0; (nr + 1) * stride];
        for i in 1..nr {
            for j in 1..nz {
                let v = omega(i as f64 * spacing, j as f64 * spacing);
                if !v.is_finite() {
                    return Err(VortexError::BadSetting {
                        what: "the initial vorticity",
                        value: v,
                        why: "must be finite at every node",
                    });
                }
                w[i * stride + j] = v;
            }
        }
        let mut flow = Self {
            nr,
            nz,
            spacing,
            nu,
            courant: 0.5,
            t: 0.0,
            omega: w,
            psi: vec![0.0; (nr + 1) * stride],
            poisson: Poisson::new(nr, nz),
            start: Vec::new(),
            stage: Vec::new(),
            rate: Vec::new(),
        };
        flow.solve_and_wall();
        Ok(flow)
    }

    /// The same flow stepped at the Courant number `courant` (0.5 unless
    /// given; the scheme is stable to about 1).
    pub fn with_courant(mut self, courant: f64) -> Result<Self, VortexError> {
        if !(courant > 0.0 && courant <= 1.0) {
            return Err(VortexError::BadSetting {
                what: "the Courant number",
                value: courant,
                why: "must be in (0, 1]",
            });
        }
        self.courant = courant;
        Ok(self)
    }

    pub fn time(&self) -> f64 {
        self.t
    }

    pub fn spacing(&self) -> f64 {
        self.spacing
    }

    /// Intervals along r and z.
    pub fn intervals(&self) -> (usize, usize) {
        (self.nr, self.nz)
    }

    /// The stream function at node `(i, j)`.
    pub fn stream_function(&self, i: usize, j: usize) -> f64 {
        self.psi[i * (self.nz + 1) + j]
    }

    /// The vorticity at node `(i, j)` (the wall's by Thom's formula).
    pub fn vorticity(&self, i: usize, j: usize) -> f64 {
        self.omega[i * (self.nz + 1) + j]
    }

    /// The nodes off the axis where the vorticity is not zero.
    pub fn nodes(&self) -> impl Iterator<Item = MeridionalNode> + '_ {
        let (h, stride) = (self.spacing, self.nz + 1);
        self.omega
            .iter()
            .enumerate()
            .filter(|(_, w)| **w != 0.0)
            .map(move |(k, &omega)| {
                let (i, j) = (k / stride, k % stride);
                MeridionalNode {
                    r: i as f64 * h,
                    z: j as f64 * h,
                    omega,
                    area: if j == 0 { 0.5 * h * h } else { h * h },
                }
            })
    }

    /// The circulation `int omega dr dz` (the trapezoidal rule).
    pub fn circulation(&self) -> f64 {
        self.nodes().map(|n| n.omega * n.area).sum()
    }

    /// The step the Courant number and the diffusion limit allow now.
    pub fn stable_dt(&self) -> f64 {
        let (h, stride) = (self.spacing, self.nz + 1);
        let psi = &self.psi;
        let fastest = (1..self.nr)
            .into_par_iter()
            .map(|i| {
                let r = i as f64 * h;
                (1..self.nz)
                    .map(|j| {
                        let k = i * stride + j;
                        let ur = (psi[k + 1] - psi[k - 1]) / (2.0 * h * r);
                        let uz = (psi[k + stride] - psi[k - stride]) / (2.0 * h * r);
                        ur.abs() + uz.abs()
                    })
                    .fold(0.0f64, f64::max)
            })
            .reduce(|| 0.0, f64::max);
        let advective = self.courant * h / fastest.max(1e-300);
        // Three-stage SSP Runge-Kutta is stable to 2.51 on the negative
        // real axis; the 5-point Laplacian's largest rate is 8 nu / h^2.
        let diffusive = 0.25 * h * h / self.nu.max(1e-300);
        1.0 / (1.0 / advective + 1.0 / diffusive)
    }

    /// One step of at most `dt_max` (the stable step if shorter); the step
    /// taken.
    pub fn step(&mut self, dt_max: f64) -> Result<f64, VortexError> {
        if dt_max.is_nan() || dt_max <= 0.0 {
            return Err(VortexError::BadSetting {
                what: "the time step",
                value: dt_max,
                why: "must be positive",
            });
        }
        let dt = self.stable_dt().min(dt_max);
        let n = self.omega.len();
        self.stage.resize(n, 0.0);
        self.rate.resize(n, 0.0);
        let mut start = std::mem::take(&mut self.start);
        start.clone_from(&self.omega);
        // omega1 = omega + dt L(omega)
        self.rates();
        combine(&mut self.stage, &self.omega, &self.rate, 0.0, &start, dt);
        std::mem::swap(&mut self.omega, &mut self.stage);
        self.solve_and_wall();
        // omega2 = 3/4 omega + 1/4 (omega1 + dt L(omega1))
        self.rates();
        combine(&mut self.stage, &self.omega, &self.rate, 0.75, &start, dt);
        std::mem::swap(&mut self.omega, &mut self.stage);
        self.solve_and_wall();
        // omega = 1/3 omega + 2/3 (omega2 + dt L(omega2))
        self.rates();
        combine(
            &mut self.stage,
            &self.omega,
            &self.rate,
            1.0 / 3.0,
            &start,
            dt,
        );
        std::mem::swap(&mut self.omega, &mut self.stage);
        self.solve_and_wall();
        self.start = start;
        self.t += dt;
        if let Some(bad) = self.omega.iter().find(|w| !w.is_finite()) {
            return Err(VortexError::BadSetting {
                what: "the vorticity after a step",
                value: *bad,
                why: "is not finite: the step was unstable (take a smaller Courant number)",
            });
        }
        Ok(dt)
    }

    /// Steps until the time is `t` (the last step shortened to land on
    /// it); the number of steps.
    pub fn advance_to(&mut self, t: f64) -> Result<usize, VortexError> {
        let mut steps = 0;
        while self.t < t - 1e-12 {
            self.step(t - self.t)?;
            steps += 1;
        }
        Ok(steps)
    }

    /// The stream function of the interior's vorticity, then the wall's
    /// vorticity from it (Thom).
    fn solve_and_wall(&mut self) {
        let (h, stride) = (self.spacing, self.nz + 1);
        self.poisson.solve(&self.omega, &mut self.psi, h);
        // Without viscosity nothing holds the fluid to the wall: it slips
        // (no wall vorticity).
        if self.nu == 0.0 {
            return;
        }
        for i in 1..self.nr {
            self.omega[i * stride] = -2.0 * self.psi[i * stride + 1] / (i as f64 * h * h * h);
        }
    }

    /// The rate of change of the interior's vorticity into `self.rate`.
    fn rates(&mut self) {
        let (nr, nz, h, nu) = (self.nr, self.nz, self.spacing, self.nu);
        let stride = nz + 1;
        let (w, psi) = (&self.omega, &self.psi);
        self.rate
            .par_chunks_mut(stride)
            .enumerate()
            .for_each(|(i, out)| {
                out.fill(0.0);
                if i == 0 || i == nr {
                    return;
                }
                let fi = i as f64;
                let (re, rw, r) = ((fi + 0.5) * h, (fi - 0.5) * h, fi * h);
                let at = |ii: isize, j: usize| -> f64 {
                    // The vorticity is odd across the axis.
                    if ii < 0 {
                        -w[(-ii) as usize * stride + j]
                    } else {
                        w[ii as usize * stride + j]
                    }
                };
                let ii = i as isize;
                for (j, rate) in out.iter_mut().enumerate().take(nz).skip(1) {
                    let k = i * stride + j;
                    let p = |di: isize, dj: isize| {
                        psi[(k as isize + di * stride as isize + dj) as usize]
                    };
                    // Face velocities from the stream function.
                    let ue = -(p(0, 1) - p(0, -1) + p(1, 1) - p(1, -1)) / (4.0 * h * re);
                    let uw = -(p(-1, 1) - p(-1, -1) + p(0, 1) - p(0, -1)) / (4.0 * h * rw);
                    let wn = (p(1, 0) - p(-1, 0) + p(1, 1) - p(-1, 1)) / (4.0 * h * r);
                    let ws = (p(1, -1) - p(-1, -1) + p(1, 0) - p(-1, 0)) / (4.0 * h * r);
                    let c = w[k];
                    // Radial faces.
                    let we = if ue > 0.0 {
                        upwind(at(ii - 1, j), c, at(ii + 1, j))
                    } else if i + 2 <= nr {
                        upwind(at(ii + 2, j), at(ii + 1, j), c)
                    } else {
                        0.5 * (c + at(ii + 1, j))
                    };
                    let ww = if uw > 0.0 {
                        upwind(at(ii - 2, j), at(ii - 1, j), c)
                    } else {
                        upwind(at(ii + 1, j), c, at(ii - 1, j))
                    };
                    // Axial faces (the wall's side centred: no node below it).
                    let wnf = if wn > 0.0 {
                        upwind(w[k - 1], c, w[k + 1])
                    } else if j + 2 <= nz {
                        upwind(w[k + 2], w[k + 1], c)
                    } else {
                        0.5 * (c + w[k + 1])
                    };
                    let wsf = if ws < 0.0 {
                        upwind(w[k + 1], c, w[k - 1])
                    } else if j >= 2 {
                        upwind(w[k - 2], w[k - 1], c)
                    } else {
                        0.5 * (c + w[k - 1])
                    };
                    let advection = -(ue * we - uw * ww + wn * wnf - ws * wsf) / h;
                    // d/dr[(1/r) d(r omega)/dr] + d^2(omega)/dz^2
                    let fe = ((fi + 1.0) * at(ii + 1, j) - fi * c) / (fi + 0.5);
                    let fw = (fi * c - (fi - 1.0) * at(ii - 1, j)) / (fi - 0.5);
                    let diffusion = (fe - fw + w[k + 1] - 2.0 * c + w[k - 1]) / (h * h);
                    *rate = advection + nu * diffusion;
                }
            });
    }
}

/// The face value between `centre` and `down`, `up` the node upstream of
/// `centre` (third-order upwind-biased, kappa = 1/3).
#[inline]
fn upwind(up: f64, centre: f64, down: f64) -> f64 {
    (-up + 5.0 * centre + 2.0 * down) / 6.0
}

/// `out = a start + (1 - a) (field + dt rate)`: a stage of SSP RK3.
fn combine(out: &mut [f64], field: &[f64], rate: &[f64], a: f64, start: &[f64], dt: f64) {
    out.par_iter_mut()
        .zip(field.par_iter().zip(rate.par_iter().zip(start.par_iter())))
        .for_each(|(o, (f, (r, s)))| *o = a * s + (1.0 - a) * (f + dt * r));
}

/// The stream function's equation, `psi_rr - psi_r / r + psi_zz = -r
/// omega` with `psi = 0` on every side: a sine transform along z, then a
/// tridiagonal solve along r for each mode (Thomas, factored once).
struct Poisson {
    nr: usize,
    nz: usize,
    /// A complex transform of `2 nz` (the sine transform of an odd
    /// extension).
    fft: Arc<dyn Fft<f64>>,
    /// For each mode `m = 1..nz` and interior `i = 1..nr`, the factored
    /// system's `c'_i` and `1 / (b - a_i c'_{i-1})`, `[m][i]`.
    upper: Vec<f64>,
    pivot: Vec<f64>,
    /// The transformed right-hand side, `[i][m]`, and `[m][i]`.
    rows: Vec<f64>,
    columns: Vec<f64>,
}

impl Poisson {
    fn new(nr: usize, nz: usize) -> Self {
        let (ni, nm) = (nr - 1, nz - 1);
        let mut upper = vec![0.0; nm * ni];
        let mut pivot = vec![0.0; nm * ni];
        for m in 0..nm {
            let s = (std::f64::consts::PI * (m + 1) as f64 / (2.0 * nz as f64)).sin();
            let b = -2.0 - 4.0 * s * s;
            let mut c_prev = 0.0;
            for k in 0..ni {
                let i = (k + 1) as f64;
                let (a, c) = (1.0 + 0.5 / i, 1.0 - 0.5 / i);
                let d = 1.0 / (b - if k == 0 { 0.0 } else { a * c_prev });
                pivot[m * ni + k] = d;
                upper[m * ni + k] = c * d;
                c_prev = c * d;
            }
        }
        Self {
            nr,
            nz,
            fft: FftPlanner::new().plan_fft_forward(2 * nz),
            upper,
            pivot,
            rows: vec![0.0; ni * nm],
            columns: vec![0.0; ni * nm],
        }
    }

    /// `psi` of `omega` on a grid of `h` (nodes `i (nz + 1) + j`).
    fn solve(&mut self, omega: &[f64], psi: &mut [f64], h: f64) {
        let (nr, nz) = (self.nr, self.nz);
        let (ni, nm, stride) = (nr - 1, nz - 1, nz + 1);
        let fft = &self.fft;
        // Sine transforms of -h^2 r omega along z.
        self.rows.par_chunks_mut(nm).enumerate().for_each_init(
            || vec![Complex64::default(); 4 * nz],
            |buffer, (k, row)| {
                let i = k + 1;
                let scale = -h * h * (i as f64 * h);
                let line = &omega[i * stride + 1..i * stride + nz];
                sine_transform(fft, line.iter().map(|w| scale * w), row, buffer);
            },
        );
        transpose(&self.rows, &mut self.columns, ni, nm);
        // A tridiagonal solve along r for each mode.
        let (upper, pivot) = (&self.upper, &self.pivot);
        self.columns
            .par_chunks_mut(ni)
            .enumerate()
            .for_each(|(m, col)| {
                let (u, d) = (&upper[m * ni..(m + 1) * ni], &pivot[m * ni..(m + 1) * ni]);
                let mut prev = 0.0;
                for k in 0..ni {
                    let a = 1.0 + 0.5 / (k + 1) as f64;
                    prev = (col[k] - a * prev) * d[k];
                    col[k] = prev;
                }
                for k in (0..ni - 1).rev() {
                    col[k] -= u[k] * col[k + 1];
                }
            });
        transpose(&self.columns, &mut self.rows, nm, ni);
        // Back along z (the sine transform is its own inverse times 2 / nz).
        let rows = &self.rows;
        psi.par_chunks_mut(stride).enumerate().for_each_init(
            || (vec![Complex64::default(); 4 * nz], vec![0.0; nm]),
            |(buffer, line), (i, out)| {
                out.fill(0.0);
                if i == 0 || i == nr {
                    return;
                }
                let row = &rows[(i - 1) * nm..i * nm];
                sine_transform(fft, row.iter().copied(), line, buffer);
                let scale = 2.0 / nz as f64;
                for (o, v) in out[1..nz].iter_mut().zip(line.iter()) {
                    *o = scale * v;
                }
            },
        );
    }
}

/// `out[k - 1] = sum_j a_j sin(pi j k / n)` for `j, k = 1..n` (DST-I, `n
/// = out.len() + 1`) by a complex transform of `2 n` of the odd
/// extension; `buffer` at least `4 n` long (data, then scratch).
fn sine_transform(
    fft: &Arc<dyn Fft<f64>>,
    a: impl Iterator<Item = f64>,
    out: &mut [f64],
    buffer: &mut [Complex64],
) {
    let n = out.len() + 1;
    let (data, scratch) = buffer.split_at_mut(2 * n);
    data.fill(Complex64::default());
    for (j, v) in a.enumerate() {
        data[j + 1] = Complex64::new(v, 0.0);
        data[2 * n - j - 1] = Complex64::new(-v, 0.0);
    }
    fft.process_with_scratch(data, &mut scratch[..fft.get_inplace_scratch_len()]);
    // The transform of the odd extension is -2 i times the sine sums.
    for (k, o) in out.iter_mut().enumerate() {
        *o = -0.5 * data[k + 1].im;
    }
}

/// `to[c][r] = from[r][c]` for `rows x cols`.
fn transpose(from: &[f64], to: &mut [f64], rows: usize, cols: usize) {
    to.par_chunks_mut(rows).enumerate().for_each(|(c, out)| {
        for (r, o) in out.iter_mut().enumerate() {
            *o = from[r * cols + c];
        }
    });
}
