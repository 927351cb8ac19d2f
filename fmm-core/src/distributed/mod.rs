//! Evaluation over MPI processes (the `mpi` feature; rsmpi over Open
//! MPI): each process holds some of the targets and some of the sources,
//! calls [`evaluate_distributed`] with the same kernel, method, parameters
//! and domain as the others, and gets the outputs for its own targets, in
//! its own order.
//!
//! What it does so far: every process gathers every process's sources
//! (an all-gather of each field) and evaluates its own targets against
//! them by [`crate::evaluate`], on its own backend. That is exact for every
//! method, domain and backend (the same sums as one process would make
//! for those targets) and its memory is the whole source set on each
//! process: the first step of yokota2012 section 3, without the partition
//! (orthogonal recursive bisection) and the local essential tree that
//! make it scale. A tolerance is met on every process's targets, so it is
//! met over all of them (the squared errors add up as the squared
//! references do).
//!
//! [`orb_partition`] finds where particles should live: parts of space of
//! equal weight by orthogonal recursive bisection, the partition the
//! local essential tree will build on; [`Migration`] moves particles to
//! their processes and brings what was computed for them back, in their
//! owners' order.
//!
//! Every process takes the same collectives in the same order: an error
//! on one (a bad input, an evaluation that fails) is agreed on and
//! returned on every process, naming the process; processes given
//! different kernels, precisions, methods, parameters or domains all
//! return [`Error::Mismatch`].

mod exchange;
mod orb;

pub use exchange::Migration;
pub use orb::orb_partition;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use mpi::collective::SystemOperation;
use mpi::datatype::{Equivalence, PartitionMut};
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use mpi::Count;

use crate::backend::Backend;
use crate::error::Error;
use crate::evaluate::{check, evaluate, Evaluation};
use crate::kernel::Kernel;
use crate::methods::Method;
use crate::particles::Particles;
use crate::problem::Problem;
use crate::real::Real;

/// Evaluates kernel `K` from every process's `sources` at this process's
/// `targets` (see the module's text); a collective call: every process of
/// `comm` makes it.
pub fn evaluate_distributed<'a, K, R, C>(
    comm: &C,
    backend: Backend,
    method: &Method,
    problem: impl Into<Problem<'a>>,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Evaluation<R>, Error>
where
    K: Kernel,
    R: Real + Equivalence,
    C: Communicator,
{
    let problem = problem.into();
    agree_on_the_job::<K, R, C>(comm, method, &problem)?;
    // Each process checks its own particles first (the sets made for this
    // kernel, its requirements, the domain's side of a wall), so that a
    // bad one is named by the process that holds it.
    agree(
        comm,
        check::<K, R>(method, &problem, targets, sources).map(|_| ()),
    )?;
    let all = gather_sources(comm, sources)?;
    let result = evaluate::<K, R>(backend, method, problem, targets, &all);
    let verdict = result.as_ref().map(|_| ()).map_err(|e| e.to_string());
    agree(comm, verdict.map_err(Error::BadOption))?;
    result
}

/// What every process must agree on, hashed: the kernel, the precision,
/// the method, the parameters and the domain.
fn fingerprint<K: Kernel, R: Real>(method: &Method, problem: &Problem<'_>) -> i64 {
    let mut h = DefaultHasher::new();
    K::def().name.hash(&mut h);
    std::mem::size_of::<R>().hash(&mut h);
    format!("{method:?}").hash(&mut h);
    for p in problem.params {
        p.to_bits().hash(&mut h);
    }
    format!("{:?}", problem.domain).hash(&mut h);
    h.finish() as i64
}

fn agree_on_the_job<K: Kernel, R: Real, C: Communicator>(
    comm: &C,
    method: &Method,
    problem: &Problem<'_>,
) -> Result<(), Error> {
    let mine = fingerprint::<K, R>(method, problem);
    let (mut lo, mut hi) = (0i64, 0i64);
    comm.all_reduce_into(&mine, &mut lo, SystemOperation::min());
    comm.all_reduce_into(&mine, &mut hi, SystemOperation::max());
    if lo != hi {
        return Err(Error::Mismatch(
            "the processes were given different kernels, precisions, methods, parameters or domains"
                .into(),
        ));
    }
    Ok(())
}

/// Every process learns whether any failed; where some did, each returns
/// the error of the lowest-ranked one that did, naming it.
fn agree<C: Communicator>(comm: &C, mine: Result<(), Error>) -> Result<(), Error> {
    let me = comm.rank();
    let failed = if mine.is_err() { me } else { Count::MAX };
    let mut first = 0;
    comm.all_reduce_into(&failed, &mut first, SystemOperation::min());
    if first == Count::MAX {
        return Ok(());
    }
    // The failing process says why; the others hear it.
    let root = comm.process_at_rank(first);
    let mut text = match &mine {
        Err(e) if me == first => e.to_string().into_bytes(),
        _ => vec![],
    };
    let mut len = text.len() as u64;
    root.broadcast_into(&mut len);
    text.resize(len as usize, 0);
    root.broadcast_into(&mut text[..]);
    Err(Error::Distributed {
        rank: first,
        message: String::from_utf8_lossy(&text).into_owned(),
    })
}

/// Every process's sources, in rank order (an all-gather of the
/// positions and of each field's slots).
fn gather_sources<R: Real + Equivalence, C: Communicator>(
    comm: &C,
    sources: &Particles<R>,
) -> Result<Particles<R>, Error> {
    let size = comm.size() as usize;
    let n = Count::try_from(sources.len()).map_err(|_| {
        Error::BadOption(format!(
            "{} sources on one process: more than MPI's counts hold",
            sources.len()
        ))
    })?;
    let mut counts = vec![0 as Count; size];
    comm.all_gather_into(&n, &mut counts[..]);
    let total: i64 = counts.iter().map(|&c| c as i64).sum();
    if total > Count::MAX as i64 {
        return Err(Error::BadOption(format!(
            "{total} sources in all: more than MPI's counts hold (the local essential tree, which sends only what each process needs, is not built yet)"
        )));
    }
    let displs: Vec<Count> = counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect();
    let gather = |local: &[R]| -> Vec<R> {
        let mut all = vec![R::zero(); total as usize];
        let mut into = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        comm.all_gather_varcount_into(local, &mut into);
        all
    };
    Ok(Particles {
        kernel: sources.kernel,
        role: sources.role,
        layout: sources.layout.clone(),
        pos: [0, 1, 2].map(|c| gather(&sources.pos[c])),
        slots: sources.slots.iter().map(|s| gather(s)).collect(),
    })
}
