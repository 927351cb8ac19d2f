//! The periodic sums at a tolerance's samples on the GPU: what
//! [`crate::methods::fmm::periodic_reference`] computes on the host, without
//! copying the sources back (at 10^7 sources that copy and the host's grid
//! took 0.79 s an evaluation on the H100's host, where the FMM took 0.2 s).
//!
//! - The sources, in f64 and wrapped into the box, in an octree of the box
//!   with leaves of at most [`LEAF`]; its cells' multipoles of order `p`
//!   ([`order_on_device`]) by the FMM's own P2M and M2M (`ops.cu`, in f64).
//! - Each sample walks the tree's top levels (at most [`WALKED`] cells, their
//!   centres and radii copied back) on the host at each of the box's
//!   nearest images: a cell at least [`SEPARATION`] radii away is listed
//!   for its M2P, a cell of the walk's last level nearer for the kernel.
//! - The M2P on the device: the M2L's kernel (`fmm_m2l`) with the tasks of
//!   a local expansion of degree 2 only, about a copy of the sample a piece
//!   of [`FAR_PIECE`] cells of its list.
//! - The near cells by the kernel on the device: the P2P lists in f64, a
//!   copy of the sample a piece of about [`PIECE`] sources.
//! - The images past the nearest by the images' expansions from the root's
//!   multipole, and the boundary's terms, as on the host.
//!
//! At 10^7 sources (H100, f32, `FMM_TRACE=1 fmm_bench --periodic 1 --tol
//! 1e-4`, 2026-11-26) the first form, which walked every cell and summed
//! the M2P on the host, took 0.15 s: 0.07 s copying 37,000 cells'
//! multipoles back and 0.05 s of M2P on the host. Walking the top 4,700
//! cells and the M2P on the device took the walk to 2 ms and the M2P to 2
//! ms; what is left is the tree (10 ms) and the multipoles.

use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use super::periodic::{self, Images};
use super::{p2p_lists, unit_scale, upward, FmmTree, Ops, Points};
use crate::cuda::device::{alloc, download, refs3, upload};
use crate::cuda::launch::Entry;
use crate::cuda::primitives::{gather, widen};
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
use fmm_codegen::kernel::Term;

/// The most sources a leaf of the reference's tree holds (P2M's blocks
/// take a leaf each: leaves of 512 and 2048 took the same time).
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

/// Sources a piece of a sample's near list holds, about (one group of the
/// P2P lists).
const PIECE: usize = 4096;

/// The order of the reference's multipoles for a tolerance `tol`: their
/// error at [`SEPARATION`] radii a thirtieth of it (at least order 4), and
/// two orders more, since the M2L's kernel sums the degrees `n <= p - k`
/// into the local coefficient of degree `k` (the gradient `k = 1`, the
/// Hessian `k = 2`).
fn order_on_device(tol: f64) -> usize {
    let p = (-(tol / 30.0).ln() / SEPARATION.ln()).ceil() - 1.0;
    (p.max(4.0) as usize).min(ORDER - 2) + 2
}

/// The sums of kernel `K` in `b` from `sources` on the device, good to a
/// thirtieth of `tol`, at the samples `at` gives (their positions, then
/// their field slots, in f64) once the reference's tree of the sources is
/// built (`at` takes its order: the input index of each of its places, a
/// Morton order of the wrapped sources): one vector per output slot, one
/// value per sample.
pub(super) fn periodic_sums<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    b: &PeriodicBox,
    tol: f64,
    sources: &DeviceParticles<R>,
    at: impl FnOnce(&CudaSlice<u32>) -> Result<Vec<Vec<f64>>, Error>,
) -> Result<Vec<Vec<f64>>, Error> {
    let def = K::def();
    let (strength, terms) = laplace_terms::<K>()?;
    let (no, nq) = (def.n_outputs(), strength.len());
    let p = order_on_device(tol);
    let nc = ncoef(p);
    let s = gpu.stream();
    let n = sources.len();
    let mut lap = Laps::new(gpu, "periodic reference");
    let spos = sources
        .positions()
        .ok_or_else(|| Error::BadOption("the sources have no positions of their own".into()))?;

    // The sources in f64, wrapped, in the reference's tree; its multipoles.
    let wide = |x: &CudaSlice<R>| widen(gpu, &x.slice(0..n), n);
    let wrapped = {
        let pos64 = [wide(&spos[0])?, wide(&spos[1])?, wide(&spos[2])?];
        periodic::wrapped::<f64>(gpu, b, refs3(&pos64))?
    };
    let slots64: Vec<CudaSlice<f64>> =
        sources.slots().iter().map(wide).collect::<Result<_, _>>()?;
    let ops = Ops::get::<f64>(gpu, p)?;
    lap.say("widened and wrapped")?;
    let built = TreeOrdered::build_in(
        gpu,
        refs3(&wrapped),
        &slots64,
        LEAF,
        Some(periodic::root_cube(b)),
    )?;
    drop((wrapped, slots64));
    lap.say("sorted, cells, gathered")?;
    let (st, sslots) = FmmTree::of(gpu, &ops, built)?;
    let q = |k: usize| &sslots[strength[k.min(nq - 1)]];
    let moments = periodic::moments::<f64>(gpu, b, &st.pos, [q(0), q(1), q(2)], nq)?;
    moments.check(b)?;
    let u = unit_scale(st.tree.bounds.half);
    lap.say("tree")?;
    let cols = at(&st.tree.order)?;
    let ns = cols[0].len();
    lap.say("samples")?;
    let mult = upward(
        gpu,
        &ops,
        (&st.tree, &st.pos),
        [q(0), q(1), q(2)],
        nq,
        nc,
        u,
    )?;
    lap.say("multipoles")?;

    // The walk's cells: the levels down to the deepest whose cells, with
    // those above, are at most WALKED; its cells there its leaves.
    let cells = st.tree.n_cells;
    let depth = (0..st.tree.levels())
        .take_while(|&l| l == 0 || st.tree.level_start[l + 1] <= WALKED)
        .last()
        .unwrap_or(0);
    let walked = st.tree.level_start[depth + 1];
    let mut by_level = download(s, &st.tree.by_level, cells)?;
    by_level.truncate(walked);
    let mut walk_of = vec![u32::MAX; cells];
    for (w, &c) in by_level.iter().enumerate() {
        walk_of[c as usize] = w as u32;
    }
    let terminal = st.tree.level_start[depth];
    let ids: Vec<u32> = by_level.iter().map(|&c| c as u32).collect();
    let ids_d = upload(s, &ids)?;
    let row = 2 * nq * nc;
    if cells.saturating_mul(row) > u32::MAX as usize {
        return Err(Error::BadOption(format!(
            "the GPU's periodic reference indexes its {cells} cells' multipoles ({row} numbers \
             each) in 32 bits: ask for a larger tolerance, or run the FMM at fixed settings"
        )));
    }
    let rows: Vec<u32> = ids
        .iter()
        .flat_map(|&c| (0..row as u32).map(move |i| c * row as u32 + i))
        .collect();
    let compact = gather(gpu, &upload(s, &rows)?, &mult, rows.len())?;
    drop(mult);
    let root: Vec<C> = download(s, &compact, row)?
        .chunks(2)
        .map(|w| C::new(w[0], w[1]))
        .collect();
    let centre_d: Vec<CudaSlice<f64>> = (0..3)
        .map(|a| gather(gpu, &ids_d, &st.tree.center[a], walked))
        .collect::<Result<_, _>>()?;
    let center: Vec<Vec<f64>> = centre_d
        .iter()
        .map(|x| download(s, x, walked))
        .collect::<Result<_, _>>()?;
    let radius = download(s, &gather(gpu, &ids_d, &st.radius, walked)?, walked)?;
    let n_children_all = download(s, &st.tree.n_children, cells)?;
    let more_all = download(s, &st.tree.more, cells)?;
    let next_all = download(s, &st.tree.next, cells)?;
    // Children by walk index; none at the walk's last level.
    let children: Vec<Vec<usize>> = by_level
        .iter()
        .enumerate()
        .map(|(w, &c)| {
            let c = c as usize;
            let mut out = Vec::new();
            if w < terminal {
                let mut ch = more_all[c] as usize;
                for _ in 0..n_children_all[c] {
                    out.push(walk_of[ch] as usize);
                    ch = next_all[ch] as usize;
                }
            }
            out
        })
        .collect();

    lap.say("copied back")?;

    // The images past the nearest, a local expansion about the box's
    // centre (box of side 1) per strength component.
    let (side, c) = (b.side, b.center());
    let levels = b.levels_for(1e-12);
    let far_locals: Vec<Vec<C>> = (0..nq)
        .map(|k| {
            let root = &root[k * nc..(k + 1) * nc];
            periodic::far_local(b, &moments, levels, k, root, st.tree.bounds.center, u)
        })
        .collect();

    // Each sample's walk: the cells far enough by M2P (degree 2 about the
    // sample, the device's units), the leaves nearer listed with their
    // image.
    let near_images = b.near_images();
    let samples: Vec<[f64; 3]> = (0..ns)
        .map(|i| {
            [0, 1, 2].map(|a| match b.axes[a] {
                true => wrap1(cols[a][i], b.origin[a], side),
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
                    let d = [0, 1, 2].map(|a| t[a] - (center[a][cell] + v[a] * side));
                    let dist = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                    if dist > 0.0 && dist >= SEPARATION * radius[cell] {
                        far.push(entry(cell, image));
                    } else if children[cell].is_empty() {
                        near.push(entry(by_level[cell] as usize, image));
                    } else {
                        stack.extend(&children[cell]);
                    }
                }
            }
            (far, near)
        })
        .collect();
    lap.say("walks")?;

    // The far cells' M2P on the device: a copy of the sample a piece of
    // its far list, its local expansion of degree 2 by the M2L's kernel.
    let shifts = Images::<f64>::of(gpu, Some(b))?;
    let mut locals = vec![vec![vec![C::ZERO; ncoef(2)]; nq]; ns];
    {
        let mut copy_of = Vec::new();
        let (mut list, mut begin, mut end) = (Vec::new(), Vec::new(), Vec::new());
        for (i, (far, _)) in walks.iter().enumerate() {
            for piece in far.chunks(FAR_PIECE) {
                begin.push(list.len() as i64);
                list.extend(piece.iter().map(|&e| e as i32));
                end.push(list.len() as i64);
                copy_of.push(i);
            }
        }
        let copies = copy_of.len();
        if copies > 0 {
            let at: Vec<CudaSlice<f64>> = (0..3)
                .map(|a| {
                    upload(
                        s,
                        &copy_of.iter().map(|&i| samples[i][a]).collect::<Vec<_>>(),
                    )
                })
                .collect::<Result<_, _>>()?;
            let local = super::m2l::m2l_to_points(
                gpu,
                &ops,
                ([&at[0], &at[1], &at[2]], copies),
                (&upload(s, &begin)?, &upload(s, &end)?, &upload(s, &list)?),
                ([&centre_d[0], &centre_d[1], &centre_d[2]], walked),
                &shifts.shift,
                &compact,
                nq,
                p,
                2,
                u,
            )?;
            let flat = download(s, &local, 2 * copies * nq * nc)?;
            for (copy, &i) in copy_of.iter().enumerate() {
                for (k, l) in locals[i].iter_mut().enumerate() {
                    let at = 2 * (copy * nq + k) * nc;
                    for (j, c) in l.iter_mut().enumerate() {
                        *c += C::new(flat[at + 2 * j], flat[at + 2 * j + 1]);
                    }
                }
            }
        }
    }
    lap.say("far cells")?;

    // The listed leaves by the kernel, on the device: a copy of the sample
    // a piece of its list.
    let mut copy_of = Vec::new();
    let (mut list, mut list_begin, mut list_end) = (Vec::new(), Vec::new(), Vec::new());
    let tb = download(s, &st.tree.begin, cells)?;
    let te = download(s, &st.tree.end, cells)?;
    let size_of = |e: u32| {
        let (c, _) = crate::tree::traversal::split(e);
        (te[c] - tb[c]) as usize
    };
    for (i, (_, near)) in walks.iter().enumerate() {
        let mut held = PIECE;
        for &e in near {
            if held >= PIECE {
                if !list_begin.is_empty() {
                    list_end.push(list.len() as i64);
                }
                list_begin.push(list.len() as i64);
                copy_of.push(i);
                held = 0;
            }
            list.push(e as i32);
            held += size_of(e);
        }
    }
    if !list_begin.is_empty() {
        list_end.push(list.len() as i64);
    }
    let copies = copy_of.len();
    let mut rows = vec![vec![0.0f64; no]; ns];
    if copies > 0 {
        let column = |v: Vec<f64>| upload(s, &v);
        let tpos = [0, 1, 2].map(|a| copy_of.iter().map(|&i| samples[i][a]).collect::<Vec<_>>());
        let tpos = [
            column(tpos[0].clone())?,
            column(tpos[1].clone())?,
            column(tpos[2].clone())?,
        ];
        let tslots: Vec<CudaSlice<f64>> = cols[3..]
            .iter()
            .map(|col| column(copy_of.iter().map(|&i| col[i]).collect()))
            .collect::<Result<_, _>>()?;
        let ids: Vec<i32> = (0..copies as i32).collect();
        let groups = DeviceGroups {
            n: copies,
            begin: upload(s, &ids)?,
            end: upload(s, &(1..=copies as i32).collect::<Vec<_>>())?,
            cell: upload(s, &ids)?,
        };
        let (lb, le, l) = (
            upload(s, &list_begin)?,
            upload(s, &list_end)?,
            upload(s, &list)?,
        );
        let mut out: Vec<CudaSlice<f64>> = (0..no)
            .map(|_| alloc::<f64>(s, copies))
            .collect::<Result<_, _>>()?;
        p2p_lists(
            gpu,
            &Entry::p2p_list::<K, f64>(gpu)?,
            params,
            &Points::of(copies, &tpos, &tslots),
            &groups,
            [&lb, &le],
            &l,
            &shifts.shift_real,
            [&st.tree.begin, &st.tree.end],
            &Points::of(n, &st.pos, &sslots),
            &mut out,
            false,
        )?;
        for (o, d) in out.iter().enumerate() {
            for (copy, v) in download(s, d, copies)?.into_iter().enumerate() {
                rows[copy_of[copy]][o] += v;
            }
        }
    }

    lap.say("listed leaves")?;

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
    let out = crate::reference::by_slot(&rows, no);
    Ok(out)
}

/// The reference's stages timed on stderr where `FMM_TRACE` is set (the
/// stream waited for at each): what its cost at 10^7 is made of.
pub(super) struct Laps<'a> {
    gpu: &'a Gpu,
    what: &'static str,
    last: Option<std::time::Instant>,
}

impl<'a> Laps<'a> {
    /// Laps of `what` (named in each line).
    pub(super) fn new(gpu: &'a Gpu, what: &'static str) -> Self {
        let last = crate::stats::trace().then(std::time::Instant::now);
        Laps { gpu, what, last }
    }

    /// Says the time since the last stage, `what` its name.
    pub(super) fn say(&mut self, what: &str) -> Result<(), Error> {
        let Some(last) = self.last else {
            return Ok(());
        };
        self.gpu
            .stream()
            .synchronize()
            .map_err(crate::cuda::device::cuda_err(what))?;
        let now = std::time::Instant::now();
        eprintln!(
            "[fmm] {}: {what} {:.4} s",
            self.what,
            (now - last).as_secs_f64()
        );
        self.last = Some(now);
        Ok(())
    }
}
