//! `exp` and `erf` on whole vectors, for the [`Lanes`](super::Lanes) impls.
//!
//! Why: the screened and regularised kernels (Yukawa's `exp(-lambda r) /
//! r`, the Gaussian cores' `erf` and `exp`) called the scalar libm
//! function once per lane, which made them five to ten times slower per
//! interaction than Coulomb. These take a few dozen vector instructions
//! per vector instead: `direct_bench --n 20000` on the 2-core development
//! machine went from 3.7e8 to 7.0e8 interactions/s for Yukawa in f64 and
//! from 7.5e8 to 1.65e9 in f32; Biot-Savart (Gaussian core: `erf` and
//! `exp`) from 2.1e8 to 4.6e8 (f64) and 1.4e8 to 4.7e8 (f32).
//!
//! How (no code taken from anywhere; the methods are the textbook ones):
//!
//! * `exp`: Cody-Waite reduction `x = k ln2 + r`, `|r| <= ln2 / 2`, with
//!   `ln2` split in two (its f64 / f32 rounding and the rest): with FMA the
//!   first step `x - k ln2_hi` is exact (both ends of the difference fit in
//!   one significand), so `r` carries only the rounding of the second. Then
//!   `exp(r) = 1 + (r + r^2 q(r))` with the Taylor coefficients `1 / n!` up
//!   to `r^13` (f64) or `r^7` (f32): the first term left out is below
//!   `0.35^14 / 14! = 4e-18` (f64) and `0.35^8 / 8! = 5e-9` (f32) relative,
//!   a twentieth and a tenth of an ulp. `2^k` is made by writing `k + bias`
//!   into the exponent field; `k` is split into two halves, each a normal
//!   power of two, so that results in the subnormal range round once
//!   (in the last product) and `k` up to 1025 overflows to infinity
//!   without any special case. The argument is first clamped to
//!   `[-746, 710]` (f64) or `[-104, 89]` (f32): past those ends the result
//!   rounds to 0 or overflows to infinity anyway, so `-inf` gives 0,
//!   `+inf` gives `+inf`, and the clamp keeps NaN (`max` and `min` return
//!   their second operand when one is NaN). `exp(0) = 1` exactly.
//! * `erf`: the two forms of W. J. Cody, "Rational Chebyshev
//!   approximations for the error function", Math. Comp. 23 (1969)
//!   631-637, on other intervals and with coefficients fitted anew by
//!   `scripts/fit_erf.py` (near-minimax, 50 digits; it prints the constants
//!   below): for `|x| < 1`, `erf(x) = x + x A(x^2)` with `A` a polynomial
//!   (the leading 1 exact, so the fit's error is scaled by `|A| < 0.16`);
//!   for `1 <= |x|`, `erf(x) = 1 - exp(-x^2) P(s) / Q(s)`, `s = |x| - 1`,
//!   the rational function fitted to `erfc(x) exp(x^2)` with weight
//!   `exp(-x^2)` (the absolute error of erf is what counts there), `|x|`
//!   clamped to 6 (f64) or 4 (f32), where `erfc` is below half an ulp of 1
//!   and the formula gives exactly 1. The rounding of `x^2` in `exp(-x^2)`
//!   moves the result by at most `erfc(x) x^2 2^-53 <= 0.16 * 2^-53`, so it
//!   needs no extra-precise square (unlike an `erfc`). Vectors whose lanes
//!   all lie on one side of 1, or all past the clamp, take only that part.
//!
//! Measured by the tests below, against the scalar `f64::exp`, `f32::exp`,
//! `libm::erf` and `libm::erff`, and against f32 results rounded from the
//! f64 functions: at most 1 ulp apart for each (also in a one-off run with
//! 12 million f64 inputs and every third f32 bit pattern).

use std::arch::x86_64::*;

/// `c[0] + c[1] z + c[2] z^2 + ...` (`N <= 16`) by Estrin's scheme: pairs
/// `c[2i] + c[2i+1] z`, then pairs of those in `z^2`, and so on. Four
/// dependent FMAs for 12 coefficients where Horner's rule has eleven, so a
/// kernel's loop is less held up by one long chain (in the Yukawa loop as
/// fast as Horner's in f32, up to a tenth faster in f64), and the accuracy
/// measured is the same.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn estrin_pd<const N: usize>(z: __m256d, c: &[f64; N]) -> __m256d {
    let mut t = [_mm256_setzero_pd(); 16];
    let mut n = N;
    for (i, &ci) in c.iter().enumerate() {
        t[i] = _mm256_set1_pd(ci);
    }
    let mut zk = z;
    while n > 1 {
        for i in 0..n / 2 {
            t[i] = _mm256_fmadd_pd(t[2 * i + 1], zk, t[2 * i]);
        }
        if n % 2 == 1 {
            t[n / 2] = t[n - 1];
        }
        n = n.div_ceil(2);
        zk = _mm256_mul_pd(zk, zk);
    }
    t[0]
}

/// [`estrin_pd`] for f32.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn estrin_ps<const N: usize>(z: __m256, c: &[f32; N]) -> __m256 {
    let mut t = [_mm256_setzero_ps(); 16];
    let mut n = N;
    for (i, &ci) in c.iter().enumerate() {
        t[i] = _mm256_set1_ps(ci);
    }
    let mut zk = z;
    while n > 1 {
        for i in 0..n / 2 {
            t[i] = _mm256_fmadd_ps(t[2 * i + 1], zk, t[2 * i]);
        }
        if n % 2 == 1 {
            t[n / 2] = t[n - 1];
        }
        n = n.div_ceil(2);
        zk = _mm256_mul_ps(zk, zk);
    }
    t[0]
}

/// `ln 2`: its f64 rounding and the rest (`ln 2 - LN2_HI`, rounded).
const LN2_HI_F64: f64 = std::f64::consts::LN_2;
const LN2_LO_F64: f64 = 2.319_046_813_846_299_6e-17;
/// `ln 2`: its f32 rounding and the rest.
const LN2_HI_F32: f32 = std::f32::consts::LN_2;
const LN2_LO_F32: f32 = -1.904_654_2e-9;

/// `1 / n!` for `n = 2..=13`: `exp(r) = 1 + r + r^2 (EXP_Q_F64[0] + r (...))`.
const EXP_Q_F64: [f64; 12] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362880.0,
    1.0 / 3628800.0,
    1.0 / 39916800.0,
    1.0 / 479001600.0,
    1.0 / 6227020800.0,
];
/// `1 / n!` for `n = 2..=7`.
const EXP_Q_F32: [f32; 6] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
];

/// `exp` of each lane (module doc: within 1 ulp of `f64::exp` measured).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) unsafe fn exp_pd(x: __m256d) -> __m256d {
    // 1.5 * 2^52: adding it rounds to an integer, which then sits in the
    // low bits of the sum's significand.
    let magic = _mm256_set1_pd(6_755_399_441_055_744.0);
    let x = _mm256_min_pd(
        _mm256_set1_pd(710.0),
        _mm256_max_pd(_mm256_set1_pd(-746.0), x),
    );
    let t = _mm256_fmadd_pd(x, _mm256_set1_pd(std::f64::consts::LOG2_E), magic);
    let k = _mm256_sub_pd(t, magic);
    let r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_HI_F64), x);
    let r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_LO_F64), r);
    let q = estrin_pd(r, &EXP_Q_F64);
    // exp(r) - 1, the 1 added below.
    let u = _mm256_fmadd_pd(_mm256_mul_pd(r, r), q, r);
    // 2^k = 2^k1 2^k2, k1 = k / 2 rounded, each `(k_i + 1023) << 52`.
    let h = _mm256_fmadd_pd(k, _mm256_set1_pd(0.5), magic);
    let k2 = _mm256_sub_pd(k, _mm256_sub_pd(h, magic));
    let t2 = _mm256_add_pd(k2, magic);
    let bias = _mm256_set1_epi64x(1023);
    let s1 = _mm256_slli_epi64::<52>(_mm256_add_epi64(_mm256_castpd_si256(h), bias));
    let s2 = _mm256_slli_epi64::<52>(_mm256_add_epi64(_mm256_castpd_si256(t2), bias));
    // (1 + u) 2^k1 in one FMA: rounding then scaling by a power of two
    // (to a normal number) is the same as scaling then rounding.
    let s1 = _mm256_castsi256_pd(s1);
    _mm256_mul_pd(_mm256_fmadd_pd(u, s1, s1), _mm256_castsi256_pd(s2))
}

/// `exp` of each lane (module doc: within 1 ulp of the correctly rounded
/// result measured).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) unsafe fn exp_ps(x: __m256) -> __m256 {
    // 1.5 * 2^23, as for f64.
    let magic = _mm256_set1_ps(12_582_912.0);
    let x = _mm256_min_ps(
        _mm256_set1_ps(89.0),
        _mm256_max_ps(_mm256_set1_ps(-104.0), x),
    );
    let t = _mm256_fmadd_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E), magic);
    let k = _mm256_sub_ps(t, magic);
    let r = _mm256_fnmadd_ps(k, _mm256_set1_ps(LN2_HI_F32), x);
    let r = _mm256_fnmadd_ps(k, _mm256_set1_ps(LN2_LO_F32), r);
    let q = estrin_ps(r, &EXP_Q_F32);
    let u = _mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r);
    let h = _mm256_fmadd_ps(k, _mm256_set1_ps(0.5), magic);
    let k2 = _mm256_sub_ps(k, _mm256_sub_ps(h, magic));
    let t2 = _mm256_add_ps(k2, magic);
    let bias = _mm256_set1_epi32(127);
    let s1 = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_castps_si256(h), bias));
    let s2 = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_castps_si256(t2), bias));
    let s1 = _mm256_castsi256_ps(s1);
    _mm256_mul_ps(_mm256_fmadd_ps(u, s1, s1), _mm256_castsi256_ps(s2))
}

/// [`estrin_pd`] on 512 bits.
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
#[inline]
unsafe fn estrin_pd512<const N: usize>(z: __m512d, c: &[f64; N]) -> __m512d {
    let mut t = [_mm512_setzero_pd(); 16];
    let mut n = N;
    for (i, &ci) in c.iter().enumerate() {
        t[i] = _mm512_set1_pd(ci);
    }
    let mut zk = z;
    while n > 1 {
        for i in 0..n / 2 {
            t[i] = _mm512_fmadd_pd(t[2 * i + 1], zk, t[2 * i]);
        }
        if n % 2 == 1 {
            t[n / 2] = t[n - 1];
        }
        n = n.div_ceil(2);
        zk = _mm512_mul_pd(zk, zk);
    }
    t[0]
}

/// [`estrin_ps`] on 512 bits.
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
#[inline]
unsafe fn estrin_ps512<const N: usize>(z: __m512, c: &[f32; N]) -> __m512 {
    let mut t = [_mm512_setzero_ps(); 16];
    let mut n = N;
    for (i, &ci) in c.iter().enumerate() {
        t[i] = _mm512_set1_ps(ci);
    }
    let mut zk = z;
    while n > 1 {
        for i in 0..n / 2 {
            t[i] = _mm512_fmadd_ps(t[2 * i + 1], zk, t[2 * i]);
        }
        if n % 2 == 1 {
            t[n / 2] = t[n - 1];
        }
        n = n.div_ceil(2);
        zk = _mm512_mul_ps(zk, zk);
    }
    t[0]
}

/// [`exp_pd`] on 512 bits, step for step.
///
/// # Safety
/// The CPU has AVX-512 F and DQ.
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
#[inline]
pub(super) unsafe fn exp_pd512(x: __m512d) -> __m512d {
    let magic = _mm512_set1_pd(6_755_399_441_055_744.0);
    let x = _mm512_min_pd(
        _mm512_set1_pd(710.0),
        _mm512_max_pd(_mm512_set1_pd(-746.0), x),
    );
    let t = _mm512_fmadd_pd(x, _mm512_set1_pd(std::f64::consts::LOG2_E), magic);
    let k = _mm512_sub_pd(t, magic);
    let r = _mm512_fnmadd_pd(k, _mm512_set1_pd(LN2_HI_F64), x);
    let r = _mm512_fnmadd_pd(k, _mm512_set1_pd(LN2_LO_F64), r);
    let q = estrin_pd512(r, &EXP_Q_F64);
    let u = _mm512_fmadd_pd(_mm512_mul_pd(r, r), q, r);
    let h = _mm512_fmadd_pd(k, _mm512_set1_pd(0.5), magic);
    let k2 = _mm512_sub_pd(k, _mm512_sub_pd(h, magic));
    let t2 = _mm512_add_pd(k2, magic);
    let bias = _mm512_set1_epi64(1023);
    let s1 = _mm512_slli_epi64::<52>(_mm512_add_epi64(_mm512_castpd_si512(h), bias));
    let s2 = _mm512_slli_epi64::<52>(_mm512_add_epi64(_mm512_castpd_si512(t2), bias));
    let s1 = _mm512_castsi512_pd(s1);
    _mm512_mul_pd(_mm512_fmadd_pd(u, s1, s1), _mm512_castsi512_pd(s2))
}

/// [`exp_ps`] on 512 bits, step for step.
///
/// # Safety
/// The CPU has AVX-512 F and DQ.
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
#[inline]
pub(super) unsafe fn exp_ps512(x: __m512) -> __m512 {
    let magic = _mm512_set1_ps(12_582_912.0);
    let x = _mm512_min_ps(
        _mm512_set1_ps(89.0),
        _mm512_max_ps(_mm512_set1_ps(-104.0), x),
    );
    let t = _mm512_fmadd_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E), magic);
    let k = _mm512_sub_ps(t, magic);
    let r = _mm512_fnmadd_ps(k, _mm512_set1_ps(LN2_HI_F32), x);
    let r = _mm512_fnmadd_ps(k, _mm512_set1_ps(LN2_LO_F32), r);
    let q = estrin_ps512(r, &EXP_Q_F32);
    let u = _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r);
    let h = _mm512_fmadd_ps(k, _mm512_set1_ps(0.5), magic);
    let k2 = _mm512_sub_ps(k, _mm512_sub_ps(h, magic));
    let t2 = _mm512_add_ps(k2, magic);
    let bias = _mm512_set1_epi32(127);
    let s1 = _mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_castps_si512(h), bias));
    let s2 = _mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_castps_si512(t2), bias));
    let s1 = _mm512_castsi512_ps(s1);
    _mm512_mul_ps(_mm512_fmadd_ps(u, s1, s1), _mm512_castsi512_ps(s2))
}

// The erf coefficients, as printed by scripts/fit_erf.py (which leaves out
// the leading 1 of Q). Fitted error, before rounding the coefficients:
// 0.066 * 2^-53 (f64) and 0.02 * 2^-24 (f32) relative for |x| < 1;
// 0.011 * 2^-53 and 0.0027 * 2^-24 absolute for |x| >= 1.
#[allow(clippy::excessive_precision)]
const ERF_SMALL_F64: [f64; 12] = [
    0.12837916709551256,
    -0.3761263890318352,
    0.11283791670944189,
    -0.02686617064311194,
    0.005223977606121187,
    -0.000854832592940779,
    0.0001205529357890241,
    -1.4924712328984604e-05,
    1.6447131792026763e-06,
    -1.6206314745912501e-07,
    1.371098210615177e-08,
    -7.779467552637861e-10,
];
#[allow(clippy::excessive_precision)]
const ERF_P_F64: [f64; 6] = [
    0.427583576155807,
    0.5382810027844871,
    0.29941444360860425,
    0.08989183406075531,
    0.01449006670948975,
    0.001003132312421705,
];
/// `Q(s) = 1 + s (ERF_Q_F64[1] + ...)`.
#[allow(clippy::excessive_precision)]
const ERF_Q_F64: [f64; 7] = [
    1.0,
    1.8978582499920085,
    1.5518850477304578,
    0.7019378643794839,
    0.18590580148097574,
    0.027460624295321784,
    0.001778019479080011,
];
#[allow(clippy::excessive_precision)]
const ERF_SMALL_F32: [f32; 7] = [
    0.12837917,
    -0.37612626,
    0.112835854,
    -0.026853813,
    0.0051883287,
    -0.00080101984,
    7.853863e-05,
];
#[allow(clippy::excessive_precision)]
const ERF_P_F32: [f32; 3] = [0.42758358, 0.26700598, 0.052432105];
/// `Q(s) = 1 + s (ERF_Q_F32[1] + ...)`.
#[allow(clippy::excessive_precision)]
const ERF_Q_F32: [f32; 4] = [1.0, 1.2634209, 0.5688742, 0.09266309];

/// `erf` of each lane (module doc: within 1 ulp of `libm::erf` measured).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) unsafe fn erf_pd(x: __m256d) -> __m256d {
    let sign = _mm256_and_pd(x, _mm256_set1_pd(-0.0));
    let ax = _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
    let one = _mm256_set1_pd(1.0);
    let small = _mm256_cmp_pd::<_CMP_LT_OQ>(ax, one);
    let ms = _mm256_movemask_pd(small);
    if _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_GE_OQ>(ax, _mm256_set1_pd(6.0))) == 0xf {
        return _mm256_or_pd(one, sign);
    }
    let near = if ms != 0 {
        let a = estrin_pd(_mm256_mul_pd(x, x), &ERF_SMALL_F64);
        let near = _mm256_fmadd_pd(x, a, x);
        if ms == 0xf {
            return near;
        }
        near
    } else {
        x
    };
    // The clamp keeps NaN (`min` returns its second operand then).
    let c = _mm256_min_pd(_mm256_set1_pd(6.0), ax);
    let s = _mm256_sub_pd(c, one);
    let r = _mm256_div_pd(estrin_pd(s, &ERF_P_F64), estrin_pd(s, &ERF_Q_F64));
    let e = exp_pd(_mm256_xor_pd(_mm256_mul_pd(c, c), _mm256_set1_pd(-0.0)));
    let far = _mm256_or_pd(_mm256_fnmadd_pd(e, r, one), sign);
    _mm256_blendv_pd(far, near, small)
}

/// `erf` of each lane (module doc: within 1 ulp of the correctly rounded
/// result measured).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) unsafe fn erf_ps(x: __m256) -> __m256 {
    let sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0));
    let ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0), x);
    let one = _mm256_set1_ps(1.0);
    let small = _mm256_cmp_ps::<_CMP_LT_OQ>(ax, one);
    let ms = _mm256_movemask_ps(small);
    if _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(ax, _mm256_set1_ps(4.0))) == 0xff {
        return _mm256_or_ps(one, sign);
    }
    let near = if ms != 0 {
        let a = estrin_ps(_mm256_mul_ps(x, x), &ERF_SMALL_F32);
        let near = _mm256_fmadd_ps(x, a, x);
        if ms == 0xff {
            return near;
        }
        near
    } else {
        x
    };
    let c = _mm256_min_ps(_mm256_set1_ps(4.0), ax);
    let s = _mm256_sub_ps(c, one);
    let r = _mm256_div_ps(estrin_ps(s, &ERF_P_F32), estrin_ps(s, &ERF_Q_F32));
    let e = exp_ps(_mm256_xor_ps(_mm256_mul_ps(c, c), _mm256_set1_ps(-0.0)));
    let far = _mm256_or_ps(_mm256_fnmadd_ps(e, r, one), sign);
    _mm256_blendv_ps(far, near, small)
}

#[cfg(test)]
mod tests {
    use super::super::{avx2_fma, avx512, F32x16, F32x8, F64x4, F64x8, Lanes};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Distance in ulps: the count of f64 values between `a` and `b`; 0 for
    /// two NaNs, `u64::MAX` for one.
    fn ulps64(a: f64, b: f64) -> u64 {
        if a.is_nan() || b.is_nan() {
            return if a.is_nan() && b.is_nan() {
                0
            } else {
                u64::MAX
            };
        }
        let ord = |x: f64| {
            let i = x.to_bits() as i64;
            if i < 0 {
                i64::MIN.wrapping_sub(i)
            } else {
                i
            }
        };
        ord(a).abs_diff(ord(b))
    }

    fn ulps32(a: f32, b: f32) -> u64 {
        if a.is_nan() || b.is_nan() {
            return if a.is_nan() && b.is_nan() {
                0
            } else {
                u64::MAX
            };
        }
        let ord = |x: f32| {
            let i = x.to_bits() as i32;
            if i < 0 {
                i32::MIN.wrapping_sub(i)
            } else {
                i
            }
        };
        ord(a).abs_diff(ord(b)) as u64
    }

    /// The largest distance of `vector` from `scalar` over `xs` (a vector
    /// at a time), and the input where it is.
    fn worst64<V: LoadAny<Scalar = f64>>(
        xs: &[f64],
        vector: fn(V) -> V,
        scalar: fn(f64) -> f64,
    ) -> (u64, f64) {
        let mut worst = (0, 0.0);
        for c in xs.chunks(V::WIDTH) {
            // SAFETY: the callers checked that the CPU has V's instructions.
            let v = unsafe { V::load_partial_or_full(c) };
            let got = vector(v).to_array();
            for (i, &x) in c.iter().enumerate() {
                let u = ulps64(got[i], scalar(x));
                assert!(u != u64::MAX, "{x:e}: {} against {}", got[i], scalar(x));
                if u > worst.0 {
                    worst = (u, x);
                }
            }
        }
        worst
    }

    fn worst32<V: LoadAny<Scalar = f32>>(
        xs: &[f32],
        vector: fn(V) -> V,
        scalar: fn(f32) -> f32,
    ) -> (u64, f32) {
        let mut worst = (0, 0.0);
        for c in xs.chunks(V::WIDTH) {
            // SAFETY: the callers checked that the CPU has V's instructions.
            let v = unsafe { V::load_partial_or_full(c) };
            let got = vector(v).to_array();
            for (i, &x) in c.iter().enumerate() {
                let u = ulps32(got[i], scalar(x));
                assert!(u != u64::MAX, "{x:e}: {} against {}", got[i], scalar(x));
                if u > worst.0 {
                    worst = (u, x);
                }
            }
        }
        worst
    }

    trait LoadAny: Lanes {
        /// # Safety
        /// The CPU has AVX2 and FMA.
        unsafe fn load_partial_or_full(s: &[Self::Scalar]) -> Self {
            if s.len() == Self::WIDTH {
                Self::load(s)
            } else {
                Self::load_partial(s)
            }
        }
    }
    impl LoadAny for F64x4 {}
    impl LoadAny for F32x8 {}
    impl LoadAny for F64x8 {}
    impl LoadAny for F32x16 {}

    /// Uniform samples of `[lo, hi]`.
    fn uniform64(rng: &mut StdRng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| rng.gen_range(lo..=hi)).collect()
    }

    /// Edge inputs of both functions: zeros, infinities, NaN, subnormals,
    /// huge values, and 40 neighbours on each side of (both signs of) the
    /// ends of erf's branches, exp's clamp, and the `x` where exp reaches
    /// the largest finite value, the smallest normal, the smallest
    /// subnormal, and half of it (below which it rounds to 0).
    fn edges64() -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::MIN_POSITIVE,
            5e-324,
            1e-300,
            1e-20,
            f64::MAX,
            27.0,
            800.0,
            std::f64::consts::LN_2 / 2.0,
        ];
        let ends = [
            1.0,
            6.0,
            746.0,
            710.0,
            f64::MAX.ln(),
            f64::MIN_POSITIVE.ln(),
            5e-324f64.ln(),
            5e-324f64.ln() - std::f64::consts::LN_2,
        ];
        for b in ends {
            for i in 0..=40 {
                v.extend([b.to_bits() + i, b.to_bits() - i].map(f64::from_bits));
            }
        }
        let neg: Vec<f64> = v.iter().map(|x| -x).collect();
        v.extend(neg);
        v
    }

    /// As [`edges64`], for f32.
    fn edges32() -> Vec<f32> {
        let mut v = vec![
            0.0,
            f32::INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            1e-45,
            1e-30,
            1e-10,
            f32::MAX,
            27.0,
            200.0,
            std::f32::consts::LN_2 / 2.0,
        ];
        let ln = |x: f64| x.ln() as f32;
        let tiny = f32::from_bits(1) as f64;
        let ends = [
            1.0,
            4.0,
            104.0,
            89.0,
            ln(f32::MAX as f64),
            ln(f32::MIN_POSITIVE as f64),
            ln(tiny),
            ln(tiny / 2.0),
        ];
        for b in ends {
            for i in 0..=40 {
                v.extend([b.to_bits() + i, b.to_bits() - i].map(f32::from_bits));
            }
        }
        let neg: Vec<f32> = v.iter().map(|x| -x).collect();
        v.extend(neg);
        v
    }

    /// exp and erf samples for f64: uniform over the whole finite range of
    /// exp, near zero, over erf's two branches, random bit patterns (every
    /// exponent, NaNs, infinities), the edges.
    fn inputs64(rng: &mut StdRng) -> Vec<f64> {
        let mut xs = uniform64(rng, 200_000, -746.0, 710.0);
        xs.extend(uniform64(rng, 100_000, -2.0, 2.0));
        xs.extend(uniform64(rng, 20_000, -1e-6, 1e-6));
        xs.extend(uniform64(rng, 200_000, -7.0, 7.0));
        xs.extend((0..100_000).map(|_| f64::from_bits(rng.gen::<u64>())));
        xs.extend(edges64());
        xs
    }

    fn inputs32(rng: &mut StdRng) -> Vec<f32> {
        let mut xs: Vec<f32> = uniform64(rng, 200_000, -105.0, 90.0)
            .into_iter()
            .map(|x| x as f32)
            .collect();
        xs.extend(uniform64(rng, 100_000, -2.0, 2.0).iter().map(|&x| x as f32));
        xs.extend(uniform64(rng, 200_000, -5.0, 5.0).iter().map(|&x| x as f32));
        xs.extend((0..100_000).map(|_| f32::from_bits(rng.gen::<u32>())));
        // Every 97th f32 (both signs, every exponent).
        xs.extend((0..u32::MAX / 97).map(|i| f32::from_bits(i * 97)));
        xs.extend(edges32());
        xs
    }

    #[test]
    fn exp_within_an_ulp_of_libm() {
        if !avx2_fma() {
            eprintln!("no AVX2 and FMA here: nothing to test");
            return;
        }
        let mut rng = StdRng::seed_from_u64(7);
        let (u, at) = worst64(&inputs64(&mut rng), F64x4::exp, f64::exp);
        eprintln!("exp f64: max {u} ulp from f64::exp (at {at:e})");
        assert!(u <= 1, "exp f64: {u} ulp at {at:e}");
        let xs = inputs32(&mut rng);
        let (u, at) = worst32(&xs, F32x8::exp, |x| (x as f64).exp() as f32);
        eprintln!("exp f32: max {u} ulp from exp rounded from f64 (at {at:e})");
        assert!(u <= 1, "exp f32: {u} ulp at {at:e}");
        let (u, at) = worst32(&xs, F32x8::exp, f32::exp);
        eprintln!("exp f32: max {u} ulp from f32::exp (at {at:e})");
        assert!(u <= 2, "exp f32: {u} ulp from f32::exp at {at:e}");
    }

    #[test]
    fn erf_within_an_ulp_of_libm() {
        if !avx2_fma() {
            return;
        }
        let mut rng = StdRng::seed_from_u64(8);
        let (u, at) = worst64(&inputs64(&mut rng), F64x4::erf, libm::erf);
        eprintln!("erf f64: max {u} ulp from libm::erf (at {at:e})");
        assert!(u <= 1, "erf f64: {u} ulp at {at:e}");
        let xs = inputs32(&mut rng);
        let (u, at) = worst32(&xs, F32x8::erf, |x| libm::erf(x as f64) as f32);
        eprintln!("erf f32: max {u} ulp from erf rounded from f64 (at {at:e})");
        assert!(u <= 1, "erf f32: {u} ulp at {at:e}");
        let (u, at) = worst32(&xs, F32x8::erf, libm::erff);
        eprintln!("erf f32: max {u} ulp from libm::erff (at {at:e})");
        assert!(u <= 2, "erf f32: {u} ulp from libm::erff at {at:e}");
    }

    /// The 512-bit exp and erf (the same method, on twice the lanes, and
    /// the AVX2 erf on each half) within an ulp of libm, like the AVX2 ones,
    /// on the same samples but every 97th f32.
    #[test]
    fn exp_and_erf_in_512_bits_within_an_ulp_of_libm() {
        if !avx512() {
            eprintln!("no AVX-512 here: nothing to test");
            return;
        }
        let mut rng = StdRng::seed_from_u64(9);
        let xs = inputs64(&mut rng);
        let (u, at) = worst64(&xs, F64x8::exp, f64::exp);
        assert!(u <= 1, "exp f64x8: {u} ulp at {at:e}");
        let (u, at) = worst64(&xs, F64x8::erf, libm::erf);
        assert!(u <= 1, "erf f64x8: {u} ulp at {at:e}");
        let mut xs: Vec<f32> = uniform64(&mut rng, 400_000, -105.0, 90.0)
            .into_iter()
            .map(|x| x as f32)
            .collect();
        xs.extend((0..200_000).map(|_| f32::from_bits(rng.gen::<u32>())));
        xs.extend(edges32());
        let (u, at) = worst32(&xs, F32x16::exp, |x| (x as f64).exp() as f32);
        assert!(u <= 1, "exp f32x16: {u} ulp at {at:e}");
        let (u, at) = worst32(&xs, F32x16::erf, |x| libm::erf(x as f64) as f32);
        assert!(u <= 1, "erf f32x16: {u} ulp at {at:e}");
    }

    #[test]
    fn exact_values() {
        if !avx2_fma() {
            return;
        }
        // SAFETY: checked above.
        let (d, s) = unsafe { (F64x4::c(0.0), F32x8::c(0.0)) };
        assert_eq!(d.exp().to_array()[..4], [1.0; 4]);
        assert_eq!(s.exp().to_array()[..8], [1.0; 8]);
        // SAFETY: checked above.
        let big = unsafe { F64x4::load(&[-1e300, 1e300, 745.0, -f64::INFINITY]) };
        assert_eq!(
            big.exp().to_array()[..4],
            [0.0, f64::INFINITY, f64::INFINITY, 0.0]
        );
        assert_eq!(big.erf().to_array()[..4], [-1.0, 1.0, 1.0, -1.0]);
        let z = (-d).erf().to_array()[0];
        assert!(z == 0.0 && z.is_sign_negative(), "erf(-0) = {z}");
        let z = (-s).erf().to_array()[0];
        assert!(z == 0.0 && z.is_sign_negative(), "erf(-0) = {z}");
    }

    /// Lane `i` gets `f(x_i)`: each lane of a vector mixing magnitudes (and
    /// erf's branches: small, between, saturated) equals the function of
    /// that lane's input alone, splat over the whole vector.
    #[test]
    fn each_lane_gets_its_own_input() {
        if !avx2_fma() {
            return;
        }
        let xs = [0.3, -2.5, 7.0, -0.01, 1.5, -40.0, 0.99, 3.2];
        for shift in 0..8 {
            let a: [f64; 8] = std::array::from_fn(|i| xs[(i + shift) % 8]);
            let a32 = a.map(|x| x as f32);
            // SAFETY: checked above.
            unsafe {
                let v = F64x4::load(&a[..4]);
                let w = F32x8::load(&a32);
                for (f, name) in [
                    (F64x4::exp as fn(F64x4) -> F64x4, "exp"),
                    (F64x4::erf, "erf"),
                ] {
                    let got = f(v).to_array();
                    for i in 0..4 {
                        let one = f(F64x4::splat(a[i])).to_array()[0];
                        assert_eq!(got[i].to_bits(), one.to_bits(), "{name} f64 lane {i}");
                    }
                }
                for (f, name) in [
                    (F32x8::exp as fn(F32x8) -> F32x8, "exp"),
                    (F32x8::erf, "erf"),
                ] {
                    let got = f(w).to_array();
                    for i in 0..8 {
                        let one = f(F32x8::splat(a32[i])).to_array()[0];
                        assert_eq!(got[i].to_bits(), one.to_bits(), "{name} f32 lane {i}");
                    }
                }
            }
        }
    }
}
