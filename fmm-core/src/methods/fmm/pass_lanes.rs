//! P2M, M2M, L2L and L2P in vector lanes ([`crate::simd`]): P2M and L2P
//! with one particle per lane, M2M and L2L with one child cell per lane
//! (a parent's eight children fill an AVX-512 vector of f64).
//!
//! Why: the scalar operators ([`super::operators`]) took a fifth of a
//! Laplace FMM's time at the orders of f64 accuracy (p 9: 0.33 s of
//! 1.7 s at 10^6 on two cores), most of it the regular harmonics of every
//! particle and the `m < 0` branches of the shifts. In lanes every
//! operation is a plain lane-wise vector operation; the branches on `m`
//! are the same in every lane.
//!
//! The formulas are those of the scalar operators, term for term; the
//! tests compare the two.

use super::harmonics::{idx, C};
use crate::simd::Lanes;

/// `X_n^m` for any `|m| <= n` from the stored `m >= 0` half, in lanes:
/// `X_n^{-m} = (-1)^m conj(X_n^m)`.
#[inline(always)]
fn get<V: Lanes<Scalar = f64>>(re: &[V], im: &[V], n: usize, m: isize) -> (V, V) {
    if m >= 0 {
        let i = idx(n, m as usize);
        (re[i], im[i])
    } else {
        let i = idx(n, (-m) as usize);
        if m & 1 == 0 {
            (re[i], -im[i])
        } else {
            (-re[i], im[i])
        }
    }
}

/// [`super::harmonics::get`] of a scalar expansion.
#[inline(always)]
fn get_c(x: &[C], n: usize, m: isize) -> C {
    super::harmonics::get(x, n, m)
}

/// `R_n^m(v)` for `0 <= m <= n <= p` in lanes, as
/// [`super::harmonics::regular`].
#[inline(always)]
unsafe fn regular<V: Lanes<Scalar = f64>>(v: [V; 3], p: usize, re: &mut [V], im: &mut [V]) {
    let [x, y, z] = v;
    let r2 = V::mul_add(z, z, V::mul_add(y, y, x * x));
    re[0] = V::c(1.0);
    im[0] = V::c(0.0);
    for m in 1..=p {
        let (a, b) = (re[idx(m - 1, m - 1)], im[idx(m - 1, m - 1)]);
        let f = V::c(-1.0 / (2 * m) as f64);
        re[idx(m, m)] = f * V::mul_sub(x, a, y * b);
        im[idx(m, m)] = f * V::mul_add(x, b, y * a);
    }
    for m in 0..=p {
        for n in m + 1..=p {
            let c1 = V::c((2 * n - 1) as f64) * z;
            let (mut sr, mut si) = (c1 * re[idx(n - 1, m)], c1 * im[idx(n - 1, m)]);
            if n >= m + 2 {
                sr = V::neg_mul_add(r2, re[idx(n - 2, m)], sr);
                si = V::neg_mul_add(r2, im[idx(n - 2, m)], si);
            }
            let f = V::c(1.0 / ((n + m) * (n - m)) as f64);
            re[idx(n, m)] = sr * f;
            im[idx(n, m)] = si * f;
        }
    }
}

/// Scratch vectors for the operators here, for one order.
pub struct PassScratch<V> {
    p: usize,
    hre: Vec<V>,
    him: Vec<V>,
    xre: Vec<V>,
    xim: Vec<V>,
    acc_re: Vec<V>,
    acc_im: Vec<V>,
}

impl<V: Lanes<Scalar = f64>> PassScratch<V> {
    /// # Safety
    /// The CPU has `V`'s instructions.
    pub unsafe fn new(p: usize) -> Self {
        let z = V::c(0.0);
        let nc = (p + 1) * (p + 2) / 2;
        PassScratch {
            p,
            hre: vec![z; nc],
            him: vec![z; nc],
            xre: vec![z; nc],
            xim: vec![z; nc],
            acc_re: vec![z; nc],
            acc_im: vec![z; nc],
        }
    }

    fn clear_acc(&mut self) {
        // SAFETY: a value of V exists, so the CPU has its instructions.
        let z = unsafe { V::c(0.0) };
        self.acc_re.iter_mut().for_each(|a| *a = z);
        self.acc_im.iter_mut().for_each(|a| *a = z);
    }

    /// Adds the accumulators' lane sums to `out`.
    fn flush(&self, out: &mut [C]) {
        for (t, o) in out.iter_mut().enumerate() {
            *o += C::new(V::sum(self.acc_re[t]), V::sum(self.acc_im[t]));
        }
    }
}

/// `[x[i][a] - z[a]]` for the particles of a chunk, lane by lane; unused
/// lanes at the centre.
#[inline(always)]
unsafe fn offsets<V: Lanes<Scalar = f64>>(z: [f64; 3], x: &[[f64; 3]]) -> [V; 3] {
    let mut d = [[0.0f64; crate::simd::MAX_WIDTH]; 3];
    for (lane, xi) in x.iter().enumerate() {
        for a in 0..3 {
            d[a][lane] = xi[a] - z[a];
        }
    }
    [0, 1, 2].map(|a| V::load(&d[a][..V::WIDTH]))
}

/// [`super::operators::p2m`]: adds the multipole expansion about `z` of
/// charges `q` at `x` to `m`.
///
/// # Safety
/// The CPU has `V`'s instructions; `s` is for the order of `m`.
#[inline(always)]
pub unsafe fn p2m<V: Lanes<Scalar = f64>>(
    z: [f64; 3],
    x: &[[f64; 3]],
    q: &[f64],
    s: &mut PassScratch<V>,
    m: &mut [C],
) {
    let p = s.p;
    s.clear_acc();
    for (xc, qc) in x.chunks(V::WIDTH).zip(q.chunks(V::WIDTH)) {
        let d = offsets::<V>(z, xc);
        let qv = if qc.len() == V::WIDTH {
            V::load(qc)
        } else {
            V::load_partial(qc)
        };
        regular(d, p, &mut s.hre, &mut s.him);
        for t in 0..s.acc_re.len() {
            // conj(R) q
            s.acc_re[t] = V::mul_add(s.hre[t], qv, s.acc_re[t]);
            s.acc_im[t] = V::neg_mul_add(s.him[t], qv, s.acc_im[t]);
        }
    }
    s.flush(m);
}

/// [`super::operators::l2p`] of the local expansion `local` about `z` at
/// the points `x`: the potential and its gradient, one entry per point.
///
/// # Safety
/// The CPU has `V`'s instructions; `s` is for the order of `local`.
#[inline(always)]
pub unsafe fn l2p<V: Lanes<Scalar = f64>>(
    local: &[C],
    z: [f64; 3],
    x: &[[f64; 3]],
    s: &mut PassScratch<V>,
    out: &mut [(f64, [f64; 3])],
) {
    let p = s.p;
    let splat = |c: C| (V::splat(c.re), V::splat(c.im));
    for (xc, oc) in x.chunks(V::WIDTH).zip(out.chunks_mut(V::WIDTH)) {
        let d = offsets::<V>(z, xc);
        regular(d, p, &mut s.hre, &mut s.him);
        let (h, hi) = (&s.hre, &s.him);
        let zero = V::c(0.0);
        let (mut phi, mut phi2, mut gz, mut gz2) = (zero, zero, zero, zero);
        let (mut gr, mut gi) = (zero, zero);
        for n in 0..=p {
            // Phi: m = 0 once, m > 0 twice (with the m < 0 mirror).
            let l0 = V::splat(local[idx(n, 0)].re);
            phi = V::mul_add(l0, h[idx(n, 0)], phi);
            for m in 1..=n {
                let (lr, li) = splat(local[idx(n, m)]);
                let t = idx(n, m);
                phi2 = V::mul_add(lr, h[t], V::mul_add(li, hi[t], phi2));
            }
            if n == 0 {
                continue;
            }
            // d/dz: sum L_n^m conj(R_{n-1}^m), real.
            gz = V::mul_add(l0, h[idx(n - 1, 0)], gz);
            for m in 1..n {
                let (lr, li) = splat(local[idx(n, m)]);
                let t = idx(n - 1, m);
                gz2 = V::mul_add(lr, h[t], V::mul_add(li, hi[t], gz2));
            }
            // d/dx + i d/dy: -sum_m L_n^m conj(R_{n-1}^{m-1}).
            for m in -(n as isize) + 2..=n as isize {
                let (lr, li) = splat(get_c(local, n, m));
                let (br, bi) = get(h, hi, n - 1, m - 1);
                // (lr + i li)(br - i bi)
                gr = V::mul_add(lr, br, V::mul_add(li, bi, gr));
                gi = V::mul_add(li, br, V::neg_mul_add(lr, bi, gi));
            }
        }
        let phi = V::mul_add(V::c(2.0), phi2, phi).to_array();
        let gz = V::mul_add(V::c(2.0), gz2, gz).to_array();
        let (gr, gi) = (gr.to_array(), gi.to_array());
        for (lane, o) in oc.iter_mut().enumerate() {
            *o = (phi[lane], [-gr[lane], -gi[lane], gz[lane]]);
        }
    }
}

/// [`super::operators::m2m`] of several children at once: adds the
/// expansions `children[i].0` (each about its centre, `children[i].1 =
/// z_child - z_parent`) to the parent's `parent`.
///
/// # Safety
/// The CPU has `V`'s instructions; `s` is for the order of the expansions.
#[inline(always)]
pub unsafe fn m2m<V: Lanes<Scalar = f64>>(
    children: &[(&[C], [f64; 3])],
    s: &mut PassScratch<V>,
    parent: &mut [C],
) {
    let p = s.p;
    s.clear_acc();
    for chunk in children.chunks(V::WIDTH) {
        let d: Vec<[f64; 3]> = chunk.iter().map(|c| c.1).collect();
        regular(offsets::<V>([0.0; 3], &d), p, &mut s.hre, &mut s.him);
        // The children's coefficients across lanes, zeros in unused ones.
        for t in 0..s.xre.len() {
            let mut re = [0.0f64; crate::simd::MAX_WIDTH];
            let mut im = [0.0f64; crate::simd::MAX_WIDTH];
            for (lane, (c, _)) in chunk.iter().enumerate() {
                re[lane] = c[t].re;
                im[lane] = c[t].im;
            }
            s.xre[t] = V::load(&re[..V::WIDTH]);
            s.xim[t] = V::load(&im[..V::WIDTH]);
        }
        for n in 0..=p {
            for m in 0..=n as isize {
                let z = V::c(0.0);
                let (mut ar, mut ai) = (z, z);
                for k in 0..=n {
                    let lo = (-(k as isize)).max(m - (n - k) as isize);
                    let hi = (k as isize).min(m + (n - k) as isize);
                    for l in lo..=hi {
                        let (hr, hi) = get(&s.hre, &s.him, k, l);
                        let (cr, ci) = get(&s.xre, &s.xim, n - k, m - l);
                        // conj(h) c
                        ar = V::mul_add(hr, cr, V::mul_add(hi, ci, ar));
                        ai = V::mul_add(hr, ci, V::neg_mul_add(hi, cr, ai));
                    }
                }
                let t = idx(n, m as usize);
                s.acc_re[t] = s.acc_re[t] + ar;
                s.acc_im[t] = s.acc_im[t] + ai;
            }
        }
    }
    s.flush(parent);
}

/// [`super::operators::l2l`] to several children at once: adds the
/// parent's local expansion `parent` shifted by `d[i] = z_child -
/// z_parent` to `children[i]`.
///
/// # Safety
/// The CPU has `V`'s instructions; `s` is for the order of the expansions.
#[inline(always)]
pub unsafe fn l2l<V: Lanes<Scalar = f64>>(
    parent: &[C],
    d: &[[f64; 3]],
    s: &mut PassScratch<V>,
    children: &mut [&mut [C]],
) {
    let p = s.p;
    for (dc, cc) in d.chunks(V::WIDTH).zip(children.chunks_mut(V::WIDTH)) {
        regular(offsets::<V>([0.0; 3], dc), p, &mut s.hre, &mut s.him);
        for n in 0..=p {
            for m in 0..=n as isize {
                let z = V::c(0.0);
                let (mut ar, mut ai) = (z, z);
                for j in 0..=p - n {
                    let lo = (-(j as isize)).max(-((n + j) as isize) - m);
                    let hi = (j as isize).min((n + j) as isize - m);
                    for sj in lo..=hi {
                        let c = get_c(parent, n + j, m + sj);
                        let (lr, li) = (V::splat(c.re), V::splat(c.im));
                        let (hr, hi) = get(&s.hre, &s.him, j, sj);
                        // L conj(h)
                        ar = V::mul_add(lr, hr, V::mul_add(li, hi, ar));
                        ai = V::mul_add(li, hr, V::neg_mul_add(lr, hi, ai));
                    }
                }
                let (ar, ai) = (ar.to_array(), ai.to_array());
                let t = idx(n, m as usize);
                for (lane, child) in cc.iter_mut().enumerate() {
                    child[t] += C::new(ar[lane], ai[lane]);
                }
            }
        }
    }
}

/// The operators above compiled for one vector type and its target
/// features, as safe-to-call-once-checked entry points.
macro_rules! entry_points {
    ($module:ident, $v:ty, $features:literal) => {
        pub mod $module {
            use super::*;
            /// # Safety
            /// The CPU has the instructions of the vector type.
            #[target_feature(enable = $features)]
            pub unsafe fn p2m(
                z: [f64; 3],
                x: &[[f64; 3]],
                q: &[f64],
                s: &mut PassScratch<$v>,
                m: &mut [C],
            ) {
                super::p2m(z, x, q, s, m)
            }
            /// # Safety
            /// The CPU has the instructions of the vector type.
            #[target_feature(enable = $features)]
            pub unsafe fn l2p(
                local: &[C],
                z: [f64; 3],
                x: &[[f64; 3]],
                s: &mut PassScratch<$v>,
                out: &mut [(f64, [f64; 3])],
            ) {
                super::l2p(local, z, x, s, out)
            }
            /// # Safety
            /// The CPU has the instructions of the vector type.
            #[target_feature(enable = $features)]
            pub unsafe fn m2m(
                children: &[(&[C], [f64; 3])],
                s: &mut PassScratch<$v>,
                parent: &mut [C],
            ) {
                super::m2m(children, s, parent)
            }
            /// # Safety
            /// The CPU has the instructions of the vector type.
            #[target_feature(enable = $features)]
            pub unsafe fn l2l(
                parent: &[C],
                d: &[[f64; 3]],
                s: &mut PassScratch<$v>,
                children: &mut [&mut [C]],
            ) {
                super::l2l(parent, d, s, children)
            }
        }
    };
}

entry_points!(avx2, crate::simd::F64x4, "avx2,fma");
entry_points!(avx512, crate::simd::F64x8, "avx512f,avx512dq,avx2,fma");

#[cfg(test)]
mod tests {
    use super::super::harmonics::ncoef;
    use super::super::operators::{self, Scratch};
    use super::*;
    use crate::simd::{avx2_fma, avx512, F64x4, F64x8};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn close(got: &[C], want: &[C], what: &str) {
        let scale = want
            .iter()
            .map(|c| c.re.abs() + c.im.abs())
            .fold(0.0, f64::max);
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g.re - w.re).abs() + (g.im - w.im).abs() <= 1e-13 * scale,
                "{what}, coefficient {i}: {g:?} against {w:?}"
            );
        }
    }

    fn point(rng: &mut StdRng, r: f64) -> [f64; 3] {
        [0, 1, 2].map(|_| rng.gen_range(-r..r))
    }

    /// Each operator in lanes against the scalar one, for both vector
    /// types the CPU has, several orders, and counts that fill and do not
    /// fill the last vector.
    #[allow(clippy::type_complexity)]
    fn lanes_match_scalar<V: Lanes<Scalar = f64>>(
        name: &str,
        p2m_v: unsafe fn([f64; 3], &[[f64; 3]], &[f64], &mut PassScratch<V>, &mut [C]),
        l2p_v: unsafe fn(&[C], [f64; 3], &[[f64; 3]], &mut PassScratch<V>, &mut [(f64, [f64; 3])]),
        m2m_v: unsafe fn(&[(&[C], [f64; 3])], &mut PassScratch<V>, &mut [C]),
        l2l_v: unsafe fn(&[C], &[[f64; 3]], &mut PassScratch<V>, &mut [&mut [C]]),
    ) {
        let mut rng = StdRng::seed_from_u64(3);
        for p in [0, 1, 5, 9, 14] {
            // SAFETY: the callers checked the CPU.
            let mut sv = unsafe { PassScratch::<V>::new(p) };
            let mut s = Scratch::new(p);
            let nc = ncoef(p);
            let z = [0.1, -0.05, 0.2];
            for n in [1, 7, 8, 13, 64] {
                let x: Vec<[f64; 3]> = (0..n)
                    .map(|_| {
                        let d = point(&mut rng, 0.25);
                        [z[0] + d[0], z[1] + d[1], z[2] + d[2]]
                    })
                    .collect();
                let q: Vec<f64> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
                let mut want = vec![C::ZERO; nc];
                operators::p2m(z, &x, &q, &mut s, &mut want);
                let mut got = vec![C::ZERO; nc];
                // SAFETY: as above.
                unsafe { p2m_v(z, &x, &q, &mut sv, &mut got) };
                close(&got, &want, &format!("{name} p2m p {p} n {n}"));

                // L2P of that expansion read as a local one.
                let mut out = vec![(0.0, [0.0; 3]); n];
                // SAFETY: as above.
                unsafe { l2p_v(&want, z, &x, &mut sv, &mut out) };
                for (i, xi) in x.iter().enumerate() {
                    let r = [xi[0] - z[0], xi[1] - z[1], xi[2] - z[2]];
                    let (phi, g) = operators::l2p(&want, r, &mut s);
                    let scale = phi.abs() + g.iter().map(|v| v.abs()).sum::<f64>() + 1e-300;
                    let err = (out[i].0 - phi).abs()
                        + (0..3).map(|a| (out[i].1[a] - g[a]).abs()).sum::<f64>();
                    assert!(
                        err <= 1e-13 * scale,
                        "{name} l2p p {p} n {n}: {:?} against {:?}",
                        out[i],
                        (phi, g)
                    );
                }
            }
            // M2M and L2L of a parent with its children (1 to 8 of them).
            for nch in [1, 3, 8] {
                let exps: Vec<Vec<C>> = (0..nch)
                    .map(|_| {
                        (0..nc)
                            .map(|_| C::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
                            .collect()
                    })
                    .collect();
                let d: Vec<[f64; 3]> = (0..nch).map(|_| point(&mut rng, 0.3)).collect();
                let mut want = vec![C::ZERO; nc];
                for (e, di) in exps.iter().zip(&d) {
                    operators::m2m(e, *di, &mut s, &mut want);
                }
                let children: Vec<(&[C], [f64; 3])> = exps
                    .iter()
                    .zip(&d)
                    .map(|(e, di)| (e.as_slice(), *di))
                    .collect();
                let mut got = vec![C::ZERO; nc];
                // SAFETY: as above.
                unsafe { m2m_v(&children, &mut sv, &mut got) };
                close(&got, &want, &format!("{name} m2m p {p} children {nch}"));

                let parent = &exps[0];
                let mut got: Vec<Vec<C>> = vec![vec![C::ZERO; nc]; nch];
                let mut views: Vec<&mut [C]> = got.iter_mut().map(|g| g.as_mut_slice()).collect();
                // SAFETY: as above.
                unsafe { l2l_v(parent, &d, &mut sv, &mut views) };
                for (i, di) in d.iter().enumerate() {
                    let mut want = vec![C::ZERO; nc];
                    operators::l2l(parent, *di, &mut s, &mut want);
                    close(&got[i], &want, &format!("{name} l2l p {p} child {i}"));
                }
            }
        }
    }

    #[test]
    fn operators_in_lanes_match_the_scalar_ones() {
        if avx2_fma() {
            lanes_match_scalar::<F64x4>("AVX2", avx2::p2m, avx2::l2p, avx2::m2m, avx2::l2l);
        }
        if avx512() {
            lanes_match_scalar::<F64x8>(
                "AVX-512",
                avx512::p2m,
                avx512::l2p,
                avx512::m2m,
                avx512::l2l,
            );
        }
    }
}
