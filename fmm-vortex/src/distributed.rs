//! The vortex method over MPI processes (the `mpi` feature): each process
//! steps the particles of its part of space, their velocity and stretching
//! summed from every process's particles by
//! `fmm_core::distributed::evaluate_partitioned` (the local essential
//! trees); the ring's diagnostics are sums over the processes.

use std::time::Instant;

use fmm_core::distributed::{evaluate_partitioned, orb_partition, Migration};
use fmm_core::kernels::VelocityStretching;
use fmm_core::{Kernel, Real};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::traits::{Communicator, CommunicatorCollectives};

use crate::error::VortexError;
use crate::particles::VortexParticles;
use crate::rates::{front_door_sets, Precision, Rates, Solver, StretchingScheme};
use crate::VelocityStretchingTranspose;

/// This process's part of `all` (the same set made on every process: a
/// ring, a lattice): each process takes every `size`-th particle from its
/// rank, then the particles move to the parts of space of equal count cut
/// by orthogonal recursive bisection; a collective call.
pub fn share_of<C: Communicator>(
    comm: &C,
    all: &VortexParticles,
) -> Result<VortexParticles, VortexError> {
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    let mine: Vec<usize> = (rank..all.len()).step_by(size).collect();
    let pick3 = |v: &[[f64; 3]]| -> Vec<[f64; 3]> { mine.iter().map(|&i| v[i]).collect() };
    let pick = |v: &[f64]| -> Vec<f64> { mine.iter().map(|&i| v[i]).collect() };
    let x = pick3(&all.x);
    let dest = orb_partition(comm, &x, &vec![1.0; x.len()])?;
    let mig = Migration::new(comm, &dest)?;
    let moved3 = |v: &[[f64; 3]]| -> Vec<[f64; 3]> {
        let [a, b, c] = [0, 1, 2].map(|k| {
            let axis: Vec<f64> = v.iter().map(|p| p[k]).collect();
            mig.forward(comm, &axis)
        });
        (0..a.len()).map(|i| [a[i], b[i], c[i]]).collect()
    };
    VortexParticles::new(
        moved3(&x),
        moved3(&pick3(&all.alpha)),
        mig.forward(comm, &pick(&all.sigma)),
        mig.forward(comm, &pick(&all.volume)),
    )
}

/// The rates of this process's particles `p` from every process's, by
/// `solver`'s backend, method, precision, domain and stretching; a
/// collective call. In a periodic box the strengths' mean taken out is
/// the mean over every process's.
pub fn rates_partitioned<C: Communicator>(
    solver: &Solver,
    comm: &C,
    p: &VortexParticles,
) -> Result<Rates, VortexError> {
    match solver.precision {
        Precision::F32 => rates_in::<f32, C>(solver, comm, p),
        Precision::F64 => rates_in::<f64, C>(solver, comm, p),
    }
}

fn rates_in<R: Real + Equivalence + Default, C: Communicator>(
    solver: &Solver,
    comm: &C,
    p: &VortexParticles,
) -> Result<Rates, VortexError> {
    let t = Instant::now();
    let mut strengths = p.alpha.clone();
    if solver.takes_mean_out() {
        let local = p.alpha.iter().fold([0.0; 4], |m, a| {
            [m[0] + a[0], m[1] + a[1], m[2] + a[2], m[3] + 1.0]
        });
        let mut all = [0.0; 4];
        comm.all_reduce_into(&local[..], &mut all[..], SystemOperation::sum());
        if all[3] > 0.0 {
            for a in &mut strengths {
                (0..3).for_each(|c| a[c] -= all[c] / all[3]);
            }
        }
    }
    let e = match solver.stretching {
        StretchingScheme::Classical => {
            evaluate::<VelocityStretching, R, C>(solver, comm, p, &strengths)?
        }
        StretchingScheme::Transpose => {
            evaluate::<VelocityStretchingTranspose, R, C>(solver, comm, p, &strengths)?
        }
    };
    let back = |v: [&[R]; 3]| -> Vec<[f64; 3]> {
        (0..p.len())
            .map(|i| [v[0][i].to_f64(), v[1][i].to_f64(), v[2][i].to_f64()])
            .collect()
    };
    Ok(Rates {
        u: back(e.outputs.vec3("u")?),
        dalpha: back(e.outputs.vec3("s")?),
        seconds: t.elapsed().as_secs_f64(),
        achieved: e.achieved,
        device: e.device,
    })
}

fn evaluate<K: Kernel, R: Real + Equivalence + Default, C: Communicator>(
    solver: &Solver,
    comm: &C,
    p: &VortexParticles,
    strengths: &[[f64; 3]],
) -> Result<fmm_core::Evaluation<R>, VortexError> {
    let (targets, sources) = front_door_sets::<K, R>(p, strengths, &[])?;
    Ok(evaluate_partitioned::<K, R, C>(
        comm,
        solver.backend,
        &solver.method,
        solver.problem(),
        &targets,
        &sources,
    )?)
}

/// [`crate::impulse_centre`] over every process's particles; a collective
/// call.
pub fn impulse_centre_partitioned<C: Communicator>(comm: &C, p: &VortexParticles) -> f64 {
    let (mut sw, mut swz) = (0.0, 0.0);
    for (x, a) in p.x.iter().zip(&p.alpha) {
        let w = x[0] * a[1] - x[1] * a[0];
        sw += w;
        swz += w * x[2];
    }
    let mut all = [0.0; 2];
    comm.all_reduce_into(&[sw, swz][..], &mut all[..], SystemOperation::sum());
    all[1] / all[0]
}
