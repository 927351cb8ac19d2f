//! Direct all-pairs summation benchmark for the built-in kernels.
//!
//! `cargo run --release --example direct_bench -- --kernel gravity --n 20000 --check`
//! (`--periodic 1`: the Ewald sum in the periodic unit box)
//!
//! Prints interactions per second, GFLOP/s in both flop counts of
//! yokota2009 Table 2 (plain and weighted by clock cycles), and with
//! `--check` the relative L2 error against an f64 CPU sum on sampled
//! targets; `--json FILE` writes the same as a JSON object.

use std::time::Instant;

use clap::Parser;
use fmm_core::{evaluate_on, resolve, Device, DirectOptions, Kernel, Method, Real, Stage};

mod common;
use common::{
    median, sampled_error, Backend, Dist, KernelName, Periodic, Precision, Problem, Strengths,
    Switches,
};

#[derive(Parser, Debug)]
#[command(about = "Direct-summation benchmark of the built-in kernels")]
struct Args {
    #[arg(long, value_enum, default_value = "gravity")]
    kernel: KernelName,
    /// Where the particles are.
    #[arg(long, value_enum, default_value = "uniform")]
    dist: Dist,
    /// Number of sources.
    #[arg(long, default_value_t = 16384)]
    n: usize,
    /// Number of targets (default: the sources themselves).
    #[arg(long)]
    m: Option<usize>,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Compare against an f64 CPU sum on sampled targets.
    #[arg(long)]
    check: bool,
    /// Number of targets sampled by --check.
    #[arg(long, default_value_t = 256)]
    samples: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// GPU launch shape `PxQ` (P targets per block, Q threads per target)
    /// instead of the tuned one.
    #[arg(long)]
    shape: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    #[command(flatten)]
    switches: Switches,
    /// A periodic box: the direct sum is then the f64 Ewald sum, on the CPU.
    #[command(flatten)]
    periodic: Periodic,
}

struct Report {
    /// Median time per evaluation, end to end (transfers included).
    seconds: f64,
    /// Median time in the GPU kernels (device events), when on the GPU.
    kernel_seconds: Option<f64>,
    /// What the GPU run did: launch shape, module origin and compile time.
    gpu_note: Option<String>,
    error: Option<f64>,
}

fn run<K: Kernel, R: Real>(
    args: &Args,
    device: Device<'_>,
) -> Result<Report, Box<dyn std::error::Error>> {
    let mut prob = Problem::new::<K>(args.n, args.m, args.seed, args.dist, Strengths::Random);
    prob.in_domain(args.periodic.domain()?);
    let (tgt, src) = prob.particles::<K, R>(None)?;
    let shape = match &args.shape {
        None => None,
        Some(s) => {
            let (p, q) = s
                .split_once('x')
                .ok_or("--shape takes PxQ, for example 256x1")?;
            Some((p.parse()?, q.parse()?))
        }
    };
    let method = Method::Direct(DirectOptions {
        shape,
        ..DirectOptions::default()
    });
    let eval = || evaluate_on::<K, R>(device, &method, prob.problem(), &tgt, &src);
    // Warm-up (on the GPU: compilation or cache load, and the launch-shape
    // tuning), then the median of the timed runs.
    let t0 = Instant::now();
    let mut ev = eval()?;
    let warmup = t0.elapsed().as_secs_f64();
    let mut times = Vec::new();
    let mut kernel_times = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let t0 = Instant::now();
        ev = eval()?;
        times.push(t0.elapsed().as_secs_f64());
        kernel_times.push(ev.stats.seconds(Stage::P2p));
    }
    let seconds = median(times);
    let on_gpu = matches!(device, Device::Cuda(_));
    let kernel_seconds = on_gpu.then(|| median(kernel_times));
    let gpu_note = ev.stats.launch_shape.filter(|_| on_gpu).map(|(p, q)| {
        format!("first call {warmup:.3} s (compilation or cache load, launch-shape tuning), launch shape {p}x{q}")
    });
    let error = if args.check {
        Some(sampled_error::<K, R>(
            &prob,
            &ev.outputs,
            args.samples,
            args.seed,
        )?)
    } else {
        None
    };
    Ok(Report {
        seconds,
        kernel_seconds,
        gpu_note,
        error,
    })
}

fn dispatch<R: Real>(
    args: &Args,
    device: Device<'_>,
) -> Result<(Report, fmm_core::fmm_codegen::FlopCount, String), Box<dyn std::error::Error>> {
    with_kernel!(args.kernel, |K| Ok((
        run::<K, R>(args, device)?,
        K::flops(),
        K::name().to_string()
    )))
}

fn main() {
    if let Err(e) = bench(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn bench(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let device = resolve(args.backend.core())?;
    args.switches.apply(device);
    let (report, flops, name) = match args.precision {
        Precision::F32 => dispatch::<f32>(&args, device)?,
        Precision::F64 => dispatch::<f64>(&args, device)?,
    };
    let m = args.m.unwrap_or(args.n);
    let interactions = (m as f64) * (args.n as f64);
    // On the GPU the rate is over the kernel time; end to end is printed too.
    let seconds = report.kernel_seconds.unwrap_or(report.seconds);
    let rate = interactions / seconds;
    let gflops = rate * flops.plain as f64 / 1e9;
    let gflops_weighted = rate * flops.weighted as f64 / 1e9;
    let device = match device {
        Device::Cuda(g) => format!("cuda ({})", g.info().name),
        Device::Cpu => format!("cpu ({} threads)", rayon_threads()),
    };
    let precision = format!("{:?}", args.precision).to_lowercase();
    println!(
        "kernel {name}  backend {device}  {precision}  M = {m}  N = {}",
        args.n
    );
    if let Some(k) = report.kernel_seconds {
        println!(
            "kernel time           {k:.6} s (median of {}, device events)",
            args.repeat.max(1)
        );
    }
    println!(
        "time per evaluation   {:.6} s (median of {}, end to end)",
        report.seconds,
        args.repeat.max(1)
    );
    println!("interactions/s        {rate:.3e}");
    println!(
        "GFLOP/s               {gflops:.2} ({} flops/interaction)",
        flops.plain
    );
    println!(
        "GFLOP/s weighted      {gflops_weighted:.2} ({} weighted flops/interaction)",
        flops.weighted
    );
    if let Some(note) = &report.gpu_note {
        println!("gpu                   {note}");
    }
    if let Some(e) = report.error {
        println!(
            "relative L2 error     {e:.3e} (against f64 CPU on {} sampled targets)",
            args.samples.min(m)
        );
    }
    if let Some(path) = &args.json {
        let opt = |v: Option<f64>| v.map_or("null".to_string(), |x| x.to_string());
        let json = format!(
            "{{\"kernel\": \"{name}\", \"backend\": \"{device}\", \"precision\": \"{precision}\", \"m\": {m}, \"n\": {}, \
             \"seconds\": {}, \"kernel_seconds\": {}, \"interactions_per_s\": {rate}, \"flops_per_interaction\": {}, \
             \"weighted_flops_per_interaction\": {}, \"gflops\": {gflops}, \"gflops_weighted\": {gflops_weighted}, \
             \"relative_l2_error\": {}, \"gpu_note\": {}}}\n",
            args.n,
            report.seconds,
            opt(report.kernel_seconds),
            flops.plain,
            flops.weighted,
            opt(report.error),
            report.gpu_note.as_ref().map_or("null".to_string(), |n| format!("\"{n}\"")),
        );
        std::fs::write(path, json)?;
    }
    Ok(())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
