//! A process's own sources evaluated while its local essential trees are
//! built and exchanged (yokota2012 section 3.4: the local work hides the
//! communication), then the sources the others sent, at the same
//! targets.
//!
//! The evaluation is linear in the sources, so the two parts add up to
//! the evaluation of all of them. On a GPU the FMM takes them as one
//! evaluation in two lots ([`evaluate_resident_sharing_the_tree`]): the
//! own sources' tree (the targets' too, and the local essential trees are
//! cut from it), upward pass, M2L and P2P while the trees are exchanged,
//! then the arrivals' tree in the same root cube,
//! their M2L into the same locals and their P2P, and one downward pass;
//! two evaluations one after the other took a second target tree and
//! downward pass (0.019 and 0.010 s of a 0.047 s second evaluation at
//! 2^24 gravity targets on an H200). Elsewhere (the CPU, the treecode)
//! the two parts are two evaluations and their outputs are added. On 4
//! H200s gravity's LET and exchange took 0.18 s of a 0.44 s step at 2^24
//! particles a process, its evaluation 0.25 s, one after the other
//! (docs/BENCHMARKS.md, 2026-11-28 fourth entry).
//!
//! Both parts run at fixed settings (an evaluation at a tolerance
//! searches, and its error is the sum's, not a part's): a method asked
//! at fixed settings runs as asked; one asked at a tolerance runs at the
//! way the last evaluation of the same problem met it by with every
//! source joined ([`remember`]: the order, the MAC, the far field and
//! the near field it widened for a kernel's smoothing), and the error of
//! the sum is estimated against the f64 sums over both sets of sources
//! at sampled targets. Where the estimate is within the tolerance and
//! only its safe side past it, the error is estimated again on those
//! targets and four times as many more ([`larger_sample`]: velocity + stretching at 1e-4,
//! met joined at 9.2e-5 on the safe side, read 1.07e-4 in parts on one
//! H200 on another 64 targets). Where that misses too the sources are
//! joined and the tolerance met as before, and the problem is not split
//! again in this process.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;

use crate::accuracy::{cpu_error_samples, gpu_error_samples, Achieved, ProblemKey};
use crate::backend::Device;
use crate::cuda::laps::Laps;
use crate::cuda::resident::{DeviceOutputs, DeviceParticles};
use crate::cuda::transfer::HostOutputs;
use crate::cuda::Gpu;
use crate::domain::Domain;
use crate::error::Error;
use crate::evaluate::two_lots::evaluate_resident_sharing_the_tree;
use crate::evaluate::{evaluate_on, problem_key, Evaluation, Reference};
use crate::far::FarField;
use crate::kernel::Kernel;
use crate::methods::fmm::cuda::beside_of;
use crate::methods::fmm::cuda::estimate::{Along, Estimator};
use crate::methods::fmm::{Accuracy, FmmOptions, Settings};
use crate::methods::{Method, TreeOptions};
use crate::particles::Particles;
use crate::problem::Problem;
use crate::real::Real;
use crate::reference::sample::Sampled;
use crate::reference::Estimate;
use crate::stats::{Stage, Stats};
use crate::tree::TreeOrdered;

/// Where a process evaluates its own sources while its local essential
/// trees are built and exchanged ([`set_overlap`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// On a GPU of the process's own in free space (the default): the
    /// GPU evaluates while the trees for the others are cut from its own
    /// sources' tree and MPI moves them, the FMM as one evaluation in two
    /// lots. One H200 playing process 0 (`overlap_bench`, 2^24 gravity
    /// particles a part, p 6, theta 0.7, 2026-11-29) took 0.206, 0.226 to
    /// 0.232 and 0.252 s a step in two lots against 0.245, 0.257 to 0.264
    /// and 0.284 s joined at 2, 4 and 8 parts (0.184 to 0.197 s alone),
    /// before the exchange, which only the lots hide; velocity +
    /// stretching 1.125 s against 1.150 s at 4 parts. On the
    /// CPU both parts would take the same cores; on a GPU that several
    /// processes share ([`node_device`](super::node_device) found more
    /// processes than GPUs on the node) the others' work fills it while
    /// the trees are built: 2 processes sharing one H200 took 0.674 s a
    /// step both ways (gravity at 1e-4, 2^24 particles each), and 2 and 4
    /// processes 0.816 and 1.381 s in two evaluations against 0.747 and
    /// 1.099 s joined before, so it is joined there unless `Always` is
    /// asked.
    Gpu,
    /// On either device, on the CPU over a wall too (what the tests run
    /// the split evaluation by on machines without a GPU); never in a
    /// periodic box, where a part of a neutral cell is not neutral.
    Always,
    /// Never: the sources joined, one evaluation after the exchange.
    Never,
}

static OVERLAP: AtomicU8 = AtomicU8::new(0);

/// Whether this process's GPU is shared with other processes of its node
/// (set by [`node_device`](super::node_device)).
static SHARED_GPU: AtomicBool = AtomicBool::new(false);

/// Notes whether this process's GPU is shared by other processes.
pub(super) fn note_shared_gpu(shared: bool) {
    SHARED_GPU.store(shared, Ordering::Relaxed);
}

/// Sets where this process overlaps (every process of a job alike: the
/// processes agree to split only where all of them do).
pub fn set_overlap(o: Overlap) {
    let v = match o {
        Overlap::Gpu => 0,
        Overlap::Always => 1,
        Overlap::Never => 2,
    };
    OVERLAP.store(v, Ordering::Relaxed);
}

/// Where this process overlaps ([`set_overlap`]).
pub fn overlap() -> Overlap {
    match OVERLAP.load(Ordering::Relaxed) {
        0 => Overlap::Gpu,
        1 => Overlap::Always,
        _ => Overlap::Never,
    }
}

/// Whether an evaluation on `device` in `domain` splits. On the GPU in
/// free space alone: the own sources are on the device there already
/// (the local essential trees' copy), and the reference at the samples
/// is the free-space sum.
fn splits_on(device: &Device<'_>, domain: &Domain) -> bool {
    let cuda = matches!(device, Device::Cuda(_));
    splits(overlap(), cuda, SHARED_GPU.load(Ordering::Relaxed), domain)
}

/// [`splits_on`] by what it reads: the overlap asked, whether the device
/// is a GPU and whether other processes share it.
fn splits(o: Overlap, cuda: bool, shared: bool, domain: &Domain) -> bool {
    match (o, cuda) {
        (Overlap::Never, _) => false,
        (Overlap::Gpu, true) => !shared && matches!(domain, Domain::FreeSpace),
        (Overlap::Always, true) => matches!(domain, Domain::FreeSpace),
        // A part of a periodic box's sources is not neutral where the
        // whole is (its lattice sum diverges).
        (Overlap::Always, false) => domain.periodic().is_none(),
        (Overlap::Gpu, false) => false,
    }
}

/// How both parts are evaluated: a method at fixed settings, and the
/// tolerance their sum is to meet (the asked method's).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Way {
    pub method: Method,
    pub tol: Option<f64>,
}

/// A problem's way, by the method asked and the problem's key.
type Kept = (Method, ProblemKey, Option<Method>);

/// The ways the last joined evaluations met their tolerances by (`None`:
/// the split missed its tolerance once; not split again).
static WAYS: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// Ways kept at most (the oldest dropped).
const KEPT: usize = 64;

/// The tolerance of `method` and the key its ways are kept by.
fn tolerance_of<K: Kernel>(
    method: &Method,
    problem: &Problem<'_>,
    f32: bool,
    gpu: bool,
) -> Option<(f64, ProblemKey)> {
    let tol = match method {
        Method::Tolerance(tol) => *tol,
        Method::Fmm(FmmOptions {
            accuracy: Accuracy::Tolerance(tol),
            ..
        }) => *tol,
        _ => return None,
    };
    Some((tol, problem_key::<K>(problem, tol, f32, gpu)))
}

/// The way this process would split `method` by on `device` (`None`:
/// the sources joined): a method at fixed settings as asked (the direct
/// sum gathers every source: never here), a tolerance by the way kept
/// for the problem.
pub(super) fn way<K: Kernel, R: Real>(
    method: &Method,
    problem: &Problem<'_>,
    device: &Device<'_>,
) -> Option<Way> {
    if !splits_on(device, &problem.domain) {
        return None;
    }
    let gpu = matches!(device, Device::Cuda(_));
    let Some((tol, key)) = tolerance_of::<K>(method, problem, R::NAME == "f32", gpu) else {
        return match method {
            Method::Treecode(_) | Method::Fmm(_) => Some(Way {
                method: method.clone(),
                tol: None,
            }),
            _ => None,
        };
    };
    if matches!(problem.domain, Domain::Wall(_)) {
        // The reference at the samples would need the images.
        return None;
    }
    let kept = WAYS.lock().unwrap_or_else(|e| e.into_inner());
    let (_, _, way) = kept.iter().find(|(m, k, _)| m == method && *k == key)?;
    Some(Way {
        method: way.clone()?,
        tol: Some(tol),
    })
}

/// Keeps the way a joined evaluation of `method` met its tolerance by
/// (`achieved`), for the next evaluation to split by; `missed`: the split
/// missed it, so the problem is not split again.
pub(super) fn remember<K: Kernel, R: Real>(
    method: &Method,
    problem: &Problem<'_>,
    device: &Device<'_>,
    achieved: Option<&Achieved>,
    missed: bool,
) {
    if !splits_on(device, &problem.domain) {
        return;
    }
    let gpu = matches!(device, Device::Cuda(_));
    let Some((_, key)) = tolerance_of::<K>(method, problem, R::NAME == "f32", gpu) else {
        return;
    };
    let mut kept = WAYS.lock().unwrap_or_else(|e| e.into_inner());
    let before = kept.iter().position(|(m, k, _)| m == method && *k == key);
    if before.is_some_and(|i| kept[i].2.is_none()) {
        // Missed once: stays joined.
        return;
    }
    let way = if missed {
        None
    } else {
        match achieved.and_then(|a| fixed(method, a)) {
            Some(w) => Some(w),
            None => return,
        }
    };
    if let Some(i) = before {
        kept.remove(i);
    }
    if kept.len() >= KEPT {
        kept.remove(0);
    }
    kept.push((method.clone(), key, way));
}

/// The method at fixed settings that `achieved` met `asked`'s tolerance by.
fn fixed(asked: &Method, a: &Achieved) -> Option<Method> {
    let Settings { p, theta } = a.settings;
    match a.method {
        "fmm" => {
            let base = match asked {
                Method::Fmm(o) => o.clone(),
                _ => FmmOptions::tolerance(a.tolerance),
            };
            Some(Method::Fmm(FmmOptions {
                accuracy: Accuracy::Fixed { p, theta },
                far_field: a.far_field,
                near: a.near,
                ..base
            }))
        }
        "treecode" => Some(Method::Treecode(TreeOptions {
            theta,
            far_field: FarField::Monopole,
            ..TreeOptions::default()
        })),
        "direct" => Some(Method::Direct(Default::default())),
        _ => None,
    }
}

/// How many times as many more targets the error of a split's sum is
/// estimated on, with the first sample's, where that put it within the
/// tolerance but its safe side past it ([`larger_sample`]).
const LARGER_SAMPLE: usize = 4;

/// The targets to add to a split's sum's error sample, where
/// `estimate` misses `way`'s tolerance by its margin alone: sampled (not
/// every target), the estimate within the tolerance, its safe side
/// ([`Estimate::bound`]) past it. The way a split runs by is the
/// cheapest that met the tolerance joined, on another sample of
/// targets, so its safe side sits near the tolerance and a second sample
/// reads past it about as often as under: velocity + stretching at 1e-4
/// met joined at 9.2e-5 read 1.07e-4 split (2^24 particles a process, 64
/// targets, one H200). Five times the targets (the first sample's kept:
/// a target the error gathers at stays in) narrow the margin by more than
/// half (the bound's standard errors) and, where they meet the
/// tolerance, keep the split for a few f64 sums at the samples (256
/// targets' sums of velocity + stretching over 10^7 sources: 0.05 s),
/// not a joined evaluation again (1.15 s at 4 parts) and every later
/// step joined.
fn larger_sample(way: &Way, estimate: &Estimate) -> Option<usize> {
    let tol = way.tol?;
    let sampled = estimate.samples > 0;
    (sampled && estimate.value <= tol && estimate.bound() > tol)
        .then_some(LARGER_SAMPLE * estimate.samples)
}

/// The error of a split's sum: on `first` targets (`sampled_on(n)`: the
/// outputs at `n` sampled targets beside their references), and where
/// that misses by its margin alone ([`larger_sample`]) on those and
/// [`LARGER_SAMPLE`] times as many more, pooled (so that a target the
/// first sample found the error at stays in).
fn estimated(
    way: &Way,
    first: usize,
    sampled_on: impl Fn(usize) -> Result<Sampled, Error>,
) -> Result<Estimate, Error> {
    let sample = sampled_on(first)?;
    let e = sample.estimate();
    let Some(more) = larger_sample(way, &e) else {
        return Ok(e);
    };
    let pooled = sample.pooled(sampled_on(more)?).estimate();
    if crate::stats::trace() {
        eprintln!(
            "[fmm] the parts' sum: {:.2e} on {} targets, past the tolerance on the safe side; \
             {:.2e} on {} more with them",
            e.bound(),
            e.samples,
            pooled.bound(),
            more
        );
    }
    Ok(pooled)
}

/// What the own sources' part leaves for the arrivals' part (one value
/// an evaluation, moved once: its size is no matter).
#[allow(clippy::large_enum_variant)]
pub(super) enum Own<R> {
    /// Evaluated on the host's particles (the CPU).
    Host(Evaluation<R>),
    /// On the GPU, both parts done (the sources the others sent there
    /// too): the outputs kept there, and where a tolerance was asked the
    /// error of the sum estimated against the f64 sums over every source
    /// at sampled targets.
    Device {
        gpu: &'static Gpu,
        outputs: DeviceOutputs<R>,
        /// The host's arrays for them, made while the GPU evaluated.
        host: HostOutputs<R>,
        stats: Stats,
        estimate: Option<Estimate>,
    },
}

/// The own sources' part: `targets` from `sources` (on the GPU, their
/// copy `resident`) by `way`. Makes no MPI call: it runs beside the
/// exchange. On the GPU it goes on to the sources the others sent, which
/// `arrivals` waits for (`None`: none came), as one evaluation, its own
/// sources' tree handed to `share` once built for the local essential
/// trees (`None` where there is none: `share` is called once in any
/// case, before `arrivals`)
/// ([`evaluate_resident_sharing_the_tree`]); the targets at the sources'
/// points where `at_sources` says they are there (one tree for both).
pub(super) fn own_part<'p, K: Kernel, R: Real>(
    device: Device<'static>,
    way: &Way,
    problem: &Problem<'_>,
    (targets, sources, at_sources): (&Particles<R>, &Particles<R>, bool),
    resident: Option<&DeviceParticles<R>>,
    (share, arrivals): (
        impl FnOnce(Option<TreeOrdered<R>>),
        impl FnOnce() -> Result<Option<&'p Particles<R>>, Error>,
    ),
) -> Result<Own<R>, Error> {
    let (Device::Cuda(gpu), Some(src)) = (device, resident) else {
        share(None);
        return evaluate_on::<K, R>(device, &way.method, *problem, targets, sources).map(Own::Host);
    };
    let mut lap = Laps::new(Some(gpu), "own sources' part");
    let host = Gpu::host_outputs_ahead::<R>(K::def().n_outputs(), targets.len());
    let clock = Instant::now();
    let share = std::cell::Cell::new(Some(share));
    let shared = |t| share.take().map(|f| f(t));
    let tgt = if at_sources {
        DeviceParticles::targets_at_sources(gpu, targets)
    } else {
        DeviceParticles::upload(gpu, targets)
    };
    let tgt = tgt.inspect_err(|_| {
        shared(None);
    })?;
    let upload = clock.elapsed().as_secs_f64();
    // The arrivals' copy (after the wait, which the evaluation does not
    // book), booked as the upload.
    let copy = std::cell::Cell::new(0.0);
    // The arrivals copied on the GPU's second stream, where the FMM goes
    // on with them while its first lot's near field runs on the first
    // (`evaluate_resident_sharing_the_tree`).
    let on = beside_of(gpu).unwrap_or(gpu);
    let mut waiting = Laps::new(None, "own sources' part");
    let later = || -> Result<Option<DeviceParticles<R>>, Error> {
        let more = arrivals()?.filter(|m| !m.is_empty());
        waiting.say("the others' sources here")?;
        let clock = Instant::now();
        let up = more.map(|m| DeviceParticles::upload(on, m)).transpose();
        on.stream()
            .synchronize()
            .map_err(crate::cuda::device::cuda_err("the arrivals' copy"))?;
        copy.set(clock.elapsed().as_secs_f64());
        up
    };
    let (ev, more) = evaluate_resident_sharing_the_tree::<K, R>(
        gpu,
        &way.method,
        *problem,
        (&tgt, src),
        |t| {
            shared(t);
        },
        later,
    )?;
    lap.say("evaluated")?;
    let mut stats = ev.stats;
    stats.add(Stage::Upload, upload + copy.get());
    let clock = Instant::now();
    // The outputs at `samples` targets, beside the f64 sums over both
    // sets of sources (not joined).
    let sampled_on = |samples: usize| -> Result<Sampled, Error> {
        let along = ev
            .target_order
            .as_ref()
            .map_or(Along::Nothing, Along::Order);
        let mut r = Estimator::<K, R>::new(gpu, problem.params, None, &tgt, src, samples, along)?;
        if let Some(m) = &more {
            r.add_sources(gpu, problem.params, m)?;
        }
        r.sampled(gpu, ev.outputs.slots())
    };
    let estimate = match way.tol {
        Some(_) => Some(estimated(way, gpu_error_samples(src.len()), sampled_on)?),
        None => None,
    };
    stats.add(Stage::ErrorEstimate, clock.elapsed().as_secs_f64());
    lap.say("the sum's error")?;
    Ok(Own::Device {
        gpu,
        outputs: ev.outputs,
        host,
        stats,
        estimate,
    })
}

/// The arrivals' part added to the own part's outputs: the evaluation of
/// `targets` from `sources` and `more` together, and where a tolerance
/// was asked the error of the sum estimated against the f64 sums over
/// both at sampled targets.
pub(super) fn with_arrivals<K: Kernel, R: Real>(
    device: Device<'static>,
    own: Own<R>,
    way: &Way,
    problem: &Problem<'_>,
    targets: &Particles<R>,
    sources: &Particles<R>,
    more: Option<&Particles<R>>,
) -> Result<(Evaluation<R>, Option<Estimate>), Error> {
    let more = more.filter(|m| !m.is_empty());
    match own {
        Own::Host(mut ev) => {
            if let Some(more) = more {
                let part = evaluate_on::<K, R>(device, &way.method, *problem, targets, more)?;
                let mut theirs = part.outputs.slots().iter();
                ev.outputs = ev.outputs.map_slots(|mut a| {
                    let b = theirs.next().expect("one kernel's outputs");
                    a.par_iter_mut().zip(b).for_each(|(x, &y)| *x += y);
                    a
                });
                ev.stats.add_part(&part.stats);
            }
            let estimate = match way.tol {
                Some(tol) => {
                    let clock = Instant::now();
                    let joined;
                    let all = match more {
                        Some(m) => {
                            joined = crate::memory::joined(sources, m);
                            &joined
                        }
                        None => sources,
                    };
                    let sampled_on = |samples| {
                        Reference::<K, R>::with_samples(problem, targets, all, tol, Some(samples))
                            .map(|r| r.sampled(&ev.outputs))
                    };
                    let first = cpu_error_samples(all.len());
                    let e = estimated(way, first, sampled_on)?;
                    ev.stats
                        .add(Stage::ErrorEstimate, clock.elapsed().as_secs_f64());
                    Some(e)
                }
                None => None,
            };
            Ok((ev, estimate))
        }
        Own::Device {
            gpu,
            outputs,
            host,
            mut stats,
            estimate,
        } => {
            let mut lap = Laps::new(Some(gpu), "both parts evaluated");
            let clock = Instant::now();
            let out = outputs.download_to(gpu, host.take())?;
            stats.add(Stage::Download, clock.elapsed().as_secs_f64());
            lap.say("the outputs back")?;
            let ev = Evaluation {
                outputs: out,
                stats,
                achieved: None,
                device: Device::Cuda(gpu).to_string(),
            };
            Ok((ev, estimate))
        }
    }
}

/// What the split met: `way`'s settings and the estimate of the sum's
/// error, where it is within the tolerance asked (`None`: missed).
pub(super) fn achieved(way: &Way, estimate: &Estimate) -> Option<Achieved> {
    let tol = way.tol?;
    let e = estimate.bound();
    if e.is_nan() || e > tol {
        return None;
    }
    let (method, settings, far_field, near) = match &way.method {
        Method::Fmm(o) => match o.accuracy {
            Accuracy::Fixed { p, theta } => ("fmm", Settings { p, theta }, o.far_field, o.near),
            Accuracy::Tolerance(_) => return None,
        },
        Method::Treecode(o) => (
            "treecode",
            Settings {
                p: 0,
                theta: o.theta,
            },
            FarField::Monopole,
            0.0,
        ),
        Method::Direct(_) => ("direct", Settings { p: 0, theta: 0.0 }, FarField::Auto, 0.0),
        Method::Tolerance(_) => return None,
    };
    Some(Achieved {
        tolerance: tol,
        method,
        settings,
        estimated_error: e,
        samples: estimate.samples,
        far_field,
        near,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::PeriodicBox;
    use crate::kernels::Gravity;

    #[test]
    fn a_tolerance_splits_by_the_way_it_was_met_until_the_sum_misses() {
        set_overlap(Overlap::Always);
        let cpu = Device::Cpu;
        let params = [0.0];
        let problem = Problem::new(&params);
        let method = Method::fmm_tolerance(1e-5);
        assert_eq!(
            way::<Gravity, f64>(&method, &problem, &cpu),
            None,
            "none kept yet"
        );
        let met = Achieved {
            tolerance: 1e-5,
            method: "fmm",
            settings: Settings { p: 7, theta: 0.5 },
            estimated_error: 8e-6,
            samples: 64,
            far_field: FarField::Laplace,
            near: 0.02,
        };
        remember::<Gravity, f64>(&method, &problem, &cpu, Some(&met), false);
        let w = way::<Gravity, f64>(&method, &problem, &cpu).expect("kept");
        let fixed = FmmOptions {
            accuracy: Accuracy::Fixed { p: 7, theta: 0.5 },
            far_field: FarField::Laplace,
            near: 0.02,
            ..FmmOptions::tolerance(1e-5)
        };
        assert_eq!(
            w,
            Way {
                method: Method::Fmm(fixed),
                tol: Some(1e-5)
            }
        );
        // Another problem (f32 particles, another tolerance) has its own.
        assert_eq!(way::<Gravity, f32>(&method, &problem, &cpu), None);
        let other = Method::fmm_tolerance(1e-6);
        assert_eq!(way::<Gravity, f64>(&other, &problem, &cpu), None);
        // The sum's estimate, on the safe side, against the tolerance.
        let within = Estimate {
            value: 5e-6,
            standard_error: 1e-7,
            samples: 64,
        };
        let a = achieved(&w, &within).expect("met");
        assert_eq!(
            (a.method, a.settings, a.far_field),
            ("fmm", met.settings, met.far_field)
        );
        assert!(a.estimated_error >= 5e-6 && a.estimated_error <= 1e-5);
        assert_eq!(a.near, 0.02, "the near field the tolerance took");
        let over = Estimate {
            value: 9.5e-6,
            standard_error: 2e-7,
            samples: 64,
        };
        assert_eq!(
            achieved(&w, &over),
            None,
            "9.5e-6 is 1.07e-5 on the safe side"
        );
        // Missed: joined from then on, whatever is met joined later.
        remember::<Gravity, f64>(&method, &problem, &cpu, None, true);
        assert_eq!(way::<Gravity, f64>(&method, &problem, &cpu), None);
        remember::<Gravity, f64>(&method, &problem, &cpu, Some(&met), false);
        assert_eq!(way::<Gravity, f64>(&method, &problem, &cpu), None);
        // Fixed settings split as asked; the direct sum, and anything in
        // a periodic box on the CPU, never.
        let fmm = Method::fmm(5, 0.5);
        let w = way::<Gravity, f64>(&fmm, &problem, &cpu).expect("split");
        assert_eq!((w.method, w.tol), (fmm.clone(), None));
        assert_eq!(way::<Gravity, f64>(&Method::direct(), &problem, &cpu), None);
        let boxed = problem.in_domain(Domain::Periodic(PeriodicBox::cube([0.0; 3], 1.0)));
        assert_eq!(way::<Gravity, f64>(&fmm, &boxed, &cpu), None);
        set_overlap(Overlap::Never);
        assert_eq!(way::<Gravity, f64>(&fmm, &problem, &cpu), None);
        set_overlap(Overlap::Gpu);
        assert_eq!(
            way::<Gravity, f64>(&fmm, &problem, &cpu),
            None,
            "the CPU, asked for the GPU's overlap: joined"
        );
    }

    #[test]
    fn a_sum_past_the_tolerance_by_its_margin_alone_is_estimated_again_on_more_targets() {
        // Gravity on the CPU, two lots of sources, at fixed settings.
        let x = crate::distributions::uniform_cube(3000, 7);
        let m: Vec<f64> = (0..x.len()).map(|i| 1.0 + (i % 5) as f64).collect();
        let targets = Particles::targets::<Gravity>(&x).unwrap();
        let lot = |r: std::ops::Range<usize>| {
            let mut s = Particles::sources::<Gravity>(&x[r.clone()]).unwrap();
            s.set("m", &m[r]).unwrap();
            s
        };
        let (sources, more) = (lot(0..2000), lot(2000..3000));
        let params = [0.0];
        let problem = Problem::new(&params);
        let fixed = Method::fmm(3, 0.6);
        let run = |tol: f64| {
            let way = Way {
                method: fixed.clone(),
                tol: Some(tol),
            };
            let own = evaluate_on::<Gravity, f64>(Device::Cpu, &fixed, problem, &targets, &sources)
                .map(Own::Host)
                .unwrap();
            with_arrivals::<Gravity, f64>(
                Device::Cpu,
                own,
                &way,
                &problem,
                &targets,
                &sources,
                Some(&more),
            )
            .unwrap()
            .1
            .expect("a tolerance: an estimate")
        };
        // Far from the tolerance: the first sample's estimate.
        let first = run(1.0);
        assert!(first.samples > 0 && first.value > 0.0, "{first:?}");
        // The estimate within the tolerance, its safe side past it: its
        // targets and four times as many more, one estimate.
        let tol = 0.5 * (first.value + first.bound());
        let way = Way {
            method: fixed.clone(),
            tol: Some(tol),
        };
        assert_eq!(larger_sample(&way, &first), Some(4 * first.samples));
        let second = run(tol);
        assert_eq!(second.samples, 5 * first.samples, "{second:?}");
        assert_eq!(achieved(&way, &second).is_some(), second.bound() <= tol);
        // The estimate itself past the tolerance, or every target
        // sampled: nothing more to learn from more targets.
        let below = Way {
            method: fixed.clone(),
            tol: Some(0.5 * first.value),
        };
        assert_eq!(larger_sample(&below, &first), None);
        assert_eq!(
            larger_sample(&below, &Estimate::from(0.5 * first.value)),
            None
        );
        assert_eq!(run(0.5 * first.value).samples, first.samples);
        let exact = Estimate::from(0.9 * tol);
        assert_eq!(larger_sample(&way, &exact), None, "met, no sample");
    }

    #[test]
    fn a_gpu_splits_where_it_is_the_process_own_in_free_space() {
        let free = Domain::FreeSpace;
        let boxed = Domain::Periodic(PeriodicBox::cube([0.0; 3], 1.0));
        assert!(splits(Overlap::Gpu, true, false, &free));
        assert!(!splits(Overlap::Gpu, true, true, &free), "shared: joined");
        assert!(splits(Overlap::Always, true, true, &free), "asked");
        assert!(!splits(Overlap::Always, true, false, &boxed));
        assert!(!splits(Overlap::Gpu, false, false, &free));
        assert!(splits(Overlap::Always, false, false, &free));
        assert!(!splits(Overlap::Never, true, false, &free));
    }
}
