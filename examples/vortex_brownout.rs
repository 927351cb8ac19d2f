//! Brown-out (hu2011 Fig. 5, after Syal et al. 2010): a hovering rotor's
//! free-vortex wake over a ground plane, and a bed of dust on the ground
//! that the wake picks up and carries. The rotor (`Rotor`, `Wake`: each
//! blade's span in `--panels` panels, its circulation rising with the
//! radius (`--uniform`: one panel, uniform), trailed where it steps, at
//! the tip, the root and between panels, as filaments of nodes, their
//! segments the vortex particles, the bound vortex closing them, the
//! circulation from the thrust coefficient) turns once a unit of time,
//! radius 1, its hub at `--height` above the plane; the plane is the
//! particles' mirror images (`ground_plane`: no flow through it, slip
//! along it). The dust is inertial (Stokes drag of response time `--tau`,
//! gravity `--gravity`), rests on the ground and is lifted where the log
//! law's friction velocity under the wake passes `--threshold`
//! (`Pickup`). A step moves the nodes by the explicit midpoint rule and
//! the dust by the flow at the step's middle (one evaluation for the
//! dust; on a GPU the dust stays there between steps, `DeviceDust`).
//!
//! The default units map onto a UH-60-like rotor: R = 8 m, a revolution
//! in 0.23 s (a speed unit of 34.8 m/s, an acceleration unit of 151
//! m/s^2: gravity 0.065), C_T = 0.008, quartz dust of 50 microns (response
//! time 0.020 s: 0.088), threshold friction velocity 0.25 m/s (0.0072),
//! roughness 0.1 mm (1.25e-5), reference height 8 cm (0.01). Wake nodes
//! past `--cull` from the axis or older than `--wake-age` revolutions
//! leave the run (free-vortex wake codes truncate the wake).
//!
//! `cargo run --release --example vortex_brownout -- --revolutions 3 --dust 20000`

mod common;

use std::f64::consts::TAU;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use common::plot::{plot_panels, plot_points, Panel, PointPanel};
use fmm_core::cuda::Gpu;
use fmm_core::Method;
use fmm_vortex::output::write_whole;
use fmm_vortex::{
    ground_plane, write_vtp, DeviceDust, Dust, Passive, Pickup, Precision, Rotor, Solver,
    VortexError, VortexParticles, Wake, WakeCheckpoint,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};

#[derive(Parser, Debug)]
#[command(about = "Brown-out: a rotor's vortex wake over the ground lifting a bed of dust")]
struct Args {
    #[arg(long, default_value_t = 4)]
    blades: usize,
    /// The thrust coefficient C_T.
    #[arg(long, default_value_t = 0.008)]
    ct: f64,
    /// The hub's height above the ground, in rotor radii.
    #[arg(long, default_value_t = 1.0)]
    height: f64,
    #[arg(long, default_value_t = 3.0)]
    revolutions: f64,
    #[arg(long, default_value_t = 36)]
    steps_per_rev: usize,
    /// Particles each trailer releases a step.
    #[arg(long, default_value_t = 2)]
    per_step: usize,
    /// The wake particles' Gaussian core, in rotor radii.
    #[arg(long, default_value_t = 0.1)]
    core: f64,
    /// Panels of each blade's span, the circulation on each proportional
    /// to its radius (`Rotor::tapered`).
    #[arg(long, default_value_t = 4)]
    panels: usize,
    /// A uniform circulation along the span instead (one panel: all of
    /// it trails at the tip and the root).
    #[arg(long)]
    uniform: bool,
    /// Wake nodes farther than this from the axis leave the run.
    #[arg(long, default_value_t = 5.0)]
    cull: f64,
    /// Wake nodes older than this many revolutions leave the run.
    #[arg(long, default_value_t = 20.0)]
    wake_age: f64,
    /// Dust particles, resting on the ground in a disk of radius `--bed`.
    #[arg(long, default_value_t = 20_000)]
    dust: usize,
    #[arg(long, default_value_t = 3.0)]
    bed: f64,
    #[arg(long, default_value_t = 0.088)]
    tau: f64,
    #[arg(long, default_value_t = 0.065)]
    gravity: f64,
    /// The threshold friction velocity.
    #[arg(long, default_value_t = 0.0072)]
    threshold: f64,
    #[arg(long, default_value_t = 1.25e-5)]
    roughness: f64,
    /// Where the flow over resting dust is taken, above the ground.
    #[arg(long, default_value_t = 0.01)]
    reference: f64,
    /// The launch speed, upward, over the friction velocity.
    #[arg(long, default_value_t = 1.0)]
    launch: f64,
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
    /// Sum by the direct sum instead of at the tolerance.
    #[arg(long)]
    direct: bool,
    #[arg(long, value_enum, default_value = "auto")]
    backend: common::Backend,
    /// The wake's sums in f32 (f64 by default: its filaments come to lie
    /// within 1e-3 of the ground, where a segment and its image cancel
    /// to within f32's rounding, 5e-5 of the sum; hu2011 found f64
    /// necessary for brown-out too).
    #[arg(long)]
    f32: bool,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Keep the dust on the host even with a GPU (by default it stays on
    /// the GPU between steps there).
    #[arg(long)]
    host_dust: bool,
    /// The dust's sums on the GPU in f64 (f32 by default: the dust flies
    /// a reference height or more above the ground, where f32 meets the
    /// tolerance, and the direct sum the driver often picks for 10^6
    /// targets of a few thousand sources runs 2x faster in f32).
    #[arg(long)]
    dust_f64: bool,
    #[arg(long, default_value = "vortex_brownout.csv")]
    csv: PathBuf,
    /// PNG of the time series and of the cloud at the end; `none` for none.
    #[arg(long, default_value = "vortex_brownout.png")]
    plot: PathBuf,
    /// A checkpoint of the wake and the dust, written here every
    /// `--checkpoint-every` revolutions (whole or not at all).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    #[arg(long, default_value_t = 10.0)]
    checkpoint_every: f64,
    /// Go on from this checkpoint (its rotor, wake and dust; the
    /// revolutions counted from the run's start).
    #[arg(long)]
    resume: Option<PathBuf>,
    /// VTK files (`.vtp`) of the wake and of the dust at the end, with
    /// this prefix (ParaView).
    #[arg(long)]
    vtp: Option<PathBuf>,
}

/// The airborne dust's count, its height below which 99% of it flies,
/// and the largest distance from the axis any dust has reached.
fn cloud(dust: &Passive) -> (usize, f64, f64) {
    let mut z: Vec<f64> = dust.x.iter().map(|x| x[2]).filter(|&z| z > 0.0).collect();
    z.sort_by(f64::total_cmp);
    let top = z.get((z.len() * 99) / 100).copied().unwrap_or(0.0);
    let reach = dust.x.iter().fold(0.0f64, |m, x| m.max(x[0].hypot(x[1])));
    (z.len(), top, reach)
}

/// The dust as the host sees it, wherever it lives.
trait DustOnHost {
    fn to_host(&self) -> Result<Passive, VortexError>;
}

impl DustOnHost for Passive {
    fn to_host(&self) -> Result<Passive, VortexError> {
        Ok(self.clone())
    }
}

impl<R: fmm_core::Real> DustOnHost for DeviceDust<'_, R> {
    fn to_host(&self) -> Result<Passive, VortexError> {
        self.download()
    }
}

/// What a run made.
struct Run {
    wake: Wake,
    dust: Passive,
    csv: String,
    aloft_line: Vec<(f64, f64)>,
    top_line: Vec<(f64, f64)>,
    wake_line: Vec<(f64, f64)>,
    seconds: f64,
    worst_error: f64,
    device: String,
    culled: usize,
}

/// The run's steps, a row of the table every revolution (the dust looked
/// at on the host).
fn steps_of<D: Dust + DustOnHost>(
    args: &Args,
    solver: &Solver,
    mut wake: Wake,
    first: usize,
    dust: &mut D,
) -> Result<Run, Box<dyn std::error::Error>> {
    let period = wake.rotor.period();
    let dt = period / args.steps_per_rev as f64;
    let steps = (args.revolutions * args.steps_per_rev as f64).round() as usize;
    let bar = ProgressBar::new(steps.saturating_sub(first) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {eta} left")
            .map_err(|e| e.to_string())?,
    );
    let mut csv = String::from(
        "revolution,wake_nodes,aloft,lifts,top99,reach,estimated_error,seconds,dust_seconds\n",
    );
    let (mut aloft_line, mut top_line, mut wake_line) = (vec![], vec![], vec![]);
    let (start, mut rev_start) = (Instant::now(), Instant::now());
    let (mut worst_error, mut device, mut culled) = (0.0f64, String::new(), 0usize);
    let mut dust_seconds = 0.0;
    let every = (args.checkpoint_every * args.steps_per_rev as f64)
        .round()
        .max(1.0) as usize;
    for step in first..steps {
        culled += wake.cull(args.cull, args.wake_age * period);
        let took = wake.step_with_dust(dust, dt, solver)?;
        dust_seconds += took.dust_seconds;
        let error = took.estimated_error;
        worst_error = worst_error.max(error);
        device.clone_from(&took.device);
        bar.inc(1);
        if (step + 1) % args.steps_per_rev == 0 || step + 1 == steps {
            let rev = (step + 1) as f64 / args.steps_per_rev as f64;
            let seen = dust.to_host()?;
            let (aloft, top, reach) = cloud(&seen);
            let seconds = rev_start.elapsed().as_secs_f64();
            let per_step = seconds / args.steps_per_rev as f64;
            rev_start = Instant::now();
            csv.push_str(&format!(
                "{rev},{},{aloft},{},{top},{reach},{error},{seconds},{dust_seconds}\n",
                wake.nodes(),
                seen.lifted
            ));
            aloft_line.push((rev, aloft as f64 / args.dust.max(1) as f64));
            top_line.push((rev, top));
            wake_line.push((rev, wake.nodes() as f64));
            bar.suspend(|| {
                println!(
                    "{rev:6.1} {:7} {aloft:9} {:9} {top:8.3} {reach:8.3} {error:8.1e} {seconds:9.2} {per_step:8.3} {dust_seconds:8.2}",
                    wake.nodes(),
                    seen.lifted
                )
            });
            dust_seconds = 0.0;
        }
        if let Some(path) = &args.checkpoint {
            if (step + 1) % every == 0 && step + 1 < steps {
                let c = WakeCheckpoint {
                    step: (step + 1) as u64,
                    wake: wake.clone(),
                    dust: dust.to_host()?,
                };
                c.save(path)?;
            }
        }
    }
    bar.finish_and_clear();
    Ok(Run {
        dust: dust.to_host()?,
        wake,
        csv,
        aloft_line,
        top_line,
        wake_line,
        seconds: start.elapsed().as_secs_f64(),
        worst_error,
        device,
        culled,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let rotor = Rotor::hover(
        args.blades,
        1.0,
        TAU,
        args.ct,
        [0.0, 0.0, args.height],
        args.core,
        args.per_step,
    )?;
    let rotor = if args.uniform {
        rotor
    } else {
        rotor.tapered(args.panels)?
    };
    let solver = Solver {
        backend: args.backend.core(),
        method: if args.direct {
            Method::direct()
        } else {
            Method::tolerance(args.tol)
        },
        precision: if args.f32 {
            Precision::F32
        } else {
            Precision::F64
        },
        domain: ground_plane(0.0),
        stretching: Default::default(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let bed: Vec<[f64; 3]> = (0..args.dust)
        .map(|_| {
            let (r, phi) = (args.bed * rng.gen::<f64>().sqrt(), rng.gen_range(0.0..TAU));
            [r * phi.cos(), r * phi.sin(), 0.0]
        })
        .collect();
    let dust = Passive::inertial(
        bed,
        vec![[0.0; 3]; args.dust],
        args.tau,
        [0.0, 0.0, -args.gravity],
    )?
    .over_ground(0.0)?
    .with_pickup(Pickup {
        reference_height: args.reference,
        roughness: args.roughness,
        threshold: args.threshold,
        launch: args.launch,
    })?;
    let steps = (args.revolutions * args.steps_per_rev as f64).round() as usize;
    println!(
        "Brown-out: {} blades, C_T {}, hub at {} R, {} loading, trailed circulation {} (tip first), v_h {:.3} (Omega R = {:.3}); {} steps a revolution, {} particles a trailer a step, core {}; {} dust particles on a bed of radius {}, tau {}, g {}, u*_t {}; sums {} in {} (the dust's in {})",
        args.blades,
        args.ct,
        args.height,
        if args.uniform { "uniform" } else { "tapered" },
        rotor
            .trailed()
            .iter()
            .map(|(_, g)| format!("{g:.4}"))
            .collect::<Vec<_>>()
            .join(" "),
        rotor.hover_inflow(),
        TAU,
        args.steps_per_rev,
        args.per_step,
        args.core,
        args.dust,
        args.bed,
        args.tau,
        args.gravity,
        args.threshold,
        if args.direct {
            "by the direct sum".to_string()
        } else {
            format!("at {:e}", args.tol)
        },
        if args.f32 { "f32" } else { "f64" },
        if args.dust_f64 { "f64" } else { "f32" }
    );
    println!(
        "{:>6} {:>7} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8}",
        "rev", "nodes", "aloft", "lifts", "top99", "reach", "err est", "s/rev", "s/step", "dust s"
    );
    // A resumed run takes its rotor, wake and dust from the checkpoint.
    let (wake, first, dust) = match &args.resume {
        Some(path) => {
            let c = WakeCheckpoint::load(path)?;
            let at = c.step as f64 * c.wake.rotor.period() / args.steps_per_rev as f64;
            if (at - c.wake.time).abs() > 1e-9 * at.max(1.0) {
                return Err(format!(
                    "{} was made with another number of steps a revolution (its time {} at step {})",
                    path.display(),
                    c.wake.time,
                    c.step
                )
                .into());
            }
            println!(
                "resumed from {} at step {} (revolution {:.2}): its rotor, wake and dust",
                path.display(),
                c.step,
                c.step as f64 / args.steps_per_rev as f64
            );
            (c.wake, c.step as usize, c.dust)
        }
        None => (Wake::new(rotor.clone())?, 0, dust),
    };
    let resident = match args.backend {
        common::Backend::Cpu => false,
        common::Backend::Cuda => true,
        common::Backend::Auto => Gpu::shared().is_ok(),
    } && !args.host_dust;
    let run = if resident {
        let gpu = Gpu::shared()?;
        if args.dust_f64 {
            let mut d = DeviceDust::<f64>::upload(gpu, &dust)?;
            steps_of(&args, &solver, wake, first, &mut d)?
        } else {
            let mut d = DeviceDust::<f32>::upload(gpu, &dust)?;
            steps_of(&args, &solver, wake, first, &mut d)?
        }
    } else {
        let mut dust = dust;
        steps_of(&args, &solver, wake, first, &mut dust)?
    };
    let Run {
        wake,
        dust,
        csv,
        aloft_line,
        top_line,
        wake_line,
        seconds: total,
        worst_error,
        device,
        culled,
    } = run;
    let (aloft, top, reach) = cloud(&dust);
    let ran = steps.saturating_sub(first);
    println!(
        "to revolution {:.1}: {ran} steps in {total:.1} s ({:.3} s a step): {} wake nodes ({culled} culled past r = {} or {} revolutions old), {aloft} of {} dust particles aloft, 99% of them below z = {top:.3}, dust reached r = {reach:.2}, {} lifts; sums' estimated error at most {worst_error:.1e}, on {device}{}",
        args.revolutions,
        total / ran.max(1) as f64,
        wake.nodes(),
        args.cull,
        args.wake_age,
        args.dust,
        dust.lifted,
        if resident { " (dust resident)" } else { "" }
    );
    write_whole(&args.csv, |f| f.write_all(csv.as_bytes()))?;
    println!("time series in {}", args.csv.display());
    if let Some(prefix) = &args.vtp {
        let name = |what: &str| PathBuf::from(format!("{}_{what}.vtp", prefix.display()));
        write_vtp(&name("wake"), &wake.particles(wake.time)?, None)?;
        // The dust as particles without strength: points ParaView shows.
        let n = dust.len();
        let as_points = VortexParticles::new(
            dust.x.clone(),
            vec![[0.0; 3]; n],
            vec![1.0; n],
            vec![1.0; n],
        )?;
        write_vtp(&name("dust"), &as_points, Some(&dust.v))?;
        println!(
            "VTK files {} and {}",
            name("wake").display(),
            name("dust").display()
        );
    }
    if args.plot.as_os_str() != "none" && !aloft_line.is_empty() {
        // At most 10^5 dust particles drawn, evenly picked.
        let every = (dust.len() / 100_000).max(1);
        let side = |x: &[f64; 3]| (x[0].signum() * x[0].hypot(x[1]), x[2]);
        let dust_side: Vec<_> = dust.x.iter().step_by(every).map(side).collect();
        let nodes: Vec<[f64; 3]> = wake
            .trailers
            .iter()
            .flat_map(|t| t.nodes.iter().copied())
            .collect();
        let wake_side: Vec<_> = nodes.iter().map(side).collect();
        let dust_top: Vec<_> = dust.x.iter().step_by(every).map(|x| (x[0], x[1])).collect();
        let wake_top: Vec<_> = nodes.iter().map(|x| (x[0], x[1])).collect();
        let r = args.cull.max(reach).ceil();
        let points = [
            PointPanel {
                caption: format!(
                    "Side view at revolution {:.1} (x, z; y folded)",
                    args.revolutions
                ),
                x: ("x".into(), -r..r),
                y: ("z".into(), 0.0..(2.0 * args.height).max(top * 1.2)),
                sets: vec![("dust".into(), dust_side), ("wake".into(), wake_side)],
            },
            PointPanel {
                caption: "Seen from above (x, y)".into(),
                x: ("x".into(), -r..r),
                y: ("y".into(), -r..r),
                sets: vec![("dust".into(), dust_top), ("wake".into(), wake_top)],
            },
        ];
        let title = format!(
            "Brown-out: {} blades, C_T {}, hub at {} R, {} dust particles",
            args.blades, args.ct, args.height, args.dust
        );
        plot_points(&args.plot, &title, &points)?;
        let series = args.plot.with_extension("series.png");
        let panels = [
            Panel {
                caption: "Dust aloft (fraction of the bed)".into(),
                y: "aloft".into(),
                lines: vec![("aloft".into(), aloft_line)],
            },
            Panel {
                caption: "Height below which 99% of the airborne dust flies".into(),
                y: "z".into(),
                lines: vec![("top".into(), top_line)],
            },
            Panel {
                caption: "Wake nodes".into(),
                y: "n".into(),
                lines: vec![("wake".into(), wake_line)],
            },
        ];
        plot_panels(&series, &format!("{title}, against revolutions"), &panels)?;
        println!("plots in {} and {}", args.plot.display(), series.display());
    }
    Ok(())
}
