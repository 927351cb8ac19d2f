//! The FMM with a node far field (pseudo-particles or Chebyshev nodes,
//! [`crate::far`]) entirely on the GPU, on particles already there: the
//! device form of [`super::super::cpu_nodes`], which is its reference.
//!
//! - **Trees and lists**: the Laplace FMM's ([`Trees`], [`traverse`]),
//!   with the far field's leaf size and each cell's radius replaced by its
//!   node sphere's (`Basis::radius` half sides): the CPU's trees, spheres
//!   and MAC, so the CPU's lists (same M2L and P2P counts).
//! - **Upward** (`far/nodes.cu`): P2M at the leaves and M2M level by level
//!   up through the 8 child-weight matrices, node strengths in f64; each
//!   cell's node sources (positions `centre + half node`, the strength
//!   slots from the node strengths, the other slots the cell's
//!   strength-weighted means, which the treecode's pseudo-sources already
//!   compute: `device_pseudo_sources`).
//! - **M2L**: by the CPU's compressed operators where they apply
//!   ([`compressed`]: both trees in one root cube, every source field but
//!   the strength the same in every cell; `NodeM2l::Compressed`, the
//!   default), the pairs of rare
//!   offsets, or all pairs elsewhere, by the kernel: its own generated
//!   P2P-list entry, the near field's,
//!   with the target cells' nodes as targets (groups of at most a block of
//!   one cell's nodes, built on the host), the M2L lists as its lists and
//!   the source cells' node ranges as its cells; once per target-field
//!   basis (every target field 0, then each one at 1), the outputs going to
//!   the local values' channels (the kernel is affine in the target's own
//!   fields: [`crate::far::nodes`]).
//! - **Downward**: L2L level by level down, L2P at every target written to
//!   the outputs, then the P2P lists added ([`p2p_lists`], the Laplace
//!   FMM's), and the outputs back to the caller's order.
//!
//! The weights, P2M, M2M, L2L and L2P are computed in the CPU's order with
//! its rounding; the M2L sums in the kernel's order (or the compressed
//! products' atomic adds') and the means sum a cell's children rather than
//! its particles, so f64 runs agree with the CPU's to rounding (about
//! 1e-15), not to the bit.

use std::marker::PhantomData;

use cudarc::driver::CudaSlice;

use super::far_images::{far_images_at_targets, ImageSources};
use super::periodic::Images;
use super::skeleton::{self, DeviceFarPasses, Later, Share, TwoLots};
use super::{
    compressed, grid, p2p_lists, Cube, DeviceLists, FmmTree, Ops, Points, SharedTrees, Trees,
};
use crate::cuda::device::{alloc, device_addresses, launch, read_addresses, upload, zeros};
use crate::cuda::launch::Entry;
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::PeriodicBox;
use crate::error::Error;
use crate::far;
use crate::far::cuda::{node_positions, upward, DeviceBasis, NodeOps};
use crate::far::Representation;
use crate::kernel::Kernel;
use crate::methods::fmm::{NodeM2l, Plan};
use crate::real::Real;
use crate::stats::{Clock, Stats};
use crate::tree::DeviceGroups;
use fmm_codegen::emit::p2p_list::P2P_BLOCK;

/// The order `ops.cu` is compiled at for the trees' operators (parents,
/// leaves, radii, the traversal), which do not depend on it: the lowest,
/// the quickest to compile.
const TREE_OPS_ORDER: usize = 1;

/// The FMM of kernel `K` with the plan's node far field on `gpu`, on
/// particles already there (input order), at its settings (`p` the far
/// field's order, `theta` the MAC) and leaves of `opts.leaf_size`; the
/// problem is not empty. Its trees are `shared`'s where an earlier run
/// built them (of this far field: their cells' radii are its node
/// spheres'), else built and left there. Returns the outputs in the
/// targets' input order, on the device.
pub(crate) fn run<K: Kernel, R: Real>(
    gpu: &Gpu,
    plan: &Plan<'_, R>,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
    shared: &SharedTrees<R>,
    clock: &mut Clock<'_>,
) -> Result<Vec<CudaSlice<R>>, Error> {
    let far = NodeField::<K, R>::of(gpu, plan)?;
    skeleton::run::<K, R, _>(gpu, plan, &far, targets, sources, shared, clock)
}

/// [`run`] of sources in two lots, the second asked for by `later` once
/// the first's work is on the GPU ([`skeleton::run_in_two_lots`]).
pub(crate) fn run_in_two_lots<K: Kernel, R: Real>(
    gpu: &Gpu,
    plan: &Plan<'_, R>,
    targets: &DeviceParticles<R>,
    first: &DeviceParticles<R>,
    second: (Share<'_, R>, Later<'_, R>),
    clock: &mut Clock<'_>,
) -> Result<TwoLots<R>, Error> {
    let far = NodeField::<K, R>::of(gpu, plan)?;
    // No second stream: a node field's basis and child weights (up to
    // 256 MiB) would be built and copied a second time for it.
    let fars = (far, None);
    skeleton::run_in_two_lots::<K, R, _>(gpu, plan, fars, (targets, first), second, clock)
}

/// A node far field's passes of the FMM on the GPU ([`skeleton`]): the
/// cells' radii their node spheres', node strengths for multipoles and
/// node values for locals (`basis`, `nodes`), M2L by the CPU's compressed
/// operators (`compress`) or by the kernel (`p2p`, its P2P-list entry).
struct NodeField<'a, K, R> {
    gpu: &'a Gpu,
    plan: &'a Plan<'a, R>,
    rep: &'a Representation,
    basis: DeviceBasis,
    ops: Ops,
    nodes: NodeOps,
    p2p: Entry,
    compress: bool,
    _k: PhantomData<K>,
}

impl<'a, K: Kernel, R: Real> NodeField<'a, K, R> {
    /// The node far field's passes as `plan` says.
    fn of(gpu: &'a Gpu, plan: &'a Plan<'a, R>) -> Result<Self, Error> {
        let rep = plan.nodes();
        Ok(NodeField {
            gpu,
            plan,
            rep,
            basis: DeviceBasis::upload(gpu, rep.far_field, plan.settings.p)?,
            ops: Ops::get::<R>(gpu, TREE_OPS_ORDER)?,
            nodes: NodeOps::get::<R>(gpu)?,
            p2p: Entry::p2p_list::<K, R>(gpu)?,
            compress: plan.opts.node_m2l == NodeM2l::Compressed,
            _k: PhantomData,
        })
    }
}

impl<K: Kernel, R: Real> DeviceFarPasses<R> for NodeField<'_, K, R> {
    /// A periodic box's far images' sources (Laplace expansions of the
    /// box).
    type Own = Option<ImageSources>;
    /// The node strengths (f64), and the node sources: positions, slots.
    type Multipoles = (CudaSlice<f64>, [CudaSlice<R>; 3], Vec<CudaSlice<R>>);

    fn ops(&self) -> &Ops {
        &self.ops
    }

    /// For the compressed M2L both trees in one root cube (its operators
    /// are per offset), else each its own; a periodic box the box.
    fn cube<'b>(&self, pbox: Option<&'b PeriodicBox>) -> Cube<'b> {
        match pbox {
            Some(b) => Cube::Box(b),
            None if self.compress => Cube::Union,
            None => Cube::Own,
        }
    }

    /// Each cell's radius its node sphere's.
    fn adjust(&self, t: &mut FmmTree<R>) -> Result<(), Error> {
        let s = self.gpu.stream();
        let nci = t.tree.n_cells as i32;
        launch!(s, self.nodes.radius, grid(t.tree.n_cells), "far_nodes_radius";
            &nci, &self.basis.radius, &t.tree.half, &mut t.radius)
    }

    /// A periodic box's far images come by Laplace expansions: the cell
    /// neutral (or with a background) before any more work. The P2P-list
    /// entry counts its targets and sources in `int`.
    fn own(&self, trees: &Trees<R>) -> Result<Option<ImageSources>, Error> {
        let k = self.basis.k;
        let (snc, tnc) = (trees.source.tree.n_cells, trees.target().tree.n_cells);
        for (what, cells) in [("source", snc), ("target", tnc)] {
            if cells * k > i32::MAX as usize {
                return Err(Error::BadOption(format!(
                    "the {} far field on the GPU: {cells} {what} cells of {k} nodes pass 2^31 \
                     nodes; use larger leaves (FmmOptions::ncrit) or a lower order",
                    self.rep.far_field.name()
                )));
            }
        }
        match self.plan.domain.periodic() {
            Some(b) => Ok(Some(ImageSources::of::<K, R>(
                self.gpu,
                b,
                (&trees.source.pos, &trees.sslots),
                "the FMM with node far fields",
            )?)),
            None => Ok(None),
        }
    }

    fn upward(&self, trees: &Trees<R>, _: &Self::Own) -> Result<Self::Multipoles, Error> {
        let st = &trees.source;
        upward(
            self.gpu,
            &self.nodes,
            &self.basis,
            &st.tree,
            &st.pos,
            &trees.sslots,
            self.rep,
        )
    }

    /// By compressed operators where they apply (the CPU's operators,
    /// `compressed`), the pairs of rare offsets (or all) by the kernel.
    fn m2l(
        &self,
        trees: &Trees<R>,
        lists: &DeviceLists,
        images: &Images<R>,
        (q, src_pos, src_slots): Self::Multipoles,
        _: &Self::Own,
        stats: &mut Stats,
    ) -> Result<(CudaSlice<f64>, f64), Error> {
        let (gpu, rep, settings, opts) = (self.gpu, self.rep, self.plan.settings, self.plan.opts);
        let (st, tt) = (&trees.source, trees.target());
        let no = K::def().n_outputs();
        let channels = rep.channels(no);
        let planned = std::time::Instant::now();
        let plan = if self.compress {
            let host = far::nodes::basis(rep.far_field, settings.p);
            let tol = opts
                .rank_tolerance
                .unwrap_or_else(|| far::compressed::rank_tolerance(settings.p));
            compressed::plan::<K, R>(
                gpu,
                host.as_ref(),
                tol,
                self.plan.params,
                rep,
                &src_slots,
                no,
                (tt, st),
                images,
                lists,
            )?
        } else {
            None
        };
        // Operators built for the first time (on the CPU, then copied):
        // setup, not M2L, as on the CPU (`cpu_nodes`).
        let building = match &plan {
            Some(p) if p.reused < p.operators => planned.elapsed().as_secs_f64(),
            _ => 0.0,
        };
        let by_kernel = match &plan {
            None => Some(([&lists.m2l_begin, &lists.m2l_end], &lists.m2l)),
            Some(p) => p.rest.as_ref().map(|r| ([&r.begin, &r.end], &r.list)),
        };
        let mut local = match by_kernel {
            Some((bounds, list)) => m2l(
                gpu,
                &self.nodes,
                &self.basis,
                &self.p2p,
                self.plan.params,
                (tt, st),
                (bounds, list, images),
                &src_pos,
                &src_slots,
                no,
                rep.target_slots,
            )?,
            None => zeros::<f64>(gpu.stream(), tt.tree.n_cells * self.basis.k * channels)?,
        };
        if let Some(p) = &plan {
            p.apply(gpu, &q, &mut local)?;
            stats.m2l_compressed += p.pairs;
            stats.m2l_operators += p.operators;
            stats.m2l_operators_reused += p.reused;
        }
        Ok((local, building))
    }

    /// L2L level by level down, L2P at every target written to the
    /// outputs; a periodic box's far images at every target.
    fn downward(
        &self,
        trees: &Trees<R>,
        image_sources: &Self::Own,
        mut local: CudaSlice<f64>,
        out: &mut [CudaSlice<R>],
    ) -> Result<(), Error> {
        let (gpu, basis, nodes) = (self.gpu, &self.basis, &self.nodes);
        let s = gpu.stream();
        let (st, tt) = (&trees.source, trees.target());
        let def = K::def();
        let (m, no, nt) = (tt.tree.n, def.n_outputs(), self.rep.target_slots);
        let (ki, chi) = (basis.k as i32, self.rep.channels(no) as i32);
        for l in 1..tt.tree.levels() {
            let (nl, cells) = tt.tree.level(l);
            let nli = nl as i32;
            launch!(s, nodes.l2l, grid(nl * basis.k * self.rep.channels(no)), "far_nodes_l2l";
                &nli, &cells, &tt.parent, &tt.tree.center[0], &tt.tree.center[1],
                &tt.tree.center[2], &ki, &chi, &basis.child, &mut local)?;
        }
        {
            let outs = upload(s, &device_addresses(s, out))?;
            let tfields = upload(s, &read_addresses(s, &trees.tslots))?;
            let (mi, noi, nti) = (m as i32, no as i32, nt as i32);
            launch!(s, nodes.l2p, grid(m), "far_nodes_l2p";
                &mi, &tt.leaf_of, &tt.tree.center[0], &tt.tree.center[1], &tt.tree.center[2],
                &tt.tree.half, &tt.pos[0], &tt.pos[1], &tt.pos[2], &basis.kind, &basis.p, &ki,
                &basis.table, &basis.radius, &chi, &noi, &nti, &tfields, &local, &outs)?;
        }
        drop(local);
        if let (Some(b), Some(src)) = (self.plan.domain.periodic(), image_sources) {
            let order = super::super::cpu_nodes::image_order(self.plan.settings);
            far_images_at_targets::<K, R>(
                gpu,
                b,
                (order, src),
                (&st.tree, &st.pos, &trees.sslots),
                (&tt.pos, &trees.tslots, tt.tree.bounds.center),
                out,
            )?;
        }
        Ok(())
    }
}

/// The M2L: the kernel (`p2p`, its P2P-list entry) from the node sources
/// (`src_pos`, `src_slots`, `k` a source cell) of each target cell's M2L
/// list (`list[bounds[0][c]..bounds[1][c]]`) to the target cell's nodes,
/// once per target-field basis. Returns
/// the local values `[cell][node][channel]` (f64), channel `b no + o`.
#[allow(clippy::too_many_arguments)]
fn m2l<R: Real>(
    gpu: &Gpu,
    nodes: &NodeOps,
    basis: &DeviceBasis,
    p2p: &Entry,
    params: &[R],
    (tt, st): (&FmmTree<R>, &FmmTree<R>),
    (bounds, list, images): ([&CudaSlice<i64>; 2], &CudaSlice<i32>, &Images<R>),
    src_pos: &[CudaSlice<R>; 3],
    src_slots: &[CudaSlice<R>],
    no: usize,
    nt: usize,
) -> Result<CudaSlice<f64>, Error> {
    let s = gpu.stream();
    let k = basis.k;
    let (snc, tnc) = (st.tree.n_cells, tt.tree.n_cells);
    let tn = tnc * k;
    let channels = no * (1 + nt);

    // Targets: every target cell's nodes; groups of at most a block of one
    // cell's nodes, each naming its cell (whose M2L list it takes).
    let mut pos = [alloc::<R>(s, tn)?, alloc::<R>(s, tn)?, alloc::<R>(s, tn)?];
    node_positions(gpu, nodes, basis, &tt.tree, &mut pos)?;
    let groups = node_groups(gpu, tnc, k)?;
    // Sources: cell `c`'s node sources are `c k..(c + 1) k`.
    let (cb, ce): (Vec<i32>, Vec<i32>) = (0..snc)
        .map(|c| ((c * k) as i32, ((c + 1) * k) as i32))
        .unzip();
    let (cell_begin, cell_end) = (upload(s, &cb)?, upload(s, &ce)?);
    // The target fields of the bases: 0, or 1 for the basis's own field.
    let zero = zeros::<R>(s, tn)?;
    let mut one = alloc::<R>(s, tn)?;
    if nt > 0 {
        let (tni, v) = (tn as i32, 1.0f64);
        launch!(s, nodes.fill, grid(tn), "far_nodes_fill"; &tni, &v, &mut one)?;
    }

    let mut local = zeros::<f64>(s, tn * channels)?;
    let mut out: Vec<CudaSlice<R>> = (0..no)
        .map(|_| alloc::<R>(s, tn))
        .collect::<Result<_, _>>()?;
    let (tni, noi, chi) = (tn as i32, no as i32, channels as i32);
    for b in 0..=nt {
        let fields = (0..nt)
            .map(|f| if b == f + 1 { &one } else { &zero })
            .collect();
        let pairs = p2p_lists(
            gpu,
            p2p,
            params,
            &Points {
                n: tn,
                pos: &pos,
                slots: fields,
            },
            &groups,
            bounds,
            list,
            &images.shift_real,
            [&cell_begin, &cell_end],
            &Points::of(snc * k, src_pos, src_slots),
            &mut out,
            false,
        )?;
        // The channels' kernel follows on the same stream: not waited for.
        drop(pairs);
        let outs = upload(s, &read_addresses(s, &out))?;
        let bi = b as i32;
        launch!(s, nodes.channels, grid(tn * no), "far_nodes_channels";
            &tni, &noi, &chi, &bi, &outs, &mut local)?;
    }
    Ok(local)
}

/// The M2L's target groups: each of `n_cells` cells' `k` nodes
/// (`c k..(c + 1) k`) cut into pieces of at most [`P2P_BLOCK`], naming the
/// cell. Built on the host: three integers a piece, from the counts alone.
fn node_groups(gpu: &Gpu, n_cells: usize, k: usize) -> Result<DeviceGroups, Error> {
    let s = gpu.stream();
    let block = P2P_BLOCK as usize;
    let per = k.div_ceil(block);
    let (mut begin, mut end, mut cell) = (
        Vec::with_capacity(n_cells * per),
        Vec::with_capacity(n_cells * per),
        Vec::with_capacity(n_cells * per),
    );
    for c in 0..n_cells {
        for b in (c * k..(c + 1) * k).step_by(block) {
            begin.push(b as i32);
            end.push((b + block).min((c + 1) * k) as i32);
            cell.push(c as i32);
        }
    }
    Ok(DeviceGroups {
        n: begin.len(),
        begin: upload(s, &begin)?,
        end: upload(s, &end)?,
        cell: upload(s, &cell)?,
    })
}
