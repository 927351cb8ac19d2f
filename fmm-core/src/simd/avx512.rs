//! 512-bit vectors ([`F32x16`], [`F64x8`]) for CPUs with AVX-512 (F and
//! DQ), chosen at run time over the AVX2 ones where the CPU has them.
//!
//! Why: twice the lanes per instruction, and `1 / sqrt` from the hardware
//! estimate in f64 too. AVX2 has no f64 estimate, so its f64 `rsqrt` is a
//! square root and a division, which bound the f64 P2P; `vrsqrt14pd`
//! (relative error below 2^-14) and two Newton steps give `1 / sqrt(x)`
//! within about an ulp from multiplies and FMAs alone.
//!
//! Masks keep the [`Lanes`] contract (a vector with every bit set in a true
//! lane): a comparison's mask register is widened to a vector
//! (`vpmovm2d`/`vpmovm2q`, AVX512DQ) and a blend narrows it back. `exp` is
//! the AVX2 one's method on 512 bits ([`super::math`]); `erf` runs the
//! AVX2 function on each 256-bit half.

use super::{lane_ops, Lanes, MAX_WIDTH};
use std::arch::x86_64::*;
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::sync::OnceLock;

/// Whether the generated evaluators may use the 512-bit path: the CPU has
/// AVX-512 F and DQ (and AVX2 and FMA), the vector path was not turned off
/// ([`super::set_vectors`]) and the 512-bit one not either
/// ([`set_wide_vectors`]).
pub fn avx512() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    super::avx2_fma()
        && !NO_512.load(std::sync::atomic::Ordering::Relaxed)
        && *HAS.get_or_init(|| {
            is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq")
        })
}

static NO_512: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Allows the 512-bit path where the CPU has it (the default) or keeps the
/// evaluators on the AVX2 one, for the whole process: benchmarks compare
/// the two on one machine with it (`--simd avx2`).
pub fn set_wide_vectors(on: bool) {
    NO_512.store(!on, std::sync::atomic::Ordering::Relaxed);
}

/// Sixteen f32 lanes.
#[derive(Clone, Copy, Debug)]
pub struct F32x16(__m512);

/// Eight f64 lanes.
#[derive(Clone, Copy, Debug)]
pub struct F64x8(__m512d);

// SAFETY (every `unsafe` block below): a value of these types exists only
// if one of the `unsafe` constructors ran, whose contract is that the CPU
// has AVX-512 F and DQ ([`avx512`]); slices are read within their length.

macro_rules! arithmetic {
    ($t:ident, $add:ident, $sub:ident, $mul:ident, $div:ident, $xor:ident, $splat:ident) => {
        impl Add for $t {
            type Output = $t;
            #[inline(always)]
            fn add(self, b: $t) -> $t {
                $t(unsafe { $add(self.0, b.0) })
            }
        }
        impl Sub for $t {
            type Output = $t;
            #[inline(always)]
            fn sub(self, b: $t) -> $t {
                $t(unsafe { $sub(self.0, b.0) })
            }
        }
        impl Mul for $t {
            type Output = $t;
            #[inline(always)]
            fn mul(self, b: $t) -> $t {
                $t(unsafe { $mul(self.0, b.0) })
            }
        }
        impl Div for $t {
            type Output = $t;
            #[inline(always)]
            fn div(self, b: $t) -> $t {
                $t(unsafe { $div(self.0, b.0) })
            }
        }
        impl Neg for $t {
            type Output = $t;
            #[inline(always)]
            fn neg(self) -> $t {
                $t(unsafe { $xor(self.0, $splat(-0.0)) })
            }
        }
    };
}

arithmetic!(
    F32x16,
    _mm512_add_ps,
    _mm512_sub_ps,
    _mm512_mul_ps,
    _mm512_div_ps,
    _mm512_xor_ps,
    _mm512_set1_ps
);
arithmetic!(
    F64x8,
    _mm512_add_pd,
    _mm512_sub_pd,
    _mm512_mul_pd,
    _mm512_div_pd,
    _mm512_xor_pd,
    _mm512_set1_pd
);

impl Lanes for F32x16 {
    lane_ops!(
        f32,
        16,
        _mm512_set1_ps,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_fmadd_ps,
        _mm512_fmsub_ps,
        _mm512_fnmadd_ps,
        _mm512_sqrt_ps,
        _mm512_min_ps,
        _mm512_max_ps,
        _mm512_cmp_ps_mask,
        _mm512_and_ps,
        _mm512_or_ps,
        _mm512_xor_ps,
        _mm512_andnot_ps,
        // Comparisons give mask registers: widened to vectors, and back.
        |k| _mm512_castsi512_ps(_mm512_movm_epi32(k)),
        _mm512_castsi512_ps(_mm512_set1_epi32(-1)),
        |m, a, b| _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(m)), b, a),
        _mm512_reduce_add_ps
    );

    /// The hardware estimate (relative error below 2^-14) and one Newton
    /// step, special values as the AVX2 one ([`super::F32x8`]).
    #[inline(always)]
    fn rsqrt(self) -> Self {
        unsafe { super::rsqrt_newton(self, F32x16(_mm512_rsqrt14_ps(self.0))) }
    }

    #[inline(always)]
    fn exp(self) -> Self {
        F32x16(unsafe { super::math::exp_ps512(self.0) })
    }

    #[inline(always)]
    fn erf(self) -> Self {
        unsafe {
            let lo = super::math::erf_ps(_mm512_castps512_ps256(self.0));
            let hi = super::math::erf_ps(_mm512_extractf32x8_ps::<1>(self.0));
            F32x16(_mm512_insertf32x8::<1>(_mm512_castps256_ps512(lo), hi))
        }
    }
}

impl Lanes for F64x8 {
    lane_ops!(
        f64,
        8,
        _mm512_set1_pd,
        _mm512_loadu_pd,
        _mm512_storeu_pd,
        _mm512_fmadd_pd,
        _mm512_fmsub_pd,
        _mm512_fnmadd_pd,
        _mm512_sqrt_pd,
        _mm512_min_pd,
        _mm512_max_pd,
        _mm512_cmp_pd_mask,
        _mm512_and_pd,
        _mm512_or_pd,
        _mm512_xor_pd,
        _mm512_andnot_pd,
        |k| _mm512_castsi512_pd(_mm512_movm_epi64(k)),
        _mm512_castsi512_pd(_mm512_set1_epi64(-1)),
        |m, a, b| _mm512_mask_blend_pd(_mm512_movepi64_mask(_mm512_castpd_si512(m)), b, a),
        _mm512_reduce_add_pd
    );

    /// The estimate (relative error below 2^-14) and two Newton steps
    /// `y + y e / 2`, `e = 1 - x y^2` by an FMA: the error falls to about
    /// 1.5 * 2^-28, then below 2^-54, so the result is within about an ulp
    /// (the tests measure it). Where `x y` is not finite (`x` zero,
    /// infinite, negative or NaN) the estimate is kept, which is what
    /// `1 / sqrt(x)` gives there: inf, 0, NaN.
    #[inline(always)]
    fn rsqrt(self) -> Self {
        unsafe {
            let x = self.0;
            let y0 = _mm512_rsqrt14_pd(x);
            let one = _mm512_set1_pd(1.0);
            let half = _mm512_set1_pd(0.5);
            let e = _mm512_fnmadd_pd(_mm512_mul_pd(x, y0), y0, one);
            let y1 = _mm512_fmadd_pd(_mm512_mul_pd(half, y0), e, y0);
            let e = _mm512_fnmadd_pd(_mm512_mul_pd(x, y1), y1, one);
            let y = _mm512_fmadd_pd(_mm512_mul_pd(half, y1), e, y1);
            let abs_xy = _mm512_andnot_pd(_mm512_set1_pd(-0.0), _mm512_mul_pd(x, y0));
            let special = _mm512_cmp_pd_mask::<_CMP_NLT_UQ>(abs_xy, _mm512_set1_pd(f64::INFINITY));
            F64x8(_mm512_mask_blend_pd(special, y, y0))
        }
    }

    #[inline(always)]
    fn exp(self) -> Self {
        F64x8(unsafe { super::math::exp_pd512(self.0) })
    }

    #[inline(always)]
    fn erf(self) -> Self {
        unsafe {
            let lo = super::math::erf_pd(_mm512_castpd512_pd256(self.0));
            let hi = super::math::erf_pd(_mm512_extractf64x4_pd::<1>(self.0));
            F64x8(_mm512_insertf64x4::<1>(_mm512_castpd256_pd512(lo), hi))
        }
    }
}
