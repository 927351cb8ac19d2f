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
//! device between calls).

use crate::backend::{resolve, Backend, Device};
use crate::cuda::resident::{DeviceOutputs, DeviceParticles};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::far::{self, FarField};
use crate::kernel::Kernel;
use crate::methods::fmm::{self, tolerance, Accuracy, Achieved, FmmOptions, Plan, Settings};
use crate::methods::{direct, treecode, Method};
use crate::outputs::Outputs;
use crate::particles::{Particles, Role};
use crate::problem::{check_params, Domain, Problem};
use crate::real::Real;
use crate::reference;
use crate::require::check_requirements;
use crate::stats::{Clock, Stage, Stats};

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
    evaluate_checked::<K, R>(
        resolve(backend)?,
        method,
        &problem,
        &params,
        targets,
        sources,
    )
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
    check_domain(method, &problem)?;
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
        });
    }
    let mut achieved = None;
    let slots = match method {
        Method::Direct(o) => {
            let mut clock = Clock::gpu(&mut stats, gpu);
            let out =
                direct::cuda::run_resident::<K, R>(gpu, &params, targets, sources, o, &mut clock)?;
            stats.runs = 1;
            out
        }
        Method::Treecode(o) => {
            let far = far::plan::<K>(o.far_field, far::Tree::Treecode)?;
            let mut clock = Clock::gpu(&mut stats, gpu);
            let out =
                treecode::cuda::run::<K, R>(gpu, &params, &far, targets, sources, o, &mut clock)?;
            stats.runs = 1;
            out
        }
        Method::Fmm(o) => {
            if let Some(ki) = switched_options::<K>(&problem, o, R::NAME == "f32", true) {
                let ki = Method::Fmm(ki);
                return evaluate_resident::<K, R>(gpu, &ki, problem, targets, sources);
            }
            let far = far::plan::<K>(o.far_field, far::Tree::Fmm)?;
            let run = |settings: Settings, stats: &mut Stats| {
                let mut clock = Clock::gpu(stats, gpu);
                match &far {
                    far::Plan::Monopole { .. } => unreachable!("the FMM has no monopole"),
                    far::Plan::Laplace { strength, terms } => {
                        let plan = Plan {
                            params: &params,
                            strength,
                            terms,
                            settings,
                            opts: o,
                        };
                        fmm::cuda::run::<K, R>(gpu, &plan, targets, sources, &mut clock)
                    }
                    far::Plan::Nodes(rep) => fmm::cuda::nodes::run::<K, R>(
                        gpu, &params, rep, settings, o, targets, sources, &mut clock,
                    ),
                }
            };
            match o.accuracy {
                Accuracy::Fixed { p, theta } => {
                    let out = run(Settings { p, theta }, &mut stats)?;
                    stats.runs = 1;
                    out
                }
                Accuracy::Tolerance(tol) => {
                    // The reference sums at the sampled targets, once.
                    let t = std::time::Instant::now();
                    let estimate = fmm::cuda::estimate::Estimator::<K, R>::new(
                        gpu,
                        problem.params,
                        targets,
                        sources,
                        tolerance::ERROR_SAMPLES,
                    )?;
                    let reference_seconds = t.elapsed().as_secs_f64();
                    // The node far fields start from the CPU's tables until
                    // GPU ones are measured (the error of given settings is
                    // the same on both; only the fastest settings for an
                    // error may differ), capped at the orders the GPU takes.
                    let table = match &far {
                        far::Plan::Nodes(rep) => tolerance::gpu_node_table(rep.far_field),
                        _ => tolerance::GPU,
                    };
                    let f32 = R::NAME == "f32";
                    let key = problem_key::<K>(&problem, tol, f32, true);
                    let driven = tolerance::drive(
                        tol,
                        &table,
                        far.far_field(),
                        f32,
                        Some(&key),
                        run,
                        |out| estimate.error(gpu, out),
                    );
                    let (out, st, a) = match driven {
                        Ok(done) => done,
                        Err(stop) if switch_to_nodes::<K>(&stop, o.far_field, &far, f32) => {
                            tolerance::announce_switch(&stop);
                            tolerance::remember_switch(key);
                            let ki = Method::Fmm(FmmOptions {
                                far_field: FarField::KernelIndependent,
                                ..o.clone()
                            });
                            let mut ev =
                                evaluate_resident::<K, R>(gpu, &ki, problem, targets, sources)?;
                            ev.stats.absorb_time(&stop.spent);
                            return Ok(ev);
                        }
                        Err(stop) => return Err(stop.error),
                    };
                    stats = st;
                    stats.add(Stage::ErrorEstimate, reference_seconds);
                    achieved = Some(a);
                    out
                }
            }
        }
    };
    Ok(ResidentEvaluation {
        outputs: DeviceOutputs::new::<K>(targets.len(), slots),
        stats,
        achieved,
    })
}

/// The checks every host evaluation starts with: the parameters
/// (converted to `R`), particles made for `K` in the right roles, the
/// declaration's `require` conditions, the method's options and what it
/// needs of the kernel, and the domain.
fn check<K: Kernel, R: Real>(
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
    check_domain(method, problem)?;
    Ok(p)
}

/// Every method runs in free space (the only domain so far).
fn check_domain(_method: &Method, problem: &Problem<'_>) -> Result<(), Error> {
    match problem.domain {
        Domain::FreeSpace => Ok(()),
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
    let outputs = match (method, device) {
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
            let out = treecode::cpu::run::<K, R>(params, &far, targets, sources, o, &mut clock)?;
            stats.runs = 1;
            out
        }
        (Method::Fmm(o), Device::Cpu) => {
            let (out, st, a) = fmm_cpu::<K, R>(problem, params, targets, sources, o)?;
            stats = st;
            achieved = a;
            out
        }
        (Method::Treecode(_) | Method::Fmm(_), Device::Cuda(gpu)) => {
            // The resident path, with the copies on each side.
            let mut clock = Clock::gpu(&mut stats, gpu);
            let src = DeviceParticles::upload(gpu, sources)?;
            let tgt = if same_points(targets, sources) {
                DeviceParticles::targets_at_sources(gpu, targets)?
            } else {
                DeviceParticles::upload(gpu, targets)?
            };
            clock.lap(Stage::Upload)?;
            let ev = evaluate_resident::<K, R>(gpu, method, *problem, &tgt, &src)?;
            let t = std::time::Instant::now();
            let out = ev.outputs.download(gpu)?;
            let upload = stats.seconds(Stage::Upload);
            stats = ev.stats;
            stats.stages.insert(0, (Stage::Upload, upload));
            stats.add(Stage::Download, t.elapsed().as_secs_f64());
            achieved = ev.achieved;
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

/// The FMM on the CPU, at fixed settings or driven by a tolerance (the
/// error estimated against the f64 direct sum on sampled targets).
fn fmm_cpu<K: Kernel, R: Real>(
    problem: &Problem<'_>,
    params: &[R],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &FmmOptions,
) -> Result<(Outputs<R>, Stats, Option<Achieved>), Error> {
    if let Some(ki) = switched_options::<K>(problem, opts, R::NAME == "f32", false) {
        return fmm_cpu::<K, R>(problem, params, targets, sources, &ki);
    }
    let far = far::plan::<K>(opts.far_field, far::Tree::Fmm)?;
    let run = |settings: Settings, stats: &mut Stats| match &far {
        far::Plan::Monopole { .. } => unreachable!("the FMM has no monopole"),
        far::Plan::Laplace { strength, terms } => {
            let plan = Plan {
                params,
                strength,
                terms,
                settings,
                opts,
            };
            fmm::cpu::run::<K, R>(&plan, targets, sources, &mut Clock::cpu(stats))
        }
        far::Plan::Nodes(rep) => fmm::cpu_nodes::run::<K, R>(
            params,
            rep,
            settings,
            opts.leaf_size(rep.far_field),
            opts.node_m2l == fmm::NodeM2l::Compressed,
            opts.rank_tolerance,
            targets,
            sources,
            &mut Clock::cpu(stats),
        ),
    };
    match opts.accuracy {
        Accuracy::Fixed { p, theta } => {
            let mut stats = Stats::default();
            let out = run(Settings { p, theta }, &mut stats)?;
            stats.runs = 1;
            Ok((out, stats, None))
        }
        Accuracy::Tolerance(tol) => {
            // The reference sums at the sampled targets, once.
            let t = std::time::Instant::now();
            let idx = reference::sample_indices(targets.len(), tolerance::ERROR_SAMPLES);
            let want = reference::direct_f64_at::<K, R>(
                problem.params,
                targets,
                &idx,
                &sources.to_f64(None),
            );
            let reference_seconds = t.elapsed().as_secs_f64();
            let table = tolerance::cpu_table(far.far_field());
            let f32 = R::NAME == "f32";
            let key = problem_key::<K>(problem, tol, f32, false);
            let driven =
                tolerance::drive(tol, table, far.far_field(), f32, Some(&key), run, |out| {
                    Ok(reference::relative_l2(&reference::at(out, &idx), &want))
                });
            let (out, mut stats, a) = match driven {
                Ok(done) => done,
                Err(stop) if switch_to_nodes::<K>(&stop, opts.far_field, &far, f32) => {
                    tolerance::announce_switch(&stop);
                    tolerance::remember_switch(key);
                    let ki = FmmOptions {
                        far_field: FarField::KernelIndependent,
                        ..opts.clone()
                    };
                    let (out, mut stats, a) =
                        fmm_cpu::<K, R>(problem, params, targets, sources, &ki)?;
                    stats.absorb_time(&stop.spent);
                    return Ok((out, stats, a));
                }
                Err(stop) => return Err(stop.error),
            };
            stats.add(Stage::ErrorEstimate, reference_seconds);
            Ok((out, stats, Some(a)))
        }
    }
}

/// Whether the FMM's tolerance that the far field `far` stopped short of
/// (`stopped`) is to be run again with the kernel-independent far field
/// ([`tolerance::switch_to_nodes`]), kernel `K` able to use it.
fn switch_to_nodes<K: Kernel>(
    stopped: &tolerance::Stopped,
    asked: FarField,
    far: &far::Plan,
    f32: bool,
) -> bool {
    tolerance::switch_to_nodes(stopped, asked, far.far_field(), f32)
        && far::plan::<K>(FarField::KernelIndependent, far::Tree::Fmm).is_ok()
}

/// The key a tolerance's choices (the settings that met it, the switch of
/// the default far field) are remembered by.
fn problem_key<K: Kernel>(
    problem: &Problem<'_>,
    tol: f64,
    f32: bool,
    gpu: bool,
) -> tolerance::ProblemKey {
    tolerance::ProblemKey::new(K::name(), problem.params, tol, f32, gpu)
}

/// The FMM's options with the far field a tolerance chose before for the
/// same problem (the default switched to the nodes: [`tolerance`]'s
/// `remember_switch`), else `None`.
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
        && tolerance::switched_before(&problem_key::<K>(problem, tol, f32, gpu)))
    .then(|| FmmOptions {
        far_field: FarField::KernelIndependent,
        ..opts.clone()
    })
}

/// Whether two particle sets sit at the same points (compared on all
/// cores: for 10^7 points a few milliseconds, against tens for the copy).
fn same_points<R: Real>(a: &Particles<R>, b: &Particles<R>) -> bool {
    use rayon::prelude::*;
    a.len() == b.len()
        && a.positions().iter().zip(b.positions()).all(|(x, y)| {
            std::ptr::eq(*x, y)
                || x.par_chunks(1 << 16)
                    .zip(y.par_chunks(1 << 16))
                    .all(|(p, q)| p == q)
        })
}
