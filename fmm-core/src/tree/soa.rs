//! Particles in tree order as contiguous arrays (structure of arrays), the
//! form the CPU methods walk.

use rayon::prelude::*;

use crate::kernel::{SourceSlices, MAX_SLOTS};
use crate::particles::Particles;
use crate::real::Real;
use crate::tree::morton::Bounds;

/// Positions and slots in one order, as contiguous arrays.
pub(crate) struct SoA<R> {
    pub(crate) pos: [Vec<R>; 3],
    pub(crate) slots: Vec<Vec<R>>,
}

impl<R: Real> SoA<R> {
    pub(crate) fn with_capacity(n_slots: usize, n: usize) -> Self {
        SoA {
            pos: [0, 1, 2].map(|_| Vec::with_capacity(n)),
            slots: (0..n_slots).map(|_| Vec::with_capacity(n)).collect(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.pos.iter_mut().for_each(Vec::clear);
        self.slots.iter_mut().for_each(Vec::clear);
    }

    /// Appends the entries `idx` of `other` (a gather: one pass per slot,
    /// where a `push_from` per entry would copy one number per call).
    pub(crate) fn gather_from(&mut self, other: &SoA<R>, idx: &[u32]) {
        for a in 0..3 {
            let o = &other.pos[a];
            self.pos[a].extend(idx.iter().map(|&c| o[c as usize]));
        }
        for (s, o) in self.slots.iter_mut().zip(&other.slots) {
            s.extend(idx.iter().map(|&c| o[c as usize]));
        }
    }

    /// The positions set to `pos` (input order) taken in tree order
    /// `order`: a periodic box's wrapped points, which the near field sums.
    pub(crate) fn set_positions(&mut self, pos: [&[f64]; 3], order: &[u32]) {
        for (axis, p) in self.pos.iter_mut().zip(pos) {
            for (x, &i) in axis.iter_mut().zip(order) {
                *x = R::c(p[i as usize]);
            }
        }
    }

    /// Appends the entries `range` of `other`.
    pub(crate) fn push_from(&mut self, other: &SoA<R>, range: std::ops::Range<usize>) {
        for a in 0..3 {
            self.pos[a].extend_from_slice(&other.pos[a][range.clone()]);
        }
        for (s, o) in self.slots.iter_mut().zip(&other.slots) {
            s.extend_from_slice(&o[range.clone()]);
        }
    }

    pub(crate) fn slices(&self) -> SourceSlices<'_, R> {
        let mut fields: [&[R]; MAX_SLOTS] = [&[]; MAX_SLOTS];
        for (f, s) in fields.iter_mut().zip(&self.slots) {
            *f = s;
        }
        SourceSlices {
            pos: [&self.pos[0], &self.pos[1], &self.pos[2]],
            fields,
            n_fields: self.slots.len(),
        }
    }
}

/// Copies particles into tree order.
pub(crate) fn sorted<R: Real>(p: &Particles<R>, order: &[u32]) -> SoA<R> {
    let mut s = SoA::with_capacity(p.slots().len(), order.len());
    for &i in order {
        let i = i as usize;
        for a in 0..3 {
            s.pos[a].push(p.positions()[a][i]);
        }
        for (k, slot) in p.slots().iter().enumerate() {
            s.slots[k].push(slot[i]);
        }
    }
    s
}

/// The positions in f64, one array per axis.
pub(crate) fn positions_f64<R: Real>(p: &Particles<R>) -> [Vec<f64>; 3] {
    p.positions()
        .map(|v| v.par_iter().map(|x| x.to_f64()).collect())
}

/// [`to_unit_box`] by a given cube (one that holds the points): its
/// centre to the origin and its side to 1, so that trees built there in
/// [`Bounds::UNIT`] have the cube's cells (a lattice shared with other
/// processes' trees); returns the side.
pub(crate) fn to_unit_cube(a: &mut [Vec<f64>; 3], b: &mut [Vec<f64>; 3], cube: &Bounds) -> f64 {
    let side = 2.0 * cube.half;
    for set in [a, b] {
        for (k, axis) in set.iter_mut().enumerate() {
            let c = cube.center[k];
            axis.par_iter_mut().for_each(|x| *x = (*x - c) / side);
        }
    }
    side
}

/// Moves the points of both sets into the unit box: their common bounding
/// box's centre to the origin and its longest side to 1; returns that
/// side (1 where the points are all one point). The expansions are of the
/// singular Laplace kernel, whose far field is homogeneous: computed in
/// the unit box, a potential is the true one times the side, a gradient
/// times its square and second derivatives its cube, so any length unit
/// gives the same digits (points in a box of side 1e-30 took local
/// coefficients of order `d^-(p+1)` past f64's range at p 10).
pub(crate) fn to_unit_box(a: &mut [Vec<f64>; 3], b: &mut [Vec<f64>; 3]) -> f64 {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for set in [&*a, &*b] {
        for (k, axis) in set.iter().enumerate() {
            for &x in axis {
                lo[k] = lo[k].min(x);
                hi[k] = hi[k].max(x);
            }
        }
    }
    let side = (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
    if !(side > 0.0 && side.is_finite()) {
        return 1.0;
    }
    let centre: [f64; 3] = std::array::from_fn(|k| 0.5 * (lo[k] + hi[k]));
    for set in [a, b] {
        for (k, axis) in set.iter_mut().enumerate() {
            axis.iter_mut().for_each(|x| *x = (*x - centre[k]) / side);
        }
    }
    side
}
