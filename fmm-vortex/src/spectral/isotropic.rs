//! A random isotropic velocity field of a prescribed energy spectrum: the
//! decaying-turbulence cases' initial field (yokota2009 section 5.1 and
//! yokota2012 section 2.2: solenoidal, Gaussian, random phases, made in
//! Fourier space), from which the spectral solver and the particles both
//! start.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use rustfft::num_complex::Complex64;

use super::{check, SpectralNs};
use crate::error::VortexError;

/// The model spectrum `E(k) = (k / kp)^4 exp(-2 (k / kp)^2)` (Passot and
/// Pouquet 1987), unnormalised: energy in the large scales about `kp`,
/// `k^4` below them.
pub fn passot_pouquet(k: f64, kp: f64) -> f64 {
    let x = k / kp;
    x.powi(4) * (-2.0 * x * x).exp()
}

impl SpectralNs {
    /// A solenoidal velocity field on `n^3` points of a box of side
    /// `side`: each coefficient three complex Gaussians (uniform phases)
    /// made Hermitian (a real field) and divergence-free, then scaled shell
    /// by shell so that [`Self::spectrum`] is `spectrum(k) dk` exactly in
    /// the shells `j = 1 .. n/2 - 1` (`k = 2 pi j / side`, `dk = 2 pi /
    /// side`) and zero past them (a sphere: the field isotropic up to
    /// the grid's corners). The same `seed` gives the same field.
    pub fn isotropic(
        n: usize,
        side: f64,
        nu: f64,
        spectrum: impl Fn(f64) -> f64,
        seed: u64,
    ) -> Result<Self, VortexError> {
        check(n, side, nu)?;
        let dk = std::f64::consts::TAU / side;
        let top = n / 2 - 1;
        let target: Vec<f64> = (0..=top).map(|j| spectrum(j as f64 * dk) * dk).collect();
        if let Some(&e) = target[1..].iter().find(|e| !(e.is_finite() && **e >= 0.0)) {
            return Err(VortexError::BadSetting {
                what: "the prescribed spectrum",
                value: e / dk,
                why: "must be finite and at least 0 at every shell's wavenumber",
            });
        }
        // Integer wavenumbers of an index along an axis.
        let m = |i: usize| -> i64 {
            if i < n / 2 {
                i as i64
            } else {
                i as i64 - n as i64
            }
        };
        let len = n * n * n;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut gauss = move || {
            // Box-Muller.
            let (a, b): (f64, f64) = (rng.gen::<f64>().max(f64::MIN_POSITIVE), rng.gen());
            let r = (-2.0 * a.ln()).sqrt();
            Complex64::new(
                r * (std::f64::consts::TAU * b).cos(),
                r * (std::f64::consts::TAU * b).sin(),
            )
        };
        let z: [Vec<Complex64>; 3] = [(); 3].map(|_| (0..len).map(|_| gauss()).collect());
        // Hermitian: u_k = (z_k + conj z_{-k}) / 2.
        let mirror = |i: usize| {
            let (x, y, w) = (i % n, (i / n) % n, i / (n * n));
            (((n - w) % n) * n + (n - y) % n) * n + (n - x) % n
        };
        let u: [Vec<Complex64>; 3] = z.each_ref().map(|c| {
            (0..len)
                .into_par_iter()
                .map(|i| (c[i] + c[mirror(i)].conj()) * 0.5)
                .collect()
        });
        drop(z);
        // Divergence-free, Nyquist planes dropped.
        let mut s = Self::from_coefficients(n, side, nu, u)?;
        // Each mode's shell; past the last, none.
        let shell = |i: usize| -> Option<usize> {
            let k = [m(i % n), m((i / n) % n), m(i / (n * n))];
            let j = ((k[0] * k[0] + k[1] * k[1] + k[2] * k[2]) as f64)
                .sqrt()
                .round() as usize;
            (j >= 1 && j <= top).then_some(j)
        };
        // Each shell's energy, summed over blocks of modes on every core.
        let have = (0..len)
            .into_par_iter()
            .fold(
                || vec![0.0; top + 1],
                |mut have, i| {
                    if let Some(j) = shell(i) {
                        have[j] += 0.5 * (0..3).map(|c| s.u[c][i].norm_sqr()).sum::<f64>();
                    }
                    have
                },
            )
            .reduce(
                || vec![0.0; top + 1],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                    a
                },
            );
        for c in &mut s.u {
            c.par_iter_mut().enumerate().for_each(|(i, v)| {
                *v *= match shell(i) {
                    Some(j) if have[j] > 0.0 => (target[j] / have[j]).sqrt(),
                    _ => 0.0,
                };
            });
        }
        Ok(s)
    }
}
