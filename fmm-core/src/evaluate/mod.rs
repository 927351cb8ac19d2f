//! The front door: every method on every backend through one call.
//!
//! ```no_run
//! use fmm_core::{evaluate, kernels::Gravity, Backend, Method, Particles};
//! # fn main() -> Result<(), fmm_core::Error> {
//! let pos = fmm_core::distributions::plummer(100_000, 1).0;
//! let mut sources = Particles::sources::<Gravity>(&pos)?;
//! sources.set("m", &vec![1.0 / 100_000.0; 100_000])?;
//! let targets = Particles::targets::<Gravity>(&pos)?;
//! let ev = evaluate::<Gravity, f64>(Backend::Auto, &Method::fmm_tolerance(1e-6), &[0.0], &targets, &sources)?;
//! let [ax, ay, az] = ev.outputs.vec3("acc")?;
//! # Ok(()) }
//! ```
//!
//! This is the only place that matches on (method, backend): the checks
//! every evaluation starts with are done here once, an empty problem is
//! answered here, and each method's CPU or CUDA part gets checked inputs.
//! On the GPU the host path is the device-resident path with a copy on
//! each side ([`evaluate_resident`] keeps particles and outputs on the
//! device between calls; [`two_lots::evaluate_resident_in_two_lots`]
//! takes sources that come in two lots, the second later).

pub mod two_lots;

use crate::accuracy::floor::Mac;
use crate::accuracy::{self, choose, Achieved, Goal, ProblemKey, Stopped, Ways};
use crate::backend::{resolve, Backend, Device};
use crate::cuda::resident::{DeviceOutputs, DeviceParticles};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::far::{self, FarField};
use crate::kernel::Kernel;
use crate::methods::fmm::{self, tables, Accuracy, FmmOptions, Plan, Settings};
use crate::methods::{direct, treecode, Method, TreeOptions};
use crate::outputs::Outputs;
use crate::particles::{Particles, Role};
use crate::problem::{check_params, Domain, Problem};
use crate::real::Real;
use crate::reference;
use crate::require::check_requirements;
use crate::stats::{Clock, Stage, Stats};
use cudarc::driver::CudaSlice;
use std::ops::ControlFlow;

/// What an evaluation gives back.
#[derive(Clone, Debug)]
pub struct Evaluation<R> {
    /// The outputs, in the targets' order.
    pub outputs: Outputs<R>,
    /// What ran and how long each stage took.
    pub stats: Stats,
    /// The settings chosen and the error measured, where a tolerance was
    /// asked for.
    pub achieved: Option<Achieved>,
    /// Where it ran.
    pub device: String,
}

/// What an evaluation on device-resident particles gives back.
pub struct ResidentEvaluation<R> {
    /// The outputs, in the targets' order, on the device.
    pub outputs: DeviceOutputs<R>,
    pub stats: Stats,
    pub achieved: Option<Achieved>,
    /// The targets' Morton order where the evaluation made one and kept
    /// it (the FMM of two lots: the error of a distributed step's sum is
    /// sampled along it, with no sort of its own).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) target_order: Option<CudaSlice<u32>>,
}

/// Evaluates kernel `K` from `sources` at `targets` by `method`, on
/// `backend` ([`Backend::Auto`]: the GPU if one can be used, else the CPU,
/// with one log line saying which).
///
/// `problem` is the kernel's parameters in declaration order (a vec3
/// takes three values), in free space, or a [`Problem`] with its domain.
/// Zero sources give zero outputs, zero targets empty outputs; a source on
/// a target adds nothing (every kernel vanishes at r = 0, which the macro
/// checks). Bad input is an error naming it, before any work.
pub fn evaluate<'a, K: Kernel, R: Real>(
    backend: Backend,
    method: &Method,
    problem: impl Into<Problem<'a>>,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Evaluation<R>, Error> {
    let problem = problem.into();
    // The inputs are checked before a GPU is looked for: a bad input is
    // said the same on every machine.
    let params = check::<K, R>(method, &problem, targets, sources)?;
    let device = device_for(backend, method, &problem)?;
    evaluate_checked::<K, R>(device, method, &problem, &params, targets, sources)
}

/// The device [`evaluate`] runs on: what the GPU does not run in a
/// periodic box (the Ewald sum) `Auto` runs on the CPU.
fn device_for(
    backend: Backend,
    method: &Method,
    problem: &Problem<'_>,
) -> Result<Device<'static>, Error> {
    Ok(match (backend, problem.domain.periodic()) {
        (Backend::Auto, Some(_))
            if !gpu_runs_periodic(method) && Backend::from_env()? != Backend::Cuda =>
        {
            Device::Cpu
        }
        _ => resolve(backend)?,
    })
}

/// [`evaluate`] from the sources `own` and `more` together (a process's
/// own and those the others sent it), the particles checked already (a
/// distributed evaluation checks each process's own; what is sent is made
/// from them). On a GPU the two sets are joined there as they are copied
/// over ([`DeviceParticles::upload_joined`]), or `more` joined to `own`
/// where `own_on_device` holds it on the GPU already
/// ([`DeviceParticles::joined_with`]; the copy freed once joined); on the
/// CPU in host memory.
#[cfg(feature = "mpi")]
pub(crate) fn evaluate_joined<K: Kernel, R: Real>(
    backend: Backend,
    method: &Method,
    problem: Problem<'_>,
    targets: &Particles<R>,
    (own, own_on_device): (&Particles<R>, Option<DeviceParticles<R>>),
    more: &Particles<R>,
) -> Result<Evaluation<R>, Error> {
    let device = device_for(backend, method, &problem)?;
    match (method, device) {
        (Method::Treecode(_) | Method::Fmm(_) | Method::Tolerance(_), Device::Cuda(gpu))
            if problem.domain.periodic().is_none() || gpu_runs_periodic(method) =>
        {
            check_params::<K, R>(problem.params)?;
            let mut stats = Stats::default();
            let (outputs, achieved) = through_the_device::<K, R>(
                gpu,
                method,
                &problem,
                targets,
                || {
                    match own_on_device {
                        Some(d) => d.joined_with(gpu, more),
                        None => DeviceParticles::upload_joined(gpu, &[own, more]),
                    }
                    .map(|d| (d, false))
                },
                &mut stats,
            )?;
            Ok(Evaluation {
                outputs,
                stats,
                achieved,
                device: device.to_string(),
            })
        }
        _ => {
            let all = crate::memory::joined(own, more);
            evaluate::<K, R>(backend, method, problem, targets, &all)
        }
    }
}

/// The resident path with the copies on each side: the sources uploaded
/// by `upload` (which says whether the targets are at their points), the
/// targets (where they are not), the outputs copied back; `stats` the
/// evaluation's, with the copies.
fn through_the_device<K: Kernel, R: Real>(
    gpu: &Gpu,
    method: &Method,
    problem: &Problem<'_>,
    targets: &Particles<R>,
    upload: impl FnOnce() -> Result<(DeviceParticles<R>, bool), Error>,
    stats: &mut Stats,
) -> Result<(Outputs<R>, Option<Achieved>), Error> {
    let mut clock = Clock::gpu(stats, gpu);
    let (src, at_sources) = upload()?;
    let tgt = if at_sources {
        DeviceParticles::targets_at_sources(gpu, targets)?
    } else {
        DeviceParticles::upload(gpu, targets)?
    };
    clock.lap(Stage::Upload)?;
    let host = Gpu::host_outputs_ahead::<R>(K::def().n_outputs(), targets.len());
    let ev = evaluate_resident::<K, R>(gpu, method, *problem, &tgt, &src)?;
    let t = std::time::Instant::now();
    let out = ev.outputs.download_to(gpu, host.take())?;
    let upload = stats.seconds(Stage::Upload);
    *stats = ev.stats;
    stats.stages.insert(0, (Stage::Upload, upload));
    stats.add(Stage::Download, t.elapsed().as_secs_f64());
    Ok((out, ev.achieved))
}

/// The checks of an evaluation of particles on the device: the
/// parameters (returned as `R`), the particles made for kernel `K` in
/// their roles, targets at the sources' points as many as they, the
/// method and the domain.
fn check_resident<K: Kernel, R: Real>(
    method: &Method,
    problem: &Problem<'_>,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
) -> Result<Vec<R>, Error> {
    let params = check_params::<K, R>(problem.params)?;
    targets.check_for::<K>(Role::Targets)?;
    sources.check_for::<K>(Role::Sources)?;
    if targets.at_sources() && targets.len() != sources.len() {
        return Err(Error::LengthMismatch {
            what: "targets at the sources' points".into(),
            got: targets.len(),
            expected: sources.len(),
        });
    }
    method.check::<K>()?;
    check_domain::<K>(method, problem)?;
    Ok(params)
}

/// [`evaluate`] on a device already chosen (a [`Device`] from
/// [`crate::resolve`], or a GPU of the caller's own).
pub fn evaluate_on<'a, K: Kernel, R: Real>(
    device: Device<'_>,
    method: &Method,
    problem: impl Into<Problem<'a>>,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Evaluation<R>, Error> {
    let problem = problem.into();
    let checked = check::<K, R>(method, &problem, targets, sources)?;
    evaluate_checked::<K, R>(device, method, &problem, &checked, targets, sources)
}

/// Evaluates kernel `K` on particles kept on `gpu` between calls, leaving
/// the outputs there: what a simulation stepping on the device calls each
/// step, with no host copies. The particles were checked when they were
/// uploaded (finite values, the declaration's `require` conditions); what
/// a kernel of the caller's own writes to them later is the caller's to
/// keep valid. Targets made by [`DeviceParticles::targets_at_sources`]
/// sit at the sources' points.
pub fn evaluate_resident<'a, K: Kernel, R: Real>(
    gpu: &Gpu,
    method: &Method,
    problem: impl Into<Problem<'a>>,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
) -> Result<ResidentEvaluation<R>, Error> {
    let problem = problem.into();
    let params = check_resident::<K, R>(method, &problem, targets, sources)?;
    if let Some(w) = problem.domain.wall() {
        // The sources and their images in free space, at targets with
        // positions of their own (the images are not target points).
        // (Targets at the sources' points are checked with them.)
        sources.check_side(gpu, w, "source")?;
        targets.check_side(gpu, w, "target")?;
        let images = sources.with_images(gpu, w)?;
        let placed = targets.placed_if_at(gpu, sources)?;
        let targets = placed.as_ref().unwrap_or(targets);
        let free = Problem {
            domain: Domain::FreeSpace,
            ..problem
        };
        return evaluate_resident::<K, R>(gpu, method, free, targets, &images);
    }
    if problem.domain.periodic().is_some() && !gpu_runs_periodic(method) {
        return Err(on_gpu(&problem));
    }
    let mut stats = Stats::default();
    let no = K::def().n_outputs();
    if targets.is_empty() || sources.is_empty() || no == 0 {
        let s = gpu.stream();
        let zeros = (0..no)
            .map(|_| crate::cuda::device::zeros::<R>(s, targets.len()))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(ResidentEvaluation {
            outputs: DeviceOutputs::new::<K>(targets.len(), zeros),
            stats,
            achieved: None,
            target_order: None,
        });
    }
    let f32 = R::NAME == "f32";
    let (slots, stats, achieved) = match method {
        Method::Direct(o) => {
            let mut clock = Clock::gpu(&mut stats, gpu);
            let out =
                direct::cuda::run_resident::<K, R>(gpu, &params, targets, sources, o, &mut clock)?;
            stats.runs = 1;
            (out, stats, None)
        }
        Method::Treecode(o) => {
            let far = far::plan::<K>(o.far_field, far::Tree::Treecode)?;
            let mut clock = Clock::gpu(&mut stats, gpu);
            let out = treecode::cuda::run::<K, R>(
                gpu,
                &params,
                &far,
                targets,
                sources,
                o,
                &problem.domain,
                &mut clock,
            )?;
            stats.runs = 1;
            (out, stats, None)
        }
        Method::Fmm(o) => fmm_resident::<K, R>(
            gpu,
            &problem,
            &params,
            o,
            targets,
            sources,
            f64::INFINITY,
            None,
        )
        .map_err(|stop| stop.error)?,
        Method::Tolerance(tol) if problem.domain.periodic().is_some() => {
            // In a periodic box the FMM alone is a candidate (its error
            // measured against the periodic sums at the samples).
            let opts = FmmOptions::tolerance(*tol);
            let (out, st, a) = fmm_resident::<K, R>(
                gpu,
                &problem,
                &params,
                &opts,
                targets,
                sources,
                f64::INFINITY,
                None,
            )
            .map_err(|stop| stop.error)?;
            (out, st, a)
        }
        Method::Tolerance(tol) => {
            let tol = *tol;
            let (m, n) = (targets.len(), sources.len());
            let key = problem_key::<K>(&problem, tol, f32, true).with_sizes(m, n);
            let fmm_runs = far::plan::<K>(FarField::Auto, far::Tree::Fmm).is_ok();
            let opts = FmmOptions::tolerance(tol);
            // The f64 sums at the sampled targets, made by the first tree
            // method tried and kept for the other.
            let reference = std::cell::OnceCell::new();
            let table = &accuracy::treecode::GPU;
            let ways = Ways {
                tree: treecode_candidate::<K>(tol, table).then_some(|budget| {
                    let made = made_once(&reference, || {
                        gpu_reference::<K, R>(gpu, &problem, tol, targets, sources, None)
                    })?;
                    let tkey = problem_key::<K>(&problem, tol, f32, true);
                    let far = far::plan::<K>(FarField::Monopole, far::Tree::Treecode)?;
                    let run = |theta, stats: &mut Stats| {
                        let o = TreeOptions {
                            theta,
                            ..TreeOptions::default()
                        };
                        let mut clock = Clock::gpu(stats, gpu);
                        treecode::cuda::run::<K, R>(
                            gpu,
                            &params,
                            &far,
                            targets,
                            sources,
                            &o,
                            &problem.domain,
                            &mut clock,
                        )
                    };
                    let estimate = reference.get().expect("made");
                    let driven =
                        accuracy::treecode::drive_treecode(tol, table, &tkey, budget, run, |out| {
                            estimate.error(gpu, out)
                        });
                    with_seconds(driven, Stage::ErrorEstimate, made)
                }),
                fmm: fmm_runs.then_some(|budget| {
                    fmm_resident::<K, R>(
                        gpu,
                        &problem,
                        &params,
                        &opts,
                        targets,
                        sources,
                        budget,
                        reference.get(),
                    )
                    .map(|(out, st, a)| (out, st, a.expect("a tolerance says what it met")))
                }),
                direct: || {
                    let mut stats = Stats::default();
                    let mut clock = Clock::gpu(&mut stats, gpu);
                    let out = direct::cuda::run_resident::<K, R>(
                        gpu,
                        &params,
                        targets,
                        sources,
                        &Default::default(),
                        &mut clock,
                    )?;
                    stats.runs = 1;
                    Ok((out, stats))
                },
                direct_error: f32.then_some(|out: &Vec<_>| {
                    gpu_reference::<K, R>(gpu, &problem, tol, targets, sources, None)?
                        .error(gpu, out)
                }),
            };
            let predict = || direct::cuda::predicted_seconds::<K>(m, n, f32);
            let (out, st, a) = choose(tol, &key, predict, ways)?;
            (out, st, Some(a))
        }
    };
    Ok(ResidentEvaluation {
        outputs: DeviceOutputs::new::<K>(targets.len(), slots),
        stats,
        achieved,
        target_order: None,
    })
}

/// The checks every host evaluation starts with: the parameters
/// (converted to `R`), particles made for `K` in the right roles, the
/// declaration's `require` conditions, the method's options and what it
/// needs of the kernel, and the domain.
pub(crate) fn check<K: Kernel, R: Real>(
    method: &Method,
    problem: &Problem<'_>,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Vec<R>, Error> {
    let p = check_params::<K, R>(problem.params)?;
    targets.check_for::<K>(Role::Targets)?;
    sources.check_for::<K>(Role::Sources)?;
    check_requirements::<K, R>(problem.params, targets, sources)?;
    method.check::<K>()?;
    check_domain::<K>(method, problem)?;
    if let Some(w) = problem.domain.wall() {
        w.check_side("source", sources.positions()[w.axis])?;
        w.check_side("target", targets.positions()[w.axis])?;
    }
    Ok(p)
}

/// The domain's own checks, and whether `method` runs in it: a wall runs
/// every method (its images are sources), for a kernel with the source
/// fields it names odd; a periodic box runs by the direct sum (Ewald) on the CPU, and the treecode and
/// the FMM (every far field; a tolerance by the FMM's Laplace
/// expansions) on the CPU and the GPU ([`gpu_runs_periodic`]), the images
/// past the nearest by Laplace expansions, for kernels that declare a
/// Laplace far field; the rest say so, naming what does.
fn check_domain<K: Kernel>(method: &Method, problem: &Problem<'_>) -> Result<(), Error> {
    problem.domain.check()?;
    // A wall runs every method: its images are sources in free space.
    if let Some(w) = problem.domain.wall() {
        return w.check_kernel::<K>();
    }
    let Some(pbox) = problem.domain.periodic() else {
        return Ok(());
    };
    let unsupported = |what: &str| {
        Err(Error::DomainUnsupported {
            method: what.into(),
            domain: pbox.name(),
            instead: "use Method::Fmm with the Laplace far field (or Method::Direct on the \
                      CPU: an Ewald sum)"
                .into(),
        })
    };
    let laplace = |asked: FarField| {
        matches!(
            far::plan::<K>(asked, far::Tree::Fmm),
            Ok(far::Plan::Laplace { .. })
        )
    };
    // A kernel with a cutoff sums directly, by the minimum image, on any
    // periodic axes.
    if let Some(c) = &K::def().cutoff {
        return match method {
            Method::Direct(_) => pbox.check_cutoff(c.radius(problem.params), &c.text),
            _ => Err(Error::DomainUnsupported {
                method: format!(
                    "the {} method for kernel {} (it declares `cutoff {};`)",
                    method.name(),
                    K::name(),
                    c.text
                ),
                domain: pbox.name(),
                instead: "use Method::direct() on the CPU: the minimum image, each pair within \
                          the cutoff once"
                    .into(),
            }),
        };
    }
    match method {
        Method::Direct(_) if pbox.periodic_axes() < 3 => unsupported("the direct sum"),
        Method::Direct(_) => Ok(()),
        Method::Treecode(_) if laplace(FarField::Laplace) => Ok(()),
        Method::Treecode(_) => unsupported(&format!("the treecode with kernel {}", K::name())),
        Method::Tolerance(_) if laplace(FarField::Auto) => Ok(()),
        Method::Fmm(o) if laplace(o.far_field) => Ok(()),
        // The node far fields: the nearest images by their nodes, the
        // farther by Laplace expansions.
        Method::Fmm(_) if laplace(FarField::Laplace) => Ok(()),
        Method::Fmm(o) => unsupported(&format!(
            "the FMM with the {} far field",
            o.far_field.resolve::<K>(false).name()
        )),
        Method::Tolerance(_) => unsupported(&format!("a tolerance for kernel {}", K::name())),
    }
}

/// Whether the GPU runs `method` in a periodic box: the treecode and the
/// FMM (whose far fields [`check_domain`] has checked) and a tolerance
/// (by that FMM). Not the Ewald sum: an f64 reference, for small N, whose
/// reciprocal sum the CPU makes in seconds at 10^4 charges.
fn gpu_runs_periodic(method: &Method) -> bool {
    matches!(
        method,
        Method::Treecode(_) | Method::Fmm(_) | Method::Tolerance(_)
    )
}

/// A method the GPU does not run in a periodic box, said with what does.
fn on_gpu(problem: &Problem<'_>) -> Error {
    Error::DomainUnsupported {
        method: "the direct (Ewald) sum on the GPU".into(),
        domain: problem.domain.name(),
        instead: "run it on the CPU (Backend::Cpu), or use Method::Fmm or Method::Treecode, \
                  which run there on the GPU"
            .into(),
    }
}

/// The (method, backend) match, on checked inputs.
fn evaluate_checked<K: Kernel, R: Real>(
    device: Device<'_>,
    method: &Method,
    problem: &Problem<'_>,
    params: &[R],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Evaluation<R>, Error> {
    if let Some(w) = problem.domain.wall() {
        // Checked on the wall's side: the sources and their images in
        // free space.
        let free = Problem {
            domain: Domain::FreeSpace,
            ..*problem
        };
        let images = w.with_images(sources);
        return evaluate_checked::<K, R>(device, method, &free, params, targets, &images);
    }
    let name = device.to_string();
    let mut stats = Stats::default();
    let no = K::def().n_outputs();
    if targets.is_empty() || sources.is_empty() || no == 0 {
        return Ok(Evaluation {
            outputs: Outputs::zeros::<K>(targets.len()),
            stats,
            achieved: None,
            device: name,
        });
    }
    let mut achieved = None;
    if let (Some(_), Device::Cuda(_)) = (problem.domain.periodic(), &device) {
        if !gpu_runs_periodic(method) {
            return Err(on_gpu(problem));
        }
    }
    let outputs = match (method, device) {
        (Method::Direct(_), Device::Cpu) if problem.domain.periodic().is_some() => {
            let pbox = problem.domain.periodic().expect("periodic");
            let mut clock = Clock::cpu(&mut stats);
            let out = match &K::def().cutoff {
                Some(c) => {
                    let rc = c.radius(problem.params);
                    direct::cpu::minimum_image::<K, R>(params, rc, pbox, targets, sources)?
                }
                None => direct::cpu::ewald::<K, R>(problem.params, pbox, targets, sources)?,
            };
            clock.lap(Stage::P2p)?;
            stats.runs = 1;
            out
        }
        (Method::Direct(_), Device::Cpu) => {
            let mut clock = Clock::cpu(&mut stats);
            let out = direct::cpu::run::<K, R>(params, targets, sources);
            clock.lap(Stage::P2p)?;
            stats.p2p = (targets.len() * sources.len()) as u64;
            stats.runs = 1;
            out
        }
        (Method::Direct(o), Device::Cuda(gpu)) => {
            let out = direct::cuda::run::<K, R>(gpu, params, targets, sources, o, &mut stats)?;
            stats.runs = 1;
            out
        }
        (Method::Treecode(o), Device::Cpu) => {
            let far = far::plan::<K>(o.far_field, far::Tree::Treecode)?;
            let mut clock = Clock::cpu(&mut stats);
            let out = treecode::cpu::run::<K, R>(
                params,
                &far,
                targets,
                sources,
                o,
                &problem.domain,
                &mut clock,
            )?;
            stats.runs = 1;
            out
        }
        (Method::Fmm(o), Device::Cpu) => {
            let (out, st, a) =
                fmm_cpu::<K, R>(problem, params, targets, sources, o, f64::INFINITY, None)
                    .map_err(|stop| stop.error)?;
            stats = st;
            achieved = a;
            out
        }
        (Method::Tolerance(tol), Device::Cpu) if problem.domain.periodic().is_some() => {
            // In a periodic box the FMM alone is a candidate (its error
            // measured against the Ewald sum at the samples).
            let opts = FmmOptions::tolerance(*tol);
            let (out, st, a) = fmm_cpu::<K, R>(
                problem,
                params,
                targets,
                sources,
                &opts,
                f64::INFINITY,
                None,
            )
            .map_err(|stop| stop.error)?;
            stats = st;
            achieved = a;
            out
        }
        (Method::Tolerance(tol), Device::Cpu) => {
            let tol = *tol;
            let (m, n) = (targets.len(), sources.len());
            let f32 = R::NAME == "f32";
            let key = problem_key::<K>(problem, tol, f32, false).with_sizes(m, n);
            let fmm_runs = far::plan::<K>(FarField::Auto, far::Tree::Fmm).is_ok();
            let opts = FmmOptions::tolerance(tol);
            // The f64 sums at the sampled targets, made by the first tree
            // method tried and kept for the other.
            let reference = std::cell::OnceCell::new();
            let table = &accuracy::treecode::CPU;
            let ways = Ways {
                tree: treecode_candidate::<K>(tol, table).then_some(|budget| {
                    let made = made_once(&reference, || {
                        Reference::<K, R>::new(problem, targets, sources, tol)
                    })?;
                    let tkey = problem_key::<K>(problem, tol, f32, false);
                    let far = far::plan::<K>(FarField::Monopole, far::Tree::Treecode)?;
                    let run = |theta, stats: &mut Stats| {
                        let o = TreeOptions {
                            theta,
                            ..TreeOptions::default()
                        };
                        treecode::cpu::run::<K, R>(
                            params,
                            &far,
                            targets,
                            sources,
                            &o,
                            &problem.domain,
                            &mut Clock::cpu(stats),
                        )
                    };
                    let estimate = reference.get().expect("made");
                    let driven =
                        accuracy::treecode::drive_treecode(tol, table, &tkey, budget, run, |out| {
                            Ok(estimate.error(out))
                        });
                    with_seconds(driven, Stage::ErrorEstimate, made)
                }),
                fmm: fmm_runs.then_some(|budget| {
                    fmm_cpu::<K, R>(
                        problem,
                        params,
                        targets,
                        sources,
                        &opts,
                        budget,
                        reference.get(),
                    )
                    .map(|(out, st, a)| (out, st, a.expect("a tolerance says what it met")))
                }),
                direct: || {
                    let mut stats = Stats::default();
                    let mut clock = Clock::cpu(&mut stats);
                    let out = direct::cpu::run::<K, R>(params, targets, sources);
                    clock.lap(Stage::P2p)?;
                    stats.p2p = (m * n) as u64;
                    stats.runs = 1;
                    Ok((out, stats))
                },
                direct_error: f32.then_some(|out: &Outputs<R>| {
                    Ok(Reference::<K, R>::new(problem, targets, sources, tol)?.error(out))
                }),
            };
            let predict = || direct::cpu::predicted_seconds::<K, R>(params, targets, sources);
            let (out, st, a) = choose(tol, &key, predict, ways)?;
            stats = st;
            achieved = Some(a);
            out
        }
        (Method::Treecode(_) | Method::Fmm(_) | Method::Tolerance(_), Device::Cuda(gpu)) => {
            let (out, a) = through_the_device::<K, R>(
                gpu,
                method,
                problem,
                targets,
                || DeviceParticles::upload_noting_targets(gpu, sources, targets),
                &mut stats,
            )?;
            achieved = a;
            out
        }
    };
    Ok(Evaluation {
        outputs,
        stats,
        achieved,
        device: name,
    })
}

/// What an FMM evaluation gives back: the outputs, the stats, and what a
/// tolerance achieved; or, stopped short of a tolerance, why and the time
/// its runs took.
type FmmResult<O> = Result<(O, Stats, Option<Achieved>), Stopped>;

/// The FMM on the GPU, at fixed settings or driven by a tolerance (the
/// error estimated on the device against its f64 direct sum at sampled
/// targets, `known` where an earlier far field computed it), a
/// tolerance's runs within `budget` seconds. (Eight arguments: the
/// runners take one job value, `fmm::Plan`, made here per run; the front
/// door's own values are next.)
#[allow(clippy::too_many_arguments)]
fn fmm_resident<K: Kernel, R: Real>(
    gpu: &Gpu,
    problem: &Problem<'_>,
    params: &[R],
    o: &FmmOptions,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
    budget: f64,
    known: Option<&fmm::cuda::estimate::Estimator<K, R>>,
) -> FmmResult<Vec<CudaSlice<R>>> {
    let f32 = R::NAME == "f32";
    if let Some(ki) = switched_options::<K>(problem, o, f32, true) {
        return fmm_resident::<K, R>(gpu, problem, params, &ki, targets, sources, budget, known);
    }
    let far = far::plan::<K>(o.far_field, far::Tree::Fmm)?;
    // The runs' trees, built by the first and kept for the rest (one far
    // field: the same leaves and cell radii) and for the error estimate.
    let trees = fmm::cuda::SharedTrees::default();
    let mac = match (&far, o.accuracy) {
        (far::Plan::Laplace { .. }, Accuracy::Tolerance(tol)) => {
            gpu_widest_mac::<K, R>(gpu, problem, o, targets, sources, tol)?
        }
        _ => Mac::FREE,
    };
    let run = |settings: Settings, stats: &mut Stats| {
        let mut clock = Clock::gpu(stats, gpu);
        let plan = Plan {
            params,
            far: &far,
            settings,
            opts: o,
            domain: &problem.domain,
            cube: problem.cube,
            near: mac.near.max(o.near),
        };
        match &far {
            far::Plan::Monopole { .. } => unreachable!("the FMM has no monopole"),
            far::Plan::Laplace { .. } => {
                fmm::cuda::run::<K, R>(gpu, &plan, targets, sources, &trees, &mut clock)
            }
            far::Plan::Nodes(_) => {
                fmm::cuda::nodes::run::<K, R>(gpu, &plan, targets, sources, &trees, &mut clock)
            }
        }
    };
    let tol = match o.accuracy {
        Accuracy::Fixed { p, theta } => return run_once(run, Settings { p, theta }),
        Accuracy::Tolerance(tol) => tol,
    };
    let table = match &far {
        far::Plan::Nodes(rep) => tables::gpu_node_table(rep.far_field),
        _ => tables::GPU,
    };
    let key = problem_key::<K>(problem, tol, f32, true);
    let widest = mac.theta;
    // The node far fields do not run in a periodic box yet.
    let periodic = problem.domain.periodic().is_some();
    let may_switch = !periodic && switch_possible::<K>(o.far_field, &far, f32 && tol < 1e-5);
    let ki = o.clone().with_far_field(FarField::KernelIndependent);
    let widest = match widest_or_nodes(widest, may_switch, tol, &key, || {
        fmm_resident::<K, R>(gpu, problem, params, &ki, targets, sources, budget, known)
    }) {
        ControlFlow::Continue(theta) => theta,
        ControlFlow::Break(done) => return done,
    };
    // The reference sums at the sampled targets, once for every far field
    // tried (the nodes after the expansions take this one): made at the
    // first run's error, on its trees, its time that error's.
    let made = std::cell::OnceCell::new();
    let goal = Goal {
        tol,
        table: &table,
        far: far.far_field(),
        f32,
        key: Some(&key),
        budget,
        widest,
    };
    let driven = accuracy::drive_within(&goal, run, |out| {
        let estimate = match known {
            Some(e) => e,
            None => {
                made_once(&made, || {
                    gpu_reference::<K, R>(gpu, problem, tol, targets, sources, trees.get())
                })?;
                made.get().expect("made")
            }
        };
        estimate.error(gpu, out)
    });
    let driven = with_near(driven, mac.near);
    drop(trees);
    let estimate = known.or(made.get());
    let switch = |stop: &Stopped| !periodic && switch_to_nodes::<K>(stop, o.far_field, &far, f32);
    finish(driven, 0.0, switch, key, budget, |left| {
        fmm_resident::<K, R>(gpu, problem, params, &ki, targets, sources, left, estimate)
    })
}

/// The f64 direct sum at [`accuracy::gpu_error_samples`] targets on the GPU
/// (in a periodic box the periodic sums there, good to a thirtieth of
/// `tol`), what a tolerance's errors there are estimated against.
fn gpu_reference<K: Kernel, R: Real>(
    gpu: &Gpu,
    problem: &Problem<'_>,
    tol: f64,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
    trees: Option<&fmm::cuda::Trees<R>>,
) -> Result<fmm::cuda::estimate::Estimator<K, R>, Error> {
    use fmm::cuda::estimate::Along;
    fmm::cuda::estimate::Estimator::new(
        gpu,
        problem.params,
        problem.domain.periodic().map(|b| (b, tol)),
        targets,
        sources,
        accuracy::gpu_error_samples(sources.len()),
        trees.map_or(Along::Nothing, Along::Trees),
    )
}

/// [`accuracy::floor::widest_mac`] for particles on the GPU: the
/// bounding cube found there, the smoothing measured from a few sources
/// copied back (the velocity + stretching of cores of one spacing, 10^7
/// points, took 8 to 13 s a first evaluation finding theta 0.56 by runs).
fn gpu_widest_mac<K: Kernel, R: Real>(
    gpu: &Gpu,
    problem: &Problem<'_>,
    o: &FmmOptions,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
    tol: f64,
) -> Result<Mac, Error> {
    let (m, n) = (targets.len(), sources.len());
    let Some(spos) = sources.positions() else {
        return Ok(Mac::FREE);
    };
    if m == 0 || n == 0 {
        return Ok(Mac::FREE);
    }
    let tpos = targets.positions().unwrap_or(spos);
    let half = |pos: &[CudaSlice<R>; 3]| {
        crate::tree::device::DeviceOctree::<R>::bounds(gpu, [&pos[0], &pos[1], &pos[2]])
            .map(|b| b.half)
    };
    let source_side = 2.0 * half(spos)?;
    let side = source_side.max(2.0 * half(tpos)?);
    let few = accuracy::floor::SOURCES.min(n);
    let picks: Vec<usize> = (0..few).map(|s| s * n / few).collect();
    let few_sources = sources.pick(gpu, &picks, None)?;
    let one_target = targets.pick(gpu, &[m / 2], Some(spos))?;
    Ok(accuracy::floor::widest_mac_in::<K, R>(
        problem.params,
        &one_target,
        &few_sources,
        accuracy::floor::Extent {
            points: m.max(n),
            side,
            sources: n,
            source_side,
        },
        o.leaf_size(FarField::Laplace),
        tol,
    ))
}

/// The FMM on the CPU, at fixed settings or driven by a tolerance (the
/// error estimated against the f64 direct sum at targets stratified over
/// space, `known` where an earlier far field computed it), a tolerance's
/// runs within `budget` seconds.
fn fmm_cpu<K: Kernel, R: Real>(
    problem: &Problem<'_>,
    params: &[R],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &FmmOptions,
    budget: f64,
    known: Option<&Reference<K, R>>,
) -> FmmResult<Outputs<R>> {
    let f32 = R::NAME == "f32";
    if let Some(ki) = switched_options::<K>(problem, opts, f32, false) {
        return fmm_cpu::<K, R>(problem, params, targets, sources, &ki, budget, known);
    }
    let far = far::plan::<K>(opts.far_field, far::Tree::Fmm)?;
    let mac = match (&far, opts.accuracy) {
        (far::Plan::Laplace { .. }, Accuracy::Tolerance(tol)) => {
            accuracy::floor::widest_mac::<K, R>(
                problem.params,
                targets,
                sources,
                opts.leaf_size(FarField::Laplace),
                tol,
            )
        }
        _ => Mac::FREE,
    };
    let run = |settings: Settings, stats: &mut Stats| {
        let plan = Plan {
            params,
            far: &far,
            settings,
            opts,
            domain: &problem.domain,
            cube: problem.cube,
            near: mac.near.max(opts.near),
        };
        let mut clock = Clock::cpu(stats);
        match &far {
            far::Plan::Monopole { .. } => unreachable!("the FMM has no monopole"),
            far::Plan::Laplace { .. } => fmm::cpu::run::<K, R>(&plan, targets, sources, &mut clock),
            far::Plan::Nodes(_) => fmm::cpu_nodes::run::<K, R>(&plan, targets, sources, &mut clock),
        }
    };
    let tol = match opts.accuracy {
        Accuracy::Fixed { p, theta } => return run_once(run, Settings { p, theta }),
        Accuracy::Tolerance(tol) => tol,
    };
    let mut table = tables::cpu_table(far.far_field()).clone();
    if let (far::Plan::Nodes(rep), true) = (&far, budget.is_finite()) {
        // With the direct sum to fall back on (`Method::tolerance`), the
        // Chebyshev nodes stop at the highest order the compressed M2L
        // takes: past it the M2L by the kernel costs 10 to 100 times more
        // (Biot-Savart, cores of three spacings, 3x10^4 points at 1e-4:
        // p 3 to 7 in one step, 15 s against 0.3 s, where the direct sum
        // takes 1.5 s).
        if rep.far_field == FarField::KernelIndependent {
            let most = far::compressed::most_compressed_chebyshev(
                rep.channels(K::def().n_outputs()),
                rep.strength.len(),
            );
            table.most_p = table.most_p.min(most);
        }
    }
    let table = &table;
    let key = problem_key::<K>(problem, tol, f32, false);
    let widest = mac.theta;
    // The node far fields do not run in a periodic box yet.
    let periodic = problem.domain.periodic().is_some();
    let may_switch = !periodic && switch_possible::<K>(opts.far_field, &far, f32 && tol < 1e-5);
    let ki = opts.clone().with_far_field(FarField::KernelIndependent);
    let widest = match widest_or_nodes(widest, may_switch, tol, &key, || {
        fmm_cpu::<K, R>(problem, params, targets, sources, &ki, budget, known)
    }) {
        ControlFlow::Continue(theta) => theta,
        ControlFlow::Break(done) => return done,
    };
    let goal = Goal {
        tol,
        table,
        far: far.far_field(),
        f32,
        key: Some(&key),
        budget,
        widest,
    };
    // The reference sums at the sampled targets, once for every far field
    // tried (the nodes after the expansions take this one).
    let t = std::time::Instant::now();
    let made;
    let reference = match known {
        Some(r) => r,
        None => {
            made = Reference::<K, R>::new(problem, targets, sources, tol)?;
            &made
        }
    };
    let reference_seconds = t.elapsed().as_secs_f64();
    let driven = accuracy::drive_within(&goal, run, |out| Ok(reference.error(out)));
    let driven = with_near(driven, mac.near);
    let switch =
        |stop: &Stopped| !periodic && switch_to_nodes::<K>(stop, opts.far_field, &far, f32);
    finish(driven, reference_seconds, switch, key, budget, |left| {
        fmm_cpu::<K, R>(
            problem,
            params,
            targets,
            sources,
            &ki,
            left,
            Some(reference),
        )
    })
}

/// A tolerance's result with the near field its runs took.
fn with_near<O>(
    driven: Result<(O, Stats, Achieved), Stopped>,
    near: f64,
) -> Result<(O, Stats, Achieved), Stopped> {
    driven.map(|(out, stats, a)| (out, stats, Achieved { near, ..a }))
}

/// The widest MAC the Laplace floor predicted from the declaration allows
/// (`widest`: [`accuracy::floor::widest_theta`]); where no MAC does, the
/// evaluation by `nodes` at once if the default far field may `switch`
/// ([`accuracy::predicted_switch`]), else the narrowest MAC.
fn widest_or_nodes<O>(
    widest: Result<f64, f64>,
    switch: bool,
    tol: f64,
    key: &ProblemKey,
    nodes: impl FnOnce() -> FmmResult<O>,
) -> ControlFlow<FmmResult<O>, f64> {
    match widest {
        Ok(theta) => ControlFlow::Continue(theta),
        Err(floor) if switch => {
            ControlFlow::Break(accuracy::predicted_switch(tol, floor, key.clone(), nodes))
        }
        Err(_) => ControlFlow::Continue(accuracy::driver::MIN_THETA),
    }
}

/// One FMM run at fixed `settings`.
fn run_once<O>(
    mut run: impl FnMut(Settings, &mut Stats) -> Result<O, Error>,
    settings: Settings,
) -> FmmResult<O> {
    let mut stats = Stats::default();
    let out = run(settings, &mut stats)?;
    stats.runs = 1;
    Ok((out, stats, None))
}

/// A tolerance's drive over: met, with the reference's seconds counted;
/// stopped where the default far field may go on to the nodes (`switch`),
/// on to them by `nodes` with the time left of `budget`
/// ([`accuracy::on_to_nodes`]); else the stop.
fn finish<O>(
    driven: Result<(O, Stats, Achieved), Stopped>,
    reference_seconds: f64,
    switch: impl Fn(&Stopped) -> bool,
    key: ProblemKey,
    budget: f64,
    nodes: impl FnOnce(f64) -> FmmResult<O>,
) -> FmmResult<O> {
    match driven {
        Ok((out, mut stats, a)) => {
            stats.add(Stage::ErrorEstimate, reference_seconds);
            Ok((out, stats, Some(a)))
        }
        Err(stop) if switch(&stop) => accuracy::on_to_nodes(stop, key, budget, nodes),
        Err(stop) => Err(stop),
    }
}

/// Whether the treecode is a candidate for `tol` ([`accuracy::treecode`]):
/// the kernel's treecode takes the monopole (the Laplace family: the
/// kernel itself at the centre of strength, smoothing kept) of a scalar
/// strength, and the tolerance is within its reach on the backend
/// (`table`). Vector strengths are left out: the monopole of a cell's
/// summed vortex strength missed 1e-4 by 25x (velocity + stretching,
/// 3x10^4 points, theta 0.3) and by 370x (Biot-Savart of random
/// strengths, 10^5), a run spent for nothing on a first evaluation.
fn treecode_candidate<K: Kernel>(tol: f64, table: &accuracy::treecode::Table) -> bool {
    table.reach(tol)
        && matches!(
            far::plan::<K>(FarField::Auto, far::Tree::Treecode),
            Ok(far::Plan::Monopole { strength }) if strength.len() == 1
        )
}

/// Makes `cell`'s value with `make` where it is empty; the seconds that
/// took (0 where it was made before).
fn made_once<T>(
    cell: &std::cell::OnceCell<T>,
    make: impl FnOnce() -> Result<T, Error>,
) -> Result<f64, Error> {
    if cell.get().is_some() {
        return Ok(0.0);
    }
    let t = std::time::Instant::now();
    let value = make()?;
    let _ = cell.set(value);
    Ok(t.elapsed().as_secs_f64())
}

/// `driven` with `seconds` more of `stage` in its stats, met or stopped.
fn with_seconds<O>(
    driven: Result<(O, Stats, Achieved), Stopped>,
    stage: Stage,
    seconds: f64,
) -> Result<(O, Stats, Achieved), Stopped> {
    match driven {
        Ok((out, mut stats, a)) => {
            stats.add(stage, seconds);
            Ok((out, stats, a))
        }
        Err(mut stop) => {
            stop.spent.add(stage, seconds);
            Err(stop)
        }
    }
}

/// The f64 direct sum at targets stratified over space
/// ([`reference::stratified`]), what the CPU's errors are estimated
/// against.
pub(crate) struct Reference<K, R> {
    idx: Vec<usize>,
    want: Vec<Vec<f64>>,
    exhaustive: bool,
    _k: std::marker::PhantomData<(K, R)>,
}

impl<K: Kernel, R: Real> Reference<K, R> {
    /// The sums of `problem` at the stratified targets: the direct sum in
    /// free space, in a periodic box the near images by the kernel and
    /// high-order expansions, the rest by the images' expansions
    /// ([`fmm::periodic_reference`]: the Ewald sum's reciprocal part costs
    /// every source at every vector, 75 s at 10^6 sources).
    pub(crate) fn new(
        problem: &Problem<'_>,
        targets: &Particles<R>,
        sources: &Particles<R>,
        tol: f64,
    ) -> Result<Self, Error> {
        Self::with_samples(problem, targets, sources, tol, None)
    }

    /// [`Reference::new`] at `samples` targets (`None`: as many as
    /// [`Reference::new`] takes).
    pub(crate) fn with_samples(
        problem: &Problem<'_>,
        targets: &Particles<R>,
        sources: &Particles<R>,
        tol: f64,
        samples: Option<usize>,
    ) -> Result<Self, Error> {
        // A periodic sum at a target costs far more than the free-space one
        // (the near images and the far images' expansions at a thirtieth
        // of `tol`: 151 targets in place of 64 took a 16^3 Taylor-Green
        // test from 10 s to 26 s): the fewest there.
        let samples = samples.unwrap_or(match problem.domain.periodic() {
            Some(_) => accuracy::ERROR_SAMPLES,
            None => accuracy::cpu_error_samples(sources.len()),
        });
        let idx = reference::stratified(targets, samples);
        let (params, src) = (problem.params, sources.to_f64(None));
        let want = match problem.domain.periodic() {
            None => reference::direct_f64_at::<K, R>(params, targets, &idx, &src),
            Some(b) => {
                fmm::periodic_reference::periodic_at::<K, R>(params, b, targets, &idx, &src, tol)?
            }
        };
        Ok(Reference {
            exhaustive: idx.len() == targets.len(),
            idx,
            want,
            _k: std::marker::PhantomData,
        })
    }

    pub(crate) fn error(&self, out: &Outputs<R>) -> reference::Estimate {
        self.sampled(out).estimate()
    }

    /// The outputs `out` at the sampled targets, beside their references.
    pub(crate) fn sampled(&self, out: &Outputs<R>) -> reference::sample::Sampled {
        reference::sample::Sampled {
            got: reference::at(out, &self.idx),
            want: self.want.clone(),
            exhaustive: self.exhaustive,
        }
    }
}

/// Whether the FMM's tolerance that the far field `far` stopped short of
/// (`stopped`) is to be run again with the kernel-independent far field
/// ([`accuracy::switch_to_nodes`]), kernel `K` able to use it.
fn switch_to_nodes<K: Kernel>(
    stopped: &Stopped,
    asked: FarField,
    far: &far::Plan,
    f32: bool,
) -> bool {
    accuracy::switch_to_nodes(stopped, asked, far.far_field(), f32)
        && far::plan::<K>(FarField::KernelIndependent, far::Tree::Fmm).is_ok()
}

/// Whether the default far field (`asked`, `Auto`) may leave the Laplace
/// expansions (`far`) for the kernel-independent one: kernel `K` can use
/// it, and f32's rounding is not a floor of its own (`f32_floor`).
fn switch_possible<K: Kernel>(asked: FarField, far: &far::Plan, f32_floor: bool) -> bool {
    asked == FarField::Auto
        && far.far_field() == FarField::Laplace
        && !f32_floor
        && far::plan::<K>(FarField::KernelIndependent, far::Tree::Fmm).is_ok()
}

/// The key a tolerance's choices (the settings that met it, the switch of
/// the default far field, the methods' times) are remembered by.
pub(crate) fn problem_key<K: Kernel>(
    problem: &Problem<'_>,
    tol: f64,
    f32: bool,
    gpu: bool,
) -> ProblemKey {
    let key = ProblemKey::new(K::name(), problem.params, tol, f32, gpu);
    match problem.domain.periodic() {
        Some(b) => key.in_domain(format!("{b:?}")),
        None => key,
    }
}

/// The FMM's options with the far field a tolerance chose before for the
/// same problem (the default switched to the nodes), else `None`.
fn switched_options<K: Kernel>(
    problem: &Problem<'_>,
    opts: &FmmOptions,
    f32: bool,
    gpu: bool,
) -> Option<FmmOptions> {
    let Accuracy::Tolerance(tol) = opts.accuracy else {
        return None;
    };
    (opts.far_field == FarField::Auto
        && accuracy::switched_before(&problem_key::<K>(problem, tol, f32, gpu)))
    .then(|| opts.clone().with_far_field(FarField::KernelIndependent))
}
