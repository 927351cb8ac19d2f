//! The periodic lattice's filter ([`crate::remesh::filter_lattice`]: the
//! projection onto divergence-free vorticity, the exact diffusion) over
//! MPI processes, by an FFT of the lattice cut into slabs.
//!
//! The `n^3` lattice's z planes are dealt out in runs, one a process (the
//! slabs; a process may hold none where there are more processes than
//! planes). Each process sends its particles' strengths to the owners of
//! their planes, which transform their planes' x and y lines; an
//! all-to-all then gives each process the y rows of its own run across
//! every plane (pencils along z), which it transforms along z, filters
//! mode by mode and transforms back; the same all-to-alls in reverse
//! bring the values back to the slabs and then to the particles, in
//! their processes' order. Two all-to-alls of the lattice each way, as
//! a distributed FFT's slab decomposition does (the pencil one's third
//! pays past a few hundred processes).

use std::ops::Range;

use fmm_core::distributed::{agreed, Migration};
use fmm_core::PeriodicBox;
use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};
use rayon::prelude::*;
use rustfft::num_complex::Complex64;

use crate::error::VortexError;
use crate::particles::VortexParticles;
use crate::remesh::{filter_lattice, lattice_cell, wavenumber, LatticeFilter};
use crate::spectral::Fft3;

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

/// Complex values sent as their real and imaginary parts.
fn parts(v: &[Complex64]) -> [Vec<f64>; 2] {
    [
        v.par_iter().map(|c| c.re).collect(),
        v.par_iter().map(|c| c.im).collect(),
    ]
}

fn joined(re: &[f64], im: &[f64]) -> Vec<Complex64> {
    re.par_iter()
        .zip(im)
        .map(|(&re, &im)| Complex64::new(re, im))
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
    let plane = n * n;
    let fft = Fft3::new(n);

    // The particles' strengths to the slabs of their planes.
    let cell: Vec<usize> = p.x.par_iter().map(|&x| lattice_cell(x, pbox, n)).collect();
    let z_owner = owners(n, size);
    let dest: Vec<i32> = cell.par_iter().map(|&c| z_owner[c / plane]).collect();
    let to_slabs = Migration::new(comm, &dest)?;
    let cells: Vec<u64> = cell.par_iter().map(|&c| c as u64).collect();
    let at = to_slabs.forward(comm, &cells);
    let alpha: [Vec<f64>; 3] = [0, 1, 2]
        .map(|a| to_slabs.forward(comm, &p.alpha.iter().map(|v| v[a]).collect::<Vec<_>>()));
    let zs = run(n, size, me);
    let mut slab: [Vec<Complex64>; 3] =
        [(); 3].map(|_| vec![Complex64::default(); zs.len() * plane]);
    // As many particles as cells: a cell taken twice is one left empty.
    let mut filled = vec![false; zs.len() * plane];
    let placed = (|| {
        for (k, &c) in at.iter().enumerate() {
            let local = c as usize - zs.start * plane;
            if filled[local] {
                return Err(fmm_core::Error::BadOption(format!(
                    "cell {c} of the remeshing lattice is taken by another particle: the \
                     particles must fill the lattice, one a cell"
                )));
            }
            filled[local] = true;
            for (w, a) in slab.iter_mut().zip(&alpha) {
                w[local] = Complex64::new(a[k], 0.0);
            }
        }
        Ok(())
    })();
    agreed(comm, placed)?;
    drop((alpha, filled));
    for w in &mut slab {
        fft.planes(w, false);
    }

    // The slabs to pencils: each plane's rows to the owner of their y.
    // What comes from process q are its planes' rows of this process's y,
    // in order, and q's planes follow one another: the pencil's layout is
    // (z, y - y0, x).
    let y_owner = owners(n, size);
    let dest: Vec<i32> = (0..slab[0].len())
        .into_par_iter()
        .map(|i| y_owner[(i / n) % n])
        .collect();
    let to_pencils = Migration::new(comm, &dest)?;
    let mut pencil: [Vec<Complex64>; 3] = [0, 1, 2].map(|a| {
        let [re, im] = parts(&slab[a]);
        joined(
            &to_pencils.forward(comm, &re),
            &to_pencils.forward(comm, &im),
        )
    });
    drop(slab);
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
            let j = [i % n, ys.start + (i / n) % rows, i / (n * rows)];
            filter.apply(wavenumber(j, n, pbox.side), [a, b, e])
        })
        .reduce(|| (0.0, 0.0), |x, y| (x.0 + y.0, x.1 + y.1));
    let mut sums = [0.0f64; 2];
    comm.all_reduce_into(&[removed, total][..], &mut sums[..], SystemOperation::sum());

    // Back: along z, to the slabs, their planes, to the particles.
    let scale = 1.0 / (plane * n) as f64;
    let mut back = [0, 1, 2].map(|a| {
        fft.across_planes(&mut pencil[a], rows, true);
        let [re, im] = parts(&pencil[a]);
        let mut w = joined(&to_pencils.back(comm, &re), &to_pencils.back(comm, &im));
        fft.planes(&mut w, true);
        w.iter().map(|c| c.re * scale).collect::<Vec<f64>>()
    });
    drop(pencil);
    // The slab's values in the order they came (each its cell's), then
    // back to the particles.
    for values in &mut back {
        let came: Vec<f64> = at
            .iter()
            .map(|&c| values[c as usize - zs.start * plane])
            .collect();
        *values = to_slabs.back(comm, &came);
    }
    for (i, v) in p.alpha.iter_mut().enumerate() {
        *v = [back[0][i], back[1][i], back[2][i]];
    }
    Ok(LatticeFilter::took_out(sums[0], sums[1]))
}
