//! The floating-point types the CPU evaluators are generic over.

use std::fmt::{Debug, Display};
use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub, SubAssign};

/// `f32` or `f64`: what generated CPU code needs of a number.
///
/// The generated evaluators call these as `R::sqrt(x)`: each built-in
/// function of the kernel DSL (a row of `fmm_codegen::builtins::BUILTINS`)
/// names the method here that computes it, and `tests/builtins.rs` checks
/// every row against its f64 meaning.
pub trait Real:
    sealed::Sealed
    + Copy
    + Send
    + Sync
    + Default
    + PartialOrd
    + Debug
    + Display
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + 'static
{
    /// `"f32"` or `"f64"`.
    const NAME: &'static str;
    /// The AVX2 vector of this type ([`crate::simd`]).
    #[cfg(target_arch = "x86_64")]
    type Wide: crate::simd::Lanes<Scalar = Self>;
    /// The AVX-512 vector of this type ([`crate::simd::avx512`]).
    #[cfg(target_arch = "x86_64")]
    type Wide512: crate::simd::Lanes<Scalar = Self>;
    fn zero() -> Self;
    /// A constant, rounded to this precision.
    fn c(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn sqrt(x: Self) -> Self;
    /// `1 / sqrt(x)`.
    fn rsqrt(x: Self) -> Self;
    fn exp(x: Self) -> Self;
    fn erf(x: Self) -> Self;
    fn ln(x: Self) -> Self;
    fn abs(x: Self) -> Self;
    fn min(x: Self, y: Self) -> Self;
    fn max(x: Self, y: Self) -> Self;
    fn is_finite(self) -> bool;
    /// `if c { a } else { b }`, written so that it compiles to a blend.
    #[inline(always)]
    fn select(c: bool, a: Self, b: Self) -> Self {
        if c {
            a
        } else {
            b
        }
    }
}

macro_rules! impl_real {
    ($t:ty, $name:literal, $erf:path, $wide:ident, $wide512:ident) => {
        impl Real for $t {
            const NAME: &'static str = $name;
            #[cfg(target_arch = "x86_64")]
            type Wide = crate::simd::$wide;
            #[cfg(target_arch = "x86_64")]
            type Wide512 = crate::simd::$wide512;
            #[inline(always)]
            fn zero() -> Self {
                0.0
            }
            #[inline(always)]
            fn c(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sqrt(x: Self) -> Self {
                x.sqrt()
            }
            #[inline(always)]
            fn rsqrt(x: Self) -> Self {
                1.0 / x.sqrt()
            }
            #[inline(always)]
            fn exp(x: Self) -> Self {
                x.exp()
            }
            #[inline(always)]
            fn erf(x: Self) -> Self {
                $erf(x)
            }
            #[inline(always)]
            fn ln(x: Self) -> Self {
                x.ln()
            }
            #[inline(always)]
            fn abs(x: Self) -> Self {
                x.abs()
            }
            #[inline(always)]
            fn min(x: Self, y: Self) -> Self {
                x.min(y)
            }
            #[inline(always)]
            fn max(x: Self, y: Self) -> Self {
                x.max(y)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}

impl_real!(f32, "f32", libm::erff, F32x8, F32x16);
impl_real!(f64, "f64", libm::erf, F64x4, F64x8);

/// Only f32 and f64 are `Real`: the host-device copies read them as plain
/// bytes (`cuda::transfer`), and the kernels are emitted for these two.
mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}
