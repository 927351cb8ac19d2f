//! The periodic lattice's filter ([`crate::remesh::filter_lattice`]: the
//! projection onto divergence-free vorticity, the exact diffusion) over
//! MPI processes, by an FFT of the lattice cut into slabs.
//!
//! The `n^3` lattice's z planes are dealt out in runs, one a process (the
//! slabs; a process may hold none where there are more processes than
//! planes). Each process sends its particles' strengths to the owners of
//! their planes, which transform their planes' x lines (real: half the
//! spectrum, [`HalfFft3`]) and y lines; an
//! all-to-all then gives each process the y rows of its own run across
//! every plane (pencils along z), which it transforms along z, filters
//! mode by mode and transforms back; the same all-to-alls in reverse
//! bring the values back to the slabs and then to the particles, in
//! their processes' order. Two all-to-alls of the lattice each way, as
//! a distributed FFT's slab decomposition does (the pencil one's third
//! pays past a few hundred processes).

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

use fmm_core::distributed::{agreed, Migration};
use fmm_core::PeriodicBox;
use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};
use rayon::prelude::*;
use rustfft::num_complex::Complex64;

use crate::error::VortexError;
use crate::particles::VortexParticles;
use crate::remesh::{filter_lattice, lattice_cell, LatticeFilter};
use crate::spectral::HalfFft3;

/// The run of `0..n` that process `r` of `size` holds.
fn run(n: usize, size: usize, r: usize) -> Range<usize> {
    r * n / size..(r + 1) * n / size
}

/// The process holding each index of `0..n` (the runs of [`run`]).
fn owners(n: usize, size: usize) -> Vec<i32> {
    let mut owner = vec![0; n];
    for r in 0..size {
        for j in run(n, size, r) {
            owner[j] = r as i32;
        }
    }
    owner
}

/// Complex values as their real and imaginary parts, one after the
/// other: what the transposes send, two values a mode.
fn as_reals(v: &[Complex64]) -> &[f64] {
    // SAFETY: num-complex's `Complex<f64>` is `#[repr(C)]` { re, im }: two
    // f64 in a row, aligned as f64.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<f64>(), 2 * v.len()) }
}

/// [`as_reals`] undone.
fn complex(reals: Vec<f64>) -> Vec<Complex64> {
    reals
        .par_chunks_exact(2)
        .map(|c| Complex64::new(c[0], c[1]))
        .collect()
}

/// [`crate::remesh::filter_lattice`] over the processes of `comm`: the
/// particles `p` of every process together fill the `n^3` cell centres of
/// `pbox` (what [`crate::distributed::remesh_partitioned`] onto a periodic
/// lattice gives with no cull), each process's in any order; the filter
/// is applied to the lattice's vorticity and each particle given its
/// point's value. Returns the relative size of what the projection took
/// out, over the whole lattice. Equal to the serial filter of the
/// particles gathered, to round-off. A collective call; an error (a
/// setting, a cell taken twice or left empty) is said on every process.
pub fn filter_lattice_partitioned<C: Communicator>(
    comm: &C,
    p: &mut VortexParticles,
    pbox: &PeriodicBox,
    n: usize,
    filter: LatticeFilter,
) -> Result<f64, VortexError> {
    let (me, size) = (comm.rank() as usize, comm.size() as usize);
    let setting = filter.check().and(match n {
        0 => Err(VortexError::BadSetting {
            what: "the lattice's points a side",
            value: 0.0,
            why: "must be at least 1",
        }),
        _ => Ok(()),
    });
    agreed(
        comm,
        setting.map_err(|e| fmm_core::Error::BadOption(e.to_string())),
    )?;
    let mut count = 0u64;
    comm.all_reduce_into(&(p.len() as u64), &mut count, SystemOperation::sum());
    if count != (n * n * n) as u64 {
        return Err(VortexError::LengthMismatch {
            what: "particles filling the remeshing lattice (every process's)",
            got: count as usize,
            expected: n * n * n,
        });
    }
    if size == 1 {
        // Every particle here: the serial filter, no transposes.
        return filter_lattice(p, pbox, n, filter);
    }
    let mut lap = crate::distributed::laps(me, "lattice filter");
    let plane = n * n;
    let fft = HalfFft3::new(n);
    let h = fft.h();

    // The particles' strengths to the slabs of their planes.
    let cell: Vec<usize> = p.x.par_iter().map(|&x| lattice_cell(x, pbox, n)).collect();
    let z_owner = owners(n, size);
    let dest: Vec<i32> = cell.par_iter().map(|&c| z_owner[c / plane]).collect();
    lap("cells and their slabs");
    let to_slabs = Migration::new(comm, &dest)?;
    lap("the moves' counts and order");
    // A row a particle: its cell (exact in f64 below 2^53 cells), its
    // strength.
    let arrived = to_slabs.forward_rows_with(comm, 4, |i, r| {
        r[0] = cell[i] as f64;
        r[1..].copy_from_slice(&p.alpha[i]);
    });
    let at: Vec<usize> = arrived.par_chunks_exact(4).map(|r| r[0] as usize).collect();
    let zs = run(n, size, me);
    lap("the strengths sent to the slabs");
    // Each cell's arrival (its index + 1), in parallel: as many particles
    // as cells, so a cell taken twice is one left empty.
    let taker: Vec<AtomicU32> = (0..zs.len() * plane).map(|_| AtomicU32::new(0)).collect();
    let twice = at.par_iter().enumerate().find_any(|&(k, &c)| {
        taker[c - zs.start * plane].swap(k as u32 + 1, Ordering::Relaxed) != 0
    });
    let placed = match twice {
        Some((_, c)) => Err(fmm_core::Error::BadOption(format!(
            "cell {c} of the remeshing lattice is taken by another particle: the particles \
             must fill the lattice, one a cell"
        ))),
        None => Ok(()),
    };
    agreed(comm, placed)?;
    let slab: [Vec<f64>; 3] = [0, 1, 2].map(|d| {
        taker
            .par_iter()
            .map(|k| arrived[4 * (k.load(Ordering::Relaxed) as usize - 1) + 1 + d])
            .collect()
    });
    drop((arrived, taker));
    lap("the strengths placed");
    let spectra = slab.map(|w| fft.planes_forward(&w));
    lap("x and y forward");

    // The slabs to pencils: each plane's rows to the owner of their y.
    // What comes from process q are its planes' rows of this process's y,
    // in order, and q's planes follow one another: the pencil's layout is
    // (z, y - y0, x mode).
    let y_owner = owners(n, size);
    let dest: Vec<i32> = (0..spectra[0].len())
        .into_par_iter()
        .map(|i| y_owner[(i / h) % n])
        .collect();
    let to_pencils = Migration::new(comm, &dest)?;
    let mut pencil = spectra.map(|w| complex(to_pencils.forward_rows(comm, as_reals(&w), 2)));
    lap("to the pencils");
    let ys = run(n, size, me);
    let rows = ys.len();
    for w in &mut pencil {
        fft.across_planes(w, rows, false);
    }

    // Mode by mode.
    let [wx, wy, wz] = &mut pencil;
    let (removed, total) = wx
        .par_iter_mut()
        .zip(wy.par_iter_mut())
        .zip(wz.par_iter_mut())
        .enumerate()
        .map(|(i, ((a, b), e))| {
            let j = [i % h, ys.start + (i / h) % rows, i / (h * rows)];
            filter.apply_half(j, n, pbox.side, [a, b, e])
        })
        .reduce(|| (0.0, 0.0), |x, y| (x.0 + y.0, x.1 + y.1));
    let mut sums = [0.0f64; 2];
    comm.all_reduce_into(&[removed, total][..], &mut sums[..], SystemOperation::sum());
    lap("z forward, the filter");

    // Back: along z, to the slabs, their planes, to the particles.
    let values = pencil.map(|mut w| {
        fft.across_planes(&mut w, rows, true);
        let mut planes = complex(to_pencils.back_rows(comm, as_reals(&w), 2));
        drop(w);
        fft.planes_inverse(&mut planes)
    });
    lap("back to the slabs, inverse");
    // The slab's values in the order they came (each its cell's), then
    // back to the particles.
    let scale = 1.0 / (plane * n) as f64;
    let mut came = vec![0.0; 3 * at.len()];
    came.par_chunks_mut(3)
        .zip(at.par_iter())
        .for_each(|(v, &c)| {
            let local = c - zs.start * plane;
            for (v, w) in v.iter_mut().zip(&values) {
                *v = w[local] * scale;
            }
        });
    drop(values);
    lap("the values in the arrivals' order");
    to_slabs.back_rows_into(comm, &came, 3, &mut p.alpha, |a, v| {
        *a = [v[0], v[1], v[2]];
    });
    lap("back to the particles");
    Ok(LatticeFilter::took_out(sums[0], sums[1]))
}
