//! The vorticity of particles on an open lattice made divergence-free
//! (Cottet and Koumoutsakos 2000, section 6.5; the open-space companion
//! of `remesh::filter_lattice`'s projection in a periodic box). Remeshed
//! or stretched particles carry a vorticity whose divergence no longer
//! vanishes, and the Biot-Savart velocity of such a field is not the
//! field's: the remeshed leapfrogging rings lost their impulse ten times
//! faster than rings never remeshed (docs/VORTEX.md).
//!
//! On the lattice (spacing `h`, the particles on its points), the
//! divergence `D = div w` by central differences; the gradient part of
//! `w` is `grad F` with `lap F = D`, so `w - grad F` is solenoidal, and
//! in open space `grad F (x) = 1/(4 pi) sum_j D_j h^3 (x - x_j) / |x -
//! x_j|^3`: the field of charges `D_j h^3`, summed by the front door's
//! Coulomb kernel at the solver's method and backend. The correction
//! reaches one point past the particles (where `D` can be nonzero);
//! points whose strength is below `cull` times the largest are left out.
//!
//! What it is good for, measured: on a resolved field it takes a
//! gradient out to 4% and moves a solenoidal one by 5e-3 (the central
//! differences' own error, `tests/solenoidal.rs`); on the remeshed
//! leapfrogging rings (cores of one spacing) it did not help: each
//! filtering moved the pair's impulse by up to 9.9e-4 (a correction
//! reaching three points past the particles: 9.2e-4) and the drift by
//! t = 4 was 2.3e-3 against 1.9e-3 without (`vortex_leapfrog --t-end 4
//! --remesh-every 40 --remesh-cull 0 --solenoidal`, 2-core CPU): there the
//! central differences see the under-resolved cores, not a divergence.

use fmm_core::kernels::Coulomb;
use fmm_core::{Domain, Particles, Real};
use std::collections::HashMap;

use crate::error::VortexError;
use crate::particles::VortexParticles;
use crate::rates::Solver;
use crate::remesh::Lattice;

/// What [`make_solenoidal`] made.
#[derive(Clone, Debug)]
pub struct Solenoidal {
    pub particles: VortexParticles,
    /// The r.m.s. divergence on the lattice (central differences) times
    /// `h` over the r.m.s. vorticity before, before and after.
    pub divergence_before: f64,
    pub divergence_after: f64,
}

/// A lattice point's index.
type Key = [i64; 3];

/// `k` moved by `s` points along axis `a`.
fn shifted(k: Key, a: usize, s: i64) -> Key {
    let mut m = k;
    m[a] += s;
    m
}

/// The central-difference divergence at `k` of the lattice field `w`.
fn divergence(w: &HashMap<Key, [f64; 3]>, k: Key, h: f64) -> f64 {
    let at = |k: Key, a: usize| w.get(&k).map_or(0.0, |v| v[a]);
    (0..3)
        .map(|a| (at(shifted(k, a, 1), a) - at(shifted(k, a, -1), a)) / (2.0 * h))
        .sum()
}

/// The points of `w` and their six neighbours, sorted, once each.
fn with_neighbours(w: &HashMap<Key, [f64; 3]>) -> Vec<Key> {
    let mut all: Vec<Key> = w
        .keys()
        .flat_map(|&k| {
            (0..3)
                .flat_map(move |a| [shifted(k, a, 1), shifted(k, a, -1)])
                .chain([k])
        })
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// The root of the sum of the squared divergences of `w` times `h`.
fn divergence_norm(w: &HashMap<Key, [f64; 3]>, h: f64) -> f64 {
    let points = with_neighbours(w);
    let d2: f64 = points.iter().map(|&k| divergence(w, k, h).powi(2)).sum();
    d2.sqrt() * h
}

/// The particles `p`, which sit on the points of the open `lattice` (as
/// `remesh::remesh` leaves them), with their vorticity's gradient part
/// taken out by one evaluation of `solver`'s method and backend, in f64
/// (free space only).
pub fn make_solenoidal(
    p: &VortexParticles,
    lattice: &Lattice,
    cull: f64,
    solver: &Solver,
) -> Result<Solenoidal, VortexError> {
    let Lattice::Open { origin, h } = *lattice else {
        return Err(VortexError::BadSetting {
            what: "the divergence filter's lattice",
            value: f64::NAN,
            why: "must be open (a periodic box projects on its lattice: remesh::filter_lattice)",
        });
    };
    if !matches!(solver.domain, Domain::FreeSpace) {
        return Err(VortexError::BadSetting {
            what: "the divergence filter's domain",
            value: f64::NAN,
            why: "must be free space",
        });
    }
    if !(cull.is_finite() && (0.0..1.0).contains(&cull)) {
        return Err(VortexError::BadSetting {
            what: "the divergence filter's cull",
            value: cull,
            why: "must be at least 0 and below 1",
        });
    }
    p.check()?;
    let h3 = h * h * h;
    let mut w: HashMap<Key, [f64; 3]> = HashMap::with_capacity(p.len());
    let mut sigma: HashMap<Key, f64> = HashMap::with_capacity(p.len());
    for (i, x) in p.x.iter().enumerate() {
        let s = [0, 1, 2].map(|a| (x[a] - origin[a]) / h - 0.5);
        let k = s.map(|v| v.round() as i64);
        if (0..3).any(|a| (s[a] - k[a] as f64).abs() > 1e-6) {
            return Err(VortexError::BadParticle {
                index: i,
                what: "a position",
                value: x[0],
                why: "off the lattice's points (remesh first)",
            });
        }
        if w.insert(k, p.alpha[i].map(|c| c / h3)).is_some() {
            return Err(VortexError::BadParticle {
                index: i,
                what: "a position",
                value: x[0],
                why: "a lattice point taken by another particle",
            });
        }
        sigma.insert(k, p.sigma[i]);
    }
    let scale: f64 = w.values().flatten().map(|c| c * c).sum::<f64>().sqrt();
    let scale = if scale > 0.0 { scale } else { 1.0 };
    let before = divergence_norm(&w, h) / scale;
    let points = with_neighbours(&w);
    let charges: Vec<(Key, f64)> = points
        .iter()
        .map(|&k| (k, divergence(&w, k, h) * h3))
        .filter(|(_, q)| *q != 0.0)
        .collect();
    let place = |k: &Key| [0, 1, 2].map(|a| origin[a] + (k[a] as f64 + 0.5) * h);
    let at: Vec<[f64; 3]> = points.iter().map(place).collect();
    let source_x: Vec<[f64; 3]> = charges.iter().map(|(k, _)| place(k)).collect();
    let q: Vec<f64> = charges.iter().map(|c| c.1).collect();
    // In f64 whatever the solver's precision: the charges sum to zero
    // and their field is a difference of large terms (and one precision
    // is one instantiation of every method for the Coulomb kernel less
    // to compile).
    let field = coulomb_field::<f64>(solver, &at, &source_x, &q)?;
    let fallback = p.sigma.iter().sum::<f64>() / p.len().max(1) as f64;
    let mut out: HashMap<Key, [f64; 3]> = HashMap::with_capacity(points.len());
    for (k, e) in points.iter().zip(&field) {
        let old = w.get(k).copied().unwrap_or([0.0; 3]);
        out.insert(
            *k,
            [0, 1, 2].map(|a| old[a] - e[a] / (4.0 * std::f64::consts::PI)),
        );
    }
    let size = |v: &[f64; 3]| (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    let largest = out.values().map(size).fold(0.0, f64::max);
    out.retain(|_, v| size(v) > 0.0 && size(v) >= cull * largest);
    let after = divergence_norm(&out, h) / scale;
    let mut keys: Vec<Key> = out.keys().copied().collect();
    keys.sort_unstable();
    let particles = VortexParticles::new(
        keys.iter().map(place).collect(),
        keys.iter().map(|k| out[k].map(|c| c * h3)).collect(),
        keys.iter()
            .map(|k| sigma.get(k).copied().unwrap_or(fallback))
            .collect(),
        vec![h3; keys.len()],
    )?;
    Ok(Solenoidal {
        particles,
        divergence_before: before,
        divergence_after: after,
    })
}

/// The Coulomb field `sum_j q_j (x - x_j) / |x - x_j|^3` at `at`, by
/// `solver`'s method and backend in precision `R`.
fn coulomb_field<R: Real>(
    solver: &Solver,
    at: &[[f64; 3]],
    x: &[[f64; 3]],
    q: &[f64],
) -> Result<Vec<[f64; 3]>, VortexError> {
    if x.is_empty() {
        return Ok(vec![[0.0; 3]; at.len()]);
    }
    let to = |v: &[[f64; 3]]| -> Vec<[R; 3]> { v.iter().map(|a| a.map(|c| R::c(c))).collect() };
    let targets = Particles::targets::<Coulomb>(&to(at))?;
    let mut sources = Particles::sources::<Coulomb>(&to(x))?;
    let q: Vec<R> = q.iter().map(|&v| R::c(v)).collect();
    sources.set("q", &q)?;
    let e = solver.evaluate::<Coulomb, R>(&targets, &sources)?;
    let f = e.outputs.vec3("e")?;
    Ok((0..at.len())
        .map(|i| [f[0][i].to_f64(), f[1][i].to_f64(), f[2][i].to_f64()])
        .collect())
}
