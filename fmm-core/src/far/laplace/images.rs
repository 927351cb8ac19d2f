//! A periodic box's far images by the tree extended outwards (yokota2012
//! section 3.5 and Fig. 6, after Lambert, Darden and Board 1996; exaFMM's
//! `traversePeriodic` does the same).
//!
//! The box and its 124 nearest images (`domain::NEAR`: two boxes out along
//! each periodic axis) are summed by the traversal itself (the source tree
//! met at each of the 125 lattice shifts, the MAC deciding as in free
//! space). Farther out, level by level: the `5 x 5 x 5` block of boxes
//! about the box is one cell whose multipole is the box's moved to each of
//! its 125 places (M2M); the 124 blocks around the `5^l` cube it fills are
//! taken into the box's local expansion (M2L), and the block becomes the
//! next level's cell, five times larger. exaFMM grows by blocks of 3, whose
//! nearest far boxes are one box clear of the box: an expansion of order 20
//! there left 2e-6 against the Ewald sum here, where two boxes clear leave
//! 1e-9 (`docs/BENCHMARKS.md`, "Periodic boxes"). `levels` levels cover a
//! cube of `5^levels` boxes a side; the extra work is two translations a
//! level, whatever the number of particles.
//!
//! Both translations are linear in the harmonics of their shifts, so each
//! level's 125 M2M shifts and 15,500 M2L offsets are one translation by
//! the summed harmonics; and each level's expansions are kept in units of
//! its cell, so `5^9` boxes a side stay in f64's range at order 30.
//!
//! The sum over growing cubes is the vacuum boundary's value; tin foil
//! takes the surface term off (`domain::Boundary`). Along an open axis the
//! blocks do not grow: a slab's are `5^l x 5^l x 1` boxes, a wire's `5^l x 1
//! x 1`.

use super::harmonics::{ncoef, regular, singular, C};
use super::operators::{m2l_by, m2m_by, FullRange, Scratch};
use crate::domain::{Moments, PeriodicBox, BLOCK, NEAR};
use std::sync::{Arc, Mutex};

/// The integer offsets `-NEAR..=NEAR` along the periodic `axes`, 0 along
/// the others.
fn block(axes: [bool; 3]) -> Vec<[i32; 3]> {
    let n = NEAR as i32;
    let r = |a: usize| if axes[a] { -n..=n } else { 0..=0 };
    let mut v = Vec::new();
    for i in r(0) {
        for j in r(1) {
            for k in r(2) {
                v.push([i, j, k]);
            }
        }
    }
    v
}

/// The local expansion about the box's centre of the images outside its
/// `NEAR` nearest, up to `levels` levels out, from the box's multipole `m`
/// about its centre; order `p`, the box of side 1, periodic along `axes`.
/// The box's net strength is taken as neutralised (its monopole left out of
/// the images), so a strength balanced to rounding does not grow with the
/// lattice.
pub(crate) fn far_local(m: &[C], p: usize, axes: [bool; 3], levels: u32) -> Vec<C> {
    let nc = ncoef(p);
    let mut s = Scratch::new(p);
    let sums = Sums::get(p, axes);
    let (sing, reg) = (&sums.singular, &sums.regular);
    let mut cell = m.to_vec();
    cell[0] = C::ZERO;
    let mut local = vec![C::ZERO; nc];
    let mut size = 1.0f64;
    for _ in 1..levels {
        // Into the box's local expansion, in units of the level's cell:
        // L_k = size^-(k+1) L'_k.
        let mut l = vec![C::ZERO; nc];
        m2l_by(&FullRange::of(&cell, p), sing, &mut s, &mut l);
        for k in 0..=p {
            let f = size.powi(-(k as i32 + 1));
            for j in 0..=k {
                let i = super::harmonics::idx(k, j);
                local[i] += l[i].scale(f);
            }
        }
        // The next level's cell, in its own units (BLOCK times larger):
        // M_n / BLOCK^n.
        let mut next = vec![C::ZERO; nc];
        m2m_by(&cell, reg, p, &mut next);
        for n in 0..=p {
            let f = (BLOCK as f64).powi(-(n as i32));
            for j in 0..=n {
                let i = super::harmonics::idx(n, j);
                next[i] = next[i].scale(f);
            }
        }
        cell = next;
        size *= BLOCK as f64;
    }
    local
}

/// The summed harmonics of one level's translations, in units of its cell:
/// the singular harmonics of the offsets of the boxes of the 124 blocks
/// around it (M2L), the regular harmonics of the box's places in its block
/// (M2M). 15,500 harmonics of order 20 take about 30 ms, so they are made
/// once per order and axes.
struct Sums {
    singular: Vec<C>,
    regular: Vec<C>,
}

/// The sums made, by order and periodic axes.
type Made = ((usize, [bool; 3]), Arc<Sums>);

impl Sums {
    fn get(p: usize, axes: [bool; 3]) -> Arc<Sums> {
        static MADE: Mutex<Vec<Made>> = Mutex::new(Vec::new());
        let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, s)) = made.iter().find(|(k, _)| *k == (p, axes)) {
            return s.clone();
        }
        let s = Arc::new(Sums::new(p, axes));
        made.push(((p, axes), s.clone()));
        s
    }

    fn new(p: usize, axes: [bool; 3]) -> Sums {
        let nc = ncoef(p);
        let offsets = block(axes);
        let b = BLOCK as i32;
        let mut h = vec![C::ZERO; nc];
        let mut singular_sum = vec![C::ZERO; nc];
        for i in offsets.iter().filter(|i| **i != [0, 0, 0]) {
            for c in &offsets {
                // d = z_target - z_source
                let d = [0, 1, 2].map(|a| -(b * i[a] + c[a]) as f64);
                singular(d, p, &mut h);
                for (x, y) in singular_sum.iter_mut().zip(&h) {
                    *x += *y;
                }
            }
        }
        let mut regular_sum = vec![C::ZERO; nc];
        for c in &offsets {
            regular(c.map(|x| x as f64), p, &mut h);
            for (x, y) in regular_sum.iter_mut().zip(&h) {
                *x += *y;
            }
        }
        Sums {
            singular: singular_sum,
            regular: regular_sum,
        }
    }
}

/// The local expansion about the box's centre of everything past the
/// box's `NEAR` nearest images, for strength component `k` of the box's
/// multipole `m` about its centre (box of side 1, order `p`): the images
/// of `levels` levels ([`far_local`]) and what their sum leaves out, the
/// boundary's linear terms ([`Moments::beyond_images`]: tin foil's
/// surface term, a slab's tail), and a neutralising background's harmonic
/// part ([`super::background`]). What the CPU's and the GPU's FMMs add to
/// the target root's expansion.
pub(crate) fn periodic_local(
    m: &[C],
    p: usize,
    b: &PeriodicBox,
    moments: &Moments,
    k: usize,
    levels: u32,
) -> Vec<C> {
    let mut far = far_local(m, p, b.axes, levels);
    let (phi, grad) = moments.beyond_images(b, k, levels, [0.0; 3]);
    add_linear(&mut far, phi, grad);
    super::background::add_harmonic(b, moments, k, p, levels, &mut far);
    far
}

/// Adds the linear function `a + g . x` (about the expansion's centre) to
/// the local expansion `local`: degree 0 and 1 of the harmonics
/// (`R_1^0 = z`, `R_1^1 = -(x + i y) / 2`, the `m = -1` term the mirror),
/// so the terms a periodic box's boundary adds reach every output through
/// the same L2L and L2P as the images, on the CPU and the GPU.
pub(crate) fn add_linear(local: &mut [C], a: f64, g: [f64; 3]) {
    use super::harmonics::idx;
    local[idx(0, 0)] += C::new(a, 0.0);
    local[idx(1, 0)] += C::new(g[2], 0.0);
    local[idx(1, 1)] += C::new(-g[0], -g[1]);
}

#[cfg(test)]
mod tests {
    use super::super::operators::{l2p, Scratch};
    use super::*;

    #[test]
    fn a_linear_function_in_a_local_expansion_evaluates_to_itself() {
        let p = 4;
        let mut local = vec![C::ZERO; ncoef(p)];
        let (a, g) = (0.7, [0.3, -1.1, 2.5]);
        add_linear(&mut local, a, g);
        let x = [0.2, -0.4, 0.35];
        let (phi, grad) = l2p(&local, x, &mut Scratch::new(p));
        let want = a + g[0] * x[0] + g[1] * x[1] + g[2] * x[2];
        assert!((phi - want).abs() < 1e-14, "{phi} {want}");
        for k in 0..3 {
            assert!((grad[k] - g[k]).abs() < 1e-14, "{grad:?}");
        }
    }
}
