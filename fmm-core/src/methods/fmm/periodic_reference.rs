//! The periodic sums at a tolerance's sampled targets, cheaply enough for
//! 10^6 sources: what a periodic FMM's error is estimated against.
//!
//! The Ewald sum ([`crate::reference::ewald`]) is exact, but its reciprocal
//! part costs every source at every reciprocal vector however few the
//! targets: 75 s at 10^6 sources and 64 samples on 2 cores, against 1.5 s
//! for the FMM it checks. Here instead, for the few targets sampled:
//!
//! - the box and its 124 nearest images (`domain::NEAR`) as a two-level
//!   grid of cells (8 octants, 64 sub-cells) whose multipoles of order `p`
//!   are evaluated at a target (M2P) where the cell is at least three of
//!   its radii away (the expansion good to `3^-(p+1)`, a thirtieth of the
//!   tolerance: `p` 12 for 1e-4, [`ORDER`] 20 for 1e-8), the sub-cells
//!   nearer summed by the kernel itself (every smoothing kept);
//! - the images farther out by the images' expansions at order `p`
//!   (`images::far_local`, what the FMM adds) and the boundary's linear
//!   terms.
//!
//! Within 1e-9 of the Ewald sum at order 20 (the tests below). The cells' expansions drop a smoothing as the FMM's
//! do (cores small beside a sub-cell, an eighth of the box).

use rayon::prelude::*;

use super::cpu::Passes;
use super::harmonics::{get, idx, ncoef, singular, C};
use super::images;
use super::operators::{l2p, l2p_hessian, m2m, Scratch};
use crate::domain::{Moments, PeriodicBox, NEAR};
use crate::error::Error;
use crate::far::laplace::background;
use crate::far::terms::{far_outputs, FarValues};
use crate::far::{self, FarField};
use crate::kernel::{Kernel, SourceSlices, MAX_SLOTS};
use crate::particles::Particles;
use crate::real::Real;
use crate::tree::SoA;
use fmm_codegen::kernel::{FarTerm, Term};

/// The highest order of the cells' and the images' expansions.
pub const ORDER: usize = 20;

/// The order for a relative error `tol`: the cells' expansions good to
/// `3^-(p+1)`, a thirtieth of it (order 12 for 1e-4, 20 for 1e-8).
pub(crate) fn order_for(tol: f64) -> usize {
    let p = (-(tol / 30.0).ln() / 3f64.ln()).ceil() - 1.0;
    (p.max(8.0) as usize).min(ORDER)
}

/// A cell is taken by its expansion where it is this many of its radii
/// from the target, or farther.
pub(crate) const SEPARATION: f64 = 3.0;

/// Cells a side of the fine grid (the coarse one has half as many).
const FINE: usize = 4;

/// Kernel `K`'s Laplace far field, its strength slots and terms: what a
/// periodic box's sums need (an error naming the kernel where it has none).
pub(crate) fn laplace_terms<K: Kernel>() -> Result<(Vec<usize>, Vec<FarTerm>), Error> {
    match far::plan::<K>(FarField::Laplace, far::Tree::Fmm) {
        Ok(far::Plan::Laplace { strength, terms }) => Ok((strength, terms)),
        _ => Err(Error::FarFieldUnusable {
            kernel: K::def().name.clone(),
            far_field: "laplace",
            why: "a periodic box's sums need the Laplace far field".into(),
        }),
    }
}

/// The sums of kernel `K` in `pbox` at the targets `idx` of `targets`,
/// good to a thirtieth of `tol` or better: one vector per output slot,
/// one value per target of `idx`.
pub fn periodic_at<K: Kernel, R: Real>(
    params: &[f64],
    pbox: &PeriodicBox,
    targets: &Particles<R>,
    idx_t: &[usize],
    sources: &Particles<f64>,
    tol: f64,
) -> Result<Vec<Vec<f64>>, Error> {
    let order = order_for(tol);
    let def = K::def();
    let (strength, terms) = laplace_terms::<K>()?;
    let (no, nq, nt) = (def.n_outputs(), strength.len(), def.n_targets());
    let (side, c) = (pbox.side, pbox.center());
    // The sources wrapped, in the unit box about the origin.
    let mut unit = [0, 1, 2].map(|a| sources.positions()[a].to_vec());
    pbox.wrap(&mut unit)?;
    pbox.to_unit(&mut unit);
    let q: Vec<&[f64]> = strength.iter().map(|&k| &sources.slots()[k][..]).collect();
    let moments = Moments::of(&unit, &q, [0.0; 3]);
    moments.check(pbox)?;
    let src = sources.source_slices();
    let grid = Grid::new(&unit, &q, &src, pbox, order);
    // The far images and the boundary, a local expansion about the origin
    // per strength component.
    let levels = pbox.levels_for(1e-12);
    let far_locals: Vec<Vec<C>> = (0..nq)
        .map(|k| images::periodic_local(&grid.box_multipole[k], order, pbox, &moments, k, levels))
        .collect();
    let hessians = terms.iter().any(|t| matches!(t.term, Term::Stretching(_)));
    let near_images = pbox.near_images();
    let rows: Vec<Vec<f64>> = idx_t
        .par_iter()
        .map_init(
            || (Scratch::new(order), vec![C::ZERO; ncoef(order + 2)]),
            |(s, h), &i| {
                let mut x = [0, 1, 2].map(|a| vec![targets.positions()[a][i].to_f64()]);
                pbox.wrap(&mut x).expect("a target of the box");
                pbox.to_unit(&mut x);
                let t = [x[0][0], x[1][0], x[2][0]];
                let mut slots = [0.0f64; MAX_SLOTS];
                for (tk, slot) in slots.iter_mut().zip(targets.slots()).take(nt) {
                    *tk = slot[i].to_f64();
                }
                // Expansions into a local expansion of degree 2 about the
                // target (unit box), the rest by the kernel, the target
                // moved by the image's lattice vector the other way.
                let mut local = vec![vec![C::ZERO; ncoef(2)]; nq];
                let xr = [0, 1, 2].map(|a| t[a] * side + c[a]);
                let mut out = vec![0.0; no];
                let sorted = grid.sorted.slices();
                for v in &near_images {
                    grid.visit(t, *v, |cell, by_expansion| {
                        if by_expansion {
                            for (k, l) in local.iter_mut().enumerate() {
                                let d = [0, 1, 2].map(|a| t[a] - cell.center[a] - v[a]);
                                m2p(&cell.mult[k], d, order, h, l);
                            }
                        } else {
                            let x = [0, 1, 2].map(|a| xr[a] - v[a] * side);
                            let r = cell.range.clone();
                            K::p2p_target(params, x, &slots, &sorted, r, &mut out);
                        }
                    });
                }
                let mut fv = FarValues::default();
                let mut s2 = Scratch::new(2);
                for k in 0..nq {
                    let (phi0, g0) = l2p(&local[k], [0.0; 3], &mut s2);
                    let (phi1, g1) = l2p(&far_locals[k], t, s);
                    fv.phi[k] = (phi0 + phi1) / side;
                    fv.grad[k] = [0, 1, 2].map(|a| (g0[a] + g1[a]) / (side * side));
                    if hessians {
                        let h0 = l2p_hessian(&local[k], [0.0; 3], &mut s2);
                        let h1 = l2p_hessian(&far_locals[k], t, s);
                        let cube = side * side * side;
                        fv.hess[k] =
                            [0, 1, 2].map(|a| [0, 1, 2].map(|b| (h0[a][b] + h1[a][b]) / cube));
                    }
                }
                background::add_quadratic(pbox, &moments.total, t, &mut fv);
                let mut far_out = vec![0.0; no];
                far_outputs(def, &terms, nq, &fv, |slot| slots[slot], &mut far_out);
                out.iter().zip(&far_out).map(|(a, b)| a + b).collect()
            },
        )
        .collect();
    Ok(crate::reference::by_slot(&rows, no))
}

/// Adds the local expansion of degree 2 about a target of the multipole
/// `mult` (order `p`) `d = target - centre` away to `local`: the M2L's
/// `L_k^l = (-1)^k sum_n sum_m M_n^m I_{n+k}^{m+l}(d)` for `k <= 2`, every
/// degree of the multipole kept. `h` holds the harmonics.
pub(crate) fn m2p(mult: &[C], d: [f64; 3], p: usize, h: &mut [C], local: &mut [C]) {
    singular(d, p + 2, h);
    for k in 0..=2usize {
        let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
        for l in 0..=k as isize {
            let mut acc = C::ZERO;
            for n in 0..=p {
                for m in -(n as isize)..=n as isize {
                    acc += get(mult, n, m) * get(h, n + k, m + l);
                }
            }
            local[idx(k, l as usize)] += acc.scale(sign);
        }
    }
}

/// A cell of the grid: its centre, radius, members and multipoles.
struct Cell {
    center: [f64; 3],
    radius: f64,
    /// Its sources in the grid's order (fine cells).
    range: std::ops::Range<usize>,
    /// One expansion per strength component.
    mult: Vec<Vec<C>>,
}

/// The box as 8 octants of 8 sub-cells each.
struct Grid {
    coarse: Vec<Cell>,
    fine: Vec<Vec<Cell>>,
    /// The box's multipoles about its centre.
    box_multipole: Vec<Vec<C>>,
    /// The sources in cell order, in the box's units.
    sorted: SoA<f64>,
}

impl Grid {
    fn new(
        unit: &[Vec<f64>; 3],
        q: &[&[f64]],
        src: &SourceSlices<'_, f64>,
        b: &PeriodicBox,
        order_p: usize,
    ) -> Self {
        let n = unit[0].len();
        let h = 1.0 / FINE as f64;
        let cell_of = |j: usize| {
            let i = [0, 1, 2].map(|a| (((unit[a][j] + 0.5) / h) as usize).min(FINE - 1));
            i[0] + FINE * (i[1] + FINE * i[2])
        };
        // The sources by fine cell (a counting sort; the cells found on
        // every core).
        let cells: Vec<u8> = (0..n).into_par_iter().map(|j| cell_of(j) as u8).collect();
        let mut counts = vec![0usize; FINE * FINE * FINE];
        cells.iter().for_each(|&f| counts[f as usize] += 1);
        let mut members: Vec<Vec<usize>> = counts.iter().map(|&c| Vec::with_capacity(c)).collect();
        for (j, &f) in cells.iter().enumerate() {
            members[f as usize].push(j);
        }
        let fine_center = |f: usize| {
            let i = [f % FINE, (f / FINE) % FINE, f / (FINE * FINE)];
            i.map(|x| -0.5 + (x as f64 + 0.5) * h)
        };
        // The sources in cell order, back in the box's units (the kernel's
        // sums read a cell as one run).
        let order: Vec<usize> = members.iter().flatten().copied().collect();
        let mut sorted = SoA {
            pos: [0, 1, 2].map(|a| {
                let c = b.center()[a];
                order.par_iter().map(|&j| unit[a][j] * b.side + c).collect()
            }),
            slots: src.fields[..src.n_fields]
                .iter()
                .map(|f| order.par_iter().map(|&j| f[j]).collect())
                .collect(),
        };
        let mut begin = 0;
        let fine: Vec<Cell> = members
            .into_iter()
            .enumerate()
            .map(|(f, members)| {
                let range = begin..begin + members.len();
                begin = range.end;
                (f, members, range)
            })
            .collect::<Vec<_>>()
            .into_par_iter()
            .map_init(
                || Passes::new(order_p),
                |passes, (f, members, range)| {
                    let center = fine_center(f);
                    let x: Vec<[f64; 3]> = members
                        .iter()
                        .map(|&j| [unit[0][j], unit[1][j], unit[2][j]])
                        .collect();
                    let mult = q
                        .iter()
                        .map(|qk| {
                            let w: Vec<f64> = members.iter().map(|&j| qk[j]).collect();
                            let mut m = vec![C::ZERO; ncoef(order_p)];
                            passes.p2m(center, &x, &w, &mut m);
                            m
                        })
                        .collect();
                    Cell {
                        mult,
                        center,
                        radius: 3f64.sqrt() * 0.5 * h,
                        range,
                    }
                },
            )
            .collect();
        sorted.pos.iter_mut().for_each(|v| v.shrink_to_fit());
        // Octants of 2^3 sub-cells, their multipoles by M2M.
        let half = FINE / 2;
        let mut by_octant: Vec<Vec<Cell>> = (0..8).map(|_| Vec::new()).collect();
        for (f, cell) in fine.into_iter().enumerate() {
            let i = [f % FINE, (f / FINE) % FINE, f / (FINE * FINE)].map(|x| x / half);
            by_octant[i[0] + 2 * (i[1] + 2 * i[2])].push(cell);
        }
        let mut s = Scratch::new(order_p);
        let mut shift = |cells: &[&Cell], center: [f64; 3]| -> Vec<Vec<C>> {
            (0..q.len())
                .map(|k| {
                    let mut m = vec![C::ZERO; ncoef(order_p)];
                    for c in cells {
                        let d = [0, 1, 2].map(|a| c.center[a] - center[a]);
                        m2m(&c.mult[k], d, &mut s, &mut m);
                    }
                    m
                })
                .collect()
        };
        let coarse: Vec<Cell> = by_octant
            .iter()
            .enumerate()
            .map(|(o, cells)| {
                let center =
                    [o & 1, (o >> 1) & 1, o >> 2].map(|b| if b == 1 { 0.25 } else { -0.25 });
                let refs: Vec<&Cell> = cells.iter().collect();
                Cell {
                    mult: shift(&refs, center),
                    center,
                    radius: 3f64.sqrt() * 0.25,
                    range: 0..0,
                }
            })
            .collect();
        let refs: Vec<&Cell> = coarse.iter().collect();
        let box_multipole = shift(&refs, [0.0; 3]);
        Grid {
            coarse,
            fine: by_octant,
            box_multipole,
            sorted,
        }
    }

    /// Calls `f(cell, by_expansion)` for the cells of the image at lattice
    /// vector `v` as target `t` takes them: an octant or a sub-cell by its
    /// expansion where it is [`SEPARATION`] radii away, else a sub-cell's
    /// members.
    fn visit(&self, t: [f64; 3], v: [f64; 3], mut f: impl FnMut(&Cell, bool)) {
        let far = |c: &Cell| {
            let d2: f64 = (0..3).map(|a| (t[a] - c.center[a] - v[a]).powi(2)).sum();
            d2 > (SEPARATION * c.radius).powi(2)
        };
        for (o, coarse) in self.coarse.iter().enumerate() {
            if far(coarse) {
                f(coarse, true);
                continue;
            }
            for fine in &self.fine[o] {
                if fine.range.is_empty() {
                    continue;
                }
                f(fine, far(fine));
            }
        }
    }
}

/// The lattice shifts of the near images cover `NEAR` boxes out.
const _: () = assert!(NEAR == 2);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributions::uniform_cube;
    use crate::kernels::{Coulomb, VelocityStretching};
    use crate::reference::ewald::ewald_at;

    fn relative(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
        let (a, b) = (a.concat(), b.concat());
        let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
        let den: f64 = b.iter().map(|y| y * y).sum();
        (num / den).sqrt()
    }

    /// At sampled targets, against the Ewald sum: Coulomb charges and
    /// vortex particles with small cores (velocity and stretching).
    #[test]
    fn the_sums_at_samples_match_the_ewald_sum() {
        let n = 3000;
        let pbox = PeriodicBox::cube([-0.5, 0.0, 1.0], 2.0);
        let pos: Vec<[f64; 3]> = uniform_cube(n, 7)
            .iter()
            .map(|p| [0, 1, 2].map(|a| pbox.origin[a] + pbox.side * p[a]))
            .collect();
        let zero_mean = |seed: u64| {
            let v: Vec<f64> = uniform_cube(n, seed).iter().map(|p| p[0] - 0.5).collect();
            let mean = v.iter().sum::<f64>() / n as f64;
            v.iter().map(|x| x - mean).collect::<Vec<f64>>()
        };
        let idx: Vec<usize> = (0..n).step_by(97).collect();
        let mut s = Particles::sources::<Coulomb>(&pos).unwrap();
        s.set("q", &zero_mean(1)).unwrap();
        let t = Particles::targets::<Coulomb>(&pos).unwrap();
        let got = periodic_at::<Coulomb, f64>(&[], &pbox, &t, &idx, &s, 1e-8).unwrap();
        let want = ewald_at::<Coulomb, f64>(&[], &pbox, &t, &idx, &s).unwrap();
        let e = relative(&got, &want);
        assert!(e < 1e-9, "Coulomb: {e:e}");
        let alpha: Vec<[f64; 3]> = {
            let (a, b, c) = (zero_mean(2), zero_mean(3), zero_mean(4));
            (0..n).map(|i| [a[i], b[i], c[i]]).collect()
        };
        let mut s = Particles::sources::<VelocityStretching>(&pos).unwrap();
        s.set_vec3("alpha", &alpha).unwrap();
        s.set("sigma", &vec![0.01; n]).unwrap();
        let mut t = Particles::targets::<VelocityStretching>(&pos).unwrap();
        t.set_vec3("alpha_i", &alpha).unwrap();
        let got = periodic_at::<VelocityStretching, f64>(&[], &pbox, &t, &idx, &s, 1e-8).unwrap();
        let want = ewald_at::<VelocityStretching, f64>(&[], &pbox, &t, &idx, &s).unwrap();
        let e = relative(&got, &want);
        assert!(e < 1e-9, "velocity + stretching: {e:e}");
    }
}
