//! The Taylor-Green vortex in a periodic box by the vortex particle method
//! against the repository's pseudo-spectral solver (`fmm_vortex::spectral`)
//! from the same field at the same resolution: `u = (sin x cos y cos z,
//! -cos x sin y cos z, 0)` in `[0, 2 pi)^3`, `nu = 1 / Re`. The particles
//! sit on the `n^3` cell centres, strengths the vorticity times the cell's
//! volume, cores of `--overlap` spacings, their sums by the front door in
//! the periodic box; viscosity by core spreading. Every `--every` steps
//! the particles' velocity on the grid (targets that are not sources)
//! gives their kinetic energy `K`, set beside the spectral solver's field
//! smoothed by the particles' Gaussian cores (what the blobs represent of
//! it; the cores spread with the viscosity) and its own, and `-dK/dt` of
//! each; at the end the energy spectra `E(k)`. Writes
//! a CSV, a PNG and, with `--vti`, the particles' velocity on the grid.
//!
//! Without remeshing (`--remesh-every 0`, the default) the particles
//! distort as the flow turns to small scales and the comparison degrades;
//! `--remesh-every k` puts them back on the cell centres every `k` steps
//! (M4'; van Rees, Leonard and Pullin 2011, JCP 230, remeshed every step),
//! `--project` makes the lattice's vorticity divergence-free there, and
//! `--viscous lattice` diffuses it there exactly instead of spreading the
//! cores (the cores stay one size: the resolution is kept to t = 10).
//!
//! `cargo run --release --example vortex_taylor_green -- --n 16 --t-end 2`

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use common::plot::{plot_panels, Panel};
use fmm_core::{Domain, PeriodicBox};
use fmm_vortex::grid::{write_vti, Grid};
use fmm_vortex::output::write_whole;
use fmm_vortex::remesh::{filter_lattice, remesh, Lattice, LatticeFilter};
use fmm_vortex::spectral::{spectrum_of, SpectralNs};
use fmm_vortex::{spread_cores, Checkpoint, Precision, Scheme, Solver, Stepper, VortexParticles};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(about = "The Taylor-Green vortex: vortex particles against a spectral solver")]
struct Args {
    /// Particles (and spectral grid points) a side.
    #[arg(long, default_value_t = 16)]
    n: usize,
    #[arg(long, default_value_t = 1600.0)]
    re: f64,
    #[arg(long, default_value_t = 0.05)]
    dt: f64,
    #[arg(long, default_value_t = 2.0)]
    t_end: f64,
    /// The particles' cores in grid spacings.
    #[arg(long, default_value_t = 1.0)]
    overlap: f64,
    /// Remesh the particles onto the cell centres every this many steps
    /// (M4', `fmm_vortex::remesh`); 0: never.
    #[arg(long, default_value_t = 0)]
    remesh_every: usize,
    /// At each remeshing, make the lattice's vorticity divergence-free
    /// (`fmm_vortex::remesh::project_divergence_free`).
    #[arg(long)]
    project: bool,
    /// Viscosity by core spreading (the cores widen as sqrt(2 nu t)) or,
    /// remeshing, by diffusing the lattice's vorticity exactly at each
    /// remeshing (`fmm_vortex::remesh::LatticeFilter`), the cores kept.
    #[arg(long, value_enum, default_value = "spread")]
    viscous: Viscous,
    /// Steps between the diagnostics.
    #[arg(long, default_value_t = 5)]
    every: usize,
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
    /// The particles' precision in the sums at `--tol`.
    #[arg(long, value_enum, default_value = "f32")]
    precision: Prec,
    /// Sum by the f64 direct sum of the periodic box (the Ewald sum)
    /// instead: small `n` only.
    #[arg(long)]
    f64: bool,
    #[arg(long, value_enum, default_value = "auto")]
    backend: common::Backend,
    #[arg(long, default_value = "vortex_taylor_green.csv")]
    csv: PathBuf,
    /// PNG plot; `none` for no plot.
    #[arg(long, default_value = "vortex_taylor_green.png")]
    plot: PathBuf,
    /// Write the particles' velocity on the grid at the end here.
    #[arg(long)]
    vti: Option<PathBuf>,
    /// Write the particles where the run ended (or stopped) here, as a
    /// checkpoint (`fmm_vortex::Checkpoint`).
    #[arg(long)]
    save: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
enum Prec {
    F32,
    F64,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
enum Viscous {
    Spread,
    Lattice,
}

/// The Taylor-Green velocity and its vorticity.
fn velocity(x: [f64; 3]) -> [f64; 3] {
    let ([sx, sy, _], [cx, cy, cz]) = (x.map(f64::sin), x.map(f64::cos));
    [sx * cy * cz, -cx * sy * cz, 0.0]
}

fn vorticity(x: [f64; 3]) -> [f64; 3] {
    let ([sx, sy, sz], [cx, cy, cz]) = (x.map(f64::sin), x.map(f64::cos));
    [-cx * sy * sz, -sx * cy * sz, 2.0 * sx * sy * cz]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if args.viscous == Viscous::Lattice && args.remesh_every == 0 {
        return Err("--viscous lattice diffuses at the remeshings: give --remesh-every".into());
    }
    let (n, side) = (args.n, std::f64::consts::TAU);
    let nu = 1.0 / args.re;
    let h = side / n as f64;
    let sigma = args.overlap * h;
    let mut x = Vec::with_capacity(n * n * n);
    let mut alpha = Vec::with_capacity(n * n * n);
    for i in 0..n * n * n {
        let c = [i % n, (i / n) % n, i / (n * n)].map(|j| (j as f64 + 0.5) * h);
        x.push(c);
        alpha.push(vorticity(c).map(|w| w * h * h * h));
    }
    let count = x.len();
    let mut p = VortexParticles::new(x, alpha, vec![sigma; count], vec![h * h * h; count])?;
    let pbox = PeriodicBox::cube([0.0; 3], side);
    let solver = if args.f64 {
        Solver::direct_f64(args.backend.core())
    } else {
        let s = Solver::f32_at(args.backend.core(), args.tol);
        match args.precision {
            Prec::F32 => s,
            Prec::F64 => Solver {
                precision: Precision::F64,
                ..s
            },
        }
    }
    .in_domain(Domain::Periodic(pbox));
    let grid = Grid {
        origin: [0.0; 3],
        side,
        n,
    };
    let mut spectral = SpectralNs::from_fn(n, side, nu, velocity)?;
    let energy = |u: &[Vec<f64>; 3]| -> f64 {
        (0..u[0].len())
            .map(|i| u[0][i] * u[0][i] + u[1][i] * u[1][i] + u[2][i] * u[2][i])
            .sum::<f64>()
            * 0.5
            / u[0].len() as f64
    };
    let steps = (args.t_end / args.dt).round() as usize;
    println!(
        "Taylor-Green, Re {}, {n}^3 particles (cores {} spacings, remeshed every {} steps, viscosity by {:?}) against a {n}^3 spectral solver, AB2 and RK4, dt {}, {steps} steps, sums {}",
        args.re,
        args.overlap,
        args.remesh_every,
        args.viscous,
        args.dt,
        if args.f64 {
            "f64 direct (Ewald)".to_string()
        } else {
            format!("at {:e} ({:?})", args.tol, args.precision)
        }
    );
    println!(
        "{:>6} {:>10} {:>10} {:>9} {:>10} {:>11} {:>11} {:>11}  sums (last step)",
        "t", "K vortex", "K spec*", "dK/K", "K spectral", "-dK/dt vtx", "-dK*/dt", "eps spec"
    );
    println!("(* the spectral field smoothed by the particles' Gaussian cores: what they represent of it)");
    let mut stepper = Stepper::new(Scheme::Ab2);
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {eta} left")
            .map_err(|e| e.to_string())?,
    );
    let mut csv = String::from(
        "t,k_vortex,k_spectral_smoothed,k_spectral,eps_vortex,eps_smoothed,eps_spectral\n",
    );
    let (mut kv, mut ks, mut kt, mut ev, mut es, mut et) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut last, mut worst, mut device) = (None::<(f64, f64, f64)>, 0.0f64, String::new());
    // The last step's sums: their estimated error and settings.
    let mut achieved = String::new();
    let (mut t_vortex, mut t_spectral) = (0.0, 0.0);
    let mut u = solver.velocity_on(&p, &grid)?;
    // An evaluation that cannot meet the tolerance (the particles distort
    // without remeshing) stops the run: what was made is written, then
    // the error said.
    let mut stopped = None;
    let mut done = 0;
    for step in 0..=steps {
        let t = step as f64 * args.dt;
        if step % args.every == 0 || step == steps {
            u = match solver.velocity_on(&p, &grid) {
                Ok(u) => u,
                Err(e) => {
                    stopped = Some((t, e));
                    break;
                }
            };
            let sigma_t = p.sigma[0];
            let (k_v, k_s, k_t) = (
                energy(&u),
                spectral.smoothed_energy(sigma_t),
                spectral.energy(),
            );
            let rel = k_v / k_s - 1.0;
            worst = worst.max(rel.abs());
            let eps_t = spectral.dissipation();
            // -dK/dt of both by the difference since the last.
            let (eps_v, eps_s) = last.map_or((f64::NAN, f64::NAN), |(t0, v0, s0)| {
                ((v0 - k_v) / (t - t0), (s0 - k_s) / (t - t0))
            });
            if let Some((t0, _, _)) = last {
                ev.push((0.5 * (t0 + t), eps_v));
                es.push((0.5 * (t0 + t), eps_s));
            }
            last = Some((t, k_v, k_s));
            kv.push((t, k_v));
            ks.push((t, k_s));
            kt.push((t, k_t));
            et.push((t, eps_t));
            csv.push_str(&format!("{t},{k_v},{k_s},{k_t},{eps_v},{eps_s},{eps_t}\n"));
            bar.suspend(|| {
                println!(
                    "{t:6.2} {k_v:10.6} {k_s:10.6} {rel:9.1e} {k_t:10.6} {eps_v:11.3e} {eps_s:11.3e} {eps_t:11.3e}  {achieved}"
                )
            });
        }
        if step < steps {
            let clock = Instant::now();
            let r = match stepper.step_particles(&mut p, args.dt, |s| solver.rates(s)) {
                Ok(r) => r,
                Err(e) => {
                    stopped = Some((t, e));
                    break;
                }
            };
            if args.viscous == Viscous::Spread {
                spread_cores(&mut p, nu, args.dt)?;
            }
            done += 1;
            if args.remesh_every > 0 && done % args.remesh_every == 0 {
                p = remesh(&p, &Lattice::Periodic { pbox, n }, 0.0)?;
                let filter = LatticeFilter {
                    project: args.project,
                    diffuse: match args.viscous {
                        Viscous::Spread => 0.0,
                        Viscous::Lattice => nu * args.dt * args.remesh_every as f64,
                    },
                };
                filter_lattice(&mut p, &pbox, n, filter)?;
                // Adams-Bashforth's last rates belong to the old particles.
                stepper.restart();
            }
            t_vortex += clock.elapsed().as_secs_f64();
            device.clone_from(&r.device);
            if let Some(a) = &r.achieved {
                achieved = format!(
                    "{:.1e} {} p {} theta {}",
                    a.estimated_error, a.method, a.settings.p, a.settings.theta
                );
            }
            let clock = Instant::now();
            spectral.step(args.dt)?;
            t_spectral += clock.elapsed().as_secs_f64();
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let reached = kv.last().map_or(0.0, |l| l.0);
    println!(
        "K within {worst:.1e} of the smoothed spectral field's to t = {reached}; {:.3} s a particle step (sums on {device}), {:.3} s a spectral step",
        t_vortex / done.max(1) as f64,
        t_spectral / done.max(1) as f64
    );
    let (e_v, e_s, e_t) = (
        spectrum_of(&u, n)?,
        spectral.smoothed_spectrum(p.sigma[0]),
        spectral.spectrum(),
    );
    println!("E(k) at t = {reached} (* smoothed by the cores):");
    println!(
        "{:>4} {:>11} {:>11} {:>8} {:>11}",
        "k", "vortex", "spectral*", "ratio", "spectral"
    );
    for k in 1..n / 2 {
        // Shells the spectral field leaves empty (k = 1 here) have no ratio.
        let ratio = if e_s[k] > 1e-20 {
            format!("{:8.4}", e_v[k] / e_s[k])
        } else {
            format!("{:>8}", "-")
        };
        println!(
            "{k:4} {:11.4e} {:11.4e} {ratio} {:11.4e}",
            e_v[k], e_s[k], e_t[k]
        );
    }
    if let Some((t, e)) = &stopped {
        // The series is whole to where the run stopped, and says so.
        csv.push_str(&format!("# stopped at t = {t}: {e}\n"));
    }
    write_whole(&args.csv, |f| f.write_all(csv.as_bytes()))?;
    println!("time series in {}", args.csv.display());
    if let Some(path) = &args.vti {
        write_vti(path, &grid, &[("velocity", &u)])?;
        println!("the particles' velocity on the grid in {}", path.display());
    }
    if args.plot.as_os_str() != "none" {
        let panels = [
            Panel {
                caption: "Kinetic energy".into(),
                y: "K".into(),
                lines: vec![("vortex particles".into(), kv), ("spectral".into(), ks)],
            },
            Panel {
                caption: "Dissipation rate -dK/dt".into(),
                y: "epsilon".into(),
                lines: vec![("vortex particles".into(), ev), ("spectral".into(), es)],
            },
        ];
        let title = format!(
            "Taylor-Green vortex, Re {}, {n}^3 particles and modes",
            args.re
        );
        plot_panels(&args.plot, &title, &panels)?;
        println!("plot in {}", args.plot.display());
    }
    if let Some(path) = &args.save {
        let at = Checkpoint {
            step: done as u64,
            time: done as f64 * args.dt,
            particles: p.clone(),
            stepper: stepper.clone(),
        };
        at.save(path)?;
        println!("the particles at t = {} in {}", at.time, path.display());
    }
    match stopped {
        Some((t, e)) => {
            println!(
                "the run stopped at t = {t:.2}, before its end at {}",
                args.t_end
            );
            Err(e.into())
        }
        None => Ok(()),
    }
}
