//! M2L for the whole interaction list of one target cell, several source
//! cells at once: one source cell per lane of an AVX2 or AVX-512 vector
//! ([`crate::simd`]), so every operation of the translation (the singular
//! harmonics' recurrence and the double sum) is a plain lane-wise vector
//! operation with no shuffles, and the lanes' local expansions (all about
//! the same centre) are summed once at the end of the list.
//!
//! Why not a rotation-based O(p^3) M2L (yokota2009 section 3.2): with the
//! `m >= 0` half of the outputs and terms of total degree `<= p`, the
//! direct double sum costs `sum_k (k + 1)(p - k + 1)^2` complex
//! multiply-adds: 336 at p = 6, 825 at p = 8, 3185 at p = 12. Two rotations
//! and the translation along the axis cost 554, 1145 and 3346, before the
//! Wigner matrices of each new direction (455, 969, 2925). The two meet
//! near p = 13 (`operation_counts` in the tests prints them), above the
//! orders that reach 1e-4 in f32 (5 to 6) and near those of 1e-8 in f64.
//!
//! The lanes are f64 or, where the settings' error leaves room, f32
//! ([`single_m2l`]): twice the lanes for the same work. Both run on the
//! list's scaled quantities, so that f32's range holds them at any order
//! up to [`MAX_SINGLE_ORDER`] and any length unit: with `s` the list's
//! nearest source distance, `I_m(d) = s^-(m+1) I_m(d / s)`, so
//! `M_n I_{n+k}(d) = (M_n s^-n) I_{n+k}(d / s) s^-(k+1)`; the multipoles
//! are kept scaled by their cell's radius, `M_n / R^n`
//! ([`ScaledMultipoles`]), and times `(R / s)^n` in lanes make `M_n s^-n`;
//! the harmonics are of `d / s` (at least 1 long), and the sums are scaled
//! back by `s^-(k+1)` in f64 at the end of the list.

use super::harmonics::{idx, C};
use super::operators::ScaledMultipoles;
use crate::real::Real;
use crate::simd::{Lanes, MAX_WIDTH};

/// The highest order whose M2L runs in f32 (checked to it by
/// `m2l_in_single_lanes_matches_the_double_one`): the scaled harmonics of
/// order `p` reach about `(2p - 1)!!`, 2e17 at 16, well within f32's range
/// (3e38, which `(2p - 1)!!` passes at 28).
pub const MAX_SINGLE_ORDER: usize = 16;

/// The expected error from which the M2L of f64 particles runs in f32
/// lanes. Its own rounding is about 1e-7 of the terms it sums (measured
/// by `m2l_in_single_lanes_matches_the_double_one`), a tenth of this or
/// less, so the error grows by half a percent at most (they add as
/// squares).
pub const SINGLE_ERROR: f64 = 1e-6;

/// Where `(n, m)`, `-n <= m <= n`, is in a full-range array.
#[inline(always)]
fn full(n: usize, m: isize) -> usize {
    ((n * n + n) as isize + m) as usize
}

/// `I_n^m(d)` in lanes for `|m| <= n <= p`, full range, real and imaginary
/// parts apart.
#[inline(always)]
unsafe fn singular_lanes<V: Lanes>(d: [V; 3], p: usize, re: &mut [V], im: &mut [V]) {
    let [x, y, z] = d;
    let r2 = V::mul_add(z, z, V::mul_add(y, y, x * x));
    let inv_r2 = V::c(1.0) / r2;
    re[0] = V::sqrt(inv_r2);
    im[0] = V::c(0.0);
    for m in 1..=p {
        // I_m^m = -(2m - 1) (x + i y) / r^2 I_{m-1}^{m-1}
        let (a, b) = (
            re[full(m - 1, m as isize - 1)],
            im[full(m - 1, m as isize - 1)],
        );
        let f = V::c(-((2 * m - 1) as f64)) * inv_r2;
        re[full(m, m as isize)] = f * V::mul_sub(x, a, y * b);
        im[full(m, m as isize)] = f * V::mul_add(x, b, y * a);
    }
    for m in 0..=p {
        for n in m + 1..=p {
            let c1 = V::c((2 * n - 1) as f64) * z;
            let (a, b) = (re[full(n - 1, m as isize)], im[full(n - 1, m as isize)]);
            let (mut sr, mut si) = (c1 * a, c1 * b);
            if n >= m + 2 {
                let c2 = V::c(((n - 1) * (n - 1) - m * m) as f64);
                sr = V::neg_mul_add(c2, re[full(n - 2, m as isize)], sr);
                si = V::neg_mul_add(c2, im[full(n - 2, m as isize)], si);
            }
            re[full(n, m as isize)] = sr * inv_r2;
            im[full(n, m as isize)] = si * inv_r2;
        }
    }
    // I_n^{-m} = (-1)^m conj(I_n^m)
    for n in 1..=p {
        for m in 1..=n {
            let (a, b) = (re[full(n, m as isize)], im[full(n, m as isize)]);
            let (fa, fb) = if m % 2 == 0 { (a, -b) } else { (-a, b) };
            re[full(n, -(m as isize))] = fa;
            im[full(n, -(m as isize))] = fb;
        }
    }
}

/// Scratch vectors for [`m2l_list`].
pub struct LaneScratch<V: Lanes> {
    p: usize,
    /// The chunk's scaled multipoles (`m >= 0`) gathered lane by lane,
    /// `[j][lane]`.
    gathered: Vec<V::Scalar>,
    mre: Vec<V>,
    mim: Vec<V>,
    ire: Vec<V>,
    iim: Vec<V>,
    acc_re: Vec<V>,
    acc_im: Vec<V>,
}

impl<V: Lanes> LaneScratch<V> {
    /// # Safety
    /// The CPU has AVX2 and FMA.
    pub unsafe fn new(p: usize) -> Self {
        let z = V::c(0.0);
        let nf = (p + 1) * (p + 1);
        let nc = (p + 1) * (p + 2) / 2;
        LaneScratch {
            p,
            gathered: vec![V::Scalar::zero(); 2 * nc * V::WIDTH],
            mre: vec![z; nf],
            mim: vec![z; nf],
            ire: vec![z; nf],
            iim: vec![z; nf],
            acc_re: vec![z; nc],
            acc_im: vec![z; nc],
        }
    }
}

/// Adds to `local` (about `center`) the M2L of the expansions `list` of
/// `mult` whose cells are centred at `centers`.
///
/// # Safety
/// The CPU has AVX2 and FMA, and `s` was made for the order of `mult`.
#[inline(always)]
pub unsafe fn m2l_list<V: Lanes>(
    center: [f64; 3],
    mult: &ScaledMultipoles<V::Scalar>,
    list: &[(usize, [f64; 3])],
    s: &mut LaneScratch<V>,
    local: &mut [C],
) {
    let p = s.p;
    let w = V::WIDTH;
    let nc = (p + 1) * (p + 2) / 2;
    let offset = |z: [f64; 3]| [center[0] - z[0], center[1] - z[1], center[2] - z[2]];
    // The list's length scale (module docs): the nearest source's
    // distance, above 0 as the MAC is strict.
    let scale = list
        .iter()
        .map(|&(_, z)| {
            let d = offset(z);
            (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()
        })
        .fold(f64::INFINITY, f64::min);
    if !(scale > 0.0 && scale.is_finite()) {
        return;
    }
    let inv = 1.0 / scale;
    let r = |x: f64| V::Scalar::c(x);
    for a in s.acc_re.iter_mut().chain(s.acc_im.iter_mut()) {
        *a = V::c(0.0);
    }
    for chunk in list.chunks(w) {
        // The chunk's offsets and radii over the scale across lanes, the
        // unused lanes with a harmless distance (the harmonics stay
        // finite) and zero multipoles.
        let mut d = [[r(1.0); MAX_WIDTH]; 3];
        let mut ratio = [r(0.0); MAX_WIDTH];
        for (lane, &(i, z)) in chunk.iter().enumerate() {
            let (coef, radius) = mult.get(i);
            let o = offset(z);
            for k in 0..3 {
                d[k][lane] = r(o[k] * inv);
            }
            ratio[lane] = r(radius * inv);
            // Plain stores, one number at a time: left to itself the
            // compiler made these AVX-512 scatters, which took a third of
            // the M2L's time on an AMD EPYC. `gathered` holds `2 nc`
            // numbers a lane, `w` lanes.
            let out = s.gathered.as_mut_ptr().add(lane);
            for (j, &c) in coef.iter().enumerate() {
                std::ptr::write_volatile(out.add(j * w), c);
            }
        }
        if chunk.len() < w {
            for j in 0..2 * nc {
                for lane in chunk.len()..w {
                    *s.gathered.get_unchecked_mut(j * w + lane) = r(0.0);
                }
            }
        }
        // M_n / s^n = (M_n / R^n) (R / s)^n, and M_n^-m = (-1)^m
        // conj(M_n^m).
        let ratio = V::load(&ratio[..w]);
        let mut power = V::c(1.0);
        for n in 0..=p {
            for m in 0..=n {
                let i = idx(n, m);
                let re = V::load_at(&s.gathered, i * w) * power;
                let im = V::load_at(&s.gathered, (nc + i) * w) * power;
                s.mre[full(n, m as isize)] = re;
                s.mim[full(n, m as isize)] = im;
                if m > 0 {
                    let (a, b) = if m % 2 == 0 { (re, -im) } else { (-re, im) };
                    s.mre[full(n, -(m as isize))] = a;
                    s.mim[full(n, -(m as isize))] = b;
                }
            }
            power = power * ratio;
        }
        let dv = [
            V::load(&d[0][..w]),
            V::load(&d[1][..w]),
            V::load(&d[2][..w]),
        ];
        singular_lanes(dv, p, &mut s.ire, &mut s.iim);
        for k in 0..=p {
            // Outputs (k, l) two at a time, then one at a time.
            let mut l = 0;
            while l + 2 <= k + 1 {
                let sums = outputs_from::<V, 2>(s, k, l);
                add_outputs(s, k, l, &sums);
                l += 2;
            }
            while l <= k {
                let sums = outputs_from::<V, 1>(s, k, l);
                add_outputs(s, k, l, &sums);
                l += 1;
            }
        }
    }
    // Scaled back, s^-(k+1), in f64.
    let mut power = inv;
    for k in 0..=p {
        for l in 0..=k {
            let t = idx(k, l);
            local[t] += C::new(
                V::sum(s.acc_re[t]).to_f64() * power,
                V::sum(s.acc_im[t]).to_f64() * power,
            );
        }
        power *= inv;
    }
}

/// The double sums of the outputs `(k, l)` to `(k, l + B - 1)` of one
/// M2L for the chunk in `s`: `sum_n sum_j M_n^{j-n} I_{n+k}^{l+t-n+j}`,
/// as four real sums (re re, im im, re im, im re) per output.
///
/// Why `B` outputs at once: the product for output `l + t` reads the
/// singular harmonic one place after the one for `l + t - 1`, so the `B`
/// outputs share each multipole coefficient and a window of `B` harmonics
/// that slides by one per term. That is two vector loads per `4 B`
/// multiply-adds where one output at a time needs four per four, which
/// kept the loop waiting on loads.
#[inline(always)]
unsafe fn outputs_from<V: Lanes, const B: usize>(
    s: &LaneScratch<V>,
    k: usize,
    l: usize,
) -> [[V; 4]; B] {
    let z = V::c(0.0);
    let mut acc = [[z; 4]; B];
    for n in 0..=s.p - k {
        let a = full(n, -(n as isize));
        let b = full(n + k, l as isize - n as isize);
        let (mut wr, mut wi) = ([z; B], [z; B]);
        for t in 1..B {
            wr[t] = *s.ire.get_unchecked(b + t - 1);
            wi[t] = *s.iim.get_unchecked(b + t - 1);
        }
        for j in 0..2 * n + 1 {
            for t in 0..B - 1 {
                wr[t] = wr[t + 1];
                wi[t] = wi[t + 1];
            }
            wr[B - 1] = *s.ire.get_unchecked(b + j + B - 1);
            wi[B - 1] = *s.iim.get_unchecked(b + j + B - 1);
            let (mr, mi) = (*s.mre.get_unchecked(a + j), *s.mim.get_unchecked(a + j));
            for t in 0..B {
                acc[t][0] = V::mul_add(mr, wr[t], acc[t][0]);
                acc[t][1] = V::mul_add(mi, wi[t], acc[t][1]);
                acc[t][2] = V::mul_add(mr, wi[t], acc[t][2]);
                acc[t][3] = V::mul_add(mi, wr[t], acc[t][3]);
            }
        }
    }
    acc
}

/// Adds the sums of [`outputs_from`] to the chunk's local expansion, with
/// the sign `(-1)^k`.
#[inline(always)]
fn add_outputs<V: Lanes, const B: usize>(
    s: &mut LaneScratch<V>,
    k: usize,
    l: usize,
    sums: &[[V; 4]; B],
) {
    for (t, [rr, ii, ri, ir]) in sums.iter().enumerate() {
        let i = idx(k, l + t);
        if k.is_multiple_of(2) {
            s.acc_re[i] = s.acc_re[i] + (*rr - *ii);
            s.acc_im[i] = s.acc_im[i] + (*ri + *ir);
        } else {
            s.acc_re[i] = s.acc_re[i] - (*rr - *ii);
            s.acc_im[i] = s.acc_im[i] - (*ri + *ir);
        }
    }
}

/// [`m2l_list`] in AVX2 lanes (four f64 or eight f32).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn m2l_list_avx2<V: Lanes>(
    center: [f64; 3],
    mult: &ScaledMultipoles<V::Scalar>,
    list: &[(usize, [f64; 3])],
    s: &mut LaneScratch<V>,
    local: &mut [C],
) {
    m2l_list(center, mult, list, s, local)
}

/// [`m2l_list`] in AVX-512 lanes (eight f64 or sixteen f32).
///
/// # Safety
/// The CPU has AVX-512 F and DQ ([`crate::simd::avx512`]).
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
pub unsafe fn m2l_list_avx512<V: Lanes>(
    center: [f64; 3],
    mult: &ScaledMultipoles<V::Scalar>,
    list: &[(usize, [f64; 3])],
    s: &mut LaneScratch<V>,
    local: &mut [C],
) {
    m2l_list(center, mult, list, s, local)
}

#[cfg(test)]
mod tests {
    use super::super::harmonics::ncoef;
    use super::super::operators::{l2p, m2l, p2m, FullRange, Scratch};
    use super::*;
    use crate::simd::{avx2_fma, avx512};

    /// A cell's centre, particles and strengths.
    type Particles = ([f64; 3], Vec<[f64; 3]>, Vec<f64>);

    /// Source cells for a list: multipoles of order `p` (flat), centres
    /// and radii (the farthest particle), from each cell's particles.
    struct Cells {
        mult: Vec<C>,
        centers: Vec<[f64; 3]>,
        radius: Vec<f64>,
    }

    impl Cells {
        fn new(p: usize, cells: &[Particles]) -> Self {
            let mut s = Scratch::new(p);
            let mut c = Cells {
                mult: vec![C::ZERO; cells.len() * ncoef(p)],
                centers: Vec::new(),
                radius: Vec::new(),
            };
            for ((z, x, q), m) in cells.iter().zip(c.mult.chunks_mut(ncoef(p))) {
                p2m(*z, x, q, &mut s, m);
                c.centers.push(*z);
                let r2 = x
                    .iter()
                    .map(|x| (0..3).map(|k| (x[k] - z[k]).powi(2)).sum::<f64>())
                    .fold(0.0, f64::max);
                c.radius.push(r2.sqrt());
            }
            c
        }

        /// The M2L of every cell into `center`, one at a time in f64.
        fn scalar(&self, p: usize, center: [f64; 3], only: Option<usize>) -> Vec<C> {
            let mut s = Scratch::new(p);
            let mut local = vec![C::ZERO; ncoef(p)];
            for (i, (m, z)) in self.mult.chunks(ncoef(p)).zip(&self.centers).enumerate() {
                if only.is_some_and(|o| o != i) {
                    continue;
                }
                let d = [center[0] - z[0], center[1] - z[1], center[2] - z[2]];
                m2l(&FullRange::of(m, p), d, &mut s, &mut local);
            }
            local
        }

        /// The lanes' M2L of every cell into `center`: AVX2, and AVX-512
        /// where the CPU has it, in `T`.
        fn lanes<T: crate::real::Real>(&self, p: usize, center: [f64; 3]) -> Vec<(&str, Vec<C>)> {
            let scaled = ScaledMultipoles::<T>::new(&self.mult, p, 1, &self.radius);
            let list: Vec<(usize, [f64; 3])> = self.centers.iter().copied().enumerate().collect();
            let mut runs = Vec::new();
            let mut got = vec![C::ZERO; ncoef(p)];
            // SAFETY: the callers checked AVX2 and FMA.
            unsafe {
                let mut ls = LaneScratch::<T::Wide>::new(p);
                m2l_list_avx2(center, &scaled, &list, &mut ls, &mut got);
            }
            runs.push(("AVX2", got));
            if avx512() {
                let mut got = vec![C::ZERO; ncoef(p)];
                // SAFETY: checked.
                unsafe {
                    let mut ls = LaneScratch::<T::Wide512>::new(p);
                    m2l_list_avx512(center, &scaled, &list, &mut ls, &mut got);
                }
                runs.push(("AVX-512", got));
            }
            runs
        }
    }

    /// The f64 lanes' M2L of a list equals the scalar M2L summed over it,
    /// a cell of radius 0 (one particle at its centre) among them.
    #[test]
    fn m2l_in_lanes_matches_the_scalar_m2l() {
        if !avx2_fma() {
            return;
        }
        for p in [1, 4, 7, 12] {
            let center = [0.1, -0.2, 0.3];
            let cells: Vec<_> = (0..11)
                .map(|i| {
                    let z = [2.0 + i as f64, -1.5 + 0.3 * i as f64, 0.7 * (i % 3) as f64];
                    let n = if i == 3 { 1 } else { 5 };
                    let x: Vec<[f64; 3]> = (0..n)
                        .map(|j| {
                            let j = if n == 1 { 0.0 } else { j as f64 + 1.0 };
                            [z[0] + 0.1 * j, z[1] - 0.05 * j, z[2] + 0.02 * j]
                        })
                        .collect();
                    let q: Vec<f64> = (0..n).map(|j| 1.0 - 0.3 * j as f64).collect();
                    (z, x, q)
                })
                .collect();
            let cells = Cells::new(p, &cells);
            assert_eq!(cells.radius[3], 0.0);
            let want = cells.scalar(p, center, None);
            let scale = want
                .iter()
                .map(|c| c.re.abs() + c.im.abs())
                .fold(0.0, f64::max);
            for (name, got) in cells.lanes::<f64>(p, center) {
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g.re - w.re).abs() + (g.im - w.im).abs() < 1e-13 * scale,
                        "{name}, p = {p}: {g:?} against {w:?}"
                    );
                }
            }
        }
    }

    /// The f32 lanes' M2L of a list against the f64 one, for lists as the
    /// traversal makes them (sources at least `R_t + R_s` over theta 0.6
    /// away, cells of radius 0.5 to 1 of a given unit), in units where
    /// f32's range would not hold the unscaled terms: the potential a
    /// list's local expansion gives at the cell's edge differs by f32's
    /// rounding of the terms summed (the sources' potentials in absolute
    /// value), below [`SINGLE_ERROR`] / 10.
    #[test]
    fn m2l_in_single_lanes_matches_the_double_one() {
        if !avx2_fma() {
            return;
        }
        let mut rng = 0x2545f4914f6cdd1du64;
        let mut uniform = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        for unit in [1e-6, 1.0, 1e6] {
            for p in [4, 6, 9, 12, MAX_SINGLE_ORDER] {
                let center = [0.0; 3];
                let cells: Vec<_> = (0..37)
                    .map(|_| {
                        // A direction, a distance past the MAC, a radius.
                        let r = 0.5 + 0.5 * uniform();
                        let dist = (1.0 + r) / 0.6 * (1.0 + 3.0 * uniform());
                        let u = [uniform() - 0.5, uniform() - 0.5, uniform() - 0.5];
                        let n = (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]).sqrt();
                        let z = u.map(|x| x / n * dist * unit);
                        let x: Vec<[f64; 3]> = (0..20)
                            .map(|_| [0, 1, 2].map(|k| z[k] + (uniform() - 0.5) * r * unit))
                            .collect();
                        let q: Vec<f64> = (0..20).map(|_| uniform() - 0.5).collect();
                        (z, x, q)
                    })
                    .collect();
                let cells = Cells::new(p, &cells);
                // The potentials at points on the target cell's edge.
                let edge: Vec<[f64; 3]> = (0..16)
                    .map(|_| {
                        let u = [uniform() - 0.5, uniform() - 0.5, uniform() - 0.5];
                        let n = (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]).sqrt();
                        u.map(|x| x / n * unit)
                    })
                    .collect();
                let mut s = Scratch::new(p);
                let mut potentials = |l: &[C]| -> Vec<f64> {
                    edge.iter()
                        .map(|&x| l2p(l, x, &mut s).0)
                        .collect::<Vec<_>>()
                };
                let want = potentials(&cells.scalar(p, center, None));
                // The size of the terms the sums add: at each point, the
                // sources' potentials in absolute value.
                let mut terms = vec![0.0; edge.len()];
                for i in 0..cells.centers.len() {
                    let one = potentials(&cells.scalar(p, center, Some(i)));
                    for (t, v) in terms.iter_mut().zip(one) {
                        *t += v.abs();
                    }
                }
                let scale = terms.iter().map(|v| v * v).sum::<f64>().sqrt();
                for (name, got) in cells.lanes::<f32>(p, center) {
                    let got = potentials(&got);
                    let diff = got
                        .iter()
                        .zip(&want)
                        .map(|(g, w)| (g - w) * (g - w))
                        .sum::<f64>()
                        .sqrt();
                    assert!(
                        diff <= SINGLE_ERROR / 10.0 * scale,
                        "unit {unit:e}, p = {p}, {name} f32: relative difference {:e}",
                        diff / scale
                    );
                }
            }
        }
    }

    /// The multiply-add counts behind the choice of the direct double sum:
    /// the direct M2L against a rotation-based one (two rotations of the
    /// `m >= 0` outputs, the translation along the axis), without and with
    /// the Wigner matrices of a new direction.
    #[test]
    fn operation_counts() {
        for p in [4, 6, 8, 10, 12, 16, 20] {
            let direct: usize = (0..=p).map(|k| (k + 1) * (p - k + 1) * (p - k + 1)).sum();
            let rotations: usize = 2 * (0..=p).map(|n| (n + 1) * (2 * n + 1)).sum::<usize>();
            let axial: usize = (0..=p)
                .map(|k| {
                    (0..=k)
                        .map(|l| (p + 1).saturating_sub(k + l))
                        .sum::<usize>()
                })
                .sum();
            let wigner: usize = (0..=p).map(|n| (2 * n + 1) * (2 * n + 1)).sum();
            println!(
                "p = {p}: direct {direct}, rotation-based {} (+ {wigner} per new direction)",
                rotations + axial
            );
            if p <= 8 {
                assert!(direct < rotations + axial);
            }
        }
    }
}
