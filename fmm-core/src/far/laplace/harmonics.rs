//! Solid harmonics of the Laplace equation, scaled so that the expansion
//! theorems need no factorials (the normalisation of Dehnen 2014 and of
//! hu2011 Appendix B up to signs):
//!
//! - regular `R_n^m(x) = r^n P_n^m(cos t) e^{i m phi} / (n + m)!` (with the
//!   Condon-Shortley phase), `R_0^0 = 1`;
//! - singular `I_n^m(x) = (n - m)! P_n^m(cos t) e^{i m phi} / r^{n + 1}`,
//!   `I_0^0 = 1 / r`;
//! - `X_n^{-m} = (-1)^m conj(X_n^m)` for both.
//!
//! What the operators rest on (each checked in the tests below against
//! direct evaluation):
//!
//! - `1 / |x - y| = sum_{n, m} conj(R_n^m(y)) I_n^m(x)` for `|y| < |x|`;
//! - `R_n^m(x + y) = sum_{k, l} R_k^l(x) R_{n-k}^{m-l}(y)`;
//! - `I_n^m(x - y) = sum_{k, l} conj(R_k^l(y)) I_{n+k}^{m+l}(x)` for
//!   `|y| < |x|`;
//! - `d/dz R_n^m = R_{n-1}^m`, `(d/dx + i d/dy) R_n^m = R_{n-1}^{m+1}`,
//!   `(d/dx - i d/dy) R_n^m = -R_{n-1}^{m-1}`.
//!
//! Storage is real-valued in effect: only `m >= 0` is kept, as a complex
//! number per `(n, m)` at [`idx`], since the sources' strengths are real and
//! the negative orders follow from the symmetry.

use std::ops::{Add, AddAssign, Mul, Neg, Sub};

/// A complex number (only what the expansions need).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct C {
    pub re: f64,
    pub im: f64,
}

impl C {
    pub const ZERO: C = C { re: 0.0, im: 0.0 };

    #[inline(always)]
    pub fn new(re: f64, im: f64) -> C {
        C { re, im }
    }

    #[inline(always)]
    pub fn conj(self) -> C {
        C::new(self.re, -self.im)
    }

    #[inline(always)]
    pub fn scale(self, s: f64) -> C {
        C::new(self.re * s, self.im * s)
    }
}

impl Add for C {
    type Output = C;
    #[inline(always)]
    fn add(self, b: C) -> C {
        C::new(self.re + b.re, self.im + b.im)
    }
}

impl Sub for C {
    type Output = C;
    #[inline(always)]
    fn sub(self, b: C) -> C {
        C::new(self.re - b.re, self.im - b.im)
    }
}

impl Mul for C {
    type Output = C;
    #[inline(always)]
    fn mul(self, b: C) -> C {
        C::new(
            self.re * b.re - self.im * b.im,
            self.re * b.im + self.im * b.re,
        )
    }
}

impl Neg for C {
    type Output = C;
    #[inline(always)]
    fn neg(self) -> C {
        C::new(-self.re, -self.im)
    }
}

impl AddAssign for C {
    #[inline(always)]
    fn add_assign(&mut self, b: C) {
        self.re += b.re;
        self.im += b.im;
    }
}

/// Number of stored coefficients of order `p` (`0 <= m <= n <= p`).
#[inline(always)]
pub fn ncoef(p: usize) -> usize {
    (p + 1) * (p + 2) / 2
}

/// Where `(n, m)`, `0 <= m <= n`, is stored.
#[inline(always)]
pub fn idx(n: usize, m: usize) -> usize {
    n * (n + 1) / 2 + m
}

/// The degree `n` of the coefficient stored at `i` ([`idx`]).
pub fn degree(i: usize) -> usize {
    let mut n = ((2.0 * i as f64).sqrt()) as usize;
    while idx(n, 0) > i {
        n -= 1;
    }
    while idx(n + 1, 0) <= i {
        n += 1;
    }
    n
}

/// `X_n^m` for any `m` with `|m| <= n`, from the stored `m >= 0` half.
#[inline(always)]
pub fn get(x: &[C], n: usize, m: isize) -> C {
    if m >= 0 {
        x[idx(n, m as usize)]
    } else {
        let v = x[idx(n, (-m) as usize)].conj();
        if m & 1 == 0 {
            v
        } else {
            -v
        }
    }
}

/// `R_n^m(v)` for `0 <= m <= n <= p` into `out` (length [`ncoef`]`(p)`).
pub fn regular(v: [f64; 3], p: usize, out: &mut [C]) {
    let [x, y, z] = v;
    let r2 = x * x + y * y + z * z;
    let w = C::new(x, y);
    out[0] = C::new(1.0, 0.0);
    for m in 1..=p {
        out[idx(m, m)] = (w * out[idx(m - 1, m - 1)]).scale(-1.0 / (2 * m) as f64);
    }
    for m in 0..=p {
        for n in m + 1..=p {
            let a = out[idx(n - 1, m)].scale((2 * n - 1) as f64 * z);
            let b = if n >= m + 2 {
                out[idx(n - 2, m)].scale(r2)
            } else {
                C::ZERO
            };
            out[idx(n, m)] = (a - b).scale(1.0 / ((n + m) * (n - m)) as f64);
        }
    }
}

/// `I_n^m(v)` for `0 <= m <= n <= p` into `out` (`v` not zero).
pub fn singular(v: [f64; 3], p: usize, out: &mut [C]) {
    let [x, y, z] = v;
    let r2 = x * x + y * y + z * z;
    let inv_r2 = 1.0 / r2;
    let w = C::new(x, y);
    out[0] = C::new(inv_r2.sqrt(), 0.0);
    for m in 1..=p {
        out[idx(m, m)] = (w * out[idx(m - 1, m - 1)]).scale(-((2 * m - 1) as f64) * inv_r2);
    }
    for m in 0..=p {
        for n in m + 1..=p {
            let a = out[idx(n - 1, m)].scale((2 * n - 1) as f64 * z);
            let b = if n >= m + 2 {
                let c = ((n - 1) * (n - 1) - m * m) as f64;
                out[idx(n - 2, m)].scale(c)
            } else {
                C::ZERO
            };
            out[idx(n, m)] = (a - b).scale(inv_r2);
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn degree_inverts_idx() {
        for n in 0..40 {
            for m in 0..=n {
                assert_eq!(degree(idx(n, m)), n, "({n}, {m})");
            }
        }
    }

    use super::*;

    fn close(a: C, b: C, tol: f64, what: &str) {
        let e = ((a.re - b.re).powi(2) + (a.im - b.im).powi(2)).sqrt();
        let s = (b.re.powi(2) + b.im.powi(2)).sqrt().max(1e-300);
        assert!(e <= tol * s, "{what}: {a:?} against {b:?}");
    }

    fn all(f: fn([f64; 3], usize, &mut [C]), v: [f64; 3], p: usize) -> Vec<C> {
        let mut out = vec![C::ZERO; ncoef(p)];
        f(v, p, &mut out);
        out
    }

    #[test]
    fn the_addition_theorem_gives_one_over_distance() {
        let x = [2.1, -1.3, 0.7];
        let y = [0.2, 0.15, -0.3];
        let p = 30;
        let (ry, ix) = (all(regular, y, p), all(singular, x, p));
        let mut s = C::ZERO;
        for n in 0..=p {
            for m in -(n as isize)..=n as isize {
                s += get(&ry, n, m).conj() * get(&ix, n, m);
            }
        }
        let d = [x[0] - y[0], x[1] - y[1], x[2] - y[2]];
        let want = 1.0 / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
        assert!((s.re - want).abs() < 1e-14 * want && s.im.abs() < 1e-15);
    }

    #[test]
    fn regular_harmonics_of_a_sum_convolve() {
        let (a, b) = ([0.3, -0.4, 0.5], [-0.2, 0.7, 0.1]);
        let p = 8;
        let (ra, rb) = (all(regular, a, p), all(regular, b, p));
        let rab = all(regular, [a[0] + b[0], a[1] + b[1], a[2] + b[2]], p);
        for n in 0..=p {
            for m in 0..=n as isize {
                let mut s = C::ZERO;
                for k in 0..=n {
                    for l in -(k as isize)..=k as isize {
                        if (m - l).unsigned_abs() <= n - k {
                            s += get(&ra, k, l) * get(&rb, n - k, m - l);
                        }
                    }
                }
                close(s, get(&rab, n, m), 1e-9, &format!("R({n},{m})"));
            }
        }
    }

    #[test]
    fn singular_harmonics_shift_by_regular_ones() {
        let (x, y) = ([1.5, 2.0, -1.0], [0.1, -0.2, 0.15]);
        let q = 40;
        let (ix, ry) = (all(singular, x, q), all(regular, y, q));
        let ixy = all(singular, [x[0] - y[0], x[1] - y[1], x[2] - y[2]], 6);
        for n in 0..=6 {
            for m in 0..=n as isize {
                let mut s = C::ZERO;
                for k in 0..=q - n {
                    for l in -(k as isize)..=k as isize {
                        if (m + l).unsigned_abs() <= n + k {
                            s += get(&ry, k, l).conj() * get(&ix, n + k, m + l);
                        }
                    }
                }
                close(s, get(&ixy, n, m), 1e-12, &format!("I({n},{m})"));
            }
        }
    }

    #[test]
    fn derivatives_of_regular_harmonics_lower_the_degree() {
        let v = [0.4, -0.3, 0.8];
        let p = 7;
        let h = 1e-5;
        let at = |dv: [f64; 3]| all(regular, [v[0] + dv[0], v[1] + dv[1], v[2] + dv[2]], p);
        let d = |a: usize| {
            let mut e = [0.0; 3];
            e[a] = h;
            let (f, b) = (at(e), at([-e[0], -e[1], -e[2]]));
            f.iter()
                .zip(&b)
                .map(|(f, b)| (*f - *b).scale(0.5 / h))
                .collect::<Vec<_>>()
        };
        let (dx, dy, dz) = (d(0), d(1), d(2));
        let r = all(regular, v, p);
        // R_{n-1}^m, zero where |m| > n - 1.
        let lower = |n: usize, m: isize| {
            if m.unsigned_abs() < n {
                get(&r, n - 1, m)
            } else {
                C::ZERO
            }
        };
        for n in 1..=p {
            for m in 0..=n as isize {
                let i = idx(n, m as usize);
                let i_dy = C::new(-dy[i].im, dy[i].re);
                let want = [lower(n, m), lower(n, m + 1), -lower(n, m - 1)];
                let got = [dz[i], dx[i] + i_dy, dx[i] - i_dy];
                for (what, (g, w)) in ["d/dz", "d/dx + i d/dy", "d/dx - i d/dy"]
                    .iter()
                    .zip(got.iter().zip(&want))
                {
                    let e = ((g.re - w.re).powi(2) + (g.im - w.im).powi(2)).sqrt();
                    assert!(e < 1e-8, "{what} of R({n},{m}): {g:?} against {w:?}");
                }
            }
        }
    }
}
