//! The cut of particles into one part a process, timed alone
//! (`fmm_core::distributed::orb_partition`: orthogonal recursive
//! bisection, what a distributed evaluation's first call and a
//! simulation's rebalancing run): `mpirun -n P partition_bench [n]
//! [uniform|plummer]` (default 10^7 points in all, uniform in the unit
//! cube), each process drawing its share of them anywhere in space, as a
//! strong-scaling job starts. Prints the slowest process's seconds to
//! cut (the median of three) and to move the points to their parts
//! (`Migration`), and the largest part over the mean.
//!
//! `cargo build --release --features mpi --example partition_bench`.

use std::time::Instant;

use fmm_core::distributed::{orb_partition, Migration};
use fmm_core::distributions::{plummer, uniform_cube};
use mpi::collective::SystemOperation;
use mpi::traits::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let universe = mpi::initialize().ok_or("MPI did not start")?;
    let comm = universe.world();
    let (me, size) = (comm.rank() as usize, comm.size() as usize);
    let n: usize = match std::env::args().nth(1) {
        Some(v) => v.parse().map_err(|_| format!("n: not {v:?}"))?,
        None => 10_000_000,
    };
    let mine = n / size + usize::from(me < n % size);
    let seed = 17 + me as u64;
    let x = match std::env::args().nth(2).as_deref() {
        None | Some("uniform") => uniform_cube(mine, seed),
        Some("plummer") => plummer(mine, seed).0,
        Some(d) => return Err(format!("distribution: uniform or plummer, not {d:?}").into()),
    };
    let w = vec![1.0; x.len()];
    let slowest = |t: f64| {
        let mut s = 0.0f64;
        comm.all_reduce_into(&t, &mut s, SystemOperation::max());
        s
    };
    let (mut cut, mut moved) = (Vec::new(), Vec::new());
    let mut largest = 0.0;
    for _ in 0..3 {
        comm.barrier();
        let clock = Instant::now();
        let dest = orb_partition(&comm, &x, &w)?;
        cut.push(slowest(clock.elapsed().as_secs_f64()));
        let clock = Instant::now();
        let to = Migration::new(&comm, &dest)?;
        let flat = x.as_flattened();
        let here = to.forward_rows(&comm, flat, 3).len() / 3;
        moved.push(slowest(clock.elapsed().as_secs_f64()));
        let mut most = 0usize;
        comm.all_reduce_into(&here, &mut most, SystemOperation::max());
        largest = most as f64 / (n as f64 / size as f64);
    }
    cut.sort_by(f64::total_cmp);
    moved.sort_by(f64::total_cmp);
    if me == 0 {
        println!(
            "{n} points on {size} processes: cut in {:.3} s (median of three: {:.3}, {:.3}, {:.3}), \
             moved in {:.3} s; the largest part {largest:.4} of the mean",
            cut[1], cut[0], cut[1], cut[2], moved[1]
        );
    }
    Ok(())
}
