//! A Plummer sphere evolved with the kick-drift-kick leapfrog, the forces
//! from the treecode, in Henon units (G = M = 1, E = -1/4; crossing time
//! 2 sqrt 2). Reports the total-energy drift, the virial ratio 2T/|W| and
//! the Lagrangian radii (10, 50, 90% of the mass) over time, and writes them
//! to a CSV file and a PNG plot. An equilibrium sphere should keep all of
//! them steady.
//!
//! `cargo run --release --example plummer -- --n 10000 --t-end 10 --dt 0.01`

mod common;

use clap::Parser;
use common::plot::{plot_plummer, Sample};
use fmm_core::distributions::plummer;
use fmm_core::kernels::Gravity;
use fmm_core::{evaluate, Backend, Method, TreeOptions};
use fmm_core::{Error, Particles};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(about = "Plummer sphere with the treecode and a leapfrog")]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    n: usize,
    /// Time step (Henon units).
    #[arg(long, default_value_t = 0.01)]
    dt: f64,
    /// End time (Henon units; the crossing time is 2.83).
    #[arg(long, default_value_t = 10.0)]
    t_end: f64,
    /// Plummer softening (default 0.25 N^(-1/3)).
    #[arg(long)]
    eps: Option<f64>,
    #[arg(long, default_value_t = 0.5)]
    theta: f64,
    #[arg(long, default_value_t = 32)]
    ncrit: usize,
    /// Report every this many steps.
    #[arg(long, default_value_t = 100)]
    every: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Time series of energy, virial ratio and Lagrangian radii.
    #[arg(long, default_value = "plummer.csv")]
    csv: std::path::PathBuf,
    /// PNG plot of the same time series; `none` for no plot.
    #[arg(long, default_value = "plummer.png")]
    plot: std::path::PathBuf,
    /// Where the forces are computed (auto: the GPU if there is one).
    #[arg(long, value_enum, default_value = "auto")]
    backend: common::Backend,
}

/// Accelerations and potentials of every particle from the treecode.
fn forces(
    pos: &[[f64; 3]],
    mass: &[f64],
    eps: f64,
    backend: Backend,
    method: &Method,
) -> Result<(Vec<[f64; 3]>, Vec<f64>), Error> {
    let mut src = Particles::<f64>::sources::<Gravity>(pos)?;
    src.set("m", mass)?;
    let tgt = Particles::<f64>::targets::<Gravity>(pos)?;
    let out = evaluate::<Gravity, f64>(backend, method, &[eps], &tgt, &src)?.outputs;
    let [ax, ay, az] = out.vec3("acc")?;
    let acc = (0..pos.len()).map(|i| [ax[i], ay[i], az[i]]).collect();
    Ok((acc, out.scalar("phi")?.to_vec()))
}

struct State {
    kinetic: f64,
    potential: f64,
    lagrangian: [f64; 3],
}

fn measure(pos: &[[f64; 3]], vel: &[[f64; 3]], mass: &[f64], phi: &[f64]) -> State {
    let kinetic: f64 = vel
        .iter()
        .zip(mass)
        .map(|(v, m)| 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]))
        .sum();
    // Each pair counted twice in the sum of m_i phi_i.
    let potential: f64 = 0.5 * phi.iter().zip(mass).map(|(p, m)| m * p).sum::<f64>();
    let total: f64 = mass.iter().sum();
    let com = [0, 1, 2].map(|c| pos.iter().zip(mass).map(|(p, m)| m * p[c]).sum::<f64>() / total);
    let mut r: Vec<(f64, f64)> = pos
        .iter()
        .zip(mass)
        .map(|(p, &m)| {
            (
                (0..3).map(|c| (p[c] - com[c]).powi(2)).sum::<f64>().sqrt(),
                m,
            )
        })
        .collect();
    r.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut lagrangian = [0.0; 3];
    let mut cumulative = 0.0;
    let mut k = 0;
    for (radius, m) in &r {
        cumulative += m;
        while k < 3 && cumulative >= [0.1, 0.5, 0.9][k] * total {
            lagrangian[k] = *radius;
            k += 1;
        }
    }
    State {
        kinetic,
        potential,
        lagrangian,
    }
}

/// What the reports and the plot show at time `t`; `e0` is the starting
/// energy.
fn sample(t: f64, s: &State, e0: f64) -> Sample {
    let e = s.kinetic + s.potential;
    Sample {
        t,
        drift: (e - e0) / e0.abs(),
        virial: 2.0 * s.kinetic / s.potential.abs(),
        lagrangian: s.lagrangian,
    }
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let n = args.n;
    if n < 2 {
        return Err("a Plummer sphere needs at least 2 particles".into());
    }
    if !(args.dt > 0.0 && args.t_end >= 0.0) {
        return Err("--dt must be positive and --t-end not negative".into());
    }
    if args.every == 0 {
        return Err("--every must be at least 1".into());
    }
    let (mut pos, mut vel) = plummer(n, args.seed);
    let mass = vec![1.0 / n as f64; n];
    let eps = args.eps.unwrap_or(0.25 * (n as f64).powf(-1.0 / 3.0));
    let method = Method::Treecode(TreeOptions {
        theta: args.theta,
        ncrit: args.ncrit,
        ..TreeOptions::default()
    });
    let backend = args.backend.core();
    let steps = (args.t_end / args.dt).round() as usize;
    let (mut acc, mut phi) = forces(&pos, &mass, eps, backend, &method)?;
    let s0 = measure(&pos, &vel, &mass, &phi);
    let e0 = s0.kinetic + s0.potential;
    println!(
        "Plummer sphere: N = {n}, eps = {eps:.4}, theta = {}, dt = {}, {} steps to t = {}",
        args.theta, args.dt, steps, args.t_end
    );
    println!(
        "{:>8} {:>12} {:>12} {:>10} {:>9} {:>9} {:>9}",
        "t", "E", "dE/E0", "2T/|W|", "r10", "r50", "r90"
    );
    let mut csv = String::from("t,energy,relative_energy_drift,virial_ratio,r10,r50,r90\n");
    let mut report = |s: &State, p: &Sample| -> String {
        let e = s.kinetic + s.potential;
        let Sample {
            t, drift, virial, ..
        } = *p;
        let [a, b, c] = p.lagrangian;
        csv.push_str(&format!("{t},{e},{drift},{virial},{a},{b},{c}\n"));
        format!("{t:8.3} {e:12.6} {drift:12.3e} {virial:10.4} {a:9.4} {b:9.4} {c:9.4}")
    };
    // The plot has a point at every step (measuring costs little next to
    // the forces); the CSV and the table one every `--every` steps.
    let plotting = args.plot.as_os_str() != "none";
    let mut samples = vec![sample(0.0, &s0, e0)];
    println!("{}", report(&s0, &samples[0]));

    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {eta} left")
            .map_err(|e| e.to_string())?,
    );
    let mut max_drift: f64 = 0.0;
    for step in 1..=steps {
        // Kick, drift, kick.
        for i in 0..n {
            for c in 0..3 {
                vel[i][c] += 0.5 * args.dt * acc[i][c];
                pos[i][c] += args.dt * vel[i][c];
            }
        }
        (acc, phi) = forces(&pos, &mass, eps, backend, &method)?;
        for i in 0..n {
            for c in 0..3 {
                vel[i][c] += 0.5 * args.dt * acc[i][c];
            }
        }
        bar.inc(1);
        let reporting = step % args.every == 0 || step == steps;
        if reporting || plotting {
            let s = measure(&pos, &vel, &mass, &phi);
            let p = sample(step as f64 * args.dt, &s, e0);
            if reporting {
                max_drift = max_drift.max(p.drift.abs());
                bar.suspend(|| println!("{}", report(&s, &p)));
            }
            samples.push(p);
        }
    }
    bar.finish_and_clear();
    fmm_vortex::output::write_whole(&args.csv, |f| std::io::Write::write_all(f, csv.as_bytes()))?;
    println!(
        "largest |dE/E0| at the reports: {max_drift:.3e}; time series in {}",
        args.csv.display()
    );
    if plotting {
        let worst = samples.iter().map(|p| p.drift.abs()).fold(0.0, f64::max);
        let (lo, hi) = samples.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| {
            (a.min(p.virial), b.max(p.virial))
        });
        println!("over every step: largest |dE/E0| {worst:.3e}, virial ratio {lo:.4} to {hi:.4}");
        let title = format!(
            "Plummer sphere: N = {n}, eps = {eps:.3}, theta = {}, dt = {}",
            args.theta, args.dt
        );
        plot_plummer(&args.plot, &title, &samples)?;
        println!("plot in {}", args.plot.display());
    }
    Ok(())
}
