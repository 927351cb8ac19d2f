//! The operators of the node far fields ([`super::FarField::Ppm`] and
//! [`super::FarField::KernelIndependent`]) on the CPU. A [`Basis`] gives
//! nodes in a cell's unit frame and the weights that tie a point to them;
//! everything else is common:
//!
//! - **P2M**: a source adds `w_m(x) q` to node `m` of its leaf, for each
//!   strength component (a vec3 strength is three).
//! - **M2M**: a child's node strengths are sources at the child's nodes: the
//!   same weights, taken once per octant as a matrix.
//! - **M2L**: the kernel itself, the node strengths of the source cells as
//!   sources and the target cell's nodes as targets (the generated
//!   evaluator, as in P2P; on the GPU the same tiled loop).
//! - **L2L**, **L2P**: a cell's field is interpolated from its values at
//!   its nodes by the same weights.
//!
//! A node carries the strength; the source's other fields (a core radius)
//! take the cell's mean weighted by the strength's size, as the treecode's
//! pseudo-sources do: exact when they are the same for every source of a
//! cell (a vortex method's uniform core), an approximation otherwise.
//!
//! Outputs that depend on the target's own fields (stretching's
//! `(alpha_i . grad) u`) are kept per target slot: with the kernel affine in
//! the target fields, `out(t) = a + sum_s t_s b_s`, the M2L runs the kernel
//! at the nodes with `t = 0` and with each unit vector, and L2P contracts
//! the interpolated `b_s` with the target's own `t`.
//! [`check_affine_in_targets`] checks the form before any work.

use rayon::prelude::*;

use super::linalg::{gemm, View};
use super::tensor::{Tensor, MAX_N};
use super::{FarField, Representation};
use crate::kernel::{Kernel, MAX_SLOTS};
use crate::real::Real;
use crate::tree::{Octree, SoA};

/// Nodes in a cell's unit frame (centre 0, half side 1) and the weights
/// that tie a point to them, both ways (anterpolation of sources onto the
/// nodes; interpolation of a field from its values there).
pub trait Basis: Send + Sync {
    /// The nodes.
    fn nodes(&self) -> &[[f64; 3]];

    /// Nodes a cell.
    fn len(&self) -> usize {
        self.nodes().len()
    }

    /// Whether there are no nodes (never, for a valid order).
    fn is_empty(&self) -> bool {
        self.nodes().is_empty()
    }

    /// The weight of every node for a point `x` of the unit frame, into `w`
    /// (length [`Basis::len`]).
    fn weights(&self, x: [f64; 3], w: &mut [f64]);

    /// The radius of the sphere about the centre that holds the nodes and
    /// the cell, in the unit frame: the MAC's cell size.
    fn radius(&self) -> f64;

    /// For a tensor-product basis, its 1D weights: P2M, M2M, L2L and L2P
    /// then go one axis at a time ([`Tensor`]). `None` (pseudo-particles
    /// on a sphere): the `k x k` weights as matrices.
    fn tensor(&self) -> Option<&Tensor> {
        None
    }
}

/// The basis of a node far field at order `p` (checked).
pub(crate) fn basis(far_field: FarField, p: usize) -> Box<dyn Basis> {
    match far_field {
        FarField::Ppm => Box::new(super::PseudoParticles::new(p)),
        _ => Box::new(super::Chebyshev::new(p)),
    }
}

/// The weights of a child's nodes in its parent's unit frame, per octant:
/// `m[o][c * k + n]` is parent node `n`'s weight for child node `c` of a
/// child in octant `o` (bit `a` set: the upper half along axis `a`). M2M
/// and L2L both use it (the same weights, read the other way).
pub(crate) fn child_weights(b: &dyn Basis) -> Vec<Vec<f64>> {
    let k = b.len();
    (0..8)
        .map(|o| {
            let mut m = vec![0.0; k * k];
            for (c, x) in b.nodes().iter().enumerate() {
                let y = [0, 1, 2].map(|a| {
                    let off = if (o >> a) & 1 == 1 { 0.5 } else { -0.5 };
                    off + 0.5 * x[a]
                });
                b.weights(y, &mut m[c * k..(c + 1) * k]);
            }
            m
        })
        .collect()
}

/// The octant of a child about its parent's centre.
fn octant(child: [f64; 3], parent: [f64; 3]) -> usize {
    (0..3).map(|a| ((child[a] > parent[a]) as usize) << a).sum()
}

/// A point in a cell's unit frame.
#[inline]
fn unit(x: [f64; 3], center: [f64; 3], half: f64) -> [f64; 3] {
    let s = 1.0 / half;
    [0, 1, 2].map(|a| (x[a] - center[a]) * s)
}

/// Node strengths of every cell of a source tree (f64), and the other
/// source fields' means: the upward pass.
pub(crate) struct Upward {
    /// Nodes a cell.
    pub(crate) k: usize,
    /// Strength components.
    pub(crate) nq: usize,
    /// `[cell][node][component]`.
    pub(crate) q: Vec<f64>,
    /// Per cell, every source slot's strength-weighted mean (the strength
    /// slots' entries unused).
    pub(crate) mean: Vec<Vec<f64>>,
}

/// P2M at the leaves and M2M up the tree `tree` over the sources `src` in
/// its order.
pub(crate) fn upward<R: Real>(
    b: &dyn Basis,
    tree: &Octree,
    src: &SoA<R>,
    rep: &Representation,
) -> Upward {
    let (k, nq) = (b.len(), rep.strength.len());
    let block = k * nq;
    let nc = tree.cells.len();
    let mut q = vec![0.0; nc * block];
    let tensor = b.tensor();
    // P2M, each leaf on its own.
    q.par_chunks_mut(block).zip(&tree.cells).for_each_init(
        || (vec![0.0; k], [[0.0; MAX_N]; 3], vec![0.0; nq]),
        |(w, aw, s), (qc, cell)| {
            if !cell.is_leaf() {
                return;
            }
            for j in cell.begin..cell.end {
                for (v, &slot) in s.iter_mut().zip(&rep.strength) {
                    *v = src.slots[slot][j].to_f64();
                }
                if s.iter().all(|&v| v == 0.0) {
                    continue;
                }
                let x = [0, 1, 2].map(|a| src.pos[a][j].to_f64());
                let x = unit(x, cell.center, cell.half);
                match tensor {
                    Some(t) => {
                        t.axis_weights(x, aw);
                        t.anterpolate(aw, s, qc);
                    }
                    None => {
                        b.weights(x, w);
                        for (&wn, qn) in w.iter().zip(qc.chunks_exact_mut(nq)) {
                            for (qc, v) in qn.iter_mut().zip(s.iter()) {
                                *qc += wn * v;
                            }
                        }
                    }
                }
            }
        },
    );
    // M2M, deepest level first; a level's parents in parallel.
    let m = if tensor.is_some() {
        Vec::new()
    } else {
        child_weights(b)
    };
    let depth = tree.cells.iter().map(|c| c.level).max().unwrap_or(0);
    for level in (0..depth).rev() {
        let parents: Vec<usize> = (0..nc)
            .filter(|&c| tree.cells[c].level == level && !tree.cells[c].is_leaf())
            .collect();
        let sums: Vec<Vec<f64>> = parents
            .par_iter()
            .map_init(Vec::new, |scratch, &c| {
                let mut acc = vec![0.0; block];
                for ch in tree.children(c) {
                    let o = octant(tree.cells[ch].center, tree.cells[c].center);
                    let qch = &q[ch * block..(ch + 1) * block];
                    match tensor {
                        Some(t) => t.m2m(o, nq, qch, &mut acc, scratch),
                        None => {
                            // acc (nq x k) += q_child (nq x k) W_o^T, W_o[parent][child].
                            let w = View::new(&m[o], k).t();
                            gemm(nq, k, k, 1.0, View::new(qch, nq), w, 1.0, &mut acc, nq);
                        }
                    }
                }
                acc
            })
            .collect();
        for (&c, s) in parents.iter().zip(sums) {
            q[c * block..(c + 1) * block].copy_from_slice(&s);
        }
    }
    let mean = means(tree, src, &rep.strength);
    Upward { k, nq, q, mean }
}

/// Every cell's strength-weighted mean of every source slot (a plain mean
/// where the cell has no strength).
fn means<R: Real>(tree: &Octree, src: &SoA<R>, strength: &[usize]) -> Vec<Vec<f64>> {
    let ns = src.slots.len();
    tree.cells
        .par_iter()
        .map(|cell| {
            let (mut w, mut acc, mut plain) = (0.0, vec![0.0; ns], vec![0.0; ns]);
            for j in cell.begin..cell.end {
                let wj = strength
                    .iter()
                    .map(|&s| src.slots[s][j].to_f64().powi(2))
                    .sum::<f64>()
                    .sqrt();
                w += wj;
                for (s, slot) in src.slots.iter().enumerate() {
                    let v = slot[j].to_f64();
                    acc[s] += wj * v;
                    plain[s] += v;
                }
            }
            let n = cell.len().max(1) as f64;
            (0..ns)
                .map(|s| if w > 0.0 { acc[s] / w } else { plain[s] / n })
                .collect()
        })
        .collect()
}

/// The node strengths of the cells `cells` as sources of kernel `K`: `k`
/// entries a cell, in the order of `cells`, at the nodes' positions,
/// strength slots from `up` and the other slots the cell's means.
pub(crate) fn node_sources<R: Real>(
    b: &dyn Basis,
    tree: &Octree,
    up: &Upward,
    strength: &[usize],
    cells: &[usize],
) -> SoA<R> {
    let ns = up.mean.first().map_or(0, Vec::len);
    let k = up.k;
    let mut soa = SoA::with_capacity(ns, cells.len() * k);
    for &c in cells {
        let cell = &tree.cells[c];
        for (n, x) in b.nodes().iter().enumerate() {
            for ((pos, c), xa) in soa.pos.iter_mut().zip(cell.center).zip(x) {
                pos.push(R::c(c + cell.half * xa));
            }
            for (s, slot) in soa.slots.iter_mut().enumerate() {
                let v = match strength.iter().position(|&t| t == s) {
                    Some(i) => up.q[(c * k + n) * up.nq + i],
                    None => up.mean[c][s],
                };
                slot.push(R::c(v));
            }
        }
    }
    soa
}

/// Local values of every cell of a target tree (f64):
/// `[cell][node][channel]`, channel `b * n_outputs + o` for output slot
/// `o`, `b = 0` the part that depends on no target field and `b = s + 1`
/// the coefficient of target slot `s`.
pub(crate) struct Local {
    pub(crate) k: usize,
    pub(crate) channels: usize,
    pub(crate) v: Vec<f64>,
}

/// M2L of one target cell: the kernel from the node sources `src` (the
/// source cells of its list, gathered) to the cell's nodes, once with the
/// target fields 0 and once per unit target field; adds to `local`
/// (`[node][channel]`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn m2l<K: Kernel, R: Real>(
    b: &dyn Basis,
    params: &[R],
    center: [f64; 3],
    half: f64,
    src: &crate::kernel::SourceSlices<'_, R>,
    n_outputs: usize,
    target_slots: usize,
    local: &mut [f64],
) {
    let channels = n_outputs * (1 + target_slots);
    let mut out = vec![R::zero(); n_outputs];
    for (n, x) in b.nodes().iter().enumerate() {
        let y = [0, 1, 2].map(|a| R::c(center[a] + half * x[a]));
        let ln = &mut local[n * channels..(n + 1) * channels];
        let mut base = [0.0; MAX_SLOTS];
        for basis in 0..=target_slots {
            let mut t = [R::zero(); MAX_SLOTS];
            if basis > 0 {
                t[basis - 1] = R::c(1.0);
            }
            out.iter_mut().for_each(|o| *o = R::zero());
            K::p2p_target(params, y, &t, src, 0..src.len(), &mut out);
            for o in 0..n_outputs {
                let v = out[o].to_f64();
                if basis == 0 {
                    base[o] = v;
                    ln[o] += v;
                } else {
                    ln[basis * n_outputs + o] += v - base[o];
                }
            }
        }
    }
}

/// L2L down the target tree: each child adds its parent's values
/// interpolated at its nodes.
pub(crate) fn downward(b: &dyn Basis, tree: &Octree, local: &mut Local) {
    let (k, ch) = (local.k, local.channels);
    let block = k * ch;
    let tensor = b.tensor();
    let m = if tensor.is_some() {
        Vec::new()
    } else {
        child_weights(b)
    };
    let depth = tree.cells.iter().map(|c| c.level).max().unwrap_or(0);
    let parent = parents(tree);
    for level in 1..=depth {
        let cells: Vec<usize> = (0..tree.cells.len())
            .filter(|&c| tree.cells[c].level == level)
            .collect();
        let adds: Vec<Vec<f64>> = cells
            .par_iter()
            .map_init(Vec::new, |scratch, &c| {
                let pc = parent[c];
                let o = octant(tree.cells[c].center, tree.cells[pc].center);
                let lp = &local.v[pc * block..(pc + 1) * block];
                let mut add = vec![0.0; block];
                match tensor {
                    Some(t) => t.l2l(o, ch, lp, &mut add, scratch),
                    None => {
                        // add (ch x k) = l_parent (ch x k) W_o, W_o[parent][child].
                        let w = View::new(&m[o], k);
                        gemm(ch, k, k, 1.0, View::new(lp, ch), w, 0.0, &mut add, ch);
                    }
                }
                add
            })
            .collect();
        for (&c, a) in cells.iter().zip(adds) {
            for (x, y) in local.v[c * block..(c + 1) * block].iter_mut().zip(a) {
                *x += y;
            }
        }
    }
}

/// The parent of every cell (the root its own).
pub(crate) fn parents(tree: &Octree) -> Vec<usize> {
    let mut parent = vec![0; tree.cells.len()];
    for c in 0..tree.cells.len() {
        for ch in tree.children(c) {
            parent[ch] = c;
        }
    }
    parent
}

/// L2P at one target: adds the field interpolated from the cell's values
/// `local` (`[node][channel]`) at `x`, with the target's fields `t`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn l2p(
    b: &dyn Basis,
    center: [f64; 3],
    half: f64,
    local: &[f64],
    x: [f64; 3],
    t: &[f64],
    n_outputs: usize,
    w: &mut [f64],
    out: &mut [f64],
) {
    let ch = local.len() / b.len();
    // The values of every channel at `x`, then contracted with the
    // target's fields.
    const MAX_CH: usize = 64;
    let (mut buf, mut heap) = ([0.0; MAX_CH], Vec::new());
    let v: &mut [f64] = if ch <= MAX_CH {
        &mut buf[..ch]
    } else {
        heap.resize(ch, 0.0);
        &mut heap
    };
    let u = unit(x, center, half);
    match b.tensor() {
        Some(tn) => {
            let mut aw = [[0.0; MAX_N]; 3];
            tn.axis_weights(u, &mut aw);
            tn.interpolate(&aw, local, v);
        }
        None => {
            b.weights(u, w);
            for (&wn, ln) in w.iter().zip(local.chunks_exact(ch)) {
                for (a, l) in v.iter_mut().zip(ln) {
                    *a += wn * l;
                }
            }
        }
    }
    for o in 0..n_outputs {
        let mut s = v[o];
        for (slot, ts) in t.iter().enumerate() {
            s += ts * v[(slot + 1) * n_outputs + o];
        }
        out[o] += s;
    }
}

/// Checks that kernel `K`'s outputs are affine in the target's own fields
/// (what the local values kept per target slot assume), by evaluating one
/// pair at a few target fields in f64; `Err` says why not.
pub(crate) fn check_affine_in_targets<K: Kernel>() -> Result<(), String> {
    let def = K::def();
    let (nt, no, ns) = (def.n_targets(), def.n_outputs(), def.n_sources());
    if nt == 0 {
        return Ok(());
    }
    // Parameters and source fields at values the `require` clauses accept:
    // 0.5 for each (a positive core radius, a small softening).
    let params = vec![0.5f64; def.n_params()];
    let sx = [[0.3f64], [-0.2], [0.4]];
    let fields: Vec<Vec<f64>> = (0..ns).map(|s| vec![0.7 + 0.1 * s as f64]).collect();
    let mut sl: [&[f64]; MAX_SLOTS] = [&[]; MAX_SLOTS];
    for (f, v) in sl.iter_mut().zip(&fields) {
        *f = v;
    }
    let src = crate::kernel::SourceSlices {
        pos: [&sx[0], &sx[1], &sx[2]],
        fields: sl,
        n_fields: ns,
    };
    let xi = [1.1, 0.9, -0.6];
    let eval = |t: &[f64]| {
        let mut out = vec![0.0; no];
        K::p2p_target_portable(&params, xi, t, &src, 0..1, &mut out);
        out
    };
    let zero = vec![0.0; nt];
    let a = eval(&zero);
    let cols: Vec<Vec<f64>> = (0..nt)
        .map(|s| {
            let mut t = zero.clone();
            t[s] = 1.0;
            eval(&t).iter().zip(&a).map(|(x, y)| x - y).collect()
        })
        .collect();
    let t: Vec<f64> = (0..nt).map(|s| 0.3 - 1.7 * s as f64).collect();
    let got = eval(&t);
    for o in 0..no {
        let want = a[o] + (0..nt).map(|s| t[s] * cols[s][o]).sum::<f64>();
        let scale = got[o].abs().max(want.abs()).max(1e-300);
        if (got[o] - want).abs() > 1e-9 * scale.max(a[o].abs()) {
            return Err(format!(
                "its output slot {o} is not affine in the target's own fields (the far field \
                 keeps a cell's values per target field); use direct summation"
            ));
        }
    }
    Ok(())
}

impl Local {
    /// Zero values for `cells` cells.
    pub(crate) fn zeros(k: usize, channels: usize, cells: usize) -> Self {
        Local {
            k,
            channels,
            v: vec![0.0; cells * k * channels],
        }
    }
}
