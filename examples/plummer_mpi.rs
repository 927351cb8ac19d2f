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
//! Checkpoints (`--checkpoint DIR`, every `--every` steps and at the end):
//! each process writes its particles to `DIR/part-<rank>` and, once all
//! have, rank 0 writes `DIR/manifest` (the processes, the step); each file
//! is written under a temporary name and renamed, so a directory without
//! a manifest, or with an older one, never looks complete. `--restart
//! DIR` resumes on any number of processes: process `r` reads the parts
//! `q` with `q mod P = r`, and the partition puts them where they belong.
//!
//! `cargo build --release --features mpi --example plummer_mpi`, then
//! `mpirun -n 4 target/release/examples/plummer_mpi --n 100000 --steps 20`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use fmm_core::distributed::{
    agreed, evaluate_partitioned, node_device, orb_partition, Balance, Migration,
};
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
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Steps between checkpoints (0: only at the end).
    #[arg(long, default_value_t = 0)]
    every: usize,
    #[arg(long)]
    restart: Option<PathBuf>,
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

/// Writes `bytes` to `path` through a temporary name and a rename.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("partial");
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

fn checkpoint(comm: &SimpleCommunicator, dir: &Path, s: &State, step: usize) -> Result<(), Error> {
    let mine = (|| -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let mut bytes = Vec::with_capacity(8 * ARRAYS * s.len() + 8);
        bytes.extend((s.len() as u64).to_le_bytes());
        for a in s.arrays() {
            bytes.extend(a.iter().flat_map(|v| v.to_le_bytes()));
        }
        write_whole(&dir.join(format!("part-{}", comm.rank())), &bytes)
    })();
    agreed(
        comm,
        mine.map_err(|e| Error::BadOption(format!("checkpoint: {e}"))),
    )?;
    // Every part is written: the manifest makes the directory complete.
    let manifest = if comm.rank() == 0 {
        write_whole(
            &dir.join("manifest"),
            format!("processes {}\nstep {step}\n", comm.size()).as_bytes(),
        )
    } else {
        Ok(())
    };
    agreed(
        comm,
        manifest.map_err(|e| Error::BadOption(format!("checkpoint: {e}"))),
    )
}

/// The manifest's processes and step, and this process's share of the
/// parts.
fn restart(comm: &SimpleCommunicator, dir: &Path) -> Result<(State, usize), Error> {
    let read = || -> Result<(State, usize), String> {
        let text = fs::read_to_string(dir.join("manifest"))
            .map_err(|e| format!("{}: no complete checkpoint ({e})", dir.display()))?;
        let field = |name: &str| -> Result<usize, String> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
                .ok_or(format!("the manifest has no `{name}`"))
        };
        let (parts, step) = (field("processes")?, field("step")?);
        let mut arrays: Vec<Vec<f64>> = vec![Vec::new(); ARRAYS];
        for q in (0..parts).filter(|q| q % comm.size() as usize == comm.rank() as usize) {
            let path = dir.join(format!("part-{q}"));
            let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
            let want = 8 + 8 * ARRAYS * n;
            if bytes.len() != want {
                return Err(format!(
                    "{}: {} bytes, not {want}",
                    path.display(),
                    bytes.len()
                ));
            }
            for (k, a) in arrays.iter_mut().enumerate() {
                let at = 8 + 8 * n * k;
                a.extend(
                    bytes[at..at + 8 * n]
                        .chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().unwrap())),
                );
            }
        }
        Ok((State::from_arrays(arrays), step))
    };
    agreed(comm, read().map_err(Error::BadOption))
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
    let universe = mpi::initialize().ok_or("MPI initialises once")?;
    let comm = universe.world();
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    let say = |s: String| {
        if rank == 0 {
            println!("{s}");
        }
    };
    node_device(&comm)?;
    let (mut s, first) = match &args.restart {
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
        if let Some(dir) = &args.checkpoint {
            if step == args.steps || (args.every > 0 && step % args.every == 0) {
                checkpoint(&comm, dir, &s, step)?;
                say(format!("checkpoint at step {step}: {}", dir.display()));
            }
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
