//! The time of a vortex step with the particles resident on the GPU
//! (`fmm_vortex::DeviceVortex`: the state on the device, the rates by
//! `evaluate_resident`, the scheme's updates by element-wise kernels),
//! against the same steps through the host (`Solver::rates`: the particles
//! converted and copied each evaluation), on a vortex ring whose core is
//! resolved by `--layers` spacings (cores of one spacing by default: the
//! issue's target case). Prints each resident step's time, evaluations and
//! estimated error, then the host's, and how far apart the two states are
//! after the host's steps.
//!
//! `cargo run --release --example vortex_step_bench -- --layers 8 --steps 10 --host-steps 3`
//! (a GPU is needed).

use std::time::Instant;

use clap::Parser;
use fmm_core::cuda::Gpu;
use fmm_core::Method;
use fmm_vortex::{DeviceVortex, Precision, Ring, Scheme, Solver, Stepper, VortexParticles};

#[derive(Parser, Debug)]
#[command(about = "Resident vortex steps on the GPU against steps through the host")]
struct Args {
    /// Lattice spacings across the ring's core (8: 899,867 particles).
    #[arg(long, default_value_t = 8)]
    layers: usize,
    /// The core's width, a fraction of the ring's radius.
    #[arg(long, default_value_t = 0.1)]
    core: f64,
    /// The particles' cores in lattice spacings.
    #[arg(long, default_value_t = 1.0)]
    overlap: f64,
    #[arg(long, default_value_t = 10)]
    steps: usize,
    /// Steps through the host to compare with (0: none).
    #[arg(long, default_value_t = 3)]
    host_steps: usize,
    #[arg(long, default_value_t = 0.005)]
    dt: f64,
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
    #[arg(long, default_value = "ab2")]
    scheme: String,
    /// Sum in f64 rather than f32.
    #[arg(long)]
    f64: bool,
    /// A ground plane this far below the ring's centre (its images double
    /// the sources); none where absent.
    #[arg(long)]
    ground: Option<f64>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let scheme: Scheme = args.scheme.parse()?;
    let gpu = Gpu::shared()?;
    let p = Ring::resolved(1.0, 1.0, args.core, args.layers, args.overlap).particles()?;
    let solver = Solver {
        backend: fmm_core::Backend::Cuda,
        method: Method::tolerance(args.tol),
        precision: if args.f64 {
            Precision::F64
        } else {
            Precision::F32
        },
        domain: match args.ground {
            Some(h) => fmm_vortex::ground_plane(-h),
            None => fmm_core::Domain::FreeSpace,
        },
        stretching: Default::default(),
    };
    println!(
        "ring, core {} by {} spacings: N = {}, {scheme:?}, dt = {}, tolerance {:e}, {} sums, {}, on {}",
        args.core,
        args.layers,
        p.len(),
        args.dt,
        args.tol,
        if args.f64 { "f64" } else { "f32" },
        solver.domain.name(),
        gpu.info()
    );
    let (resident, snapshot) = if args.f64 {
        resident_steps::<f64>(gpu, &p, &solver, scheme, &args)?
    } else {
        resident_steps::<f32>(gpu, &p, &solver, scheme, &args)?
    };
    if args.host_steps > 0 {
        let mut q = p.clone();
        let mut stepper = Stepper::new(scheme);
        let mut times = Vec::new();
        for step in 1..=args.host_steps {
            let t = Instant::now();
            stepper.step_particles(&mut q, args.dt, |s| solver.rates(s))?;
            let secs = t.elapsed().as_secs_f64();
            println!("host step {step:4}: {secs:.4} s");
            times.push(secs);
        }
        let host = later_median(&times);
        println!(
            "through the host: {host:.4} s a step (median of the steps after the first); resident: {resident:.4} s, {:.1}x faster",
            host / resident
        );
        if let Some(d) = snapshot {
            let (dx, da) = apart(&d, &q, &p);
            println!(
                "after {} steps the two states differ by {dx:.2e} in the displacement and {da:.2e} in alpha (relative, l2)",
                args.host_steps
            );
        }
    }
    Ok(())
}

/// The resident steps: their median time (steps after the first, whose
/// kernels compile and whose tolerance searches), and the state after
/// `--host-steps` steps.
fn resident_steps<R: fmm_core::Real>(
    gpu: &Gpu,
    p: &VortexParticles,
    solver: &Solver,
    scheme: Scheme,
    args: &Args,
) -> Result<(f64, Option<VortexParticles>), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let mut d = DeviceVortex::<R>::upload(gpu, p)?;
    println!("upload, once: {:.4} s", t.elapsed().as_secs_f64());
    let mut stepper = d.stepper_from(&Stepper::new(scheme))?;
    let mut times = Vec::new();
    let mut snapshot = None;
    for step in 1..=args.steps.max(args.host_steps) {
        let r = d.step(&mut stepper, solver, args.dt)?;
        let a = r.achieved.as_ref();
        println!(
            "resident step {step:4}: {:.4} s, {} evaluation(s), estimated error {:.1e} ({})",
            r.seconds,
            r.evaluations,
            a.map_or(f64::NAN, |a| a.estimated_error),
            a.map_or(String::new(), |a| format!(
                "{} p {} theta {}",
                a.method, a.settings.p, a.settings.theta
            )),
        );
        times.push(r.seconds);
        if step == args.host_steps {
            snapshot = Some(d.download()?);
        }
    }
    let mean = later_median(&times);
    println!("resident: {mean:.4} s a step (median of the steps after the first)");
    Ok((mean, snapshot))
}

/// The median of `t` past its first entry (the first, if alone): the
/// steady step, past the first's compiles and search and any later
/// re-search's.
fn later_median(t: &[f64]) -> f64 {
    let mut later = if t.len() > 1 {
        t[1..].to_vec()
    } else {
        t.to_vec()
    };
    later.sort_by(f64::total_cmp);
    later[later.len() / 2]
}

/// The relative l2 distance between `a` and `b` in the displacement from
/// `start` and in alpha.
fn apart(a: &VortexParticles, b: &VortexParticles, start: &VortexParticles) -> (f64, f64) {
    let (mut dx, mut sx, mut da, mut sa) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..a.len() {
        for c in 0..3 {
            let (ma, mb) = (a.x[i][c] - start.x[i][c], b.x[i][c] - start.x[i][c]);
            dx += (ma - mb) * (ma - mb);
            sx += mb * mb;
            da += (a.alpha[i][c] - b.alpha[i][c]).powi(2);
            sa += b.alpha[i][c].powi(2);
        }
    }
    ((dx / sx).sqrt(), (da / sa).sqrt())
}
