//! The field's integrals: kinetic energy, enstrophy and helicity of the
//! particles' Gaussian-blob vorticity (Winckelmans and Leonard 1993), by
//! one evaluation of the DSL kernel [`BlobIntegrals`] through the front
//! door, at the particles.
//!
//! With `omega = sum_i alpha_i zeta_sigma_i(x - x_i)`, a Gaussian blob
//! convolved with another is a Gaussian of the summed variances, so each
//! integral is a double sum over pairs with the width `s_ij = sqrt(sigma_i^2
//! + sigma_j^2)`:
//!
//! - energy `E = 1/2 int psi . omega = 1/2 sum_ij alpha_i . alpha_j
//!   G_s(r_ij)`, `G_s(r) = erf(r / (sqrt 2 s)) / (4 pi r)` (the vector
//!   potential of a blob);
//! - enstrophy `Z = int omega . omega = sum_ij alpha_i . alpha_j
//!   zeta_s(r_ij)`;
//! - helicity `H = int u . omega = sum_ij alpha_i . u_s,j(x_i)`, the
//!   Biot-Savart velocity of blob `j` of width `s` at `x_i`.
//!
//! The terms of zero separation (each particle with itself, and any two
//! at one point), which a kernel of the DSL leaves out, are added here:
//! `G_s(0) = sqrt(2 / pi) / (4 pi s)`, `zeta_s(0) = (2 pi)^(-3/2) s^-3`,
//! the velocity's 0. An inviscid flow keeps `E` and `H`; viscosity takes
//! energy away at `dE/dt = -nu Z`.

use fmm_core::{kernel, Particles};

use crate::error::VortexError;
use crate::particles::{coincident, VortexParticles};
use crate::rates::Solver;

kernel! {
    /// Pairs of Gaussian blobs of widths `sigma` (the source's) and
    /// `sigma_i` (the target's), as a blob of the two's summed variance:
    /// its vector potential `psi`, its vorticity `w` and its velocity `u`
    /// at the target ([`crate::integrals`]).
    pub kernel BlobIntegrals {
        source alpha: vec3;
        source sigma;
        target sigma_i;
        output psi: vec3;
        output w: vec3;
        output u: vec3;
        require sigma > 0.0;
        strength alpha;
        let s2 = sigma * sigma + sigma_i * sigma_i;
        let s = sqrt(s2);
        let inv_r = select(r2 > 0.0, 1.0 / r, 0.0);
        let rho = r / s;
        let e = exp(-0.5 * rho * rho);
        let erf_rho = erf(rho * sqrt(0.5));
        let g = erf_rho - sqrt(2.0 / PI) * rho * e;
        psi += erf_rho * inv_r / (4.0 * PI) * alpha;
        w += select(r2 > 0.0, e / (s2 * s * 2.0 * PI * sqrt(2.0 * PI)), 0.0) * alpha;
        u += g * inv_r * inv_r * inv_r / (4.0 * PI) * cross(alpha, d);
    }
}

/// The energy, enstrophy and helicity of a particle set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FieldIntegrals {
    pub energy: f64,
    pub enstrophy: f64,
    pub helicity: f64,
}

impl Solver {
    /// The integrals of the particles' vorticity field (one evaluation,
    /// by this solver's backend and method, in f64 whatever its
    /// precision: a diagnostic, and one precision instantiates every
    /// method for this kernel once, not twice).
    pub fn integrals(&self, p: &VortexParticles) -> Result<FieldIntegrals, VortexError> {
        p.check()?;
        let n = p.len();
        let mut sources = Particles::sources::<BlobIntegrals>(&p.x)?;
        sources
            .set_vec3("alpha", &p.alpha)?
            .set("sigma", &p.sigma)?;
        let mut targets = Particles::targets::<BlobIntegrals>(&p.x)?;
        targets.set("sigma_i", &p.sigma)?;
        let e = self.evaluate::<BlobIntegrals, f64>(&targets, &sources)?;
        let dot =
            |v: [&[f64]; 3], i: usize| -> f64 { (0..3).map(|c| v[c][i] * p.alpha[i][c]).sum() };
        let (psi, w, u) = (
            e.outputs.vec3("psi")?,
            e.outputs.vec3("w")?,
            e.outputs.vec3("u")?,
        );
        let mut out = FieldIntegrals {
            energy: 0.0,
            enstrophy: 0.0,
            helicity: 0.0,
        };
        for i in 0..n {
            out.energy += 0.5 * dot(psi, i);
            out.enstrophy += dot(w, i);
            out.helicity += dot(u, i);
        }
        // Zero separation: each particle with itself and any other on its
        // point.
        let pi = std::f64::consts::PI;
        for (j, i) in coincident(&p.x, &p.x) {
            let s = (p.sigma[i].powi(2) + p.sigma[j].powi(2)).sqrt();
            let aa: f64 = (0..3).map(|c| p.alpha[i][c] * p.alpha[j][c]).sum();
            out.energy += 0.5 * aa * (2.0 / pi).sqrt() / (4.0 * pi * s);
            out.enstrophy += aa / ((2.0 * pi).powf(1.5) * s.powi(3));
        }
        Ok(out)
    }
}
