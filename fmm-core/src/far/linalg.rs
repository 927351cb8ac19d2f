//! The dense linear algebra of the compressed M2L ([`super::compressed`]),
//! in f64 (products also in f32, [`Element`]): matrix products by `matrixmultiply`'s blocked GEMM (the AVX2
//! and FMA kernels chosen at run time, as BLAS would; `faer`'s was not
//! faster on these shapes, measured), the symmetric eigenproblem and the
//! pseudo-inverse by `faer`. Matrices are column-major slices with a
//! leading dimension, as in BLAS.

use rayon::prelude::*;

use crate::real::Real;

/// A matrix element [`gemm`] multiplies: f64, or f32 where the compressed
/// M2L's rank tolerance leaves room for single precision's rounding.
pub(crate) trait Element: Real {
    /// `x` in this type: borrowed where it is f64.
    fn from_f64s(x: &[f64]) -> std::borrow::Cow<'_, [Self]>;

    /// `matrixmultiply`'s GEMM of this type (its arguments).
    ///
    /// # Safety
    /// As `matrixmultiply::dgemm`: the strides and extents lie inside the
    /// three matrices, and `c` aliases neither `a` nor `b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn raw_gemm(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
}

macro_rules! element {
    ($t:ty, $gemm:path, |$x:ident| $from:expr) => {
        impl Element for $t {
            fn from_f64s($x: &[f64]) -> std::borrow::Cow<'_, [Self]> {
                $from
            }

            #[allow(clippy::too_many_arguments)]
            unsafe fn raw_gemm(
                m: usize,
                k: usize,
                n: usize,
                alpha: Self,
                a: *const Self,
                rsa: isize,
                csa: isize,
                b: *const Self,
                rsb: isize,
                csb: isize,
                beta: Self,
                c: *mut Self,
                rsc: isize,
                csc: isize,
            ) {
                // SAFETY: the caller's.
                unsafe { $gemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
            }
        }
    };
}
element!(f64, matrixmultiply::dgemm, |x| std::borrow::Cow::Borrowed(
    x
));
element!(f32, matrixmultiply::sgemm, |x| x
    .iter()
    .map(|&v| v as f32)
    .collect());

/// A column-major view: element `(i, j)` at `data[i + j * ld]`, or of the
/// transpose when `t` is set (the stored matrix is then `cols x rows`).
#[derive(Clone, Copy)]
pub(crate) struct View<'a, T = f64> {
    pub(crate) data: &'a [T],
    pub(crate) ld: usize,
    pub(crate) t: bool,
}

impl<'a, T> View<'a, T> {
    /// The matrix stored in `data` with leading dimension `ld`.
    pub(crate) fn new(data: &'a [T], ld: usize) -> Self {
        View { data, ld, t: false }
    }

    /// Its transpose.
    pub(crate) fn t(self) -> Self {
        View { t: !self.t, ..self }
    }

    /// The matrix of its rows from `first` on.
    fn rows_from(self, first: usize) -> Self {
        let at = if self.t { first * self.ld } else { first };
        View {
            data: &self.data[at.min(self.data.len())..],
            ..self
        }
    }

    /// Row and column strides of the `rows x cols` matrix this views,
    /// after checking that it lies inside the slice.
    fn strides(&self, rows: usize, cols: usize) -> (isize, isize) {
        let (r, c) = if self.t { (cols, rows) } else { (rows, cols) };
        assert!(
            r <= self.ld || c <= 1,
            "leading dimension {} < {r}",
            self.ld
        );
        if r > 0 && c > 0 {
            assert!(
                (c - 1) * self.ld + r <= self.data.len(),
                "view past its slice"
            );
        }
        if self.t {
            (self.ld as isize, 1)
        } else {
            (1, self.ld as isize)
        }
    }
}

/// `c = alpha a b + beta c` with `a` `m x k`, `b` `k x n` and `c` `m x n`
/// column-major with leading dimension `ldc`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<T: Element>(
    m: usize,
    k: usize,
    n: usize,
    alpha: T,
    a: View<'_, T>,
    b: View<'_, T>,
    beta: T,
    c: &mut [T],
    ldc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    let (rsa, csa) = a.strides(m, k);
    let (rsb, csb) = b.strides(k, n);
    assert!(
        m <= ldc && (n - 1) * ldc + m <= c.len(),
        "product past its slice"
    );
    // SAFETY: the strides and extents of all three matrices were checked
    // against their slices above; `c` is borrowed mutably, so it cannot
    // alias `a` or `b`.
    unsafe {
        T::raw_gemm(
            m,
            k,
            n,
            alpha,
            a.data.as_ptr(),
            rsa,
            csa,
            b.data.as_ptr(),
            rsb,
            csb,
            beta,
            c.as_mut_ptr(),
            1,
            ldc as isize,
        );
    }
}

/// [`gemm`] with `beta = 0` over columns of `b` and `c` in parallel
/// blocks: `c = a b`, `b` and `c` stored with leading dimensions `k` and
/// `m` (whole columns).
pub(crate) fn par_gemm<T: Element>(
    m: usize,
    k: usize,
    n: usize,
    a: View<'_, T>,
    b: &[T],
    c: &mut [T],
) {
    const BLOCK: usize = 256;
    c[..m * n]
        .par_chunks_mut(m * BLOCK)
        .zip(b[..k * n].par_chunks(k * BLOCK))
        .for_each(|(cb, bb)| {
            let cols = cb.len() / m.max(1);
            gemm(m, k, cols, T::c(1.0), a, View::new(bb, k), T::zero(), cb, m);
        });
}

/// `g += a a^T` for `a` `n x k` and `g` `n x n` column-major (and
/// symmetric): the products of the blocks on and below the diagonal only,
/// then mirrored, about half the flops of [`gemm`]. The Gram matrices of
/// the compressed M2L's bases were most of its precomputation.
pub(crate) fn gram_add(n: usize, k: usize, a: View<'_>, g: &mut [f64]) {
    const BLOCK: usize = 128;
    assert!(g.len() >= n * n, "Gram matrix past its slice");
    for j0 in (0..n).step_by(BLOCK) {
        let jn = BLOCK.min(n - j0);
        for i0 in (j0..n).step_by(BLOCK) {
            let im = BLOCK.min(n - i0);
            gemm(
                im,
                k,
                jn,
                1.0,
                a.rows_from(i0),
                a.rows_from(j0).t(),
                1.0,
                &mut g[i0 + j0 * n..],
                n,
            );
        }
    }
    // The upper triangle from the lower.
    for j in 0..n {
        for i in j + 1..n {
            g[j + i * n] = g[i + j * n];
        }
    }
}

/// The eigenvectors of the symmetric `n x n` matrix `g` (column-major) in
/// order of decreasing eigenvalue, with the eigenvalues. By `faer`'s
/// blocked tridiagonalisation: on the compressed M2L's Gram matrices (864
/// to 1029 a side) it took a quarter of the time of `nalgebra`'s.
pub(crate) fn symmetric_eigen(n: usize, g: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let m = faer::MatRef::from_column_major_slice(&g[..n * n], n, n);
    let e = m
        .self_adjoint_eigen(faer::Side::Lower)
        .expect("the eigenproblem of a finite symmetric matrix converges");
    // faer orders them increasing.
    let (s, u) = (e.S().column_vector(), e.U());
    let values = (0..n).rev().map(|i| s[i]).collect();
    let mut vectors = Vec::with_capacity(n * n);
    for i in (0..n).rev() {
        vectors.extend(u.col(i).iter());
    }
    (values, vectors)
}

/// The pseudo-inverse of the `m x n` matrix `a` (column-major), `n x m`
/// column-major: singular values at or below `cut` are taken as zero.
pub(crate) fn pseudo_inverse(m: usize, n: usize, a: &[f64], cut: f64) -> Vec<f64> {
    let a = faer::MatRef::from_column_major_slice(&a[..m * n], m, n);
    let svd = a
        .thin_svd()
        .expect("the singular value decomposition of a finite matrix converges");
    let (u, s, v) = (svd.U(), svd.S().column_vector(), svd.V());
    // pinv = V diag(1 / s) U^T over the singular values kept.
    let mut out = vec![0.0; n * m];
    for (k, &sk) in s.iter().enumerate() {
        if sk <= cut {
            continue;
        }
        for j in 0..m {
            let f = u[(j, k)] / sk;
            for i in 0..n {
                out[i + j * n] += v[(i, k)] * f;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A naive product, the reference.
    fn naive(m: usize, k: usize, n: usize, a: impl Fn(usize, usize) -> f64, b: &[f64]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for j in 0..n {
            for i in 0..m {
                c[i + j * m] = (0..k).map(|l| a(i, l) * b[l + j * k]).sum();
            }
        }
        c
    }

    #[test]
    fn products_match_a_naive_loop_with_and_without_transposes() {
        let (m, k, n) = (7, 5, 600);
        let a: Vec<f64> = (0..m * k).map(|i| ((i * 37) % 11) as f64 - 5.0).collect();
        let b: Vec<f64> = (0..k * n).map(|i| ((i * 13) % 7) as f64 * 0.5).collect();
        let mut c = vec![0.0; m * n];
        par_gemm(m, k, n, View::new(&a, m), &b, &mut c);
        assert_eq!(c, naive(m, k, n, |i, l| a[i + l * m], &b));
        // a stored as its transpose (k x m).
        let at: Vec<f64> = (0..k * m).map(|x| a[(x / k) + (x % k) * m]).collect();
        let mut c2 = vec![0.0; m * n];
        par_gemm(m, k, n, View::new(&at, k).t(), &b, &mut c2);
        assert_eq!(c2, c);
        // Accumulation with beta = 1.
        gemm(
            m,
            k,
            n,
            2.0,
            View::new(&a, m),
            View::new(&b, k),
            1.0,
            &mut c2,
            m,
        );
        for (x, y) in c2.iter().zip(&c) {
            assert_eq!(*x, 3.0 * y);
        }
    }

    #[test]
    fn gram_products_match_a_full_product() {
        for (n, k) in [(5, 3), (300, 17), (129, 128)] {
            let a: Vec<f64> = (0..n * k).map(|i| ((i * 37) % 23) as f64 - 11.0).collect();
            let mut g = vec![1.0; n * n];
            let mut want = g.clone();
            gram_add(n, k, View::new(&a, n), &mut g);
            let at = View::new(&a, n);
            gemm(n, k, n, 1.0, at, at.t(), 1.0, &mut want, n);
            assert_eq!(g, want);
            // `a` stored as its transpose.
            let t: Vec<f64> = (0..k * n).map(|x| a[(x / k) + (x % k) * n]).collect();
            let mut g2 = vec![1.0; n * n];
            gram_add(n, k, View::new(&t, k).t(), &mut g2);
            assert_eq!(g2, want);
        }
    }

    #[test]
    fn eigenvectors_diagonalise_in_decreasing_order() {
        let n = 6;
        let b: Vec<f64> = (0..n * n).map(|i| ((i * 29) % 13) as f64 - 6.0).collect();
        // g = b b^T, symmetric positive semidefinite.
        let mut g = vec![0.0; n * n];
        gemm(
            n,
            n,
            n,
            1.0,
            View::new(&b, n),
            View::new(&b, n).t(),
            0.0,
            &mut g,
            n,
        );
        let (vals, vecs) = symmetric_eigen(n, &g);
        assert!(vals.windows(2).all(|w| w[0] >= w[1]));
        for (j, &l) in vals.iter().enumerate() {
            let v = &vecs[j * n..(j + 1) * n];
            let mut gv = vec![0.0; n];
            gemm(
                n,
                n,
                1,
                1.0,
                View::new(&g, n),
                View::new(v, n),
                0.0,
                &mut gv,
                n,
            );
            for i in 0..n {
                assert!(
                    (gv[i] - l * v[i]).abs() < 1e-9 * vals[0],
                    "{} {}",
                    gv[i],
                    l * v[i]
                );
            }
        }
    }
}
