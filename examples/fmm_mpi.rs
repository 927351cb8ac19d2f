//! Distributed evaluation under MPI (the `mpi` feature): every process
//! draws its share of one problem (gravity or the vortex kernel's velocity
//! and stretching, a uniform cube or a Plummer sphere), takes its GPU from
//! its rank on the node (`node_device`; several processes may share one),
//! and evaluates through `evaluate_distributed` (partition, moves, local
//! essential trees, outputs back), then `--repeat` times through
//! `evaluate_partitioned` on the particles in their parts (a time step's
//! cost). Rank 0 prints the slowest process's seconds per stage, the bytes
//! exchanged and the error over every process's samples against an f64
//! direct sum that every process adds its sources to.
//!
//! `cargo build --release --features mpi --example fmm_mpi`, then
//! `mpirun -n 4 target/release/examples/fmm_mpi --n 1000000 --tol 1e-4`
//! (`--n` per process: weak scaling; `--strong`: `--n` in all).

use std::time::Instant;

use clap::{Parser, ValueEnum};
use fmm_core::distributed::{
    evaluate_distributed, evaluate_partitioned, node_device, orb_partition, sampled_error,
    Migration,
};
use fmm_core::distributions::{plummer, uniform_cube};
use fmm_core::kernels::{Gravity, VelocityStretching};
use fmm_core::{Backend, Evaluation, Kernel, Method, Particles, Real, Stage};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum KernelName {
    Gravity,
    /// Velocity and stretching of vortex particles (cores of one mean
    /// spacing).
    Vortex,
}

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Dist {
    Uniform,
    Plummer,
}

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Precision {
    F32,
    F64,
}

#[derive(Parser, Debug)]
#[command(about = "Distributed evaluation under MPI: seconds per stage, bytes, error")]
struct Args {
    /// Particles a process (weak scaling); with --strong, in all.
    #[arg(long, default_value_t = 1_000_000)]
    n: usize,
    #[arg(long)]
    strong: bool,
    #[arg(long, value_enum, default_value = "gravity")]
    kernel: KernelName,
    #[arg(long, value_enum, default_value = "uniform")]
    dist: Dist,
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// auto, cpu or cuda.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// Relative L2 error wanted (the tolerance-driven FMM); ignored with
    /// --p.
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
    /// A fixed FMM order (with --theta) instead of a tolerance.
    #[arg(long)]
    p: Option<usize>,
    #[arg(long, default_value_t = 0.5)]
    theta: f64,
    /// Evaluations on the particles in their parts, after the first.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Targets a process checked against the f64 direct sum (0: none).
    #[arg(long, default_value_t = 100)]
    samples: usize,
}

/// A process's particles: positions and the kernel's fields, in f64.
struct Drawn {
    x: Vec<[f64; 3]>,
    /// Gravity: the mass; the vortex kernel: alpha (three a particle).
    strength: Vec<[f64; 3]>,
    sigma: f64,
}

fn draw(args: &Args, total: usize, mine: usize, rank: usize) -> Drawn {
    let seed = 1000 + rank as u64;
    let x = match args.dist {
        Dist::Uniform => uniform_cube(mine, seed),
        Dist::Plummer => plummer(mine, seed).0,
    };
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let q = 1.0 / total as f64;
    let strength = (0..mine)
        .map(|_| [q * next(), q * next(), q * next()])
        .collect();
    Drawn {
        x,
        strength,
        sigma: (total as f64).cbrt().recip(),
    }
}

/// Targets and sources of kernel `K` in precision `R`.
fn sets<K: Kernel, R: Real>(kernel: KernelName, d: &Drawn) -> (Particles<R>, Particles<R>) {
    let c = |v: f64| R::c(v);
    let x: Vec<[R; 3]> = d.x.iter().map(|p| p.map(c)).collect();
    let mut t = Particles::targets::<K>(&x).unwrap();
    let mut s = Particles::sources::<K>(&x).unwrap();
    match kernel {
        KernelName::Gravity => {
            let m: Vec<R> = d.strength.iter().map(|a| c(a[0].abs())).collect();
            s.set("m", &m).unwrap();
        }
        KernelName::Vortex => {
            let a: Vec<[R; 3]> = d.strength.iter().map(|a| a.map(c)).collect();
            s.set_vec3("alpha", &a).unwrap();
            s.set("sigma", &vec![c(d.sigma); a.len()]).unwrap();
            t.set_vec3("alpha_i", &a).unwrap();
        }
    }
    (t, s)
}

/// The largest of `x` over the processes (`max`) or their sum.
fn reduce(comm: &SimpleCommunicator, x: f64, max: bool) -> f64 {
    let mut y = 0.0;
    let op = if max {
        SystemOperation::max()
    } else {
        SystemOperation::sum()
    };
    comm.all_reduce_into(&x, &mut y, op);
    y
}

/// One line: the slowest process's seconds per stage (the rest of an
/// evaluation counted as local work), the wall time, the bytes.
fn line<R>(comm: &SimpleCommunicator, what: &str, ev: &Evaluation<R>, wall: f64) -> String {
    let apart = [Stage::Partition, Stage::Essential, Stage::Exchange];
    let local = ev.stats.total_seconds() - apart.iter().map(|&s| ev.stats.seconds(s)).sum::<f64>();
    let [p, e, x] = apart.map(|s| reduce(comm, ev.stats.seconds(s), true));
    let local = reduce(comm, local, true);
    let sent = reduce(comm, ev.stats.sent_bytes as f64, false);
    let wall = reduce(comm, wall, true);
    let runs = reduce(comm, ev.stats.runs as f64, true);
    format!(
        "{what:<22} wall {wall:8.4} s | partition {p:7.4}  essential {e:7.4}  exchange {x:7.4}  \
         local {local:7.4} (slowest process; {runs} runs) | sent {:.1} MB in all",
        sent / 1e6
    )
}

fn run<K: Kernel, R: Real + Equivalence + Default>(
    comm: &SimpleCommunicator,
    args: &Args,
    drawn: &Drawn,
) {
    let (rank, size) = (comm.rank(), comm.size());
    let say = |s: &str| {
        if rank == 0 {
            println!("{s}");
        }
    };
    let method = match args.p {
        Some(p) => Method::fmm(p, args.theta),
        None => Method::tolerance(args.tol),
    };
    let params: Vec<f64> = if args.kernel == KernelName::Gravity {
        vec![0.0]
    } else {
        vec![]
    };
    let (t, s) = sets::<K, R>(args.kernel, drawn);
    // The first evaluation: particles anywhere, partitioned and moved.
    comm.barrier();
    let clock = Instant::now();
    let first =
        evaluate_distributed::<K, R, _>(comm, args.backend, &method, &params[..], &t, &s).unwrap();
    say(&line(
        comm,
        "first (partition)",
        &first,
        clock.elapsed().as_secs_f64(),
    ));
    // In their parts, as a simulation keeps them.
    let points = drawn.x.clone();
    let dest = orb_partition(comm, &points, &vec![1.0; points.len()]).unwrap();
    let moved = Migration::new(comm, &dest).unwrap();
    let (t, s) = (moved.particles(comm, &t), moved.particles(comm, &s));
    let mut walls = Vec::new();
    let mut last = None;
    for k in 0..args.repeat {
        comm.barrier();
        let clock = Instant::now();
        let ev = evaluate_partitioned::<K, R, _>(comm, args.backend, &method, &params[..], &t, &s)
            .unwrap();
        let wall = clock.elapsed().as_secs_f64();
        walls.push(reduce(comm, wall, true));
        say(&line(comm, &format!("in parts, run {}", k + 1), &ev, wall));
        last = Some(ev);
    }
    let Some(ev) = last else { return };
    let n_here = reduce(comm, t.len() as f64, true);
    walls.sort_by(f64::total_cmp);
    let median = walls[walls.len() / 2];
    let error = if args.samples > 0 {
        sampled_error::<K, R, _>(
            comm,
            args.backend,
            &params[..],
            &t,
            &s,
            &ev.outputs,
            args.samples,
        )
        .unwrap()
    } else {
        f64::NAN
    };
    let sent = reduce(comm, ev.stats.sent_bytes as f64, false);
    say(&format!(
        "{size} process(es): median {median:.4} s a step; the largest part {n_here:.0}; \
         error {error:.2e} on {} samples a process; {:.1} MB exchanged a step",
        args.samples,
        sent / 1e6
    ));
    say(&format!(
        "{{\"processes\": {size}, \"kernel\": \"{:?}\", \"dist\": \"{:?}\", \"n_total\": {}, \
         \"step_seconds\": {median}, \"error\": {error}, \"sent_bytes\": {sent}, \
         \"essential_seconds\": {}, \"exchange_seconds\": {}}}",
        args.kernel,
        args.dist,
        reduce(comm, t.len() as f64, false),
        reduce(comm, ev.stats.seconds(Stage::Essential), true),
        reduce(comm, ev.stats.seconds(Stage::Exchange), true),
    ));
}

fn main() {
    let args = Args::parse();
    let universe = mpi::initialize().expect("MPI initialises");
    let comm = universe.world();
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    let device = node_device(&comm).unwrap();
    let total = if args.strong { args.n } else { args.n * size };
    let mine = total / size + usize::from(rank < total % size);
    println!(
        "process {rank} of {size}: {mine} particles, {}",
        match device {
            Some(d) => format!("GPU {d} of the node (by its rank there)"),
            None => "no GPU: the CPU".into(),
        }
    );
    let drawn = draw(&args, total, mine, rank);
    if rank == 0 {
        println!(
            "{:?} {:?} {:?}, {total} particles over {size} process(es), {}",
            args.kernel,
            args.dist,
            args.precision,
            match args.p {
                Some(p) => format!("FMM p {p} theta {}", args.theta),
                None => format!("tolerance {:e}", args.tol),
            }
        );
    }
    match (args.kernel, args.precision) {
        (KernelName::Gravity, Precision::F32) => run::<Gravity, f32>(&comm, &args, &drawn),
        (KernelName::Gravity, Precision::F64) => run::<Gravity, f64>(&comm, &args, &drawn),
        (KernelName::Vortex, Precision::F32) => {
            run::<VelocityStretching, f32>(&comm, &args, &drawn)
        }
        (KernelName::Vortex, Precision::F64) => {
            run::<VelocityStretching, f64>(&comm, &args, &drawn)
        }
    }
}
