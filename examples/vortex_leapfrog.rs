//! Leapfrogging vortex rings (`fmm-vortex`): two coaxial rings of radius 1
//! and circulation 1, one behind the other; the rear ring shrinks and
//! speeds up through the front one, which widens and slows, and they take
//! turns. Prints each ring's position (the centre of its impulse) and
//! radius over time, when one passes through the other, and the drift of
//! the total linear impulse, which the inviscid flow conserves; writes a
//! CSV and a PNG.
//!
//! `cargo run --release --example vortex_leapfrog`

mod common;

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use common::plot::{plot_panels, Panel};
use fmm_core::Method;
use fmm_vortex::diagnostics::norm;
use fmm_vortex::output::write_whole;
use fmm_vortex::reinit::{reinitialise, Lattice};
use fmm_vortex::remesh::{remesh, Lattice as Mesh};
use fmm_vortex::solenoidal::make_solenoidal;
use fmm_vortex::{
    impulse_centre, ring_radius, Invariants, Precision, Ring, Scheme, Solver, Stepper,
    VortexParticles,
};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(about = "Two leapfrogging vortex rings by the vortex particle method")]
struct Args {
    /// The distance between the rings along their axis.
    #[arg(long, default_value_t = 0.6)]
    gap: f64,
    /// The core's Gaussian width (a line of particles of this core where
    /// `--layers` is 0).
    #[arg(long, default_value_t = 0.1)]
    core: f64,
    /// Lattice spacings across the core (0: one line of particles).
    #[arg(long, default_value_t = 1)]
    layers: usize,
    #[arg(long, default_value_t = 0.05)]
    dt: f64,
    /// End time.
    #[arg(long, default_value_t = 12.0)]
    t_end: f64,
    /// Put the particles back on a lattice of the starting spacing every
    /// this many steps (RBF interpolation of the vorticity,
    /// `fmm_vortex::reinit`); 0: never. Without it the particles distort
    /// past t = 20 and the run fails; with it (every 40 steps) the pair's
    /// impulse drifts 1.4e-3 by t = 4 and 1.4e-2 by t = 8, against 5.6e-4
    /// to t = 12 without (docs/VORTEX.md), so it is off by default.
    #[arg(long, default_value_t = 0)]
    reinit_every: usize,
    /// Remesh the particles onto a lattice of the starting spacing every
    /// this many steps instead (M4', `fmm_vortex::remesh`: each remeshing
    /// keeps the circulation and the linear and angular impulse, but the
    /// remeshed pair's impulse drifts ten times faster between them,
    /// docs/VORTEX.md); 0: never.
    #[arg(long, default_value_t = 0)]
    remesh_every: usize,
    /// Lattice points whose strength is below this fraction of the
    /// largest are left empty at a remeshing.
    #[arg(long, default_value_t = 1e-3)]
    remesh_cull: f64,
    /// After each remeshing take each ring's vorticity's gradient part
    /// out (`fmm_vortex::solenoidal`: a Poisson solve by the Coulomb
    /// kernel through the front door, at 1e-6).
    #[arg(long)]
    solenoidal: bool,
    /// Lattice points whose vorticity is below this fraction of the
    /// largest are left empty at a reinitialisation.
    #[arg(long, default_value_t = 1e-2)]
    cull: f64,
    /// The interpolation's relative residual at a reinitialisation.
    #[arg(long, default_value_t = 1e-4)]
    reinit_tol: f64,
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
    /// Sum by the f64 direct sum instead (the fast sums' reference).
    #[arg(long)]
    direct: bool,
    #[arg(long, value_enum, default_value = "auto")]
    backend: common::Backend,
    #[arg(long, default_value = "vortex_leapfrog.csv")]
    csv: PathBuf,
    /// PNG plot; `none` for no plot.
    #[arg(long, default_value = "vortex_leapfrog.png")]
    plot: PathBuf,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let (sigma, n) = match args.layers {
        0 => (
            args.core,
            (4.0 * std::f64::consts::PI / args.core).ceil() as usize,
        ),
        k => {
            let h = args.core / k as f64;
            (h, (2.0 * std::f64::consts::PI / h).ceil() as usize)
        }
    };
    let ring = |z: f64| Ring {
        center: [0.0, 0.0, z],
        core: if args.layers == 0 { 0.0 } else { args.core },
        layers: args.layers,
        ..Ring::line(1.0, 1.0, sigma, n)
    };
    let rear = ring(0.0).particles()?;
    let mut half = rear.len();
    let mut p = rear.joined(&ring(args.gap).particles()?);
    let lattice = Lattice {
        cull: args.cull,
        tolerance: args.reinit_tol,
        ..Lattice::new(sigma)
    };

    let solver = if args.direct {
        Solver::direct_f64(args.backend.core())
    } else {
        Solver::f32_at(args.backend.core(), args.tol)
    };
    // The interpolation's products by the f64 direct sum (the conjugate
    // gradients stall at the products' own error).
    let interpolation = Solver {
        method: Method::direct(),
        precision: Precision::F64,
        ..solver.clone()
    };
    let steps = (args.t_end / args.dt).round() as usize;
    let first = Invariants::of(&p).linear_impulse;
    println!(
        "Two rings: R = 1, circulation 1, gap {}, core {}, {} particles each, AB2, dt = {}, {steps} steps, tolerance {:e}",
        args.gap, args.core, half, args.dt, args.tol
    );
    println!(
        "{:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}",
        "t", "Z1", "Z2", "R1", "R2", "dI/I0", "N"
    );
    let mut stepper = Stepper::new(Scheme::Ab2);
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {eta} left")
            .map_err(|e| e.to_string())?,
    );
    let mut csv = String::from("t,z1,z2,r1,r2,impulse_drift\n");
    let (mut z1s, mut z2s, mut r1s, mut r2s) = (vec![], vec![], vec![], vec![]);
    let (mut worst, mut passes, mut ahead, mut device) = (0.0f64, Vec::new(), 2, String::new());
    let (mut reinits, mut iterations, mut worst_jump) = (0, 0, 0.0f64);
    let mut remeshes = 0;
    for step in 0..=steps {
        let t = step as f64 * args.dt;
        let (a, b) = (p.range(0..half), p.range(half..p.len()));
        let (z1, z2, r1, r2) = (
            impulse_centre(&a),
            impulse_centre(&b),
            ring_radius(&a),
            ring_radius(&b),
        );
        let i = Invariants::of(&p).linear_impulse;
        let drift = norm([i[0] - first[0], i[1] - first[1], i[2] - first[2]]) / norm(first);
        worst = worst.max(drift);
        csv.push_str(&format!("{t},{z1},{z2},{r1},{r2},{drift}\n"));
        z1s.push((t, z1));
        z2s.push((t, z2));
        r1s.push((t, r1));
        r2s.push((t, r2));
        let now = if z1 > z2 { 1 } else { 2 };
        if now != ahead {
            passes.push(t);
            ahead = now;
            bar.suspend(|| println!("t = {t:.2}: ring {now} passes through the other"));
        }
        if step % 40 == 0 || step == steps {
            let n = p.len();
            bar.suspend(|| {
                println!("{t:7.2} {z1:9.4} {z2:9.4} {r1:9.4} {r2:9.4} {drift:10.2e} {n:9}")
            });
        }
        if step < steps {
            let r = stepper.step_particles(&mut p, args.dt, |s| solver.rates(s))?;
            device.clone_from(&r.device);
            bar.inc(1);
            if args.reinit_every > 0 && (step + 1) % args.reinit_every == 0 {
                // Both rings onto one lattice (two particles on one point
                // would miss the stretching between them: the kernel adds
                // nothing at zero separation), each new particle named
                // after the ring whose vorticity is the larger there.
                let before = Invariants::of(&p).linear_impulse;
                let r = reinitialise(&p, &lattice, &interpolation)?;
                let after = Invariants::of(&r.particles).linear_impulse;
                worst_jump = worst_jump.max(change(before, after, first));
                iterations += r.iterations;
                reinits += 1;
                let q = r.particles;
                let w1 = interpolation.vorticity(&p.range(0..half), &q.x)?;
                let w2 = interpolation.vorticity(&p.range(half..p.len()), &q.x)?;
                let (mut first, mut second) = (Vec::new(), Vec::new());
                for i in 0..q.len() {
                    if norm(w1[i]) >= norm(w2[i]) {
                        first.push(i);
                    } else {
                        second.push(i);
                    }
                }
                half = first.len();
                let pick = |idx: &[usize]| VortexParticles {
                    x: idx.iter().map(|&i| q.x[i]).collect(),
                    alpha: idx.iter().map(|&i| q.alpha[i]).collect(),
                    sigma: idx.iter().map(|&i| q.sigma[i]).collect(),
                    volume: idx.iter().map(|&i| q.volume[i]).collect(),
                };
                p = pick(&first).joined(&pick(&second));
                stepper.restart();
            }
            if args.remesh_every > 0 && (step + 1) % args.remesh_every == 0 {
                let before = Invariants::of(&p).linear_impulse;
                let filter = args.solenoidal.then(|| Solver {
                    method: fmm_core::Method::tolerance(1e-6),
                    ..solver.clone()
                });
                let (q, h) = remeshed(&p, half, sigma, args.remesh_cull, filter.as_ref())?;
                let after = Invariants::of(&q).linear_impulse;
                worst_jump = worst_jump.max(change(before, after, first));
                p = q;
                half = h;
                remeshes += 1;
                stepper.restart();
            }
        }
    }
    bar.finish_and_clear();
    println!(
        "{} passages (at t = {}), the linear impulse within {worst:.1e} of its start; sums on {device}",
        passes.len(),
        passes.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>().join(", ")
    );
    if reinits > 0 {
        println!(
            "{reinits} reinitialisations onto a lattice of {sigma}, {:.1} interpolation iterations each, the impulse changed by at most {worst_jump:.1e} by one; {} particles at the end",
            iterations as f64 / reinits as f64,
            p.len()
        );
    }
    if remeshes > 0 {
        println!(
            "{remeshes} remeshings onto a lattice of {sigma} (M4', culled below {:e}), the impulse changed by at most {worst_jump:.1e} by one; {} particles at the end",
            args.remesh_cull,
            p.len()
        );
    }
    write_whole(&args.csv, |f| f.write_all(csv.as_bytes()))?;
    println!("time series in {}", args.csv.display());
    if args.plot.as_os_str() != "none" {
        let panels = [
            Panel {
                caption: "Centre of each ring's impulse along the axis".into(),
                y: "Z".into(),
                lines: vec![
                    ("ring 1 (starts behind)".into(), z1s),
                    ("ring 2".into(), z2s),
                ],
            },
            Panel {
                caption: "Each ring's radius".into(),
                y: "R".into(),
                lines: vec![("ring 1".into(), r1s), ("ring 2".into(), r2s)],
            },
        ];
        let title = format!(
            "Leapfrogging rings, gap {}, {} particles, AB2 dt {}",
            args.gap,
            p.len(),
            args.dt
        );
        plot_panels(&args.plot, &title, &panels)?;
        println!("plot in {}", args.plot.display());
    }
    Ok(())
}

/// The rings (`p`, the first `half` particles the rear ring's) remeshed
/// onto one lattice of spacing `h` (M4'), each ring on its own and the two
/// summed where both reach a point (two particles on one point would miss
/// the stretching between them: the kernel adds nothing at zero
/// separation), a point given to the ring whose strength there is the
/// larger; each ring's vorticity made divergence-free by `filter` where
/// given. Returns the particles, the rear ring's first, and their count.
fn remeshed(
    p: &VortexParticles,
    half: usize,
    h: f64,
    cull: f64,
    filter: Option<&Solver>,
) -> Result<(VortexParticles, usize), Box<dyn std::error::Error>> {
    use std::collections::BTreeMap;
    let mesh = Mesh::Open {
        origin: [0.0; 3],
        h,
    };
    // Lattice point -> (the strength of each ring there, the core).
    let mut points: BTreeMap<[i64; 3], ([[f64; 3]; 2], f64)> = BTreeMap::new();
    for (ring, part) in [p.range(0..half), p.range(half..p.len())]
        .iter()
        .enumerate()
    {
        let mut q = remesh(part, &mesh, cull)?;
        if let Some(solver) = filter {
            q = make_solenoidal(&q, &mesh, cull, solver)?.particles;
        }
        for i in 0..q.len() {
            let key = q.x[i].map(|x| (x / h - 0.5).round() as i64);
            let e = points.entry(key).or_insert(([[0.0; 3]; 2], q.sigma[i]));
            e.0[ring] = q.alpha[i];
        }
    }
    let (mut rear, mut front) = (Vec::new(), Vec::new());
    for (key, (alpha, sigma)) in points {
        let x = key.map(|k| (k as f64 + 0.5) * h);
        let sum = [0, 1, 2].map(|d| alpha[0][d] + alpha[1][d]);
        let item = (x, sum, sigma);
        if norm(alpha[0]) >= norm(alpha[1]) {
            rear.push(item);
        } else {
            front.push(item);
        }
    }
    let count = rear.len();
    let all: Vec<_> = rear.into_iter().chain(front).collect();
    let q = VortexParticles {
        x: all.iter().map(|a| a.0).collect(),
        alpha: all.iter().map(|a| a.1).collect(),
        sigma: all.iter().map(|a| a.2).collect(),
        volume: vec![h * h * h; all.len()],
    };
    Ok((q, count))
}

/// How far the impulse moved from `before` to `after`, relative to `first`.
fn change(before: [f64; 3], after: [f64; 3], first: [f64; 3]) -> f64 {
    norm([
        after[0] - before[0],
        after[1] - before[1],
        after[2] - before[2],
    ]) / norm(first)
}
