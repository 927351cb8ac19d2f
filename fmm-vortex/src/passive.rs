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
//!
//! Over a ground plane ([`Passive::over_ground`]) a particle that reaches
//! the plane is deposited: it stays on it, at rest (the velocity there is
//! the plane's, so a stage that would take it below evaluates it on the
//! plane). Picking deposited dust up again (saltation, a threshold
//! friction velocity) is a model of its own, not made here.

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
    /// The ground plane `z = z0` the particles settle on, if any.
    pub ground: Option<f64>,
}

impl Passive {
    /// Tracers at `x`.
    pub fn tracers(x: Vec<[f64; 3]>) -> Result<Self, VortexError> {
        let p = Passive {
            v: Vec::new(),
            x,
            motion: Motion::Tracer,
            ground: None,
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
            ground: None,
        };
        p.check()?;
        Ok(p)
    }

    /// The same particles over the ground plane `z = z0`: those on or
    /// below it are put on it (at rest, if inertial).
    pub fn over_ground(mut self, z0: f64) -> Result<Self, VortexError> {
        if !z0.is_finite() {
            return Err(VortexError::BadSetting {
                what: "the ground plane's height",
                value: z0,
                why: "must be finite",
            });
        }
        self.ground = Some(z0);
        self.deposit();
        Ok(self)
    }

    /// The particles that reached the ground put on it, at rest.
    fn deposit(&mut self) {
        let Some(z0) = self.ground else { return };
        for i in 0..self.x.len() {
            if self.x[i][2] <= z0 {
                self.x[i][2] = z0;
                if let Some(v) = self.v.get_mut(i) {
                    *v = [0.0; 3];
                }
            }
        }
    }

    /// How many particles lie on the ground.
    pub fn deposited(&self) -> usize {
        match self.ground {
            Some(z0) => self.x.iter().filter(|x| x[2] <= z0).count(),
            None => 0,
        }
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
        if let Motion::Inertial { response_time, .. } = q.motion {
            // Explicit drag is stable to dt = 2 tau (Heun, AB2) or 2.8 tau
            // (RK4), and accurate only well below: refuse a step past tau.
            if dt > response_time {
                return Err(VortexError::BadSetting {
                    what: "the step for the passive particles' response time",
                    value: dt,
                    why: "must be at most the response time: the drag would be unstable \
                          (take a shorter step or a longer response time)",
                });
            }
        }
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
        let grounded: Vec<bool> = (0..m)
            .map(|i| q.ground.is_some_and(|z0| q.x[i][2] <= z0))
            .collect();
        self.step(&mut y, dt, |s: &Vec<f64>| {
            unpack(s, &mut work);
            let passive = &s[6 * n..];
            for (i, a) in at.iter_mut().enumerate() {
                *a = [passive[w * i], passive[w * i + 1], passive[w * i + 2]];
                // A stage below the ground is evaluated on it.
                if let Some(z0) = q.ground {
                    a[2] = a[2].max(z0);
                }
            }
            let (r, u) = solver.rates_with(&work, &at)?;
            let mut k = Vec::with_capacity(s.len());
            pack_rates(&r, &mut k);
            for i in 0..m {
                match q.motion {
                    Motion::Tracer => k.extend(u[i]),
                    // Deposited at the step's start: at rest on the
                    // ground, whatever the flow above it does.
                    Motion::Inertial { .. } if grounded[i] => k.extend([0.0; 6]),
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
        q.deposit();
        p.check()?;
        q.check()?;
        Ok(first.expect("a step evaluates the rates"))
    }
}
