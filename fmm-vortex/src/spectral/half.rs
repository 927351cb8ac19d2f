//! Three-dimensional FFTs of real values (x fastest, as [`super::Fft3`]'s
//! cubes), half the spectrum kept: along x a real transform (realfft) to
//! the modes `0..=n/2` of each line (`h = n/2 + 1`; a real line's others
//! are their conjugates), then complex transforms along y and z of the `h`
//! columns. Unnormalised both ways, as rustfft's.
//!
//! Why: the remeshed lattice's vorticity is real, and its filter
//! ([`crate::remesh::filter_lattice`], across processes
//! `filter_lattice_partitioned`) transformed each component as a complex
//! cube: twice the transforms' work, and across processes twice the
//! values moved between slabs and pencils.
//!
//! A plane of the spectrum is `n` rows (y) of `h` modes (x); a slab of
//! planes or a whole cube lays them one after another (z slowest), as
//! the values' planes.

use std::sync::Arc;

use rayon::prelude::*;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

use super::fft3::{along_z, transform_lines, Room};

/// The transforms of real cubes (or slabs of planes) of side `n`.
pub struct HalfFft3 {
    n: usize,
    r2c: Arc<dyn RealToComplex<f64>>,
    c2r: Arc<dyn ComplexToReal<f64>>,
    forward: Arc<dyn Fft<f64>>,
    inverse: Arc<dyn Fft<f64>>,
}

impl HalfFft3 {
    pub fn new(n: usize) -> Self {
        let mut real = RealFftPlanner::new();
        let mut complex = FftPlanner::new();
        HalfFft3 {
            n,
            r2c: real.plan_fft_forward(n),
            c2r: real.plan_fft_inverse(n),
            forward: complex.plan_fft_forward(n),
            inverse: complex.plan_fft_inverse(n),
        }
    }

    /// The modes kept along x: `n / 2 + 1`.
    pub fn h(&self) -> usize {
        self.n / 2 + 1
    }

    /// The x and y lines of each plane of `a` (planes of `n^2` real
    /// values, as many as it holds: a slab of the cube): planes of `n`
    /// rows of `h` modes.
    pub fn planes_forward(&self, a: &[f64]) -> Vec<Complex64> {
        let (n, h) = (self.n, self.h());
        assert_eq!(a.len() % (n * n), 0, "planes of side {n}");
        let mut out = vec![Complex64::default(); a.len() / n * h];
        let all = vec![true; n];
        let f = &*self.forward;
        out.par_chunks_mut(n * h)
            .zip(a.par_chunks(n * n))
            .for_each_init(
                || (Room::new(n, f), vec![0.0; n], self.r2c.make_scratch_vec()),
                |(room, line, scratch), (modes, values)| {
                    for (to, from) in modes.chunks_exact_mut(h).zip(values.chunks_exact(n)) {
                        line.copy_from_slice(from);
                        self.r2c
                            .process_with_scratch(line, to, scratch)
                            .expect("lengths of the plan");
                    }
                    let mut lines: Vec<&mut [Complex64]> = modes.chunks_exact_mut(h).collect();
                    transform_lines(&mut lines, f, &all, &all, room);
                },
            );
        out
    }

    /// [`Self::planes_forward`] undone: the y lines, then each x line to
    /// its `n` real values (the real part of the full spectrum's inverse,
    /// whose modes past `n / 2` are the conjugates of these: the imaginary
    /// parts of a line's first mode, and of its last for even `n`, are
    /// not read). `a` is left as scratch.
    pub fn planes_inverse(&self, a: &mut [Complex64]) -> Vec<f64> {
        let (n, h) = (self.n, self.h());
        assert_eq!(a.len() % (n * h), 0, "planes of {n} rows of {h}");
        let mut out = vec![0.0; a.len() / h * n];
        let all = vec![true; n];
        let f = &*self.inverse;
        out.par_chunks_mut(n * n)
            .zip(a.par_chunks_mut(n * h))
            .for_each_init(
                || (Room::new(n, f), self.c2r.make_scratch_vec()),
                |(room, scratch), (values, modes)| {
                    let mut lines: Vec<&mut [Complex64]> = modes.chunks_exact_mut(h).collect();
                    transform_lines(&mut lines, f, &all, &all, room);
                    for (to, from) in values.chunks_exact_mut(n).zip(modes.chunks_exact_mut(h)) {
                        from[0].im = 0.0;
                        if n.is_multiple_of(2) {
                            from[h - 1].im = 0.0;
                        }
                        self.c2r
                            .process_with_scratch(from, to, scratch)
                            .expect("lengths of the plan");
                    }
                },
            );
        out
    }

    /// The lines along the slowest axis of `a`: `n` planes of `rows` rows
    /// of `h` modes (a slab of y rows holding every z), forward or
    /// `inverse`.
    pub fn across_planes(&self, a: &mut [Complex64], rows: usize, inverse: bool) {
        let all = vec![true; self.n];
        let f = if inverse {
            &*self.inverse
        } else {
            &*self.forward
        };
        along_z(a, (self.n, rows, self.h()), f, &all, &all);
    }

    /// The spectrum of the real cube `a` of side `n`.
    pub fn forward(&self, a: &[f64]) -> Vec<Complex64> {
        let mut modes = self.planes_forward(a);
        self.across_planes(&mut modes, self.n, false);
        modes
    }

    /// [`Self::forward`] undone (unnormalised), `modes` left as scratch.
    pub fn inverse(&self, modes: &mut [Complex64]) -> Vec<f64> {
        self.across_planes(modes, self.n, true);
        self.planes_inverse(modes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spectral::Fft3;

    /// The half spectrum is the full complex transform's modes `x <=
    /// n/2`, for even and odd sides; the inverse gives the values back
    /// (times `n^3`).
    #[test]
    fn the_half_spectrum_is_the_full_ones_first_half() {
        for n in [6, 7, 8] {
            let h = n / 2 + 1;
            let values: Vec<f64> = (0..n * n * n)
                .map(|i| (i as f64 * 0.618_033_988_75).fract() - 0.5)
                .collect();
            let half = HalfFft3::new(n);
            let mut modes = half.forward(&values);
            let mut full: Vec<Complex64> = values.iter().map(|&v| Complex64::new(v, 0.0)).collect();
            Fft3::new(n).forward(&mut full);
            let worst = (0..n * n * h)
                .map(|i| (modes[i] - full[(i / h) * n + i % h]).norm())
                .fold(0.0, f64::max);
            assert!(worst < 1e-12, "{n}: {worst:e}");
            let back = half.inverse(&mut modes);
            let scale = (n * n * n) as f64;
            let worst = back
                .iter()
                .zip(&values)
                .map(|(b, v)| (b / scale - v).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-14, "{n}: {worst:e}");
        }
    }
}
