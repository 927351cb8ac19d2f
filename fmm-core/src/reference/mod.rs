//! The f64 reference every accuracy figure is measured against: the direct
//! sum in f64 on sampled targets, and the relative L2 error of outputs
//! against it (as `shared/DESIGN.md` asks: "relative L2 error against an
//! f64 direct sum on sampled targets"). The tolerance-driven FMM, the
//! benchmarks and the tests all measure with this.

pub mod ewald;
pub mod sample;

pub use sample::{estimate, stratified, Estimate};

use rayon::prelude::*;

use crate::kernel::{Kernel, MAX_SLOTS};
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;

/// `k` target indices spread evenly over `m` targets (all of them when
/// `k >= m`).
pub fn sample_indices(m: usize, k: usize) -> Vec<usize> {
    let k = k.min(m);
    (0..k).map(|s| s * m / k).collect()
}

/// The outputs of kernel `K` at the targets `idx` of `targets` from every
/// source, summed in f64 (`params` are the kernel's parameters): one
/// vector per output slot, one value per sampled target.
pub fn direct_f64_at<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    idx: &[usize],
    sources: &Particles<f64>,
) -> Vec<Vec<f64>> {
    let no = K::def().n_outputs();
    let src = sources.source_slices();
    let rows: Vec<Vec<f64>> = idx
        .par_iter()
        .map(|&i| {
            let mut t = [0.0f64; MAX_SLOTS];
            for (tk, slot) in t.iter_mut().zip(targets.slots()) {
                *tk = slot[i].to_f64();
            }
            let xi = targets.position(i).map(|x| x.to_f64());
            let mut out = vec![0.0; no];
            K::p2p_target(params, xi, &t, &src, 0..src.len(), &mut out);
            out
        })
        .collect();
    by_slot(&rows, no)
}

/// Per-target rows of `no` outputs turned into one vector per output
/// slot.
pub(crate) fn by_slot(rows: &[Vec<f64>], no: usize) -> Vec<Vec<f64>> {
    (0..no)
        .map(|k| rows.iter().map(|r| r[k]).collect())
        .collect()
}

/// The relative L2 error of `got` against `want` over every slot and
/// sample: `|got - want| / |want|` (the absolute difference where `want`
/// is all zero).
pub fn relative_l2(got: &[Vec<f64>], want: &[Vec<f64>]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (g, w) in got.iter().zip(want) {
        for (a, b) in g.iter().zip(w) {
            num += (a - b) * (a - b);
            den += b * b;
        }
    }
    if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    }
}

/// The slots of `out` at the targets `idx`, in f64.
pub fn at<R: Real>(out: &Outputs<R>, idx: &[usize]) -> Vec<Vec<f64>> {
    out.slots()
        .iter()
        .map(|s| idx.iter().map(|&i| s[i].to_f64()).collect())
        .collect()
}

/// The relative L2 error of `out` on `samples` targets spread over all
/// (0: every target) against the f64 direct sum of kernel `K`.
pub fn sampled_error<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    out: &Outputs<R>,
    samples: usize,
) -> f64 {
    let k = if samples == 0 { targets.len() } else { samples };
    let idx = sample_indices(targets.len(), k);
    let want = direct_f64_at::<K, R>(params, targets, &idx, &sources.to_f64(None));
    relative_l2(&at(out, &idx), &want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_spread_and_bounded() {
        assert_eq!(sample_indices(10, 5), [0, 2, 4, 6, 8]);
        assert_eq!(sample_indices(3, 8), [0, 1, 2]);
        assert!(sample_indices(0, 8).is_empty());
    }

    #[test]
    fn relative_error_of_a_known_difference() {
        let want = vec![vec![3.0, 0.0], vec![0.0, 4.0]];
        let got = vec![vec![3.0, 0.5], vec![0.0, 4.0]];
        assert!((relative_l2(&got, &want) - 0.1).abs() < 1e-15);
        assert_eq!(relative_l2(&want, &want), 0.0);
        assert_eq!(relative_l2(&[vec![0.5]], &[vec![0.0]]), 0.5);
    }
}
