//! The monopole far field: per cell the summed strength at the centre of
//! strength (the cell's pseudo-source), and the acceptance distance of
//! nakasato2009's modified criterion. The treecode's far field by default,
//! on the CPU (here) and the GPU ([`cuda`]: the same to the last bit but
//! for the final rounding); the node far fields take the cells' summed
//! strengths from it.

pub mod cuda;

use crate::real::Real;
use crate::tree::{Octree, SoA};

/// Per-cell pseudo-source: summed strength at the centre of strength, other
/// fields averaged with the strength's magnitude as weight; and the square
/// of the acceptance distance `size / theta + delta`.
pub(crate) struct CellSources<R> {
    /// `per_cell` entries a cell, in cell order.
    pub(crate) soa: SoA<R>,
    /// Sources a cell: 1 for the monopole, the nodes a cell for a node far
    /// field.
    pub(crate) per_cell: usize,
    pub(crate) accept2: Vec<f64>,
    /// Centre of strength, in f64 for the acceptance test.
    pub(crate) com: Vec<[f64; 3]>,
}

// Index loops over the axes and slots of parallel per-cell arrays read more
// plainly than zipped iterators here.
#[allow(clippy::needless_range_loop)]
pub(crate) fn pseudo_sources<R: Real>(
    tree: &Octree,
    src: &SoA<R>,
    strength: &[usize],
    theta: f64,
) -> CellSources<R> {
    let nc = tree.cells.len();
    let ns = src.slots.len();
    let is_strength: Vec<bool> = (0..ns).map(|k| strength.contains(&k)).collect();
    // Accumulated per cell: weight, weight * position, slot sums (strength
    // plain, other slots weighted), count.
    let mut w = vec![0.0f64; nc];
    let mut wx = vec![[0.0f64; 3]; nc];
    let mut acc = vec![vec![0.0f64; ns]; nc];
    let mut plain = vec![vec![0.0f64; ns]; nc];
    // Children come after their parent, so a reverse sweep sees every child
    // before its parent.
    for c in (0..nc).rev() {
        let cell = &tree.cells[c];
        if cell.is_leaf() {
            for j in cell.begin..cell.end {
                let wj = strength
                    .iter()
                    .map(|&k| src.slots[k][j].to_f64().powi(2))
                    .sum::<f64>()
                    .sqrt();
                w[c] += wj;
                for a in 0..3 {
                    wx[c][a] += wj * src.pos[a][j].to_f64();
                }
                for k in 0..ns {
                    let v = src.slots[k][j].to_f64();
                    acc[c][k] += if is_strength[k] { v } else { wj * v };
                    plain[c][k] += v;
                }
            }
        } else {
            for child in tree.children(c) {
                w[c] += w[child];
                for a in 0..3 {
                    wx[c][a] += wx[child][a];
                }
                for k in 0..ns {
                    acc[c][k] += acc[child][k];
                    plain[c][k] += plain[child][k];
                }
            }
        }
    }
    let mut soa = SoA::with_capacity(ns, nc);
    let mut com = Vec::with_capacity(nc);
    let mut accept2 = Vec::with_capacity(nc);
    for c in 0..nc {
        let cell = &tree.cells[c];
        let n = cell.len().max(1) as f64;
        // Without strength (all zero) the pseudo-source adds nothing; place
        // it at the cell's centre.
        let p = if w[c] > 0.0 {
            wx[c].map(|x| x / w[c])
        } else {
            cell.center
        };
        for a in 0..3 {
            soa.pos[a].push(R::c(p[a]));
        }
        for k in 0..ns {
            let v = if is_strength[k] {
                acc[c][k]
            } else if w[c] > 0.0 {
                acc[c][k] / w[c]
            } else {
                plain[c][k] / n
            };
            soa.slots[k].push(R::c(v));
        }
        let delta = (0..3)
            .map(|a| (p[a] - cell.center[a]).powi(2))
            .sum::<f64>()
            .sqrt();
        let reach = if theta > 0.0 {
            2.0 * cell.half / theta + delta + resolution(cell.center, cell.half)
        } else {
            f64::INFINITY
        };
        accept2.push(reach * reach);
        com.push(p);
    }
    CellSources {
        soa,
        per_cell: 1,
        accept2,
        com,
    }
}

/// A floor under a cell's acceptance distance: 2^-40 of its coordinates'
/// size (a thousand or so ulps). Cells of coincident particles, 21 levels
/// down a tree whose root is itself tiny, are far smaller than the
/// positions' resolution: their centre of strength, summed in f64, lands
/// some ulps off the point, outside the cell, and without the floor the
/// cell passed the criterion for the targets sitting on that point (300
/// coincident masses felt 1e4 where they must feel 0; the conformance
/// matrix found it). Normal cells, at least 2^-21 of the root, are not
/// changed by it. Exact (a maximum and a power of two), so the GPU
/// (`monopole.cu`) computes the same bits.
pub(crate) fn resolution(center: [f64; 3], half: f64) -> f64 {
    let m = center.iter().fold(half, |m, c| m.max(c.abs()));
    m * (-40.0f64).exp2()
}

/// The cells' pseudo-sources as plain arrays: the form the GPU's are
/// compared with.
#[derive(Clone, Debug, PartialEq)]
pub struct PseudoSources<R> {
    pub pos: [Vec<R>; 3],
    /// `slots[k][c]`.
    pub slots: Vec<Vec<R>>,
    pub com: Vec<[f64; 3]>,
    pub accept2: Vec<f64>,
}

/// The CPU's pseudo-sources of `tree` from sources already in tree order,
/// in the form [`PseudoSources`] has: the reference
/// the device version is tested against.
#[doc(hidden)]
pub fn pseudo_sources_on_host<R: Real>(
    tree: &Octree,
    pos: &[Vec<R>; 3],
    slots: &[Vec<R>],
    strength: &[usize],
    theta: f64,
) -> PseudoSources<R> {
    let src = SoA {
        pos: pos.clone(),
        slots: slots.to_vec(),
    };
    let c = pseudo_sources(tree, &src, strength, theta);
    PseudoSources {
        pos: c.soa.pos,
        slots: c.soa.slots,
        com: c.com,
        accept2: c.accept2,
    }
}
