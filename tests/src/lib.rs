//! Shared helpers of the integration tests in `tests/tests/`.

/// Relative L2 error of `got` against `want`: `|got - want| / |want|`.
pub fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

use fmm_core::{evaluate, Backend, Error, FmmOptions, Kernel, Method, Outputs, Particles, Real};
use fmm_core::{Stats, TreeOptions};

/// The direct sum on the CPU, through the front door: the reference the
/// tests compare with.
pub fn direct_cpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Outputs<R>, Error> {
    Ok(evaluate::<K, R>(Backend::Cpu, &Method::direct(), params, targets, sources)?.outputs)
}

/// The treecode on the CPU, through the front door.
pub fn treecode_cpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &TreeOptions,
) -> Result<(Outputs<R>, Stats), Error> {
    let ev = evaluate::<K, R>(
        Backend::Cpu,
        &Method::Treecode(*opts),
        params,
        targets,
        sources,
    )?;
    Ok((ev.outputs, ev.stats))
}

/// The FMM on the CPU, through the front door.
pub fn fmm_cpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &FmmOptions,
) -> Result<(Outputs<R>, Stats), Error> {
    let ev = evaluate::<K, R>(
        Backend::Cpu,
        &Method::Fmm(opts.clone()),
        params,
        targets,
        sources,
    )?;
    Ok((ev.outputs, ev.stats))
}

/// FMM options of order `p`, MAC `theta` and leaves of at most `ncrit`.
pub fn fmm_options(p: usize, theta: f64, ncrit: usize) -> FmmOptions {
    FmmOptions {
        ncrit,
        ..FmmOptions::fixed(p, theta)
    }
}

/// The FMM on the GPU (`Backend::Cuda`: the process's GPU), through the
/// front door.
pub fn fmm_gpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &FmmOptions,
) -> Result<(Outputs<R>, Stats), Error> {
    let ev = evaluate::<K, R>(
        Backend::Cuda,
        &Method::Fmm(opts.clone()),
        params,
        targets,
        sources,
    )?;
    Ok((ev.outputs, ev.stats))
}

/// The direct sum on the GPU, through the front door.
pub fn direct_gpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &fmm_core::DirectOptions,
) -> Result<Outputs<R>, Error> {
    let method = Method::Direct(opts.clone());
    Ok(evaluate::<K, R>(Backend::Cuda, &method, params, targets, sources)?.outputs)
}

/// The treecode on the GPU, through the front door.
pub fn treecode_gpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &TreeOptions,
) -> Result<(Outputs<R>, Stats), Error> {
    let ev = evaluate::<K, R>(
        Backend::Cuda,
        &Method::Treecode(*opts),
        params,
        targets,
        sources,
    )?;
    Ok((ev.outputs, ev.stats))
}
