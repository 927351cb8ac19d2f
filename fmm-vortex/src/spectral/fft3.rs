//! Three-dimensional FFTs of a cube of `n^3` complex values (x fastest:
//! index `(z n + y) n + x`), one axis at a time by rustfft's planned
//! one-dimensional transforms, lines in parallel. Unnormalised both ways,
//! as rustfft's.

use std::sync::Arc;

use rayon::prelude::*;
use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

/// The forward and inverse transforms of a cube of side `n`.
pub struct Fft3 {
    n: usize,
    forward: Arc<dyn Fft<f64>>,
    inverse: Arc<dyn Fft<f64>>,
}

impl Fft3 {
    pub fn new(n: usize) -> Self {
        let mut planner = FftPlanner::new();
        Fft3 {
            n,
            forward: planner.plan_fft_forward(n),
            inverse: planner.plan_fft_inverse(n),
        }
    }

    /// The side.
    pub fn n(&self) -> usize {
        self.n
    }

    /// `sum_x a(x) e^{-i k x}` in place.
    pub fn forward(&self, a: &mut [Complex64]) {
        self.along_every_axis(a, &self.forward);
    }

    /// `sum_k a(k) e^{+i k x}` in place.
    pub fn inverse(&self, a: &mut [Complex64]) {
        self.along_every_axis(a, &self.inverse);
    }

    fn along_every_axis(&self, a: &mut [Complex64], f: &Arc<dyn Fft<f64>>) {
        let n = self.n;
        assert_eq!(a.len(), n * n * n, "a cube of side {n}");
        // x: contiguous lines.
        lines(a, n, f);
        // y and z: the lines gathered into a buffer (y's or z's index
        // fastest), transformed, put back.
        let mut buf = vec![Complex64::default(); a.len()];
        for stride in [n, n * n] {
            // Line `l` of the buffer: the other two indices of the line,
            // `l = (outer, inner)`, its points `stride` apart in `a`.
            let at = |l: usize, t: usize| -> usize {
                let (hi, lo) = (l / n, l % n);
                if stride == n {
                    // y: lo = x, hi = z.
                    (hi * n + t) * n + lo
                } else {
                    // z: lo = x, hi = y.
                    (t * n + hi) * n + lo
                }
            };
            buf.par_chunks_mut(n).enumerate().for_each(|(l, line)| {
                for (t, v) in line.iter_mut().enumerate() {
                    *v = a[at(l, t)];
                }
            });
            lines(&mut buf, n, f);
            // Back: each plane of `a` (a z-plane for y, a y-row block for z)
            // gathered from the buffer.
            a.par_chunks_mut(n).enumerate().for_each(|(row, out)| {
                // `row` = z n + y; x runs along `out`.
                let (z, y) = (row / n, row % n);
                for (x, v) in out.iter_mut().enumerate() {
                    let (l, t) = if stride == n {
                        (z * n + x, y)
                    } else {
                        (y * n + x, z)
                    };
                    *v = buf[l * n + t];
                }
            });
        }
    }
}

/// Every contiguous line of `n` of `a` transformed by `f`, blocks of
/// lines in parallel.
fn lines(a: &mut [Complex64], n: usize, f: &Arc<dyn Fft<f64>>) {
    let block = n * n.clamp(1, 64);
    a.par_chunks_mut(block).for_each(|chunk| {
        let mut scratch = vec![Complex64::default(); f.get_inplace_scratch_len()];
        f.process_with_scratch(chunk, &mut scratch);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transform_is_the_naive_sum_and_inverts() {
        let n = 6;
        let mut a: Vec<Complex64> = (0..n * n * n)
            .map(|i| Complex64::new((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
            .collect();
        let orig = a.clone();
        let f = Fft3::new(n);
        f.forward(&mut a);
        let tau = std::f64::consts::TAU;
        for (k, &got) in a.iter().enumerate().step_by(7) {
            let (kz, ky, kx) = (k / (n * n), (k / n) % n, k % n);
            let mut want = Complex64::default();
            for (x, &v) in orig.iter().enumerate() {
                let (z, y, xx) = (x / (n * n), (x / n) % n, x % n);
                let ph = -tau * ((kx * xx + ky * y + kz * z) as f64) / n as f64;
                want += v * Complex64::from_polar(1.0, ph);
            }
            assert!((got - want).norm() < 1e-12, "{k}: {got} vs {want}");
        }
        f.inverse(&mut a);
        let scale = (n * n * n) as f64;
        for (g, w) in a.iter().zip(&orig) {
            assert!((g / scale - w).norm() < 1e-14);
        }
    }
}
