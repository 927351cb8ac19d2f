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
use fmm_vortex::distributed::filter_lattice_partitioned;
use fmm_vortex::particles::VortexParticles;
use fmm_vortex::remesh::{filter_lattice, LatticeFilter};
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
    let universe = mpi::initialize().expect("MPI initialises");
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
    say(&format!(
        "bad input: said on every process\nevery distributed vortex check passed on {size} process(es)"
    ));
}
