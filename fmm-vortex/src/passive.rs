//! Passive particles: points the flow carries that induce nothing
//! (tracers, dust), targets of the front door that are not sources, moved
//! in the same step as the vortex particles by the velocity those induce
//! at each stage (one evaluation for both).
//!
//! A tracer moves with the flow, `dx/dt = u(x)`. An inertial particle
//! (dust: small, heavy, hu2011's brown-out) follows the flow through
//! Stokes drag with a response time `tau` and settles under gravity `g`:
//! `dx/dt = v`, `dv/dt = (u(x) - v) / tau + g` (the Maxey-Riley equation
//! without the added-mass, pressure and history terms, which a particle
//! much denser than the air does not feel); in still air it falls at
//! `g tau`.

use crate::error::VortexError;
use crate::integrate::{check_dt, pack, pack_rates, unpack, Stepper};
use crate::particles::VortexParticles;
use crate::rates::{Rates, Solver};

/// How passive particles move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Motion {
    /// With the flow.
    Tracer,
    /// Through Stokes drag of response time `response_time`, under
    /// `gravity`.
    Inertial {
        response_time: f64,
        gravity: [f64; 3],
    },
}

/// Passive particles: positions and (inertial) velocities.
#[derive(Clone, Debug, PartialEq)]
pub struct Passive {
    pub x: Vec<[f64; 3]>,
    /// Their own velocities (inertial particles; tracers keep none).
    pub v: Vec<[f64; 3]>,
    pub motion: Motion,
}

impl Passive {
    /// Tracers at `x`.
    pub fn tracers(x: Vec<[f64; 3]>) -> Result<Self, VortexError> {
        let p = Passive {
            v: Vec::new(),
            x,
            motion: Motion::Tracer,
        };
        p.check()?;
        Ok(p)
    }

    /// Inertial particles at `x` with velocities `v`.
    pub fn inertial(
        x: Vec<[f64; 3]>,
        v: Vec<[f64; 3]>,
        response_time: f64,
        gravity: [f64; 3],
    ) -> Result<Self, VortexError> {
        let p = Passive {
            x,
            v,
            motion: Motion::Inertial {
                response_time,
                gravity,
            },
        };
        p.check()?;
        Ok(p)
    }

    pub fn len(&self) -> usize {
        self.x.len()
    }

    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Finite positions and velocities, a positive response time, finite
    /// gravity, velocities for every inertial particle: else an error
    /// naming the value.
    pub fn check(&self) -> Result<(), VortexError> {
        let bad = |index, what, value, why| VortexError::BadParticle {
            index,
            what,
            value,
            why,
        };
        let setting = |what, value, why| VortexError::BadSetting { what, value, why };
        let velocities = match self.motion {
            Motion::Tracer => 0,
            Motion::Inertial {
                response_time,
                gravity,
            } => {
                if !(response_time.is_finite() && response_time > 0.0) {
                    return Err(setting(
                        "the passive particles' response time",
                        response_time,
                        "must be finite and positive",
                    ));
                }
                if let Some(&g) = gravity.iter().find(|g| !g.is_finite()) {
                    return Err(setting("gravity", g, "must be finite"));
                }
                self.x.len()
            }
        };
        if self.v.len() != velocities {
            return Err(VortexError::LengthMismatch {
                what: "the passive particles' velocities",
                got: self.v.len(),
                expected: velocities,
            });
        }
        for (what, set) in [
            ("a passive position", &self.x),
            ("a passive velocity", &self.v),
        ] {
            for (i, v) in set.iter().enumerate() {
                if let Some(&c) = v.iter().find(|c| !c.is_finite()) {
                    return Err(bad(i, what, c, "not finite"));
                }
            }
        }
        Ok(())
    }

    /// Values of state a particle carries (3 a tracer, 6 inertial).
    fn width(&self) -> usize {
        match self.motion {
            Motion::Tracer => 3,
            Motion::Inertial { .. } => 6,
        }
    }
}

impl Stepper {
    /// One step of `dt` of the vortex particles `p` and the passive
    /// particles `q` together, every stage's velocity at `q` from the same
    /// evaluation as `p`'s rates (by `solver`); `p`'s rates at the step's
    /// start are handed back. A stepper used here carries both sets'
    /// state between steps: give the vortex particles one of their own
    /// for [`Stepper::step_particles`], and checkpoints hold only those.
    pub fn step_with_passive(
        &mut self,
        p: &mut VortexParticles,
        q: &mut Passive,
        dt: f64,
        solver: &Solver,
    ) -> Result<Rates, VortexError> {
        check_dt(dt)?;
        q.check()?;
        let (n, m, w) = (p.len(), q.len(), q.width());
        let mut y = Vec::with_capacity(6 * n + w * m);
        pack(p, &mut y);
        for i in 0..m {
            y.extend(q.x[i]);
            if w == 6 {
                y.extend(q.v[i]);
            }
        }
        let mut work = p.clone();
        let mut first = None;
        let mut at = vec![[0.0; 3]; m];
        self.step(&mut y, dt, |s: &Vec<f64>| {
            unpack(s, &mut work);
            let passive = &s[6 * n..];
            for (i, a) in at.iter_mut().enumerate() {
                *a = [passive[w * i], passive[w * i + 1], passive[w * i + 2]];
            }
            let (r, u) = solver.rates_with(&work, &at)?;
            let mut k = Vec::with_capacity(s.len());
            pack_rates(&r, &mut k);
            for i in 0..m {
                match q.motion {
                    Motion::Tracer => k.extend(u[i]),
                    Motion::Inertial {
                        response_time,
                        gravity,
                    } => {
                        let v = &passive[w * i + 3..w * i + 6];
                        k.extend(v);
                        for c in 0..3 {
                            k.push((u[i][c] - v[c]) / response_time + gravity[c]);
                        }
                    }
                }
            }
            first.get_or_insert(r);
            Ok(k)
        })?;
        unpack(&y, p);
        let passive = &y[6 * n..];
        for i in 0..m {
            q.x[i] = [passive[w * i], passive[w * i + 1], passive[w * i + 2]];
            if w == 6 {
                q.v[i] = [passive[w * i + 3], passive[w * i + 4], passive[w * i + 5]];
            }
        }
        p.check()?;
        q.check()?;
        Ok(first.expect("a step evaluates the rates"))
    }
}
