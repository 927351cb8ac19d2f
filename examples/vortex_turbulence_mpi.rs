//! Decaying isotropic turbulence (`vortex_turbulence`'s field: the
//! Passot-Pouquet spectrum with random phases in a periodic box of side
//! 2 pi) under MPI: each process steps the particles of its part of the box
//! (cut by orthogonal recursive bisection), their velocity and stretching
//! from every process's particles and their periodic images through the
//! local essential trees (`fmm_vortex::distributed`), AB2, viscosity by
//! core spreading. Rank 0 prints each step's kinetic energy over every
//! process's particles (`K = <|u|^2> / 2` at the particles) and the
//! slowest process's seconds for the rates: yokota2012's time a step.
//!
//! Checkpoints (`--checkpoint DIR`, `--every N`) restart (`--restart DIR`)
//! on any number of processes, Adams-Bashforth's last rates moving with
//! their particles.
//!
//! By default the particles are not remeshed, `vortex_turbulence
//! --remesh-every 0 --viscous spread`'s method; `--remesh-every N` remeshes
//! them onto the lattice every N steps across the processes
//! (`fmm_vortex::distributed::remesh_partitioned`, M4') and projects the
//! lattice's vorticity onto divergence-free by an FFT of the lattice cut
//! into slabs, one a process (`filter_lattice_partitioned`; `--no-project`
//! leaves it): `vortex_turbulence --remesh-every N --viscous spread`'s
//! method.
//!
//! `cargo build --release --features mpi --example vortex_turbulence_mpi`,
//! then `mpirun -n 4 target/release/examples/vortex_turbulence_mpi --n 64`.

use std::time::Instant;

mod common;

use clap::Parser;
use common::periodic_flow::Isotropic;
use common::Checkpoints;
use fmm_core::distributed::node_device;
use fmm_core::{Backend, Domain, PeriodicBox};
use fmm_vortex::distributed::{
    filter_lattice_partitioned, load_partitioned, rates_partitioned, remesh_partitioned_on,
    share_of,
};
use fmm_vortex::remesh::{interpolate_on_lattice, Lattice, LatticeFilter};
use fmm_vortex::{spread_cores, Scheme, Solver, Stepper};
use mpi::collective::SystemOperation;
use mpi::traits::*;

#[derive(Parser, Debug)]
#[command(about = "Decaying isotropic turbulence by vortex particles under MPI")]
struct Args {
    #[command(flatten)]
    field: Isotropic,
    #[arg(long, default_value_t = 5)]
    steps: usize,
    /// The step; by default a Courant number of 0.8 of the spectral
    /// solver at the start.
    #[arg(long)]
    dt: Option<f64>,
    /// The particles' cores in grid spacings.
    #[arg(long, default_value_t = 1.0)]
    overlap: f64,
    /// Relative L2 error of the rates.
    #[arg(long, default_value_t = 1e-4)]
    tol: f64,
    /// Remesh onto the lattice every this many steps, across the
    /// processes (0: never).
    #[arg(long, default_value_t = 0)]
    remesh_every: usize,
    /// Remesh without projecting the lattice's vorticity onto
    /// divergence-free.
    #[arg(long)]
    no_project: bool,
    /// auto, cpu or cuda.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    #[command(flatten)]
    checkpoints: Checkpoints,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("vortex_turbulence_mpi: {e}");
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
    let setup = Instant::now();
    let (n, nu) = (args.field.n, args.field.nu);
    // The lattice's box (`SpectralNs::lattice_particles`): side 2 pi, a
    // lattice point at each cell's centre.
    let side = std::f64::consts::TAU;
    let pbox = PeriodicBox::cube([-0.5 * side / n as f64; 3], side);
    let (mut p, mut stepper, first, dt) = match &args.checkpoints.restart {
        Some(dir) => {
            let c = load_partitioned(&comm, dir)?;
            let dt = args
                .dt
                .or(c.stepper.last_step())
                .ok_or("--dt: the checkpoint has none")?;
            (c.particles, c.stepper, c.step as usize, dt)
        }
        None => {
            // Every process makes the same field (the same seed), then
            // keeps a share of the lattice's particles.
            let spectral = args.field.field()?;
            let dt = args.dt.unwrap_or_else(|| spectral.stable_dt(0.8));
            let (mut all, _, _) = spectral.lattice_particles(args.overlap)?;
            interpolate_on_lattice(&mut all, &pbox, n)?;
            (share_of(&comm, &all)?, Stepper::new(Scheme::Ab2), 0, dt)
        }
    };
    let counted = |p: &fmm_vortex::VortexParticles| {
        let mut count = 0;
        comm.all_reduce_into(&p.len(), &mut count, SystemOperation::sum());
        count
    };
    let mut count = counted(&p);
    let solver = Solver::f32_at(args.backend, args.tol).in_domain(Domain::Periodic(pbox));
    let sum = |x: f64, op| {
        let mut y = 0.0;
        comm.all_reduce_into(&x, &mut y, op);
        y
    };
    let setup = sum(setup.elapsed().as_secs_f64(), SystemOperation::max());
    if rank == 0 {
        println!(
            "{count} particles over {size} process(es) from step {first}, dt {dt:.5}, nu {nu}, set up in {setup:.1} s"
        );
    }
    let mut seconds = Vec::new();
    for step in first..args.steps {
        let r = stepper.step_particles(&mut p, dt, |s| rates_partitioned(&solver, &comm, s))?;
        spread_cores(&mut p, nu, dt)?;
        // The rates at the step's start: K there, over every particle.
        let k = sum(
            r.u.iter()
                .map(|u| u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
                .sum::<f64>(),
            SystemOperation::sum(),
        ) * 0.5
            / count as f64;
        let slowest = sum(r.seconds, SystemOperation::max());
        seconds.push(slowest);
        if rank == 0 {
            let error = r.achieved.as_ref().map_or(String::new(), |a| {
                format!(", error {:.1e}", a.estimated_error)
            });
            println!(
                "step {step}: t {:.5}, K {k:.10}, rates {slowest:.3} s (slowest process{error})",
                step as f64 * dt
            );
        }
        if args.remesh_every > 0 && (step + 1) % args.remesh_every == 0 {
            let start = Instant::now();
            // The spreading on this process's GPU where it has one.
            let gpu = match fmm_core::resolve(args.backend) {
                Ok(fmm_core::Device::Cuda(g)) => Some(g),
                _ => None,
            };
            let lattice = Lattice::Periodic { pbox, n };
            p = remesh_partitioned_on(&comm, gpu, &p, &lattice, 0.0)?;
            let remeshed = sum(start.elapsed().as_secs_f64(), SystemOperation::max());
            if !args.no_project {
                let start = Instant::now();
                let project = LatticeFilter {
                    project: true,
                    diffuse: 0.0,
                };
                let took = filter_lattice_partitioned(&comm, &mut p, &pbox, n, project)?;
                let projected = sum(start.elapsed().as_secs_f64(), SystemOperation::max());
                if rank == 0 {
                    println!(
                        "remeshed in {remeshed:.3} s, projected in {projected:.3} s (took out \
                         {took:.2e} of the vorticity; slowest process)"
                    );
                }
            } else if rank == 0 {
                println!("remeshed in {remeshed:.3} s (slowest process)");
            }
            count = counted(&p);
            // Adams-Bashforth's last rates belong to the old particles.
            stepper.restart();
        }
        let when = (step + 1, args.steps, (step + 1) as f64 * dt);
        args.checkpoints.save_vortex(&comm, when, &p, &stepper)?;
    }
    if rank == 0 && seconds.len() > 1 {
        // The first step pays the tolerance's search and compiling.
        let later = &seconds[1..];
        println!(
            "{:.3} s a step after the first (mean of {})",
            later.iter().sum::<f64>() / later.len() as f64,
            later.len()
        );
    }
    Ok(())
}
