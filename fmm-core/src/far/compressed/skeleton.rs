//! The compressed operators `C = U^T A V` from a few of `A`'s rows and
//! columns.
//!
//! Why: projecting the full operator costs `2 rows cols r` flops and
//! `rows x cols` kernel values per operator (1029 x 1029 at order 6 for a
//! Stokeslet, ranks near 250): two thirds of a cold evaluation at order 6.
//! But `A ~ U C V^T` to the rank tolerance, so `C` is fixed by any rows
//! of `A` on which `U` has full rank (and columns likewise): with `S` the
//! rows of some nodes and `S'` the columns of some nodes,
//! `S A S'^T ~ (S U) C (S' V)^T`, and `C = (S U)^+ (S A S'^T) (S' V)^+T`.
//! The nodes are chosen per basis, once, by a greedy block-pivoted
//! Gram-Schmidt on its rows (a node's channels together, because the
//! kernel gives them together), in rounds until twice the rank in rows are
//! taken, so that `(S U)^+` stays small: the truncated part of `A` is
//! amplified by `|(S U)^+| |(S' V)^+|` only. The operators then need about
//! `(2 r / channels)^2` node pairs of the kernel instead of `k^2`
//! (`docs/FAR_FIELD.md` has the measured times and errors).

use super::super::linalg::{gemm, pseudo_inverse, View};

/// Rows kept per rank: past the rank itself, to keep the pseudo-inverse
/// small.
const OVERSAMPLE: f64 = 2.0;

/// The nodes a basis is sampled at and the pseudo-inverse of its rows
/// there.
#[derive(Debug)]
pub(crate) struct Skeleton {
    /// The nodes, in order; their rows (each node's `per` rows in a run)
    /// are those sampled.
    pub(super) nodes: Vec<usize>,
    /// `(S B)^+`: `rank x (nodes.len() * per)`, column-major.
    pinv: Vec<f64>,
    rank: usize,
}

impl Skeleton {
    /// The skeleton of the basis `b` (`n_rows x rank`, column-major, its
    /// rows `per` to a node); `whole`: all its nodes (`C = U^T A V`).
    pub(super) fn of(b: &[f64], n_rows: usize, rank: usize, per: usize, whole: bool) -> Skeleton {
        let n_nodes = n_rows / per;
        // The basis row by row: `rank x n_rows` column-major, `B^T`.
        let original: Vec<f64> = (0..n_rows)
            .flat_map(|i| (0..rank).map(move |j| b[j * n_rows + i]))
            .collect();
        if whole {
            // All rows: `B` has orthonormal columns, so `B^+ = B^T`.
            return Skeleton {
                nodes: (0..n_nodes).collect(),
                pinv: original,
                rank,
            };
        }
        let want = ((rank as f64 * OVERSAMPLE).ceil() as usize).min(n_rows);
        // The residual rows, row by row, and each node's residual norm.
        let norm = |res: &[f64], n: usize| -> f64 {
            res[n * per * rank..(n + 1) * per * rank]
                .iter()
                .map(|x| x * x)
                .sum()
        };
        let mut picked = vec![false; n_nodes];
        let mut nodes = Vec::new();
        // In rounds: each picks nodes until their rows span the basis (the
        // residual is then zero), the next starts again from the nodes
        // left, until the rows wanted are taken. One round alone takes
        // about `rank` rows, on which the basis can be badly conditioned.
        while nodes.len() * per < want && nodes.len() < n_nodes {
            let mut res = original.clone();
            let mut norms: Vec<f64> = (0..n_nodes).map(|n| norm(&res, n)).collect();
            let first = (0..n_nodes)
                .filter(|&n| !picked[n])
                .map(|n| norms[n])
                .fold(0.0, f64::max);
            if first == 0.0 {
                break;
            }
            while nodes.len() * per < want {
                let Some(best) = (0..n_nodes)
                    .filter(|&n| !picked[n])
                    .max_by(|&a, &b| norms[a].total_cmp(&norms[b]))
                else {
                    break;
                };
                if norms[best] <= 1e-24 * first {
                    // This round's rows span the basis.
                    break;
                }
                picked[best] = true;
                nodes.push(best);
                // Its rows, orthonormalised, projected out of the rows of
                // the nodes not yet picked (and its own next rows).
                for r in best * per..(best + 1) * per {
                    let mut q = res[r * rank..(r + 1) * rank].to_vec();
                    let len = q.iter().map(|x| x * x).sum::<f64>().sqrt();
                    if len <= 1e-12 * first.sqrt() {
                        continue;
                    }
                    q.iter_mut().for_each(|x| *x /= len);
                    for o in 0..n_rows {
                        if picked[o / per] && o / per != best {
                            continue;
                        }
                        let row = &mut res[o * rank..(o + 1) * rank];
                        let dot: f64 = row.iter().zip(&q).map(|(x, y)| x * y).sum();
                        row.iter_mut().zip(&q).for_each(|(x, y)| *x -= dot * y);
                    }
                }
                for n in (0..n_nodes).filter(|&n| !picked[n]) {
                    norms[n] = norm(&res, n);
                }
            }
        }
        nodes.sort_unstable();
        // (S B)^+ by the singular value decomposition of S B.
        let m = nodes.len() * per;
        let sb: Vec<f64> = (0..rank)
            .flat_map(|j| {
                let nodes = &nodes;
                (0..m).map(move |i| b[j * n_rows + nodes[i / per] * per + i % per])
            })
            .collect();
        Skeleton {
            pinv: pseudo_inverse(m, rank, &sb, 1e-13),
            nodes,
            rank,
        }
    }

    /// Rows sampled.
    fn rows(&self) -> usize {
        self.pinv.len() / self.rank.max(1)
    }
}

/// `C = (S U)^+ a (S' V)^+T` (`rank_t x rank_s`, column-major) from `a`,
/// the operator's rows at `t`'s nodes and columns at `s`'s, row by row.
pub(super) fn compress(a: &[f64], t: &Skeleton, s: &Skeleton) -> Vec<f64> {
    let (mr, mc) = (t.rows(), s.rows());
    debug_assert_eq!(a.len(), mr * mc);
    // X = a (S' V)^+T: mr x rank_s.
    let mut x = vec![0.0; mr * s.rank];
    gemm(
        mr,
        mc,
        s.rank,
        1.0,
        View::new(a, mc).t(),
        View::new(&s.pinv, s.rank).t(),
        0.0,
        &mut x,
        mr,
    );
    let mut c = vec![0.0; t.rank * s.rank];
    gemm(
        t.rank,
        mr,
        s.rank,
        1.0,
        View::new(&t.pinv, t.rank),
        View::new(&x, mr),
        0.0,
        &mut c,
        t.rank,
    );
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matrix of exact rank `r` is compressed exactly from its skeleton.
    #[test]
    fn a_low_rank_operator_is_recovered_from_its_skeleton() {
        let (rows, cols, r, per) = (60, 45, 7, 3);
        let mut seed = 12345u64;
        let mut rnd = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let orthonormal = |n: usize, rnd: &mut dyn FnMut() -> f64| {
            let m = faer::Mat::<f64>::from_fn(n, r, |_, _| rnd());
            let q = m.qr().compute_thin_Q();
            (0..r)
                .flat_map(|j| (0..n).map(move |i| (i, j)))
                .map(|ij| q[ij])
                .collect::<Vec<f64>>()
        };
        let u = orthonormal(rows, &mut rnd);
        let v = orthonormal(cols, &mut rnd);
        let c: Vec<f64> = (0..r * r).map(|_| rnd()).collect();
        // A = U C V^T, stored row by row.
        let um = faer::MatRef::from_column_major_slice(&u, rows, r);
        let vm = faer::MatRef::from_column_major_slice(&v, cols, r);
        let cm = faer::MatRef::from_column_major_slice(&c, r, r);
        let a = um * cm * vm.transpose();
        let (t, s) = (
            Skeleton::of(&u, rows, r, per, false),
            Skeleton::of(&v, cols, r, per, false),
        );
        assert!(t.rows() >= r && t.rows() < rows);
        let sub: Vec<f64> = t
            .nodes
            .iter()
            .flat_map(|&n| n * per..(n + 1) * per)
            .flat_map(|i| {
                let a = &a;
                s.nodes
                    .iter()
                    .flat_map(|&n| n * per..(n + 1) * per)
                    .map(move |j| a[(i, j)])
            })
            .collect();
        let got = compress(&sub, &t, &s);
        for (g, w) in got.iter().zip(&c) {
            assert!((g - w).abs() < 1e-12, "{g} against {w}");
        }
    }
}
