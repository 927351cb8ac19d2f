//! Sources that come in two lots, at the same targets on one GPU: a
//! process's own sources, there now, and what the other processes' local
//! essential trees bring later (yokota2012 section 3.4: the local work
//! hides the communication). The evaluation is linear in the sources, so
//! the outputs are those of both lots joined, to rounding.
//!
//! The FMM at fixed settings in free space, in the problem's cube, runs
//! both lots as one evaluation ([`fmm::cuda::run_in_two_lots`]): the
//! second lot's cells added to the same target tree's locals before one
//! downward pass, where two evaluations one after the other took a second
//! target tree and downward pass (one H200, 2^24 gravity targets and 3.4
//! million arrivals at p 6: 0.019 s of trees and 0.010 s of L2L and L2P
//! of a 0.047 s second evaluation). On the process's GPU the second lot's
//! tree, traversal, upward pass and M2L run on its second stream
//! ([`Gpu::shared_beside`]) beside the first lot's near field: a second
//! lot copied there (not on the first stream, which the near field
//! holds) goes on at once. Every other method runs the two lots one
//! after the other and adds the outputs.

use super::{check_resident, evaluate_resident, ResidentEvaluation};
use crate::accuracy::floor::Mac;
use crate::cuda::resident::{DeviceOutputs, DeviceParticles};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::far;
use crate::kernel::Kernel;
use crate::methods::fmm::{self, Accuracy, FmmOptions, Plan, Settings};
use crate::methods::Method;
use crate::particles::Role;
use crate::problem::Problem;
use crate::real::Real;
use crate::stats::{Clock, Stats};
use crate::tree::TreeOrdered;

/// Evaluates kernel `K` at `targets` from the sources `first` and those
/// `later` gives (none where it gives `None`) on `gpu`, leaving the
/// outputs there: `later` is called once the first lot's work is on the
/// GPU, and may wait (for an exchange between processes). The FMM at
/// fixed settings in free space in a cube given with the problem
/// ([`Problem::in_cube`], which should hold both lots) evaluates both as
/// one; any other method evaluates `first`, then the second lot, and
/// adds the outputs. Returns the evaluation and the second lot.
pub fn evaluate_resident_in_two_lots<'a, K: Kernel, R: Real>(
    gpu: &Gpu,
    method: &Method,
    problem: impl Into<Problem<'a>>,
    targets: &DeviceParticles<R>,
    first: &DeviceParticles<R>,
    later: impl FnOnce() -> Result<Option<DeviceParticles<R>>, Error>,
) -> Result<(ResidentEvaluation<R>, Option<DeviceParticles<R>>), Error> {
    evaluate_resident_sharing_the_tree::<K, R>(
        gpu,
        method,
        problem,
        (targets, first),
        |_| (),
        later,
    )
}

/// [`evaluate_resident_in_two_lots`], the first lot's source tree handed
/// to `share` as soon as it is built (a copy, the sources in its order,
/// done on the GPU: a distributed evaluation cuts its local essential
/// trees from it, one tree built where two were), or `None` where the
/// evaluation builds none to share (any method but the FMM of both lots
/// as one, or an error before): `share` is called once in any case,
/// before `later`.
pub fn evaluate_resident_sharing_the_tree<'a, K: Kernel, R: Real>(
    gpu: &Gpu,
    method: &Method,
    problem: impl Into<Problem<'a>>,
    (targets, first): (&DeviceParticles<R>, &DeviceParticles<R>),
    share: impl FnOnce(Option<TreeOrdered<R>>),
    later: impl FnOnce() -> Result<Option<DeviceParticles<R>>, Error>,
) -> Result<(ResidentEvaluation<R>, Option<DeviceParticles<R>>), Error> {
    let problem = problem.into();
    let one = match method {
        Method::Fmm(o) => match o.accuracy {
            Accuracy::Fixed { p, theta } => Some((o, Settings { p, theta })),
            Accuracy::Tolerance(_) => None,
        },
        _ => None,
    };
    let free = problem.domain.periodic().is_none() && problem.domain.wall().is_none();
    let one = one.filter(|_| free && problem.cube.is_some());
    let some = !targets.is_empty() && !first.is_empty() && K::def().n_outputs() > 0;
    let Some((o, settings)) = one.filter(|_| some) else {
        share(None);
        let mut ev = evaluate_resident::<K, R>(gpu, method, problem, targets, first)?;
        let more = later()?;
        if let Some(m) = more.as_ref().filter(|m| !m.is_empty()) {
            // Targets at the first lot's points have them as their own.
            let placed = targets.placed_if_at(gpu, first)?;
            let at = placed.as_ref().unwrap_or(targets);
            let part = evaluate_resident::<K, R>(gpu, method, problem, at, m)?;
            ev.outputs.add(gpu, &part.outputs)?;
            ev.stats.add_part(&part.stats);
        }
        return Ok((ev, more));
    };
    // Called once: with the tree where the FMM shares it, else with
    // `None` once it has stopped.
    let share = std::cell::Cell::new(Some(share));
    let shared = || share.take().map(|f| f(None));
    let lots = fmm_in_two_lots::<K, R>(
        gpu,
        (o, settings),
        &problem,
        (targets, first),
        &share,
        later,
    );
    shared();
    lots
}

/// The FMM of both lots as one ([`evaluate_resident_sharing_the_tree`]).
fn fmm_in_two_lots<K: Kernel, R: Real>(
    gpu: &Gpu,
    (o, settings): (&FmmOptions, Settings),
    problem: &Problem<'_>,
    (targets, first): (&DeviceParticles<R>, &DeviceParticles<R>),
    share: &std::cell::Cell<Option<impl FnOnce(Option<TreeOrdered<R>>)>>,
    later: impl FnOnce() -> Result<Option<DeviceParticles<R>>, Error>,
) -> Result<(ResidentEvaluation<R>, Option<DeviceParticles<R>>), Error> {
    let method = Method::Fmm(o.clone());
    let params = check_resident::<K, R>(&method, problem, targets, first)?;
    let far = far::plan::<K>(o.far_field, far::Tree::Fmm)?;
    let plan = Plan {
        params: &params,
        far: &far,
        settings,
        opts: o,
        domain: &problem.domain,
        cube: problem.cube,
        near: Mac::FREE.near.max(o.near),
    };
    let share: fmm::cuda::Share<'_, R> = Box::new(|t| {
        if let Some(f) = share.take() {
            f(t)
        }
    });
    let later: fmm::cuda::Later<'_, R> = Box::new(|| {
        let more = later()?;
        if let Some(m) = &more {
            m.check_for::<K>(Role::Sources)?;
        }
        Ok(more)
    });
    let mut stats = Stats::default();
    let mut clock = Clock::gpu(&mut stats, gpu);
    let run = match &far {
        far::Plan::Monopole { .. } => unreachable!("the FMM has no monopole"),
        far::Plan::Laplace { .. } => fmm::cuda::run_in_two_lots::<K, R>,
        far::Plan::Nodes(_) => fmm::cuda::nodes::run_in_two_lots::<K, R>,
    };
    let lots = run(gpu, &plan, targets, first, (share, later), &mut clock)?;
    stats.runs = 1;
    let (more, order) = (lots.more, Some(lots.order));
    let ev = ResidentEvaluation {
        outputs: DeviceOutputs::new::<K>(targets.len(), lots.outputs),
        stats,
        achieved: None,
        target_order: order,
    };
    Ok((ev, more))
}
