//! The vortex method's lattice work over MPI processes (the `mpi`
//! feature): the periodic lattice's filter by slabs
//! ([`filter_lattice_partitioned`]) against the serial filter of every
//! particle, which each process makes itself; the lattice's particles
//! dealt out unevenly and out of order (process 1 none where there are
//! three or more). Bad input is said on every process.
//!
//! `cargo test -p fmm-vortex --features mpi --test vortex_mpi` runs it as
//! one process; CI runs the binary under `mpirun -n 1, 2, 3, 4
//! --oversubscribe`. A failed check panics, and the process's non-zero
//! exit fails the run.

use fmm_core::PeriodicBox;
use std::collections::HashMap;

use fmm_vortex::distributed::{
    filter_lattice_partitioned, remesh_partitioned, share_of, REMESH_BALANCE,
};
use fmm_vortex::particles::VortexParticles;
use fmm_vortex::remesh::{filter_lattice, remesh, Lattice, LatticeFilter};
use mpi::traits::*;

/// A lattice of `n^3` particles at the cell centres of `pbox`, strengths
/// from a hash of the index (not divergence-free, of non-zero mean).
fn lattice(n: usize, pbox: &PeriodicBox) -> VortexParticles {
    let h = pbox.side / n as f64;
    let x: Vec<[f64; 3]> = (0..n * n * n)
        .map(|c| [c % n, (c / n) % n, c / (n * n)].map(|j| (j as f64 + 0.5) * h))
        .map(|g| [0, 1, 2].map(|a| pbox.origin[a] + g[a]))
        .collect();
    let hash = |i: usize| {
        let z = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((z ^ (z >> 29)) % 2001) as f64 / 1000.0 - 1.0
    };
    let alpha = (0..x.len())
        .map(|i| [hash(3 * i), hash(3 * i + 1), hash(3 * i + 2) + 0.1])
        .collect();
    let len = x.len();
    VortexParticles::new(x, alpha, vec![1.5 * h; len], vec![h * h * h; len]).unwrap()
}

/// The particles `keep` of `p`, in that order.
fn some(p: &VortexParticles, keep: &[usize]) -> VortexParticles {
    VortexParticles {
        x: keep.iter().map(|&i| p.x[i]).collect(),
        alpha: keep.iter().map(|&i| p.alpha[i]).collect(),
        sigma: keep.iter().map(|&i| p.sigma[i]).collect(),
        volume: keep.iter().map(|&i| p.volume[i]).collect(),
    }
}

fn main() {
    let universe = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .map(|(universe, _)| universe)
        .expect("MPI initialises");
    let comm = universe.world();
    let (me, size) = (comm.rank() as usize, comm.size() as usize);
    let say = |s: &str| {
        if me == 0 {
            println!("{s}");
        }
    };
    // 10 a side: the slabs of 3 and 4 processes are uneven (3, 3, 4 and
    // 2, 3, 2, 3 planes).
    let n = 10;
    let pbox = PeriodicBox::cube([-0.3, 0.2, 0.1], 2.0);
    let all = lattice(n, &pbox);
    let filter = LatticeFilter {
        project: true,
        diffuse: 0.004,
    };
    let mut whole = all.clone();
    let took = filter_lattice(&mut whole, &pbox, n, filter).unwrap();

    // Process r takes the particles whose hash falls to it (none for
    // process 1 of three or more), last first.
    let owner = |i: usize| {
        let r = (i * 7 + i / 13) % size;
        if size >= 3 && r == 1 {
            0
        } else {
            r
        }
    };
    let mine: Vec<usize> = (0..all.len()).rev().filter(|&i| owner(i) == me).collect();
    let mut part = some(&all, &mine);
    let took_here = filter_lattice_partitioned(&comm, &mut part, &pbox, n, filter).unwrap();
    let scale = whole
        .alpha
        .iter()
        .flatten()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let want = &whole.alpha;
    let worst = mine
        .iter()
        .zip(&part.alpha)
        .flat_map(|(&i, a)| (0..3).map(move |d| (a[d] - want[i][d]).abs()))
        .fold(0.0f64, f64::max);
    let mut e = 0.0f64;
    comm.all_reduce_into(
        &(worst / scale),
        &mut e,
        mpi::collective::SystemOperation::max(),
    );
    say(&format!(
        "lattice filter by slabs (project, diffuse 0.004), {n}^3: {e:.1e} from the serial filter; took out {took_here:.6} against {took:.6}"
    ));
    assert!(e < 1e-12, "{e}");
    assert!(
        (took_here - took).abs() < 1e-12 * took,
        "{took_here} {took}"
    );
    assert_eq!(
        part.x,
        some(&all, &mine).x,
        "the particles stay where they were"
    );

    // Bad input on one process, said on every one: a cell taken twice
    // (process 0's first particle in place of its second), a particle
    // short, a negative diffusion.
    let mut twice = some(&all, &mine);
    if me == 0 && twice.len() >= 2 {
        twice.x[1] = twice.x[0];
    }
    let err = filter_lattice_partitioned(&comm, &mut twice, &pbox, n, filter)
        .unwrap_err()
        .to_string();
    assert!(err.contains("taken by another particle"), "{err}");
    let mut short = some(&all, &mine);
    if me == 0 {
        short.x.pop();
        short.alpha.pop();
        short.sigma.pop();
        short.volume.pop();
    }
    let err = filter_lattice_partitioned(&comm, &mut short, &pbox, n, filter)
        .unwrap_err()
        .to_string();
    assert!(err.contains("filling the remeshing lattice"), "{err}");
    let bad = LatticeFilter {
        project: true,
        diffuse: -1.0,
    };
    let err = filter_lattice_partitioned(&comm, &mut some(&all, &mine), &pbox, n, bad)
        .unwrap_err()
        .to_string();
    assert!(err.contains("diffusion"), "{err}");
    say("bad input: said on every process");

    // Remeshing across the processes, three times, the particles moved
    // between: the serial remeshing's points and strengths each time, and
    // the processes' counts kept even.
    let n = 12;
    let h = pbox.side / n as f64;
    let lat = Lattice::Periodic { pbox, n };
    let mut all = lattice(n, &pbox);
    for (i, x) in all.x.iter_mut().enumerate() {
        // Off the lattice: a third of a spacing, by the index.
        x[i % 3] += h * ((i % 7) as f64 / 7.0 - 0.4);
    }
    let mut mine = share_of(&comm, &all).unwrap();
    let shift = [0.37 * h, -0.21 * h, 0.55 * h];
    for round in 0..3 {
        for x in all.x.iter_mut().chain(mine.x.iter_mut()) {
            (0..3).for_each(|a| x[a] += shift[a]);
        }
        all = remesh(&all, &lat, 0.0).unwrap();
        mine = remesh_partitioned(&comm, &mine, &lat, 0.0).unwrap();
        let at: HashMap<usize, usize> = all
            .x
            .iter()
            .enumerate()
            .map(|(i, x)| (cell_of(*x, &pbox, n), i))
            .collect();
        let worst = mine
            .x
            .iter()
            .zip(&mine.alpha)
            .map(|(x, a)| {
                let j = at[&cell_of(*x, &pbox, n)];
                (0..3)
                    .map(|d| (a[d] - all.alpha[j][d]).abs())
                    .fold((x[0] - all.x[j][0]).abs(), f64::max)
            })
            .fold(0.0f64, f64::max);
        let (mut e, mut total, mut most, mut least) = (0.0f64, 0usize, 0usize, 0usize);
        let max = mpi::collective::SystemOperation::max();
        comm.all_reduce_into(&worst, &mut e, max);
        comm.all_reduce_into(
            &mine.len(),
            &mut total,
            mpi::collective::SystemOperation::sum(),
        );
        comm.all_reduce_into(&mine.len(), &mut most, max);
        comm.all_reduce_into(
            &mine.len(),
            &mut least,
            mpi::collective::SystemOperation::min(),
        );
        say(&format!(
            "remeshing {round}: {total} particles, {e:.1e} from the serial remeshing's; {least} to {most} a process"
        ));
        assert_eq!(total, all.len());
        assert!(e < 1e-12, "{e}");
        // The largest within REMESH_BALANCE of the mean (ORB's parts
        // even to a particle where it cut them again).
        let mean = total as f64 / size as f64;
        assert!(most as f64 <= REMESH_BALANCE * mean + 1.0, "{least} {most}");
    }
    say(&format!(
        "every distributed vortex check passed on {size} process(es)"
    ));
}

/// The lattice cell nearest `x` (index `(z n + y) n + x`), wrapped.
fn cell_of(x: [f64; 3], pbox: &PeriodicBox, n: usize) -> usize {
    let h = pbox.side / n as f64;
    let j = [0, 1, 2].map(|a| {
        (((x[a] - pbox.origin[a]) / h - 0.5).round() as i64).rem_euclid(n as i64) as usize
    });
    (j[2] * n + j[1]) * n + j[0]
}
