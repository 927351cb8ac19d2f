//! A hovering rotor's free-vortex wake (hu2011's brown-out, after Syal et
//! al. 2010): each blade carries a bound circulation `Gamma` from its
//! root to its tip and trails it into the flow at the tip (the tip
//! vortex, along the path the tip has left behind) and at the root. A
//! trailer is a filament of nodes the flow carries; its segments are the
//! vortex particles (at their midpoints, strength `Gamma` times the
//! segment, a Gaussian core), so the strengths follow the filament's
//! stretching exactly and no stretching term is integrated: vortex
//! particles that carried their own strengths through the stretching
//! term grew tenfold in eight revolutions near the ground and left it.
//! Each step the blades lay new nodes, the bound vortex (segments along
//! each blade, where the blades are at each stage) closes the filaments,
//! and the nodes move with the velocity all segments induce at them.
//!
//! The span is cut into panels of equal width, each of its own bound
//! circulation ([`Rotor::hover`]: one panel, uniform loading, so all of it
//! trails at the tip and, opposite, at the root; [`Rotor::tapered`]: a
//! circulation rising with the radius, as a blade of constant chord and
//! angle sees at uniform inflow, so the root trails little and the inboard
//! sheet is a few weaker trailers between the panels, each the jump in
//! circulation across its edge).
//!
//! What this model leaves out, said once: the sheet between the panels'
//! edges (the panels are few), the blades' motion through their own wake (no
//! flapping, no inflow feedback on the loading: `Gamma` is set by the
//! thrust once) and any vorticity the ground makes (the images make it
//! slip). Momentum theory sets `Gamma` and gives the wake's scale: the
//! induced velocity at the disk in hover, `v_h = Omega R sqrt(C_T / 2)`.

use std::f64::consts::TAU;

use std::time::Instant;

use fmm_core::Achieved;

use crate::diagnostics::norm;
use crate::error::VortexError;
use crate::integrate::check_dt;
use crate::particles::VortexParticles;
use crate::passive::Passive;
use crate::rates::Solver;

/// A rotor turning about `+z` at its hub, its blades trailing vortices.
#[derive(Clone, Debug, PartialEq)]
pub struct Rotor {
    pub blades: usize,
    /// The tip's radius `R`.
    pub radius: f64,
    /// Angular velocity `Omega` (radians per unit time, about `+z`).
    pub omega: f64,
    /// The hub's centre.
    pub hub: [f64; 3],
    /// Each blade's bound circulation on each panel of its span, from
    /// the root to the tip (panels of equal width).
    pub circulation: Vec<f64>,
    /// The root's radius, a fraction of `R`.
    pub root: f64,
    /// The released particles' Gaussian core.
    pub core: f64,
    /// Particles a trailer releases per step (along the arc the blade
    /// swept in it): the spacing along a trailer is the arc over this.
    pub per_step: usize,
}

impl Rotor {
    /// A rotor of `blades` blades, tip radius `radius`, turning at `omega`
    /// about `+z` at `hub`, with the thrust coefficient
    /// `C_T = T / (rho pi R^2 (Omega R)^2)` and a uniform loading: the
    /// thrust of a blade with a uniform `Gamma` from the root `r0` to the
    /// tip is `rho Omega Gamma (R^2 - r0^2) / 2` (Kutta-Joukowski along the
    /// span), so `Gamma = 2 pi C_T Omega R^2 / (blades (1 - (r0/R)^2))`.
    /// Root at 0.2 R.
    pub fn hover(
        blades: usize,
        radius: f64,
        omega: f64,
        thrust_coefficient: f64,
        hub: [f64; 3],
        core: f64,
        per_step: usize,
    ) -> Result<Self, VortexError> {
        let r = Rotor {
            blades,
            radius,
            omega,
            hub,
            circulation: vec![1.0],
            root: 0.2,
            core,
            per_step,
        };
        r.check()?;
        Ok(r.scaled_to(thrust_coefficient))
    }

    /// The same rotor and thrust with its span cut into `panels` panels,
    /// the circulation on each proportional to the radius at its middle
    /// (the loading of a blade of constant chord and angle of attack at
    /// uniform inflow; the tip trailer then carries the largest
    /// circulation, the root's is the smallest and opposite, and the edges
    /// between panels trail the steps between them). `panels` of 0 is an
    /// error.
    pub fn tapered(self, panels: usize) -> Result<Self, VortexError> {
        if panels == 0 {
            return Err(VortexError::BadSetting {
                what: "the rotor's panels",
                value: 0.0,
                why: "must be at least one",
            });
        }
        let c = self.thrust_coefficient();
        let r = Rotor {
            circulation: (0..panels)
                .map(|k| {
                    let [a, b] = self.panel(k, panels);
                    0.5 * (a + b)
                })
                .collect(),
            ..self
        };
        r.check()?;
        Ok(r.scaled_to(c))
    }

    /// The radii `[from, to]` of panel `k` of `panels`.
    fn panel(&self, k: usize, panels: usize) -> [f64; 2] {
        let r0 = self.root * self.radius;
        let w = (self.radius - r0) / panels as f64;
        [r0 + w * k as f64, r0 + w * (k + 1) as f64]
    }

    /// The same loading scaled to the thrust coefficient `c`.
    fn scaled_to(self, c: f64) -> Self {
        let s = c / self.thrust_coefficient();
        Rotor {
            circulation: self.circulation.iter().map(|g| g * s).collect(),
            ..self
        }
    }

    /// The thrust coefficient the circulation carries: each panel's
    /// `rho Omega Gamma (b^2 - a^2) / 2` summed over the blades, over
    /// `rho pi R^2 (Omega R)^2`.
    pub fn thrust_coefficient(&self) -> f64 {
        let m = self.circulation.len();
        let per_rho_omega: f64 = (0..m)
            .map(|k| {
                let [a, b] = self.panel(k, m);
                self.circulation[k] * (b * b - a * a) / 2.0
            })
            .sum();
        per_rho_omega * self.blades as f64
            / (std::f64::consts::PI * self.omega * self.radius.powi(4))
    }

    /// The trailers' radii and circulations a blade, from the tip in: at
    /// each panel's edge the step in circulation across it (from the
    /// blade's side outward minus inward, so the tip's is its panel's
    /// circulation and the root's the opposite of its own); edges of no
    /// step trail nothing.
    pub fn trailed(&self) -> Vec<(f64, f64)> {
        let m = self.circulation.len();
        let at = |k: usize| if k < m { self.circulation[k] } else { 0.0 };
        (0..=m)
            .rev()
            .map(|j| {
                let inner = if j == 0 { 0.0 } else { at(j - 1) };
                let r = if j == m {
                    self.radius
                } else {
                    self.panel(j, m)[0]
                };
                (r, inner - at(j))
            })
            .filter(|&(_, g)| g != 0.0)
            .collect()
    }

    /// Momentum theory's induced velocity at the disk in hover,
    /// `Omega R sqrt(C_T / 2)` (the wake's speed scale; it doubles far
    /// below the disk, out of ground effect).
    pub fn hover_inflow(&self) -> f64 {
        (self.omega * self.radius).abs() * (self.thrust_coefficient().abs() / 2.0).sqrt()
    }

    /// The time of one revolution.
    pub fn period(&self) -> f64 {
        TAU / self.omega.abs()
    }

    /// Blade `b`'s azimuth at time `t`.
    pub fn azimuth(&self, b: usize, t: f64) -> f64 {
        self.omega * t + TAU * b as f64 / self.blades as f64
    }

    /// The point at radius `r` on blade `b` at time `t`.
    pub fn on_blade(&self, b: usize, r: f64, t: f64) -> [f64; 3] {
        let psi = self.azimuth(b, t);
        [
            self.hub[0] + r * psi.cos(),
            self.hub[1] + r * psi.sin(),
            self.hub[2],
        ]
    }

    /// Blades, a positive finite radius, angular velocity, core, a root
    /// inside the tip, a finite circulation and hub, at least one particle
    /// a step: else an error naming the value.
    pub fn check(&self) -> Result<(), VortexError> {
        let bad = |what, value: f64, why| Err(VortexError::BadSetting { what, value, why });
        if self.blades == 0 {
            return bad("the rotor's blades", 0.0, "must be at least one");
        }
        if self.per_step == 0 {
            return bad(
                "the rotor's particles a trailer releases a step",
                0.0,
                "must be at least one",
            );
        }
        for (what, v) in [
            ("the rotor's radius", self.radius),
            ("the rotor's angular velocity", self.omega.abs()),
            ("the wake's core", self.core),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(what, v, "must be finite and positive");
            }
        }
        if !(self.root > 0.0 && self.root < 1.0) {
            return bad(
                "the rotor's root radius (a fraction of the tip's)",
                self.root,
                "must lie in (0, 1)",
            );
        }
        if self.circulation.is_empty() {
            return bad("the rotor's panels", 0.0, "must be at least one");
        }
        if let Some(&v) = self
            .hub
            .iter()
            .chain(&self.circulation)
            .find(|v| !v.is_finite())
        {
            return bad("the rotor's hub or circulation", v, "must be finite");
        }
        Ok(())
    }
}

/// A trailer: a filament of nodes, oldest first (the newest laid on its
/// blade), carrying `circulation` from the blade into the wake.
#[derive(Clone, Debug, PartialEq)]
pub struct Trailer {
    pub nodes: Vec<[f64; 3]>,
    /// When each node was laid.
    pub born: Vec<f64>,
    pub circulation: f64,
    /// The blade that lays it and the radius it leaves at.
    pub blade: usize,
    pub radius: f64,
}

/// A rotor and the wake it has laid by `time`.
#[derive(Clone, Debug, PartialEq)]
pub struct Wake {
    pub rotor: Rotor,
    /// Those of each blade in turn, from the tip in ([`Rotor::trailed`]).
    pub trailers: Vec<Trailer>,
    pub time: f64,
    /// When the newest nodes were laid.
    pub(crate) laid: f64,
}

/// What one step of the wake took.
#[derive(Clone, Debug)]
pub struct WakeStep {
    /// The largest speed of a node at the step's start.
    pub fastest: f64,
    /// Seconds of the dust's evaluation and of the whole step.
    pub dust_seconds: f64,
    pub seconds: f64,
    /// The largest error the step's evaluations estimated.
    pub estimated_error: f64,
    pub device: String,
}

/// Dust the wake carries through a step: its flow is evaluated once, at
/// the step's middle, from the wake's particles there, and held over the
/// step (`Passive::advance_by`'s drag solution). On the host ([`Passive`])
/// or on the GPU (`crate::device_dust::DeviceDust`).
pub trait Dust {
    /// Moves the dust over a step of `dt` by the flow of `sources` (the
    /// wake at the step's middle); what the evaluation estimated and where
    /// it ran.
    fn advance(
        &mut self,
        sources: &VortexParticles,
        dt: f64,
        solver: &Solver,
    ) -> Result<(Option<Achieved>, String), VortexError>;
}

impl Dust for Passive {
    fn advance(
        &mut self,
        sources: &VortexParticles,
        dt: f64,
        solver: &Solver,
    ) -> Result<(Option<Achieved>, String), VortexError> {
        let e = solver.velocity_at(sources, &self.midpoints(dt))?;
        self.advance_by(&e.u, dt)?;
        Ok((e.achieved, e.device))
    }
}

impl Wake {
    /// The rotor at time 0, each trailer one node on its blade.
    pub fn new(rotor: Rotor) -> Result<Self, VortexError> {
        rotor.check()?;
        let trailed = rotor.trailed();
        let mut trailers = Vec::with_capacity(trailed.len() * rotor.blades);
        for blade in 0..rotor.blades {
            for &(radius, circulation) in &trailed {
                trailers.push(Trailer {
                    nodes: vec![rotor.on_blade(blade, radius, 0.0)],
                    born: vec![0.0],
                    circulation,
                    blade,
                    radius,
                });
            }
        }
        Ok(Wake {
            rotor,
            trailers,
            time: 0.0,
            laid: 0.0,
        })
    }

    /// The free nodes.
    pub fn nodes(&self) -> usize {
        self.trailers.iter().map(|t| t.nodes.len()).sum()
    }

    /// The bound vortex's segments a panel: spaced at most half a core.
    fn bound_segments(&self) -> usize {
        let span =
            (1.0 - self.rotor.root) * self.rotor.radius / self.rotor.circulation.len() as f64;
        (2.0 * span / self.rotor.core).ceil().max(1.0) as usize
    }

    /// The vortex particles of the wake (every trailer's segments) and of
    /// the bound vortex at time `t`.
    pub fn particles(&self, t: f64) -> Result<VortexParticles, VortexError> {
        let mut x = Vec::with_capacity(self.nodes());
        let (mut alpha, mut volume) = (Vec::new(), Vec::new());
        let mut push = |a: [f64; 3], c: [f64; 3], gamma: f64| {
            let d = [a[0] - c[0], a[1] - c[1], a[2] - c[2]];
            let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
            x.push([
                0.5 * (a[0] + c[0]),
                0.5 * (a[1] + c[1]),
                0.5 * (a[2] + c[2]),
            ]);
            alpha.push(d.map(|v| gamma * v));
            volume.push(len * len * len);
        };
        for tr in &self.trailers {
            for s in tr.nodes.windows(2) {
                // Older minus newer: from the blade into the wake.
                push(s[0], s[1], tr.circulation);
            }
        }
        let (m, k) = (self.rotor.circulation.len(), self.bound_segments());
        for b in 0..self.rotor.blades {
            for (p, &gamma) in self.rotor.circulation.iter().enumerate() {
                let [r0, r1] = self.rotor.panel(p, m);
                let dr = (r1 - r0) / k as f64;
                for j in 0..k {
                    // From the root to the tip: the lift's sense.
                    let (root_end, tip_end) = (r0 + dr * j as f64, r0 + dr * (j + 1) as f64);
                    push(
                        self.rotor.on_blade(b, tip_end, t),
                        self.rotor.on_blade(b, root_end, t),
                        gamma,
                    );
                }
            }
        }
        let n = x.len();
        VortexParticles::new(x, alpha, vec![self.rotor.core; n], volume)
    }

    /// Every trailer's nodes laid since the last were, to `t`: `per_step`
    /// of them on the blade's path, the last where the blade is at `t`.
    fn lay(&mut self, t: f64) {
        if t <= self.laid {
            return;
        }
        let (k, from) = (self.rotor.per_step, self.laid);
        for tr in &mut self.trailers {
            for j in 1..=k {
                let tj = from + (t - from) * j as f64 / k as f64;
                tr.nodes.push(self.rotor.on_blade(tr.blade, tr.radius, tj));
                tr.born.push(tj);
            }
        }
        self.laid = t;
    }

    /// The oldest nodes of each trailer dropped while they and the next
    /// lie farther than `radius` from the rotor's axis or were laid more
    /// than `age` ago (free-vortex wake codes truncate the wake's age:
    /// the filaments' far ends, which have spread along the ground or
    /// wound up below the hub, add sources and little flow where the
    /// dust is); returns how many.
    pub fn cull(&mut self, radius: f64, age: f64) -> usize {
        let hub = self.rotor.hub;
        let before = self.time - age;
        let gone = |x: &[f64; 3], born: f64| {
            born < before || (x[0] - hub[0]).hypot(x[1] - hub[1]) > radius
        };
        let mut dropped = 0;
        for tr in &mut self.trailers {
            let k = (0..tr.nodes.len().saturating_sub(1))
                .take_while(|&j| {
                    gone(&tr.nodes[j], tr.born[j]) && gone(&tr.nodes[j + 1], tr.born[j + 1])
                })
                .count();
            tr.nodes.drain(..k);
            tr.born.drain(..k);
            dropped += k;
        }
        dropped
    }

    /// Every node, trailer after trailer.
    fn flat(&self) -> Vec<[f64; 3]> {
        self.trailers
            .iter()
            .flat_map(|t| t.nodes.iter().copied())
            .collect()
    }

    /// The nodes set from `x` (trailer after trailer), not below a ground
    /// plane at `ground`.
    fn set_nodes(&mut self, x: &[[f64; 3]], ground: Option<f64>) {
        let mut it = x.iter();
        for tr in &mut self.trailers {
            for node in tr.nodes.iter_mut() {
                let v = it.next().expect("one position a node");
                *node = [v[0], v[1], ground.map_or(v[2], |z0| v[2].max(z0))];
            }
        }
    }

    /// One step of `dt`: the blades lay their nodes since the last step,
    /// then the nodes move by the explicit midpoint rule (two
    /// evaluations by `solver` of the trailers' and the bound vortex's
    /// velocity at the nodes, at the step's start and middle), and the
    /// dust by the flow at the step's middle (one evaluation). Nodes a
    /// stage would take below a ground plane of the solver's are put on
    /// it: the images keep the flow from crossing it, a finite step not
    /// quite.
    pub fn step_with_dust<D: Dust>(
        &mut self,
        dust: &mut D,
        dt: f64,
        solver: &Solver,
    ) -> Result<WakeStep, VortexError> {
        check_dt(dt)?;
        let began = Instant::now();
        let ground = match solver.domain {
            fmm_core::Domain::Wall(w) if w.axis == 2 => Some(w.at),
            _ => None,
        };
        let t0 = self.time;
        self.lay(t0);
        let x0 = self.flat();
        let first = solver.velocity_at(&self.particles(t0)?, &x0)?;
        let fastest = first.u.iter().fold(0.0f64, |m, u| m.max(norm(*u)));
        let mut mid = self.clone();
        let half: Vec<[f64; 3]> = x0
            .iter()
            .zip(&first.u)
            .map(|(x, u)| [0, 1, 2].map(|c| x[c] + 0.5 * dt * u[c]))
            .collect();
        mid.set_nodes(&half, ground);
        let sources = mid.particles(t0 + 0.5 * dt)?;
        let second = solver.velocity_at(&sources, &mid.flat())?;
        let dust_began = Instant::now();
        let (dust_achieved, _) = dust.advance(&sources, dt, solver)?;
        let dust_seconds = dust_began.elapsed().as_secs_f64();
        let end: Vec<[f64; 3]> = x0
            .iter()
            .zip(&second.u)
            .map(|(x, u)| [0, 1, 2].map(|c| x[c] + dt * u[c]))
            .collect();
        self.set_nodes(&end, ground);
        self.time = t0 + dt;
        let estimated_error = [&first.achieved, &second.achieved, &dust_achieved]
            .iter()
            .filter_map(|a| a.as_ref().map(|a| a.estimated_error))
            .fold(0.0, f64::max);
        Ok(WakeStep {
            fastest,
            dust_seconds,
            seconds: began.elapsed().as_secs_f64(),
            estimated_error,
            device: second.device,
        })
    }
}
