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
//! plane). With a [`Pickup`] ([`Passive::with_pickup`]) the flow lifts
//! resting dust again where it blows hard enough over the ground: the
//! threshold friction velocity of saltation (Bagnold; Syal et al. 2010's
//! brown-out model in its simplest form).

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
    /// How the flow lifts dust resting on the ground, if it does.
    pub pickup: Option<Pickup>,
    /// Lifts so far (a particle lifted twice counts twice).
    pub lifted: usize,
}

/// Von Karman's constant.
const KARMAN: f64 = 0.41;

/// Dust picked up from the ground (saltation), in its simplest form: the
/// images make a wall the flow slips along, so the friction velocity is
/// modelled, `u* = kappa |u_t(h)| / ln(h / z_r)` (the log law) from the
/// tangential velocity `u_t` at the reference height `h` above a resting
/// particle and the ground's roughness length `z_r`. Where `u*` passes the
/// threshold `u*_t` the particle is lifted: put at `h`, moving with the
/// flow along the ground and upward at `launch * u*`. Lifting happens at
/// the end of a step, from the velocity of its first stage; it is
/// deterministic (no probability of lift, no bombardment by landing
/// grains).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pickup {
    /// The reference height `h` above the ground.
    pub reference_height: f64,
    /// The ground's roughness length `z_r` (below `h`).
    pub roughness: f64,
    /// The threshold friction velocity `u*_t`.
    pub threshold: f64,
    /// The upward launch speed over `u*`.
    pub launch: f64,
}

impl Pickup {
    /// The friction velocity under a tangential velocity `along` at the
    /// reference height.
    pub fn friction_velocity(&self, along: f64) -> f64 {
        KARMAN * along / (self.reference_height / self.roughness).ln()
    }

    fn check(&self) -> Result<(), VortexError> {
        let bad = |what, value, why| Err(VortexError::BadSetting { what, value, why });
        if !(self.roughness.is_finite() && self.roughness > 0.0) {
            return bad(
                "the ground's roughness length",
                self.roughness,
                "must be finite and positive",
            );
        }
        if !(self.reference_height.is_finite() && self.reference_height > self.roughness) {
            return bad(
                "the pickup's reference height",
                self.reference_height,
                "must be finite and above the roughness length",
            );
        }
        for (what, v) in [
            ("the threshold friction velocity", self.threshold),
            ("the launch speed over u*", self.launch),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(what, v, "must be finite and not negative");
            }
        }
        Ok(())
    }
}

impl Passive {
    /// Tracers at `x`.
    pub fn tracers(x: Vec<[f64; 3]>) -> Result<Self, VortexError> {
        let p = Passive {
            v: Vec::new(),
            x,
            motion: Motion::Tracer,
            ground: None,
            pickup: None,
            lifted: 0,
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
            pickup: None,
            lifted: 0,
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

    /// The same particles lifted from the ground by `pickup`: inertial
    /// particles over a ground plane only.
    pub fn with_pickup(mut self, pickup: Pickup) -> Result<Self, VortexError> {
        pickup.check()?;
        if self.ground.is_none() || !matches!(self.motion, Motion::Inertial { .. }) {
            return Err(VortexError::BadSetting {
                what: "a pickup model",
                value: pickup.threshold,
                why: "needs inertial particles over a ground plane (Passive::over_ground)",
            });
        }
        self.pickup = Some(pickup);
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

    /// The particles resting at the step's start (`grounded`) lifted
    /// where the flow over them (`over`, one for each) passes the pickup's
    /// threshold.
    fn lift(&mut self, grounded: &[bool], over: &[[f64; 3]]) {
        let (Some(k), Some(z0)) = (self.pickup, self.ground) else {
            return;
        };
        let resting = (0..self.x.len()).filter(|&i| grounded[i]);
        for (i, u) in resting.zip(over) {
            let along = u[0].hypot(u[1]);
            let friction = k.friction_velocity(along);
            if friction > k.threshold {
                self.x[i][2] = z0 + k.reference_height;
                self.v[i] = [u[0], u[1], k.launch * friction];
                self.lifted += 1;
            }
        }
    }

    /// Where a step of `dt` that moves inertial particles by the flow at
    /// its middle (`Passive::advance_by`) evaluates it: an airborne
    /// particle half a step along its own velocity (not below the ground),
    /// a resting one on the ground, or at the pickup's reference height
    /// where it can be lifted.
    pub(crate) fn midpoints(&self, dt: f64) -> Vec<[f64; 3]> {
        let z0 = self.ground.unwrap_or(f64::NEG_INFINITY);
        let lift = self.pickup.map_or(0.0, |k| k.reference_height);
        self.x
            .iter()
            .zip(&self.v)
            .map(|(x, v)| {
                if x[2] <= z0 {
                    [x[0], x[1], z0 + lift]
                } else {
                    let mid = |c: usize| x[c] + 0.5 * dt * v[c];
                    [mid(0), mid(1), mid(2).max(z0)]
                }
            })
            .collect()
    }

    /// One step of `dt` of inertial particles under the flow `u` at their
    /// [`Passive::midpoints`], held over the step: the drag's exact
    /// solution (`w = u + g tau`, `v <- w + (v - w) e^(-dt/tau)`, `x <- x +
    /// w dt + (v - w) tau (1 - e^(-dt/tau))`), so any step is stable and
    /// the error is the flow's change over the step (second order with
    /// the flow taken at the middle). Then what reached the ground is
    /// deposited and what rested there lifted where the flow over it
    /// passes the pickup's threshold.
    pub(crate) fn advance_by(&mut self, u: &[[f64; 3]], dt: f64) -> Result<(), VortexError> {
        check_dt(dt)?;
        let Motion::Inertial {
            response_time: tau,
            gravity: g,
        } = self.motion
        else {
            return Err(VortexError::BadSetting {
                what: "tracers in a step by the flow at its middle",
                value: dt,
                why: "need inertial particles (a short response time makes them tracers)",
            });
        };
        if u.len() != self.len() {
            return Err(VortexError::LengthMismatch {
                what: "the flow at the passive particles",
                got: u.len(),
                expected: self.len(),
            });
        }
        let (z0, e) = (self.ground, (-dt / tau).exp());
        let resting: Vec<bool> = self
            .x
            .iter()
            .map(|x| z0.is_some_and(|z0| x[2] <= z0))
            .collect();
        for i in 0..self.len() {
            if resting[i] {
                continue;
            }
            for c in 0..3 {
                let w = u[i][c] + g[c] * tau;
                let dv = self.v[i][c] - w;
                self.x[i][c] += w * dt + dv * tau * (1.0 - e);
                self.v[i][c] = w + dv * e;
            }
        }
        self.deposit();
        let over: Vec<[f64; 3]> = (0..self.len())
            .filter(|&i| resting[i])
            .map(|i| u[i])
            .collect();
        self.lift(&resting, &over);
        self.check()
    }

    /// Values of state a particle carries (3 a tracer, 6 inertial).
    pub(crate) fn width(&self) -> usize {
        match self.motion {
            Motion::Tracer => 3,
            Motion::Inertial { .. } => 6,
        }
    }
}

/// One step of passive particles inside a step of the flow that carries
/// them: the state they add to the step's register, the points each
/// stage evaluates the velocity at, the rates those give, and what
/// happens at the step's end (deposits, lifts), for
/// [`Stepper::step_with_passive`].
pub(crate) struct PassiveStage {
    /// The inertial particles resting on the ground at the step's start.
    resting: Vec<bool>,
    /// The first stage's velocity over each resting particle.
    over_ground: Option<Vec<[f64; 3]>>,
}

impl PassiveStage {
    /// The stage of `q` for a step of `dt`: refuses a step past the
    /// response time (explicit drag is stable to dt = 2 tau (Heun, AB2) or
    /// 2.8 tau (RK4), and accurate only well below).
    pub(crate) fn start(q: &Passive, dt: f64) -> Result<Self, VortexError> {
        check_dt(dt)?;
        q.check()?;
        if let Motion::Inertial { response_time, .. } = q.motion {
            if dt > response_time {
                return Err(VortexError::BadSetting {
                    what: "the step for the passive particles' response time",
                    value: dt,
                    why: "must be at most the response time: the drag would be unstable \
                          (take a shorter step or a longer response time)",
                });
            }
        }
        // Inertial particles come to rest on the ground; tracers slip.
        let inertial = matches!(q.motion, Motion::Inertial { .. });
        let resting = (0..q.len())
            .map(|i| inertial && q.ground.is_some_and(|z0| q.x[i][2] <= z0))
            .collect();
        Ok(PassiveStage {
            resting,
            over_ground: None,
        })
    }

    /// `q`'s state appended to the register `y`.
    pub(crate) fn pack(q: &Passive, y: &mut Vec<f64>) {
        for i in 0..q.len() {
            y.extend(q.x[i]);
            if q.width() == 6 {
                y.extend(q.v[i]);
            }
        }
    }

    /// The points a stage of state `s` (`q`'s part of the register)
    /// evaluates, appended to `at`: below the ground, on it. Dust resting
    /// at the step's start is evaluated by the first stage only (its rates
    /// are zero; the flow over it decides the lifts), at the pickup's
    /// reference height where it can be lifted.
    pub(crate) fn points(&self, q: &Passive, s: &[f64], at: &mut Vec<[f64; 3]>) {
        let (w, first) = (q.width(), self.over_ground.is_none());
        for i in 0..q.len() {
            if self.resting[i] && !first {
                continue;
            }
            let mut a = [s[w * i], s[w * i + 1], s[w * i + 2]];
            if let Some(z0) = q.ground {
                a[2] = match q.pickup {
                    Some(k) if self.resting[i] => z0 + k.reference_height,
                    _ => a[2].max(z0),
                };
            }
            at.push(a);
        }
    }

    /// The rates of state `s` under the velocity `u` at the points
    /// [`PassiveStage::points`] gave, appended to `k`; the first stage's
    /// velocity over the resting particles is kept for the lifts.
    pub(crate) fn rates(&mut self, q: &Passive, s: &[f64], u: &[[f64; 3]], k: &mut Vec<f64>) {
        let first = self.over_ground.is_none();
        if first {
            self.over_ground = Some(
                self.resting
                    .iter()
                    .zip(u)
                    .filter(|(r, _)| **r)
                    .map(|(_, u)| *u)
                    .collect(),
            );
        }
        let w = q.width();
        let mut u = u.iter();
        for i in 0..q.len() {
            let resting = self.resting[i];
            let here = if resting && !first {
                [0.0; 3]
            } else {
                *u.next().expect("one velocity a point")
            };
            match q.motion {
                Motion::Tracer => k.extend(here),
                // Resting at the step's start: at rest on the ground,
                // whatever the flow above it does.
                Motion::Inertial { .. } if resting => k.extend([0.0; 6]),
                Motion::Inertial {
                    response_time,
                    gravity,
                } => {
                    let v = &s[w * i + 3..w * i + 6];
                    k.extend(v);
                    for c in 0..3 {
                        k.push((here[c] - v[c]) / response_time + gravity[c]);
                    }
                }
            }
        }
    }

    /// `q` set to the step's end state `s`: what reached the ground
    /// deposited, what the flow blew over hard enough lifted.
    pub(crate) fn finish(self, q: &mut Passive, s: &[f64]) -> Result<(), VortexError> {
        let w = q.width();
        for i in 0..q.len() {
            q.x[i] = [s[w * i], s[w * i + 1], s[w * i + 2]];
            if w == 6 {
                q.v[i] = [s[w * i + 3], s[w * i + 4], s[w * i + 5]];
            }
        }
        q.deposit();
        q.lift(&self.resting, self.over_ground.as_deref().unwrap_or(&[]));
        q.check()
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
        let mut stage = PassiveStage::start(q, dt)?;
        let n = p.len();
        let mut y = Vec::with_capacity(6 * n + q.width() * q.len());
        pack(p, &mut y);
        PassiveStage::pack(q, &mut y);
        let mut work = p.clone();
        let mut first = None;
        let mut at = Vec::with_capacity(q.len());
        self.step(&mut y, dt, |s: &Vec<f64>| {
            unpack(s, &mut work);
            at.clear();
            stage.points(q, &s[6 * n..], &mut at);
            let (r, u) = solver.rates_with(&work, &at)?;
            let mut k = Vec::with_capacity(s.len());
            pack_rates(&r, &mut k);
            stage.rates(q, &s[6 * n..], &u, &mut k);
            first.get_or_insert(r);
            Ok(k)
        })?;
        unpack(&y, p);
        stage.finish(q, &y[6 * n..])?;
        p.check()?;
        Ok(first.expect("a step evaluates the rates"))
    }
}
