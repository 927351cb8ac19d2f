//! The FMM driven by a tolerance: the caller gives the relative L2 error it
//! wants and gets the settings chosen for it and the error achieved,
//! measured rather than predicted.
//!
//! Theta is 0.6 (fewer M2L and P2P than 0.5, for a little more order:
//! at 10^6 points in a cube, p = 6 and theta 0.6 gave 3.9e-5 in 2.0 s on 2
//! cores where p = 6 and theta 0.5 gave 1.1e-5 in 2.9 s). The order starts
//! from the table below, measured for gravity without softening at theta
//! 0.6 (f64, 5e4 points in a cube; a Plummer sphere does as well or
//! better, and more points do better), extrapolated by a factor 0.5 per
//! order past p = 16. The error is then estimated on sampled targets
//! against an f64 direct sum (64 targets: 10^6 sources cost 6.4e7
//! interactions, about 3% of the evaluation on 2 cores); while it is above
//! the tolerance the order goes up by one and the FMM runs again.

use super::{fmm_cpu, fmm_cuda, FmmOptions, FmmStats, MAX_GPU_ORDER, MAX_ORDER};
use crate::cuda::Gpu;
use crate::direct::{direct_cpu, Outputs};
use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;

/// Measured error of gravity at theta 0.6 by order (f64, 5e4 points in a
/// cube, `fmm_bench --theta 0.6 --params 0 --precision f64`, 2026-11-22).
const TABLE: [(usize, f64); 9] = [
    (4, 4.6e-4),
    (5, 2.0e-4),
    (6, 9.3e-5),
    (7, 4.7e-5),
    (8, 2.1e-5),
    (10, 6.0e-6),
    (12, 1.5e-6),
    (14, 5.3e-7),
    (16, 1.4e-7),
];

/// The MAC of tolerance-driven evaluations.
pub const TOLERANCE_THETA: f64 = 0.6;

/// Targets the error is estimated on.
pub const ERROR_SAMPLES: usize = 64;

/// What a tolerance-driven evaluation chose and achieved.
#[derive(Clone, Debug, PartialEq)]
pub struct Achieved {
    pub options: FmmOptions,
    /// Relative L2 error of all outputs on the sampled targets against an
    /// f64 direct sum.
    pub estimated_error: f64,
    pub samples: usize,
    /// Whether the estimate is within the tolerance (f32 particles stop
    /// near 1e-6, f64 near 1e-12: a smaller tolerance is not met and this
    /// says so).
    pub met: bool,
}

/// The order the table suggests for `tol`.
fn first_order(tol: f64) -> usize {
    match TABLE.iter().find(|&&(_, e)| e <= tol) {
        Some(&(p, _)) => p,
        None => 16 + (TABLE[8].1 / tol).log2().ceil() as usize,
    }
}

/// The relative L2 error of `out` on targets `idx` against an f64 direct
/// sum.
fn sampled_error<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources64: &Particles<f64>,
    out: &Outputs<R>,
    idx: &[usize],
) -> Result<f64, Error> {
    let t64 = targets.to_f64(Some(idx));
    let want = direct_cpu::<K, f64>(params, &t64, sources64)?;
    let (mut num, mut den) = (0.0, 0.0);
    for (got, want) in out.slots().iter().zip(want.slots()) {
        for (s, &i) in idx.iter().enumerate() {
            let d = got[i].to_f64() - want[s];
            num += d * d;
            den += want[s] * want[s];
        }
    }
    Ok(if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    })
}

/// The FMM of kernel `K` on the CPU at relative L2 error `tol`: theta 0.6,
/// ncrit 64, and the order chosen as the module says.
pub fn fmm_cpu_tolerance<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    tol: f64,
) -> Result<(Outputs<R>, FmmStats, Achieved), Error> {
    drive::<K, R>(params, targets, sources, tol, MAX_ORDER, |o| {
        fmm_cpu::<K, R>(params, targets, sources, o)
    })
}

/// [`fmm_cpu_tolerance`] on `gpu`: the same choice of settings, the orders
/// up to [`MAX_GPU_ORDER`]; the error estimate runs on the CPU.
pub fn fmm_cuda_tolerance<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    tol: f64,
) -> Result<(Outputs<R>, FmmStats, Achieved), Error> {
    drive::<K, R>(params, targets, sources, tol, MAX_GPU_ORDER, |o| {
        fmm_cuda::<K, R>(gpu, params, targets, sources, o)
    })
}

/// Runs `fmm` from the table's order up until the sampled error is within
/// `tol` (or the order reaches `most`).
fn drive<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    tol: f64,
    most: usize,
    mut fmm: impl FnMut(&FmmOptions) -> Result<(Outputs<R>, FmmStats), Error>,
) -> Result<(Outputs<R>, FmmStats, Achieved), Error> {
    if !(tol > 0.0 && tol.is_finite()) {
        return Err(Error::BadOption(format!(
            "the tolerance must be a finite number above 0, not {tol}"
        )));
    }
    let m = targets.len();
    let idx: Vec<usize> = (0..ERROR_SAMPLES.min(m))
        .map(|k| k * m / ERROR_SAMPLES.min(m).max(1))
        .collect();
    let sources64 = sources.to_f64(None);
    let mut options = FmmOptions {
        p: first_order(tol).min(most),
        theta: TOLERANCE_THETA,
        ..FmmOptions::default()
    };
    loop {
        let (out, stats) = fmm(&options)?;
        let e = sampled_error::<K, R>(params, targets, &sources64, &out, &idx)?;
        if !e.is_finite() {
            return Err(Error::NonFinite {
                what: "the FMM's estimated error (outputs sampled against the direct sum) at order"
                    .into(),
                index: options.p,
                value: e,
            });
        }
        if e <= tol || options.p >= most || e < 1e-12 {
            let achieved = Achieved {
                options,
                estimated_error: e,
                samples: idx.len(),
                met: e <= tol,
            };
            return Ok((out, stats, achieved));
        }
        options.p += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributions::plummer;
    use crate::kernels::Gravity;

    #[test]
    fn the_tolerance_is_met_and_measured() {
        let pos = plummer(3000, 3).0;
        let mut s = Particles::sources::<Gravity>(&pos).unwrap();
        s.set("m", &vec![1.0 / 3000.0; 3000]).unwrap();
        let t = Particles::targets::<Gravity>(&pos).unwrap();
        for tol in [1e-3, 1e-5, 1e-8] {
            let (out, _, a) = fmm_cpu_tolerance::<Gravity, f64>(&[0.0], &t, &s, tol).unwrap();
            assert!(a.met && a.estimated_error <= tol, "{tol}: {a:?}");
            // The whole error, not only the sampled one, is near the
            // tolerance.
            let all: Vec<usize> = (0..3000).collect();
            let s64 = s.to_f64(None);
            let e = sampled_error::<Gravity, f64>(&[0.0], &t, &s64, &out, &all).unwrap();
            assert!(e < 3.0 * tol, "{tol}: whole error {e:e}, {a:?}");
        }
        assert!(matches!(
            fmm_cpu_tolerance::<Gravity, f64>(&[0.0], &t, &s, 0.0),
            Err(Error::BadOption(_))
        ));
    }
}
