//! Chebyshev interpolation over a cell (Fong and Darve 2009, the
//! black-box FMM): a smooth function on the cube `[-1, 1]^3` is
//! approximated by its values at the tensor grid of `n = p + 1` Chebyshev
//! nodes a side, `f(x) ~ sum_m S(x, x_m) f(x_m)` with
//! `S(x, x_m) = prod_axes S_n(x_a, x_m,a)` and
//! `S_n(x, y) = 1/n + 2/n sum_{k=1}^{n-1} T_k(x) T_k(y)` (the Lagrange
//! polynomial of the node `y` on the Chebyshev roots).
//!
//! Used both ways ([`super::nodes`]): sources anterpolated onto the nodes
//! (a source of strength `q` at `y` gives each node `S(y, x_m) q`, so that
//! `sum_j K(x, y_j) q_j ~ sum_m K(x, x_m) Q_m` for any `K` smooth in `y`),
//! and a cell's field interpolated from its values at the nodes. Only the
//! kernel's smoothness matters, which is why this far field takes any
//! kernel (the choice over equivalent surfaces is argued in
//! `docs/FAR_FIELD.md`).

use super::nodes::Basis;
use super::tensor::Tensor;

/// The highest order: 13 nodes a side, 2197 a cell.
pub const MAX_ORDER: usize = 12;

/// Tensor Chebyshev nodes of order `p` (`p + 1` a side) in the unit frame
/// of a cell (centre 0, half side 1).
#[derive(Clone, Debug)]
pub struct Chebyshev {
    /// Nodes a side.
    n: usize,
    /// The roots `cos((2m + 1) pi / (2n))`, `m = 0..n`.
    roots: Vec<f64>,
    /// `T_k` at the roots, `[m * n + k]`.
    t_roots: Vec<f64>,
    nodes: Vec<[f64; 3]>,
    /// The 1D weights for the operators by sum factorisation.
    tensor: Tensor,
}

impl Chebyshev {
    /// The nodes of order `p` (checked by the caller: 1 to [`MAX_ORDER`]).
    pub fn new(p: usize) -> Self {
        let n = p + 1;
        let roots: Vec<f64> = (0..n)
            .map(|m| ((2 * m + 1) as f64 * std::f64::consts::PI / (2 * n) as f64).cos())
            .collect();
        let mut t_roots = vec![0.0; n * n];
        for (m, &x) in roots.iter().enumerate() {
            chebyshev_t(x, &mut t_roots[m * n..(m + 1) * n]);
        }
        // x fastest, then y, then z.
        let mut nodes = Vec::with_capacity(n * n * n);
        for &z in &roots {
            for &y in &roots {
                for &x in &roots {
                    nodes.push([x, y, z]);
                }
            }
        }
        // A child's nodes in its parent's frame, per side: +-1/2 + x/2.
        let child = [-0.5, 0.5].map(|off| {
            let mut w = vec![0.0; n * n];
            for (c, &x) in roots.iter().enumerate() {
                weights_1d(n, &t_roots, off + 0.5 * x, &mut w[c * n..(c + 1) * n]);
            }
            w
        });
        let tensor = Tensor::new(n, child, t_roots.clone());
        Chebyshev {
            n,
            roots,
            t_roots,
            nodes,
            tensor,
        }
    }

    /// The roots a side.
    pub fn roots(&self) -> &[f64] {
        &self.roots
    }

    /// `T_k` at the roots, `[m * n + k]` for root `m` (`n` nodes a side):
    /// the table the GPU's weights read, so that they are the CPU's.
    pub(crate) fn t_roots(&self) -> &[f64] {
        &self.t_roots
    }

    /// `S_n(x, root_m)` for every root, into `w` (length `n`).
    fn weights_1d(&self, x: f64, w: &mut [f64]) {
        weights_1d(self.n, &self.t_roots, x, w);
    }
}

/// `S_n(x, root_m)` for every root `m` of `n`, into `w` (length `n`), from
/// `T_k` at the roots (`t_roots[m * n + k]`).
pub(crate) fn weights_1d(n: usize, t_roots: &[f64], x: f64, w: &mut [f64]) {
    let mut t = [0.0; MAX_ORDER + 1];
    chebyshev_t(x, &mut t[..n]);
    let inv = 1.0 / n as f64;
    for (m, wm) in w.iter_mut().enumerate() {
        let tm = &t_roots[m * n..(m + 1) * n];
        let s: f64 = (1..n).map(|k| t[k] * tm[k]).sum();
        *wm = inv + 2.0 * inv * s;
    }
}

/// `T_0(x) .. T_{n-1}(x)` by the three-term recurrence (valid for any `x`,
/// also just outside `[-1, 1]` where rounding puts a cell's particle).
fn chebyshev_t(x: f64, t: &mut [f64]) {
    let n = t.len();
    t[0] = 1.0;
    if n > 1 {
        t[1] = x;
    }
    for k in 2..n {
        t[k] = 2.0 * x * t[k - 1] - t[k - 2];
    }
}

impl Basis for Chebyshev {
    fn nodes(&self) -> &[[f64; 3]] {
        &self.nodes
    }

    fn weights(&self, x: [f64; 3], w: &mut [f64]) {
        let n = self.n;
        let mut wa = [[0.0; MAX_ORDER + 1]; 3];
        for a in 0..3 {
            self.weights_1d(x[a], &mut wa[a][..n]);
        }
        let mut i = 0;
        for &wz in &wa[2][..n] {
            for &wy in &wa[1][..n] {
                let wyz = wy * wz;
                for &wx in &wa[0][..n] {
                    w[i] = wx * wyz;
                    i += 1;
                }
            }
        }
    }

    fn radius(&self) -> f64 {
        3f64.sqrt()
    }

    fn tensor(&self) -> Option<&Tensor> {
        Some(&self.tensor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_polynomials_of_its_degree_exactly() {
        let b = Chebyshev::new(4);
        // A polynomial of degree 4 in each axis.
        let f = |x: [f64; 3]| x[0].powi(4) - 2.0 * x[1].powi(3) * x[2] + x[2].powi(2) * x[0] + 0.5;
        let values: Vec<f64> = b.nodes().iter().map(|&x| f(x)).collect();
        let mut w = vec![0.0; b.len()];
        for x in [[0.3, -0.7, 0.1], [1.0, 1.0, -1.0], [-0.05, 0.9, 0.4]] {
            b.weights(x, &mut w);
            let got: f64 = w.iter().zip(&values).map(|(a, b)| a * b).sum();
            assert!((got - f(x)).abs() < 1e-13, "{got} vs {}", f(x));
        }
    }

    #[test]
    fn weights_at_a_node_pick_that_node() {
        let b = Chebyshev::new(3);
        let mut w = vec![0.0; b.len()];
        b.weights(b.nodes()[17], &mut w);
        for (i, wi) in w.iter().enumerate() {
            let want = if i == 17 { 1.0 } else { 0.0 };
            assert!((wi - want).abs() < 1e-14);
        }
    }

    #[test]
    fn interpolation_of_a_distant_source_converges() {
        // 1 / |x - y| for y at distance 4 (cell half side 1): the error
        // falls by a fixed factor an order.
        let y = [4.0, 0.5, -0.3];
        let f = |x: [f64; 3]| {
            1.0 / ((x[0] - y[0]).powi(2) + (x[1] - y[1]).powi(2) + (x[2] - y[2]).powi(2)).sqrt()
        };
        let mut last = f64::INFINITY;
        for p in [2, 4, 6, 8] {
            let b = Chebyshev::new(p);
            let v: Vec<f64> = b.nodes().iter().map(|&x| f(x)).collect();
            let mut w = vec![0.0; b.len()];
            let x = [0.77, -0.41, 0.93];
            b.weights(x, &mut w);
            let err = (w.iter().zip(&v).map(|(a, b)| a * b).sum::<f64>() - f(x)).abs() / f(x);
            assert!(err < last / 10.0, "p {p}: {err:.2e} after {last:.2e}");
            last = err;
        }
        assert!(last < 1e-6, "{last:.2e}");
    }
}
