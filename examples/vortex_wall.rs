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
//! 181); those need vorticity made at the wall, which this method does
//! not model.
//!
//! `cargo run --release --example vortex_wall`

mod common;

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use common::plot::{plot_panels, Panel};
use fmm_vortex::output::write_whole;
use fmm_vortex::{
    ground_plane, impulse_centre, line_ring_over_ground, ring_radius, Passive, Ring, Scheme,
    Solver, Stepper, VortexParticles,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};

#[derive(Parser, Debug)]
#[command(about = "A vortex ring against a ground plane by the vortex particle method")]
struct Args {
    /// The ring's starting height above the plane (its radius is 1).
    #[arg(long, default_value_t = 1.5)]
    h0: f64,
    /// The particles' Gaussian core (one line of particles).
    #[arg(long, default_value_t = 0.1)]
    sigma: f64,
    #[arg(long, default_value_t = 0.05)]
    dt: f64,
    #[arg(long, default_value_t = 12.0)]
    t_end: f64,
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
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
    // Circulation -1: the ring moves towards -z, the plane. Particles to
    // keep the spacing below sigma / 2 until the ring has doubled.
    let gamma = -1.0;
    let n = (8.0 * std::f64::consts::PI / args.sigma).ceil() as usize;
    let mut p: VortexParticles = Ring {
        center: [0.0, 0.0, args.h0],
        ..Ring::line(1.0, gamma, args.sigma, n)
    }
    .particles()?;
    let solver = if args.direct {
        Solver::direct_f64(args.backend.core())
    } else {
        Solver::f32_at(args.backend.core(), args.tol)
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

    let steps = (args.t_end / args.dt).round() as usize;
    println!(
        "A ring against the ground: R = 1, circulation 1, h0 = {}, {n} particles of core {}, RK2, dt = {}, {steps} steps, {} dust particles (tau {}); sums {}",
        args.h0,
        args.sigma,
        args.dt,
        args.dust,
        args.tau,
        if args.direct {
            "f64 direct".to_string()
        } else {
            format!("at {:e}", args.tol)
        }
    );
    println!(
        "{:>6} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>7}",
        "t", "h", "R", "h model", "R model", "u_n/u_t", "dust^", "landed"
    );
    let mut model = [1.0, args.h0];
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
        let t = step as f64 * args.dt;
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
            let rates = stepper.step_with_passive(&mut p, &mut dust, args.dt, &solver)?;
            device.clone_from(&rates.device);
            model = model_step(gamma, args.sigma, model, args.dt);
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
            args.h0, args.dt
        );
        plot_panels(&args.plot, &title, &panels)?;
        println!("plot in {}", args.plot.display());
    }
    Ok(())
}
