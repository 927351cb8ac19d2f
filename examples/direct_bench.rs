//! Direct all-pairs summation benchmark for the built-in kernels.
//!
//! `cargo run --release --example direct_bench -- --kernel gravity --n 20000 --check`
//!
//! Prints interactions per second, GFLOP/s in both flop counts of
//! yokota2009 Table 2 (plain and weighted by clock cycles), and with
//! `--check` the relative L2 error against an f64 CPU sum on sampled
//! targets; `--json FILE` writes the same as a JSON object.

use std::time::Instant;

use clap::{Parser, ValueEnum};
use fmm_core::kernels::*;
use fmm_core::{direct_cpu, Kernel, Particles, Real};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum KernelName {
    Gravity,
    Coulomb,
    BiotSavart,
    Stretching,
    VelocityStretching,
    HuBiotSavart,
}

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Backend {
    Cpu,
    Cuda,
}

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Precision {
    F32,
    F64,
}

#[derive(Parser, Debug)]
#[command(about = "Direct-summation benchmark of the built-in kernels")]
struct Args {
    #[arg(long, value_enum, default_value = "gravity")]
    kernel: KernelName,
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
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// Random inputs for kernel `K`: particles in the unit cube, strengths in
/// [-1, 1], core radii (fields named `sigma`) in [0.02, 0.04], and the
/// parameters given.
struct Problem {
    params: Vec<f64>,
    src_pos: Vec<[f64; 3]>,
    src_fields: Vec<(String, Vec<[f64; 3]>, bool)>,
    tgt_pos: Vec<[f64; 3]>,
    tgt_fields: Vec<(String, Vec<[f64; 3]>, bool)>,
}

fn random_fields(
    rng: &mut StdRng,
    fields: &[fmm_core::fmm_codegen::Field],
    n: usize,
) -> Vec<(String, Vec<[f64; 3]>, bool)> {
    use fmm_core::fmm_codegen::ast::Shape;
    fields
        .iter()
        .map(|f| {
            let values = (0..n)
                .map(|_| {
                    if f.name == "sigma" {
                        let s = rng.gen_range(0.02..0.04);
                        [s, s, s]
                    } else {
                        [0, 1, 2].map(|_| rng.gen_range(-1.0..1.0))
                    }
                })
                .collect();
            (f.name.clone(), values, f.shape == Shape::Vec3)
        })
        .collect()
}

impl Problem {
    fn new<K: Kernel>(n: usize, m: Option<usize>, seed: u64) -> Problem {
        let def = K::def();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut cube = |k: usize| -> Vec<[f64; 3]> {
            (0..k)
                .map(|_| [0, 1, 2].map(|_| rng.gen::<f64>()))
                .collect()
        };
        let src_pos = cube(n);
        let tgt_pos = match m {
            Some(m) => cube(m),
            None => src_pos.clone(),
        };
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        let src_fields = random_fields(&mut rng, &def.sources, src_pos.len());
        let tgt_fields = random_fields(&mut rng, &def.targets, tgt_pos.len());
        // Softening (gravity) or smoothing radius (hu2011): about the mean
        // spacing of the particles.
        let params = vec![0.5 / (n.max(1) as f64).cbrt(); def.n_params()];
        Problem {
            params,
            src_pos,
            src_fields,
            tgt_pos,
            tgt_fields,
        }
    }

    fn particles<K: Kernel, R: Real>(
        &self,
        targets_subset: Option<&[usize]>,
    ) -> Result<(Particles<R>, Particles<R>), fmm_core::Error> {
        let conv = |v: &[[f64; 3]]| -> Vec<[R; 3]> { v.iter().map(|p| p.map(R::c)).collect() };
        let mut src = Particles::<R>::sources::<K>(&conv(&self.src_pos))?;
        for (name, values, vec3) in &self.src_fields {
            set_field(&mut src, name, values, *vec3)?;
        }
        let pick = |v: &[[f64; 3]]| -> Vec<[f64; 3]> {
            match targets_subset {
                Some(idx) => idx.iter().map(|&i| v[i]).collect(),
                None => v.to_vec(),
            }
        };
        let mut tgt = Particles::<R>::targets::<K>(&conv(&pick(&self.tgt_pos)))?;
        for (name, values, vec3) in &self.tgt_fields {
            set_field(&mut tgt, name, &pick(values), *vec3)?;
        }
        Ok((tgt, src))
    }
}

fn set_field<R: Real>(
    p: &mut Particles<R>,
    name: &str,
    values: &[[f64; 3]],
    vec3: bool,
) -> Result<(), fmm_core::Error> {
    if vec3 {
        let v: Vec<[R; 3]> = values.iter().map(|x| x.map(R::c)).collect();
        p.set_vec3(name, &v)?;
    } else {
        let v: Vec<R> = values.iter().map(|x| R::c(x[0])).collect();
        p.set(name, &v)?;
    }
    Ok(())
}

struct Report {
    seconds: f64,
    error: Option<f64>,
}

fn run<K: Kernel, R: Real>(args: &Args) -> Result<Report, Box<dyn std::error::Error>> {
    let prob = Problem::new::<K>(args.n, args.m, args.seed);
    let (tgt, src) = prob.particles::<K, R>(None)?;
    // Warm-up, then the median of the timed runs.
    let mut out = direct_cpu::<K, R>(&prob.params, &tgt, &src)?;
    let mut times = Vec::new();
    for _ in 0..args.repeat.max(1) {
        let t0 = Instant::now();
        out = direct_cpu::<K, R>(&prob.params, &tgt, &src)?;
        times.push(t0.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let seconds = times[times.len() / 2];
    let error = if args.check {
        let m = tgt.len();
        let mut rng = StdRng::seed_from_u64(args.seed ^ 0xc0ffee);
        let idx: Vec<usize> = (0..args.samples.min(m))
            .map(|_| rng.gen_range(0..m))
            .collect();
        let (tgt64, src64) = prob.particles::<K, f64>(Some(&idx))?;
        let reference = direct_cpu::<K, f64>(&prob.params, &tgt64, &src64)?;
        let (mut num, mut den) = (0.0, 0.0);
        for (k, want) in reference.slots().iter().enumerate() {
            for (s, &i) in idx.iter().enumerate() {
                let got = out.slots()[k][i].to_f64();
                num += (got - want[s]) * (got - want[s]);
                den += want[s] * want[s];
            }
        }
        Some((num / den).sqrt())
    } else {
        None
    };
    Ok(Report { seconds, error })
}

fn dispatch<R: Real>(
    args: &Args,
) -> Result<(Report, fmm_core::fmm_codegen::FlopCount, String), Box<dyn std::error::Error>> {
    macro_rules! go {
        ($k:ty) => {
            (run::<$k, R>(args)?, <$k>::flops(), <$k>::name().to_string())
        };
    }
    Ok(match args.kernel {
        KernelName::Gravity => go!(Gravity),
        KernelName::Coulomb => go!(Coulomb),
        KernelName::BiotSavart => go!(BiotSavart),
        KernelName::Stretching => go!(Stretching),
        KernelName::VelocityStretching => go!(VelocityStretching),
        KernelName::HuBiotSavart => go!(HuBiotSavart),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if args.backend == Backend::Cuda {
        return Err("the CUDA backend is not built yet (issue 3: NVRTC and direct summation on the GPU); use --backend cpu".into());
    }
    let (report, flops, name) = match args.precision {
        Precision::F32 => dispatch::<f32>(&args)?,
        Precision::F64 => dispatch::<f64>(&args)?,
    };
    let m = args.m.unwrap_or(args.n);
    let interactions = (m as f64) * (args.n as f64);
    let rate = interactions / report.seconds;
    let gflops = rate * flops.plain as f64 / 1e9;
    let gflops_weighted = rate * flops.weighted as f64 / 1e9;
    let threads = rayon_threads();
    println!(
        "kernel {name}  backend cpu ({threads} threads)  {}  M = {m}  N = {}",
        format!("{:?}", args.precision).to_lowercase(),
        args.n
    );
    println!(
        "time per evaluation   {:.4} s (median of {})",
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
    if let Some(e) = report.error {
        println!(
            "relative L2 error     {e:.3e} (against f64 on {} sampled targets)",
            args.samples.min(m)
        );
    }
    if let Some(path) = &args.json {
        let json = format!(
            "{{\"kernel\": \"{name}\", \"backend\": \"cpu\", \"threads\": {threads}, \"precision\": \"{:?}\", \"m\": {m}, \"n\": {}, \
             \"seconds\": {}, \"interactions_per_s\": {rate}, \"flops_per_interaction\": {}, \"weighted_flops_per_interaction\": {}, \
             \"gflops\": {gflops}, \"gflops_weighted\": {gflops_weighted}, \"relative_l2_error\": {}}}\n",
            args.precision,
            args.n,
            report.seconds,
            flops.plain,
            flops.weighted,
            report.error.map_or("null".to_string(), |e| e.to_string())
        )
        .replace("\"F32\"", "\"f32\"")
        .replace("\"F64\"", "\"f64\"");
        std::fs::write(path, json)?;
    }
    Ok(())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
