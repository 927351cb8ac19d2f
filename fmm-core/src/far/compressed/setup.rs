//! What the operators are built from: the kernel, its parameters and
//! fields, the nodes and the root cube ([`Setup`]), and an operator
//! itself by the kernel between two cells' nodes.

use super::super::nodes::Basis;
use super::super::Representation;
use super::*;
use crate::kernel::{Kernel, SourceSlices, MAX_SLOTS};
use crate::tree::morton::MAX_LEVEL;

/// What the operators need to know of the kernel and the trees.
pub(super) struct Setup<'a> {
    pub(super) basis: &'a dyn Basis,
    pub(super) params: Vec<f64>,
    /// One value per source slot: the strength slots 0 (set to 1 one at a
    /// time), the others the cells' common mean.
    pub(super) fields: Vec<f64>,
    pub(super) strength: &'a [usize],
    pub(super) n_outputs: usize,
    pub(super) target_slots: usize,
    /// The root's half side (both trees).
    pub(super) root_half: f64,
}

impl<'a> Setup<'a> {
    /// The setup of `basis`'s nodes for the kernel of `params` and the far
    /// field `rep` (`n_outputs` outputs), the sources' fields `fields`, in
    /// a root cube of half side `root_half`.
    pub(super) fn of(
        basis: &'a dyn Basis,
        params: &[f64],
        rep: &'a Representation,
        fields: Vec<f64>,
        n_outputs: usize,
        root_half: f64,
    ) -> Self {
        Setup {
            basis,
            params: params.to_vec(),
            fields,
            strength: &rep.strength,
            n_outputs,
            target_slots: rep.target_slots,
            root_half,
        }
    }
}

#[cfg(test)]
impl<'a> Setup<'a> {
    /// The setup of the compressed modules' unit tests: root half side
    /// 0.5, no target slots.
    pub(super) fn for_test(
        basis: &'a dyn Basis,
        params: &[f64],
        fields: &[f64],
        strength: &'a [usize],
        n_outputs: usize,
    ) -> Self {
        Setup {
            basis,
            params: params.to_vec(),
            fields: fields.to_vec(),
            strength,
            n_outputs,
            target_slots: 0,
            root_half: 0.5,
        }
    }
}

impl Setup<'_> {
    pub(super) fn k(&self) -> usize {
        self.basis.len()
    }
    /// A target node's values: each output, and its differences per
    /// target slot.
    pub(super) fn channels(&self) -> usize {
        self.n_outputs * (1 + self.target_slots)
    }
    pub(super) fn rows(&self) -> usize {
        self.k() * self.channels()
    }
    pub(super) fn cols(&self) -> usize {
        self.k() * self.strength.len()
    }
    pub(super) fn half(&self, level: u8) -> f64 {
        self.root_half / (1u64 << level) as f64
    }

    /// The operator of `key`, `rows x cols` stored row by row (so
    /// `View::new(&a, cols).t()` is it; a target node's values for all
    /// the source nodes are then written contiguously, where column by
    /// column they were a strided scatter that took longer than the kernel
    /// evaluations): row `node * channels + channel` of the target cell's
    /// values (as [`Local`]), column `node * nq + component` of the source
    /// cell's strengths (as [`Upward`]).
    pub(super) fn operator<K: Kernel>(&self, key: &Key) -> Vec<f64> {
        let all: Vec<usize> = (0..self.k()).collect();
        self.operator_on::<K>(key, &all, &all)
    }

    /// The rows of the target nodes `tn` and the columns of the source
    /// nodes `sn` of [`Setup::operator`], in their order.
    pub(super) fn operator_on<K: Kernel>(&self, key: &Key, tn: &[usize], sn: &[usize]) -> Vec<f64> {
        let (no, nq) = (self.n_outputs, self.strength.len());
        let channels = self.channels();
        let (rows, cols) = (tn.len() * channels, sn.len() * nq);
        let unit = self.half(MAX_LEVEL as u8);
        let d = key.offset.map(|x| x as f64 * unit);
        let (ht, hs) = (self.half(key.target_level), self.half(key.source_level));
        let all = self.basis.nodes();
        let k = sn.len();
        let mut a = vec![0.0; rows * cols];
        // The source nodes, all at once; each strength component in turn.
        let pos: [Vec<f64>; 3] = [0, 1, 2].map(|ax| sn.iter().map(|&n| hs * all[n][ax]).collect());
        let mut fields: Vec<Vec<f64>> = self.fields.iter().map(|&v| vec![v; k]).collect();
        let mut out = vec![0.0; k * no];
        let mut base = vec![0.0; k * no];
        for (s, &slot) in self.strength.iter().enumerate() {
            fields[slot].iter_mut().for_each(|v| *v = 1.0);
            let mut sl: [&[f64]; MAX_SLOTS] = [&[]; MAX_SLOTS];
            for (f, v) in sl.iter_mut().zip(&fields) {
                *f = v;
            }
            let src = SourceSlices {
                pos: [&pos[0], &pos[1], &pos[2]],
                fields: sl,
                n_fields: fields.len(),
            };
            for (tn, xt) in tn.iter().map(|&n| &all[n]).enumerate() {
                let y = [0, 1, 2].map(|ax| d[ax] + ht * xt[ax]);
                for basis in 0..=self.target_slots {
                    let mut t = [0.0; MAX_SLOTS];
                    if basis > 0 {
                        t[basis - 1] = 1.0;
                    }
                    out.iter_mut().for_each(|o| *o = 0.0);
                    K::p2p_each(&self.params, y, &t, &src, 0..k, &mut out);
                    if basis == 0 {
                        base.copy_from_slice(&out);
                    }
                    for o in 0..no {
                        let at = (tn * channels + basis * no + o) * cols;
                        let row = &mut a[at..at + cols];
                        let (v, b) = (&out[o * k..(o + 1) * k], &base[o * k..(o + 1) * k]);
                        for sn in 0..k {
                            row[sn * nq + s] = if basis == 0 { v[sn] } else { v[sn] - b[sn] };
                        }
                    }
                }
            }
            fields[slot].iter_mut().for_each(|v| *v = 0.0);
        }
        a
    }
}
