//! FMM benchmark: time per evaluation (trees included) and per stage, the
//! work done (M2L translations, P2P interactions), and the error against an
//! f64 direct sum on sampled targets. `--method tree` and `--method direct`
//! run the other methods on the same problem for comparison.
//!
//! `cargo run --release --example fmm_bench -- --kernel gravity --n 1000000 --dist uniform --p 6 --theta 0.5 --params 0`
//! (`--backend cuda` for the GPU FMM).

use std::time::Instant;

use clap::{Parser, ValueEnum};
use fmm_core::cuda::Gpu;
use fmm_core::tree::{treecode_cpu, treecode_cuda, TreeOptions};
use fmm_core::{
    direct_cpu, fmm_cpu, fmm_cpu_tolerance, fmm_cuda, fmm_cuda_tolerance, Achieved, FmmOptions,
    FmmStats, Kernel, Real,
};

mod common;
use common::{median, sampled_error, Backend, Dist, KernelName, Precision, Problem, Strengths};

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Method {
    Direct,
    Tree,
    Fmm,
}

#[derive(Parser, Debug)]
#[command(about = "FMM benchmark of the built-in kernels (CPU or GPU)")]
struct Args {
    #[arg(long, value_enum, default_value = "fmm")]
    method: Method,
    #[arg(long, value_enum, default_value = "gravity")]
    kernel: KernelName,
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    #[arg(long, value_enum, default_value = "uniform")]
    dist: Dist,
    /// The source strengths.
    #[arg(long, value_enum, default_value = "coherent")]
    strengths: Strengths,
    /// The kernel's parameter values, comma-separated (default: those of
    /// the drawn problem, for gravity a softening of half the mean
    /// spacing). The FMM's far field is the singular Laplace one, so with
    /// softening eps its model error is about 1.5 (eps / d)^2 for cells a
    /// distance d apart; `--params 0` computes what FMM3D does.
    #[arg(long, value_delimiter = ',')]
    params: Option<Vec<f64>>,
    /// Expansion order.
    #[arg(long, default_value_t = 6)]
    p: usize,
    /// Relative L2 error wanted: the order is chosen for it and the error
    /// estimated on sampled targets (overrides --p and --theta: theta 0.6,
    /// ncrit 64).
    #[arg(long)]
    tol: Option<f64>,
    /// Multipole acceptance criterion (the treecode's opening angle with
    /// --method tree).
    #[arg(long, default_value_t = 0.5)]
    theta: f64,
    /// Most particles per leaf.
    #[arg(long, default_value_t = 64)]
    ncrit: usize,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
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
    /// and the kernel's fields) instead of drawing them.
    #[arg(long)]
    input: Option<std::path::PathBuf>,
}

struct Report {
    n: usize,
    achieved: Option<Achieved>,
    params: Vec<f64>,
    seconds: f64,
    stats: FmmStats,
    error: Option<f64>,
}

fn run<K: Kernel, R: Real>(
    args: &Args,
    gpu: Option<&Gpu>,
) -> Result<Report, Box<dyn std::error::Error>> {
    let mut prob = match &args.input {
        Some(path) => Problem::from_file::<K>(path)?,
        None => Problem::new::<K>(args.n, None, args.seed, args.dist, args.strengths),
    };
    if let Some(p) = &args.params {
        prob.params = p.clone();
    }
    let (tgt, src) = prob.particles::<K, R>(None)?;
    let opts = FmmOptions {
        p: args.p,
        theta: args.theta,
        ncrit: args.ncrit,
    };
    let tree_opts = TreeOptions {
        theta: args.theta,
        ncrit: args.ncrit,
        group: 0,
    };
    let eval = || -> Result<_, fmm_core::Error> {
        match args.method {
            Method::Direct => Ok((
                direct_cpu::<K, R>(&prob.params, &tgt, &src)?,
                FmmStats::default(),
                None,
            )),
            Method::Tree => Ok((
                match gpu {
                    Some(g) => treecode_cuda::<K, R>(g, &prob.params, &tgt, &src, &tree_opts)?.0,
                    None => treecode_cpu::<K, R>(&prob.params, &tgt, &src, &tree_opts)?.0,
                },
                FmmStats::default(),
                None,
            )),
            Method::Fmm => match (args.tol, gpu) {
                (Some(tol), Some(g)) => {
                    fmm_cuda_tolerance::<K, R>(g, &prob.params, &tgt, &src, tol)
                        .map(|(o, s, a)| (o, s, Some(a)))
                }
                (Some(tol), None) => fmm_cpu_tolerance::<K, R>(&prob.params, &tgt, &src, tol)
                    .map(|(o, s, a)| (o, s, Some(a))),
                (None, Some(g)) => {
                    fmm_cuda::<K, R>(g, &prob.params, &tgt, &src, &opts).map(|(o, s)| (o, s, None))
                }
                (None, None) => {
                    fmm_cpu::<K, R>(&prob.params, &tgt, &src, &opts).map(|(o, s)| (o, s, None))
                }
            },
        }
    };
    let mut times = Vec::new();
    let (mut out, mut stats, mut achieved) = eval()?;
    for _ in 0..args.repeat.max(1) {
        let t0 = Instant::now();
        (out, stats, achieved) = eval()?;
        times.push(t0.elapsed().as_secs_f64());
    }
    let error = (args.samples > 0)
        .then(|| sampled_error::<K, R>(&prob, &out, args.samples, args.seed))
        .transpose()?;
    Ok(Report {
        achieved,
        params: prob.params.clone(),
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
    let gpu = match args.backend {
        Backend::Cuda => Some(Gpu::shared()?),
        Backend::Cpu => None,
    };
    let (report, name) = match args.precision {
        Precision::F32 => with_kernel!(args.kernel, |K| (run::<K, f32>(&args, gpu)?, K::name())),
        Precision::F64 => with_kernel!(args.kernel, |K| (run::<K, f64>(&args, gpu)?, K::name())),
    };
    let s = &report.stats;
    let precision = format!("{:?}", args.precision).to_lowercase();
    let method = format!("{:?}", args.method).to_lowercase();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let on = match gpu {
        Some(g) => format!("{}", g.info()),
        None => format!("cpu ({threads} threads)"),
    };
    println!(
        "kernel {name}  method {method}  {precision}  N = {}  dist {:?}  p {}  theta {}  ncrit {}  params {:?}  {on}",
        report.n,
        args.dist,
        report.achieved.as_ref().map_or(args.p, |a| a.options.p),
        report.achieved.as_ref().map_or(args.theta, |a| a.options.theta),
        args.ncrit,
        report.params
    );
    println!(
        "time per evaluation   {:.4} s (median of {}, trees included)",
        report.seconds,
        args.repeat.max(1)
    );
    if let Some(a) = &report.achieved {
        println!(
            "tolerance             {:e}: chose p {}, estimated error {:.3e} on {} targets ({}; the time includes the estimate)",
            args.tol.unwrap_or(0.0),
            a.options.p,
            a.estimated_error,
            a.samples,
            if a.met { "met" } else { "NOT met" }
        );
    }
    if args.method == Method::Fmm {
        for (stage, t) in [
            ("setup", s.setup_seconds),
            ("uploads", s.upload_seconds),
            ("trees", s.tree_seconds),
            ("P2M and M2M", s.upward_seconds),
            ("traversal", s.traversal_seconds),
            ("M2L", s.m2l_seconds),
            ("L2L and L2P", s.downward_seconds),
            ("P2P", s.p2p_seconds),
            ("downloads", s.download_seconds),
        ] {
            if (stage.ends_with("loads") || stage == "setup") && args.backend != Backend::Cuda {
                continue;
            }
            if stage == "M2L" && !s.m2l_kind.is_empty() {
                println!("  {stage:<20}{t:.4} s ({})", s.m2l_kind);
            } else {
                println!("  {stage:<20}{t:.4} s");
            }
        }
        println!(
            "cells                 {} source, {} target",
            s.source_cells, s.target_cells
        );
        println!(
            "work                  {:.3e} M2L, {:.3e} P2P interactions",
            s.m2l as f64, s.p2p as f64
        );
    }
    if let Some(e) = report.error {
        println!(
            "relative L2 error     {e:.3e} (all outputs, against f64 direct on {} sampled targets)",
            args.samples.min(report.n)
        );
    }
    if let Some(path) = &args.json {
        let json = format!(
            "{{\"kernel\": \"{name}\", \"method\": \"{method}\", \"precision\": \"{precision}\", \"n\": {}, \"dist\": \"{:?}\", \
             \"backend\": \"{:?}\", \"p\": {}, \"theta\": {}, \"ncrit\": {}, \"seconds\": {}, \"setup_seconds\": {}, \"upload_seconds\": {}, \"tree_seconds\": {}, \"upward_seconds\": {}, \
             \"traversal_seconds\": {}, \"m2l_seconds\": {}, \"downward_seconds\": {}, \"p2p_seconds\": {}, \"download_seconds\": {}, \"m2l\": {}, \"m2l_kind\": \"{}\", \"p2p\": {}, \"relative_l2_error\": {}, \"tol\": {}}}\n",
            report.n,
            args.dist,
            args.backend,
            report.achieved.as_ref().map_or(args.p, |a| a.options.p),
            report.achieved.as_ref().map_or(args.theta, |a| a.options.theta),
            args.ncrit,
            report.seconds,
            s.setup_seconds,
            s.upload_seconds,
            s.tree_seconds,
            s.upward_seconds,
            s.traversal_seconds,
            s.m2l_seconds,
            s.downward_seconds,
            s.p2p_seconds,
            s.download_seconds,
            s.m2l,
            s.m2l_kind,
            s.p2p,
            report.error.map_or("null".to_string(), |e| e.to_string()),
            args.tol.map_or("null".to_string(), |t| t.to_string()),
        );
        std::fs::write(path, json)?;
    }
    Ok(())
}
