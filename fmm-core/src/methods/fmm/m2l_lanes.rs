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

use super::harmonics::{idx, C};
use super::operators::FullRange;
use crate::simd::Lanes;

/// Where `(n, m)`, `-n <= m <= n`, is in a full-range array.
#[inline(always)]
fn full(n: usize, m: isize) -> usize {
    ((n * n + n) as isize + m) as usize
}

/// `I_n^m(d)` in lanes for `|m| <= n <= p`, full range, real and imaginary
/// parts apart.
#[inline(always)]
unsafe fn singular_lanes<V: Lanes<Scalar = f64>>(d: [V; 3], p: usize, re: &mut [V], im: &mut [V]) {
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
pub struct LaneScratch<V> {
    p: usize,
    mre: Vec<V>,
    mim: Vec<V>,
    ire: Vec<V>,
    iim: Vec<V>,
    acc_re: Vec<V>,
    acc_im: Vec<V>,
}

impl<V: Lanes<Scalar = f64>> LaneScratch<V> {
    /// # Safety
    /// The CPU has AVX2 and FMA.
    pub unsafe fn new(p: usize) -> Self {
        let z = V::c(0.0);
        let nf = (p + 1) * (p + 1);
        let nc = (p + 1) * (p + 2) / 2;
        LaneScratch {
            p,
            mre: vec![z; nf],
            mim: vec![z; nf],
            ire: vec![z; nf],
            iim: vec![z; nf],
            acc_re: vec![z; nc],
            acc_im: vec![z; nc],
        }
    }
}

/// Adds to `local` (about `center`) the M2L of every source `(multipole,
/// centre)` of the list.
///
/// # Safety
/// The CPU has AVX2 and FMA, and `s` was made for the same order.
#[inline(always)]
pub unsafe fn m2l_list<V: Lanes<Scalar = f64>>(
    center: [f64; 3],
    sources: &[(&FullRange, [f64; 3])],
    s: &mut LaneScratch<V>,
    local: &mut [C],
) {
    let p = s.p;
    let w = V::WIDTH;
    let nf = (p + 1) * (p + 1);
    for a in s.acc_re.iter_mut().chain(s.acc_im.iter_mut()) {
        *a = V::c(0.0);
    }
    for chunk in sources.chunks(w) {
        // The chunk's multipoles across lanes, zeros in unused lanes (with
        // a harmless distance, so the harmonics stay finite).
        let mut d = [[1.0f64; 8]; 3];
        for (lane, (_, z)) in chunk.iter().enumerate() {
            for k in 0..3 {
                d[k][lane] = center[k] - z[k];
            }
        }
        for j in 0..nf {
            let mut re = [0.0f64; 8];
            let mut im = [0.0f64; 8];
            for (lane, (m, _)) in chunk.iter().enumerate() {
                re[lane] = m.re[j];
                im[lane] = m.im[j];
            }
            s.mre[j] = V::load(&re[..w]);
            s.mim[j] = V::load(&im[..w]);
        }
        let dv = [
            V::load(&d[0][..w]),
            V::load(&d[1][..w]),
            V::load(&d[2][..w]),
        ];
        singular_lanes(dv, p, &mut s.ire, &mut s.iim);
        for k in 0..=p {
            // Outputs (k, l) four at a time, then one at a time.
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
    for (t, l) in local.iter_mut().enumerate() {
        *l += C::new(V::sum(s.acc_re[t]), V::sum(s.acc_im[t]));
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
unsafe fn outputs_from<V: Lanes<Scalar = f64>, const B: usize>(
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
fn add_outputs<V: Lanes<Scalar = f64>, const B: usize>(
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

/// [`m2l_list`] in AVX2 lanes of four f64.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn m2l_list_avx2(
    center: [f64; 3],
    sources: &[(&FullRange, [f64; 3])],
    s: &mut LaneScratch<crate::simd::F64x4>,
    local: &mut [C],
) {
    m2l_list(center, sources, s, local)
}

/// [`m2l_list`] in AVX-512 lanes of eight f64.
///
/// # Safety
/// The CPU has AVX-512 F and DQ ([`crate::simd::avx512`]).
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
pub unsafe fn m2l_list_avx512(
    center: [f64; 3],
    sources: &[(&FullRange, [f64; 3])],
    s: &mut LaneScratch<crate::simd::F64x8>,
    local: &mut [C],
) {
    m2l_list(center, sources, s, local)
}

#[cfg(test)]
mod tests {
    use super::super::harmonics::ncoef;
    use super::super::operators::{m2l, p2m, Scratch};
    use super::*;
    use crate::simd::{avx2_fma, avx512, F64x4, F64x8};

    /// The lanes' M2L of a list equals the scalar M2L summed over it.
    #[test]
    fn m2l_in_lanes_matches_the_scalar_m2l() {
        if !avx2_fma() {
            return;
        }
        for p in [1, 4, 7, 12] {
            let mut s = Scratch::new(p);
            let center = [0.1, -0.2, 0.3];
            let mut mults = Vec::new();
            for i in 0..7 {
                let z = [2.0 + i as f64, -1.5 + 0.3 * i as f64, 0.7 * (i % 3) as f64];
                let x: Vec<[f64; 3]> = (0..5)
                    .map(|j| [z[0] + 0.1 * j as f64, z[1] - 0.05 * j as f64, z[2] + 0.02])
                    .collect();
                let q: Vec<f64> = (0..5).map(|j| 1.0 - 0.3 * j as f64).collect();
                let mut m = vec![C::ZERO; ncoef(p)];
                p2m(z, &x, &q, &mut s, &mut m);
                mults.push((FullRange::of(&m, p), z));
            }
            let mut want = vec![C::ZERO; ncoef(p)];
            for (m, z) in &mults {
                let d = [center[0] - z[0], center[1] - z[1], center[2] - z[2]];
                m2l(m, d, &mut s, &mut want);
            }
            let list: Vec<(&FullRange, [f64; 3])> = mults.iter().map(|(m, z)| (m, *z)).collect();
            let mut got = vec![C::ZERO; ncoef(p)];
            // SAFETY: checked above.
            unsafe {
                let mut ls = LaneScratch::<F64x4>::new(p);
                m2l_list_avx2(center, &list, &mut ls, &mut got);
            }
            let mut runs = vec![("AVX2", got)];
            if avx512() {
                let mut got = vec![C::ZERO; ncoef(p)];
                // SAFETY: checked.
                unsafe {
                    let mut ls = LaneScratch::<F64x8>::new(p);
                    m2l_list_avx512(center, &list, &mut ls, &mut got);
                }
                runs.push(("AVX-512", got));
            }
            let scale = want
                .iter()
                .map(|c| c.re.abs() + c.im.abs())
                .fold(0.0, f64::max);
            for (name, got) in runs {
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g.re - w.re).abs() + (g.im - w.im).abs() < 1e-13 * scale,
                        "{name}, p = {p}: {g:?} against {w:?}"
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
