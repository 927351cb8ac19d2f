//! The thin vortex ring: its particles, where it is, and the classical
//! speed it moves at.

use std::f64::consts::PI;

use crate::diagnostics::norm;
use crate::error::VortexError;
use crate::particles::VortexParticles;
use crate::rates::Rates;

/// The Euler-Mascheroni constant (both ring speeds' constants hold it).
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// A circular vortex ring about the z axis through `center`, of radius
/// `radius` and circulation `circulation` (moving towards +z for a
/// positive one), of particles of core `sigma`. Its core: a line of
/// particles (`core` 0: the cross-section's vorticity a Gaussian of
/// standard deviation `sigma` where the particles overlap), or a Gaussian
/// of standard deviation `core` resolved by particles on a square lattice
/// of the cross-section, `layers` of them across `core` and out to three
/// `core` (the vorticity then a Gaussian of variance `core^2 + sigma^2`,
/// its tail past three `core` cut). Each circle of particles has `n`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ring {
    pub center: [f64; 3],
    pub radius: f64,
    pub circulation: f64,
    pub sigma: f64,
    pub n: usize,
    pub core: f64,
    pub layers: usize,
}

impl Ring {
    /// A ring of one line of `n` particles.
    pub fn line(radius: f64, circulation: f64, sigma: f64, n: usize) -> Self {
        Ring {
            center: [0.0; 3],
            radius,
            circulation,
            sigma,
            n,
            core: 0.0,
            layers: 0,
        }
    }

    /// A ring whose Gaussian core of width `core` is resolved by `layers`
    /// lattice spacings `h = core / layers` across it, the particles'
    /// cores `overlap h`, and as many particles around each circle as
    /// keep the spacing along it `h` at the ring's radius.
    pub fn resolved(radius: f64, circulation: f64, core: f64, layers: usize, overlap: f64) -> Self {
        let h = core / layers.max(1) as f64;
        let n = (2.0 * std::f64::consts::PI * radius / h).ceil().max(1.0) as usize;
        Ring {
            core,
            layers,
            ..Ring::line(radius, circulation, overlap * h, n)
        }
    }

    /// The standard deviation of the cross-section's Gaussian vorticity
    /// the particles make.
    pub fn core_width(&self) -> f64 {
        (self.core * self.core + self.sigma * self.sigma).sqrt()
    }

    /// Its particles: circles of `n` about the axis, one through each
    /// point of the cross-section, each `alpha` the point's circulation
    /// times the circle's spacing along the tangent, its volume the
    /// spacing times the point's area.
    pub fn particles(&self) -> Result<VortexParticles, VortexError> {
        for (what, v) in [
            ("the ring's radius", self.radius),
            ("the ring's sigma", self.sigma),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(VortexError::BadSetting {
                    what,
                    value: v,
                    why: "must be finite and positive",
                });
            }
        }
        if !(self.core.is_finite() && self.core >= 0.0 && 3.0 * self.core < self.radius) {
            return Err(VortexError::BadSetting {
                what: "the ring's core",
                value: self.core,
                why: "must be at least 0 and three of it within the radius",
            });
        }
        if self.n < 3 {
            return Err(VortexError::BadSetting {
                what: "the ring's particle count",
                value: self.n as f64,
                why: "at least 3",
            });
        }
        // The cross-section's points (offsets in the ring's plane and
        // along its axis) and their share of the circulation.
        let mut section = vec![(0.0, 0.0, 1.0)];
        if self.core > 0.0 && self.layers > 0 {
            let h = self.core / self.layers as f64;
            let m = 3 * self.layers as i64;
            section.clear();
            for i in -m..=m {
                for j in -m..=m {
                    let (a, b) = (i as f64 * h, j as f64 * h);
                    let r2 = a * a + b * b;
                    if r2 <= 9.0 * self.core * self.core {
                        let w = (-r2 / (2.0 * self.core * self.core)).exp();
                        section.push((a, b, w * h * h));
                    }
                }
            }
            let total: f64 = section.iter().map(|s| s.2).sum();
            section.iter_mut().for_each(|s| s.2 /= total);
        }
        let (mut x, mut alpha, mut volume) = (Vec::new(), Vec::new(), Vec::new());
        let [cx, cy, cz] = self.center;
        for &(dr, dz, share) in &section {
            let r = self.radius + dr;
            let arc = 2.0 * PI * r / self.n as f64;
            for i in 0..self.n {
                let phi = 2.0 * PI * i as f64 / self.n as f64;
                let (s, c) = phi.sin_cos();
                x.push([cx + r * c, cy + r * s, cz + dz]);
                let a = self.circulation * share * arc;
                alpha.push([-s * a, c * a, 0.0]);
                volume.push(arc * arc * arc);
            }
        }
        let sigma = vec![self.sigma; x.len()];
        VortexParticles::new(x, alpha, sigma, volume)
    }
}

/// The axial position of a ring about the z axis: the centre of its
/// linear impulse, `Z = sum w z / sum w` with `w = (x x alpha)_z` (each
/// particle's share of the impulse, `rho |alpha|` for a strength along
/// the ring), the position Saffman's speed is the speed of.
pub fn impulse_centre(p: &VortexParticles) -> f64 {
    let (mut sw, mut swz) = (0.0, 0.0);
    for (x, a) in p.x.iter().zip(&p.alpha) {
        let w = x[0] * a[1] - x[1] * a[0];
        sw += w;
        swz += w * x[2];
    }
    swz / sw
}

/// The rate of [`impulse_centre`] under the rates `r`: the particles'
/// axial velocities weighted by their share of the impulse, and the
/// shares' own rates (radial motion, stretching). For a ring whose core
/// is resolved across, Saffman's speed; a ring of one line of particles
/// moves at the velocity on its core's centre line instead (see
/// [`line_ring_speed`]).
pub fn impulse_centre_speed(p: &VortexParticles, r: &Rates) -> f64 {
    let z = impulse_centre(p);
    let (mut sw, mut num) = (0.0, 0.0);
    for i in 0..p.len() {
        let (x, a, u, da) = (p.x[i], p.alpha[i], r.u[i], r.dalpha[i]);
        let w = x[0] * a[1] - x[1] * a[0];
        let dw = u[0] * a[1] - u[1] * a[0] + x[0] * da[1] - x[1] * da[0];
        sw += w;
        num += dw * (x[2] - z) + w * u[2];
    }
    num / sw
}

/// The radius of a ring about the z axis: its particles' distances from
/// the axis, weighted by their strengths.
pub fn ring_radius(p: &VortexParticles) -> f64 {
    let (mut sw, mut swr) = (0.0, 0.0);
    for (x, a) in p.x.iter().zip(&p.alpha) {
        let w = norm(*a);
        sw += w;
        swr += w * (x[0] * x[0] + x[1] * x[1]).sqrt();
    }
    swr / sw
}

/// The speed of a thin ring of circulation `gamma` and radius `radius`
/// whose core's vorticity is a Gaussian of standard deviation `sigma`
/// (`exp(-s^2 / (2 sigma^2))` at a distance `s` from the core's centre):
/// Saffman's (1970) `U = gamma / (4 pi R) (ln(8 R / delta) - 1/2 - (ln 2 -
/// gamma_E) / 2)` for the core `exp(-s^2 / delta^2)`, so `delta = sqrt 2
/// sigma` (the constant is -0.558); good to `O((sigma / R)^2)`.
pub fn thin_ring_speed(gamma: f64, radius: f64, sigma: f64) -> f64 {
    let delta = 2f64.sqrt() * sigma;
    gamma / (4.0 * PI * radius)
        * ((8.0 * radius / delta).ln() - 0.5 - (2f64.ln() - EULER_GAMMA) / 2.0)
}

/// The speed of a ring of one line of particles of Gaussian core `sigma`:
/// the velocity on its core's centre line, `gamma / (4 pi R) (ln(8 R /
/// delta) - 1 + gamma_E / 2)`, `delta = sqrt 2 sigma`. From the thin
/// ring's velocity near its core, `gamma / (4 pi R) (ln(8 R / s) - 1)` at
/// a distance `s` from a line vortex, averaged over the Gaussian core
/// about the centre line (`<ln s> = ln(sqrt 2 sigma) - gamma_E / 2`); its
/// constant 0.7114 against 0.712 measured here at `sigma / R` 0.05.
/// Saffman's ring of the same vorticity moves faster (its constant
/// 0.558): a line of particles cannot carry the core's own motion.
pub fn line_ring_speed(gamma: f64, radius: f64, sigma: f64) -> f64 {
    let delta = 2f64.sqrt() * sigma;
    gamma / (4.0 * PI * radius) * ((8.0 * radius / delta).ln() - 1.0 + EULER_GAMMA / 2.0)
}

/// The velocity `[u_r, u_z]` a circular line vortex of circulation
/// `gamma` and radius `a`, about the z axis in the plane `z = 0`,
/// induces at distance `r` from the axis and height `z`: the Biot-Savart
/// integral around the circle by the trapezoid rule on `m` points (for a
/// periodic smooth integrand, exact to round-off once `m` resolves the
/// point's distance from the line).
pub fn filament_velocity(gamma: f64, a: f64, r: f64, z: f64, m: usize) -> [f64; 2] {
    let (mut ur, mut uz) = (0.0, 0.0);
    let dphi = 2.0 * PI / m as f64;
    for k in 0..m {
        let (s, c) = (k as f64 * dphi).sin_cos();
        // dl = a (-sin, cos, 0) dphi; x - y = (r - a cos, -a sin, z).
        let d = [r - a * c, -a * s, z];
        let dl = [-a * s, a * c, 0.0];
        let r3 = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).powf(1.5);
        // (dl x d): x and z components (the point lies in the x-z plane).
        ur += (dl[1] * d[2] - dl[2] * d[1]) / r3;
        uz += (dl[0] * d[1] - dl[1] * d[0]) / r3;
    }
    let f = gamma / (4.0 * PI) * dphi;
    [f * ur, f * uz]
}

/// The thin-ring model of a ring of one line of particles (core `sigma`,
/// circulation `gamma`) of radius `radius` at height `height` above a
/// ground plane `z = 0`: `[dR/dt, dh/dt]`, its own speed
/// ([`line_ring_speed`]) plus the velocity its image (the ring reflected,
/// circulation `-gamma`) induces on its centre line. Good while the ring
/// is a few cores from the plane; nearer, the cores deform, which the
/// model does not see.
pub fn line_ring_over_ground(gamma: f64, radius: f64, height: f64, sigma: f64) -> [f64; 2] {
    let [ur, uz] = filament_velocity(-gamma, radius, radius, 2.0 * height, 4096);
    [ur, line_ring_speed(gamma, radius, sigma) + uz]
}
