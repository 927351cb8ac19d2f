//! The FMM on the CPU with a node far field (pseudo-particles or Chebyshev
//! nodes, [`crate::far`]), a [`FarPasses`] of the FMM's stages
//! ([`skeleton`]): the same dual tree traversal and near field as the
//! Laplace FMM ([`super::cpu`]), with node strengths for multipoles and
//! node values for locals, and M2L by compressed operators or the kernel
//! itself.
//!
//! The MAC takes each cell's size as the sphere holding its nodes (radius
//! `sqrt 3` half sides, the cube's circumscribing sphere) rather than its
//! particles: the interpolation spans the whole cell.
//!
//! In a periodic box as the Laplace FMM does it: the points wrapped, the
//! box both trees' root cube, the traversal against the 125 nearest images
//! (the M2L's and the P2P's entries each moving its source cell by its
//! image's lattice vector: for the compressed M2L only another offset),
//! and the farther images by Laplace expansions from the box's multipole
//! at every target ([`FarImages`]), so the kernel must declare a Laplace
//! far field.

use std::marker::PhantomData;

use rayon::prelude::*;

use super::skeleton::{self, FarPasses, Frame};
use super::{NodeM2l, Plan, Settings};
use crate::domain::PeriodicBox;
use crate::error::Error;
use crate::far::compressed;
use crate::far::laplace::far_images::FarImages;
use crate::far::laplace::operators::Scratch;
use crate::far::nodes::{self, Basis, Local};
use crate::far::Representation;
use crate::kernel::Kernel;
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;
use crate::stats::{Clock, Stats};
use crate::tree::morton::{Bounds, Span};
use crate::tree::traversal::{split, Lists, Sphere};
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

/// The FMM of kernel `K` with the plan's node far field at its settings
/// (`p` the far field's order, `theta` the MAC), leaves of the options'
/// size for it, M2L by compressed operators where they apply if the
/// options ask (singular values kept down to their rank tolerance, by
/// default that of the order).
pub(crate) fn run<K: Kernel, R: Real>(
    plan: &Plan<'_, R>,
    targets: &Particles<R>,
    sources: &Particles<R>,
    clock: &mut Clock<'_>,
) -> Result<Outputs<R>, Error> {
    let rep = plan.nodes();
    let far = NodeField::<K, R> {
        plan,
        rep,
        basis: nodes::basis(rep.far_field, plan.settings.p),
        compress: plan.opts.node_m2l == NodeM2l::Compressed,
        _k: PhantomData,
    };
    skeleton::run::<K, R, _>(plan, far, targets, sources, clock)
}

/// A node far field's passes of the FMM on the CPU ([`skeleton`]): the
/// trees in the particles' own coordinates, node strengths for
/// multipoles and node values for locals (`basis`), M2L by compressed
/// operators (`compress`) or by the kernel.
struct NodeField<'a, K, R> {
    plan: &'a Plan<'a, R>,
    rep: &'a Representation,
    basis: Box<dyn Basis>,
    compress: bool,
    _k: PhantomData<K>,
}

/// What a node far field keeps of the trees.
struct NodeOwn {
    /// The cells' node spheres.
    ssph: Vec<Sphere>,
    tsph: Vec<Sphere>,
    /// A periodic box's far images (Laplace expansions of the box).
    far_images: Option<FarImages>,
}

impl<K: Kernel, R: Real> FarPasses<R> for NodeField<'_, K, R> {
    type Own = NodeOwn;
    type Multipoles = nodes::Upward;
    type Locals = Local;

    /// For the compressed M2L both trees in one root cube, so that their
    /// cells lie on one lattice (its operators are per offset); for M2L by
    /// the kernel each tree in its own cube, as on the GPU (whose node FMM
    /// is this one's to rounding). A periodic box: the points wrapped into
    /// it, the box both trees' root cube; the far images by expansions,
    /// the cell neutral (or with a background) before any more work.
    fn trees(
        &self,
        targets: &Particles<R>,
        sources: &Particles<R>,
    ) -> Result<Frame<R, NodeOwn>, Error> {
        let (plan, b) = (self.plan, self.basis.as_ref());
        let ncrit = plan.opts.leaf_size(self.rep.far_field);
        let pbox = plan.domain.periodic();
        let (mut spos, mut tpos) = (positions_f64(sources), positions_f64(targets));
        if let Some(b) = pbox {
            b.wrap(&mut spos)?;
            b.wrap(&mut tpos)?;
        }
        let far_images = match pbox {
            Some(b) => Some(FarImages::new::<K, R>(
                b,
                sources,
                image_order(plan.settings),
                "the FMM with node far fields",
            )?),
            None => None,
        };
        let spos = [&spos[0][..], &spos[1], &spos[2]];
        let tpos = [&tpos[0][..], &tpos[1], &tpos[2]];
        let (sroot, troot) = match pbox {
            Some(b) => {
                let root = Bounds {
                    center: b.center(),
                    half: 0.5 * b.side,
                };
                (root, root)
            }
            None if self.compress || self.plan.cube.is_some() => {
                let root = match self.plan.cube {
                    Some(c) => c.holding(&Span::of(spos).join(&Span::of(tpos))),
                    None => Bounds::of(spos).union(&Bounds::of(tpos)),
                };
                (root, root)
            }
            None => (Bounds::of(spos), Bounds::of(tpos)),
        };
        let stree = Octree::build_in(spos, ncrit, sroot);
        let mut src = sorted(sources, &stree.order);
        // One root cube: the target tree split as far as the sources
        // around its targets (`Octree::build_guided`).
        let ttree = if sroot == troot {
            Octree::build_guided(tpos, ncrit, troot, &stree.keys)
        } else {
            Octree::build_in(tpos, ncrit, troot)
        };
        let mut tgt = sorted(targets, &ttree.order);
        if pbox.is_some() {
            // The near field sums the wrapped points' images.
            src.set_positions(spos, &stree.order);
            tgt.set_positions(tpos, &ttree.order);
        }
        let (ssph, tsph) = (node_spheres(&stree, b), node_spheres(&ttree, b));
        Ok(Frame {
            stree,
            ttree,
            src,
            tgt,
            images: PeriodicBox::near_shifts(pbox),
            unit: 1.0,
            own: NodeOwn {
                ssph,
                tsph,
                far_images,
            },
        })
    }

    fn spheres<'f>(&self, f: &'f Frame<R, NodeOwn>) -> [&'f [Sphere]; 2] {
        [&f.own.tsph, &f.own.ssph]
    }

    /// Node strengths.
    fn upward(&self, f: &Frame<R, NodeOwn>) -> nodes::Upward {
        nodes::upward(self.basis.as_ref(), &f.stree, &f.src, self.rep)
    }

    /// By compressed operators where they apply, else per target cell the
    /// kernel from its list's nodes to its own.
    fn m2l(
        &self,
        f: &Frame<R, NodeOwn>,
        lists: &Lists,
        up: nodes::Upward,
        stats: &mut Stats,
    ) -> (Local, f64) {
        let (plan, rep, b) = (self.plan, self.rep, self.basis.as_ref());
        let (params, settings) = (plan.params, plan.settings);
        let (stree, ttree) = (&f.stree, &f.ttree);
        let no = K::def().n_outputs();
        let k = b.len();
        let channels = rep.channels(no);
        let mut local = Local::zeros(k, channels, ttree.cells.len());
        let params64: Vec<f64> = params.iter().map(|x| x.to_f64()).collect();
        let done = if self.compress {
            compressed::m2l::<K>(
                b,
                plan.opts
                    .rank_tolerance
                    .unwrap_or_else(|| compressed::rank_tolerance(settings.p)),
                &params64,
                rep,
                no,
                (ttree, stree),
                &f.images,
                &up,
                lists,
                &mut local,
            )
        } else {
            None
        };
        if let Some(d) = &done {
            stats.m2l_compressed += d.pairs;
            stats.m2l_operators += d.operators;
            stats.m2l_operators_reused += d.reused;
        }
        // The pairs left to the kernel (all of them without compression),
        // with the node strengths as the kernel's sources, built for the
        // source cells of those pairs only (`at[c]`: where cell `c`'s are).
        let rest = done.as_ref().map_or(lists, |d| &d.rest);
        if rest.m2l_count() > 0 {
            let mut at = vec![u32::MAX; stree.cells.len()];
            let mut used = Vec::new();
            for &e in rest.m2l.iter().flatten() {
                let s = split(e).0;
                if at[s] == u32::MAX {
                    at[s] = used.len() as u32;
                    used.push(s);
                }
            }
            let proxies: SoA<R> = nodes::node_sources(b, stree, &up, &rep.strength, &used);
            let placed = Placed {
                proxies: &proxies,
                at: &at,
                images: &f.images,
            };
            m2l_by_kernel::<K, R>(b, params, rep, no, ttree, &placed, rest, &mut local);
        }
        (local, done.map_or(0.0, |d| d.build_seconds))
    }

    /// L2L down, then L2P at every target leaf (and a periodic box's far
    /// images at every target).
    fn downward(&self, f: &Frame<R, NodeOwn>, mut local: Local, leaves: &[usize]) -> Vec<Vec<f64>> {
        let (b, ttree, tgt) = (self.basis.as_ref(), &f.ttree, &f.tgt);
        nodes::downward(b, ttree, &mut local);
        let def = K::def();
        let (no, nt) = (def.n_outputs(), def.n_targets());
        let block = b.len() * local.channels;
        let pbox = self.plan.domain.periodic();
        let order = image_order(self.plan.settings);
        leaves
            .par_iter()
            .map_init(
                || (vec![0.0; b.len()], Scratch::new(order)),
                |(w, s), &a| {
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
                        if let (Some(fi), Some(pb)) = (&f.own.far_images, pbox) {
                            fi.add(def, pb, x, &t, o, s);
                        }
                    }
                    out
                },
            )
            .collect()
    }
}

/// The order of the far images' expansions for a run at `settings`: the
/// nearest far boxes are two boxes clear, where a degree `n` weighs about
/// `0.35^n` of their part (itself a percent or less of the sum); the
/// expected error of the settings a thousandfold below at most.
pub(crate) fn image_order(settings: Settings) -> usize {
    let want = super::tables::expected_error(settings) * 1e-3;
    ((want.ln() / 0.35f64.ln()).ceil() as usize).clamp(8, 20)
}

/// The node sources M2L by the kernel reads: source cell `s`'s at
/// `at[s]` in `proxies`, a list entry's image moving them by its lattice
/// vector of `images`.
struct Placed<'a, R> {
    proxies: &'a SoA<R>,
    at: &'a [u32],
    images: &'a [[f64; 3]],
}

/// M2L by the kernel: per target cell, from its list's node sources
/// (`placed`) to its own nodes.
#[allow(clippy::too_many_arguments)]
fn m2l_by_kernel<K: Kernel, R: Real>(
    b: &dyn Basis,
    params: &[R],
    rep: &Representation,
    no: usize,
    ttree: &Octree,
    placed: &Placed<'_, R>,
    lists: &Lists,
    local: &mut Local,
) {
    let Placed {
        proxies,
        at,
        images,
    } = *placed;
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
                for &e in &lists.m2l[a] {
                    let (s, image) = split(e);
                    let s = at[s] as usize;
                    let from = list.pos[0].len();
                    list.push_from(proxies, s * k..(s + 1) * k);
                    if image > 0 {
                        for (axis, &d) in list.pos.iter_mut().zip(&images[image]) {
                            axis[from..].iter_mut().for_each(|x| *x += R::c(d));
                        }
                    }
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
