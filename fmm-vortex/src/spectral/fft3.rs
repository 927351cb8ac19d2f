//! Three-dimensional FFTs of a cube of complex values (x fastest: index
//! `(z n + y) n + x`), one axis at a time by rustfft's planned
//! one-dimensional transforms, in parallel. Unnormalised both ways, as
//! rustfft's.
//!
//! Two things beside the plain transform ([`Fft3`]) serve the spectral
//! solver's nonlinear term:
//!
//! - [`PaddedFft3`]: the 3/2 rule's transforms between the `n^3` kept
//!   coefficients and the `(3n/2)^3` padded grid, pruned: a line is
//!   transformed only where it can hold a non-zero value (inverse) or
//!   where its values are kept (forward).
//! - [`pair_real`] and [`unpair_real`]: two real fields in one complex
//!   transform (the real and the imaginary part), which halves the
//!   transforms of the real velocity and vorticity and of their product.
//!
//! The transforms are bound by moving the cube through memory more than by
//! their arithmetic (at `n = 64`, gathering and scattering the lines took
//! about as long as transforming them), so each moves the cube twice
//! rather than three times: the x and y lines of
//! each z plane are transformed together while the plane is in cache, and
//! the z lines in a pass of their own. Lines along y or z are transformed
//! a tile of x-adjacent ones at a time, gathered into a small buffer (one
//! line after another, as rustfft takes them) and put back, in place.

use std::sync::Arc;

use rayon::prelude::*;
use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

/// Lines along y or z transformed together: x-adjacent, so that each
/// of their points is one contiguous run of the cube.
const TILE: usize = 32;

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
        self.along_every_axis(a, &*self.forward);
    }

    /// `sum_k a(k) e^{+i k x}` in place.
    pub fn inverse(&self, a: &mut [Complex64]) {
        self.along_every_axis(a, &*self.inverse);
    }

    /// The x and y lines of each z plane of `a` (planes of `n^2`, as
    /// many as it holds: a slab of the cube), forward or `inverse`.
    pub fn planes(&self, a: &mut [Complex64], inverse: bool) {
        self.xy(a, self.plan(inverse));
    }

    /// The lines along the slowest axis of `a`: `n` planes of `rows` rows
    /// of `n` (a slab of y rows holding every z), forward or `inverse`.
    pub fn across_planes(&self, a: &mut [Complex64], rows: usize, inverse: bool) {
        let all = vec![true; self.n];
        along_z(a, (self.n, rows, self.n), self.plan(inverse), &all, &all);
    }

    fn plan(&self, inverse: bool) -> &dyn Fft<f64> {
        if inverse {
            &*self.inverse
        } else {
            &*self.forward
        }
    }

    fn along_every_axis(&self, a: &mut [Complex64], f: &dyn Fft<f64>) {
        let n = self.n;
        assert_eq!(a.len(), n * n * n, "a cube of side {n}");
        let all = vec![true; n];
        self.xy(a, f);
        along_z(a, (n, n, n), f, &all, &all);
    }

    /// x and y, plane by plane.
    fn xy(&self, a: &mut [Complex64], f: &dyn Fft<f64>) {
        let n = self.n;
        assert_eq!(a.len() % (n * n), 0, "planes of side {n}");
        let all = vec![true; n];
        a.par_chunks_mut(n * n).for_each_init(
            || Room::new(n, f),
            |room, plane| {
                f.process_with_scratch(plane, &mut room.scratch);
                let mut lines: Vec<&mut [Complex64]> = plane.chunks_exact_mut(n).collect();
                transform_lines(&mut lines, f, &all, &all, room);
            },
        );
    }
}

/// The 3/2 rule's transforms: between the coefficients of a cube of side
/// `n` (the kept modes, integers `-n/2 + 1 ..= n/2 - 1` a side; the
/// Nyquist index `n/2` is neither read nor made) and the values on the
/// padded grid of side `m = 3n/2` (the same modes, zero past them).
///
/// Pruned: in the inverse the padded cube is zero outside the kept modes,
/// so only the kept z planes' x and y lines are transformed (the x lines
/// only at the kept y, `(n-1)^2` of the `m^2`), the zeros between are
/// never read, and the z lines read only their kept points; in the
/// forward transform the z lines are transformed first and only their
/// kept values written, then on those planes the y lines, only their kept
/// values written, then the x lines of the kept y. Each is the full
/// transform's result to round-off, with 4/9 of the x lines' and 2/3 of
/// the y lines' work.
pub struct PaddedFft3 {
    n: usize,
    m: usize,
    forward: Arc<dyn Fft<f64>>,
    inverse: Arc<dyn Fft<f64>>,
    /// Whether each index of a padded axis is a kept mode's.
    kept: Vec<bool>,
}

impl PaddedFft3 {
    /// The transforms of the coefficients of side `n` (even) on the grid
    /// of side `3n/2`.
    pub fn new(n: usize) -> Self {
        assert!(n >= 2 && n.is_multiple_of(2), "an even side, not {n}");
        let m = 3 * n / 2;
        let mut planner = FftPlanner::new();
        PaddedFft3 {
            n,
            m,
            forward: planner.plan_fft_forward(m),
            inverse: planner.plan_fft_inverse(m),
            kept: (0..m).map(|i| i < n / 2 || i > m - n / 2).collect(),
        }
    }

    /// The padded grid's side.
    pub fn m(&self) -> usize {
        self.m
    }

    /// The padded index of index `i < n` of a coefficient axis (the
    /// negative wavenumbers at the padded axis' end).
    fn padded(&self, i: usize) -> usize {
        if i < self.n / 2 {
            i
        } else {
            i + self.m - self.n
        }
    }

    /// `p(x) = sum_k a(k) e^{+i k x}` on the `m^3` padded grid, `k` over
    /// the kept modes of the `n^3` coefficients `a`. `p`'s contents on
    /// entry are not read.
    pub fn inverse(&self, a: &[Complex64], p: &mut [Complex64]) {
        let (n, m, half) = (self.n, self.m, self.n / 2);
        assert_eq!(a.len(), n * n * n, "coefficients of side {n}");
        assert_eq!(p.len(), m * m * m, "a padded grid of side {m}");
        let f = &*self.inverse;
        let all = vec![true; m];
        // The kept planes, each with its coefficients' plane.
        let planes: Vec<(&mut [Complex64], &[Complex64])> = p
            .chunks_mut(m * m)
            .enumerate()
            .filter(|(z, _)| self.kept[*z])
            .map(|(_, plane)| plane)
            .zip(
                a.chunks(n * n)
                    .enumerate()
                    .filter(|(z, _)| *z != half)
                    .map(|(_, c)| c),
            )
            .collect();
        planes.into_par_iter().for_each_init(
            || Room::new(m, f),
            |room, (plane, coefficients)| {
                // x: the kept rows, the coefficients at their padded
                // indices, zeros between.
                for (y, c) in coefficients.chunks_exact(n).enumerate() {
                    if y != half {
                        let row = &mut plane[self.padded(y) * m..][..m];
                        row[..half].copy_from_slice(&c[..half]);
                        row[half..=m - half].fill(Complex64::default());
                        row[m - half + 1..].copy_from_slice(&c[half + 1..]);
                        f.process_with_scratch(row, &mut room.scratch);
                    }
                }
                // y: non-zero at the kept y.
                let mut lines: Vec<&mut [Complex64]> = plane.chunks_exact_mut(m).collect();
                transform_lines(&mut lines, f, &self.kept, &all, room);
            },
        );
        // z: non-zero at the kept z.
        along_z(p, (m, m, m), f, &self.kept, &all);
    }

    /// `a(k) = sum_x p(x) e^{-i k x}` at the kept modes of the `n^3`
    /// coefficients, the Nyquist indices' set to zero; `p` (the `m^3`
    /// padded grid's values) is overwritten.
    pub fn forward(&self, p: &mut [Complex64], a: &mut [Complex64]) {
        let (n, m, half) = (self.n, self.m, self.n / 2);
        assert_eq!(a.len(), n * n * n, "coefficients of side {n}");
        assert_eq!(p.len(), m * m * m, "a padded grid of side {m}");
        let f = &*self.forward;
        let all = vec![true; m];
        // z: its kept values written.
        along_z(p, (m, m, m), f, &all, &self.kept);
        a[half * n * n..][..n * n].fill(Complex64::default());
        // The kept planes, each with its coefficients' plane.
        let planes: Vec<(&mut [Complex64], &mut [Complex64])> = p
            .chunks_mut(m * m)
            .enumerate()
            .filter(|(z, _)| self.kept[*z])
            .map(|(_, plane)| plane)
            .zip(
                a.chunks_mut(n * n)
                    .enumerate()
                    .filter(|(z, _)| *z != half)
                    .map(|(_, c)| c),
            )
            .collect();
        planes.into_par_iter().for_each_init(
            || Room::new(m, f),
            |room, (plane, coefficients)| {
                // y: its kept values written.
                let mut lines: Vec<&mut [Complex64]> = plane.chunks_exact_mut(m).collect();
                transform_lines(&mut lines, f, &all, &self.kept, room);
                // x: the kept rows, their kept values to the coefficients.
                for (y, c) in coefficients.chunks_exact_mut(n).enumerate() {
                    if y == half {
                        c.fill(Complex64::default());
                    } else {
                        let row = &mut plane[self.padded(y) * m..][..m];
                        f.process_with_scratch(row, &mut room.scratch);
                        c[..half].copy_from_slice(&row[..half]);
                        c[half] = Complex64::default();
                        c[half + 1..].copy_from_slice(&row[m - half + 1..]);
                    }
                }
            },
        );
    }
}

/// The coefficients of two real fields in one array: `out = H(a) + i
/// H(b)` on a cube of side `n`, where `H(a)_k = (a_k + conj a_{-k}) / 2`
/// is the Hermitian part, the coefficients of the real part of `a`'s
/// field. The inverse transform of `out` is then the real part of `a`'s
/// field plus `i` times that of `b`'s (for Hermitian `a` and `b`, the
/// coefficients of real fields, `H` changes nothing).
pub fn pair_real(n: usize, a: &[Complex64], b: &[Complex64], out: &mut [Complex64]) {
    assert!(a.len() == n * n * n && b.len() == a.len() && out.len() == a.len());
    out.par_chunks_mut(n).enumerate().for_each(|(r, out)| {
        let (row, mirror) = (r * n..r * n + n, mirror_row(r, n));
        let a = a[row.clone()].iter().zip(mirrored(&a[mirror.clone()]));
        let b = b[row].iter().zip(mirrored(&b[mirror]));
        for (v, ((a, a_), (b, b_))) in out.iter_mut().zip(a.zip(b)) {
            let ha = (a + a_.conj()) * 0.5;
            let hb = (b + b_.conj()) * 0.5;
            *v = Complex64::new(ha.re - hb.im, ha.im + hb.re);
        }
    });
}

/// [`pair_real`]'s forward counterpart: from `z`, the transform of `f + i
/// g` for real `f` and `g` on a cube of side `n`, the transforms of `f`
/// and `g` times `scale`: `F_k = (z_k + conj z_{-k}) / 2`, `G_k = (z_k -
/// conj z_{-k}) / 2i`.
pub fn unpair_real(
    n: usize,
    z: &[Complex64],
    scale: f64,
    f: &mut [Complex64],
    g: &mut [Complex64],
) {
    assert!(z.len() == n * n * n && f.len() == z.len() && g.len() == z.len());
    f.par_chunks_mut(n)
        .zip(g.par_chunks_mut(n))
        .enumerate()
        .for_each(|(r, (f, g))| {
            let z = z[r * n..r * n + n]
                .iter()
                .zip(mirrored(&z[mirror_row(r, n)]));
            for ((f, g), (z, z_)) in f.iter_mut().zip(g.iter_mut()).zip(z) {
                let (s, d) = (z + z_.conj(), z - z_.conj());
                *f = s * (0.5 * scale);
                *g = Complex64::new(d.im, -d.re) * (0.5 * scale);
            }
        });
}

/// The indices of row `(-z, -y)` of row `r = z n + y` of a cube of side
/// `n`.
fn mirror_row(r: usize, n: usize) -> std::ops::Range<usize> {
    let (z, y) = (r / n, r % n);
    let start = (((n - z) % n) * n + (n - y) % n) * n;
    start..start + n
}

/// A row's values at `-x`, `x` from 0: `row[0]`, then the rest reversed.
fn mirrored(row: &[Complex64]) -> impl Iterator<Item = &Complex64> {
    row[..1].iter().chain(row[1..].iter().rev())
}

/// A thread's room for transforming lines: a tile's buffer and
/// rustfft's scratch.
pub(super) struct Room {
    tile: Vec<Complex64>,
    pub(super) scratch: Vec<Complex64>,
}

impl Room {
    pub(super) fn new(m: usize, f: &dyn Fft<f64>) -> Self {
        Room {
            tile: vec![Complex64::default(); TILE * m],
            scratch: vec![Complex64::default(); f.get_inplace_scratch_len()],
        }
    }
}

/// The z lines of `a`, `m` planes of `rows` rows of `width` (the cube of
/// side `m` where `rows` and `width` are `m`), transformed in place by
/// `f`: point `t` of a line read only where `nonzero[t]` (the others taken
/// to be zero, whatever is stored there), its transform's value `t`
/// written only where `wanted[t]` (the others left as they were).
///
/// The tasks, in parallel, are the rows of one y across the planes, split
/// into a few x ranges: enough for every thread to keep busy, each a whole
/// number of tiles wide.
pub(super) fn along_z(
    a: &mut [Complex64],
    (m, rows, width): (usize, usize, usize),
    f: &dyn Fft<f64>,
    nonzero: &[bool],
    wanted: &[bool],
) {
    assert_eq!(
        a.len(),
        m * rows * width,
        "{m} planes of {rows} rows of {width}"
    );
    let tiles = width.div_ceil(TILE);
    let parts = (4 * rayon::current_num_threads())
        .div_ceil(rows.max(1))
        .clamp(1, tiles);
    let span = tiles.div_ceil(parts) * TILE;
    let parts = width.div_ceil(span);
    // Task `y parts + q`: the `q`th x range of the rows of `y`, point `z`
    // of its lines in its `z`th row (the rows come in order of `z`).
    let mut tasks: Vec<Vec<&mut [Complex64]>> =
        (0..rows * parts).map(|_| Vec::with_capacity(m)).collect();
    for (r, row) in a.chunks_mut(width).enumerate() {
        for (q, piece) in row.chunks_mut(span).enumerate() {
            tasks[(r % rows) * parts + q].push(piece);
        }
    }
    tasks.into_par_iter().for_each_init(
        || Room::new(m, f),
        |room, mut lines| transform_lines(&mut lines, f, nonzero, wanted, room),
    );
}

/// The lines whose point `t` is in `lines[t]` (a line for each place
/// across it), transformed in place by `f`, [`TILE`] at a time: point `t`
/// read only where `nonzero[t]` (else taken to be zero), value `t`
/// written only where `wanted[t]`.
pub(super) fn transform_lines(
    lines: &mut [&mut [Complex64]],
    f: &dyn Fft<f64>,
    nonzero: &[bool],
    wanted: &[bool],
    room: &mut Room,
) {
    let len = lines.len();
    let width = lines[0].len();
    for x0 in (0..width).step_by(TILE) {
        let w = TILE.min(width - x0);
        let tile = &mut room.tile[..w * len];
        for (t, row) in lines.iter().enumerate() {
            if nonzero[t] {
                for (line, &v) in tile.chunks_exact_mut(len).zip(&row[x0..x0 + w]) {
                    line[t] = v;
                }
            } else {
                for line in tile.chunks_exact_mut(len) {
                    line[t] = Complex64::default();
                }
            }
        }
        f.process_with_scratch(tile, &mut room.scratch);
        for (t, row) in lines.iter_mut().enumerate() {
            if wanted[t] {
                for (v, line) in row[x0..x0 + w].iter_mut().zip(tile.chunks_exact(len)) {
                    *v = line[t];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of no particular kind, `len` of them, from `seed`.
    fn values(len: usize, seed: f64) -> Vec<Complex64> {
        (0..len)
            .map(|i| {
                let i = i as f64;
                Complex64::new((i * 0.37 + seed).sin(), (i * 0.11 - 2.0 * seed).cos())
            })
            .collect()
    }

    fn largest_difference(a: &[Complex64], b: &[Complex64]) -> f64 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).norm())
            .fold(0.0, f64::max)
    }

    #[test]
    fn the_transform_is_the_naive_sum_and_inverts() {
        for n in [6, 20] {
            let mut a = values(n * n * n, 0.0);
            let orig = a.clone();
            let f = Fft3::new(n);
            f.forward(&mut a);
            let tau = std::f64::consts::TAU;
            for (k, &got) in a.iter().enumerate().step_by(n * n * n / 30 + 1) {
                let (kz, ky, kx) = (k / (n * n), (k / n) % n, k % n);
                let mut want = Complex64::default();
                for (x, &v) in orig.iter().enumerate() {
                    let (z, y, xx) = (x / (n * n), (x / n) % n, x % n);
                    let ph = -tau * ((kx * xx + ky * y + kz * z) as f64) / n as f64;
                    want += v * Complex64::from_polar(1.0, ph);
                }
                assert!((got - want).norm() < 1e-10, "{k}: {got} vs {want}");
            }
            f.inverse(&mut a);
            let scale = (n * n * n) as f64;
            for (g, w) in a.iter().zip(&orig) {
                assert!((g / scale - w).norm() < 1e-13);
            }
        }
    }

    #[test]
    fn the_padded_transforms_are_the_full_ones_on_the_kept_modes() {
        // n = 6: an odd padded side (9); 22: lines wider than a tile.
        for n in [6, 22] {
            let m = 3 * n / 2;
            let pad = PaddedFft3::new(n);
            let full = Fft3::new(m);
            let nyquist = |i: usize| {
                let (x, y, z) = (i % n, (i / n) % n, i / (n * n));
                x == n / 2 || y == n / 2 || z == n / 2
            };
            let at = |i: usize| {
                let (x, y, z) = (i % n, (i / n) % n, i / (n * n));
                (pad.padded(z) * m + pad.padded(y)) * m + pad.padded(x)
            };
            // Inverse: the coefficients placed by hand, zeros elsewhere
            // (the Nyquist ones dropped), against the padded transform
            // of a grid of NaNs (none of which may be read).
            let a = values(n * n * n, 0.3);
            let mut want = vec![Complex64::default(); m * m * m];
            for (i, &v) in a.iter().enumerate() {
                if !nyquist(i) {
                    want[at(i)] = v;
                }
            }
            full.inverse(&mut want);
            let mut got = vec![Complex64::new(f64::NAN, f64::NAN); m * m * m];
            pad.inverse(&a, &mut got);
            let err = largest_difference(&got, &want);
            assert!(err < 1e-12, "n = {n}: inverse off by {err:e}");
            // Forward: the full transform's kept modes.
            let p = values(m * m * m, 0.7);
            let mut all = p.clone();
            full.forward(&mut all);
            let want: Vec<Complex64> = (0..n * n * n)
                .map(|i| {
                    if nyquist(i) {
                        Complex64::default()
                    } else {
                        all[at(i)]
                    }
                })
                .collect();
            let mut got = vec![Complex64::new(f64::NAN, f64::NAN); n * n * n];
            pad.forward(&mut p.clone(), &mut got);
            let err = largest_difference(&got, &want);
            assert!(err < 1e-11, "n = {n}: forward off by {err:e}");
        }
    }

    #[test]
    fn real_pairs_are_the_plain_transforms_of_each() {
        let n = 10;
        let len = n * n * n;
        let fft = Fft3::new(n);
        // Inverse: coefficients of no symmetry, whose fields' real parts
        // the pair carries.
        let (a, b) = (values(len, 0.1), values(len, 1.9));
        let real_part = |c: &[Complex64]| {
            let mut c = c.to_vec();
            fft.inverse(&mut c);
            c.iter()
                .map(|z| Complex64::new(z.re, 0.0))
                .collect::<Vec<_>>()
        };
        let mut pair = vec![Complex64::default(); len];
        pair_real(n, &a, &b, &mut pair);
        fft.inverse(&mut pair);
        let re: Vec<Complex64> = pair.iter().map(|z| Complex64::new(z.re, 0.0)).collect();
        let im: Vec<Complex64> = pair.iter().map(|z| Complex64::new(z.im, 0.0)).collect();
        for (got, want) in [(re, real_part(&a)), (im, real_part(&b))] {
            let err = largest_difference(&got, &want);
            assert!(err < 1e-12, "inverse off by {err:e}");
        }
        // Forward: two real fields, each transformed alone, against
        // their pair's transform split.
        let real = |c: Vec<Complex64>| c.iter().map(|z| Complex64::new(z.re, 0.0)).collect();
        let (f, g): (Vec<Complex64>, Vec<Complex64>) =
            (real(values(len, 0.4)), real(values(len, 2.2)));
        let mut z: Vec<Complex64> = f
            .iter()
            .zip(&g)
            .map(|(x, y)| x + Complex64::i() * y)
            .collect();
        fft.forward(&mut z);
        let (mut fk, mut gk) = (
            vec![Complex64::default(); len],
            vec![Complex64::default(); len],
        );
        let scale = 0.5;
        unpair_real(n, &z, scale, &mut fk, &mut gk);
        for (got, mut want) in [(fk, f), (gk, g)] {
            fft.forward(&mut want);
            want.iter_mut().for_each(|w| *w *= scale);
            let err = largest_difference(&got, &want);
            assert!(err < 1e-12, "forward off by {err:e}");
        }
    }
}
