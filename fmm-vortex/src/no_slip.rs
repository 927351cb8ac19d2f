//! A no-slip wall by the vorticity flux (Koumoutsakos, Leonard and Pépin
//! 1994, J. Comput. Phys. 113, 52-61; in three dimensions Ploumhans,
//! Winckelmans, Salmon, Leonard and Warren 2002, J. Comput. Phys. 178).
//!
//! The mirror images of [`crate::ground_plane`] make a wall the flow does
//! not go through but slips along: the inviscid step (convection and
//! stretching with the images) leaves a *slip velocity* `u_s` on the
//! plane. Viscous splitting then treats the wall in the viscous substep:
//! the *vortex sheet* `gamma = n x u_s` (`n` the wall's normal into the
//! fluid, `+z`) is what cancels the slip, and over the substep it enters
//! the fluid as the *vorticity flux* `nu d(omega)/dn = -gamma / dt` does
//! in the diffusion equation. Released at the start of the substep with a
//! wall that lets nothing more through, a sheet spreads as the heat
//! equation's half-space solution,
//!
//! `omega(z) = gamma 2 / sqrt(4 pi nu dt) exp(-z^2 / (4 nu dt))`,
//!
//! which is deposited, integrated over each layer's cell (exact shares
//! that sum to 1), on the first layers of a lattice above the wall
//! (heights `z0 + (j + 1/2) h`). The sign: a layer of tangential vorticity
//! of circulation `Gamma` per unit area, joined by its odd images, induces
//! `-Gamma x n` on the plane and nothing far above it, so the sheet
//! `gamma = n x u_s` brings the tangential velocity on the wall (the fluid
//! just above it) to zero while leaving the flow far above unchanged:
//! Stokes' first problem is the case of a uniform slip.
//!
//! That holds for vorticity that lies above the plane. A Gaussian blob
//! of core `sigma` at height `h / 2` reaches below it, where the odd
//! image cancels it: the blobs alone would give the first layer 0.38 of
//! its velocity on the wall, and no circulation could then stop the slip
//! and keep the stream far above. The wall keeps its vorticity above the
//! plane: the lattice folds what falls below (next paragraph but one), and
//! the velocity the wall works with, [`NoSlipWall::velocity`], gives back
//! what the images take from the blobs near the plane
//! ([`NoSlipWall::fold_correction`]). The inviscid step should move the
//! particles in that velocity too, [`NoSlipWall::rates`].
//!
//! A step, the inviscid part with the images and the viscous part the
//! wall's:
//!
//! ```no_run
//! # fn main() -> Result<(), fmm_vortex::VortexError> {
//! use fmm_vortex::{ground_plane, NoSlipWall, Scheme, Solver, Stepper, VortexParticles};
//! let wall = NoSlipWall::new(0.0, 0.05, 1e-3, [0.0, 0.0], [3.0, 3.0])?;
//! let solver = Solver::default().in_domain(ground_plane(0.0));
//! // The flow's particles, above the plane (here one).
//! let mut p = VortexParticles::new(vec![[0.0, 0.0, 1.0]], vec![[0.0, 1e-3, 0.0]], vec![0.05], vec![1.25e-4])?;
//! let (mut stepper, dt) = (Stepper::new(Scheme::Rk2), 0.02);
//! for _ in 0..100 {
//!     stepper.step_particles(&mut p, dt, |s| wall.rates(s, &solver))?;
//!     stepper.restart(); // the particles are remeshed each step
//!     wall.reflect(&mut p); // any carried through the plane
//!     let report = wall.step(&mut p, &solver, dt)?;
//!     println!("slip {:.1e}, {} particles", report.slip_max, report.particles);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The particles live on that lattice (*remeshed* vortex particles:
//! Koumoutsakos 1997; Ploumhans et al. 2002), cores fixed at `overlap h`
//! and volumes `h^3`: each viscous substep puts them back on it by
//! Monaghan's M4' ([`crate::remesh::m4p`]), diffuses the lattice's
//! vorticity over `dt` by the finite-difference Laplacian (explicit, in
//! substeps of `nu dt' / h^2 <= 1/8`, zero flux through the wall: the
//! wall's flux is the sheet's, added apart, so by linearity the two add
//! up to the substep's diffusion), adds the sheet, and culls strengths
//! below `cull` times the largest, which keeps the particle count bounded
//! (the culled circulation is reported). Unlike core spreading, the
//! resolution stays `h` for as long as the run goes.
//!
//! Near the wall the M4' stencil of a particle within one and a half
//! spacings of the plane reaches the layers below it (`j = -1, -2`): those
//! weights are *folded* onto their mirror layers above (`-1` onto `0`,
//! `-2` onto `1`), the even reflection. It keeps every component's
//! circulation (the weights still sum to 1), leaves a particle on a
//! lattice point where it is (M4' interpolates), and treats the vorticity
//! as having no normal gradient at the wall, which is what the zero-flux
//! diffusion assumes too; its error is the first moment (the height) of a
//! particle that moved off the first layers, `O(h)` of the small
//! displacement next to a no-slip wall. The odd reflection (the images'
//! own) would cancel the tangential vorticity the wall is made of; dropping
//! the weights would lose circulation.
//!
//! A wall is a rectangular *patch* of the plane (where the slip is
//! cancelled; beyond it the wall stays free-slip), or one period of a
//! wall periodic along x and y ([`NoSlipWall::periodic`]: the lattice
//! wraps, and the slip is summed in a slab box with the images joined by
//! the wall itself, [`NoSlipWall::mirrored`]): an unbounded wall, for
//! flows uniform along it such as Stokes' first problem.
//!
//! Left out: the sheet's own divergence along the wall (a sheet from a
//! slip with a curl along the wall is not solenoidal; Ploumhans et al.
//! correct it), second-order time splitting (the splitting is first
//! order in `dt`), the normal vorticity's own wall condition (it diffuses
//! with no flux like the rest), one-sided interpolation at the wall, and
//! the correction's share of the stretching.

use std::time::Instant;

use fmm_core::{Domain, PeriodicBox, Real};
use rayon::prelude::*;

use crate::error::VortexError;
use crate::integrate::check_dt;
use crate::particles::VortexParticles;
use crate::rates::{Rates, Solver};
use crate::remesh::m4p;

/// The most lattice cells a step may use (about 1.6 GB of strengths).
const MAX_CELLS: usize = 1 << 26;

/// A no-slip wall on the plane `z = z0`: its lattice, viscosity and patch
/// (module docs). Its fields are checked by every method.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoSlipWall {
    /// The plane, `z = z0`; the fluid lies above.
    pub z0: f64,
    /// The lattice spacing (particles at `origin + h (i + 1/2)`, heights
    /// `z0 + h (j + 1/2)`).
    pub h: f64,
    /// The kinematic viscosity.
    pub nu: f64,
    /// The patch's corner (smallest x and y) on the plane: a lattice
    /// corner.
    pub origin: [f64; 2],
    /// The patch's cells along x and y.
    pub cells: [usize; 2],
    /// The patch is one period of a wall periodic along x and y.
    pub periodic: bool,
    /// A uniform free stream added to the particles' velocity on the
    /// wall (tangential: the wall lets nothing through).
    pub free_stream: [f64; 3],
    /// The particles' Gaussian core over the spacing (`sigma = overlap h`).
    pub overlap: f64,
    /// Lattice strengths below this fraction of the largest are dropped.
    pub cull: f64,
    /// Sheets a step releases (at least 1): after the first, the slip is
    /// evaluated again and what remains of it released over the same
    /// step. A sheet released at the first layer's height `h / 2` reaches
    /// the wall attenuated, a mode of wavenumber `k` along it by `exp(-k
    /// h / 2)` (and the cores' `exp(-k^2 sigma^2 / 2)`): one sheet leaves
    /// about `k h / 2` of the slip (10% under a ring at 0.7 over a lattice
    /// of 0.1), which the next step's sheet takes up; each further sweep
    /// multiplies what is left by as much, for one more evaluation of the
    /// slip.
    pub sweeps: usize,
}

/// What a viscous substep did.
#[derive(Clone, Debug, PartialEq)]
pub struct FluxReport {
    /// The largest tangential slip on the patch before the sheet.
    pub slip_max: f64,
    /// Its root mean square over the patch.
    pub slip_rms: f64,
    /// The largest slip each sweep saw ([`NoSlipWall::sweeps`]; the first
    /// is `slip_max`).
    pub sweep_slip: Vec<f64>,
    /// The sheet's circulation, `sum gamma h^2` over the patch.
    pub sheet: [f64; 3],
    /// The particles' total strength before the substep and after.
    pub total_before: [f64; 3],
    pub total_after: [f64; 3],
    /// The strength the cull took out (`total_after = total_before +
    /// sheet - culled` to rounding).
    pub culled: [f64; 3],
    /// Particles the cull took out.
    pub culled_particles: usize,
    /// Lattice cells that hold a particle after the substep and held none
    /// before it (the vorticity the wall made and the diffusion spread).
    pub created: usize,
    /// Particles after the substep.
    pub particles: usize,
    /// Explicit diffusion substeps taken.
    pub substeps: usize,
    /// Wall-clock seconds (the slip's evaluation included in
    /// [`NoSlipWall::step`]).
    pub seconds: f64,
}

fn bad(what: &'static str, value: f64, why: &'static str) -> VortexError {
    VortexError::BadSetting { what, value, why }
}

fn erfc(x: f64) -> f64 {
    1.0 - <f64 as Real>::erf(x)
}

fn sum3(v: &[[f64; 3]]) -> [f64; 3] {
    v.iter()
        .fold([0.0; 3], |s, a| [s[0] + a[0], s[1] + a[1], s[2] + a[2]])
}

impl NoSlipWall {
    /// A wall on `z = z0` of lattice spacing `h` and viscosity `nu`, its
    /// patch centred on `centre` (x, y) reaching `half_extent` each way
    /// (rounded up to whole cells; the lattice's points sit at the cell
    /// centres from the patch's corner, and particles elsewhere are
    /// interpolated onto them at the first step); no free stream, cores of
    /// one spacing, a cull of `1e-6`, one sheet a step.
    pub fn new(
        z0: f64,
        h: f64,
        nu: f64,
        centre: [f64; 2],
        half_extent: [f64; 2],
    ) -> Result<Self, VortexError> {
        if !(h.is_finite() && h > 0.0) {
            return Err(bad(
                "the wall's lattice spacing",
                h,
                "must be finite and positive",
            ));
        }
        for e in half_extent {
            if !(e.is_finite() && e > 0.0) {
                return Err(bad(
                    "the wall patch's half extent",
                    e,
                    "must be finite and positive",
                ));
            }
        }
        for c in centre {
            if !c.is_finite() {
                return Err(bad("the wall patch's centre", c, "must be finite"));
            }
        }
        let cells = half_extent.map(|e| ((2.0 * e / h) * (1.0 - 1e-12)).ceil().max(1.0) as usize);
        let wall = NoSlipWall {
            z0,
            h,
            nu,
            origin: [0, 1].map(|a| centre[a] - 0.5 * cells[a] as f64 * h),
            cells,
            periodic: false,
            free_stream: [0.0; 3],
            overlap: 1.0,
            cull: 1e-6,
            sweeps: 1,
        };
        wall.check()?;
        Ok(wall)
    }

    /// The same wall periodic along x and y, its patch (square) one
    /// period: an unbounded wall. Its slip is summed in the slab box
    /// [`NoSlipWall::slab`].
    pub fn periodic(self) -> Result<Self, VortexError> {
        if self.cells[0] != self.cells[1] {
            return Err(bad(
                "the periodic wall's cells along y",
                self.cells[1] as f64,
                "must equal those along x: the slab box is a square's",
            ));
        }
        let wall = NoSlipWall {
            periodic: true,
            ..self
        };
        wall.check()?;
        Ok(wall)
    }

    /// The same wall under a uniform free stream (its tangential part
    /// slips on the wall; a normal part is refused).
    pub fn with_free_stream(self, u: [f64; 3]) -> Self {
        NoSlipWall {
            free_stream: u,
            ..self
        }
    }

    /// The same wall with cores of `overlap` spacings.
    pub fn with_overlap(self, overlap: f64) -> Self {
        NoSlipWall { overlap, ..self }
    }

    /// The same wall releasing `sweeps` sheets a step.
    pub fn with_sweeps(self, sweeps: usize) -> Self {
        NoSlipWall { sweeps, ..self }
    }

    /// The same wall culling below `cull` times the largest strength.
    pub fn with_cull(self, cull: f64) -> Self {
        NoSlipWall { cull, ..self }
    }

    /// The particles' core, `overlap h`.
    pub fn sigma(&self) -> f64 {
        self.overlap * self.h
    }

    /// The period of a periodic wall (the patch's side along x).
    pub fn period(&self) -> f64 {
        self.cells[0] as f64 * self.h
    }

    /// Every setting in its range: else an error naming it.
    pub fn check(&self) -> Result<(), VortexError> {
        if !self.z0.is_finite() {
            return Err(bad("the wall's plane z0", self.z0, "must be finite"));
        }
        if !(self.h.is_finite() && self.h > 0.0) {
            return Err(bad(
                "the wall's lattice spacing",
                self.h,
                "must be finite and positive",
            ));
        }
        if !(self.nu.is_finite() && self.nu > 0.0) {
            return Err(bad(
                "the no-slip wall's viscosity",
                self.nu,
                "must be finite and positive: without viscosity no vorticity leaves the wall",
            ));
        }
        for o in self.origin {
            if !o.is_finite() {
                return Err(bad("the wall patch's corner", o, "must be finite"));
            }
        }
        for c in self.cells {
            if c == 0 || c > 1 << 20 {
                return Err(bad(
                    "the wall patch's cells a side",
                    c as f64,
                    "must be from 1 to 2^20",
                ));
            }
        }
        if self.periodic && self.cells[0] != self.cells[1] {
            return Err(bad(
                "the periodic wall's cells along y",
                self.cells[1] as f64,
                "must equal those along x: the slab box is a square's",
            ));
        }
        if let Some(&u) = self.free_stream.iter().find(|u| !u.is_finite()) {
            return Err(bad("the free stream", u, "must be finite"));
        }
        if self.free_stream[2] != 0.0 {
            return Err(bad(
                "the free stream's normal component",
                self.free_stream[2],
                "must be 0: no flow goes through the wall",
            ));
        }
        if !(self.overlap.is_finite() && self.overlap > 0.0 && self.overlap <= 4.0) {
            return Err(bad(
                "the wall's core overlap (sigma / h)",
                self.overlap,
                "must be above 0 and at most 4",
            ));
        }
        if !(1..=16).contains(&self.sweeps) {
            return Err(bad(
                "the wall's sheets a step (sweeps)",
                self.sweeps as f64,
                "must be from 1 to 16",
            ));
        }
        if !(self.cull.is_finite() && (0.0..1.0).contains(&self.cull)) {
            return Err(bad(
                "the wall's cull",
                self.cull,
                "must be at least 0 and below 1",
            ));
        }
        Ok(())
    }

    /// The slab box a periodic wall's slip is summed in: periodic along x
    /// and y with the wall's period, open along z, centred on the plane
    /// (the particles and their images must lie within half a period of
    /// it).
    pub fn slab(&self) -> Result<PeriodicBox, VortexError> {
        self.check()?;
        let l = self.period();
        Ok(
            PeriodicBox::cube([self.origin[0], self.origin[1], self.z0 - 0.5 * l], l)
                .with_axes([true, true, false]),
        )
    }

    /// The points where the slip is evaluated and the sheet made: the
    /// patch's cell centres on the plane, x running fastest.
    pub fn wall_points(&self) -> Vec<[f64; 3]> {
        let [nx, ny] = self.cells;
        let h = self.h;
        (0..nx * ny)
            .map(|c| {
                let (i, j) = (c % nx, c / nx);
                [
                    self.origin[0] + (i as f64 + 0.5) * h,
                    self.origin[1] + (j as f64 + 0.5) * h,
                    self.z0,
                ]
            })
            .collect()
    }

    /// The share of a sheet released over `dt` that each layer's cell
    /// receives: the half-space heat kernel `2 / sqrt(4 pi nu dt)
    /// exp(-z^2 / (4 nu dt))` integrated over `[j h, (j + 1) h]`,
    /// `erf((j + 1) h / l) - erf(j h / l)` with `l = 2 sqrt(nu dt)`, out
    /// to where the rest is below `1e-12`, which the last layer takes (the
    /// shares sum to 1).
    pub fn layer_shares(&self, dt: f64) -> Result<Vec<f64>, VortexError> {
        self.check()?;
        check_dt(dt)?;
        let l = 2.0 * (self.nu * dt).sqrt();
        // erfc(5.1) < 1e-12.
        let layers = ((5.1 * l / self.h).ceil() as usize).max(1);
        if layers > 4096 {
            return Err(bad(
                "the sheet's depth in lattice layers (2 sqrt(nu dt) / h times 5)",
                layers as f64,
                "must be at most 4096: shorten the step or widen the spacing",
            ));
        }
        let erf = |x: f64| <f64 as Real>::erf(x);
        let mut shares: Vec<f64> = (0..layers)
            .map(|j| erf((j + 1) as f64 * self.h / l) - erf(j as f64 * self.h / l))
            .collect();
        let below: f64 = shares[..layers - 1].iter().sum();
        shares[layers - 1] = 1.0 - below;
        Ok(shares)
    }

    /// `p` joined with its mirror images in the plane (position reflected,
    /// strength an axial vector: `(-alpha_x, -alpha_y, alpha_z)`): the
    /// sources a periodic wall's slip is summed over.
    pub fn mirrored(&self, p: &VortexParticles) -> VortexParticles {
        let mut image = p.clone();
        for (x, a) in image.x.iter_mut().zip(image.alpha.iter_mut()) {
            x[2] = 2.0 * self.z0 - x[2];
            *a = [-a[0], -a[1], a[2]];
        }
        p.clone().joined(&image)
    }

    /// Particles the inviscid step carried through the plane (a step's
    /// truncation: the normal velocity vanishes on the wall, but not a
    /// stage's extrapolation) put back at their mirror heights, as the
    /// vortex methods treat particles that cross a wall (Koumoutsakos et
    /// al. 1994); how many. Strengths are kept: the next substep's remesh
    /// and slip see them above the wall.
    pub fn reflect(&self, p: &mut VortexParticles) -> usize {
        let mut n = 0;
        for x in &mut p.x {
            if x[2] < self.z0 {
                x[2] = 2.0 * self.z0 - x[2];
                n += 1;
            }
        }
        n
    }

    /// The particles are valid and none lies below the plane.
    pub fn check_particles(&self, p: &VortexParticles) -> Result<(), VortexError> {
        p.check()?;
        if let Some((i, x)) = p.x.iter().enumerate().find(|(_, x)| x[2] < self.z0) {
            return Err(VortexError::BadParticle {
                index: i,
                what: "its height (z) over the no-slip wall",
                value: x[2],
                why: "below the wall's plane: the particles live at z >= z0",
            });
        }
        Ok(())
    }

    /// The solver's domain suits this wall: its ground plane on a patch,
    /// its slab on a periodic wall.
    fn check_solver(&self, solver: &Solver) -> Result<(), VortexError> {
        let l = self.period();
        if self.periodic {
            match solver.domain {
                Domain::Periodic(b)
                    if b.axes == [true, true, false] && (b.side - l).abs() <= 1e-9 * l =>
                {
                    Ok(())
                }
                _ => Err(bad(
                    "the solver's box side (a periodic no-slip wall)",
                    solver.domain.periodic().map_or(f64::NAN, |b| b.side),
                    "must be a slab periodic along x and y of the wall's period: NoSlipWall::slab",
                )),
            }
        } else {
            match solver.domain {
                Domain::Wall(w) if w.axis == 2 && w.at == self.z0 && w.odd.contains(&"alpha") => {
                    Ok(())
                }
                _ => Err(bad(
                    "the solver's ground plane (a no-slip wall)",
                    solver.domain.wall().map_or(f64::NAN, |w| w.at),
                    "must be ground_plane(z0) of the wall's own plane z0",
                )),
            }
        }
    }

    /// The velocity at the points `at` (none below the plane) of the
    /// particles' vorticity as the wall holds it: the blobs' velocity by
    /// `solver` with the mirror images (the front door's on a patch, the
    /// wall's own on a periodic wall), plus the part the odd images take
    /// from the tangential vorticity of particles within a few cores of
    /// the plane (module docs: [`NoSlipWall::fold_correction`]), plus the
    /// free stream.
    pub fn velocity(
        &self,
        p: &VortexParticles,
        solver: &Solver,
        at: &[[f64; 3]],
    ) -> Result<Vec<[f64; 3]>, VortexError> {
        self.check()?;
        self.check_particles(p)?;
        self.check_solver(solver)?;
        if let Some((i, x)) = at
            .iter()
            .enumerate()
            .find(|(_, x)| x[2].is_nan() || x[2] < self.z0)
        {
            return Err(VortexError::BadParticle {
                index: i,
                what: "a point's height (z) over the no-slip wall",
                value: x[2],
                why: "below the wall's plane (or not finite): the flow lives at z >= z0",
            });
        }
        let mut u = if p.is_empty() {
            vec![[0.0; 3]; at.len()]
        } else if self.periodic {
            solver.velocity_at(&self.mirrored(p), at)?.u
        } else {
            solver.velocity_at(p, at)?.u
        };
        let du = self.fold_correction(p, at);
        for (v, (d, _)) in u.iter_mut().zip(du.iter().zip(at)) {
            for (k, vk) in v.iter_mut().enumerate() {
                *vk += d[k] + self.free_stream[k];
            }
        }
        Ok(u)
    }

    /// The tangential slip velocity at [`NoSlipWall::wall_points`]
    /// ([`NoSlipWall::velocity`] there, its normal part, zero by the
    /// images, left out). On a patch the solver's domain must be this
    /// wall's ground plane ([`crate::ground_plane`]`(z0)`); on a periodic
    /// wall, a slab periodic along x and y with the wall's period
    /// ([`NoSlipWall::slab`]).
    pub fn slip(&self, p: &VortexParticles, solver: &Solver) -> Result<Vec<[f64; 3]>, VortexError> {
        let u = self.velocity(p, solver, &self.wall_points())?;
        Ok(u.into_iter().map(|v| [v[0], v[1], 0.0]).collect())
    }

    /// The particles' rates for the inviscid step over this wall: the
    /// solver's (velocity and stretching, with the images), the velocity
    /// given [`NoSlipWall::fold_correction`] and the free stream, so that
    /// the particles move in the flow whose slip the wall cancels. Use it
    /// as the stepper's rates: `stepper.step_particles(&mut p, dt, |s|
    /// wall.rates(s, &solver))`. (The correction's own stretching, of the
    /// along-wall gradients of a layer a core thick, is left out.)
    pub fn rates(&self, p: &VortexParticles, solver: &Solver) -> Result<Rates, VortexError> {
        self.check()?;
        self.check_particles(p)?;
        self.check_solver(solver)?;
        let mut r = if self.periodic {
            let n = p.len();
            let mut r = solver.rates(&self.mirrored(p))?;
            r.u.truncate(n);
            r.dalpha.truncate(n);
            r
        } else {
            solver.rates(p)?
        };
        let du = self.fold_correction(p, &p.x);
        for (v, d) in r.u.iter_mut().zip(&du) {
            for (k, vk) in v.iter_mut().enumerate() {
                *vk += d[k] + self.free_stream[k];
            }
        }
        Ok(r)
    }

    /// What the odd images take from the tangential vorticity near the
    /// wall, given back, at the points `at`. A Gaussian blob of core
    /// `sigma` at height `z_k` over the plane reaches below it, where its
    /// odd image (the ground plane's) cancels it: a layer of such blobs of
    /// circulation `Gamma` per area induces `-erf(z_k / (sqrt 2 sigma))
    /// Gamma x n` on the plane instead of `-Gamma x n` (0.38 of it for the
    /// first layer, `z_k = h / 2`, at `sigma = h`). The vorticity the wall
    /// makes sits in that layer, so the blobs' velocity alone cannot be
    /// brought to no slip while keeping the stream far above (Stokes'
    /// problem would need `1 / 0.38` of its circulation). The wall's
    /// lattice keeps its vorticity above the plane (the M4' weights below
    /// it folded up, evenly), and so does its velocity: each blob's tail
    /// below the plane reflected up instead of cancelled, which adds, at
    /// a point at height `z`, the velocity of a thin layer, `-erfc((z_k +
    /// z) / (sqrt 2 sigma)) g(rho) alpha_k x n` with `g` the blob's
    /// Gaussian across the wall at the point's distance `rho` (its share
    /// per area; exact for a layer uniform along the wall). The normal
    /// vorticity's images are even: nothing to give back. Blobs and
    /// points past eight cores from the plane, and blobs past five cores
    /// along it, add nothing (below 1e-6 of the layer).
    pub fn fold_correction(&self, p: &VortexParticles, at: &[[f64; 3]]) -> Vec<[f64; 3]> {
        let reach = 8.0;
        let near: Vec<usize> = (0..p.len())
            .filter(|&k| p.x[k][2] - self.z0 < reach * p.sigma[k])
            .collect();
        let mut du = vec![[0.0; 3]; at.len()];
        if near.is_empty() {
            return du;
        }
        let smax = near.iter().map(|&k| p.sigma[k]).fold(0.0, f64::max);
        let cut = 5.0 * smax;
        // Bins along the wall of at least `cut` a side (wrapping on a
        // periodic wall), the near blobs in them.
        let l = self.period();
        // (A periodic wall's patch is square: one bin size for both.)
        let (bin, nb) = if self.periodic {
            let n = ((l / cut).floor() as i64).max(1);
            (l / n as f64, n)
        } else {
            (cut, i64::MAX)
        };
        let key = |x: &[f64; 3]| -> (i64, i64) {
            let kx = ((x[0] - self.origin[0]) / bin).floor() as i64;
            let ky = ((x[1] - self.origin[1]) / bin).floor() as i64;
            if self.periodic {
                (kx.rem_euclid(nb), ky.rem_euclid(nb))
            } else {
                (kx, ky)
            }
        };
        let mut grid: std::collections::HashMap<(i64, i64), Vec<usize>> = Default::default();
        for &k in &near {
            grid.entry(key(&p.x[k])).or_default().push(k);
        }
        let wrap = |d: f64| -> f64 {
            if self.periodic {
                d - l * (d / l).round()
            } else {
                d
            }
        };
        let neighbours = |b: i64, n: i64| -> Vec<i64> {
            if n == i64::MAX {
                vec![b - 1, b, b + 1]
            } else {
                let mut v: Vec<i64> = [b - 1, b, b + 1].map(|c| c.rem_euclid(n)).to_vec();
                v.sort_unstable();
                v.dedup();
                v
            }
        };
        du.par_iter_mut().zip(at.par_iter()).for_each(|(d, x)| {
            let z = x[2] - self.z0;
            if z >= reach * smax {
                return;
            }
            let (kx, ky) = key(x);
            for cx in neighbours(kx, nb) {
                for cy in neighbours(ky, nb) {
                    let Some(list) = grid.get(&(cx, cy)) else {
                        continue;
                    };
                    for &k in list {
                        let s = p.sigma[k];
                        let (dx, dy) = (wrap(x[0] - p.x[k][0]), wrap(x[1] - p.x[k][1]));
                        let r2 = dx * dx + dy * dy;
                        if r2 > cut * cut {
                            continue;
                        }
                        let zk = p.x[k][2] - self.z0;
                        let g = (-0.5 * r2 / (s * s)).exp() / (std::f64::consts::TAU * s * s);
                        let w = g * erfc((zk + z) / (std::f64::consts::SQRT_2 * s));
                        // -(alpha x n) = (-alpha_y, alpha_x, 0).
                        let a = p.alpha[k];
                        d[0] -= w * a[1];
                        d[1] += w * a[0];
                    }
                }
            }
        });
        du
    }

    /// Puts `p` on the wall's lattice (M4', the stencil's weights below
    /// the plane folded onto their mirror layers: module docs), cores
    /// `overlap h`, volumes `h^3`, strengths below the cull dropped.
    pub fn remesh(&self, p: &mut VortexParticles) -> Result<(), VortexError> {
        self.check()?;
        self.check_particles(p)?;
        let lattice = self.scatter(p, 0, 0)?;
        *p = self.gather(&lattice, None).0;
        Ok(())
    }

    /// The viscous substep of `dt` given the slip on the wall points: `p`
    /// onto the lattice ([`NoSlipWall::remesh`]), its vorticity diffused
    /// over `dt` with no flux through the wall, the sheet `n x u_s`
    /// released over `dt` ([`NoSlipWall::layer_shares`]) added, the
    /// strengths below the cull dropped. `slip` is the tangential velocity
    /// at [`NoSlipWall::wall_points`] ([`NoSlipWall::slip`], or the
    /// caller's own).
    pub fn release(
        &self,
        p: &mut VortexParticles,
        slip: &[[f64; 3]],
        dt: f64,
    ) -> Result<FluxReport, VortexError> {
        self.release_in(p, slip, dt, true)
    }

    /// [`NoSlipWall::release`], the diffusion left out where `diffuse` is
    /// false (a step's later sweeps).
    fn release_in(
        &self,
        p: &mut VortexParticles,
        slip: &[[f64; 3]],
        dt: f64,
        diffuse: bool,
    ) -> Result<FluxReport, VortexError> {
        let t = Instant::now();
        self.check()?;
        check_dt(dt)?;
        self.check_particles(p)?;
        let [nx, ny] = self.cells;
        if slip.len() != nx * ny {
            return Err(VortexError::LengthMismatch {
                what: "the slip velocities on the wall points",
                got: slip.len(),
                expected: nx * ny,
            });
        }
        if let Some(&c) = slip.iter().flatten().find(|c| !c.is_finite()) {
            return Err(bad("a slip velocity", c, "must be finite"));
        }
        let shares = self.layer_shares(dt)?;
        // Explicit substeps of nu dt' / h^2 <= 1/8 (stable below 1/6).
        let lambda = self.nu * dt / (self.h * self.h);
        let substeps = if diffuse {
            ((8.0 * lambda).ceil() as usize).max(1)
        } else {
            0
        };
        if substeps > 100_000 {
            return Err(bad(
                "the diffusion's substeps (8 nu dt / h^2)",
                substeps as f64,
                "must be at most 1e5: shorten the step or widen the spacing",
            ));
        }
        let total_before = sum3(&p.alpha);
        let mut lattice = self.scatter(p, shares.len(), substeps)?;
        let held: Vec<bool> = lattice.a.iter().map(|a| *a != [0.0; 3]).collect();
        if diffuse {
            lattice.diffuse(lambda / substeps as f64, substeps);
        }
        // The sheet: n x u_s = (-u_y, u_x, 0), its circulation per cell
        // gamma h^2, shared over the first layers.
        let area = self.h * self.h;
        let mut sheet = [0.0; 3];
        let (mut s2, mut smax) = (0.0f64, 0.0f64);
        for (c, u) in slip.iter().enumerate() {
            let (i, j) = ((c % nx) as i64, (c / nx) as i64);
            let g = [-u[1] * area, u[0] * area, 0.0];
            let s = u[0].hypot(u[1]);
            s2 += s * s;
            smax = smax.max(s);
            for (d, gd) in sheet.iter_mut().zip(g) {
                *d += gd;
            }
            for (k, f) in shares.iter().enumerate() {
                let cell = lattice
                    .cell([i, j, k as i64])
                    .expect("the lattice covers the patch's first layers");
                let a = &mut lattice.a[cell];
                for (ad, gd) in a.iter_mut().zip(g) {
                    *ad += f * gd;
                }
            }
        }
        let (q, culled, culled_particles, created) = self.gather(&lattice, Some(&held));
        *p = q;
        Ok(FluxReport {
            slip_max: smax,
            slip_rms: (s2 / slip.len() as f64).sqrt(),
            sweep_slip: vec![smax],
            sheet,
            total_before,
            total_after: sum3(&p.alpha),
            culled,
            culled_particles,
            created,
            particles: p.len(),
            substeps,
            seconds: t.elapsed().as_secs_f64(),
        })
    }

    /// The viscous substep of `dt` after an inviscid step with `solver`
    /// (its domain this wall's ground plane, or a periodic wall's slab):
    /// `p` put on the lattice, the slip evaluated on the wall, then
    /// [`NoSlipWall::release`]; on further sweeps the slip evaluated again
    /// and its sheet added.
    pub fn step(
        &self,
        p: &mut VortexParticles,
        solver: &Solver,
        dt: f64,
    ) -> Result<FluxReport, VortexError> {
        let t = Instant::now();
        self.check()?;
        check_dt(dt)?;
        self.check_particles(p)?;
        let total_before = sum3(&p.alpha);
        let lattice = self.scatter(p, 0, 0)?;
        let (q, culled, culled_particles, _) = self.gather(&lattice, None);
        *p = q;
        let slip = self.slip(p, solver)?;
        let mut report = self.release(p, &slip, dt)?;
        for _ in 1..self.sweeps {
            let slip = self.slip(p, solver)?;
            let more = self.release_in(p, &slip, dt, false)?;
            for k in 0..3 {
                report.sheet[k] += more.sheet[k];
                report.culled[k] += more.culled[k];
            }
            report.culled_particles += more.culled_particles;
            report.created += more.created;
            report.sweep_slip.push(more.slip_max);
        }
        report.total_after = sum3(&p.alpha);
        report.particles = p.len();
        report.total_before = total_before;
        for (r, c) in report.culled.iter_mut().zip(culled) {
            *r += c;
        }
        report.culled_particles += culled_particles;
        report.seconds = t.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The lattice index along axis `a` (0, 1: from the patch's corner; 2:
    /// from the plane) of the first point of the M4' stencil about `x`,
    /// and the stencil's four weights.
    fn stencil(&self, a: usize, x: f64) -> (i64, [f64; 4]) {
        let o = if a == 2 { self.z0 } else { self.origin[a] };
        let s = (x - o) / self.h - 0.5;
        let base = s.floor() as i64 - 1;
        let mut w = [0.0; 4];
        for (k, wk) in w.iter_mut().enumerate() {
            *wk = m4p(s - (base + k as i64) as f64);
        }
        (base, w)
    }

    /// `p` spread onto a lattice covering its stencils, the patch's first
    /// `layers` layers, and `margin` cells more each way (the diffusion's
    /// reach): M4' weights, those below the plane folded onto their
    /// mirror layers.
    fn scatter(
        &self,
        p: &VortexParticles,
        layers: usize,
        margin: usize,
    ) -> Result<Lattice, VortexError> {
        let m = margin as i64;
        let (mut lo, mut hi) = (
            [0i64, 0, 0],
            [
                self.cells[0] as i64 - 1,
                self.cells[1] as i64 - 1,
                layers as i64 - 1,
            ],
        );
        if layers == 0 {
            // No sheet: the lattice need not cover the patch.
            lo = [i64::MAX, i64::MAX, 0];
            hi = [i64::MIN, i64::MIN, 0];
        }
        for x in &p.x {
            for a in 0..3 {
                let (base, _) = self.stencil(a, x[a]);
                lo[a] = lo[a].min(base);
                hi[a] = hi[a].max(base + 3);
            }
        }
        if p.is_empty() && layers == 0 {
            lo = [0; 3];
            hi = [0; 3];
        }
        // Below the plane the stencil folds up: the lattice starts at the
        // first layer.
        lo[2] = 0;
        hi[2] += m;
        let wrap = self.periodic;
        for a in 0..2 {
            if wrap {
                lo[a] = 0;
                hi[a] = self.cells[a] as i64 - 1;
            } else {
                lo[a] -= m;
                hi[a] += m;
            }
        }
        let n = [0, 1, 2].map(|a| (hi[a] - lo[a] + 1).max(1) as usize);
        let cells = n[0]
            .checked_mul(n[1])
            .and_then(|c| c.checked_mul(n[2]))
            .filter(|&c| c <= MAX_CELLS);
        let Some(cells) = cells else {
            return Err(bad(
                "the wall's lattice cells (the particles' extent over the spacing)",
                n[0] as f64 * n[1] as f64 * n[2] as f64,
                "must be at most 2^26: particles far apart, or a spacing too fine for them",
            ));
        };
        let mut lattice = Lattice {
            lo,
            n,
            wrap,
            a: vec![[0.0; 3]; cells],
        };
        // Each particle's stencil (cells and weights), then the lattice
        // filled layer by layer in parallel from the particles reaching
        // each layer.
        type Stencil = ([[usize; 4]; 3], [[f64; 4]; 3]);
        let stencils: Vec<Stencil> =
            p.x.par_iter()
                .map(|x| {
                    let mut idx = [[0usize; 4]; 3];
                    let mut w = [[0.0; 4]; 3];
                    for a in 0..3 {
                        let (base, wa) = self.stencil(a, x[a]);
                        w[a] = wa;
                        for (k, slot) in idx[a].iter_mut().enumerate() {
                            let mut i = base + k as i64;
                            if a == 2 && i < 0 {
                                // The fold: -1 onto 0, -2 onto 1.
                                i = -1 - i;
                            }
                            *slot = lattice
                                .axis_index(a, i)
                                .expect("the lattice covers the stencils");
                        }
                    }
                    (idx, w)
                })
                .collect();
        let mut by_layer: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n[2]];
        for (i, (idx, w)) in stencils.iter().enumerate() {
            for k in 0..4 {
                if w[2][k] != 0.0 {
                    by_layer[idx[2][k]].push((i, k));
                }
            }
        }
        let layer = n[0] * n[1];
        lattice
            .a
            .par_chunks_mut(layer)
            .zip(by_layer.par_iter())
            .for_each(|(out, from)| {
                for &(i, kz) in from {
                    let (idx, w) = &stencils[i];
                    for ky in 0..4 {
                        for kx in 0..4 {
                            let wt = w[0][kx] * w[1][ky] * w[2][kz];
                            // A particle on a lattice point weighs 0 at the
                            // others but for rounding.
                            if wt.abs() < 1e-12 {
                                continue;
                            }
                            let c = &mut out[idx[1][ky] * n[0] + idx[0][kx]];
                            for (cd, ad) in c.iter_mut().zip(p.alpha[i]) {
                                *cd += wt * ad;
                            }
                        }
                    }
                }
            });
        Ok(lattice)
    }

    /// The lattice's nonzero strengths as particles, those below the cull
    /// dropped: the particles, the strength dropped, how many, and how many
    /// of those kept lie in cells `held` had empty.
    fn gather(
        &self,
        lattice: &Lattice,
        held: Option<&[bool]>,
    ) -> (VortexParticles, [f64; 3], usize, usize) {
        let norm = |a: &[f64; 3]| (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
        let largest = lattice.a.iter().map(norm).fold(0.0, f64::max);
        let floor = self.cull * largest;
        let mut q = VortexParticles {
            x: Vec::new(),
            alpha: Vec::new(),
            sigma: Vec::new(),
            volume: Vec::new(),
        };
        let (mut culled, mut dropped, mut created) = ([0.0; 3], 0, 0);
        let [nx, ny, _] = lattice.n;
        let (h, sigma) = (self.h, self.sigma());
        for (c, a) in lattice.a.iter().enumerate() {
            if *a == [0.0; 3] {
                continue;
            }
            if norm(a) < floor {
                for (d, ad) in culled.iter_mut().zip(a) {
                    *d += ad;
                }
                dropped += 1;
                continue;
            }
            if held.is_some_and(|held| !held[c]) {
                created += 1;
            }
            let i = [
                (c % nx) as i64,
                ((c / nx) % ny) as i64,
                (c / (nx * ny)) as i64,
            ];
            let x = [0, 1, 2].map(|d| {
                let o = if d == 2 { self.z0 } else { self.origin[d] };
                o + ((i[d] + lattice.lo[d]) as f64 + 0.5) * h
            });
            q.x.push(x);
            q.alpha.push(*a);
            q.sigma.push(sigma);
            q.volume.push(h * h * h);
        }
        (q, culled, dropped, created)
    }
}

/// Strengths on a box of the wall's lattice: cell `[i, j, k]` (lattice
/// indices, `k` the layer) at `lo + [i, j, k]`; x and y wrap on a periodic
/// wall.
struct Lattice {
    lo: [i64; 3],
    n: [usize; 3],
    wrap: bool,
    a: Vec<[f64; 3]>,
}

impl Lattice {
    /// The box's index along axis `a` of lattice index `i` (wrapped along
    /// x and y on a periodic wall), or none outside the box.
    fn axis_index(&self, a: usize, i: i64) -> Option<usize> {
        let n = self.n[a] as i64;
        if self.wrap && a < 2 {
            return Some((i - self.lo[a]).rem_euclid(n) as usize);
        }
        let j = i - self.lo[a];
        (0..n).contains(&j).then_some(j as usize)
    }

    /// The cell of lattice indices `i`.
    fn cell(&self, i: [i64; 3]) -> Option<usize> {
        let [x, y, z] = [0, 1, 2].map(|a| self.axis_index(a, i[a]));
        Some((z? * self.n[1] + y?) * self.n[0] + x?)
    }

    /// `steps` explicit steps of the seven-point Laplacian, `a += lambda
    /// sum_nb (a_nb - a)`, in flux form: no flux through the plane or the
    /// box's open faces (the box reaches past the particles by `steps`
    /// cells), so the total is kept to rounding.
    fn diffuse(&mut self, lambda: f64, steps: usize) {
        let [nx, ny, nz] = self.n;
        let layer = nx * ny;
        let wrap = self.wrap;
        // Neighbours of index i along an axis of n cells.
        let near = move |i: usize, n: usize| -> [Option<usize>; 2] {
            if wrap && n > 1 {
                [Some((i + n - 1) % n), Some((i + 1) % n)]
            } else {
                [i.checked_sub(1), (i + 1 < n).then_some(i + 1)]
            }
        };
        let mut next = vec![[0.0; 3]; self.a.len()];
        for _ in 0..steps {
            let a = &self.a;
            next.par_chunks_mut(layer).enumerate().for_each(|(k, out)| {
                for j in 0..ny {
                    for i in 0..nx {
                        let c = (k * ny + j) * nx + i;
                        let here = a[c];
                        let mut v = here;
                        let mut flow = |d: usize| {
                            for (vd, (nd, hd)) in v.iter_mut().zip(a[d].iter().zip(here)) {
                                *vd += lambda * (nd - hd);
                            }
                        };
                        for ii in near(i, nx).into_iter().flatten() {
                            if ii != i {
                                flow((k * ny + j) * nx + ii);
                            }
                        }
                        for jj in near(j, ny).into_iter().flatten() {
                            if jj != j {
                                flow((k * ny + jj) * nx + i);
                            }
                        }
                        for kk in [k.checked_sub(1), (k + 1 < nz).then_some(k + 1)]
                            .into_iter()
                            .flatten()
                        {
                            flow((kk * ny + j) * nx + i);
                        }
                        out[c - k * layer] = v;
                    }
                }
            });
            std::mem::swap(&mut self.a, &mut next);
        }
    }
}
