//! The periodic sums at a tolerance's samples on the GPU: what
//! [`crate::methods::fmm::periodic_reference`] computes on the host, without
//! copying the sources back (at 10^7 sources that copy and the host's grid
//! took 0.79 s an evaluation on the H100's host, where the FMM took 0.2 s).
//!
//! - The sources, in f64 and wrapped into the box, in an octree of the box
//!   with leaves of at most [`LEAF`]; its cells' multipoles of order `p`
//!   by the FMM's own P2M and M2M (`ops.cu`, in f64).
//! - Each sample walks the tree on the host at each of the box's nearest
//!   images (the cells' centres, radii and multipoles copied back: 5,000
//!   cells at 10^7): a cell at least `SEPARATION` radii away by its
//!   multipole, evaluated to degree 2 about the sample (M2P), every
//!   smoothing kept nearer, where a leaf is listed.
//! - The listed leaves by the kernel on the device: the P2P lists in f64,
//!   each sample's leaves in pieces of [`PIECE`], a piece one copy of the
//!   sample in a group of its own (a few thousand groups keep the device
//!   busy; one group a sample held a block's work on one thread).
//! - The images past the nearest by the images' expansions from the root's
//!   multipole, and the boundary's terms, as on the host.
//!
//! The expansions are good to `3^-(p+1)` ([`order_for`]: a thirtieth of
//! the tolerance), as the host's.

use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use super::periodic::{self, Images};
use super::{p2p_lists, unit_scale, upward, FmmTree, Ops, Points};
use crate::cuda::device::{alloc, download, refs3, upload};
use crate::cuda::launch::Entry;
use crate::cuda::primitives::widen;
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::{wrap1, PeriodicBox};
use crate::error::Error;
use crate::far::laplace::harmonics::{ncoef, C};
use crate::far::laplace::operators::{l2p, l2p_hessian, Scratch};
use crate::far::terms::{far_outputs, FarValues};
use crate::kernel::Kernel;
use crate::methods::fmm::periodic_reference::{laplace_terms, m2p, order_for, SEPARATION};
use crate::real::Real;
use crate::tree::traversal::entry;
use crate::tree::{DeviceGroups, TreeOrdered};
use fmm_codegen::kernel::Term;

/// The most sources a leaf of the reference's tree holds: 5,000 cells at
/// 10^7 sources, some 3.5 x 10^5 sources by the kernel a sample.
const LEAF: usize = 2048;

/// Leaves a piece of a sample's list holds (one group of the P2P lists).
const PIECE: usize = 4;

/// The sums of kernel `K` in `b` at the samples `cols` (their positions,
/// then their field slots, in f64) from `sources` on the device, good to a
/// thirtieth of `tol`: one vector per output slot, one value per sample.
pub(super) fn periodic_sums<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    b: &PeriodicBox,
    tol: f64,
    cols: &[Vec<f64>],
    sources: &DeviceParticles<R>,
) -> Result<Vec<Vec<f64>>, Error> {
    let def = K::def();
    let (strength, terms) = laplace_terms::<K>()?;
    let (no, nq) = (def.n_outputs(), strength.len());
    let ns = cols[0].len();
    let p = order_for(tol);
    let nc = ncoef(p);
    let s = gpu.stream();
    let n = sources.len();
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
    let built = TreeOrdered::build_in(
        gpu,
        refs3(&wrapped),
        &slots64,
        LEAF,
        Some(periodic::root_cube(b)),
    )?;
    drop((wrapped, slots64));
    let (st, sslots) = FmmTree::of(gpu, &ops, built)?;
    let q = |k: usize| &sslots[strength[k.min(nq - 1)]];
    let moments = periodic::moments::<f64>(gpu, b, &st.pos, [q(0), q(1), q(2)], nq)?;
    moments.check(b)?;
    let u = unit_scale(st.tree.bounds.half);
    let mult = upward(gpu, &ops, &st, [q(0), q(1), q(2)], nq, nc, u)?;

    // The tree and its multipoles on the host.
    let cells = st.tree.n_cells;
    let flat = download(s, &mult, 2 * cells * nq * nc)?;
    let mult: Vec<C> = flat.chunks(2).map(|w| C::new(w[0], w[1])).collect();
    let center: Vec<Vec<f64>> = (0..3)
        .map(|a| download(s, &st.tree.center[a], cells))
        .collect::<Result<_, _>>()?;
    let radius = download(s, &st.radius, cells)?;
    let n_children = download(s, &st.tree.n_children, cells)?;
    let more = download(s, &st.tree.more, cells)?;
    let next = download(s, &st.tree.next, cells)?;

    // The images past the nearest, a local expansion about the box's
    // centre (box of side 1) per strength component.
    let (side, c) = (b.side, b.center());
    let levels = b.levels_for(1e-12);
    let far_locals: Vec<Vec<C>> = (0..nq)
        .map(|k| {
            let root = &mult[k * nc..(k + 1) * nc];
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
    let walks: Vec<(Vec<Vec<C>>, Vec<u32>)> = samples
        .par_iter()
        .map_init(
            || vec![C::ZERO; ncoef(p + 2)],
            |h, t| {
                let mut local = vec![vec![C::ZERO; ncoef(2)]; nq];
                let mut near = Vec::new();
                let mut stack = Vec::new();
                for (image, v) in near_images.iter().enumerate() {
                    stack.push(0usize);
                    while let Some(cell) = stack.pop() {
                        let d = [0, 1, 2].map(|a| t[a] - (center[a][cell] + v[a] * side));
                        let dist = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                        if dist > 0.0 && dist >= SEPARATION * radius[cell] {
                            let du = d.map(|x| x * u);
                            for (k, l) in local.iter_mut().enumerate() {
                                let m = &mult[(cell * nq + k) * nc..(cell * nq + k + 1) * nc];
                                m2p(m, du, p, h, l);
                            }
                        } else if n_children[cell] == 0 {
                            near.push(entry(cell, image));
                        } else {
                            let mut ch = more[cell] as usize;
                            for _ in 0..n_children[cell] {
                                stack.push(ch);
                                ch = next[ch] as usize;
                            }
                        }
                    }
                }
                (local, near)
            },
        )
        .collect();

    // The listed leaves by the kernel, on the device: a copy of the sample
    // a piece of its list.
    let mut copy_of = Vec::new();
    let (mut list, mut list_begin, mut list_end) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (_, near)) in walks.iter().enumerate() {
        for piece in near.chunks(PIECE) {
            list_begin.push(list.len() as i64);
            list.extend(piece.iter().map(|&e| e as i32));
            list_end.push(list.len() as i64);
            copy_of.push(i);
        }
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
        let shifts = Images::<f64>::of(gpu, Some(b))?;
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

    // The expansions' part: the cells' local expansions about each sample
    // (the device's units: a potential times u, a gradient u^2, a Hessian
    // u^3) and the far images' (the box's: over side, side^2, side^3).
    let hessians = terms.iter().any(|t| matches!(t.term, Term::Stretching(_)));
    rows.par_iter_mut().zip(&walks).enumerate().for_each_init(
        || (Scratch::new(2), Scratch::new(p)),
        |(s2, sp), (i, (row, (local, _)))| {
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
            let mut far_out = vec![0.0; no];
            far_outputs(def, &terms, nq, &fv, |slot| cols[3 + slot][i], &mut far_out);
            row.iter_mut().zip(&far_out).for_each(|(x, y)| *x += y);
        },
    );
    Ok(crate::reference::by_slot(&rows, no))
}
