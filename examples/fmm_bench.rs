//! FMM benchmark: time per evaluation (trees included) and per stage, the
//! work done (M2L translations, P2P interactions), and the error against an
//! f64 direct sum on sampled targets. `--method tree` and `--method direct`
//! run the other methods on the same problem for comparison; every one
//! goes through `fmm_core::evaluate_on`.
//!
//! `cargo run --release --example fmm_bench -- --kernel gravity --n 1000000 --dist uniform --p 6 --theta 0.5 --params 0`
//! (`--backend cuda` for the GPU FMM; `--periodic 1` in the periodic unit
//! box, `--periodic-axes xy` a slab, the strengths made zero-mean).
//!
//! Under MPI (`common::mpi_bench`): `cargo build --release --features mpi
//! -p fmm-examples --example fmm_bench`, then `mpirun -n 4
//! target/release/examples/fmm_bench --distributed --method tolerance
//! --tol 1e-4 --n 1000000` (`--n` a process: weak scaling; `--strong`:
//! in all).

use std::time::Instant;

use clap::{Parser, ValueEnum};
use fmm_core::{
    evaluate_on, evaluate_resident, resolve, Achieved, Device, DeviceParticles, FmmOptions,
    GpuTuning, Kernel, M2lChoice, Method, NodeM2l, Particles, Real, Stats, TreeOptions,
};

mod common;
use common::{
    lean_particles, median, print_stats, sampled_error, stats_json, Backend, Dist, FarFieldName,
    KernelName, Periodic, Precision, Problem, Strengths, Switches,
};

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum MethodName {
    Direct,
    Tree,
    Fmm,
    /// Whichever of the direct sum and the FMM meets `--tol` sooner.
    Tolerance,
}

/// Which M2L the GPU and the CPU run.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum M2l {
    /// The float M2L where it applies (GPU: f32 particles; CPU: f32
    /// particles or an expected error of 1e-6 or more).
    Auto,
    /// Always the double one.
    F64,
}

#[derive(Parser, Debug)]
#[command(about = "FMM benchmark of the built-in kernels (CPU or GPU)")]
struct Args {
    #[arg(long, value_enum, default_value = "fmm")]
    method: MethodName,
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
    /// The far field's order: the expansion order (laplace), the
    /// pseudo-particles' order (ppm, yokota2009 Table 1), the Chebyshev
    /// degree (ki, p + 1 nodes a side).
    #[arg(long, default_value_t = 6)]
    p: usize,
    /// How cells' far fields are represented (auto: from the kernel's
    /// declaration).
    #[arg(long, value_enum, default_value = "auto")]
    far_field: FarFieldName,
    /// Relative L2 error wanted: the order is chosen for it and the error
    /// estimated on sampled targets (overrides --p and --theta, from the
    /// backend's table).
    #[arg(long)]
    tol: Option<f64>,
    /// The compressed M2L (ppm, ki; CPU and GPU): singular values kept down
    /// to this fraction of the largest, 1e-8 to below 1 (default 10^-(p+2),
    /// at least 1e-8).
    #[arg(long)]
    rank_tol: Option<f64>,
    /// Core radii (kernels with a field `sigma`) in mean spacings of the
    /// sources drawn (the overlap; 1 as yokota2009).
    #[arg(long, default_value_t = 1.0)]
    core: f64,
    /// Multipole acceptance criterion (the treecode's opening angle with
    /// --method tree).
    #[arg(long, default_value_t = 0.5)]
    theta: f64,
    /// Most particles per leaf (0: the far field's own: 64 for laplace,
    /// 200 for ki, 128 for ppm; the treecode's 32).
    #[arg(long, default_value_t = 0)]
    ncrit: usize,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    /// The CPU's M2L of the node far fields (ppm, ki): compressed
    /// operators per cell offset where they apply, or the kernel between
    /// node sets for every pair (to compare).
    #[arg(long, value_enum, default_value = "compressed")]
    node_m2l: NodeM2lName,
    /// The M2L of the Laplace expansions, GPU and CPU (to compare the float
    /// one with the double one).
    #[arg(long, value_enum, default_value = "auto")]
    m2l: M2l,
    /// Warps per block of the GPU's float M2L (0: the default).
    #[arg(long, default_value_t = 0)]
    m2l_warps: usize,
    /// Shared memory per block of the GPU's double M2L in bytes (0: the
    /// default).
    #[arg(long, default_value_t = 0)]
    m2l_shared: usize,
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
    /// and the kernel's fields) instead of drawing them.
    #[arg(long)]
    input: Option<std::path::PathBuf>,
    /// With --input: read the targets from this file (columns x, y, z and
    /// the kernel's target fields) instead of evaluating at the sources.
    #[arg(long, requires = "input")]
    targets: Option<std::path::PathBuf>,
    /// Write the outputs of the last evaluation to this file (`.npy` or
    /// CSV; columns named by the kernel's output slots, targets' order).
    #[arg(long)]
    output: Option<std::path::PathBuf>,
    /// Draw the particles straight into the run's precision, uniform in
    /// the unit cube with masses 1 / N, without an f64 copy of the problem
    /// (for 10^8 to 10^9 particles; --dist and --strengths are ignored).
    #[arg(long)]
    lean: bool,
    /// Keep the particles and outputs on the GPU between evaluations
    /// (`evaluate_resident`): the time per evaluation leaves out the copies,
    /// which are timed once apart.
    #[arg(long)]
    resident: bool,
    /// Run under `mpirun` (built with `--features mpi`), a GPU a process:
    /// gravity or velocity-stretching, `--n` a process (weak scaling, a
    /// uniform set in a box grown with the processes), the first
    /// evaluation partitioning, then `--repeat` in the parts.
    #[arg(long)]
    distributed: bool,
    /// With --distributed: `--n` in all (strong scaling).
    #[arg(long, requires = "distributed")]
    strong: bool,
    /// With --distributed, weak scaling: every process's particles in the
    /// unit cube (the density grows with the processes), not in a box
    /// grown with them (x, y, z doubled in turn).
    #[arg(long, requires = "distributed")]
    fixed_box: bool,
    /// With --distributed: where a process evaluates its own sources
    /// during the local essential trees' exchange and the others' after
    /// (`distributed::Overlap`): `gpu` (the default) on a GPU of its own,
    /// `always` on a GPU that processes share and on the CPU too, `never`
    /// (every source joined in one evaluation after the exchange).
    #[arg(long, requires = "distributed")]
    overlap: Option<OverlapName>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OverlapName {
    Gpu,
    Always,
    Never,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum NodeM2lName {
    Compressed,
    Kernel,
}

struct Report {
    n: usize,
    achieved: Option<Achieved>,
    params: Vec<f64>,
    seconds: f64,
    /// The untimed first evaluation.
    first: f64,
    stats: Stats,
    error: Option<f64>,
}

fn run<K: Kernel, R: Real>(
    args: &Args,
    device: Device<'_>,
) -> Result<Report, Box<dyn std::error::Error>> {
    let domain = args.periodic.domain()?;
    if args.lean && domain.periodic().is_some() {
        return Err("--lean draws masses of one sign: a periodic box needs --dist".into());
    }
    let (prob, tgt, src, params): (Option<Problem>, Particles<R>, Particles<R>, Vec<f64>) =
        if args.lean {
            let (t, s) = lean_particles::<K, R>(args.n, args.seed)?;
            let spacing = 1.0 / (args.n.max(1) as f64).cbrt();
            let params = vec![0.5 * spacing; K::def().n_params()];
            (None, t, s, params)
        } else {
            let mut prob = match &args.input {
                Some(path) => Problem::from_files::<K>(path, args.targets.as_deref())?,
                None => {
                    let mut prob =
                        Problem::new::<K>(args.n, None, args.seed, args.dist, args.strengths);
                    prob.scale_cores(args.core);
                    prob
                }
            };
            if let Some(p) = &args.params {
                prob.params = p.clone();
            }
            prob.in_domain(domain);
            let (t, s) = prob.particles::<K, R>(None)?;
            let params = prob.params.clone();
            (Some(prob), t, s, params)
        };
    let params = args.params.clone().unwrap_or(params);
    let method = method_of(args);
    let mut times = Vec::new();
    let first;
    let (outputs, stats, achieved) = if args.resident {
        let Device::Cuda(gpu) = device else {
            return Err(
                "--resident keeps the particles on the GPU: it needs --backend cuda".into(),
            );
        };
        let t0 = Instant::now();
        let d_src = DeviceParticles::upload(gpu, &src)?;
        let d_tgt = DeviceParticles::targets_at_sources(gpu, &tgt)?;
        gpu.stream().synchronize()?;
        println!(
            "upload, once          {:.4} s (resident: the evaluations below copy nothing)",
            t0.elapsed().as_secs_f64()
        );
        let problem = fmm_core::Problem::new(&params).in_domain(domain);
        let eval = || evaluate_resident::<K, R>(gpu, &method, problem, &d_tgt, &d_src);
        let t0 = Instant::now();
        let mut ev = eval()?;
        gpu.stream().synchronize()?;
        first = t0.elapsed().as_secs_f64();
        for _ in 0..args.repeat.max(1) {
            let t0 = Instant::now();
            ev = eval()?;
            gpu.stream().synchronize()?;
            times.push(t0.elapsed().as_secs_f64());
        }
        let t0 = Instant::now();
        let out = ev.outputs.download(gpu)?;
        println!("download, once        {:.4} s", t0.elapsed().as_secs_f64());
        (out, ev.stats, ev.achieved)
    } else {
        let problem = fmm_core::Problem::new(&params).in_domain(domain);
        let eval = || evaluate_on::<K, R>(device, &method, problem, &tgt, &src);
        let t0 = Instant::now();
        let mut ev = eval()?;
        first = t0.elapsed().as_secs_f64();
        for _ in 0..args.repeat.max(1) {
            let t0 = Instant::now();
            ev = eval()?;
            times.push(t0.elapsed().as_secs_f64());
        }
        (ev.outputs, ev.stats, ev.achieved)
    };
    if let Some(path) = &args.output {
        common::write_outputs::<K, R>(path, &outputs)?;
    }
    let error = match (args.samples, &prob) {
        (0, _) => None,
        (k, Some(prob)) => Some(sampled_error::<K, R>(prob, &outputs, k, args.seed)?),
        (k, None) => Some(fmm_core::reference::sampled_error::<K, R>(
            &params, &tgt, &src, &outputs, k,
        )),
    };
    Ok(Report {
        achieved,
        params,
        n: tgt.len(),
        seconds: median(times),
        first,
        stats,
        error,
    })
}

/// `--distributed`: the run over `mpirun`'s processes.
#[cfg(feature = "mpi")]
fn distributed(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    common::mpi_bench::run(&common::mpi_bench::Bench {
        n: args.n,
        strong: args.strong,
        fixed_box: args.fixed_box,
        overlap: args.overlap.map(|o| match o {
            OverlapName::Gpu => fmm_core::distributed::Overlap::Gpu,
            OverlapName::Always => fmm_core::distributed::Overlap::Always,
            OverlapName::Never => fmm_core::distributed::Overlap::Never,
        }),
        kernel: args.kernel,
        dist: args.dist,
        precision: args.precision,
        backend: args.backend.core(),
        method: method_of(args),
        params: args.params.clone(),
        repeat: args.repeat,
        samples: args.samples,
        seed: args.seed,
        switches: args.switches.clone(),
    })
}

#[cfg(not(feature = "mpi"))]
fn distributed(_: &Args) -> Result<(), Box<dyn std::error::Error>> {
    Err("--distributed needs the mpi feature: \
         cargo build --release --features mpi -p fmm-examples --example fmm_bench"
        .into())
}

/// The method the flags ask for.
fn method_of(args: &Args) -> Method {
    match args.method {
        MethodName::Direct => Method::direct(),
        MethodName::Tolerance => Method::tolerance(args.tol.unwrap_or(1e-4)),
        MethodName::Tree => Method::Treecode(TreeOptions {
            theta: args.theta,
            ncrit: if args.ncrit == 0 { 32 } else { args.ncrit },
            far_field: args.far_field.far_field(),
            order: args.p,
            ..TreeOptions::default()
        }),
        MethodName::Fmm => {
            let mut opts = match args.tol {
                Some(tol) => FmmOptions::tolerance(tol),
                None => FmmOptions::fixed(args.p, args.theta),
            };
            opts.ncrit = args.ncrit;
            opts.far_field = args.far_field.far_field();
            opts.rank_tolerance = args.rank_tol;
            opts.node_m2l = match args.node_m2l {
                NodeM2lName::Compressed => NodeM2l::Compressed,
                NodeM2lName::Kernel => NodeM2l::Kernel,
            };
            let m2l = match args.m2l {
                M2l::Auto => M2lChoice::Auto,
                M2l::F64 => M2lChoice::Double,
            };
            opts.cpu_m2l = m2l;
            opts.gpu = GpuTuning {
                m2l,
                m2l_warps: args.m2l_warps,
                m2l_shared_bytes: args.m2l_shared,
                ..GpuTuning::default()
            };
            Method::Fmm(opts)
        }
    }
}

fn main() {
    if let Err(e) = bench(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn bench(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.distributed {
        return distributed(&args);
    }
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
    let (p, theta) = report
        .achieved
        .as_ref()
        .map_or((args.p, args.theta), |a| (a.settings.p, a.settings.theta));
    println!(
        "kernel {name}  method {method}  {precision}  N = {}  dist {:?}  p {p}  theta {theta}  ncrit {}  params {:?}  {}  {device}",
        report.n, args.dist, args.ncrit, report.params, args.periodic.domain()?.name()
    );
    println!(
        "time per evaluation   {:.4} s (median of {}, trees included)",
        report.seconds,
        args.repeat.max(1)
    );
    println!(
        "first evaluation      {:.4} s (untimed; the node far fields' compressed M2L computes \
         its operators there and keeps them for the timed ones)",
        report.first
    );
    if let Some(a) = &report.achieved {
        println!(
            "tolerance             {:e}: chose {} (far field {}, p {}, theta {}), estimated error {:.3e} on {} targets ({} run(s); the time includes the estimate)",
            a.tolerance, a.method, a.far_field.name(), a.settings.p, a.settings.theta, a.estimated_error, a.samples, s.runs
        );
    }
    print_stats(s);
    if let Some(e) = report.error {
        println!(
            "relative L2 error     {e:.3e} (all outputs, against the f64 {} on {} sampled targets)",
            args.periodic.reference_name(),
            args.samples.min(report.n)
        );
    }
    if let Some(path) = &args.json {
        let json = format!(
            "{{\"kernel\": \"{name}\", \"method\": \"{method}\", \"precision\": \"{precision}\", \"n\": {}, \"dist\": \"{:?}\", \
             \"backend\": \"{:?}\", \"p\": {p}, \"theta\": {theta}, \"ncrit\": {}, \"seconds\": {}, {}, \"relative_l2_error\": {}, \"tol\": {}, \"chose\": {}, \"first\": {}}}\n",
            report.n,
            args.dist,
            args.backend,
            args.ncrit,
            report.seconds,
            stats_json(s),
            report.error.map_or("null".to_string(), |e| e.to_string()),
            args.tol.map_or("null".to_string(), |t| t.to_string()),
            report.achieved.as_ref().map_or("null".to_string(), |a| format!(
                "\"{} {} p {} theta {}\"",
                a.method,
                a.far_field.name(),
                a.settings.p,
                a.settings.theta
            )),
            report.first,
        );
        std::fs::write(path, json)?;
    }
    Ok(())
}
