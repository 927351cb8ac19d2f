//! The periodic sums at a tolerance's samples on the GPU: what
//! [`crate::methods::fmm::periodic_reference`] computes on the host, without
//! copying the sources back (at 10^7 sources that copy and the host's grid
//! took 0.79 s an evaluation on the H100's host, where the FMM took 0.2 s).
//!
//! - The sources in the FMM's own tree of the box (the points wrapped into
//!   it, in its Morton order: [`super::Trees`], built once an evaluation
//!   for its runs and this), not a tree of their own (its sort and cells
//!   took 9 ms at 10^7 on an H100, a reference 0.027 s in all).
//! - The tree's top levels, at most [`WALKED`] cells, are the walk's: their
//!   multipoles of order `p` ([`order_on_device`]) by the FMM's P2M at the
//!   walk's last level (each cell there taken whole) and M2M above it, in
//!   f64 from the sources' own values, on the device while the host walks.
//! - Each sample walks those cells on the host at each of the box's
//!   nearest images: a cell at least [`SEPARATION`] radii away is listed
//!   for its M2P, a cell of the walk's last level nearer for the kernel.
//! - The M2P on the device: the M2L's kernel (`fmm_m2l`) with the tasks of
//!   a local expansion of degree 2 only, about a copy of the sample a piece
//!   of [`FAR_PIECE`] cells of its list.
//! - The near cells by the kernel in f64 on the device: one group of the
//!   P2P lists a listed cell (and image), its targets a copy of each sample
//!   that lists it. (A group a sample, its list in pieces, kept one thread
//!   of a block busy: velocity + stretching at 10^7 took 19 ms there.)
//! - The images past the nearest by the images' expansions from the root's
//!   multipole, and the boundary's terms, as on the host, while the device
//!   sums the far and the near cells.
//!
//! At 10^7 sources (H100, f32, `FMM_TRACE=1 fmm_bench --periodic 1 --tol
//! 1e-4`, 2026-11-26) the first form, which walked every cell and summed
//! the M2P on the host, took 0.15 s: 0.07 s copying 37,000 cells'
//! multipoles back and 0.05 s of M2P on the host. Walking the top 4,700
//! cells and the M2P on the device took the walk to 2 ms and the M2P to 2
//! ms.

use std::collections::HashMap;

use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use super::periodic::{self, Images};
use super::{p2p_lists, per_cell, unit_scale, FmmTree, Ops, Points};
use crate::cuda::device::{alloc, download, launch, refs3, upload, zeros};
use crate::cuda::laps::Laps;
use crate::cuda::launch::Entry;
use crate::cuda::primitives::{gather, gather_i32, widen};
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::{wrap1, PeriodicBox};
use crate::error::Error;
use crate::far::laplace::background;
use crate::far::laplace::harmonics::{ncoef, C};
use crate::far::laplace::operators::{l2p, l2p_hessian, Scratch};
use crate::far::terms::{far_outputs, FarValues};
use crate::kernel::Kernel;
use crate::methods::fmm::periodic_reference::{laplace_terms, ORDER};
use crate::real::Real;
use crate::tree::traversal::entry;
use crate::tree::{DeviceGroups, TreeOrdered};
use fmm_codegen::emit::p2p_list::P2P_BLOCK;
use fmm_codegen::kernel::Term;

/// The most sources a leaf of the reference's own tree holds, where no
/// run of the FMM built one ([`source_tree`]).
const LEAF: usize = 512;

/// The most cells the samples walk (the levels from the root down to the
/// deepest that keeps to it): the top 4,681 of a uniform 10^7, whose
/// near cells hold some 10^6 sources a sample for the kernel.
const WALKED: usize = 8192;

/// A cell is taken by its multipole from this many radii away: the
/// multipole's error at its degree `n` goes as `SEPARATION^-(n+1)`. At 3 the
/// multipoles needed p 13 and took 32 ms at 10^7 (H100), at 4 p 11 and 17
/// ms, the kernel's share 1.6 ms and 3 ms.
const SEPARATION: f64 = 4.0;

/// Far cells a piece of a sample's M2P list (one block of the M2L).
const FAR_PIECE: usize = 128;

/// The order of the reference's multipoles for a tolerance `tol`: their
/// error at [`SEPARATION`] radii a thirtieth of it (at least order 4), and
/// two orders more, since the M2L's kernel sums the degrees `n <= p - k`
/// into the local coefficient of degree `k` (the gradient `k = 1`, the
/// Hessian `k = 2`).
fn order_on_device(tol: f64) -> usize {
    let p = (-(tol / 30.0).ln() / SEPARATION.ln()).ceil() - 1.0;
    (p.max(4.0) as usize).min(ORDER - 2) + 2
}

/// The sums of kernel `K` in `b` from the sources of `tree` (the FMM's
/// tree of the points wrapped into the box, `slots` their field slots in
/// its order) at the samples `cols` (their positions, then their field
/// slots, in f64), good to a thirtieth of `tol`: one vector per output
/// slot, one value per sample.
pub(super) fn periodic_sums<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    b: &PeriodicBox,
    tol: f64,
    (st, sslots): (&FmmTree<R>, &[CudaSlice<R>]),
    cols: &[Vec<f64>],
) -> Result<Vec<Vec<f64>>, Error> {
    let def = K::def();
    let (strength, terms) = laplace_terms::<K>()?;
    let (no, nq) = (def.n_outputs(), strength.len());
    let p = order_on_device(tol);
    let nc = ncoef(p);
    let s = gpu.stream();
    let ns = cols[0].len();
    let mut lap = Laps::new(Some(gpu), "periodic reference");
    let ops = Ops::get::<R>(gpu, p)?;
    let q = |k: usize| &sslots[strength[k.min(nq - 1)]];
    let moments = periodic::moments::<R>(gpu, b, &st.pos, [q(0), q(1), q(2)], nq)?;
    moments.check(b)?;
    let u = unit_scale(st.tree.bounds.half);
    let walk = Walk::of(gpu, st)?;
    lap.say("moments, the walk's cells")?;

    // Queued on the device while the host walks: the walked cells'
    // multipoles, and the sources in f64 for the near cells' sums.
    let mult = walk.multipoles(gpu, &ops, &st.pos, [q(0), q(1), q(2)], nq, nc, u)?;
    let n = st.tree.n;
    let wide = |x: &CudaSlice<R>| widen(gpu, &x.slice(0..n), n);
    let pos64 = [wide(&st.pos[0])?, wide(&st.pos[1])?, wide(&st.pos[2])?];
    let slots64: Vec<CudaSlice<f64>> = sslots.iter().map(wide).collect::<Result<_, _>>()?;

    // Each sample's walk: the cells far enough by M2P (degree 2 about the
    // sample, the device's units), the cells of the walk's last level
    // nearer listed with their image.
    let (side, c) = (b.side, b.center());
    let near_images = b.near_images();
    // Wrapped as the device wraps the targets it evaluates at (`fmm_wrap`:
    // in f64, then rounded to R, the box's far face taken to its origin):
    // the samples sit where the FMM's targets do. Wrapped in f64 only, a
    // target that had left the box sat up to half an f32 rounding of the
    // side from where the FMM evaluated it, which the stretching's
    // cancellation made a floor of 2e-4 (vortex particles a few steps off
    // their 64^3 lattice).
    let samples: Vec<[f64; 3]> = (0..ns)
        .map(|i| {
            [0, 1, 2].map(|a| match b.axes[a] {
                true => {
                    let w = R::c(wrap1(cols[a][i], b.origin[a], side)).to_f64();
                    if w >= b.origin[a] + side {
                        R::c(b.origin[a]).to_f64()
                    } else {
                        w
                    }
                }
                false => cols[a][i],
            })
        })
        .collect();
    let walks: Vec<(Vec<u32>, Vec<u32>)> = samples
        .par_iter()
        .map(|t| {
            let (mut far, mut near, mut stack) = (Vec::new(), Vec::new(), Vec::new());
            for (image, v) in near_images.iter().enumerate() {
                stack.push(0usize);
                while let Some(cell) = stack.pop() {
                    let d = [0, 1, 2].map(|a| t[a] - (walk.center[a][cell] + v[a] * side));
                    let dist = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                    if dist > 0.0 && dist >= SEPARATION * walk.radius[cell] {
                        far.push(entry(cell, image));
                    } else if walk.children[cell].is_empty() {
                        near.push(entry(walk.tree_cell[cell] as usize, image));
                    } else {
                        stack.extend(&walk.children[cell]);
                    }
                }
            }
            (far, near)
        })
        .collect();
    lap.say("multipoles, walks")?;

    // The root's multipole, for the images past the nearest (below, on
    // the host while the device sums the cells).
    let row = 2 * nq * nc;
    let root: Vec<C> = download(s, &mult, row)?
        .chunks(2)
        .map(|w| C::new(w[0], w[1]))
        .collect();

    // The far cells' M2P on the device: a copy of the sample a piece of
    // its far list, its local expansion of degree 2 by the M2L's kernel;
    // queued, read back after the near cells.
    let shifts = Images::<f64>::of(gpu, Some(b))?;
    let mut far_copy_of = Vec::new();
    let far_local = {
        let (mut list, mut begin, mut end) = (Vec::new(), Vec::new(), Vec::new());
        for (i, (far, _)) in walks.iter().enumerate() {
            for piece in far.chunks(FAR_PIECE) {
                begin.push(list.len() as i64);
                list.extend(piece.iter().map(|&e| e as i32));
                end.push(list.len() as i64);
                far_copy_of.push(i);
            }
        }
        let copies = far_copy_of.len();
        if copies > 0 {
            let at: Vec<CudaSlice<f64>> = (0..3)
                .map(|a| {
                    upload(
                        s,
                        &far_copy_of
                            .iter()
                            .map(|&i| samples[i][a])
                            .collect::<Vec<_>>(),
                    )
                })
                .collect::<Result<_, _>>()?;
            Some(super::m2l::m2l_to_points(
                gpu,
                &ops,
                ([&at[0], &at[1], &at[2]], copies),
                (&upload(s, &begin)?, &upload(s, &end)?, &upload(s, &list)?),
                (
                    [&walk.center_d[0], &walk.center_d[1], &walk.center_d[2]],
                    walk.n,
                ),
                &shifts.shift,
                &mult,
                nq,
                p,
                2,
                u,
            )?)
        } else {
            None
        }
    };

    // The images past the nearest, a local expansion about the box's
    // centre (box of side 1) per strength component.
    let levels = b.levels_for(1e-12);
    let far_locals: Vec<Vec<C>> = (0..nq)
        .map(|k| {
            let root = &root[k * nc..(k + 1) * nc];
            periodic::far_local(b, &moments, levels, k, root, st.tree.bounds.center, u)
        })
        .collect();

    // The listed cells by the kernel, on the device: one group a listed
    // cell and image (pieces of at most a block), its targets a copy of
    // every sample that lists it.
    let mut wanted: Vec<(u32, u32)> = walks
        .iter()
        .enumerate()
        .flat_map(|(i, (_, near))| near.iter().map(move |&e| (e, i as u32)))
        .collect();
    wanted.sort_unstable();
    let copy_of: Vec<u32> = wanted.iter().map(|&(_, i)| i).collect();
    let (mut group_begin, mut group_end, mut group_cell, mut list) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in wanted.chunk_by(|a, b| a.0 == b.0) {
        let first = group_end.last().copied().unwrap_or(0);
        for k in (0..run.len()).step_by(P2P_BLOCK as usize) {
            group_begin.push(first + k as i32);
            group_end.push(first + (k + P2P_BLOCK as usize).min(run.len()) as i32);
            group_cell.push(list.len() as i32);
        }
        list.push(run[0].0 as i32);
    }
    let copies = copy_of.len();
    let mut rows = vec![vec![0.0f64; no]; ns];
    let mut pairs = 0;
    if copies > 0 {
        // The samples on the device once, their copies gathered there.
        let copy_d = upload(s, &copy_of)?;
        let column = |v: Vec<f64>| -> Result<CudaSlice<f64>, Error> {
            gather(gpu, &copy_d, &upload(s, &v)?, copies)
        };
        let tpos = [
            column(samples.iter().map(|t| t[0]).collect())?,
            column(samples.iter().map(|t| t[1]).collect())?,
            column(samples.iter().map(|t| t[2]).collect())?,
        ];
        let tslots: Vec<CudaSlice<f64>> = cols[3..]
            .iter()
            .map(|col| column(col.clone()))
            .collect::<Result<_, _>>()?;
        let groups = DeviceGroups {
            n: group_begin.len(),
            begin: upload(s, &group_begin)?,
            end: upload(s, &group_end)?,
            cell: upload(s, &group_cell)?,
        };
        let cells = list.len() as i64;
        let (lb, le, l) = (
            upload(s, &(0..cells).collect::<Vec<_>>())?,
            upload(s, &(1..=cells).collect::<Vec<_>>())?,
            upload(s, &list)?,
        );
        let mut out: Vec<CudaSlice<f64>> = (0..no)
            .map(|_| alloc::<f64>(s, copies))
            .collect::<Result<_, _>>()?;
        pairs = p2p_lists(
            gpu,
            &Entry::p2p_list::<K, f64>(gpu)?,
            params,
            &Points::of(copies, &tpos, &tslots),
            &groups,
            [&lb, &le],
            &l,
            &shifts.shift_real,
            [&st.tree.begin, &st.tree.end],
            &Points::of(n, &pos64, &slots64),
            &mut out,
            false,
        )?
        .read(gpu)?;
        for (o, d) in out.iter().enumerate() {
            for (copy, v) in download(s, d, copies)?.into_iter().enumerate() {
                rows[copy_of[copy] as usize][o] += v;
            }
        }
    }
    let mut locals = vec![vec![vec![C::ZERO; ncoef(2)]; nq]; ns];
    if let Some(local) = far_local {
        let flat = download(s, &local, 2 * far_copy_of.len() * nq * nc)?;
        for (copy, &i) in far_copy_of.iter().enumerate() {
            for (k, l) in locals[i].iter_mut().enumerate() {
                let at = 2 * (copy * nq + k) * nc;
                for (j, c) in l.iter_mut().enumerate() {
                    *c += C::new(flat[at + 2 * j], flat[at + 2 * j + 1]);
                }
            }
        }
    }
    drop(mult);
    lap.say(&format!(
        "far and near cells ({} far copies of the samples; {} near cells and images, {copies} \
         copies of the samples, {pairs} pairs)",
        far_copy_of.len(),
        list.len()
    ))?;

    // The expansions' part: the cells' local expansions about each sample
    // (the device's units: a potential times u, a gradient u^2, a Hessian
    // u^3) and the far images' (the box's: over side, side^2, side^3).
    let hessians = terms.iter().any(|t| matches!(t.term, Term::Stretching(_)));
    rows.par_iter_mut().zip(&locals).enumerate().for_each_init(
        || (Scratch::new(2), Scratch::new(p)),
        |(s2, sp), (i, (row, local))| {
            let t = samples[i];
            let unit = [0, 1, 2].map(|a| (t[a] - c[a]) / side);
            let mut fv = FarValues::default();
            for k in 0..nq {
                let (phi0, g0) = l2p(&local[k], [0.0; 3], s2);
                let (phi1, g1) = l2p(&far_locals[k], unit, sp);
                fv.phi[k] = phi0 * u + phi1 / side;
                fv.grad[k] = [0, 1, 2].map(|a| g0[a] * u * u + g1[a] / (side * side));
                if hessians {
                    let h0 = l2p_hessian(&local[k], [0.0; 3], s2);
                    let h1 = l2p_hessian(&far_locals[k], unit, sp);
                    let (u3, cube) = (u * u * u, side * side * side);
                    fv.hess[k] =
                        [0, 1, 2].map(|a| [0, 1, 2].map(|b| h0[a][b] * u3 + h1[a][b] / cube));
                }
            }
            background::add_quadratic(b, &moments.total, unit, &mut fv);
            let mut far_out = vec![0.0; no];
            far_outputs(def, &terms, nq, &fv, |slot| cols[3 + slot][i], &mut far_out);
            row.iter_mut().zip(&far_out).for_each(|(x, y)| *x += y);
        },
    );
    lap.say("expansions")?;
    Ok(crate::reference::by_slot(&rows, no))
}

/// A tree of `sources` wrapped into `b`, leaves of at most [`LEAF`], for
/// [`periodic_sums`] where no run of the FMM has built one (the node far
/// fields' tolerance); their field slots in its order.
pub(super) fn source_tree<R: Real>(
    gpu: &Gpu,
    b: &PeriodicBox,
    tol: f64,
    sources: &DeviceParticles<R>,
) -> Result<(FmmTree<R>, Vec<CudaSlice<R>>), Error> {
    let spos = sources
        .positions()
        .ok_or_else(|| Error::BadOption("the sources have no positions of their own".into()))?;
    let wrapped = periodic::wrapped(gpu, b, refs3(spos))?;
    let built = TreeOrdered::build_in(
        gpu,
        refs3(&wrapped),
        sources.slots(),
        LEAF,
        Some(periodic::root_cube(b)),
    )?;
    FmmTree::of(gpu, &Ops::get::<R>(gpu, order_on_device(tol))?, built)
}

/// The top of the sources' tree the samples walk: its levels from the
/// root down to the deepest that keeps them to [`WALKED`] cells, indexed
/// level by level (the walk's index `w`: level `l` is
/// `level_start[l]..level_start[l + 1]`, the root 0); the cells of the
/// last level are the walk's leaves, taken whole.
struct Walk {
    n: usize,
    level_start: Vec<usize>,
    /// Each walked cell's index in the tree.
    tree_cell: Vec<i32>,
    /// Each walked cell's children (walk indices); none at the last level.
    children: Vec<Vec<usize>>,
    center: [Vec<f64>; 3],
    center_d: [CudaSlice<f64>; 3],
    radius: Vec<f64>,
    /// The cells' sources (tree order) and, in walk indices, their first
    /// child, next sibling and children (0 at the walk's last level), as
    /// the FMM's P2M and M2M read a tree.
    begin: CudaSlice<i32>,
    end: CudaSlice<i32>,
    more: CudaSlice<i32>,
    next: CudaSlice<i32>,
    n_children: CudaSlice<i32>,
}

impl Walk {
    /// The walk of `st`'s top levels: their cells' fields gathered on the
    /// device, what the host walks with copied back.
    fn of<R: Real>(gpu: &Gpu, st: &FmmTree<R>) -> Result<Self, Error> {
        let s = gpu.stream();
        let t = &st.tree;
        let depth = (0..t.levels())
            .take_while(|&l| l == 0 || t.level_start[l + 1] <= WALKED)
            .last()
            .unwrap_or(0);
        let n = t.level_start[depth + 1];
        let terminal = t.level_start[depth];
        let tree_cell = download(s, &t.by_level, n)?;
        let ids = upload(s, &tree_cell.iter().map(|&c| c as u32).collect::<Vec<_>>())?;
        let field = |x: &CudaSlice<i32>| download(s, &gather_i32(gpu, &ids, x, n)?, n);
        let (n_children, more, next) = (field(&t.n_children)?, field(&t.more)?, field(&t.next)?);
        let center_d = [0, 1, 2].map(|a| gather(gpu, &ids, &t.center[a], n));
        let [cx, cy, cz] = center_d;
        let center_d = [cx?, cy?, cz?];
        let center = [
            download(s, &center_d[0], n)?,
            download(s, &center_d[1], n)?,
            download(s, &center_d[2], n)?,
        ];
        let radius = download(s, &gather(gpu, &ids, &st.radius, n)?, n)?;
        let walk_of: HashMap<i32, usize> =
            tree_cell.iter().enumerate().map(|(w, &c)| (c, w)).collect();
        let children: Vec<Vec<usize>> = (0..n)
            .map(|w| {
                let mut out = Vec::new();
                if w < terminal {
                    let mut ch = more[w];
                    for _ in 0..n_children[w] {
                        let k = walk_of[&ch];
                        out.push(k);
                        ch = next[k];
                    }
                }
                out
            })
            .collect();
        let first = |w: usize| children[w].first().map_or(0, |&k| k as i32);
        let sibling = |w: usize| walk_of.get(&next[w]).map_or(-1, |&k| k as i32);
        Ok(Walk {
            n,
            level_start: t.level_start[..=depth + 1].to_vec(),
            begin: gather_i32(gpu, &ids, &t.begin, n)?,
            end: gather_i32(gpu, &ids, &t.end, n)?,
            more: upload(s, &(0..n).map(first).collect::<Vec<_>>())?,
            next: upload(s, &(0..n).map(sibling).collect::<Vec<_>>())?,
            n_children: upload(
                s,
                &children.iter().map(|c| c.len() as i32).collect::<Vec<_>>(),
            )?,
            tree_cell,
            children,
            center,
            center_d,
            radius,
        })
    }

    /// The walked cells' multipoles (`nq` a cell of the strengths `q`, `nc`
    /// coefficients each, of the positions `pos` times `u`): P2M at the
    /// cells without children in the walk, M2M level by level up from the
    /// level above its last; queued, not waited for.
    #[allow(clippy::too_many_arguments)]
    fn multipoles<R: Real>(
        &self,
        gpu: &Gpu,
        ops: &Ops,
        pos: &[CudaSlice<R>; 3],
        q: [&CudaSlice<R>; 3],
        nq: usize,
        nc: usize,
        u: f64,
    ) -> Result<CudaSlice<f64>, Error> {
        let s = gpu.stream();
        let (ni, nqi) = (self.n as i32, nq as i32);
        let [cx, cy, cz] = &self.center_d;
        let mut mult = zeros::<f64>(s, 2 * self.n * nq * nc)?;
        launch!(s, ops.p2m, per_cell(self.n), "fmm_p2m";
            &ni, &self.n_children, &self.begin, &self.end, cx, cy, cz,
            &pos[0], &pos[1], &pos[2], &nqi, q[0], q[1], q[2], &u, &mut mult)?;
        let iota = upload(s, &(0..self.n as i32).collect::<Vec<_>>())?;
        for l in (0..self.level_start.len() - 2).rev() {
            let (a, b) = (self.level_start[l], self.level_start[l + 1]);
            let (nli, cells) = ((b - a) as i32, iota.slice(a..b));
            launch!(s, ops.m2m, per_cell((b - a) * nq), "fmm_m2m";
                &nli, &cells, &self.more, &self.next, &self.n_children,
                cx, cy, cz, &nqi, &u, &mut mult)?;
        }
        Ok(mult)
    }
}
