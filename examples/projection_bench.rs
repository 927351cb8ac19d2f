//! The lattice filter across MPI processes timed alone
//! (`fmm_vortex::distributed::filter_lattice_partitioned`: the remeshed
//! lattice's vorticity projected onto divergence-free by an FFT of the
//! lattice cut into slabs, what `vortex_turbulence_mpi --remesh-every N`
//! does at each remeshing): `mpirun -n P projection_bench [n]` (default
//! 256, an `n^3` lattice). Each process holds the lattice points of a run
//! of x (as the first cut of orthogonal recursive bisection gives them,
//! so that nearly every point moves to the slab of its z plane), their
//! strengths of no particular kind. Prints the slowest process's seconds,
//! the median of three filters, and what the projection took out;
//! `FMM_TRACE=1` prints each stage's seconds on every process.
//!
//! `cargo build --release --features mpi --example projection_bench`.

use std::time::Instant;

use fmm_core::PeriodicBox;
use fmm_vortex::distributed::filter_lattice_partitioned;
use fmm_vortex::remesh::LatticeFilter;
use fmm_vortex::VortexParticles;
use mpi::collective::SystemOperation;
use mpi::traits::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let universe = mpi::initialize().ok_or("MPI did not start")?;
    let comm = universe.world();
    let (me, size) = (comm.rank() as usize, comm.size() as usize);
    let n: usize = match std::env::args().nth(1) {
        Some(v) => v.parse().map_err(|_| format!("n: not {v:?}"))?,
        None => 256,
    };
    let pbox = PeriodicBox::cube([0.0; 3], std::f64::consts::TAU);
    let h = pbox.side / n as f64;
    // The points of x run `me`, z slowest.
    let (x0, x1) = (me * n / size, (me + 1) * n / size);
    let cells: Vec<[usize; 3]> = (0..n)
        .flat_map(|z| (0..n).flat_map(move |y| (x0..x1).map(move |x| [x, y, z])))
        .collect();
    let value = |c: [usize; 3], d: usize| {
        let i = ((c[2] * n + c[1]) * n + c[0]) * 3 + d;
        ((i as f64 * 0.618_033_988_75).fract() - 0.5) * h.powi(3)
    };
    let x = cells
        .iter()
        .map(|c| c.map(|j| (j as f64 + 0.5) * h))
        .collect();
    let alpha: Vec<[f64; 3]> = cells
        .iter()
        .map(|&c| [0, 1, 2].map(|d| value(c, d)))
        .collect();
    let m = alpha.len();
    let fresh = VortexParticles::new(x, alpha, vec![h; m], vec![h.powi(3); m])?;
    let filter = LatticeFilter {
        project: true,
        diffuse: 0.0,
    };
    let mut times = Vec::new();
    let mut took = 0.0;
    for _ in 0..3 {
        let mut p = fresh.clone();
        comm.barrier();
        let clock = Instant::now();
        took = filter_lattice_partitioned(&comm, &mut p, &pbox, n, filter)?;
        let mut slowest = 0.0f64;
        comm.all_reduce_into(
            &clock.elapsed().as_secs_f64(),
            &mut slowest,
            SystemOperation::max(),
        );
        times.push(slowest);
    }
    times.sort_by(f64::total_cmp);
    if me == 0 {
        println!(
            "{n}^3 lattice on {size} processes: filtered in {:.3} s (median of three: {:.3}, {:.3}, {:.3}); the projection took out {took:.4} of it",
            times[1], times[0], times[1], times[2]
        );
    }
    Ok(())
}
