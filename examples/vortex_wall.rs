//! A vortex ring against a ground plane (hu2011 Fig. 17; `fmm-vortex`
//! over `Domain::Wall`): a ring of radius 1 and circulation 1 starts at
//! height `--h0` above the plane `z = 0` and moves towards it; the plane
//! is made by the particles' mirror images (no flow through it), so the
//! ring slows and widens as its image's velocity spreads it. Prints its
//! height and radius against the thin-ring model with its image (an ODE
//! of two numbers, the image's velocity by quadrature: trusted while the
//! ring is a few cores from the plane), the largest normal velocity on
//! the plane, and what happens to a cloud of dust below the ring
//! (inertial particles that settle and stay where they land). Writes a
//! CSV and a PNG.
//!
//! The images make a wall the flow slips along: no boundary layer grows
//! on it, so the ring neither rebounds nor sheds the secondary ring that
//! experiments and no-slip simulations show (Walker et al. 1987, JFM
//! 181).
//!
//! `--no-slip` makes the wall no-slip ([`fmm_vortex::NoSlipWall`]: the
//! vorticity flux of Koumoutsakos, Leonard and Pepin 1994 on a lattice of
//! remeshed particles) at the Reynolds number `Gamma / nu` of `--nu`: a
//! ring resolved across its core (`--core`, lattice spacing `--h`) comes
//! down, the wall's boundary layer grows under it, separates, and rolls
//! up into a secondary ring of the opposite sign that lifts the primary
//! off the wall (its rebound). Prints the primary's height and radius
//! (the centroid of its signed azimuthal vorticity, and of its core where
//! that vorticity is at least half its peak) and the opposite-signed
//! vorticity's circulation, and what of it stands off the wall, over
//! time; beside them the same ring by an axisymmetric Navier-Stokes
//! solver ([`fmm_vortex::AxisymmetricNs`], on a thread of its own, its
//! grid `--reference`, 0 for none), the reference the rebound is checked
//! against, and how far apart the two cores came.
//!
//! `cargo run --release --example vortex_wall` (free-slip),
//! `cargo run --release --example vortex_wall -- --no-slip` (Re 500 on a
//! lattice of 0.1, 1.5 minutes on 2 CPU cores: the boundary layer one
//! spacing thick), `-- --no-slip --nu 1e-3 --h 0.05 --dt 0.05 --patch 3`
//! (Re 1000 resolved: the rebound and the secondary ring; 21 minutes on 2
//! cores), on a GPU `-- --no-slip --backend cuda --tol 1e-4` with those
//! or finer (`--h 0.025 --dt 0.025`).

mod common;

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use common::plot::{plot_panels, Panel};
use fmm_vortex::output::write_whole;
use fmm_vortex::{
    ground_plane, impulse_centre, line_ring_over_ground, ring_radius, AxisymmetricNs, NoSlipWall,
    Passive, Ring, Scheme, Solver, Stepper, VortexParticles,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};

#[derive(Parser, Debug)]
#[command(about = "A vortex ring against a ground plane by the vortex particle method")]
struct Args {
    /// The ring's starting height above the plane, its radius 1 (default
    /// 1.5; with `--no-slip` 1).
    #[arg(long)]
    h0: Option<f64>,
    /// The particles' Gaussian core (one line of particles).
    #[arg(long, default_value_t = 0.1)]
    sigma: f64,
    /// The time step (default 0.05; with `--no-slip` 0.1).
    #[arg(long)]
    dt: Option<f64>,
    /// The end time (default 12; with `--no-slip` 10).
    #[arg(long)]
    t_end: Option<f64>,
    /// A no-slip wall (the vorticity flux on a lattice of remeshed
    /// particles) instead of the images' free-slip one.
    #[arg(long)]
    no_slip: bool,
    /// With `--no-slip`: the kinematic viscosity (the Reynolds number
    /// `Gamma / nu`, the ring's circulation 1).
    #[arg(long, default_value_t = 2e-3)]
    nu: f64,
    /// With `--no-slip`: the lattice spacing.
    #[arg(long, default_value_t = 0.1)]
    h: f64,
    /// With `--no-slip`: the standard deviation of the ring's Gaussian
    /// core (the blobs, of core `h`, add theirs).
    #[arg(long, default_value_t = 0.2)]
    core: f64,
    /// With `--no-slip`: the no-slip patch reaches this far from the axis
    /// along x and y (beyond it the wall is free-slip; the run stops when
    /// the ring's radius passes 0.8 of it).
    #[arg(long, default_value_t = 2.5)]
    patch: f64,
    /// With `--no-slip`: lattice strengths below this fraction of the
    /// largest are dropped.
    #[arg(long, default_value_t = 1e-4)]
    cull: f64,
    /// With `--no-slip`: sheets a step (each after the slip's evaluation
    /// again: `NoSlipWall::sweeps`).
    #[arg(long, default_value_t = 1)]
    sweeps: usize,
    /// With `--no-slip`: the grid spacing of the axisymmetric
    /// Navier-Stokes solver that runs beside the particles from the same
    /// ring (`fmm_vortex::AxisymmetricNs`, a box 8 wide and 6 high); 0:
    /// none.
    #[arg(long, default_value_t = 0.02)]
    reference: f64,
    /// The sums' relative tolerance (default 1e-4; with `--no-slip` 1e-3).
    #[arg(long)]
    tol: Option<f64>,
    /// Sum by the f64 direct sum instead.
    #[arg(long)]
    direct: bool,
    /// Dust particles in a cloud below the ring (0: none).
    #[arg(long, default_value_t = 2000)]
    dust: usize,
    /// The dust's response time (its settling speed: this times gravity,
    /// 1 along -z).
    #[arg(long, default_value_t = 0.05)]
    tau: f64,
    #[arg(long, value_enum, default_value = "auto")]
    backend: common::Backend,
    #[arg(long, default_value = "vortex_wall.csv")]
    csv: PathBuf,
    /// PNG plot; `none` for no plot.
    #[arg(long, default_value = "vortex_wall.png")]
    plot: PathBuf,
}

/// The model's `(R, h)` advanced by `dt` (RK4 on ten substeps).
fn model_step(gamma: f64, sigma: f64, rh: [f64; 2], dt: f64) -> [f64; 2] {
    let f = |v: [f64; 2]| line_ring_over_ground(gamma, v[0], v[1], sigma);
    let d = dt / 10.0;
    let mut y = rh;
    for _ in 0..10 {
        let at = |k: [f64; 2], s: f64| [y[0] + s * k[0], y[1] + s * k[1]];
        let a = f(y);
        let b = f(at(a, 0.5 * d));
        let c = f(at(b, 0.5 * d));
        let e = f(at(c, d));
        for i in 0..2 {
            y[i] += d / 6.0 * (a[i] + 2.0 * b[i] + 2.0 * c[i] + e[i]);
        }
    }
    y
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if args.no_slip {
        no_slip(&args)
    } else {
        free_slip(&args)
    }
}

fn free_slip(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let (dt, t_end) = (args.dt.unwrap_or(0.05), args.t_end.unwrap_or(12.0));
    let (h0, tol) = (args.h0.unwrap_or(1.5), args.tol.unwrap_or(1e-4));
    // Circulation -1: the ring moves towards -z, the plane. Particles to
    // keep the spacing below sigma / 2 until the ring has doubled.
    let gamma = -1.0;
    let n = (8.0 * std::f64::consts::PI / args.sigma).ceil() as usize;
    let mut p: VortexParticles = Ring {
        center: [0.0, 0.0, h0],
        ..Ring::line(1.0, gamma, args.sigma, n)
    }
    .particles()?;
    let solver = if args.direct {
        Solver::direct_f64(args.backend.core())
    } else {
        Solver::f32_at(args.backend.core(), tol)
    }
    .in_domain(ground_plane(0.0));
    // Dust in a cloud about the ring's path down, settling at tau (a
    // twentieth of the ring's speed).
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let dust: Vec<[f64; 3]> = (0..args.dust)
        .map(|_| {
            let (r, phi) = (
                rng.gen_range(0.3..2.0),
                rng.gen_range(0.0..std::f64::consts::TAU),
            );
            [r * phi.cos(), r * phi.sin(), rng.gen_range(0.05..1.0)]
        })
        .collect();
    let mut dust = Passive::inertial(dust, vec![[0.0; 3]; args.dust], args.tau, [0.0, 0.0, -1.0])?
        .over_ground(0.0)?;
    // Where the normal velocity on the plane is looked at.
    let on_plane: Vec<[f64; 3]> = (0..400)
        .map(|k| {
            let (r, phi) = (0.06 * (k % 50) as f64, 0.61 * k as f64);
            [r * phi.cos(), r * phi.sin(), 0.0]
        })
        .collect();

    let steps = (t_end / dt).round() as usize;
    println!(
        "A ring against the ground: R = 1, circulation 1, h0 = {}, {n} particles of core {}, RK2, dt = {}, {steps} steps, {} dust particles (tau {}); sums {}",
        h0,
        args.sigma,
        dt,
        args.dust,
        args.tau,
        if args.direct {
            "f64 direct".to_string()
        } else {
            format!("at {:e}", tol)
        }
    );
    println!(
        "{:>6} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>7}",
        "t", "h", "R", "h model", "R model", "u_n/u_t", "dust^", "landed"
    );
    let mut model = [1.0, h0];
    let mut stepper = Stepper::new(Scheme::Rk2);
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {eta} left")
            .map_err(|e| e.to_string())?,
    );
    let mut csv = String::from("t,h,r,h_model,r_model,dust_aloft,dust_landed\n");
    let (mut hs, mut rs, mut hm, mut rm) = (vec![], vec![], vec![], vec![]);
    let (mut worst_model, mut worst_normal) = (0.0f64, 0.0f64);
    let (mut lowest, mut device) = ((f64::INFINITY, 0.0), String::new());
    for step in 0..=steps {
        let t = step as f64 * dt;
        let (h, r) = (impulse_centre(&p), ring_radius(&p));
        if h < lowest.0 {
            lowest = (h, t);
        }
        // The model holds while the ring is three cores clear of the plane.
        if model[1] > 3.0 * args.sigma {
            worst_model = worst_model
                .max((h - model[1]).abs())
                .max((r - model[0]).abs());
        }
        hs.push((t, h));
        rs.push((t, r));
        hm.push((t, model[1]));
        rm.push((t, model[0]));
        let aloft = dust.x.iter().filter(|x| x[2] > 0.3).count();
        let landed = dust.deposited();
        if step % 20 == 0 || step == steps {
            let (_, u) = solver.rates_with(&p, &on_plane)?;
            let un = u.iter().fold(0.0f64, |m, v| m.max(v[2].abs()));
            let ut = u.iter().fold(0.0f64, |m, v| m.max(v[0].hypot(v[1])));
            worst_normal = worst_normal.max(un / ut);
            csv.push_str(&format!(
                "{t},{h},{r},{},{},{aloft},{landed}\n",
                model[1], model[0]
            ));
            bar.suspend(|| {
                println!(
                    "{t:6.2} {h:8.4} {r:8.4} {:8.4} {:8.4} {:9.1e} {aloft:6} {landed:7}",
                    model[1],
                    model[0],
                    un / ut
                )
            });
        }
        if step < steps {
            let rates = stepper.step_with_passive(&mut p, &mut dust, dt, &solver)?;
            device.clone_from(&rates.device);
            model = model_step(gamma, args.sigma, model, dt);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let reach = dust.x.iter().fold(0.0f64, |m, x| m.max(x[0].hypot(x[1])));
    println!(
        "The ring came down to h = {:.4} (t = {:.2}) and widened to R = {:.4}; against the thin-ring model within {worst_model:.1e} while it was 3 cores clear; normal velocity on the plane at most {worst_normal:.1e} of the tangential; dust reached r = {reach:.2}, {} of {} landed; sums on {device}",
        lowest.0,
        lowest.1,
        ring_radius(&p),
        dust.deposited(),
        dust.len()
    );
    write_whole(&args.csv, |f| f.write_all(csv.as_bytes()))?;
    println!("time series in {}", args.csv.display());
    if args.plot.as_os_str() != "none" {
        let panels = [
            Panel {
                caption: "Height of the ring's impulse centre above the plane".into(),
                y: "h".into(),
                lines: vec![
                    ("particles".into(), hs),
                    ("thin-ring model with its image".into(), hm),
                ],
            },
            Panel {
                caption: "The ring's radius".into(),
                y: "R".into(),
                lines: vec![("particles".into(), rs), ("model".into(), rm)],
            },
        ];
        let title = format!(
            "A ring against a ground plane, h0 {}, {n} particles, RK2 dt {}",
            h0, dt
        );
        plot_panels(&args.plot, &title, &panels)?;
        println!("plot in {}", args.plot.display());
    }
    Ok(())
}

/// A ring of circulation `gamma` about the z axis, radius 1, at height
/// `h0`, its Gaussian core of standard deviation `core` sampled on the
/// wall's lattice (cells within four cores of its centre line), the
/// samples scaled so that the circulation about the core is `gamma`.
fn lattice_ring(wall: &NoSlipWall, gamma: f64, core: f64, h0: f64) -> VortexParticles {
    let h = wall.h;
    let reach = 4.0 * core;
    let index = |lo: f64, o: f64| ((lo - o) / h - 0.5).floor() as i64;
    let (mut x, mut alpha) = (Vec::new(), Vec::new());
    let (i0, i1) = (
        index(-1.0 - reach, wall.origin[0]),
        index(1.0 + reach, wall.origin[0]) + 1,
    );
    let (j0, j1) = (
        index(-1.0 - reach, wall.origin[1]),
        index(1.0 + reach, wall.origin[1]) + 1,
    );
    let (k0, k1) = (
        index(h0 - reach, wall.z0).max(0),
        index(h0 + reach, wall.z0) + 1,
    );
    let mut around = 0.0;
    for k in k0..=k1 {
        for j in j0..=j1 {
            for i in i0..=i1 {
                let c = [
                    wall.origin[0] + (i as f64 + 0.5) * h,
                    wall.origin[1] + (j as f64 + 0.5) * h,
                    wall.z0 + (k as f64 + 0.5) * h,
                ];
                let r = c[0].hypot(c[1]);
                let s2 = (r - 1.0).powi(2) + (c[2] - h0).powi(2);
                if s2 > reach * reach || r == 0.0 {
                    continue;
                }
                let w = gamma / (std::f64::consts::TAU * core * core)
                    * (-0.5 * s2 / (core * core)).exp();
                let a = w * h * h * h;
                // Its share of the circulation about the core, alpha / (2 pi r).
                around += a / (std::f64::consts::TAU * r);
                x.push(c);
                alpha.push([-c[1] / r * a, c[0] / r * a, 0.0]);
            }
        }
    }
    let scale = gamma / around;
    for a in &mut alpha {
        *a = a.map(|v| v * scale);
    }
    let n = x.len();
    VortexParticles {
        x,
        alpha,
        sigma: vec![wall.sigma(); n],
        volume: vec![h * h * h; n],
    }
}

/// The primary ring (azimuthal vorticity of the sign of its circulation)
/// and the secondary (the opposite sign) in the meridional plane.
#[derive(Clone, Copy, Debug, Default)]
struct Meridional {
    /// The primary's centroid (its share of the circulation about the
    /// core, `alpha_theta / (2 pi r)`, the weight): height and radius.
    z: f64,
    r: f64,
    /// Its core: the centroid of where its vorticity is at least half its
    /// peak (the peak's place, finer than the lattice): height, radius.
    peak_z: f64,
    peak_r: f64,
    /// The circulation of each sign (`sum |alpha_theta| / (2 pi r)`).
    primary: f64,
    secondary: f64,
    /// The opposite-signed circulation above `lift` (off the wall's
    /// boundary layer), its centroid's height and radius, and the peak
    /// opposite-signed vorticity there.
    lifted: f64,
    lifted_z: f64,
    lifted_r: f64,
    lifted_peak: f64,
}

impl Meridional {
    /// The fields in the order of the printed table and the CSV.
    fn row(&self) -> [f64; 10] {
        [
            self.z,
            self.r,
            self.peak_z,
            self.peak_r,
            self.primary,
            self.secondary,
            self.lifted,
            self.lifted_z,
            self.lifted_r,
            self.lifted_peak,
        ]
    }
}

/// The particles' samples of the meridional plane for [`meridional`]:
/// `(r, z, circulation, vorticity)`, the primary's sign positive (the
/// circulation about the core `alpha_theta / (2 pi r)`, the vorticity
/// `alpha_theta / volume`).
fn particle_samples(
    p: &VortexParticles,
    gamma: f64,
) -> impl Iterator<Item = (f64, f64, f64, f64)> + '_ {
    p.x.iter()
        .zip(&p.alpha)
        .zip(&p.volume)
        .filter_map(move |((x, a), v)| {
            let r = x[0].hypot(x[1]);
            if r == 0.0 {
                return None;
            }
            let at = (-x[1] * a[0] + x[0] * a[1]) / r * gamma.signum();
            Some((r, x[2], at / (std::f64::consts::TAU * r), at / v))
        })
}

/// The axisymmetric solver's nodes as [`particle_samples`]'.
fn reference_samples(
    flow: &AxisymmetricNs,
    gamma: f64,
) -> impl Iterator<Item = (f64, f64, f64, f64)> + '_ {
    let sign = gamma.signum();
    flow.nodes()
        .map(move |n| (n.r, n.z, sign * n.omega * n.area, sign * n.omega))
}

/// The primary and secondary rings of samples `(r, z, circulation,
/// vorticity)` (the primary's sign positive); `lift` the height above
/// which opposite-signed vorticity counts as lifted off the wall.
fn meridional(samples: impl Iterator<Item = (f64, f64, f64, f64)>, lift: f64) -> Meridional {
    let mut m = Meridional::default();
    let (mut wz, mut wr, mut lz, mut lr, mut top) = (0.0, 0.0, 0.0, 0.0, 0.0f64);
    let mut core = Vec::new();
    for (r, z, share, omega) in samples {
        if share > 0.0 {
            m.primary += share;
            wz += share * z;
            wr += share * r;
            top = top.max(omega);
            core.push((omega, share, z, r));
        } else {
            m.secondary -= share;
            if z > lift {
                m.lifted -= share;
                lz -= share * z;
                lr -= share * r;
                m.lifted_peak = m.lifted_peak.max(-omega);
            }
        }
    }
    (m.z, m.r) = (wz / m.primary, wr / m.primary);
    let (mut cw, mut cz, mut cr) = (0.0, 0.0, 0.0);
    for &(_, share, z, r) in core.iter().filter(|c| c.0 >= 0.5 * top) {
        cw += share;
        cz += share * z;
        cr += share * r;
    }
    (m.peak_z, m.peak_r) = (cz / cw, cr / cw);
    if m.lifted > 0.0 {
        (m.lifted_z, m.lifted_r) = (lz / m.lifted, lr / m.lifted);
    }
    m
}

/// What one run's measures came to over time.
struct Track {
    /// The lowest core and centroid: (height, t).
    lowest: (f64, f64),
    lowest_centroid: (f64, f64),
    /// The most opposite-signed circulation off the wall: (it, t, height).
    lifted_most: (f64, f64, f64),
    /// Series against t: the core's height and radius, the lifted
    /// opposite-signed vorticity's height.
    core: Vec<(f64, f64)>,
    radius: Vec<(f64, f64)>,
    lifted: Vec<(f64, f64)>,
    last: Meridional,
}

impl Track {
    fn new() -> Self {
        Self {
            lowest: (f64::INFINITY, 0.0),
            lowest_centroid: (f64::INFINITY, 0.0),
            lifted_most: (0.0, 0.0, 0.0),
            core: vec![],
            radius: vec![],
            lifted: vec![],
            last: Meridional::default(),
        }
    }

    fn record(&mut self, t: f64, m: &Meridional) {
        if m.peak_z < self.lowest.0 {
            self.lowest = (m.peak_z, t);
        }
        if m.z < self.lowest_centroid.0 {
            self.lowest_centroid = (m.z, t);
        }
        if m.lifted > self.lifted_most.0 {
            self.lifted_most = (m.lifted, t, m.lifted_z);
        }
        self.core.push((t, m.peak_z));
        self.radius.push((t, m.peak_r));
        // Its height once it holds a thousandth of the ring's circulation.
        if m.lifted > 1e-3 {
            self.lifted.push((t, m.lifted_z));
        }
        self.last = *m;
    }

    /// The run's story in two sentences; `small` the rise that counts as
    /// a rebound, `lift` the height that counts as off the wall.
    fn story(&self, small: f64, lift: f64) -> String {
        let rise = self.last.peak_z - self.lowest.0;
        // A rebound: the core rose from its lowest by `small` or more (its
        // centroid moves smoothly; the cross-diffusion that eats the
        // primary's lower side lifts it too).
        format!(
            "the primary's core came down to h = {:.4} (t = {:.2}) and ended at h = {:.4} ({:+.4}): {}; its vorticity's centroid came down to h = {:.4} (t = {:.2}) and ended at h = {:.4}, R = {:.4}; its circulation ended at {:.3}. Opposite-signed vorticity above z = {lift:.2}: at most {:.4} of circulation (t = {:.2}, its centroid at h = {:.3}): {}.",
            self.lowest.0,
            self.lowest.1,
            self.last.peak_z,
            rise,
            if rise > small { "it rebounded" } else { "no rebound" },
            self.lowest_centroid.0,
            self.lowest_centroid.1,
            self.last.z,
            self.last.r,
            self.last.primary,
            self.lifted_most.0,
            self.lifted_most.1,
            self.lifted_most.2,
            if self.lifted_most.0 > 0.1 && self.lifted_most.2 > 2.0 * lift {
                "a secondary ring lifted off the wall"
            } else {
                "no secondary ring off the wall"
            }
        )
    }
}

/// What the axisymmetric solver beside the particles sends at each of
/// their steps' times: its measures, its steps so far and its seconds.
type ReferenceRow = Result<(Meridional, usize, f64), String>;

/// The axisymmetric solver from the same ring (Gaussian core `core`,
/// circulation `gamma`, radius 1, height `h0`) on a thread of its own,
/// sending its measures at `dt`, `2 dt`, ... `steps dt` (and at 0).
fn reference_beside(
    args: &Args,
    gamma: f64,
    h0: f64,
    dt: f64,
    steps: usize,
    lift: f64,
) -> Result<std::sync::mpsc::Receiver<ReferenceRow>, Box<dyn std::error::Error>> {
    let core = args.core;
    let ring = move |r: f64, z: f64| {
        let s2 = (r - 1.0).powi(2) + (z - h0).powi(2);
        gamma / (std::f64::consts::TAU * core * core) * (-0.5 * s2 / (core * core)).exp()
    };
    let mut flow = AxisymmetricNs::new(8.0, 6.0, args.reference, args.nu, ring)?;
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (clock, mut taken) = (std::time::Instant::now(), 0);
        for step in 0..=steps {
            let row = flow
                .advance_to(step as f64 * dt)
                .map(|n| {
                    taken += n;
                    let m = meridional(reference_samples(&flow, gamma), lift);
                    (m, taken, clock.elapsed().as_secs_f64())
                })
                .map_err(|e| e.to_string());
            let failed = row.is_err();
            // A closed channel: the particles stopped early.
            if send.send(row).is_err() || failed {
                return;
            }
        }
    });
    Ok(receive)
}

fn no_slip(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let dt = args.dt.unwrap_or(0.1);
    let t_end = args.t_end.unwrap_or(12.0);
    let h0 = args.h0.unwrap_or(1.0);
    let tol = args.tol.unwrap_or(1e-3);
    // Circulation -1: the ring moves towards -z, the plane.
    let gamma = -1.0;
    let wall = NoSlipWall::new(0.0, args.h, args.nu, [0.0, 0.0], [args.patch; 2])?
        .with_cull(args.cull)
        .with_sweeps(args.sweeps);
    let solver = if args.direct {
        Solver::direct_f64(args.backend.core())
    } else {
        Solver::f32_at(args.backend.core(), tol)
    }
    .in_domain(ground_plane(0.0));
    let mut p = lattice_ring(&wall, gamma, args.core, h0);
    let steps = (t_end / dt).round() as usize;
    let every = ((0.5 / dt).round() as usize).max(1);
    // Vorticity above three spacings is off the wall's first layers.
    let lift = 3.0 * args.h;
    let reference = if args.reference > 0.0 {
        Some(reference_beside(args, gamma, h0, dt, steps, lift)?)
    } else {
        None
    };
    println!(
        "A ring against a no-slip wall: R = 1, circulation 1, Gaussian core {} (blobs of {} on a lattice of {}), h0 = {h0}, Re = Gamma / nu = {:.0} (nu {}), patch |x|, |y| <= {}, {} sheet(s) a step, RK2, dt = {dt}, {steps} steps; sums {}",
        args.core,
        wall.sigma(),
        args.h,
        1.0 / args.nu,
        args.nu,
        args.patch,
        args.sweeps,
        if args.direct {
            "f64 direct".to_string()
        } else {
            format!("at {tol:e}")
        }
    );
    println!(
        "primary: its vorticity's centroid (h, R) and core (h_pk, R_pk: where it is at least half its peak); the opposite sign's circulation, and above z = {lift:.2}: its circulation, centroid, peak vorticity"
    );
    if reference.is_some() {
        println!(
            "beside it (ref): the same ring by the axisymmetric Navier-Stokes solver (grid {}, box 8 x 6, no-slip everywhere): its core and lifted circulation",
            args.reference
        );
    }
    println!(
        "{:>6} {:>7} {:>7} {:>6} {:>6} {:>7} {:>7} {:>7} {:>6} {:>6} {:>6} {:>9} {:>7}{}",
        "t",
        "h",
        "R",
        "h_pk",
        "R_pk",
        "Gamma1",
        "Gamma2",
        "G2_up",
        "h2_up",
        "R2_up",
        "w2_up",
        "slip_max",
        "parts",
        if reference.is_some() {
            format!(
                " | {:>6} {:>6} {:>7} {:>6}",
                "h_pk", "R_pk", "G2_up", "h2_up"
            )
        } else {
            String::new()
        }
    );
    let mut stepper = Stepper::new(Scheme::Rk2);
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {eta} left")
            .map_err(|e| e.to_string())?,
    );
    const FIELDS: &str = "h,r,h_peak,r_peak,gamma_primary,gamma_secondary,gamma_lifted,h_lifted,r_lifted,omega_lifted";
    let mut csv = format!("t,{FIELDS},slip_max,particles");
    if reference.is_some() {
        let named: Vec<String> = FIELDS.split(',').map(|f| format!("ref_{f}")).collect();
        csv.push_str(&format!(",{}", named.join(",")));
    }
    csv.push('\n');
    let (mut track, mut track_ref) = (Track::new(), Track::new());
    // The largest gaps between the particles' core and the reference's.
    let (mut gap_h, mut gap_r) = ((0.0f64, 0.0), (0.0f64, 0.0));
    let (mut reflected, mut slip) = (0, 0.0);
    let started = std::time::Instant::now();
    let (mut in_rates, mut in_wall) = (0.0, 0.0);
    let mut reference_cost = (0, 0.0);
    for step in 0..=steps {
        let t = step as f64 * dt;
        let m = meridional(particle_samples(&p, gamma), lift);
        track.record(t, &m);
        let beside = match &reference {
            Some(r) => {
                let (mr, n, seconds) = r.recv().map_err(|e| e.to_string())??;
                track_ref.record(t, &mr);
                reference_cost = (n, seconds);
                if (m.peak_z - mr.peak_z).abs() > gap_h.0 {
                    gap_h = ((m.peak_z - mr.peak_z).abs(), t);
                }
                if (m.peak_r - mr.peak_r).abs() > gap_r.0 {
                    gap_r = ((m.peak_r - mr.peak_r).abs(), t);
                }
                Some(mr)
            }
            None => None,
        };
        if step % every == 0 || step == steps {
            let v = m.row();
            let values: Vec<String> = v.iter().map(f64::to_string).collect();
            csv.push_str(&format!("{t},{},{slip},{}", values.join(","), p.len()));
            if let Some(mr) = &beside {
                let r: Vec<String> = mr.row().iter().map(f64::to_string).collect();
                csv.push_str(&format!(",{}", r.join(",")));
            }
            csv.push('\n');
            bar.suspend(|| {
                println!(
                    "{t:6.2} {:7.4} {:7.4} {:6.3} {:6.3} {:7.4} {:7.4} {:7.4} {:6.3} {:6.3} {:6.2} {slip:9.2e} {:7}{}",
                    v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
                    p.len(),
                    beside.map_or(String::new(), |r| format!(
                        " | {:6.3} {:6.3} {:7.4} {:6.3}",
                        r.peak_z, r.peak_r, r.lifted, r.lifted_z
                    ))
                )
            });
        }
        if m.r > 0.8 * args.patch {
            bar.suspend(|| {
                println!(
                    "the ring (R = {:.2}) nears the patch's edge ({}): stopped at t = {t:.2} (give a larger --patch)",
                    m.r, args.patch
                )
            });
            break;
        }
        if step < steps {
            let clock = std::time::Instant::now();
            stepper.step_particles(&mut p, dt, |s| wall.rates(s, &solver))?;
            in_rates += clock.elapsed().as_secs_f64();
            // The particles are remeshed each step: the next step starts
            // afresh (Adams-Bashforth's history would be of other ones).
            stepper.restart();
            reflected += wall.reflect(&mut p);
            let report = wall.step(&mut p, &solver, dt)?;
            slip = report.slip_max;
            in_wall += report.seconds;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    println!("Particles: {}", track.story(0.2 * args.h, lift));
    if reference.is_some() {
        println!("Reference: {}", track_ref.story(0.2 * args.h, lift));
        println!(
            "The particles' core against the reference's: at most {:.4} apart in height (t = {:.2}), {:.4} in radius (t = {:.2}).",
            gap_h.0, gap_h.1, gap_r.0, gap_r.1
        );
    }
    println!(
        "{reflected} particles reflected off the wall; {seconds:.1} s ({in_rates:.1} s in the inviscid steps, {in_wall:.1} s in the wall's substeps){}",
        if reference.is_some() {
            format!(
                "; the reference {} steps in {:.1} s beside them",
                reference_cost.0, reference_cost.1
            )
        } else {
            String::new()
        }
    );
    write_whole(&args.csv, |f| f.write_all(csv.as_bytes()))?;
    println!("time series in {}", args.csv.display());
    if args.plot.as_os_str() != "none" {
        let with_reference = |particles: &[(f64, f64)], reference: &[(f64, f64)], what: &str| {
            let mut lines = vec![(format!("{what}, particles"), particles.to_vec())];
            if !reference.is_empty() {
                lines.push((
                    format!("{what}, axisymmetric reference"),
                    reference.to_vec(),
                ));
            }
            lines
        };
        let mut heights = with_reference(&track.core, &track_ref.core, "primary's core");
        heights.extend(with_reference(
            &track.lifted,
            &track_ref.lifted,
            "secondary, lifted",
        ));
        let panels = [
            Panel {
                caption:
                    "Height of the primary ring's core and of the lifted opposite-signed vorticity"
                        .into(),
                y: "h".into(),
                lines: heights,
            },
            Panel {
                caption: "The primary ring's core radius".into(),
                y: "R".into(),
                lines: with_reference(&track.radius, &track_ref.radius, "primary's core"),
            },
        ];
        let title = format!(
            "A ring against a no-slip wall, Re {:.0}, h0 {h0}, lattice {}, RK2 dt {dt}",
            1.0 / args.nu,
            args.h
        );
        plot_panels(&args.plot, &title, &panels)?;
        println!("plot in {}", args.plot.display());
    }
    Ok(())
}
