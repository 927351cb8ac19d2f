//! A Plummer sphere under MPI: leapfrog (kick-drift-kick) steps of
//! softened gravity, each process stepping the particles of its part of
//! space (`evaluate_partitioned`: the local essential trees each step).
//! The particles move between processes as they move in space: when the
//! slowest process's evaluation passes `--threshold` of the mean, they are
//! cut again by orthogonal recursive bisection with each one weighted by
//! its process's measured seconds (`Balance`) and moved (`Migration`).
//! Rank 0 prints the energy and its drift, the seconds a step and the
//! imbalance.
//!
//! Checkpoints (`--checkpoint DIR`, every `--every` steps and at the end;
//! `fmm_core::distributed::checkpoint`): each process writes its
//! particles to `DIR/part-<step>-<rank>` and, once all have, rank 0 writes
//! `DIR/manifest` (the processes, the step); each file is written under a
//! temporary name and renamed, and the older parts go only then, so a write
//! cut short leaves the last checkpoint whole. `--restart DIR` resumes on
//! any number of processes: process `r` reads the parts `q` with
//! `q mod P = r`, and the partition puts them where they belong.
//!
//! `cargo build --release --features mpi --example plummer_mpi`, then
//! `mpirun -n 4 target/release/examples/plummer_mpi --n 100000 --steps 20`.

use std::path::Path;
use std::time::Instant;

mod common;

use clap::Parser;
use common::Checkpoints;
use fmm_core::distributed::checkpoint::{
    arrays_bytes, read_arrays, read_parts, write_parts, write_whole,
};
use fmm_core::distributed::{evaluate_partitioned, node_device, orb_partition, Balance, Migration};
use fmm_core::distributions::plummer;
use fmm_core::kernels::Gravity;
use fmm_core::{Backend, Error, Method, Particles};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

#[derive(Parser, Debug)]
#[command(about = "A Plummer sphere's leapfrog under MPI, with checkpoints")]
struct Args {
    /// Particles in all.
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    /// Steps in all (a restart goes on to this step).
    #[arg(long, default_value_t = 10)]
    steps: usize,
    #[arg(long, default_value_t = 0.01)]
    dt: f64,
    /// Softening.
    #[arg(long, default_value_t = 0.01)]
    eps: f64,
    /// Relative L2 error of the accelerations.
    #[arg(long, default_value_t = 1e-5)]
    tol: f64,
    /// auto, cpu or cuda.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// The slowest process's seconds over the mean past which to cut again.
    #[arg(long, default_value_t = 1.2)]
    threshold: f64,
    #[command(flatten)]
    checkpoints: Checkpoints,
}

/// A process's particles, one array a quantity (ids as f64: exact to
/// 2^53): id, m, x (3), v (3).
const ARRAYS: usize = 8;

/// A process's particles, one array a quantity.
#[derive(Default)]
struct State {
    id: Vec<f64>,
    x: [Vec<f64>; 3],
    v: [Vec<f64>; 3],
    m: Vec<f64>,
}

impl State {
    fn len(&self) -> usize {
        self.id.len()
    }

    fn arrays(&self) -> Vec<&Vec<f64>> {
        let mut a = vec![&self.id, &self.m];
        a.extend(self.x.iter().chain(&self.v));
        a
    }

    fn from_arrays(mut a: Vec<Vec<f64>>) -> State {
        let mut take = || a.remove(0);
        let (id, m) = (take(), take());
        let x = [take(), take(), take()];
        let v = [take(), take(), take()];
        State { id, x, v, m }
    }

    fn points(&self) -> Vec<[f64; 3]> {
        (0..self.len())
            .map(|i| [self.x[0][i], self.x[1][i], self.x[2][i]])
            .collect()
    }

    /// Moved by `mig`.
    fn moved(&self, comm: &SimpleCommunicator, mig: &Migration) -> State {
        State::from_arrays(self.arrays().iter().map(|a| mig.forward(comm, a)).collect())
    }
}

/// This process's share of a Plummer sphere of `n` (the same draw on
/// every process, each keeping its slice).
fn drawn(n: usize, rank: usize, size: usize) -> State {
    let (x, v) = plummer(n, 1);
    let (lo, hi) = (rank * n / size, (rank + 1) * n / size);
    State {
        id: (lo..hi).map(|i| i as f64).collect(),
        x: [0, 1, 2].map(|a| x[lo..hi].iter().map(|p| p[a]).collect()),
        v: [0, 1, 2].map(|a| v[lo..hi].iter().map(|p| p[a]).collect()),
        m: vec![1.0 / n as f64; hi - lo],
    }
}

fn checkpoint(comm: &SimpleCommunicator, dir: &Path, s: &State, step: usize) -> Result<(), Error> {
    let arrays: Vec<&[f64]> = s.arrays().into_iter().map(|a| &a[..]).collect();
    write_parts(comm, dir, step as u64, |path| {
        write_whole(path, &arrays_bytes(&arrays))
    })
}

/// This process's share of the parts, and the step they were written at.
fn restart(comm: &SimpleCommunicator, dir: &Path) -> Result<(State, usize), Error> {
    let back = read_parts(comm, dir, |path| read_arrays(path, ARRAYS))?;
    let mut arrays: Vec<Vec<f64>> = vec![Vec::new(); ARRAYS];
    for part in back.parts {
        for (a, b) in arrays.iter_mut().zip(part) {
            a.extend(b);
        }
    }
    Ok((State::from_arrays(arrays), back.step as usize))
}

/// Accelerations (one array an axis), potentials, and the seconds taken.
struct Forces {
    acc: [Vec<f64>; 3],
    phi: Vec<f64>,
    seconds: f64,
}

/// The forces on the particles `s`.
fn forces(comm: &SimpleCommunicator, args: &Args, s: &State) -> Result<Forces, Error> {
    let pts = s.points();
    let t = Particles::targets::<Gravity>(&pts)?;
    let mut src = Particles::sources::<Gravity>(&pts)?;
    src.set("m", &s.m)?;
    let clock = Instant::now();
    let ev = evaluate_partitioned::<Gravity, f64, _>(
        comm,
        args.backend,
        &Method::tolerance(args.tol),
        &[args.eps],
        &t,
        &src,
    )?;
    let seconds = clock.elapsed().as_secs_f64();
    Ok(Forces {
        acc: ev.outputs.vec3("acc")?.map(<[f64]>::to_vec),
        phi: ev.outputs.scalar("phi")?.to_vec(),
        seconds,
    })
}

/// `y += h x`, axis by axis.
fn kick(y: &mut [Vec<f64>; 3], x: &[Vec<f64>; 3], h: f64) {
    for (ya, xa) in y.iter_mut().zip(x) {
        for (a, b) in ya.iter_mut().zip(xa) {
            *a += h * b;
        }
    }
}

fn sum(comm: &SimpleCommunicator, x: f64) -> f64 {
    let mut y = 0.0;
    comm.all_reduce_into(&x, &mut y, SystemOperation::sum());
    y
}

fn energy(comm: &SimpleCommunicator, s: &State, phi: &[f64]) -> f64 {
    let local: f64 = (0..s.len())
        .map(|i| {
            let v2: f64 = (0..3).map(|a| s.v[a][i] * s.v[a][i]).sum();
            s.m[i] * (0.5 * v2 + 0.5 * phi[i])
        })
        .sum();
    sum(comm, local)
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("plummer_mpi: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let universe = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .map(|(universe, _)| universe)
        .ok_or("MPI initialises once")?;
    let comm = universe.world();
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    let say = |s: String| {
        if rank == 0 {
            println!("{s}");
        }
    };
    node_device(&comm)?;
    let (mut s, first) = match &args.checkpoints.restart {
        Some(dir) => restart(&comm, dir)?,
        None => (drawn(args.n, rank, size), 0),
    };
    say(format!(
        "{} particles on {size} process(es), from step {first}",
        sum(&comm, s.len() as f64)
    ));
    let balance = Balance {
        threshold: args.threshold,
    };
    // Into the parts of equal count.
    let dest = orb_partition(&comm, &s.points(), &vec![1.0; s.len()])?;
    s = s.moved(&comm, &Migration::new(&comm, &dest)?);
    let mut f = forces(&comm, &args, &s)?;
    let e0 = energy(&comm, &s, &f.phi);
    say(format!("step {first}: energy {e0:.10}"));
    for step in first + 1..=args.steps {
        let clock = Instant::now();
        kick(&mut s.v, &f.acc, 0.5 * args.dt);
        kick(&mut s.x, &s.v, args.dt);
        let moved = balance.due(&comm, f.seconds);
        if moved {
            let w = Balance::weights(f.seconds, s.len());
            let dest = orb_partition(&comm, &s.points(), &w)?;
            s = s.moved(&comm, &Migration::new(&comm, &dest)?);
        }
        f = forces(&comm, &args, &s)?;
        kick(&mut s.v, &f.acc, 0.5 * args.dt);
        let e = energy(&comm, &s, &f.phi);
        let imbalance = Balance::imbalance(&comm, f.seconds);
        let wall = clock.elapsed().as_secs_f64();
        say(format!(
            "step {step}: energy {e:.10} (drift {:.2e}), {wall:.3} s, slowest evaluation {imbalance:.2} of the mean{}",
            (e - e0) / e0.abs(),
            if moved { ", cut again before it" } else { "" }
        ));
        if let Some(dir) = args.checkpoints.due(step, args.steps) {
            checkpoint(&comm, dir, &s, step)?;
            say(format!("checkpoint at step {step}: {}", dir.display()));
        }
    }
    // A checksum of the final state, independent of where particles live.
    let check: f64 = (0..s.len())
        .map(|i| (1.0 + s.id[i] % 97.0) * (s.x[0][i] + 2.0 * s.x[1][i] + 3.0 * s.x[2][i]))
        .sum();
    say(format!(
        "final positions' checksum {:.12e}",
        sum(&comm, check)
    ));
    Ok(())
}
