//! Treecode benchmark: time per evaluation (tree build included, and
//! separately), interactions counted, and the error against an f64 direct
//! sum on sampled targets; through `fmm_core::evaluate_on`.
//!
//! `cargo run --release --example tree_bench -- --method tree --kernel gravity --n 100000 --dist plummer --theta 0.5`
//! (`--periodic 1`: in the periodic unit box, the strengths made zero-mean)

use std::time::Instant;

use clap::{Parser, ValueEnum};
use fmm_core::{evaluate_on, resolve, Device, Kernel, Method, Real, Stats, TreeOptions};

mod common;
use common::{
    median, print_stats, sampled_error, sampled_percentiles, stats_json, Backend, Dist,
    FarFieldName, KernelName, Periodic, Precision, Problem, Strengths, Switches,
};

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum MethodName {
    Direct,
    Tree,
}

#[derive(Parser, Debug)]
#[command(about = "Treecode benchmark of the built-in kernels")]
struct Args {
    #[arg(long, value_enum, default_value = "tree")]
    method: MethodName,
    #[arg(long, value_enum, default_value = "gravity")]
    kernel: KernelName,
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    #[arg(long, value_enum, default_value = "plummer")]
    dist: Dist,
    /// The source strengths.
    #[arg(long, value_enum, default_value = "coherent")]
    strengths: Strengths,
    /// Opening angle.
    #[arg(long, default_value_t = 0.5)]
    theta: f64,
    /// Most particles per source leaf.
    #[arg(long, default_value_t = 32)]
    ncrit: usize,
    /// Most targets per walking group (0: 128).
    #[arg(long, default_value_t = 0)]
    group: usize,
    /// How an accepted cell's sources are represented (auto: the monopole
    /// for a kernel with a Laplace far field, else ki).
    #[arg(long, value_enum, default_value = "auto")]
    far_field: FarFieldName,
    /// The node far fields' order (ppm: yokota2009 Table 1; ki: Chebyshev
    /// degree, order + 1 nodes a side).
    #[arg(long, default_value_t = 4)]
    order: usize,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    #[command(flatten)]
    switches: Switches,
    #[command(flatten)]
    periodic: Periodic,
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Targets sampled for the error (0: no error).
    #[arg(long, default_value_t = 256)]
    samples: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Read the particles from this file (`.npy` or CSV, columns x, y, z
    /// and the kernel's fields) instead of drawing them; --n and --dist are
    /// then ignored.
    #[arg(long)]
    input: Option<std::path::PathBuf>,
    /// Write the outputs to this file (`.npy` or CSV, one column per slot).
    #[arg(long)]
    output: Option<std::path::PathBuf>,
}

struct Report {
    /// Number of particles (from --n or the input file).
    n: usize,
    seconds: f64,
    stats: Stats,
    error: Option<f64>,
    /// Percentiles 50, 90, 99 of the per-target relative error of the
    /// force (or velocity).
    percentiles: Option<[f64; 3]>,
}

fn run<K: Kernel, R: Real>(
    args: &Args,
    device: Device<'_>,
) -> Result<Report, Box<dyn std::error::Error>> {
    let mut prob = match &args.input {
        Some(path) => Problem::from_file::<K>(path)?,
        None => Problem::new::<K>(args.n, None, args.seed, args.dist, args.strengths),
    };
    prob.in_domain(args.periodic.domain()?);
    let (tgt, src) = prob.particles::<K, R>(None)?;
    let method = match args.method {
        MethodName::Direct => Method::direct(),
        MethodName::Tree => Method::Treecode(TreeOptions {
            theta: args.theta,
            ncrit: args.ncrit,
            group: args.group,
            far_field: args.far_field.far_field(),
            order: args.order,
            ..TreeOptions::default()
        }),
    };
    let eval = || evaluate_on::<K, R>(device, &method, prob.problem(), &tgt, &src);
    let mut ev = eval()?;
    let mut times = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let t0 = Instant::now();
        ev = eval()?;
        times.push(t0.elapsed().as_secs_f64());
    }
    let (out, stats) = (ev.outputs, ev.stats);
    if let Some(path) = &args.output {
        common::write_outputs::<K, R>(path, &out)?;
    }
    let error = (args.samples > 0)
        .then(|| sampled_error::<K, R>(&prob, &out, args.samples, args.seed))
        .transpose()?;
    let percentiles = if args.samples > 0 {
        sampled_percentiles::<K, R>(&prob, &out, args.samples, args.seed)?
    } else {
        None
    };
    Ok(Report {
        percentiles,
        n: tgt.len(),
        seconds: median(times),
        stats,
        error,
    })
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
    let (report, name) = match args.precision {
        Precision::F32 => {
            with_kernel!(args.kernel, |K| (run::<K, f32>(&args, device)?, K::name()))
        }
        Precision::F64 => {
            with_kernel!(args.kernel, |K| (run::<K, f64>(&args, device)?, K::name()))
        }
    };
    let s = &report.stats;
    let precision = format!("{:?}", args.precision).to_lowercase();
    let method = format!("{:?}", args.method).to_lowercase();
    println!(
        "kernel {name}  method {method}  {precision}  N = {}  {}  theta {}  ncrit {}  {device}",
        report.n,
        args.input
            .as_ref()
            .map_or(format!("dist {:?}", args.dist), |p| format!(
                "input {}",
                p.display()
            )),
        args.theta,
        args.ncrit,
    );
    println!(
        "time per evaluation   {:.4} s (median of {}, tree build included)",
        report.seconds,
        args.repeat.max(1)
    );
    print_stats(s);
    if args.method == MethodName::Tree {
        println!(
            "interactions          {:.3e} particle-particle, {:.3e} particle-cell ({:.2}% of N^2)",
            s.p2p as f64,
            s.p2c as f64,
            100.0 * (s.p2p + s.p2c) as f64 / (report.n as f64 * report.n as f64)
        );
    }
    if let Some(e) = report.error {
        println!(
            "relative L2 error     {e:.3e} (against the f64 {} on {} sampled targets)",
            args.periodic.reference_name(),
            args.samples.min(report.n)
        );
    }
    if let Some([p50, p90, p99]) = report.percentiles {
        println!(
            "force error           {p50:.2e} (50%), {p90:.2e} (90%), {p99:.2e} (99%) per target"
        );
    }
    if let Some(path) = &args.json {
        let json = format!(
            "{{\"kernel\": \"{name}\", \"method\": \"{method}\", \"precision\": \"{precision}\", \"n\": {}, \"dist\": \"{:?}\", \
             \"backend\": \"{:?}\", \"theta\": {}, \"ncrit\": {}, \"group\": {}, \"seconds\": {}, {}, \"relative_l2_error\": {}, \"percentiles\": {}}}\n",
            report.n,
            args.dist,
            args.backend,
            args.theta,
            args.ncrit,
            args.group,
            report.seconds,
            stats_json(s),
            report.error.map_or("null".to_string(), |e| e.to_string()),
            report.percentiles.map_or("null".to_string(), |p| format!("[{}, {}, {}]", p[0], p[1], p[2]))
        );
        std::fs::write(path, json)?;
    }
    Ok(())
}
