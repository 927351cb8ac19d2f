//! The FMM on the CPU with a node far field (pseudo-particles or Chebyshev
//! nodes, [`crate::far`]): the same trees, dual tree traversal and near
//! field as the Laplace FMM ([`super::cpu`]), with node strengths for
//! multipoles and node values for locals, and M2L by the kernel itself.
//!
//! The MAC takes each cell's size as the sphere holding its nodes (radius
//! `sqrt 3` half sides, the cube's circumscribing sphere) rather than its
//! particles: the interpolation spans the whole cell.

use rayon::prelude::*;

use super::cpu::{near_field, scatter};
use super::Settings;
use crate::error::Error;
use crate::far::compressed;
use crate::far::nodes::{self, Basis, Local};
use crate::far::Representation;
use crate::kernel::Kernel;
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;
use crate::stats::{Clock, Stage};
use crate::tree::morton::Bounds;
use crate::tree::traversal::{traverse_levels, Lists, Sphere};
use crate::tree::{positions_f64, sorted, Octree, SoA};

/// The cells' node spheres: centre and the radius that holds the nodes.
fn node_spheres(tree: &Octree, b: &dyn Basis) -> Vec<Sphere> {
    tree.cells
        .iter()
        .map(|c| Sphere {
            center: c.center,
            radius: b.radius() * c.half,
        })
        .collect()
}

/// The FMM of kernel `K` with the node far field `rep` at `settings` (`p`
/// the far field's order, `theta` the MAC), leaves of at most `ncrit`, M2L
/// by compressed operators where they apply if `compress` (singular values
/// kept down to `rank_tolerance`, by default that of the order).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<K: Kernel, R: Real>(
    params: &[R],
    rep: &Representation,
    settings: Settings,
    ncrit: usize,
    compress: bool,
    rank_tolerance: Option<f64>,
    targets: &Particles<R>,
    sources: &Particles<R>,
    clock: &mut Clock<'_>,
) -> Result<Outputs<R>, Error> {
    let def = K::def();
    let no = def.n_outputs();
    let basis = nodes::basis(rep.far_field, settings.p);
    let b: &dyn Basis = basis.as_ref();
    let k = b.len();

    // Trees.
    // For the compressed M2L both trees in one root cube, so that their
    // cells lie on one lattice (its operators are per offset); for M2L by
    // the kernel each tree in its own cube, as on the GPU (whose node FMM
    // is this one's to rounding).
    let spos = positions_f64(sources);
    let spos = [&spos[0][..], &spos[1], &spos[2]];
    let tpos = positions_f64(targets);
    let tpos = [&tpos[0][..], &tpos[1], &tpos[2]];
    let (sroot, troot) = (Bounds::of(spos), Bounds::of(tpos));
    let (sroot, troot) = if compress {
        let root = sroot.union(&troot);
        (root, root)
    } else {
        (sroot, troot)
    };
    let stree = Octree::build_in(spos, ncrit, sroot);
    let src = sorted(sources, &stree.order);
    let ttree = Octree::build_in(tpos, ncrit, troot);
    let tgt = sorted(targets, &ttree.order);
    clock.stats().source_cells = stree.cells.len();
    clock.stats().target_cells = ttree.cells.len();
    clock.lap(Stage::Tree)?;

    // Upward pass: node strengths.
    let up = nodes::upward(b, &stree, &src, rep);
    clock.lap(Stage::Upward)?;

    let lists = traverse_levels(
        &ttree,
        &node_spheres(&ttree, b),
        &stree,
        &node_spheres(&stree, b),
        settings.theta,
    );
    clock.stats().m2l += lists.m2l_count() as u64;
    clock.lap(Stage::Traversal)?;

    // M2L: by compressed operators where they apply, else per target cell
    // the kernel from its list's nodes to its own.
    let channels = rep.channels(no);
    let block = k * channels;
    let mut local = Local::zeros(k, channels, ttree.cells.len());
    let params64: Vec<f64> = params.iter().map(|x| x.to_f64()).collect();
    let done = if compress {
        compressed::m2l::<K>(
            b,
            rank_tolerance.unwrap_or_else(|| compressed::rank_tolerance(settings.p)),
            &params64,
            rep,
            no,
            &ttree,
            &stree,
            &up,
            &lists,
            &mut local,
        )
    } else {
        None
    };
    if let Some(d) = &done {
        clock.stats().m2l_compressed += d.pairs;
        clock.stats().m2l_operators += d.operators;
        clock.stats().m2l_operators_reused += d.reused;
    }
    // The pairs left to the kernel (all of them without compression), with
    // the node strengths as the kernel's sources, built for the source
    // cells of those pairs only (`at[c]`: where cell `c`'s are).
    let rest = done.as_ref().map_or(&lists, |d| &d.rest);
    if rest.m2l_count() > 0 {
        let mut at = vec![u32::MAX; stree.cells.len()];
        let mut used = Vec::new();
        for &s in rest.m2l.iter().flatten() {
            if at[s as usize] == u32::MAX {
                at[s as usize] = used.len() as u32;
                used.push(s as usize);
            }
        }
        let proxies: SoA<R> = nodes::node_sources(b, &stree, &up, &rep.strength, &used);
        m2l_by_kernel::<K, R>(b, params, rep, no, &ttree, &proxies, &at, rest, &mut local);
    }
    clock.lap(Stage::M2l)?;
    // Operators built for the first time: setup, not M2L (the tolerance's
    // cost model and budget weigh what every evaluation pays).
    if let Some(d) = done.as_ref().filter(|d| d.build_seconds > 0.0) {
        clock
            .stats()
            .rebook(Stage::M2l, Stage::Setup, d.build_seconds);
    }

    // L2L down, then L2P at every target leaf.
    nodes::downward(b, &ttree, &mut local);
    let leaves: Vec<usize> = ttree.leaves().map(|(c, _)| c).collect();
    let nt = def.n_targets();
    let far: Vec<Vec<f64>> = leaves
        .par_iter()
        .map_init(
            || vec![0.0; k],
            |w, &a| {
                let cell = &ttree.cells[a];
                let l = &local.v[a * block..(a + 1) * block];
                let mut out = vec![0.0; cell.len() * no];
                let mut t = vec![0.0; nt];
                for (i, o) in (cell.begin..cell.end).zip(out.chunks_mut(no)) {
                    for (ts, slot) in t.iter_mut().zip(&tgt.slots) {
                        *ts = slot[i].to_f64();
                    }
                    let x = [0, 1, 2].map(|ax| tgt.pos[ax][i].to_f64());
                    nodes::l2p(b, cell.center, cell.half, l, x, &t, no, w, o);
                }
                out
            },
        )
        .collect();
    clock.lap(Stage::Downward)?;

    let near = near_field::<K, R>(
        params,
        &ttree,
        &tgt,
        &stree,
        &src,
        &lists,
        &[[0.0; 3]],
        &leaves,
    );
    clock.lap(Stage::P2p)?;
    Ok(scatter::<K, R>(
        targets.len(),
        &ttree,
        &leaves,
        &far,
        &near,
        clock,
    ))
}

/// M2L by the kernel: per target cell, from its list's node sources
/// `proxies` (source cell `s`'s at `at[s]`) to its own nodes.
#[allow(clippy::too_many_arguments)]
fn m2l_by_kernel<K: Kernel, R: Real>(
    b: &dyn Basis,
    params: &[R],
    rep: &Representation,
    no: usize,
    ttree: &Octree,
    proxies: &SoA<R>,
    at: &[u32],
    lists: &Lists,
    local: &mut Local,
) {
    let k = b.len();
    local
        .v
        .par_chunks_mut(k * local.channels)
        .enumerate()
        .for_each_init(
            || SoA::<R>::with_capacity(proxies.slots.len(), 64 * k),
            |list, (a, l)| {
                if lists.m2l[a].is_empty() {
                    return;
                }
                list.clear();
                for &s in &lists.m2l[a] {
                    let s = at[s as usize] as usize;
                    list.push_from(proxies, s * k..(s + 1) * k);
                }
                let cell = &ttree.cells[a];
                nodes::m2l::<K, R>(
                    b,
                    params,
                    cell.center,
                    cell.half,
                    &list.slices(),
                    no,
                    rep.target_slots,
                    l,
                );
            },
        );
}
