//! The FMM operators on one scalar Laplace expansion of order `p`, in f64
//! (see [`super::harmonics`] for the conventions):
//!
//! - a multipole expansion about `z`: `Phi(x) = sum M_n^m I_n^m(x - z)`,
//!   `M_n^m = sum_j q_j conj(R_n^m(x_j - z))`;
//! - a local expansion about `z`: `Phi(x) = sum L_n^m conj(R_n^m(x - z))`.
//!
//! The translations are the direct double sums, O(p^4) for M2L. Terms of
//! total degree above `p` are dropped (as exaFMM does), so M2L needs the
//! singular harmonics to degree `p` only.

use super::harmonics::{get, idx, ncoef, regular, singular, C};

/// Scratch space for one thread: the harmonics of one translation vector.
pub struct Scratch {
    pub p: usize,
    h: Vec<C>,
    full: FullRange,
}

impl Scratch {
    pub fn new(p: usize) -> Scratch {
        Scratch {
            p,
            h: vec![C::ZERO; ncoef(p)],
            full: FullRange {
                re: vec![0.0; (p + 1) * (p + 1)],
                im: vec![0.0; (p + 1) * (p + 1)],
            },
        }
    }
}

/// Adds the multipole expansion about `z` of charges `q` at `x` to `m`.
pub fn p2m(z: [f64; 3], x: &[[f64; 3]], q: &[f64], s: &mut Scratch, m: &mut [C]) {
    let p = s.p;
    for (xj, &qj) in x.iter().zip(q) {
        regular([xj[0] - z[0], xj[1] - z[1], xj[2] - z[2]], p, &mut s.h);
        for (mk, r) in m.iter_mut().zip(&s.h) {
            *mk += r.conj().scale(qj);
        }
    }
}

/// Adds the child expansion `child` (centre `z_child`) to its parent's,
/// `parent` (centre `z_parent`).
pub fn m2m(child: &[C], d: [f64; 3], s: &mut Scratch, parent: &mut [C]) {
    // d = z_child - z_parent
    regular(d, s.p, &mut s.h);
    m2m_by(child, &s.h, s.p, parent);
}

/// [`m2m`] by the regular harmonics `h` of the shift (M2M is linear in
/// them: the sum of the harmonics of several shifts moves a copy of
/// `child` to each at once, as a periodic box's images need).
pub fn m2m_by(child: &[C], h: &[C], p: usize, parent: &mut [C]) {
    for n in 0..=p {
        for m in 0..=n as isize {
            let mut acc = C::ZERO;
            for k in 0..=n {
                let lo = (-(k as isize)).max(m - (n - k) as isize);
                let hi = (k as isize).min(m + (n - k) as isize);
                for l in lo..=hi {
                    acc += get(h, k, l).conj() * get(child, n - k, m - l);
                }
            }
            parent[idx(n, m as usize)] += acc;
        }
    }
}

/// Where `(n, m)`, `-n <= m <= n`, is in a full-range array.
#[inline(always)]
fn full(n: usize, m: isize) -> usize {
    ((n * n + n) as isize + m) as usize
}

/// A multipole expansion with both signs of `m`, real and imaginary parts
/// apart: the form M2L reads, made once per source cell.
#[derive(Clone, Debug, Default)]
pub struct FullRange {
    pub re: Vec<f64>,
    pub im: Vec<f64>,
}

impl FullRange {
    pub fn of(x: &[C], p: usize) -> FullRange {
        let mut f = FullRange {
            re: vec![0.0; (p + 1) * (p + 1)],
            im: vec![0.0; (p + 1) * (p + 1)],
        };
        for n in 0..=p {
            for m in -(n as isize)..=n as isize {
                let v = get(x, n, m);
                let i = full(n, m);
                f.re[i] = v.re;
                f.im[i] = v.im;
            }
        }
        f
    }
}

/// Every source cell's multipole expansions as the lanes' M2L reads them
/// (`m2l_lanes`), made once: each divided by the cell's radius `R` to the
/// degree, `M_n^m / R^n` (so of the size of the strengths, which f32
/// holds in any length unit), `m >= 0` (the rest are their conjugates up
/// to sign), real parts then imaginary parts, in `T`. A cell of radius 0
/// keeps only degree 0 (its others are 0).
pub struct ScaledMultipoles<T> {
    /// `2 ncoef(p)` values an expansion.
    pub stride: usize,
    pub coef: Vec<T>,
    /// The radius `R` of expansion `i`'s cell.
    pub radius: Vec<f64>,
}

impl<T: crate::real::Real> ScaledMultipoles<T> {
    /// From `mult`, expansions of order `p` (`ncoef(p)` each), `per_cell`
    /// of them a cell, the cells of radii `radius`.
    pub fn new(mult: &[C], p: usize, per_cell: usize, radius: &[f64]) -> Self {
        use rayon::prelude::*;
        let nc = super::harmonics::ncoef(p);
        let count = mult.len() / nc;
        let radius: Vec<f64> = (0..count).map(|i| radius[i / per_cell]).collect();
        let mut coef = vec![T::zero(); count * 2 * nc];
        coef.par_chunks_mut(2 * nc)
            .zip(mult.par_chunks(nc))
            .zip(radius.par_iter())
            .for_each(|((out, m), &r)| {
                let inv = if r > 0.0 { 1.0 / r } else { 0.0 };
                let mut power = 1.0;
                for n in 0..=p {
                    for k in 0..=n {
                        let i = idx(n, k);
                        out[i] = T::c(m[i].re * power);
                        out[nc + i] = T::c(m[i].im * power);
                    }
                    power *= inv;
                }
            });
        ScaledMultipoles {
            stride: 2 * nc,
            coef,
            radius,
        }
    }

    /// Expansion `i`: its scaled coefficients and its cell's radius.
    #[inline]
    pub fn get(&self, i: usize) -> (&[T], f64) {
        (
            &self.coef[i * self.stride..(i + 1) * self.stride],
            self.radius[i],
        )
    }

    /// Expansion `i` unscaled in f64, in full range (for the M2L one cell
    /// at a time).
    pub fn full_range(&self, i: usize, p: usize) -> FullRange {
        let (c, r) = self.get(i);
        let nc = self.stride / 2;
        let mut power = 1.0;
        let mut m = vec![C::ZERO; nc];
        for n in 0..=p {
            for k in 0..=n {
                let j = idx(n, k);
                m[j] = C::new(c[j].to_f64() * power, c[nc + j].to_f64() * power);
            }
            power *= r;
        }
        FullRange::of(&m, p)
    }
}

/// Adds the local expansion about `z_target` of the multipole expansion
/// `mult` (full range) about `z_source`, `d = z_target - z_source`, to
/// `local`.
///
/// `L_k^l = (-1)^k sum_{n <= p - k} sum_{|m| <= n} M_n^m I_{n+k}^{m+l}(d)`:
/// for `l >= 0` every `m` of row `n` is in range, so the inner sum is a
/// dot product of row `n` of `M` with a contiguous piece of row `n + k` of
/// `I`.
pub fn m2l(mult: &FullRange, d: [f64; 3], s: &mut Scratch, local: &mut [C]) {
    singular(d, s.p, &mut s.h);
    let h = std::mem::take(&mut s.h);
    m2l_by(mult, &h, s, local);
    s.h = h;
}

/// [`m2l`] by the singular harmonics `h` of the translation (M2L is linear
/// in them: the sum of the harmonics of several translations takes a copy
/// of the source at each at once, as a periodic box's images need).
pub fn m2l_by(mult: &FullRange, h: &[C], s: &mut Scratch, local: &mut [C]) {
    let p = s.p;
    let FullRange { re: ire, im: iim } = &mut s.full;
    for n in 0..=p {
        for m in -(n as isize)..=n as isize {
            let v = get(h, n, m);
            ire[full(n, m)] = v.re;
            iim[full(n, m)] = v.im;
        }
    }
    for k in 0..=p {
        let sign = if k & 1 == 0 { 1.0 } else { -1.0 };
        for l in 0..=k {
            let (mut re, mut im) = (0.0, 0.0);
            for n in 0..=p - k {
                let a = full(n, -(n as isize));
                let b = full(n + k, -(n as isize) + l as isize);
                let len = 2 * n + 1;
                let (mr, mi) = (&mult.re[a..a + len], &mult.im[a..a + len]);
                let (ir, ii) = (&ire[b..b + len], &iim[b..b + len]);
                for j in 0..len {
                    re += mr[j] * ir[j] - mi[j] * ii[j];
                    im += mr[j] * ii[j] + mi[j] * ir[j];
                }
            }
            local[idx(k, l)] += C::new(re, im).scale(sign);
        }
    }
}

/// Adds the parent's local expansion `parent` shifted to the child's
/// centre, `d = z_child - z_parent`, to `child`.
pub fn l2l(parent: &[C], d: [f64; 3], s: &mut Scratch, child: &mut [C]) {
    let p = s.p;
    regular(d, p, &mut s.h);
    for n in 0..=p {
        for m in 0..=n as isize {
            let mut acc = C::ZERO;
            for j in 0..=p - n {
                let lo = (-(j as isize)).max(-((n + j) as isize) - m);
                let hi = (j as isize).min((n + j) as isize - m);
                for sj in lo..=hi {
                    acc += get(parent, n + j, m + sj) * get(&s.h, j, sj).conj();
                }
            }
            child[idx(n, m as usize)] += acc;
        }
    }
}

/// The potential and its gradient at `x` of the local expansion `local`
/// about `z`.
pub fn l2p(local: &[C], r: [f64; 3], s: &mut Scratch) -> (f64, [f64; 3]) {
    let p = s.p;
    regular(r, p, &mut s.h);
    let h = &s.h;
    let mut phi = 0.0;
    let mut gz = 0.0;
    let mut gxy = C::ZERO;
    for n in 0..=p {
        // Phi: m = 0 once, m > 0 twice (with the m < 0 mirror).
        phi += local[idx(n, 0)].re * h[idx(n, 0)].re;
        for m in 1..=n {
            let t = local[idx(n, m)] * h[idx(n, m)].conj();
            phi += 2.0 * t.re;
        }
        if n == 0 {
            continue;
        }
        // d/dz: sum L_n^m conj(R_{n-1}^m), real.
        gz += local[idx(n, 0)].re * h[idx(n - 1, 0)].re;
        for m in 1..n {
            gz += 2.0 * (local[idx(n, m)] * h[idx(n - 1, m)].conj()).re;
        }
        // d/dx + i d/dy: -sum_m L_n^m conj(R_{n-1}^{m-1}), |m - 1| <= n - 1.
        for m in -(n as isize) + 2..=n as isize {
            gxy += get(local, n, m) * get(h, n - 1, m - 1).conj();
        }
    }
    (phi, [-gxy.re, -gxy.im, gz])
}

/// The second derivatives at `r` of the local expansion `local`, from
/// the derivative rules applied twice: with `D+ = d/dx + i d/dy`,
/// `d2/dz2 = sum L conj(R_{n-2}^m)`, `D+ d/dz = -sum L conj(R_{n-2}^{m-1})`
/// and `D+ D+ = sum L conj(R_{n-2}^{m-2})`; the potential is harmonic, so
/// `d2/dx2 + d2/dy2 = -d2/dz2`.
pub fn l2p_hessian(local: &[C], r: [f64; 3], s: &mut Scratch) -> [[f64; 3]; 3] {
    let p = s.p;
    regular(r, p, &mut s.h);
    let h = &s.h;
    let (mut zz, mut pz, mut pp) = (0.0, C::ZERO, C::ZERO);
    for n in 2..=p {
        let k = (n - 2) as isize;
        for m in -(n as isize)..=n as isize {
            let l = get(local, n, m);
            if m.abs() <= k {
                zz += (l * get(h, n - 2, m).conj()).re;
            }
            if (m - 1).abs() <= k {
                pz += l * get(h, n - 2, m - 1).conj();
            }
            if (m - 2).abs() <= k {
                pp += l * get(h, n - 2, m - 2).conj();
            }
        }
    }
    let (xz, yz) = (-pz.re, -pz.im);
    let xx = 0.5 * (-zz + pp.re);
    let yy = 0.5 * (-zz - pp.re);
    let xy = 0.5 * pp.im;
    [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Potential and gradient of charges `q` at `x`, at `t`, directly.
    fn direct(x: &[[f64; 3]], q: &[f64], t: [f64; 3]) -> (f64, [f64; 3]) {
        let mut phi = 0.0;
        let mut g = [0.0; 3];
        for (xj, qj) in x.iter().zip(q) {
            let d = [t[0] - xj[0], t[1] - xj[1], t[2] - xj[2]];
            let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            let inv = 1.0 / r2.sqrt();
            phi += qj * inv;
            for a in 0..3 {
                g[a] -= qj * d[a] * inv * inv * inv;
            }
        }
        (phi, g)
    }

    /// The scaled multipoles the lanes' M2L reads give back, unscaled in
    /// full range (the M2L one cell at a time on CPUs without AVX2), the
    /// expansions they were made from, radius 0 included (degree 0 only).
    #[test]
    fn scaled_multipoles_unscale_to_the_full_range() {
        let mut rng = StdRng::seed_from_u64(11);
        let p = 7;
        let mut s = Scratch::new(p);
        let mut mult = vec![C::ZERO; 3 * ncoef(p)];
        let centers = [[0.0, 0.0, 0.0], [3.0, 1.0, -2.0], [-1.0, 4.0, 0.5]];
        let radius = [0.4, 0.0, 1e-3];
        for ((m, z), r) in mult.chunks_mut(ncoef(p)).zip(centers).zip(radius) {
            let x = if r > 0.0 {
                cluster(&mut rng, z, r / 2.0, 9)
            } else {
                vec![z; 2]
            };
            let q: Vec<f64> = (0..x.len()).map(|_| rng.gen_range(-1.0..1.0)).collect();
            p2m(z, &x, &q, &mut s, m);
        }
        fn check<T: crate::real::Real>(mult: &[C], p: usize, radius: &[f64], tol: f64) {
            let scaled = ScaledMultipoles::<T>::new(mult, p, 1, radius);
            for (i, m) in mult.chunks(ncoef(p)).enumerate() {
                let want = FullRange::of(m, p);
                let got = scaled.full_range(i, p);
                let big = want
                    .re
                    .iter()
                    .chain(&want.im)
                    .fold(0.0f64, |a, x| a.max(x.abs()));
                for (g, w) in got
                    .re
                    .iter()
                    .chain(&got.im)
                    .zip(want.re.iter().chain(&want.im))
                {
                    assert!(
                        (g - w).abs() <= tol * big,
                        "{} cell {i}: {g} against {w}",
                        T::NAME
                    );
                }
            }
        }
        check::<f64>(&mult, p, &radius, 1e-14);
        check::<f32>(&mult, p, &radius, 1e-6);
    }

    fn cluster(rng: &mut StdRng, c: [f64; 3], r: f64, n: usize) -> Vec<[f64; 3]> {
        (0..n)
            .map(|_| [0, 1, 2].map(|a| c[a] + rng.gen_range(-r..r)))
            .collect()
    }

    fn err(got: (f64, [f64; 3]), want: (f64, [f64; 3])) -> (f64, f64) {
        let g = got
            .1
            .iter()
            .zip(&want.1)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        let gn = want.1.iter().map(|b| b * b).sum::<f64>().sqrt();
        ((got.0 - want.0).abs() / want.0.abs(), g / gn)
    }

    /// P2M, M2M, M2L, L2L, L2P in a chain, against the direct sum; the
    /// error falls geometrically with p.
    #[test]
    fn the_operator_chain_converges_to_the_direct_sum() {
        let mut rng = StdRng::seed_from_u64(5);
        let zs = [0.0, 0.0, 0.0];
        let zt = [3.0, 1.0, -0.5];
        let x = cluster(&mut rng, [0.2, -0.1, 0.15], 0.25, 50);
        let q: Vec<f64> = (0..50).map(|_| rng.gen_range(0.1..1.0)).collect();
        let tz = [zt[0] + 0.2, zt[1] - 0.15, zt[2] + 0.1];
        let targets = cluster(&mut rng, tz, 0.2, 10);
        let mut last = f64::INFINITY;
        for p in [4, 8, 12, 16] {
            let mut s = Scratch::new(p);
            let mut mc = vec![C::ZERO; ncoef(p)];
            let zc = [0.2, -0.1, 0.15];
            p2m(zc, &x, &q, &mut s, &mut mc);
            let mut mp = vec![C::ZERO; ncoef(p)];
            m2m(
                &mc,
                [zc[0] - zs[0], zc[1] - zs[1], zc[2] - zs[2]],
                &mut s,
                &mut mp,
            );
            let mut lp = vec![C::ZERO; ncoef(p)];
            m2l(
                &FullRange::of(&mp, p),
                [zt[0] - zs[0], zt[1] - zs[1], zt[2] - zs[2]],
                &mut s,
                &mut lp,
            );
            let mut lc = vec![C::ZERO; ncoef(p)];
            l2l(
                &lp,
                [tz[0] - zt[0], tz[1] - zt[1], tz[2] - zt[2]],
                &mut s,
                &mut lc,
            );
            let mut worst: f64 = 0.0;
            for t in &targets {
                let got = l2p(&lc, [t[0] - tz[0], t[1] - tz[1], t[2] - tz[2]], &mut s);
                let (ep, eg) = err(got, direct(&x, &q, *t));
                worst = worst.max(ep).max(eg);
            }
            assert!(
                worst < last * 0.2,
                "p = {p}: error {worst:e} after {last:e}"
            );
            last = worst;
        }
        assert!(last < 1e-9, "p = 16: error {last:e}");
    }

    /// The Hessian of a local expansion against finite differences of its
    /// gradient.
    #[test]
    fn the_hessian_is_the_derivative_of_the_gradient() {
        let mut rng = StdRng::seed_from_u64(7);
        let x = cluster(&mut rng, [0.0; 3], 0.3, 20);
        let q: Vec<f64> = (0..20).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let p = 10;
        let mut s = Scratch::new(p);
        let mut m = vec![C::ZERO; ncoef(p)];
        p2m([0.0; 3], &x, &q, &mut s, &mut m);
        let mut l = vec![C::ZERO; ncoef(p)];
        m2l(&FullRange::of(&m, p), [3.0, -2.0, 1.5], &mut s, &mut l);
        let r = [0.1, -0.2, 0.15];
        let hess = l2p_hessian(&l, r, &mut s);
        let h = 1e-5;
        for b in 0..3 {
            let (mut up, mut down) = (r, r);
            up[b] += h;
            down[b] -= h;
            let (gu, gd) = (l2p(&l, up, &mut s).1, l2p(&l, down, &mut s).1);
            for a in 0..3 {
                let fd = (gu[a] - gd[a]) / (2.0 * h);
                assert!(
                    (hess[a][b] - fd).abs() < 1e-7 * fd.abs().max(1e-3),
                    "d{a}d{b}: {} against {fd}",
                    hess[a][b]
                );
            }
        }
    }

    /// The multipole expansion alone, evaluated as `sum M I`, against the
    /// direct potential (what M represents).
    #[test]
    fn a_multipole_expansion_represents_its_charges() {
        let mut rng = StdRng::seed_from_u64(6);
        let x = cluster(&mut rng, [0.0; 3], 0.3, 30);
        let q: Vec<f64> = (0..30).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let p = 14;
        let mut s = Scratch::new(p);
        let mut m = vec![C::ZERO; ncoef(p)];
        p2m([0.0; 3], &x, &q, &mut s, &mut m);
        let t = [1.2, -0.9, 1.6];
        let mut i = vec![C::ZERO; ncoef(p)];
        singular(t, p, &mut i);
        let mut phi = 0.0;
        for n in 0..=p {
            phi += m[idx(n, 0)].re * i[idx(n, 0)].re;
            for k in 1..=n {
                phi += 2.0 * (m[idx(n, k)] * i[idx(n, k)]).re;
            }
        }
        let want = direct(&x, &q, t).0;
        assert!(
            (phi - want).abs() < 1e-10 * want.abs().max(1e-3),
            "{phi} against {want}"
        );
    }
}
