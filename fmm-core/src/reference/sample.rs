//! Where the error is measured, and how sure the measure is.
//!
//! The targets are stratified over space: ranked along a coarse Morton
//! order of the targets' bounding box (cells in curve order, targets in
//! input order within a cell) and cut into strata of equal count, one
//! target from the middle of each. Every region gets samples in
//! proportion to its targets, so a dense cluster and the sparse field
//! around it are both in, whatever order the caller's points come in
//! (samples spread over the input indices missed the edge of a cluster
//! whose points came as one run).
//!
//! The relative L2 error is a ratio of two sums over all targets, of the
//! squared differences and of the squared reference values; the sample
//! estimates both. Its standard error is the ratio estimator's (the
//! delta method, the strata taken as a simple random sample: larger than
//! the stratified one, so on the safe side). [`Estimate::bound`], the
//! estimate plus three standard errors, is what a tolerance is checked
//! against.

use rayon::prelude::*;

use crate::particles::Particles;
use crate::real::Real;

/// Coarse cells a side at most (`2^MAX_LEVEL`).
const MAX_LEVEL: u32 = 10;

/// `k` targets of `targets` stratified over space (all of them where
/// there are at most `k`), in increasing index order.
pub fn stratified<R: Real>(targets: &Particles<R>, k: usize) -> Vec<usize> {
    let m = targets.len();
    if k >= m {
        return (0..m).collect();
    }
    if k == 0 {
        return Vec::new();
    }
    let pos = targets.positions();
    let (lo, hi) = bounds(pos);
    // Cells enough that a stratum spans a few of them in a uniform cube.
    let level = (((4 * k) as f64).log2() / 3.0)
        .ceil()
        .clamp(1.0, MAX_LEVEL as f64) as u32;
    let side = (1u64 << level) as f64;
    let cell_of = |i: usize| -> u32 {
        let mut c = [0u32; 3];
        for a in 0..3 {
            let w = hi[a] - lo[a];
            let x = if w > 0.0 {
                (pos[a][i].to_f64() - lo[a]) / w * side
            } else {
                0.0
            };
            c[a] = (x as u64).min((1u64 << level) - 1) as u32;
        }
        morton(c, level)
    };
    let cells: Vec<u32> = (0..m).into_par_iter().map(cell_of).collect();
    let mut start = vec![0usize; 1 << (3 * level)];
    for &c in &cells {
        start[c as usize] += 1;
    }
    let mut sum = 0;
    for s in start.iter_mut() {
        let n = *s;
        *s = sum;
        sum += n;
    }
    // The rank (along the curve) each stratum takes: the middle of its run.
    let want: Vec<usize> = (0..k)
        .map(|s| (s * m / k + ((s + 1) * m / k)) / 2)
        .collect();
    // The cell holding each wanted rank, and the rank's offset there;
    // then one pass in input order finds the targets at those offsets.
    let mut need: Vec<Vec<usize>> = vec![Vec::new(); start.len()];
    for &r in &want {
        let c = start.partition_point(|&s| s <= r) - 1;
        need[c].push(r - start[c]);
    }
    let mut seen = vec![0usize; start.len()];
    let mut picked = Vec::with_capacity(k);
    for (i, &c) in cells.iter().enumerate() {
        let c = c as usize;
        if !need[c].is_empty() && need[c].contains(&seen[c]) {
            picked.push(i);
        }
        seen[c] += 1;
    }
    picked.sort_unstable();
    picked
}

/// The bounding box of the points, in f64.
fn bounds<R: Real>(pos: [&[R]; 3]) -> ([f64; 3], [f64; 3]) {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for a in 0..3 {
        let (l, h) = pos[a].par_iter().map(|x| (x.to_f64(), x.to_f64())).reduce(
            || (f64::INFINITY, f64::NEG_INFINITY),
            |a, b| (a.0.min(b.0), a.1.max(b.1)),
        );
        lo[a] = l;
        hi[a] = h;
    }
    (lo, hi)
}

/// The Morton index of cell `c` at `level` bits an axis.
fn morton(c: [u32; 3], level: u32) -> u32 {
    let mut key = 0u32;
    for b in (0..level).rev() {
        for &x in &c {
            key = (key << 1) | ((x >> b) & 1);
        }
    }
    key
}

/// The relative L2 error measured on a sample, with its uncertainty.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// `sqrt(sum |got - want|^2 / sum |want|^2)` over the sample.
    pub value: f64,
    /// The standard error of `value` (0 where every target was sampled).
    pub standard_error: f64,
    /// The targets sampled (0: every target, no sampling uncertainty).
    pub samples: usize,
}

impl From<f64> for Estimate {
    /// An error known exactly.
    fn from(value: f64) -> Self {
        Estimate {
            value,
            standard_error: 0.0,
            samples: 0,
        }
    }
}

impl Estimate {
    /// The estimate on the safe side, what a tolerance is met by: plus
    /// three standard errors, and at least `1 / sqrt(samples)` of itself
    /// (a sample that agrees with itself still leaves out the targets it
    /// missed). Three would be 99.9% one-sided were the sample mean near
    /// normal; the FMM's errors gather on few targets, and on half of
    /// 10^4 points at one spot (p 9 to 13, theta 0.4 to 0.55) the bound
    /// of a stratified sample drawn at random within its strata was below
    /// the whole error in 5 to 10% of draws of 64 targets and 0.5 to 1.5%
    /// of 256; the sample [`stratified`] takes (the middle of each
    /// stratum) missed at one setting of nine at 64 and at none at 256
    /// (the `error_samples` example;
    /// [`crate::accuracy::cpu_error_samples`]).
    pub fn bound(&self) -> f64 {
        let least = if self.samples > 0 {
            self.value / (self.samples as f64).sqrt()
        } else {
            0.0
        };
        self.value + (3.0 * self.standard_error).max(least)
    }
}

/// Outputs at sampled targets and their f64 references (one vector per
/// output slot, one value per target): what an [`Estimate`] is made of,
/// and what two samples pool into one.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sampled {
    pub got: Vec<Vec<f64>>,
    pub want: Vec<Vec<f64>>,
    /// Every target sampled (no sampling uncertainty).
    pub exhaustive: bool,
}

impl Sampled {
    /// The error on this sample ([`estimate`]).
    pub(crate) fn estimate(&self) -> Estimate {
        estimate(&self.got, &self.want, self.exhaustive)
    }

    /// This sample's targets and `more`'s as one sample (`more` where it
    /// is every target).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn pooled(mut self, more: Sampled) -> Sampled {
        if more.exhaustive {
            return more;
        }
        for (a, b) in self.got.iter_mut().zip(more.got) {
            a.extend(b);
        }
        for (a, b) in self.want.iter_mut().zip(more.want) {
            a.extend(b);
        }
        self.exhaustive = false;
        self
    }
}

/// The error of `got` against `want` (one vector per output slot, one
/// value per sampled target), `exhaustive` where the sample is every
/// target (no sampling uncertainty).
pub fn estimate(got: &[Vec<f64>], want: &[Vec<f64>], exhaustive: bool) -> Estimate {
    let n = want.first().map_or(0, Vec::len);
    // Per target: squared difference and squared reference, over slots.
    let mut d = vec![0.0f64; n];
    let mut w = vec![0.0f64; n];
    for (g, r) in got.iter().zip(want) {
        for i in 0..n {
            d[i] += (g[i] - r[i]) * (g[i] - r[i]);
            w[i] += r[i] * r[i];
        }
    }
    let (sd, sw): (f64, f64) = (d.iter().sum(), w.iter().sum());
    if sw == 0.0 {
        // No reference to be relative to: the absolute difference.
        return Estimate {
            value: sd.sqrt(),
            standard_error: 0.0,
            samples: 0,
        };
    }
    let ratio = sd / sw;
    let value = ratio.sqrt();
    if exhaustive || n < 2 {
        return Estimate {
            value,
            standard_error: 0.0,
            samples: 0,
        };
    }
    // Delta method for the ratio of means: var = s^2(d - R w) / (n wbar^2).
    let wbar = sw / n as f64;
    let var_terms: f64 = d
        .iter()
        .zip(&w)
        .map(|(di, wi)| (di - ratio * wi).powi(2))
        .sum::<f64>()
        / (n - 1) as f64;
    let se_ratio = (var_terms / n as f64).sqrt() / wbar;
    // d sqrt(R) = dR / (2 sqrt R); where R is 0, the bound is sqrt(se).
    let standard_error = if value > 0.0 {
        se_ratio / (2.0 * value)
    } else {
        se_ratio.sqrt()
    };
    Estimate {
        value,
        standard_error,
        samples: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Gravity;

    fn points(n: usize) -> Particles<f64> {
        let pos = crate::distributions::uniform_cube(n, 3);
        Particles::targets::<Gravity>(&pos).unwrap()
    }

    /// Strata of equal count: a cube's samples spread over all its octants,
    /// each target taken once, and every target where there are few.
    #[test]
    fn strata_cover_space() {
        let t = points(20_000);
        let idx = stratified(&t, 64);
        assert_eq!(idx.len(), 64);
        assert!(idx.windows(2).all(|w| w[0] < w[1]));
        let mut octants = [0; 8];
        for &i in &idx {
            let p = t.position(i);
            let o = (0..3).fold(0, |o, a| o * 2 + usize::from(p[a] > 0.5));
            octants[o] += 1;
        }
        assert!(
            octants.iter().all(|&c| (6..=10).contains(&c)),
            "{octants:?}"
        );
        assert_eq!(stratified(&points(10), 64), (0..10).collect::<Vec<_>>());
    }

    /// A cluster given as one run of indices, half the points: half the
    /// samples in it, whichever the order of the points.
    #[test]
    fn a_cluster_gets_its_share() {
        let mut pos = crate::distributions::uniform_cube(10_000, 5);
        for p in pos.iter_mut().skip(5000).take(100) {
            *p = [0.5 + 1e-3 * p[0], 0.5 + 1e-3 * p[1], 0.5 + 1e-3 * p[2]];
        }
        let t = Particles::targets::<Gravity>(&pos).unwrap();
        let idx = stratified(&t, 100);
        let inside = idx.iter().filter(|&&i| (5000..5100).contains(&i)).count();
        assert!(
            (1..=2).contains(&inside),
            "{inside} of 100 in a cluster of 1%"
        );
    }

    /// The estimate of a known error, and an uncertainty that shrinks as
    /// the sample agrees with itself.
    #[test]
    fn the_estimate_and_its_uncertainty() {
        let want = vec![vec![1.0; 50]];
        let even = vec![vec![1.01; 50]];
        let e = estimate(&even, &want, false);
        assert!((e.value - 0.01).abs() < 1e-12 && e.standard_error < 1e-12);
        // One target carries the whole difference: a large uncertainty.
        let mut spiky = vec![vec![1.0; 50]];
        spiky[0][7] = 1.5;
        let s = estimate(&spiky, &want, false);
        assert!(s.standard_error > 0.4 * s.value, "{s:?}");
        assert_eq!(estimate(&spiky, &want, true).standard_error, 0.0);
        assert!(s.bound() > s.value);
    }
}
