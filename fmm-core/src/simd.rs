//! 256-bit vectors for the generated CPU evaluators (x86-64 with AVX2 and
//! FMA, chosen at run time).
//!
//! Why written out rather than left to the compiler: the portable evaluator
//! is vectorised by LLVM only for the baseline x86-64 target (SSE2, 4 lanes
//! of f32, `1 / sqrt` by division). Built for AVX2 the same loop ran 3.5
//! times slower on the development machine: LLVM turns the guard of the
//! singular kernels, `r2 > 0 ? rsqrt(r2 + eps2) : 0`, into a branch per
//! lane. Here every operation of the kernel DSL is one or a few AVX
//! instructions, the guard is a blend, and the f32 `rsqrt` is the hardware
//! estimate refined by one Newton step (about 2 ulp, like CUDA's `rsqrtf`).
//!
//! A value of [`F32x8`] or [`F64x4`] can only be made by the `unsafe`
//! constructors of [`Lanes`], whose contract is that the CPU has AVX2 and
//! FMA ([`avx2_fma`]); operations on existing values are then safe. Of the
//! functions the hardware lacks, `exp` and `erf` are computed on whole
//! vectors (`simd/math.rs`: range reduction and polynomials, within
//! an ulp of the scalar functions); `ln`, which no built-in kernel uses on
//! the CPU's hot path, is evaluated lane by lane with the scalar [`Real`]
//! function.

use crate::real::Real;
use std::arch::x86_64::*;
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

mod avx512;
mod math;

pub use avx512::{avx512, set_wide_vectors, F32x16, F64x8};

/// The most lanes of any vector type here (16 f32 in 512 bits).
pub const MAX_WIDTH: usize = 16;

/// Whether the vector path was turned off ([`set_vectors`]).
static OFF: AtomicBool = AtomicBool::new(false);

/// Whether the generated evaluators may use the AVX2 path: the CPU has
/// AVX2 and FMA, and the path was not turned off with [`set_vectors`].
pub fn avx2_fma() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    !OFF.load(Ordering::Relaxed)
        && *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// Turns the AVX2 path of the CPU evaluators on (the default, where the
/// CPU has it) or off for the whole process: benchmarks measure the
/// portable path on the same machine with it (`--simd off`).
pub fn set_vectors(on: bool) {
    OFF.store(!on, Ordering::Relaxed);
}

/// A vector of `WIDTH` numbers of one [`Real`] type, with the operations of
/// the kernel DSL. Comparisons return masks of the same type (all bits set
/// in a true lane), which [`Lanes::select`], [`Lanes::and`], [`Lanes::or`]
/// and [`Lanes::not`] take.
pub trait Lanes:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    type Scalar: Real;
    const WIDTH: usize;

    /// Every lane `x`.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    unsafe fn splat(x: Self::Scalar) -> Self;

    /// The first `WIDTH` numbers of `s`, which has at least that many.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    unsafe fn load(s: &[Self::Scalar]) -> Self;

    /// The `WIDTH` numbers of `s` from `i` on, without a bounds check.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA, and `i + WIDTH <= s.len()`.
    unsafe fn load_at(s: &[Self::Scalar], i: usize) -> Self;

    /// The numbers of `s` (fewer than `WIDTH`), the other lanes zero.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    unsafe fn load_partial(s: &[Self::Scalar]) -> Self {
        let mut a = [Self::Scalar::zero(); MAX_WIDTH];
        a[..s.len()].copy_from_slice(s);
        Self::load(&a)
    }

    /// A mask true in the first `k` lanes.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    unsafe fn first(k: usize) -> Self;

    /// A constant, rounded to the lanes' precision.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    unsafe fn c(x: f64) -> Self {
        Self::splat(Self::Scalar::c(x))
    }

    /// The sum of the lanes.
    fn sum(self) -> Self::Scalar;
    /// The lanes as an array (the first `WIDTH` entries).
    fn to_array(self) -> [Self::Scalar; MAX_WIDTH];
    /// Lanes from an array (its first `WIDTH` entries); `self` stands for
    /// the proof that the CPU has the vector's instructions.
    fn with_lanes(self, a: [Self::Scalar; MAX_WIDTH]) -> Self;

    /// `self * b + c` in one rounding.
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// `self * b - c` in one rounding.
    fn mul_sub(self, b: Self, c: Self) -> Self;
    /// `c - self * b` in one rounding.
    fn neg_mul_add(self, b: Self, c: Self) -> Self;
    fn sqrt(self) -> Self;
    fn rsqrt(self) -> Self;
    fn abs(self) -> Self;
    fn min(self, b: Self) -> Self;
    fn max(self, b: Self) -> Self;
    fn lt(self, b: Self) -> Self;
    fn le(self, b: Self) -> Self;
    fn gt(self, b: Self) -> Self;
    fn ge(self, b: Self) -> Self;
    fn eq(self, b: Self) -> Self;
    fn ne(self, b: Self) -> Self;
    fn and(self, b: Self) -> Self;
    fn or(self, b: Self) -> Self;
    fn not(self) -> Self;
    /// `a` where the mask `self` is true, else `b`.
    fn select(self, a: Self, b: Self) -> Self;

    /// A scalar function lane by lane.
    #[inline(always)]
    fn map(self, f: impl Fn(Self::Scalar) -> Self::Scalar) -> Self {
        let mut a = self.to_array();
        for x in a.iter_mut().take(Self::WIDTH) {
            *x = f(*x);
        }
        self.with_lanes(a)
    }
    #[inline(always)]
    fn exp(self) -> Self {
        self.map(Self::Scalar::exp)
    }
    #[inline(always)]
    fn erf(self) -> Self {
        self.map(Self::Scalar::erf)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        self.map(Self::Scalar::ln)
    }
}

/// Eight f32 lanes.
#[derive(Clone, Copy, Debug)]
pub struct F32x8(__m256);

/// Four f64 lanes.
#[derive(Clone, Copy, Debug)]
pub struct F64x4(__m256d);

// SAFETY (every `unsafe` block below): a value of these types exists only
// if one of the `unsafe` constructors ran, whose contract is that the CPU
// has AVX2 and FMA; slices are read within their length.

macro_rules! binary_ops {
    ($t:ident, $add:ident, $sub:ident, $mul:ident, $div:ident, $xor:ident, $splat:ident, $neg0:expr) => {
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
                $t(unsafe { $xor(self.0, $splat($neg0)) })
            }
        }
    };
}

binary_ops!(
    F32x8,
    _mm256_add_ps,
    _mm256_sub_ps,
    _mm256_mul_ps,
    _mm256_div_ps,
    _mm256_xor_ps,
    _mm256_set1_ps,
    -0.0
);
binary_ops!(
    F64x4,
    _mm256_add_pd,
    _mm256_sub_pd,
    _mm256_mul_pd,
    _mm256_div_pd,
    _mm256_xor_pd,
    _mm256_set1_pd,
    -0.0
);

/// The operations every vector type spells alike but for the intrinsics'
/// names (AVX2 here, AVX-512 in [`avx512`]). Where the two families differ
/// the caller passes the piece: `$wide` turns a comparison's result into a
/// vector mask (AVX2: it is one; AVX-512: a mask register, widened),
/// `$all` is a vector with every bit set, `$select(mask, a, b)` picks `a`
/// where the mask is set, and `$reduce` sums the lanes.
macro_rules! lane_ops {
    ($s:ty, $width:expr, $set1:ident, $loadu:ident, $storeu:ident, $fmadd:ident, $fmsub:ident,
     $fnmadd:ident, $sqrt:ident, $min:ident, $max:ident, $cmp:ident, $and:ident, $or:ident,
     $xor:ident, $andnot:ident, $wide:expr, $all:expr, $select:expr, $reduce:expr) => {
        type Scalar = $s;
        const WIDTH: usize = $width;
        #[inline(always)]
        unsafe fn splat(x: $s) -> Self {
            Self($set1(x))
        }
        #[inline(always)]
        unsafe fn load(s: &[$s]) -> Self {
            assert!(s.len() >= $width);
            Self($loadu(s.as_ptr()))
        }
        #[inline(always)]
        unsafe fn load_at(s: &[$s], i: usize) -> Self {
            debug_assert!(i + $width <= s.len());
            Self($loadu(s.as_ptr().add(i)))
        }
        #[inline(always)]
        unsafe fn first(k: usize) -> Self {
            let mut a = [0.0 as $s; MAX_WIDTH];
            for x in a.iter_mut().take(k.min($width)) {
                *x = <$s>::from_bits(!0);
            }
            Self($loadu(a.as_ptr()))
        }
        #[inline(always)]
        fn sum(self) -> $s {
            unsafe { ($reduce)(self.0) }
        }
        #[inline(always)]
        fn to_array(self) -> [$s; MAX_WIDTH] {
            let mut a = [0.0; MAX_WIDTH];
            unsafe { $storeu(a.as_mut_ptr(), self.0) };
            a
        }
        #[inline(always)]
        fn with_lanes(self, a: [$s; MAX_WIDTH]) -> Self {
            Self(unsafe { $loadu(a.as_ptr()) })
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            Self(unsafe { $fmadd(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn mul_sub(self, b: Self, c: Self) -> Self {
            Self(unsafe { $fmsub(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn neg_mul_add(self, b: Self, c: Self) -> Self {
            Self(unsafe { $fnmadd(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            Self(unsafe { $sqrt(self.0) })
        }
        #[inline(always)]
        fn abs(self) -> Self {
            Self(unsafe { $andnot($set1(-0.0), self.0) })
        }
        #[inline(always)]
        fn min(self, b: Self) -> Self {
            Self(unsafe { $min(self.0, b.0) })
        }
        #[inline(always)]
        fn max(self, b: Self) -> Self {
            Self(unsafe { $max(self.0, b.0) })
        }
        #[inline(always)]
        fn lt(self, b: Self) -> Self {
            Self(unsafe { ($wide)($cmp::<_CMP_LT_OQ>(self.0, b.0)) })
        }
        #[inline(always)]
        fn le(self, b: Self) -> Self {
            Self(unsafe { ($wide)($cmp::<_CMP_LE_OQ>(self.0, b.0)) })
        }
        #[inline(always)]
        fn gt(self, b: Self) -> Self {
            Self(unsafe { ($wide)($cmp::<_CMP_GT_OQ>(self.0, b.0)) })
        }
        #[inline(always)]
        fn ge(self, b: Self) -> Self {
            Self(unsafe { ($wide)($cmp::<_CMP_GE_OQ>(self.0, b.0)) })
        }
        #[inline(always)]
        fn eq(self, b: Self) -> Self {
            Self(unsafe { ($wide)($cmp::<_CMP_EQ_OQ>(self.0, b.0)) })
        }
        /// True where unequal or either is NaN, like Rust's `!=`.
        #[inline(always)]
        fn ne(self, b: Self) -> Self {
            Self(unsafe { ($wide)($cmp::<_CMP_NEQ_UQ>(self.0, b.0)) })
        }
        #[inline(always)]
        fn and(self, b: Self) -> Self {
            Self(unsafe { $and(self.0, b.0) })
        }
        #[inline(always)]
        fn or(self, b: Self) -> Self {
            Self(unsafe { $or(self.0, b.0) })
        }
        #[inline(always)]
        fn not(self) -> Self {
            Self(unsafe { $xor(self.0, $all) })
        }
        #[inline(always)]
        fn select(self, a: Self, b: Self) -> Self {
            Self(unsafe { ($select)(self.0, a.0, b.0) })
        }
    };
}
pub(crate) use lane_ops;

/// `1 / sqrt(x)` from the hardware estimate `y`: one Newton step,
/// `y (1.5 - 0.5 x y y)`. Where `x y` is not finite (`x` zero, infinite,
/// negative or NaN) the step would give NaN and the estimate is kept:
/// inf, 0, NaN, NaN as for `1 / sqrt(x)`.
///
/// # Safety
/// The vector type's instructions must be available (its callers' own
/// condition).
#[inline(always)]
pub(crate) unsafe fn rsqrt_newton<V: Lanes>(x: V, y: V) -> V {
    let xy = x * y;
    let h = V::c(-0.5) * xy;
    let r = y * h.mul_add(y, V::c(1.5));
    // Not below infinity: infinite or NaN.
    let special = xy.abs().lt(V::c(f64::INFINITY)).not();
    special.select(y, r)
}

/// The lanes' sum, first to last (the order every caller has had).
macro_rules! in_order_sum {
    ($store:ident, $s:ty, $width:expr) => {
        |v| {
            let mut a = [0.0 as $s; $width];
            $store(a.as_mut_ptr(), v);
            let mut s = 0.0;
            for x in a {
                s += x;
            }
            s
        }
    };
}

impl Lanes for F32x8 {
    lane_ops!(
        f32,
        8,
        _mm256_set1_ps,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_fmadd_ps,
        _mm256_fmsub_ps,
        _mm256_fnmadd_ps,
        _mm256_sqrt_ps,
        _mm256_min_ps,
        _mm256_max_ps,
        _mm256_cmp_ps,
        _mm256_and_ps,
        _mm256_or_ps,
        _mm256_xor_ps,
        _mm256_andnot_ps,
        |m| m,
        _mm256_castsi256_ps(_mm256_set1_epi32(-1)),
        |m, a, b| _mm256_blendv_ps(b, a, m),
        in_order_sum!(_mm256_storeu_ps, f32, 8)
    );

    /// The hardware estimate (relative error below 1.5 * 2^-12) and one
    /// Newton step ([`rsqrt_newton`]). (A subnormal `x` reads as zero to the
    /// estimate and gives inf.)
    #[inline(always)]
    fn rsqrt(self) -> Self {
        unsafe { rsqrt_newton(self, F32x8(_mm256_rsqrt_ps(self.0))) }
    }

    #[inline(always)]
    fn exp(self) -> Self {
        F32x8(unsafe { math::exp_ps(self.0) })
    }

    #[inline(always)]
    fn erf(self) -> Self {
        F32x8(unsafe { math::erf_ps(self.0) })
    }
}

impl Lanes for F64x4 {
    lane_ops!(
        f64,
        4,
        _mm256_set1_pd,
        _mm256_loadu_pd,
        _mm256_storeu_pd,
        _mm256_fmadd_pd,
        _mm256_fmsub_pd,
        _mm256_fnmadd_pd,
        _mm256_sqrt_pd,
        _mm256_min_pd,
        _mm256_max_pd,
        _mm256_cmp_pd,
        _mm256_and_pd,
        _mm256_or_pd,
        _mm256_xor_pd,
        _mm256_andnot_pd,
        |m| m,
        _mm256_castsi256_pd(_mm256_set1_epi64x(-1)),
        |m, a, b| _mm256_blendv_pd(b, a, m),
        in_order_sum!(_mm256_storeu_pd, f64, 4)
    );

    /// Exact division: there is no f64 estimate in AVX2.
    #[inline(always)]
    fn rsqrt(self) -> Self {
        unsafe { F64x4(_mm256_div_pd(_mm256_set1_pd(1.0), _mm256_sqrt_pd(self.0))) }
    }

    #[inline(always)]
    fn exp(self) -> Self {
        F64x4(unsafe { math::exp_pd(self.0) })
    }

    #[inline(always)]
    fn erf(self) -> Self {
        F64x4(unsafe { math::erf_pd(self.0) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lanes from sixteen values (the first `WIDTH` used).
    fn lanes<V: Lanes>(a: [f64; MAX_WIDTH]) -> V {
        // SAFETY: only called where the CPU has V's instructions.
        unsafe { V::load(&a.map(V::Scalar::c)[..V::WIDTH]) }
    }

    fn values<V: Lanes>(v: V) -> Vec<f64> {
        v.to_array()[..V::WIDTH]
            .iter()
            .map(|x| x.to_f64())
            .collect()
    }

    fn is_true(x: f64) -> bool {
        x.to_bits() != 0
    }

    /// Every operation against the scalar one, lane by lane, on ordinary
    /// and special values.
    fn ops_match_scalar<V: Lanes>() {
        let xs = [0.0, -0.0, 1.5, -2.25, 1e-3, f64::INFINITY, f64::NAN, 3.0];
        let ys = [1.0, 0.0, 1.5, 7.0, -1e-3, 2.0, 1.0, f64::NEG_INFINITY];
        for shift in 0..8 {
            let a: [f64; MAX_WIDTH] = std::array::from_fn(|i| xs[(i + shift) % 8]);
            let b: [f64; MAX_WIDTH] = std::array::from_fn(|i| ys[(i + 3 * shift + i / 8) % 8]);
            let (x, y) = (lanes::<V>(a), lanes::<V>(b));
            // SAFETY: only called after `avx2_fma()`.
            let zero = unsafe { V::c(0.0) };
            let r = |v: f64| V::Scalar::c(v).to_f64();
            let same = |got: V, want: &dyn Fn(f64, f64) -> f64, what: &str| {
                for (i, g) in values(got).into_iter().enumerate() {
                    let w = r(want(r(a[i]), r(b[i])));
                    assert!(
                        g == w || (g.is_nan() && w.is_nan()),
                        "{what}({}, {}) = {g}, not {w}",
                        a[i],
                        b[i]
                    );
                }
            };
            same(x + y, &|a, b| a + b, "add");
            same(x - y, &|a, b| a - b, "sub");
            same(x * y, &|a, b| a * b, "mul");
            same(x / y, &|a, b| a / b, "div");
            same(-x, &|a, _| -a, "neg");
            same(V::abs(x), &|a, _| a.abs(), "abs");
            same(V::sqrt(x), &|a, _| a.sqrt(), "sqrt");
            // min and max as the hardware has them agree with Rust's where
            // no operand is NaN.
            let (fx, fy) = (
                V::select(V::eq(x, x), x, zero),
                V::select(V::eq(y, y), y, zero),
            );
            let no_nan = |v: f64| if v.is_nan() { 0.0 } else { v };
            same(V::min(fx, fy), &|a, b| no_nan(a).min(no_nan(b)), "min");
            same(V::max(fx, fy), &|a, b| no_nan(a).max(no_nan(b)), "max");
            let mask = |got: V, want: &dyn Fn(f64, f64) -> bool, what: &str| {
                for (i, g) in values(got).into_iter().enumerate() {
                    assert_eq!(
                        is_true(g),
                        want(r(a[i]), r(b[i])),
                        "{what}({}, {})",
                        a[i],
                        b[i]
                    );
                }
            };
            mask(V::lt(x, y), &|a, b| a < b, "lt");
            mask(V::le(x, y), &|a, b| a <= b, "le");
            mask(V::gt(x, y), &|a, b| a > b, "gt");
            mask(V::ge(x, y), &|a, b| a >= b, "ge");
            mask(V::eq(x, y), &|a, b| a == b, "eq");
            mask(V::ne(x, y), &|a, b| a != b, "ne");
            #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN lanes are the point
            mask(V::not(V::lt(x, y)), &|a, b| !(a < b), "not");
            mask(
                V::and(V::lt(x, y), V::gt(x, zero)),
                &|a, b| a < b && a > 0.0,
                "and",
            );
            mask(
                V::or(V::lt(x, y), V::gt(x, zero)),
                &|a, b| a < b || a > 0.0,
                "or",
            );
            same(
                V::select(V::lt(x, y), x, y),
                &|a, b| if a < b { a } else { b },
                "select",
            );
            // The fused forms round once: compare with the f64 result
            // rounded (exact for these operands in f32; f64 gets one ulp).
            for (got, want, what) in [
                (
                    V::mul_add(x, y, x),
                    (|a: f64, b: f64| a.mul_add(b, a)) as fn(f64, f64) -> f64,
                    "mul_add",
                ),
                (V::mul_sub(x, y, x), |a, b| a.mul_add(b, -a), "mul_sub"),
                (
                    V::neg_mul_add(x, y, x),
                    |a, b| (-a).mul_add(b, a),
                    "neg_mul_add",
                ),
            ] {
                same(got, &want, what);
            }
        }
    }

    #[test]
    fn f32_and_f64_lanes_match_scalar_ops() {
        if !avx2_fma() {
            eprintln!("no AVX2 and FMA here: nothing to test");
            return;
        }
        ops_match_scalar::<F32x8>();
        ops_match_scalar::<F64x4>();
        if avx512() {
            ops_match_scalar::<F32x16>();
            ops_match_scalar::<F64x8>();
        }
    }

    /// The 512-bit `1 / sqrt`: f32 as close as the AVX2 one, f64 within two
    /// ulps of the correctly rounded value (from the estimate and two Newton
    /// steps), and both exact at the special values.
    #[test]
    fn rsqrt_in_512_bits() {
        if !avx512() {
            eprintln!("no AVX-512 here: nothing to test");
            return;
        }
        let mut worst32 = 0.0f64;
        let mut worst64 = 0u64;
        let mut x = 1e-300f64;
        while x < 1e300 {
            let a: [f64; 8] = std::array::from_fn(|i| x * (1.0 + 0.37 * i as f64));
            // SAFETY: checked above.
            let got = unsafe { F64x8::load(&a) }.rsqrt().to_array();
            for i in 0..8 {
                // 1 / sqrt(a) correctly rounded, from the f64 sqrt (exact
                // rounding) and a division: within an ulp of it.
                let want = 1.0 / a[i].sqrt();
                worst64 =
                    worst64.max((got[i].to_bits() as i64 - want.to_bits() as i64).unsigned_abs());
            }
            if (1e-30..1e30).contains(&x) {
                let a32: [f32; 16] = std::array::from_fn(|i| (x * (1.0 + 0.19 * i as f64)) as f32);
                // SAFETY: checked above.
                let got = unsafe { F32x16::load(&a32) }.rsqrt().to_array();
                for i in 0..16 {
                    let want = 1.0 / (a32[i] as f64).sqrt();
                    worst32 = worst32.max((got[i] as f64 - want).abs() / want);
                }
            }
            x *= 1.37;
        }
        assert!(worst64 <= 2, "f64 rsqrt: {worst64} ulp");
        assert!(
            worst32 < 4.0 * f32::EPSILON as f64,
            "f32 rsqrt relative error {worst32:e}"
        );
        let a = [0.0, -0.0, f64::INFINITY, -1.0, f64::NAN, 4.0, 0.25, 1.0];
        // SAFETY: checked above.
        let got = unsafe { F64x8::load(&a) }.rsqrt().to_array();
        assert_eq!(got[0], f64::INFINITY);
        assert_eq!(got[1], f64::NEG_INFINITY);
        assert_eq!(got[2], 0.0);
        assert!(got[3].is_nan() && got[4].is_nan());
        assert_eq!(got[5..8], [0.5, 2.0, 1.0]);
        let a32 = [0.0, -0.0, f32::INFINITY, -1.0, f32::NAN, 4.0, 0.25, 1.0].repeat(2);
        // SAFETY: checked above.
        let got = unsafe { F32x16::load(&a32) }.rsqrt().to_array();
        assert_eq!(got[8], f32::INFINITY);
        assert_eq!(got[9], f32::NEG_INFINITY);
        assert_eq!(got[10], 0.0);
        assert!(got[11].is_nan() && got[12].is_nan());
    }

    #[test]
    fn rsqrt_is_close_and_exact_at_special_values() {
        if !avx2_fma() {
            return;
        }
        // Relative error over 60 decades of f32 normals.
        let mut worst = 0.0f64;
        let mut x = 1e-30f32;
        while x < 1e30 {
            let a: [f32; 8] = std::array::from_fn(|i| x * (1.0 + 0.37 * i as f32));
            // SAFETY: checked above.
            let got = unsafe { F32x8::load(&a) }.rsqrt().to_array();
            for i in 0..8 {
                let want = 1.0 / (a[i] as f64).sqrt();
                worst = worst.max((got[i] as f64 - want).abs() / want);
            }
            x *= 1.7;
        }
        assert!(
            worst < 4.0 * f32::EPSILON as f64,
            "rsqrt relative error {worst:e}"
        );
        // Zero, infinity, negative, NaN: what 1 / sqrt(x) gives.
        let a = [0.0, -0.0, f32::INFINITY, -1.0, f32::NAN, 4.0, 0.25, 1.0];
        // SAFETY: checked above.
        let got = unsafe { F32x8::load(&a) }.rsqrt().to_array();
        assert_eq!(got[0], f32::INFINITY);
        assert_eq!(got[1], f32::NEG_INFINITY);
        assert_eq!(got[2], 0.0);
        assert!(got[3].is_nan() && got[4].is_nan());
        for i in 5..8 {
            assert!((got[i] - 1.0 / a[i].sqrt()).abs() <= 2.0 * f32::EPSILON * got[i]);
        }
    }

    #[test]
    fn partial_loads_masks_and_sums() {
        if !avx2_fma() {
            return;
        }
        let s = [1.0f32, 2.0, 3.0];
        // SAFETY: checked above.
        unsafe {
            let v = F32x8::load_partial(&s);
            assert_eq!(v.to_array()[..8], [1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
            assert_eq!(v.sum(), 6.0);
            let m = F32x8::first(2);
            assert_eq!(
                m.select(v, F32x8::c(-1.0)).to_array()[..4],
                [1.0, 2.0, -1.0, -1.0]
            );
            let d = F64x4::load_partial(&[5.0, 6.0]);
            assert_eq!(d.to_array()[..4], [5.0, 6.0, 0.0, 0.0]);
            assert_eq!(F64x4::first(3).select(F64x4::c(1.0), d).sum(), 3.0);
        }
        if !avx512() {
            return;
        }
        // SAFETY: checked above.
        unsafe {
            let s: Vec<f32> = (1..=11).map(|i| i as f32).collect();
            let v = F32x16::load_partial(&s);
            assert_eq!(
                v.to_array()[..12],
                [1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 0.]
            );
            assert_eq!(v.sum(), 66.0);
            let m = F32x16::first(10);
            assert_eq!(
                m.select(v, F32x16::c(-1.0)).to_array()[9..12],
                [10.0, -1.0, -1.0]
            );
            let d = F64x8::load_partial(&[5.0, 6.0, 7.0]);
            assert_eq!(d.to_array()[..4], [5.0, 6.0, 7.0, 0.0]);
            assert_eq!(F64x8::first(5).select(F64x8::c(1.0), d).sum(), 5.0);
        }
    }
}
