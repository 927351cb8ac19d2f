//! A cell's moments about its box's centre: what its neutrality, the
//! neutralising background and the vacuum boundary's surface term are
//! made of.

// Axes and strength components index several arrays at once.
#![allow(clippy::needless_range_loop)]

use super::{Boundary, PeriodicBox};
use crate::error::Error;

use rayon::prelude::*;
use std::f64::consts::PI;

/// A cell's moments about the box's centre, per strength component: the
/// total, the dipole and the second moment; what the background and the
/// surface term are made of.
pub struct Moments {
    pub total: Vec<f64>,
    pub dipole: Vec<[f64; 3]>,
    /// `sum_j q_j |x_j - c|^2`.
    pub second: Vec<f64>,
    /// `sum_j q_j (x_j - c)_a^2` by axis `a`.
    pub second_axes: Vec<[f64; 3]>,
    /// The sum of the strengths' sizes (what "neutral" is measured against).
    pub scale: f64,
}

impl Moments {
    pub fn of(pos: &[Vec<f64>; 3], q: &[&[f64]], c: [f64; 3]) -> Self {
        let mut m = Moments {
            total: vec![0.0; q.len()],
            dipole: vec![[0.0; 3]; q.len()],
            second: vec![0.0; q.len()],
            second_axes: vec![[0.0; 3]; q.len()],
            scale: 0.0,
        };
        for (k, qk) in q.iter().enumerate() {
            // total, dipole, second moment by axis, sizes: on every core
            // (10^7 sources a step of a simulation).
            let sums = (0..qk.len())
                .into_par_iter()
                .fold(
                    || [0.0f64; 8],
                    |mut acc, j| {
                        let s = qk[j];
                        let r = [0, 1, 2].map(|a| pos[a][j] - c[a]);
                        acc[0] += s;
                        for a in 0..3 {
                            acc[1 + a] += s * r[a];
                            acc[4 + a] += s * r[a] * r[a];
                        }
                        acc[7] += s.abs();
                        acc
                    },
                )
                .reduce(|| [0.0; 8], |a, b| std::array::from_fn(|i| a[i] + b[i]));
            m.total[k] = sums[0];
            m.dipole[k] = [sums[1], sums[2], sums[3]];
            m.second_axes[k] = [sums[4], sums[5], sums[6]];
            m.second[k] = sums[4] + sums[5] + sums[6];
            m.scale += sums[7];
        }
        m
    }

    /// A net strength is an error unless the box has a background; the
    /// vacuum boundary needs a neutral cell.
    pub fn check(&self, pbox: &PeriodicBox) -> Result<(), Error> {
        let net = self.total.iter().map(|t| t.abs()).fold(0.0, f64::max);
        let charged = net > NEUTRAL * self.scale;
        if charged && (!pbox.background || pbox.boundary == Boundary::Vacuum) {
            return Err(Error::NetStrength {
                domain: pbox.name(),
                total: net,
                scale: self.scale,
            });
        }
        Ok(())
    }

    /// The vacuum boundary's surface term of component `k` at `x` (box of
    /// `volume`, centre `c`): its potential and gradient.
    pub fn surface(&self, k: usize, volume: f64, x: [f64; 3], c: [f64; 3]) -> (f64, [f64; 3]) {
        let f = 4.0 * PI / (3.0 * volume);
        let d = self.dipole[k];
        let r = [0, 1, 2].map(|a| x[a] - c[a]);
        let phi = f * (d[0] * r[0] + d[1] * r[1] + d[2] * r[2]) - 0.5 * f * self.second[k];
        (phi, d.map(|da| f * da))
    }
}

impl Moments {
    /// What the image levels' sum about the box leaves out, for component
    /// `k` at `x` of the unit box (side 1, centred on the origin), the sum
    /// covering `BLOCK^levels` boxes a side: its potential and gradient, to
    /// be added.
    ///
    /// - Three periodic axes: the images add up to the vacuum boundary's
    ///   value; tin foil takes the surface term off.
    /// - A slab: the lattice of a cell with a dipole or a second moment
    ///   converges only as `1 / R` over growing squares (`R` the square's
    ///   half-side): the dipole and quadrupole of the cells outside it,
    ///   their in-plane average integrated, `sum 1/rho^3 = 4 sqrt 2 / R` per
    ///   unit area outside a square. With it the rest falls as `1 / R^3`.
    /// - A wire: the sum converges as `1 / R^2`; nothing to add.
    pub fn beyond_images(
        &self,
        b: &PeriodicBox,
        k: usize,
        levels: u32,
        x: [f64; 3],
    ) -> (f64, [f64; 3]) {
        match b.periodic_axes() {
            3 if b.boundary == Boundary::TinFoil => {
                let (phi, grad) = self.surface(k, 1.0, x, [0.0; 3]);
                (-phi, grad.map(|g| -g))
            }
            2 => {
                let open = (0..3)
                    .find(|&a| !b.axes[a])
                    .expect("a slab has an open axis");
                let r = 0.5 * (super::BLOCK as f64).powi(levels as i32);
                let f = 2f64.sqrt() / r;
                // Weights: in-plane 1, the normal -2.
                let w = |a: usize| if a == open { -2.0 } else { 1.0 };
                let p = self.dipole[k];
                let quad: f64 = (0..3).map(|a| w(a) * self.second_axes[k][a]).sum();
                let lin: f64 = (0..3).map(|a| w(a) * x[a] * p[a]).sum();
                (
                    f * (quad - 2.0 * lin),
                    [0, 1, 2].map(|a| -2.0 * f * w(a) * p[a]),
                )
            }
            _ => (0.0, [0.0; 3]),
        }
    }
}

/// A cell is neutral where its net strength is at most this fraction of
/// its strengths' sizes (f32 strengths that a user balanced in f64 sum to
/// about 1e-8 of it at 10^6 particles, far below).
pub const NEUTRAL: f64 = 1e-6;
