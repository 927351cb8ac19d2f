//! The node operators of a tensor-product basis (Chebyshev's `n^3` nodes,
//! [`super::Chebyshev`]) by sum factorisation: a weight `S(x, x_m)` is a
//! product of one factor per axis, so a sum over the `n^3` nodes is three
//! sums of `n` along one axis at a time.
//!
//! Why: M2M and L2L as one `n^3 x n^3` matrix per octant cost `n^6` a
//! channel (46656 at order 5) against `3 n^4` (3888) in three passes; at
//! 10^6 Yukawa points they were 0.25 and 0.36 s of a 5.9 s FMM. P2M and
//! L2P need no `n^3` weights built per particle: a source's strength
//! spreads over the nodes as an outer product of the three axes' weights,
//! and a field is contracted one axis at a time.
//!
//! Nodes are numbered `(iz n + iy) n + ix` (x fastest), as
//! [`super::Chebyshev::nodes`], each with `ch` channels side by side.

/// The 1D weights of one tensor-product basis: `n` nodes a side and, per
/// side of a parent (lower, upper half), the weights `w[c n + m]` of parent
/// node `m` at child node `c` along one axis.
#[derive(Clone, Debug)]
pub struct Tensor {
    n: usize,
    child: [Vec<f64>; 2],
    /// `T_k` at the roots, for the weights at a point
    /// ([`super::chebyshev::weights_1d`]).
    t_roots: Vec<f64>,
}

/// The upper half along axis `a` for octant `o` (bit `a` set).
#[inline]
fn side(o: usize, a: usize) -> usize {
    (o >> a) & 1
}

impl Tensor {
    /// From `n` nodes a side, the child weights per side and `T_k` at the
    /// roots.
    pub(crate) fn new(n: usize, child: [Vec<f64>; 2], t_roots: Vec<f64>) -> Self {
        assert!(n <= MAX_N && child.iter().all(|w| w.len() == n * n));
        Tensor { n, child, t_roots }
    }

    /// The three axes' weights at `x` (the cell's unit frame).
    pub(crate) fn axis_weights(&self, x: [f64; 3], w: &mut [[f64; MAX_N]; 3]) {
        for a in 0..3 {
            super::chebyshev::weights_1d(self.n, &self.t_roots, x[a], &mut w[a][..self.n]);
        }
    }

    /// Nodes a cell.
    pub(crate) fn len(&self) -> usize {
        self.n * self.n * self.n
    }

    /// One pass along `axis`: `dst[.., i, ..] = sum_j m(i, j) src[.., j, ..]`
    /// with `m(i, j) = w[i n + j]`, or `w[j n + i]` if `transpose`. The
    /// nodes before the axis (and the channels) form contiguous runs of
    /// `n^axis ch` numbers: each term is one scaled run.
    fn pass(
        &self,
        axis: usize,
        w: &[f64],
        transpose: bool,
        ch: usize,
        src: &[f64],
        dst: &mut [f64],
    ) {
        let n = self.n;
        let run = n.pow(axis as u32) * ch;
        dst.iter_mut().for_each(|x| *x = 0.0);
        for (d, s) in dst.chunks_exact_mut(n * run).zip(src.chunks_exact(n * run)) {
            for (i, di) in d.chunks_exact_mut(run).enumerate() {
                for (j, sj) in s.chunks_exact(run).enumerate() {
                    let m = if transpose {
                        w[j * n + i]
                    } else {
                        w[i * n + j]
                    };
                    for (x, y) in di.iter_mut().zip(sj) {
                        *x += m * y;
                    }
                }
            }
        }
    }

    /// Three passes, then added to `out`; `transpose` for M2M.
    fn apply(
        &self,
        octant: usize,
        transpose: bool,
        ch: usize,
        input: &[f64],
        out: &mut [f64],
        scratch: &mut Vec<f64>,
    ) {
        let block = self.len() * ch;
        scratch.resize(2 * block, 0.0);
        let (a, b) = scratch.split_at_mut(block);
        self.pass(0, &self.child[side(octant, 0)], transpose, ch, input, a);
        self.pass(1, &self.child[side(octant, 1)], transpose, ch, a, b);
        self.pass(2, &self.child[side(octant, 2)], transpose, ch, b, a);
        for (o, x) in out.iter_mut().zip(a.iter()) {
            *o += x;
        }
    }

    /// M2M: adds a child's node strengths (`[node][ch]`, the child in
    /// `octant` of its parent) to its parent's.
    pub(crate) fn m2m(
        &self,
        octant: usize,
        ch: usize,
        child: &[f64],
        parent: &mut [f64],
        scratch: &mut Vec<f64>,
    ) {
        self.apply(octant, true, ch, child, parent, scratch);
    }

    /// L2L: adds the parent's values interpolated at a child's nodes to the
    /// child's.
    pub(crate) fn l2l(
        &self,
        octant: usize,
        ch: usize,
        parent: &[f64],
        child: &mut [f64],
        scratch: &mut Vec<f64>,
    ) {
        self.apply(octant, false, ch, parent, child, scratch);
    }

    /// P2M of one source: adds `w_x(a) w_y(b) w_z(c) s[..]` to node
    /// `(c, b, a)`'s strengths (`s.len()` a node), with the three axes'
    /// weights `w` at the source.
    pub(crate) fn anterpolate(&self, w: &[[f64; MAX_N]; 3], s: &[f64], q: &mut [f64]) {
        match s.len() {
            1 => self.anterpolate_nq::<1>(w, s, q),
            3 => self.anterpolate_nq::<3>(w, s, q),
            nq => {
                let mut node = 0;
                for &wz in &w[2][..self.n] {
                    for &wy in &w[1][..self.n] {
                        for &wx in &w[0][..self.n] {
                            let f = wx * wy * wz;
                            for (qc, sc) in q[node * nq..(node + 1) * nq].iter_mut().zip(s) {
                                *qc += f * sc;
                            }
                            node += 1;
                        }
                    }
                }
            }
        }
    }

    fn anterpolate_nq<const NQ: usize>(&self, w: &[[f64; MAX_N]; 3], s: &[f64], q: &mut [f64]) {
        let n = self.n;
        let s: [f64; NQ] = std::array::from_fn(|c| s[c]);
        for (iz, &wz) in w[2][..n].iter().enumerate() {
            for (iy, &wy) in w[1][..n].iter().enumerate() {
                let start = (iz * n + iy) * n * NQ;
                let wyz = wy * wz;
                for (&wx, qn) in w[0][..n]
                    .iter()
                    .zip(q[start..start + n * NQ].chunks_exact_mut(NQ))
                {
                    let f = wx * wyz;
                    for c in 0..NQ {
                        qn[c] += f * s[c];
                    }
                }
            }
        }
    }

    /// L2P of one target: the `ch` values of the field (`out.len()`) at
    /// the point whose axes' weights are `w`, contracted along x, then y,
    /// then z; added to `out`.
    pub(crate) fn interpolate(&self, w: &[[f64; MAX_N]; 3], local: &[f64], out: &mut [f64]) {
        // The common channel counts with the count known to the compiler
        // (unrolled, in registers): 1 potential, 3 a vector, 4 both, 6 a
        // velocity and its stretching.
        match out.len() {
            1 => self.interpolate_ch::<1>(w, local, out),
            3 => self.interpolate_ch::<3>(w, local, out),
            4 => self.interpolate_ch::<4>(w, local, out),
            6 => self.interpolate_ch::<6>(w, local, out),
            ch => {
                // Any other count: one channel at a time, strided.
                let n = self.n;
                for (c, o) in out.iter_mut().enumerate() {
                    let mut z = 0.0;
                    for (iz, &wz) in w[2][..n].iter().enumerate() {
                        let mut y = 0.0;
                        for (iy, &wy) in w[1][..n].iter().enumerate() {
                            let start = (iz * n + iy) * n;
                            let x: f64 = (0..n)
                                .map(|ix| w[0][ix] * local[(start + ix) * ch + c])
                                .sum();
                            y += wy * x;
                        }
                        z += wz * y;
                    }
                    *o += z;
                }
            }
        }
    }

    fn interpolate_ch<const CH: usize>(
        &self,
        w: &[[f64; MAX_N]; 3],
        local: &[f64],
        out: &mut [f64],
    ) {
        let n = self.n;
        let mut z = [0.0; CH];
        for (iz, &wz) in w[2][..n].iter().enumerate() {
            let mut y = [0.0; CH];
            for (iy, &wy) in w[1][..n].iter().enumerate() {
                let start = (iz * n + iy) * n * CH;
                let row = &local[start..start + n * CH];
                let mut x = [0.0; CH];
                for (&wx, l) in w[0][..n].iter().zip(row.chunks_exact(CH)) {
                    for c in 0..CH {
                        x[c] += wx * l[c];
                    }
                }
                for c in 0..CH {
                    y[c] += wy * x[c];
                }
            }
            for c in 0..CH {
                z[c] += wz * y[c];
            }
        }
        for c in 0..CH {
            out[c] += z[c];
        }
    }
}

/// The most nodes a side ([`super::chebyshev::MAX_ORDER`] + 1).
pub(crate) const MAX_N: usize = super::chebyshev::MAX_ORDER + 1;

#[cfg(test)]
mod tests {
    use super::super::nodes::{child_weights, Basis};
    use super::super::Chebyshev;
    use super::*;

    /// Deterministic values in [-1, 1).
    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    fn max_diff(a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn m2m_and_l2l_by_axes_match_the_dense_child_weights() {
        for p in [1, 3, 5] {
            let b = Chebyshev::new(p);
            let t = b.tensor().unwrap();
            let k = b.len();
            let dense = child_weights(&b);
            for ch in [1, 3, 4] {
                for (o, dense) in dense.iter().enumerate() {
                    let input = values(k * ch, (p * 100 + ch * 10 + o) as u64);
                    let mut scratch = Vec::new();
                    // The dense product: child node `cn`, parent node `n`;
                    // M2M adds into the parent's, L2L into the child's.
                    let dense_apply = |m2m: bool| {
                        let mut want = vec![0.0; k * ch];
                        for (cn, row) in dense.chunks_exact(k).enumerate() {
                            for (n, w) in row.iter().enumerate() {
                                let (to, from) = if m2m { (n, cn) } else { (cn, n) };
                                for c in 0..ch {
                                    want[to * ch + c] += w * input[from * ch + c];
                                }
                            }
                        }
                        want
                    };
                    let mut got = vec![0.0; k * ch];
                    t.m2m(o, ch, &input, &mut got, &mut scratch);
                    let want = dense_apply(true);
                    assert!(max_diff(&got, &want) < 1e-13, "m2m p {p} ch {ch} o {o}");
                    let mut got = vec![0.0; k * ch];
                    t.l2l(o, ch, &input, &mut got, &mut scratch);
                    let want = dense_apply(false);
                    assert!(max_diff(&got, &want) < 1e-13, "l2l p {p} ch {ch} o {o}");
                }
            }
        }
    }

    #[test]
    fn p2m_and_l2p_by_axes_match_the_node_weights() {
        let b = Chebyshev::new(4);
        let t = b.tensor().unwrap();
        let k = b.len();
        let mut w = vec![0.0; k];
        let mut aw = [[0.0; MAX_N]; 3];
        // 1, 3 and 4 channels take the unrolled paths, 2 and 5 the general.
        for ch in 1..=5 {
            for (i, x) in [[0.3, -0.7, 0.1], [1.0, -1.0, 0.99], [-0.05, 0.9, 0.4]]
                .into_iter()
                .enumerate()
            {
                b.weights(x, &mut w);
                t.axis_weights(x, &mut aw);
                let s = values(ch, (ch * 10 + i) as u64);
                let mut got = vec![0.0; k * ch];
                t.anterpolate(&aw, &s, &mut got);
                let want: Vec<f64> = (0..k * ch).map(|j| w[j / ch] * s[j % ch]).collect();
                assert!(max_diff(&got, &want) < 1e-14, "p2m ch {ch}");
                let local = values(k * ch, (ch * 10 + i + 5) as u64);
                let mut got = vec![0.5; ch];
                t.interpolate(&aw, &local, &mut got);
                let want: Vec<f64> = (0..ch)
                    .map(|c| 0.5 + (0..k).map(|n| w[n] * local[n * ch + c]).sum::<f64>())
                    .collect();
                assert!(max_diff(&got, &want) < 1e-13, "l2p ch {ch}");
            }
        }
    }
}
