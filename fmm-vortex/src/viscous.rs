//! Viscous diffusion by core spreading (Leonard 1980; yokota2012 eq 4):
//! each particle's Gaussian core grows as `d(sigma^2)/dt = 2 nu`, which
//! is exact for one Gaussian blob (the heat kernel's own spreading) and
//! spreads a field of blobs as the viscous term does while the cores
//! stay small beside the flow's scales; past a set growth the particles
//! must be put back on a fresh lattice (reinitialisation, not done yet).

use crate::error::VortexError;
use crate::integrate::check_dt;
use crate::particles::VortexParticles;

/// Spreads every core of `p` over `dt` at kinematic viscosity `nu`:
/// `sigma^2 += 2 nu dt`.
pub fn spread_cores(p: &mut VortexParticles, nu: f64, dt: f64) -> Result<(), VortexError> {
    let grow = core_growth(nu, dt)?;
    for s in &mut p.sigma {
        *s = (*s * *s + grow).sqrt();
    }
    Ok(())
}

/// What `sigma^2` grows by over `dt` at viscosity `nu` (`2 nu dt`), the
/// two checked.
pub(crate) fn core_growth(nu: f64, dt: f64) -> Result<f64, VortexError> {
    if !(nu.is_finite() && nu >= 0.0) {
        return Err(VortexError::BadSetting {
            what: "the viscosity",
            value: nu,
            why: "must be finite and at least 0",
        });
    }
    check_dt(dt)?;
    Ok(2.0 * nu * dt)
}
