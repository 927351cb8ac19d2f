//! A set of vortex particles: positions `x`, strength vectors `alpha` (the
//! vorticity a particle carries times its volume), Gaussian core radii
//! `sigma` and volumes, in f64 on the host between steps.

use std::collections::HashMap;

use crate::error::VortexError;

/// Vortex particles (structure of arrays, one entry a particle).
#[derive(Clone, Debug, PartialEq)]
pub struct VortexParticles {
    pub x: Vec<[f64; 3]>,
    pub alpha: Vec<[f64; 3]>,
    pub sigma: Vec<f64>,
    pub volume: Vec<f64>,
}

impl VortexParticles {
    /// Particles at `x` with strengths `alpha`, cores `sigma` and volumes
    /// `volume`; every value checked ([`VortexParticles::check`]).
    pub fn new(
        x: Vec<[f64; 3]>,
        alpha: Vec<[f64; 3]>,
        sigma: Vec<f64>,
        volume: Vec<f64>,
    ) -> Result<Self, VortexError> {
        let p = VortexParticles {
            x,
            alpha,
            sigma,
            volume,
        };
        p.check()?;
        Ok(p)
    }

    /// The particles of `range` (a copy).
    pub fn range(&self, range: std::ops::Range<usize>) -> Self {
        VortexParticles {
            x: self.x[range.clone()].to_vec(),
            alpha: self.alpha[range.clone()].to_vec(),
            sigma: self.sigma[range.clone()].to_vec(),
            volume: self.volume[range].to_vec(),
        }
    }

    /// `self` followed by `other`.
    pub fn joined(mut self, other: &Self) -> Self {
        self.x.extend(&other.x);
        self.alpha.extend(&other.alpha);
        self.sigma.extend(&other.sigma);
        self.volume.extend(&other.volume);
        self
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.x.len()
    }

    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// The arrays agree in length, positions and strengths are finite,
    /// cores and volumes finite and positive: else an error naming the
    /// particle and the value.
    pub fn check(&self) -> Result<(), VortexError> {
        let n = self.x.len();
        for (what, got) in [
            ("alpha", self.alpha.len()),
            ("sigma", self.sigma.len()),
            ("volume", self.volume.len()),
        ] {
            if got != n {
                return Err(VortexError::LengthMismatch {
                    what,
                    got,
                    expected: n,
                });
            }
        }
        let bad = |index, what, value: f64, why| VortexError::BadParticle {
            index,
            what,
            value,
            why,
        };
        for i in 0..n {
            for (what, v) in [("a position", self.x[i]), ("alpha", self.alpha[i])] {
                if let Some(&c) = v.iter().find(|c| !c.is_finite()) {
                    return Err(bad(i, what, c, "not finite"));
                }
            }
            for (what, v) in [("sigma", self.sigma[i]), ("its volume", self.volume[i])] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(bad(i, what, v, "must be finite and positive"));
                }
            }
        }
        Ok(())
    }
}

/// The pairs `(j, i)` of a source `j` at exactly the point `at[i]`: where
/// a kernel of the DSL adds nothing (zero separation) and what needs a
/// blob's value there adds it itself.
pub(crate) fn coincident(sources: &[[f64; 3]], at: &[[f64; 3]]) -> Vec<(usize, usize)> {
    let key = |v: &[f64; 3]| v.map(f64::to_bits);
    let mut points: HashMap<[u64; 3], Vec<usize>> = HashMap::new();
    for (i, y) in at.iter().enumerate() {
        points.entry(key(y)).or_default().push(i);
    }
    let mut pairs = Vec::new();
    for (j, x) in sources.iter().enumerate() {
        if let Some(on) = points.get(&key(x)) {
            pairs.extend(on.iter().map(|&i| (j, i)));
        }
    }
    pairs
}
