//! A vortex ring by the vortex particle method (`fmm-vortex`): a ring of
//! radius 1 and circulation 1 whose Gaussian core is resolved by particles
//! across it, moved by its own velocity and stretching (one evaluation of
//! the fused kernel a step, at a tolerance, on the GPU where there is one),
//! second-order Adams-Bashforth. Prints the centre of its impulse and that
//! centre's speed against Saffman's (1970) thin-ring speed for the same
//! vorticity, with the drift of the linear impulse; first, the speed at
//! the start for cores resolved ever finer against the formula; writes the
//! time series to a CSV file and a PNG.
//!
//! `cargo run --release --example vortex_ring`

mod common;

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use common::plot::{plot_ring, RingSample};
use fmm_core::Method;
use fmm_vortex::diagnostics::norm;
use fmm_vortex::output::write_whole;
use fmm_vortex::{
    impulse_centre, impulse_centre_speed, integrate, ring_radius, spread_cores, thin_ring_speed,
    write_vtp, Checkpoint, Invariants, Precision, Ring, Scheme, Solver, Stepper,
};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(about = "A vortex ring by the vortex particle method, against Saffman's speed")]
struct Args {
    /// The core's Gaussian width (standard deviation of the cross-section's
    /// vorticity, before the particles' own cores), a fraction of the radius.
    #[arg(long, default_value_t = 0.1)]
    core: f64,
    /// Lattice spacings across one core width.
    #[arg(long, default_value_t = 2)]
    layers: usize,
    /// The particles' core over the lattice spacing.
    #[arg(long, default_value_t = 1.0)]
    overlap: f64,
    /// Time step.
    #[arg(long, default_value_t = 0.02)]
    dt: f64,
    /// End time (the ring moves about a quarter of its radius in 1).
    #[arg(long, default_value_t = 2.0)]
    t_end: f64,
    #[arg(long, default_value = "ab2")]
    scheme: String,
    /// The relative error the sums are asked for.
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
    /// Where the sums run (auto: the GPU if there is one).
    #[arg(long, value_enum, default_value = "auto")]
    backend: common::Backend,
    /// Kinematic viscosity: the cores spread, `d(sigma^2)/dt = 2 nu` (0:
    /// inviscid). Saffman's speed is then that of the spreading core.
    #[arg(long, default_value_t = 0.0)]
    nu: f64,
    /// Write a checkpoint here every `--checkpoint-every` steps and at the
    /// end (by a temporary name, renamed when complete).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    #[arg(long, default_value_t = 50)]
    checkpoint_every: usize,
    /// Start from this checkpoint (its particles, step and integrator
    /// state) rather than a new ring; the table and plot cover the steps
    /// from there.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Write the particles (with their velocities) as VTK PolyData files
    /// ParaView opens, `DIR/ring_STEP.vtp`, every `--vtk-every` steps.
    #[arg(long)]
    vtk: Option<PathBuf>,
    #[arg(long, default_value_t = 25)]
    vtk_every: usize,
    /// Skip the table of the speed at the start against the core's resolution.
    #[arg(long)]
    no_convergence: bool,
    #[arg(long, default_value = "vortex_ring.csv")]
    csv: PathBuf,
    /// PNG plot of the time series; `none` for no plot.
    #[arg(long, default_value = "vortex_ring.png")]
    plot: PathBuf,
}

/// The ring of radius 1 and circulation 1 with its core resolved.
fn ring(core: f64, layers: usize, overlap: f64) -> Ring {
    Ring::resolved(1.0, 1.0, core, layers, overlap)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let scheme: Scheme = args.scheme.parse()?;
    let solver = Solver {
        backend: args.backend.core(),
        method: Method::tolerance(args.tol),
        precision: Precision::F32,
        ..Solver::default()
    };
    if !args.no_convergence {
        println!("The speed at the start against the core's resolution (Saffman: the thin-ring formula for the same vorticity):");
        println!(
            "{:>6} {:>7} {:>8} {:>9} {:>10} {:>10} {:>7}",
            "core", "layers", "sigma", "N", "speed", "Saffman", "ratio"
        );
        for (core, layers) in [(0.1, 1), (0.1, 2), (0.05, 1), (0.05, 2)] {
            let r = ring(core, layers, args.overlap);
            let p = r.particles()?;
            let rates = solver.rates(&p)?;
            let got = impulse_centre_speed(&p, &rates);
            let want = thin_ring_speed(r.circulation, r.radius, r.core_width());
            println!(
                "{core:6.3} {layers:7} {:8.4} {:9} {got:10.6} {want:10.6} {:7.4}",
                r.sigma,
                p.len(),
                got / want
            );
        }
        println!();
    }

    let r = ring(args.core, args.layers, args.overlap);
    let start = match &args.resume {
        Some(path) => {
            let c = Checkpoint::load(path)?;
            println!(
                "resuming from {} at step {}, t = {}",
                path.display(),
                c.step,
                c.time
            );
            c
        }
        None => Checkpoint {
            step: 0,
            time: 0.0,
            particles: r.particles()?,
            stepper: Stepper::new(scheme),
        },
    };
    let (first_step, mut p, mut stepper) = (start.step as usize, start.particles, start.stepper);
    let steps = (args.t_end / args.dt).round() as usize;
    if first_step >= steps {
        println!("nothing to run: the checkpoint is at step {first_step}, t = {} already reaches --t-end", start.time);
        return Ok(());
    }
    // Saffman's speed of the core as it spreads.
    let formula_at = |t: f64| {
        let w = r.core_width();
        thin_ring_speed(r.circulation, r.radius, (w * w + 2.0 * args.nu * t).sqrt())
    };
    let first = Invariants::of(&p);
    let integrals_at_start = solver.integrals(&p)?;
    println!(
        "Vortex ring: R = 1, circulation 1, core {} ({} spacings across, particles' sigma {:.4}), N = {}, {scheme:?}, dt = {}, {steps} steps, tolerance {:e}",
        args.core,
        args.layers,
        r.sigma,
        p.len(),
        args.dt,
        args.tol
    );
    println!(
        "{:>7} {:>10} {:>10} {:>10} {:>9} {:>10} {:>9}",
        "t", "Z", "speed", "Saffman", "radius", "dI/I0", "strain"
    );
    let mut csv =
        String::from("t,impulse_centre,speed,saffman_speed,radius,impulse_drift,strain_number\n");
    let mut samples = Vec::new();
    let bar = ProgressBar::new(steps.saturating_sub(first_step) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {eta} left")
            .map_err(|e| e.to_string())?,
    );
    let (mut seconds, mut evaluations, mut worst_error, mut device) =
        (0.0, 0, 0.0f64, String::new());
    let (mut speed_sum, mut worst_drift) = (0.0, 0.0f64);
    for step in first_step..=steps {
        let t = step as f64 * args.dt;
        // The report is of the state at t, with the rates there (the
        // step's first evaluation).
        let here = p.clone();
        let rates = if step < steps {
            let r = stepper.step_particles(&mut p, args.dt, |s| {
                let r = solver.rates(s)?;
                seconds += r.seconds;
                evaluations += 1;
                if let Some(a) = &r.achieved {
                    worst_error = worst_error.max(a.estimated_error);
                }
                Ok(r)
            })?;
            if args.nu > 0.0 {
                spread_cores(&mut p, args.nu, args.dt)?;
            }
            bar.inc(1);
            if let Some(path) = &args.checkpoint {
                if (step + 1) % args.checkpoint_every.max(1) == 0 || step + 1 == steps {
                    let c = Checkpoint {
                        step: step as u64 + 1,
                        time: (step + 1) as f64 * args.dt,
                        particles: p.clone(),
                        stepper: stepper.clone(),
                    };
                    c.save(path)?;
                }
            }
            r
        } else {
            solver.rates(&p)?
        };
        device.clone_from(&rates.device);
        let z = impulse_centre(&here);
        let speed = impulse_centre_speed(&here, &rates);
        if let Some(dir) = &args.vtk {
            if step % args.vtk_every.max(1) == 0 || step == steps {
                std::fs::create_dir_all(dir)?;
                write_vtp(
                    &dir.join(format!("ring_{step:06}.vtp")),
                    &here,
                    Some(&rates.u),
                )?;
            }
        }
        let formula = formula_at(t);
        let radius = ring_radius(&here);
        let inv = Invariants::of(&here);
        let d = inv.linear_impulse;
        let i0 = first.linear_impulse;
        let drift = norm([d[0] - i0[0], d[1] - i0[1], d[2] - i0[2]]) / norm(i0);
        let strain = integrate::strain_number(&here, &rates, args.dt);
        worst_drift = worst_drift.max(drift);
        speed_sum += speed;
        csv.push_str(&format!(
            "{t},{z},{speed},{formula},{radius},{drift},{strain}\n"
        ));
        samples.push(RingSample { t, z, speed });
        if step % 10 == 0 || step == steps {
            bar.suspend(|| {
                println!(
                    "{t:7.3} {z:10.6} {speed:10.6} {formula:10.6} {radius:9.5} {drift:10.2e} {strain:9.4}"
                )
            });
        }
        if strain > 0.1 {
            bar.suspend(|| {
                eprintln!("warning: t = {t:.3}: the step resolves the strain poorly (dt x rate {strain:.3} > 0.1): shorten --dt")
            });
        }
    }
    bar.finish_and_clear();
    let moved = samples.last().map_or(0.0, |s| s.z) - samples[0].z;
    let span = samples.last().map_or(0.0, |s| s.t) - samples[0].t;
    let mean = moved / span;
    let formula = (formula_at(samples[0].t) + formula_at(span + samples[0].t)) / 2.0;
    println!(
        "the ring moved {moved:.5} in {span:.3}: {mean:.5} on average, Saffman's {formula:.5} ({:+.2}%); mean of the speeds {:.5}",
        100.0 * (mean / formula - 1.0),
        speed_sum / samples.len() as f64
    );
    println!(
        "linear impulse within {worst_drift:.1e} of its start; {evaluations} evaluations on {device}, {seconds:.1} s, {:.3} s each, largest estimated error {worst_error:.1e}",
        seconds / evaluations.max(1) as f64
    );
    // The energy: kept by an inviscid flow, spent at `dE/dt = -nu Z`.
    let (a, b) = (integrals_at_start, solver.integrals(&p)?);
    let change = b.energy - a.energy;
    let predicted = -args.nu * 0.5 * (a.enstrophy + b.enstrophy) * span;
    println!(
        "energy {:.6} to {:.6} ({:+.2e}; -nu x enstrophy over the run, trapezoid: {predicted:+.2e}), enstrophy {:.4} to {:.4}, helicity {:.1e}",
        a.energy, b.energy, change, a.enstrophy, b.enstrophy, b.helicity
    );
    write_whole(&args.csv, |f| f.write_all(csv.as_bytes()))?;
    println!("time series in {}", args.csv.display());
    if args.plot.as_os_str() != "none" {
        let title = format!(
            "Vortex ring, N = {}, core {}, {scheme:?} dt {}: speed against Saffman's",
            p.len(),
            args.core,
            args.dt
        );
        plot_ring(&args.plot, &title, &samples, formula)?;
        println!("plot in {}", args.plot.display());
    }
    Ok(())
}
