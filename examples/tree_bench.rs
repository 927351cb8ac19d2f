//! Treecode benchmark: time per evaluation (tree build included, and
//! separately), interactions counted, and the error against an f64 direct
//! sum on sampled targets.
//!
//! `cargo run --release --example tree_bench -- --method tree --kernel gravity --n 100000 --dist plummer --theta 0.5`

use std::time::Instant;

use clap::{Parser, ValueEnum};
use fmm_core::cuda::direct::direct_cuda;
use fmm_core::cuda::Gpu;
use fmm_core::tree::{treecode_cpu, treecode_cuda, TreeOptions, TreeStats};
use fmm_core::{direct_cpu, Kernel, Real};

mod common;
use common::{
    median, sampled_error, sampled_percentiles, Backend, Dist, KernelName, Precision, Problem,
    Strengths,
};

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Method {
    Direct,
    Tree,
}

#[derive(Parser, Debug)]
#[command(about = "Treecode benchmark of the built-in kernels")]
struct Args {
    #[arg(long, value_enum, default_value = "tree")]
    method: Method,
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
    stats: TreeStats,
    error: Option<f64>,
    /// Percentiles 50, 90, 99 of the per-target relative error of the
    /// force (or velocity).
    percentiles: Option<[f64; 3]>,
}

fn run<K: Kernel, R: Real>(
    args: &Args,
    gpu: Option<&Gpu>,
) -> Result<Report, Box<dyn std::error::Error>> {
    let prob = match &args.input {
        Some(path) => Problem::from_file::<K>(path)?,
        None => Problem::new::<K>(args.n, None, args.seed, args.dist, args.strengths),
    };
    let (tgt, src) = prob.particles::<K, R>(None)?;
    let opts = TreeOptions {
        theta: args.theta,
        ncrit: args.ncrit,
        group: args.group,
    };
    let eval = || -> Result<_, fmm_core::Error> {
        match (args.method, gpu) {
            (Method::Direct, None) => Ok((
                direct_cpu::<K, R>(&prob.params, &tgt, &src)?,
                TreeStats::default(),
            )),
            (Method::Direct, Some(g)) => Ok((
                direct_cuda::<K, R>(g, &prob.params, &tgt, &src, &Default::default())?,
                TreeStats::default(),
            )),
            (Method::Tree, None) => treecode_cpu::<K, R>(&prob.params, &tgt, &src, &opts),
            (Method::Tree, Some(g)) => treecode_cuda::<K, R>(g, &prob.params, &tgt, &src, &opts),
        }
    };
    let (mut out, mut stats) = eval()?;
    let mut times = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let t0 = Instant::now();
        (out, stats) = eval()?;
        times.push(t0.elapsed().as_secs_f64());
    }
    if let Some(path) = &args.output {
        let names: Vec<String> = K::def()
            .outputs
            .iter()
            .flat_map(|f| f.slot_names())
            .collect();
        fmm_core::io::write_outputs(path, &out, &names)?;
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
    println!(
        "kernel {name}  method {method}  {precision}  N = {}  {}  theta {}  ncrit {}  {}",
        report.n,
        args.input
            .as_ref()
            .map_or(format!("dist {:?}", args.dist), |p| format!(
                "input {}",
                p.display()
            )),
        args.theta,
        args.ncrit,
        gpu.map_or(
            format!(
                "cpu ({} threads)",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
            |g| format!("cuda ({}), trees built on the GPU", g.info().name)
        )
    );
    println!(
        "time per evaluation   {:.4} s (median of {}, tree build included)",
        report.seconds,
        args.repeat.max(1)
    );
    if args.method == Method::Tree {
        println!(
            "tree build            {:.4} s (both trees and the cells' pseudo-sources{})",
            s.build_seconds,
            if gpu.is_some() {
                ", particles copied to the GPU included"
            } else {
                ""
            }
        );
        println!(
            "walk and evaluation   {:.4} s{}",
            s.eval_seconds,
            if gpu.is_some() {
                " (GPU kernel, device events)"
            } else {
                ""
            }
        );
        if gpu.is_some() {
            println!(
                "the rest              {:.4} s (outputs back to the caller's order and the host)",
                (report.seconds - s.build_seconds - s.eval_seconds).max(0.0)
            );
        }
        println!(
            "source cells          {}  target groups {}",
            s.source_cells, s.target_groups
        );
        println!(
            "interactions          {:.3e} particle-particle, {:.3e} particle-cell ({:.2}% of N^2)",
            s.p2p as f64,
            s.p2c as f64,
            100.0 * (s.p2p + s.p2c) as f64 / (report.n as f64 * report.n as f64)
        );
    }
    if let Some(e) = report.error {
        println!(
            "relative L2 error     {e:.3e} (against f64 direct on {} sampled targets)",
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
             \"backend\": \"{:?}\", \"theta\": {}, \"ncrit\": {}, \"group\": {}, \"seconds\": {}, \"build_seconds\": {}, \"eval_seconds\": {}, \"p2p\": {}, \"p2c\": {}, \"relative_l2_error\": {}, \"percentiles\": {}}}\n",
            report.n,
            args.dist,
            args.backend,
            args.theta,
            args.ncrit,
            args.group,
            report.seconds,
            s.build_seconds,
            s.eval_seconds,
            s.p2p,
            s.p2c,
            report.error.map_or("null".to_string(), |e| e.to_string()),
            report.percentiles.map_or("null".to_string(), |p| format!("[{}, {}, {}]", p[0], p[1], p[2]))
        );
        std::fs::write(path, json)?;
    }
    Ok(())
}
