//! The vortex method over MPI processes (the `mpi` feature): each process
//! steps the particles of its part of space, their velocity and stretching
//! summed from every process's particles by
//! `fmm_core::distributed::evaluate_partitioned` (the local essential
//! trees); the ring's diagnostics are sums over the processes.

use std::path::Path;
use std::time::Instant;

use fmm_core::distributed::checkpoint::{read_parts, write_parts};
use fmm_core::distributed::{agreed, evaluate_partitioned, orb_partition, Balance, Migration};
use fmm_core::kernels::VelocityStretching;
use fmm_core::{Kernel, Real};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

pub use crate::slab_fft::filter_lattice_partitioned;

use crate::checkpoint::Checkpoint;
use crate::error::VortexError;
use crate::integrate::{Scheme, Stepper};
use crate::particles::VortexParticles;
use crate::rates::{front_door_sets, Precision, Rates, Solver, StretchingScheme};
use crate::remesh::{check_cull, Lattice};
use crate::remesh_parts::{floor, Claim, PartRemesh};
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
    let picked = VortexParticles::new(
        pick3(&all.x),
        pick3(&all.alpha),
        pick(&all.sigma),
        pick(&all.volume),
    )?;
    Ok(to_their_parts(comm, &picked, None)?.0)
}

/// `p` (this process's particles) and `rates` (six values a particle, as
/// the stepper carries them) moved to the parts of space of equal count
/// cut by orthogonal recursive bisection; a collective call.
fn to_their_parts<C: Communicator>(
    comm: &C,
    p: &VortexParticles,
    rates: Option<&[f64]>,
) -> Result<(VortexParticles, Option<Vec<f64>>), VortexError> {
    let dest = orb_partition(comm, &p.x, &vec![1.0; p.len()])?;
    moved_to(comm, p, rates, &dest)
}

/// `p` and `rates` (six values a particle) moved to the processes `dest`
/// (one a particle); a collective call.
fn moved_to<C: Communicator>(
    comm: &C,
    p: &VortexParticles,
    rates: Option<&[f64]>,
    dest: &[i32],
) -> Result<(VortexParticles, Option<Vec<f64>>), VortexError> {
    let mig = Migration::new(comm, dest)?;
    let triples = |v: &[[f64; 3]]| -> Vec<[f64; 3]> {
        mig.forward_rows(comm, v.as_flattened(), 3)
            .chunks_exact(3)
            .map(|c| [c[0], c[1], c[2]])
            .collect()
    };
    let particles = VortexParticles::new(
        triples(&p.x),
        triples(&p.alpha),
        mig.forward(comm, &p.sigma),
        mig.forward(comm, &p.volume),
    )?;
    Ok((particles, rates.map(|r| mig.forward_rows(comm, r, 6))))
}

/// Writes `c` (this process's particles, with the run's step, time and
/// stepper) as this process's part of the checkpoint in `dir`
/// (`fmm_core::distributed::checkpoint`: each part a [`Checkpoint`] file,
/// then a manifest); a collective call.
pub fn save_partitioned<C: Communicator>(
    comm: &C,
    dir: &Path,
    c: &Checkpoint,
) -> Result<(), VortexError> {
    Ok(write_parts(comm, dir, c.step, |path| c.save(path))?)
}

/// This process's share of the checkpoint in `dir`, written by any number
/// of processes: its parts read, joined (particles and the stepper's
/// rates), and moved to the parts of space of equal count; a collective
/// call. Parts of different steps, times or schemes are refused.
pub fn load_partitioned<C: Communicator>(comm: &C, dir: &Path) -> Result<Checkpoint, VortexError> {
    let restart = read_parts(comm, dir, Checkpoint::load)?;
    // Rank 0 holds part 0: its step, time and scheme are every process's
    // (a process past the parts' count holds none).
    let first = restart.parts.first();
    let mut head = first.map_or([0.0; 4], |c| {
        let last_dt = c.stepper.last.as_ref().map_or(-1.0, |l| l.1);
        [
            c.step as f64,
            c.time,
            c.stepper.scheme as u8 as f64,
            last_dt,
        ]
    });
    comm.process_at_rank(0).broadcast_into(&mut head[..]);
    let scheme = [Scheme::Ab2, Scheme::Rk2, Scheme::Rk3, Scheme::Rk4]
        .into_iter()
        .find(|s| *s as u8 as f64 == head[2])
        .expect("a scheme rank 0 read");
    let mut joined = Vec::new();
    let (mut x, mut alpha, mut sigma, mut volume) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut same = Ok(());
    for c in restart.parts {
        let last_dt = c.stepper.last.as_ref().map_or(-1.0, |l| l.1);
        if [
            c.step as f64,
            c.time,
            c.stepper.scheme as u8 as f64,
            last_dt,
        ] != head
        {
            same = Err(fmm_core::Error::Io(format!(
                "{}: parts of different steps, times or schemes",
                dir.display()
            )));
        }
        if let Some((rates, _)) = &c.stepper.last {
            joined.extend_from_slice(rates);
        }
        x.extend(c.particles.x);
        alpha.extend(c.particles.alpha);
        sigma.extend(c.particles.sigma);
        volume.extend(c.particles.volume);
    }
    agreed(comm, same)?;
    let mine = VortexParticles::new(x, alpha, sigma, volume);
    let mine = agreed(comm, mine.map_err(|e| fmm_core::Error::Io(e.to_string())))?;
    let rates = (head[3] >= 0.0).then_some(&joined[..]);
    let (particles, rates) = to_their_parts(comm, &mine, rates)?;
    let mut stepper = Stepper::new(scheme);
    stepper.last = rates.map(|r| (r, head[3]));
    Ok(Checkpoint {
        step: head[0] as u64,
        time: head[1],
        particles,
        stepper,
    })
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

/// This process's particles `p` remeshed onto `lattice` with every
/// process's (the lattice points and strengths of
/// [`crate::remesh::remesh`] of all of them, to round-off): each process
/// spreads its own, the points near its part's faces go to their owner
/// and are summed there ([`crate::remesh_parts`]); where the largest
/// count then passes [`REMESH_BALANCE`] of the mean, the new particles
/// move to the parts of equal count cut by orthogonal recursive bisection.
/// (A point reached by several parts belongs to the lowest-numbered, so
/// the owners' parts alone grew by the stencil's reach at each remeshing
/// toward the higher-numbered: on 4 processes at 256^3, remeshing every
/// step, the rates' slowest process took 2.1, then 3.8 s.) A collective
/// call; a bad setting or particle on one process is an error on every
/// one.
pub fn remesh_partitioned<C: Communicator>(
    comm: &C,
    p: &VortexParticles,
    lattice: &Lattice,
    cull: f64,
) -> Result<VortexParticles, VortexError> {
    remesh_partitioned_on(comm, None, p, lattice, cull)
}

/// [`remesh_partitioned`] with each process's spreading on `gpu` where
/// one is given ([`PartRemesh::spread_on`]; the rest on the host).
pub fn remesh_partitioned_on<C: Communicator>(
    comm: &C,
    gpu: Option<&fmm_core::cuda::Gpu>,
    p: &VortexParticles,
    lattice: &Lattice,
    cull: f64,
) -> Result<VortexParticles, VortexError> {
    let (me, size) = (comm.rank() as usize, comm.size() as usize);
    let mut lap = laps(me, "remeshing");
    let spread = check_cull(cull).and_then(|_| PartRemesh::spread_on(gpu, p, lattice));
    let mut part = agreed(
        comm,
        spread.map_err(|e| fmm_core::Error::BadOption(e.to_string())),
    )?;
    lap("spread");
    let mine = part.claim().to_flat();
    let mut all = vec![0i64; 12 * size];
    comm.all_gather_into(&mine[..], &mut all[..]);
    let claims: Vec<Claim> = all.chunks_exact(12).map(Claim::from_flat).collect();
    let out = part.shared(&claims, me);
    let to = Migration::new(comm, &out.dest)?;
    let index = [0, 1, 2].map(|a| to.forward(comm, &out.index[a]));
    let sums = [0, 1, 2, 3, 4].map(|k| to.forward(comm, &out.sums[k]));
    part.absorb(&index, &sums);
    lap("the shared points to their owners");
    let mut largest = 0.0f64;
    comm.all_reduce_into(&part.largest(), &mut largest, SystemOperation::max());
    let mut cores = [0.0f64; 2];
    comm.all_reduce_into(
        &[part.sigma_sum, part.count as f64][..],
        &mut cores[..],
        SystemOperation::sum(),
    );
    let fallback = cores[0] / cores[1].max(1.0);
    let p = agreed(
        comm,
        part.particles(floor(cull, largest)?, fallback)
            .map_err(|e| fmm_core::Error::BadOption(e.to_string())),
    )?;
    lap("particles made");
    if Balance::imbalance(comm, p.len() as f64) > REMESH_BALANCE {
        let moved = to_their_parts(comm, &p, None)?.0;
        lap("cut again by ORB, moved");
        return Ok(moved);
    }
    Ok(p)
}

/// `FMM_TRACE`: a closure that prints the seconds since its last call (or
/// its making) on stderr, named by process `me`, `what` and the stage
/// given.
pub(crate) fn laps(me: usize, what: &'static str) -> impl FnMut(&str) {
    let mut clock = Instant::now();
    move |stage: &str| {
        if fmm_core::stats::trace() {
            eprintln!(
                "[fmm] process {me}: {what}: {stage} {:.3} s",
                clock.elapsed().as_secs_f64()
            );
            clock = Instant::now();
        }
    }
}

/// The largest process's count of remeshed particles over the mean past
/// which [`remesh_partitioned`] cuts the parts again (the cut and the
/// moves took 2.2 s of a 2.8 s remeshing on 4 processes sharing an H200
/// at 256^3, when each remeshing called for them: each lattice point now
/// goes to the part nearest it, [`crate::remesh_parts::Claim`], and the
/// parts keep their sizes).
pub const REMESH_BALANCE: f64 = 1.05;

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
