//! The main job, a vortex ring, under MPI: each process steps the
//! particles of its part of space (cut by orthogonal recursive bisection),
//! their velocity and stretching from every process's particles through
//! the local essential trees (`fmm_vortex::distributed`). Rank 0 prints
//! the impulse centre's height and speed against Saffman's. Checkpoints
//! (`--checkpoint DIR`, `--every N`) restart (`--restart DIR`) on any
//! number of processes.
//!
//! `cargo build --release --features mpi --example vortex_ring_mpi`, then
//! `mpirun -n 4 target/release/examples/vortex_ring_mpi --layers 6`.

mod common;

use clap::Parser;
use common::Checkpoints;
use fmm_core::distributed::node_device;
use fmm_core::Backend;
use fmm_vortex::distributed::{
    impulse_centre_partitioned, load_partitioned, rates_partitioned, share_of,
};
use fmm_vortex::{thin_ring_speed, Ring, Scheme, Solver, Stepper};
use mpi::collective::SystemOperation;
use mpi::traits::*;

#[derive(Parser, Debug)]
#[command(about = "A vortex ring (radius 1, circulation 1, core 0.1) under MPI")]
struct Args {
    /// Layers of particles across the core.
    #[arg(long, default_value_t = 4)]
    layers: usize,
    #[arg(long, default_value_t = 10)]
    steps: usize,
    #[arg(long, default_value_t = 0.05)]
    dt: f64,
    /// auto, cpu or cuda.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// Relative L2 error of the rates.
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
    #[command(flatten)]
    checkpoints: Checkpoints,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("vortex_ring_mpi: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let universe = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .map(|(universe, _)| universe)
        .ok_or("MPI initialises once")?;
    let comm = universe.world();
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    node_device(&comm)?;
    let (radius, gamma, core) = (1.0, 1.0, 0.1);
    let (mut p, mut stepper, first) = match &args.checkpoints.restart {
        Some(dir) => {
            let c = load_partitioned(&comm, dir)?;
            (c.particles, c.stepper, c.step as usize)
        }
        None => {
            let all = Ring::resolved(radius, gamma, core, args.layers, 1.0).particles()?;
            // Each process a share, then the parts of space.
            (share_of(&comm, &all)?, Stepper::new(Scheme::Rk2), 0)
        }
    };
    let mut count = 0;
    comm.all_reduce_into(&p.len(), &mut count, SystemOperation::sum());
    let solver = Solver {
        backend: args.backend,
        method: fmm_core::Method::tolerance(args.tol),
        ..Solver::default()
    };
    let saffman = thin_ring_speed(gamma, radius, core);
    if rank == 0 {
        println!(
            "{count} particles over {size} process(es) from step {first}; Saffman's speed {saffman:.5}"
        );
    }
    let mut z = impulse_centre_partitioned(&comm, &p);
    for step in first + 1..=args.steps {
        let r =
            stepper.step_particles(&mut p, args.dt, |s| rates_partitioned(&solver, &comm, s))?;
        let z1 = impulse_centre_partitioned(&comm, &p);
        if rank == 0 {
            let speed = (z1 - z) / args.dt;
            println!(
                "step {step}: impulse centre {z1:.6}, speed {speed:.5} ({:+.2}% from Saffman's), rates {:.3} s",
                100.0 * (speed / saffman - 1.0),
                r.seconds
            );
        }
        z = z1;
        let when = (step, args.steps, step as f64 * args.dt);
        args.checkpoints.save_vortex(&comm, when, &p, &stepper)?;
    }
    Ok(())
}
