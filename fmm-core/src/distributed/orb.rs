//! Orthogonal recursive bisection (yokota2012 section 3.2): space cut
//! into one part a process, each part holding an equal share of the
//! particles' weight (their measured work, or one each), so that a
//! process's particles are near each other and its work is the others'.
//!
//! The processes `lo..hi` of a group split into `lo..mid` and `mid..hi`,
//! `mid` their middle; the group's particles are cut by a plane across
//! the longest side of their bounding box, at the place that leaves the
//! share `(mid - lo) / (hi - lo)` of their weight below it (a bisection
//! over the coordinate, each probe one all-reduce of every group's weight
//! below its plane). Groups are cut until each is one process. Nothing
//! moves while the cuts are found: each process learns where its own
//! particles go.

use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};
use rayon::prelude::*;

use crate::error::Error;

/// Probes of each cut: the plane within `2^-PROBES` of the group's box.
const PROBES: usize = 60;

/// The process each of this process's points `x` (weights `w`) goes to;
/// a collective call. Weights must be finite and not negative.
pub fn orb_partition<C: Communicator>(
    comm: &C,
    x: &[[f64; 3]],
    w: &[f64],
) -> Result<Vec<i32>, Error> {
    if x.len() != w.len() {
        return Err(Error::LengthMismatch {
            what: "weights for the partition".into(),
            got: w.len(),
            expected: x.len(),
        });
    }
    let bad = x
        .iter()
        .position(|p| p.iter().any(|c| !c.is_finite()))
        .or_else(|| w.iter().position(|v| !(v.is_finite() && *v >= 0.0)));
    super::agree(
        comm,
        match bad {
            Some(i) => Err(Error::BadOption(format!(
                "point {i} of the partition has a position or weight that is not finite, or a negative weight"
            ))),
            None => Ok(()),
        },
    )?;
    let size = comm.size();
    // Each point's group, by its first process; the groups' last
    // processes (exclusive), indexed by the first.
    let mut group = vec![0i32; x.len()];
    let mut end = vec![0i32; size as usize];
    end[0] = size;
    loop {
        let active: Vec<i32> = (0..size).filter(|&g| end[g as usize] > g + 1).collect();
        if active.is_empty() {
            break;
        }
        let mut slots = vec![None; size as usize];
        for (s, &g) in active.iter().enumerate() {
            slots[g as usize] = Some(s);
        }
        let slot = |g: i32| slots[g as usize];
        let k = active.len();
        // The groups' boxes: the minimum of (x, -x) over each group.
        let mut lows = vec![f64::INFINITY; 6 * k];
        let mut totals = vec![0.0; k];
        for (i, p) in x.iter().enumerate() {
            if let Some(s) = slot(group[i]) {
                for c in 0..3 {
                    lows[6 * s + c] = lows[6 * s + c].min(p[c]);
                    lows[6 * s + 3 + c] = lows[6 * s + 3 + c].min(-p[c]);
                }
                totals[s] += w[i];
            }
        }
        let mut boxes = vec![0.0; 6 * k];
        comm.all_reduce_into(&lows[..], &mut boxes[..], SystemOperation::min());
        let mut total = vec![0.0; k];
        comm.all_reduce_into(&totals[..], &mut total[..], SystemOperation::sum());
        // Each group's axis (its box's longest side) and bracket.
        let axis: Vec<usize> = (0..k)
            .map(|s| {
                let side = |c: usize| -boxes[6 * s + 3 + c] - boxes[6 * s + c];
                (0..3).fold(0, |a, c| if side(c) > side(a) { c } else { a })
            })
            .collect();
        let mut lo: Vec<f64> = (0..k).map(|s| boxes[6 * s + axis[s]]).collect();
        let mut hi: Vec<f64> = (0..k).map(|s| -boxes[6 * s + 3 + axis[s]]).collect();
        let share: Vec<f64> = active
            .iter()
            .map(|&g| {
                let mid = g + (end[g as usize] - g) / 2;
                (mid - g) as f64 / (end[g as usize] - g) as f64
            })
            .collect();
        for _ in 0..PROBES {
            let cut: Vec<f64> = (0..k).map(|s| 0.5 * (lo[s] + hi[s])).collect();
            // Every point a probe: on every core (10^7 points a process).
            let below = x
                .par_iter()
                .zip(&group)
                .zip(w)
                .fold(
                    || vec![0.0; k],
                    |mut below, ((p, &g), &wi)| {
                        if let Some(s) = slot(g) {
                            if p[axis[s]] < cut[s] {
                                below[s] += wi;
                            }
                        }
                        below
                    },
                )
                .reduce(
                    || vec![0.0; k],
                    |a, b| a.iter().zip(&b).map(|(u, v)| u + v).collect(),
                );
            let mut all = vec![0.0; k];
            comm.all_reduce_into(&below[..], &mut all[..], SystemOperation::sum());
            for s in 0..k {
                if all[s] < share[s] * total[s] {
                    lo[s] = cut[s];
                } else {
                    hi[s] = cut[s];
                }
            }
        }
        // Points in [lo, hi] are on the plane (the probes cannot part
        // them: a lattice's layer shares a coordinate). Of those, the lower
        // half takes what its share still wants, in the order of the
        // processes and then of each process's points, so that ties split
        // as finely as the weights do.
        let (mut below, mut tied) = (vec![0.0; k], vec![0.0; k]);
        for (i, p) in x.iter().enumerate() {
            if let Some(s) = slot(group[i]) {
                if p[axis[s]] < lo[s] {
                    below[s] += w[i];
                } else if p[axis[s]] <= hi[s] {
                    tied[s] += w[i];
                }
            }
        }
        let (mut all_below, mut tied_before) = (vec![0.0; k], vec![0.0; k]);
        comm.all_reduce_into(&below[..], &mut all_below[..], SystemOperation::sum());
        comm.exclusive_scan_into(&tied[..], &mut tied_before[..], SystemOperation::sum());
        if comm.rank() == 0 {
            tied_before.iter_mut().for_each(|t| *t = 0.0);
        }
        let mut wants: Vec<f64> = (0..k)
            .map(|s| share[s] * total[s] - all_below[s] - tied_before[s])
            .collect();
        for (i, p) in x.iter().enumerate() {
            if let Some(s) = slot(group[i]) {
                let g = group[i];
                let mid = g + (end[g as usize] - g) / 2;
                let c = p[axis[s]];
                let lower = c < lo[s] || (c <= hi[s] && wants[s] >= 0.5 * w[i]);
                if c >= lo[s] && c <= hi[s] && lower {
                    wants[s] -= w[i];
                }
                if !lower {
                    group[i] = mid;
                }
            }
        }
        for &g in &active {
            let (e, mid) = (end[g as usize], g + (end[g as usize] - g) / 2);
            end[g as usize] = mid;
            end[mid as usize] = e;
        }
    }
    Ok(group)
}
