//! Evaluation over MPI processes (the `mpi` feature; rsmpi over Open
//! MPI): each process holds some of the targets and some of the sources,
//! calls [`evaluate_distributed`] with the same kernel, method, parameters
//! and domain as the others, and gets the outputs for its own targets, in
//! its own order.
//!
//! How (yokota2012 section 3): the particles are moved to parts of space
//! of equal work found by orthogonal recursive bisection
//! ([`orb_partition`], [`Migration`]); each process sends each other the
//! part of its sources that the other's targets need, near ones as
//! particles and far cells as the strengths at their nodes (the local
//! essential tree, [`crate::essential`]); each evaluates its targets
//! against its own sources and what it got, by [`crate::evaluate`] on its
//! own backend: by default on a GPU of its own one FMM in two lots, the
//! own sources while the trees (cut from their tree) are exchanged, what
//! came after into the same locals ([`Overlap`]); elsewhere in one
//! evaluation after the exchange; the outputs
//! go back to the processes the targets came from. A simulation whose
//! particles stay where the partition put them calls
//! [`evaluate_partitioned`], which skips the moves. The direct sum
//! gathers every source instead (it needs each one anyway).
//!
//! Accuracy: the direct sum is exact; the tree methods differ from one
//! process's by the nodes' far field error, which is kept below the
//! method's ([`crate::essential::Essential::for_method`]); a tolerance is
//! met on every process's targets against what it holds, so it is met
//! over all of them (the squared errors add up as the squared references
//! do) up to that error.
//!
//! Every process takes the same collectives in the same order: an error
//! on one (a bad input, an evaluation that fails) is agreed on and
//! returned on every process, naming the process; processes given
//! different kernels, precisions, methods, parameters or domains all
//! return [`Error::Mismatch`].

pub mod checkpoint;
mod exchange;
mod orb;
mod overlap;
mod search;

pub use exchange::Migration;
pub use orb::orb_partition;
pub use overlap::{overlap, set_overlap, Overlap};

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{mpsc, OnceLock};
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::datatype::{Equivalence, PartitionMut};
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use mpi::Count;

use rayon::prelude::*;

use crate::backend::{resolve, Backend, Device};
use crate::cuda::device::refs3;
use crate::cuda::laps::Laps;
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::{Domain, PeriodicBox};
use crate::error::Error;
use crate::essential::{essential_sources_from, essential_sources_from_tree, Essential, Region};
use crate::evaluate::{check, evaluate, evaluate_joined, Evaluation};
use crate::kernel::Kernel;
use crate::methods::Method;
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::problem::Problem;
use crate::real::Real;
use crate::reference;
use crate::stats::Stage;
use crate::tree::{positions_f64, Bounds, DeviceOctree, Span, TreeOrdered};

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
    R: Real + Equivalence + Default,
    C: Communicator,
{
    let problem = problem.into();
    agree_on_the_inputs::<K, R, C>(comm, method, &problem, targets, sources)?;
    if Essential::for_method::<K>(method).is_none() {
        return gathered::<K, R, C>(comm, backend, method, problem, targets, sources);
    }
    if comm.size() == 1 {
        // One part: nothing to cut or move (the cut took 17.7 s of 10^8
        // points for nothing).
        return with_essential_trees::<K, R, C>(comm, backend, method, problem, targets, sources);
    }
    // Parts of equal work: targets and sources together, one each (the
    // targets at the sources' points, as a simulation's are, cut and
    // moved once, a point weighing two).
    let clock = Instant::now();
    let me = comm.rank() as usize;
    // Every process alike: the moves are collective calls.
    let at_sources = every_process(
        comm,
        same_points(targets, sources),
        "the targets' agreement",
    );
    let mut x = positions_f64(if at_sources { sources } else { targets });
    if !at_sources {
        let s = positions_f64(sources);
        for a in 0..3 {
            x[a].extend_from_slice(&s[a]);
        }
    }
    if let Some(b) = problem.domain.periodic() {
        // Checked above: only the periodic axes wrap.
        b.wrap(&mut x)?;
    }
    let points: Vec<[f64; 3]> = (0..x[0].len())
        .into_par_iter()
        .map(|i| [x[0][i], x[1][i], x[2][i]])
        .collect();
    drop(x);
    let weight = if at_sources { 2.0 } else { 1.0 };
    let dest = orb_partition(comm, &points, &vec![weight; points.len()])?;
    drop(points);
    let nt = if at_sources { 0 } else { targets.len() };
    let to_s = Migration::new(comm, &dest[nt..])?;
    let to_t = match at_sources {
        true => None,
        false => Some(Migration::new(comm, &dest[..nt])?),
    };
    let to_t = to_t.as_ref().unwrap_or(&to_s);
    let (t, s) = (to_t.particles(comm, targets), to_s.particles(comm, sources));
    let moved = [to_t.traffic(me), to_s.traffic(me)];
    let partition = clock.elapsed().as_secs_f64();
    let mut ev = with_essential_trees::<K, R, C>(comm, backend, method, problem, &t, &s)?;
    let clock = Instant::now();
    let no = ev.outputs.slots().len();
    ev.outputs = ev.outputs.map_slots(|v| to_t.back(comm, &v));
    let bytes = |n: usize, per: usize| (n * per * std::mem::size_of::<R>()) as u64;
    let (tw, sw) = (3 + targets.slots.len(), 3 + sources.slots.len());
    ev.stats.sent_bytes += bytes(moved[0].0, tw) + bytes(moved[1].0, sw) + bytes(moved[0].1, no);
    ev.stats.received_bytes +=
        bytes(moved[0].1, tw) + bytes(moved[1].1, sw) + bytes(moved[0].0, no);
    ev.stats
        .add(Stage::Partition, partition + clock.elapsed().as_secs_f64());
    Ok(ev)
}

/// [`evaluate_distributed`] for particles already in their parts (a
/// simulation that moved them where [`orb_partition`] says and keeps them
/// there between steps): nothing moves but the local essential trees. Any
/// placement gives the same outputs; one with targets of each process
/// near each other sends the least.
pub fn evaluate_partitioned<'a, K, R, C>(
    comm: &C,
    backend: Backend,
    method: &Method,
    problem: impl Into<Problem<'a>>,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Evaluation<R>, Error>
where
    K: Kernel,
    R: Real + Equivalence + Default,
    C: Communicator,
{
    let problem = problem.into();
    let mut lap = Laps::new(None, format!("process {}", comm.rank()));
    agree_on_the_inputs::<K, R, C>(comm, method, &problem, targets, sources)?;
    lap.say("the inputs agreed and checked")?;
    with_essential_trees::<K, R, C>(comm, backend, method, problem, targets, sources)
}

/// The job agreed on and each process's particles checked (the sets
/// made for this kernel, its requirements, the domain's side of a wall),
/// so that a bad one is named by the process that holds it.
fn agree_on_the_inputs<K: Kernel, R: Real, C: Communicator>(
    comm: &C,
    method: &Method,
    problem: &Problem<'_>,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<(), Error> {
    agree_on_the_job::<K, R, C>(comm, method, problem)?;
    let mut checked = check::<K, R>(method, problem, targets, sources).map(|_| ());
    if let (Ok(()), Some(b)) = (&checked, problem.domain.periodic()) {
        // Positions off the box along an open axis, named here (the
        // periodic axes wrap any position).
        checked = inside_open_axes(b, targets).and_then(|_| inside_open_axes(b, sources));
    }
    agree(comm, checked)
}

/// The error of the first point of `p` off `b` along an open axis.
fn inside_open_axes<R: Real>(b: &PeriodicBox, p: &Particles<R>) -> Result<(), Error> {
    for (a, x) in p.positions().iter().enumerate() {
        let (lo, hi) = (b.origin[a], b.origin[a] + b.side);
        let off = |v: &R| !(v.to_f64() >= lo && v.to_f64() <= hi);
        if let Some(i) = (!b.axes[a])
            .then(|| x.par_iter().position_first(off))
            .flatten()
        {
            return Err(b.outside(i, a, x[i].to_f64()));
        }
    }
    Ok(())
}

/// Every process's sources gathered, each process's targets evaluated
/// against them: the direct sum's way.
fn gathered<'a, K, R, C>(
    comm: &C,
    backend: Backend,
    method: &Method,
    problem: Problem<'a>,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Evaluation<R>, Error>
where
    K: Kernel,
    R: Real + Equivalence,
    C: Communicator,
{
    let clock = Instant::now();
    let all = gather_particles(comm, sources)?;
    let exchange = clock.elapsed().as_secs_f64();
    let mut ev = agreed(
        comm,
        evaluate::<K, R>(backend, method, problem, targets, &all),
    )?;
    ev.stats.add(Stage::Exchange, exchange);
    let width = ((3 + sources.slots.len()) * std::mem::size_of::<R>()) as u64;
    let others = (all.len() - sources.len()) as u64;
    ev.stats.sent_bytes += sources.len() as u64 * width * (comm.size() as u64 - 1);
    ev.stats.received_bytes += others * width;
    Ok(ev)
}

/// Each process sends each other its local essential tree and evaluates
/// its targets against its sources and the trees it got.
fn with_essential_trees<'a, K, R, C>(
    comm: &C,
    backend: Backend,
    method: &Method,
    problem: Problem<'a>,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Evaluation<R>, Error>
where
    K: Kernel,
    R: Real + Equivalence + Default,
    C: Communicator,
{
    let Some(how) = Essential::for_method::<K>(method) else {
        return gathered::<K, R, C>(comm, backend, method, problem, targets, sources);
    };
    if comm.size() == 1 {
        // No trees to send, no regions to find (their two passes over the
        // points took 0.011 to 0.018 s of a 0.2 s step at 2^24 on an
        // H200).
        return agreed(
            comm,
            evaluate::<K, R>(backend, method, problem, targets, sources),
        );
    }
    let clock = Instant::now();
    let me = comm.rank() as usize;
    let mut lap = Laps::new(None, format!("process {me}"));
    // On a GPU in free space the own sources are copied there once, for
    // the local essential trees and the evaluation (where each copied them:
    // 0.02 to 0.04 s a step at 2^24 a process with four processes copying),
    // and their box is found there: two processes sharing an H200's host
    // took 0.05 to 0.067 s for the boxes of their targets and sources on
    // the host at 2^24 each (the host's memory, not its cores, the limit).
    let device = resolve(backend);
    // Whether the targets are at the sources' points (a simulation's),
    // found as the copy reads the sources.
    let upload = match &device {
        Ok(Device::Cuda(gpu)) if problem.domain.periodic().is_none() && !sources.is_empty() => {
            DeviceParticles::upload_noting_targets(gpu, sources, targets).map(Some)
        }
        _ => Ok(None),
    };
    let (on_gpu, same) = match agreed(comm, upload)? {
        Some((d, same)) => (Some(d), same),
        None => (None, false),
    };
    let held = match (&on_gpu, &device) {
        (Some(own), Ok(Device::Cuda(gpu))) => {
            own.positions().map(|p| DeviceOctree::span(gpu, refs3(p)))
        }
        _ => None,
    };
    let held = agreed(comm, held.transpose())?;
    lap.say("the own sources' copy and span")?;
    // Targets at the sources' points have the span found on the GPU as
    // their region (on the host: 0.005 to 0.01 s a step at 2^24 targets
    // on an H200's host shared by two processes).
    let at_sources = held.is_some() && same;
    let mine = match held {
        Some(h) if at_sources => h,
        _ => Region::around_in(targets.positions(), Some(&problem.domain)),
    };
    let held = held.unwrap_or_else(|| Region::around(sources.positions()));
    let (regions, everyone) = all_regions(comm, mine, held);
    let cube = shared_cube(&problem.domain, everyone);
    let problem = match (problem.domain.periodic(), cube) {
        (None, Some(c)) => problem.in_cube(c),
        _ => problem,
    };
    lap.say("the regions")?;
    let others = regions
        .iter()
        .enumerate()
        .any(|(q, r)| q != me && !r.is_empty());
    // Split where every process can: the own sources evaluated while the
    // trees are built and exchanged (`overlap`), where some other process
    // has targets (on a GPU, from the own sources' copy there).
    let way = match &device {
        Ok(d @ Device::Cpu) if others => overlap::way::<K, R>(method, &problem, d),
        Ok(d @ Device::Cuda(_)) if others && on_gpu.is_some() => {
            overlap::way::<K, R>(method, &problem, d)
        }
        _ => None,
    };
    // A process without targets has nothing to split (it sends its trees
    // alone).
    let split = every_process(
        comm,
        way.is_some() || targets.is_empty(),
        "the split's agreement",
    );
    // Split on a GPU, the trees are built on a second stream, beside the
    // evaluation's (the own sources' copy made on the first before).
    let tree_device = match (&device, split && way.is_some()) {
        (Ok(Device::Cuda(gpu)), true) => gpu
            .stream()
            .synchronize()
            .map_err(crate::cuda::device::cuda_err("the own sources' copy"))
            .and_then(|_| Gpu::shared_beside())
            .map(Device::Cuda),
        _ => device.clone(),
    };
    // `shared`: where the own part's evaluation cuts the trees from its
    // own source tree, it sends the tree there (or `None`).
    let mut let_and_exchange = |shared: Option<&mpsc::Receiver<_>>| -> Result<Arrivals<R>, Error> {
        let waiting = Instant::now();
        let tree: Option<TreeOrdered<R>> = shared.and_then(|r| r.recv().ok().flatten());
        // The wait is the own part's tree's, booked there (`Stage::Tree`).
        let waited = waiting.elapsed().as_secs_f64();
        lap.say("the own part's source tree")?;
        let built = tree_device
            .clone()
            .and_then(|device| match (device, &tree) {
                (Device::Cuda(gpu), Some(t)) => {
                    essential_sources_from_tree::<K, R>(gpu, sources, t, &regions, me, &how)
                }
                (device, _) => essential_sources_from::<K, R>(
                    device,
                    sources,
                    on_gpu.as_ref(),
                    &regions,
                    me,
                    &how,
                    &problem.domain,
                    cube,
                ),
            });
        drop(tree);
        lap.say("local essential trees")?;
        let (sends, _) = agreed(comm, built)?;
        lap.say("waiting for the others' trees")?;
        let essential = clock.elapsed().as_secs_f64() - waited;
        let clock = Instant::now();
        let (got, sent, received) = exchange::arrivals(comm, &sends, sources)?;
        lap.say("exchange")?;
        Ok(Arrivals {
            got,
            sent,
            received,
            seconds: (essential, clock.elapsed().as_secs_f64()),
        })
    };
    let (ev, arrived) = match way.filter(|_| split) {
        Some(way) => {
            let device = device.clone()?;
            // The exchange's result, and a word that it is there: on a GPU
            // the own part goes on to the arrivals as one evaluation. (The
            // arrivals copied there here, on the trees' stream, while the
            // own part ran, came later than copied by the own part after
            // it: 2^24 gravity sources a part on one H200, the copy done
            // 0.07 to 0.1 s after the trees.)
            let exchanged = OnceLock::new();
            let (done, word) = mpsc::channel::<()>();
            // The own sources' tree, from the own part's FMM (one tree
            // for both: the trees' kernels beside the own part slowed it).
            let (tree, shared) = mpsc::channel::<Option<TreeOrdered<R>>>();
            let own = std::thread::scope(|s| {
                // Dropped with the scope's closure, so that a panic here
                // leaves the own part no word to wait for forever.
                let done = done;
                let (on, way, problem, exchanged) = (device, &way, &problem, &exchanged);
                let resident = on_gpu.as_ref();
                let own = s.spawn(move || {
                    let arrivals = || {
                        // No word: the main thread stopped (its error is
                        // the one reported).
                        let _ = word.recv();
                        match exchanged.get() {
                            Some(Ok(Arrivals { got, .. })) => Ok(got.as_ref()),
                            _ => Err(Error::BadOption(
                                "the local essential trees' exchange did not finish".into(),
                            )),
                        }
                    };
                    let share = |t| {
                        let _ = tree.send(t);
                    };
                    overlap::own_part::<K, R>(
                        on,
                        way,
                        problem,
                        (targets, sources, at_sources),
                        resident,
                        (share, arrivals),
                    )
                });
                let _ = exchanged.set(let_and_exchange(Some(&shared)));
                let _ = done.send(());
                own.join()
            });
            let own = own.unwrap_or_else(|p| std::panic::resume_unwind(p));
            let arrived = exchanged.into_inner().expect("set in the scope")?;
            let more = arrived.got.as_ref();
            let split = own.and_then(|own| {
                overlap::with_arrivals::<K, R>(device, own, &way, &problem, targets, sources, more)
            });
            let evaluated = match split {
                Ok((mut ev, Some(estimate))) => match overlap::achieved(&way, &estimate) {
                    Some(a) => {
                        ev.achieved = Some(a);
                        ev.stats.split = true;
                        Ok(ev)
                    }
                    None => {
                        // Missed at the way kept: every source joined,
                        // the tolerance met as before, not split again.
                        overlap::remember::<K, R>(method, &problem, &device, None, true);
                        if crate::stats::trace() {
                            eprintln!(
                                "[fmm] process {me}: the parts' sum missed the tolerance \
                                 ({:.2e}); joined",
                                estimate.bound()
                            );
                        }
                        let spent = ev.stats;
                        joined_evaluation::<K, R>(
                            backend, method, problem, targets, sources, on_gpu, more,
                        )
                        .map(|mut ev| {
                            ev.stats.absorb_time(&spent);
                            ev
                        })
                    }
                },
                other => other.map(|(mut ev, _)| {
                    ev.stats.split = true;
                    ev
                }),
            };
            lap.say("evaluated in two parts")?;
            (agreed(comm, evaluated)?, arrived)
        }
        None => {
            let arrived = let_and_exchange(None)?;
            let more = arrived.got.as_ref();
            let evaluated =
                joined_evaluation::<K, R>(backend, method, problem, targets, sources, on_gpu, more);
            lap.say("evaluated")?;
            let ev = agreed(comm, evaluated)?;
            if let Ok(d) = &device {
                overlap::remember::<K, R>(method, &problem, d, ev.achieved.as_ref(), false);
            }
            (ev, arrived)
        }
    };
    let mut ev = ev;
    lap.say("waiting for the others' evaluations")?;
    let all_sources = sources.len() + arrived.got.as_ref().map_or(0, |g| g.len());
    let gpu = matches!(device, Ok(Device::Cuda(_)));
    if let Some(key) = search::tolerance_key::<K>(method, &problem, R::NAME == "f32", gpu) {
        // A split evaluation's way is kept, not searched: nothing to share.
        let runs = if split { 0 } else { ev.stats.runs };
        let sizes = (targets.len(), all_sources);
        search::share_the_fastest(comm, &key, sizes, runs, ev.achieved.as_ref());
    }
    let Arrivals {
        sent,
        received,
        seconds: (essential, exchange),
        ..
    } = arrived;
    ev.stats.add(Stage::Essential, essential);
    ev.stats.add(Stage::Exchange, exchange);
    let width = ((3 + sources.slots.len()) * std::mem::size_of::<R>()) as u64;
    ev.stats.sent_bytes += sent as u64 * width;
    ev.stats.received_bytes += received as u64 * width;
    Ok(ev)
}

/// What the local essential trees' exchange brought: the sources the
/// others sent (none where none did), the particles sent and received,
/// and the seconds of the trees and of the exchange.
struct Arrivals<R> {
    got: Option<Particles<R>>,
    sent: usize,
    received: usize,
    seconds: (f64, f64),
}

/// `targets` from `sources` and `more` joined, as one evaluation (on the
/// GPU `own_on_device` the copy of `sources` there).
fn joined_evaluation<K: Kernel, R: Real>(
    backend: Backend,
    method: &Method,
    problem: Problem<'_>,
    targets: &Particles<R>,
    sources: &Particles<R>,
    own_on_device: Option<DeviceParticles<R>>,
    more: Option<&Particles<R>>,
) -> Result<Evaluation<R>, Error> {
    match (more, own_on_device) {
        (Some(more), own) => {
            evaluate_joined::<K, R>(backend, method, problem, targets, (sources, own), more)
        }
        // Nothing came: the own sources from their copy on the device.
        (None, Some(own)) => {
            let none = sources.none_like();
            evaluate_joined::<K, R>(
                backend,
                method,
                problem,
                targets,
                (sources, Some(own)),
                &none,
            )
        }
        (None, None) => evaluate::<K, R>(backend, method, problem, targets, sources),
    }
}

/// Whether `mine` holds on every process of `comm` (a collective call;
/// `what` names it where a process never comes).
fn every_process<C: Communicator>(comm: &C, mine: bool, what: &str) -> bool {
    let mut all = [0i64];
    all_reduce_within(comm, &[mine as i64], &mut all, SystemOperation::min(), what);
    all[0] == 1
}

/// The root cube of every process's trees (see [`Problem::cube`]): one
/// lattice for the cells sent and the trees they arrive in. A periodic
/// box's own; else the cube around every process's points (`everyone`)
/// and a wall's images of them.
fn shared_cube(domain: &Domain, everyone: Region) -> Option<Bounds> {
    if let Some(b) = domain.periodic() {
        return Some(Bounds {
            center: b.center(),
            half: 0.5 * b.side,
        });
    }
    if everyone.is_empty() {
        return None;
    }
    let mut all = everyone;
    if let Some(w) = domain.wall() {
        all.lo[w.axis] = all.lo[w.axis].min(2.0 * w.at - all.hi[w.axis]);
    }
    Some(Bounds::around(&all))
}

/// Every process's region (around its targets), in rank order, and the
/// box around every process's targets and `held` sources.
fn all_regions<C: Communicator>(comm: &C, mine: Region, held: Region) -> (Vec<Region>, Region) {
    let flat = [mine.lo, mine.hi, held.lo, held.hi].concat();
    let mut all = vec![0.0; 12 * comm.size() as usize];
    comm.all_gather_into(&flat[..], &mut all[..]);
    let boxes: Vec<(Region, Region)> = all
        .chunks_exact(12)
        .map(|c| {
            let r = |c: &[f64]| Region {
                lo: [c[0], c[1], c[2]],
                hi: [c[3], c[4], c[5]],
            };
            (r(&c[..6]), r(&c[6..]))
        })
        .collect();
    let everyone = boxes
        .iter()
        .fold(Span::EMPTY, |all, (t, s)| all.join(t).join(s));
    let regions = boxes.into_iter().map(|(t, _)| t).collect();
    (regions, everyone)
}

/// When to partition again, from the work each process measured
/// (yokota2012 section 3.2: weights from the last evaluation's measured
/// work). A simulation keeps its particles in their parts between steps
/// ([`evaluate_partitioned`]); as they move, or as the work per particle
/// changes (a cluster forming), the slowest process falls behind, and
/// past `threshold` the particles are cut again with each one weighted by
/// the seconds its process spent per particle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Balance {
    /// The slowest process's seconds over the mean past which to partition
    /// again.
    pub threshold: f64,
}

impl Default for Balance {
    fn default() -> Self {
        Balance { threshold: 1.2 }
    }
}

impl Balance {
    /// The slowest process's `seconds` over the mean (1: even); a
    /// collective call.
    pub fn imbalance<C: Communicator>(comm: &C, seconds: f64) -> f64 {
        let (mut most, mut sum) = (0.0, 0.0);
        comm.all_reduce_into(&seconds, &mut most, SystemOperation::max());
        comm.all_reduce_into(&seconds, &mut sum, SystemOperation::sum());
        let mean = sum / comm.size() as f64;
        if mean > 0.0 {
            most / mean
        } else {
            1.0
        }
    }

    /// Whether the last evaluation's `seconds` (this process's) call for a
    /// new partition; a collective call.
    pub fn due<C: Communicator>(&self, comm: &C, seconds: f64) -> bool {
        Self::imbalance(comm, seconds) > self.threshold
    }

    /// This process's `n` particles' weights for [`orb_partition`]: its
    /// `seconds` shared evenly (every weight 1 where none were measured).
    pub fn weights(seconds: f64, n: usize) -> Vec<f64> {
        let w = if seconds > 0.0 && n > 0 {
            seconds / n as f64
        } else {
            1.0
        };
        vec![w; n]
    }
}

/// The relative L2 error of `outputs` (this process's, for its
/// `targets`) over every process's targets, estimated on `samples`
/// targets a process against an f64 direct sum over every process's
/// `sources`: the samples are gathered, each process sums its own
/// sources at all of them (on `backend`), and the sums are added up. In
/// free space or over a wall (a periodic box's Ewald sum wants a neutral
/// set on each process: an error says so). A collective call.
pub fn sampled_error<'a, K, R, C>(
    comm: &C,
    backend: Backend,
    problem: impl Into<Problem<'a>>,
    targets: &Particles<R>,
    sources: &Particles<R>,
    outputs: &Outputs<R>,
    samples: usize,
) -> Result<f64, Error>
where
    K: Kernel,
    R: Real + Equivalence,
    C: Communicator,
{
    let problem = problem.into();
    if problem.domain.periodic().is_some() {
        return Err(Error::BadOption(
            "the sampled error over processes is summed in free space or over a wall; in a \
             periodic box, compare with one process's Ewald sum"
                .into(),
        ));
    }
    let idx = reference::sample_indices(targets.len(), samples);
    let mine = targets.to_f64(Some(&idx));
    let all = gather_particles(comm, &mine)?;
    let part = evaluate::<K, f64>(
        backend,
        &Method::direct(),
        problem,
        &all,
        &sources.to_f64(None),
    );
    let part = agreed(comm, part)?;
    // This process's samples start after the lower ranks'.
    let k = idx.len() as i64;
    let mut before = 0i64;
    comm.exclusive_scan_into(&k, &mut before, SystemOperation::sum());
    let before = if comm.rank() == 0 { 0 } else { before as usize };
    let (mut d, mut r) = (0.0, 0.0);
    for (got, slot) in outputs.slots().iter().zip(part.outputs.slots()) {
        let mut sum = vec![0.0; slot.len()];
        comm.all_reduce_into(&slot[..], &mut sum[..], SystemOperation::sum());
        for (j, &i) in idx.iter().enumerate() {
            let want = sum[before + j];
            d += (got[i].to_f64() - want).powi(2);
            r += want * want;
        }
    }
    let mut dr = [0.0f64; 2];
    comm.all_reduce_into(&[d, r][..], &mut dr[..], SystemOperation::sum());
    Ok(if dr[1] > 0.0 {
        (dr[0] / dr[1]).sqrt()
    } else {
        dr[0].sqrt()
    })
}

/// The GPU of this process, from its rank among the processes of its
/// node (`MPI_Comm_split_type` shared): the node's processes take its
/// devices in turn, several to a device where there are more processes
/// than devices (slower, correct; their evaluations then joined, not
/// split beside the exchange: [`Overlap::Gpu`]). `None` where the process sees no
/// device: it runs on the CPU. `FMM_CUDA_DEVICE`, where set, still wins.
/// A collective call; make it before the first GPU evaluation.
pub fn node_device<C: Communicator>(comm: &C) -> Result<Option<usize>, Error> {
    let node = comm.split_shared(comm.rank());
    let count = crate::cuda::Gpu::count();
    if count == 0 {
        return Ok(None);
    }
    let ordinal = node.rank() as usize % count;
    // More processes on the node than GPUs: some share one, and every
    // process of the node evaluates joined (`Overlap::Gpu`).
    overlap::note_shared_gpu(node.size() as usize > count);
    crate::cuda::Gpu::choose(ordinal)?;
    Ok(Some(ordinal))
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
    // The first collective of a call: where a process that never comes
    // (it failed before the call, or took another way) is found.
    let mut lo_hi = [0i64; 2];
    all_reduce_within(
        comm,
        &[mine, -mine],
        &mut lo_hi,
        SystemOperation::min(),
        "the start of an evaluation",
    );
    let (lo, hi) = (lo_hi[0], -lo_hi[1]);
    if lo != hi {
        return Err(Error::Mismatch(
            "the processes were given different kernels, precisions, methods, parameters or domains"
                .into(),
        ));
    }
    Ok(())
}

/// Seconds a process waits at the start of a collective call for the
/// others (`FMM_MPI_TIMEOUT`, default 600).
fn timeout() -> f64 {
    std::env::var("FMM_MPI_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|t: &f64| *t > 0.0)
        .unwrap_or(600.0)
}

/// An all-reduce of `send` into `recv` that waits at most [`timeout`]
/// for the other processes (a nonblocking all-reduce, polled). Past it,
/// the process says where it waited and aborts the job: a collective
/// cannot be called off, and every process waiting on one that will
/// never come would hang.
fn all_reduce_within<C: Communicator>(
    comm: &C,
    send: &[i64],
    recv: &mut [i64],
    op: SystemOperation,
    at: &str,
) {
    let (limit, start) = (timeout(), Instant::now());
    mpi::request::scope(|scope| {
        let mut request = comm.immediate_all_reduce_into(scope, send, recv, op);
        loop {
            match request.test() {
                Ok(_) => return,
                Err(r) => request = r,
            }
            if start.elapsed().as_secs_f64() > limit {
                eprintln!(
                    "process {}: waited {limit} s at {at} for processes that did not come \
                     (one failed before the call, or called something else); aborting the job \
                     (FMM_MPI_TIMEOUT sets the wait)",
                    comm.rank()
                );
                comm.abort(75);
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    });
}

/// Whether two particle sets sit at the same points (compared on all
/// cores; an evaluation on the GPU finds it in the sources' copy instead,
/// [`DeviceParticles::upload_noting_targets`]).
fn same_points<R: Real>(a: &Particles<R>, b: &Particles<R>) -> bool {
    a.len() == b.len()
        && a.positions().iter().zip(b.positions()).all(|(x, y)| {
            std::ptr::eq(*x, y)
                || x.par_chunks(1 << 16)
                    .zip(y.par_chunks(1 << 16))
                    .all(|(p, q)| p == q)
        })
}

/// `mine` (this process's result) agreed on by every process of `comm`: where
/// any failed, every process returns the error of the lowest-ranked one
/// that did, naming it ([`Error::Distributed`]). Put a process's own setup
/// (its particles made, read or checked) through it before a collective
/// call, so that a failure there is said on every process instead of
/// leaving the others waiting. A collective call.
pub fn agreed<T, C: Communicator>(comm: &C, mine: Result<T, Error>) -> Result<T, Error> {
    let (verdict, value) = match mine {
        Ok(v) => (Ok(()), Some(v)),
        Err(e) => (Err(e), None),
    };
    agree(comm, verdict)?;
    Ok(value.expect("agreed: this process succeeded"))
}

/// Every process learns whether any failed; where some did, each returns
/// the error of the lowest-ranked one that did, naming it.
fn agree<C: Communicator>(comm: &C, mine: Result<(), Error>) -> Result<(), Error> {
    let me = comm.rank();
    let failed = [if mine.is_err() { me as i64 } else { i64::MAX }];
    let mut first = [0i64];
    all_reduce_within(
        comm,
        &failed,
        &mut first,
        SystemOperation::min(),
        "an agreement",
    );
    if first[0] == i64::MAX {
        return Ok(());
    }
    let first = first[0] as Count;
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

/// Every process's particles, in rank order (an all-gather of the
/// positions and of each field's slots).
fn gather_particles<R: Real + Equivalence, C: Communicator>(
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
