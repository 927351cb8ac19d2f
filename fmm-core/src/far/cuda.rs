//! The node far fields' operators on the GPU (`nodes.cu`): P2M, M2M, L2L
//! and L2P of [`super::nodes`] with the weights of [`super::chebyshev`] and
//! [`super::pseudo`], and the kernels around an M2L that is the kernel's
//! own P2P-list entry between node sets. The FMM that runs them is
//! `methods::fmm::cuda::nodes`.
//!
//! One module for every order and both far fields: the basis is passed as
//! arguments (`DeviceBasis`: its kind, order, node count and the table its
//! weights read, the CPU's own numbers), so no order compiles a module of
//! its own and the NVRTC test covers every order by compiling once.

use cudarc::driver::{CudaSlice, LaunchConfig};

use super::monopole::cuda::device_pseudo_sources;
use super::nodes::{child_weights, Basis};
use super::{chebyshev, pseudo, Chebyshev, FarField, PseudoParticles, Representation};
use crate::cuda::device::{
    alloc, device_addresses, launch, per_item, read_addresses, refs3, upload, zeros,
};
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::primitives::gather;
use crate::cuda::Gpu;
use crate::error::Error;
use crate::kernel::MAX_SLOTS;
use crate::real::Real;
use crate::tree::DeviceOctree;

/// Threads per block of the node kernels.
const BLOCK: u32 = 128;

fn grid(n: usize) -> LaunchConfig {
    per_item(n, BLOCK)
}

/// The module name the kernels are compiled and cached under.
pub const MODULE: &str = "fmm_far_nodes";

/// The basis kinds `nodes.cu` knows.
const KIND_CHEBYSHEV: i32 = 0;
const KIND_PPM: i32 = 1;

/// The source, with the constants it takes from here.
pub fn source() -> String {
    with_defines(
        &[
            ("KIND_CHEBYSHEV", KIND_CHEBYSHEV as i64),
            ("KIND_PPM", KIND_PPM as i64),
            ("MAX_SIDE", chebyshev::MAX_ORDER as i64 + 1),
            ("MAX_SLOTS", MAX_SLOTS as i64),
        ],
        include_str!("nodes.cu"),
    )
}

entry_points! {
    /// The entry points of `nodes.cu`.
    pub struct NodeOps {
        radius = "far_nodes_radius",
        positions = "far_nodes_positions" per_precision,
        p2m = "far_nodes_p2m" per_precision,
        p2m_cells = "far_nodes_p2m_cells" per_precision,
        m2m = "far_nodes_m2m",
        sources = "far_nodes_sources" per_precision,
        fill = "far_nodes_fill" per_precision,
        channels = "far_nodes_channels" per_precision,
        l2l = "far_nodes_l2l",
        l2p = "far_nodes_l2p" per_precision,
    }
}

impl NodeOps {
    pub(crate) fn get<R: Real>(gpu: &Gpu) -> Result<Self, Error> {
        let (module, _) = gpu.module(MODULE, &source())?;
        Self::load::<R>(gpu, &module)
    }
}

/// The most bytes the child weights (`nodes::child_weights`: 8 matrices of
/// `k^2` doubles, read by M2M and L2L) may take on the device: 256 MiB,
/// which Chebyshev nodes pass at order 12 (2197 nodes a cell, 309 MB).
pub const MAX_CHILD_WEIGHT_BYTES: usize = 256 << 20;

/// Nodes a cell of far field `far_field` at order `p`.
fn nodes_at(far_field: FarField, p: usize) -> usize {
    match far_field {
        FarField::Ppm => pseudo::points_for(p),
        _ => (p + 1).pow(3),
    }
}

/// The bytes of the child weights for `k` nodes a cell.
fn child_weight_bytes(k: usize) -> usize {
    8 * k * k * std::mem::size_of::<f64>()
}

/// The highest order of a node far field the GPU takes: that of the CPU
/// ([`FarField::max_order`]) where its child weights fit in
/// [`MAX_CHILD_WEIGHT_BYTES`].
pub fn max_gpu_order(far_field: FarField) -> usize {
    (1..=far_field.max_order())
        .filter(|&p| child_weight_bytes(nodes_at(far_field, p)) <= MAX_CHILD_WEIGHT_BYTES)
        .max()
        .unwrap_or(0)
}

/// A node basis on the device, as `nodes.cu` takes it.
pub(crate) struct DeviceBasis {
    /// `KIND_CHEBYSHEV` or `KIND_PPM`.
    pub(crate) kind: i32,
    /// The order.
    pub(crate) p: i32,
    /// Nodes a cell.
    pub(crate) k: usize,
    /// The sphere about a cell's centre holding its nodes, in half sides:
    /// the MAC's radius, and the pseudo-particles' sphere.
    pub(crate) radius: f64,
    /// What the weights read: Chebyshev, `T_j` at the roots (`[m (p + 1) +
    /// j]`); pseudo-particles, the design's unit vectors (3 a node).
    pub(crate) table: CudaSlice<f64>,
    /// The nodes in the unit frame, 3 a node.
    pub(crate) nodes: CudaSlice<f64>,
    /// The child weights, `[o k k + c k + n]` ([`child_weights`]).
    pub(crate) child: CudaSlice<f64>,
}

impl DeviceBasis {
    /// The basis of `far_field` (a node far field) at order `p` (checked
    /// against the far field's range), on the device; refused where its
    /// child weights would pass [`MAX_CHILD_WEIGHT_BYTES`].
    pub(crate) fn upload(gpu: &Gpu, far_field: FarField, p: usize) -> Result<Self, Error> {
        Self::upload_with(gpu, far_field, p, true)
    }

    /// The basis without its child weights (an empty array in their place),
    /// for [`cell_node_sources`], which needs no M2M: at any order.
    pub(crate) fn without_children(
        gpu: &Gpu,
        far_field: FarField,
        p: usize,
    ) -> Result<Self, Error> {
        Self::upload_with(gpu, far_field, p, false)
    }

    fn upload_with(
        gpu: &Gpu,
        far_field: FarField,
        p: usize,
        children: bool,
    ) -> Result<Self, Error> {
        far_field.check_order(p)?;
        let k = nodes_at(far_field, p);
        let bytes = child_weight_bytes(k);
        if children && bytes > MAX_CHILD_WEIGHT_BYTES {
            return Err(Error::BadOption(format!(
                "the {} far field on the GPU takes orders up to {}, not {p}: {k} nodes a cell \
                 need {} MB of child weights on the device (at most {} MB); use a lower order \
                 or Backend::Cpu",
                far_field.name(),
                max_gpu_order(far_field),
                bytes >> 20,
                MAX_CHILD_WEIGHT_BYTES >> 20
            )));
        }
        // The same choice as `nodes::basis`.
        let (kind, table, basis): (i32, Vec<f64>, Box<dyn Basis>) = match far_field {
            FarField::Ppm => {
                let b = PseudoParticles::new(p);
                let units = b.units().iter().flatten().copied().collect();
                (KIND_PPM, units, Box::new(b))
            }
            _ => {
                let b = Chebyshev::new(p);
                (KIND_CHEBYSHEV, b.t_roots().to_vec(), Box::new(b))
            }
        };
        debug_assert_eq!(basis.len(), k);
        let nodes: Vec<f64> = basis.nodes().iter().flatten().copied().collect();
        let child: Vec<f64> = if children {
            child_weights(basis.as_ref()).concat()
        } else {
            vec![0.0]
        };
        let s = gpu.stream();
        Ok(DeviceBasis {
            kind,
            p: p as i32,
            k,
            radius: basis.radius(),
            table: upload(s, &table)?,
            nodes: upload(s, &nodes)?,
            child: upload(s, &child)?,
        })
    }
}

/// The upward pass over the source tree `tree` (sources at `pos` in its
/// order, field slots `sslots`): P2M at the leaves, M2M level by level up, then every
/// cell's node sources, `k` a cell in cell order: the node strengths
/// (`[cell][node][component]`), the node sources' positions and their
/// field slots (`far::nodes::node_sources`).
#[allow(clippy::type_complexity)]
pub(crate) fn upward<R: Real>(
    gpu: &Gpu,
    nodes: &NodeOps,
    basis: &DeviceBasis,
    tree: &DeviceOctree<R>,
    pos: &[CudaSlice<R>; 3],
    sslots: &[CudaSlice<R>],
    rep: &Representation,
) -> Result<(CudaSlice<f64>, [CudaSlice<R>; 3], Vec<CudaSlice<R>>), Error> {
    let s = gpu.stream();
    let (snc, k, nq, ns) = (tree.n_cells, basis.k, rep.strength.len(), sslots.len());
    let (snci, ki, nqi, nsi) = (snc as i32, k as i32, nq as i32, ns as i32);

    // P2M: node strengths `[cell][node][component]`.
    let mut q = zeros::<f64>(s, snc * k * nq)?;
    let qs = upload(
        s,
        &read_addresses(s, rep.strength.iter().map(|&i| &sslots[i])),
    )?;
    launch!(s, nodes.p2m, grid(snc * k), "far_nodes_p2m";
        &snci, &basis.kind, &basis.p, &ki, &basis.table, &basis.radius,
        &tree.n_children, &tree.begin, &tree.end,
        &tree.center[0], &tree.center[1], &tree.center[2], &tree.half,
        &pos[0], &pos[1], &pos[2], &nqi, &qs, &mut q)?;

    // M2M, deepest level first.
    for l in (0..tree.levels()).rev() {
        let (nl, cells) = tree.level(l);
        let nli = nl as i32;
        launch!(s, nodes.m2m, grid(nl * k * nq), "far_nodes_m2m";
            &nli, &cells, &tree.more, &tree.next, &tree.n_children,
            &tree.center[0], &tree.center[1], &tree.center[2], &ki, &nqi,
            &basis.child, &mut q)?;
    }

    // The other slots' strength-weighted means per cell: the treecode's
    // pseudo-sources hold exactly them (`slots[s n_cells + c]`, rounded to
    // `R` as `node_sources` rounds them). Only where a slot is not a
    // strength slot (a core radius).
    let slot_q = slot_components(ns, &rep.strength);
    let means = if slot_q.contains(&-1) {
        let refs: Vec<&CudaSlice<R>> = sslots.iter().collect();
        device_pseudo_sources(gpu, tree, refs3(pos), &refs, &rep.strength, 0.0)?.slots
    } else {
        alloc::<R>(s, 1)?
    };

    // The node sources.
    let mut node_pos = [
        alloc::<R>(s, snc * k)?,
        alloc::<R>(s, snc * k)?,
        alloc::<R>(s, snc * k)?,
    ];
    node_positions(gpu, nodes, basis, tree, &mut node_pos)?;
    let mut slots: Vec<CudaSlice<R>> = (0..ns)
        .map(|_| alloc::<R>(s, snc * k))
        .collect::<Result<_, _>>()?;
    let outs = upload(s, &device_addresses(s, &mut slots))?;
    let d_slot_q = upload(s, &slot_q)?;
    launch!(s, nodes.sources, grid(snc * k), "far_nodes_sources";
        &snci, &ki, &nqi, &nsi, &d_slot_q, &q, &means, &outs)?;
    Ok((q, node_pos, slots))
}

/// Particles a block of [`cell_node_sources`]'s P2M takes, their weights
/// and strengths in shared memory (`side` weights an axis, `nq`
/// strengths): as many as 40 KB holds, 64 to 256 (256 at order 5 and
/// one strength, 128 at the highest order). Each run's sums go to its cell's nodes by
/// atomic adds, a large cell's runs all to the same 216 or so: runs of
/// 64 made the local essential tree's node strengths 0.035 to 0.044 s of
/// its 0.07 s at 2^24 sources on an H200 (`overlap_bench`, 4 parts).
fn p2m_run(side: usize, nq: usize) -> usize {
    let per = (3 * side + nq) * std::mem::size_of::<f64>();
    (40 * 1024 / per).clamp(64, 256)
}

/// Doubles of shared memory a block of [`cell_node_sources`]'s P2M adds
/// its sets of lines' sums in (`nodes.cu` `p2m_lines`: a thread a line of
/// `side` nodes, as many sets of the `side^2` lines as [`BLOCK`] threads
/// hold, the sets' sums added before the atomics): at most 4 KB.
fn p2m_partial(side: usize) -> usize {
    let lines = side * side;
    let sets = (BLOCK as usize / lines).max(1);
    (sets - 1) * lines * side
}

/// The node sources of the cells `cells` of `tree` only (`ranges`: their
/// particles, `begin..end` in tree order), `k` a cell in the order of
/// `cells`, as [`upward`] makes every cell's: each cell's node strengths
/// summed straight from its particles (`pos`, `sslots` in tree order), at
/// whatever level, instead of P2M at the leaves and M2M up. The local
/// essential tree sends the nodes of a few cells of a large tree; the
/// upward pass over every cell cost it more than the rest of its build
/// (0.16 of 0.33 s at 2^24 sources). Chebyshev nodes only.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn cell_node_sources<R: Real>(
    gpu: &Gpu,
    nodes: &NodeOps,
    basis: &DeviceBasis,
    tree: &DeviceOctree<R>,
    cells: &[usize],
    ranges: &[(usize, usize)],
    pos: &[CudaSlice<R>; 3],
    sslots: &[CudaSlice<R>],
    rep: &Representation,
) -> Result<([CudaSlice<R>; 3], Vec<CudaSlice<R>>), Error> {
    assert_eq!(
        basis.kind, KIND_CHEBYSHEV,
        "P2M of chosen cells: Chebyshev nodes"
    );
    let s = gpu.stream();
    let mut lap = crate::cuda::laps::Laps::new(Some(gpu), "nodes' strengths");
    let (n, k, nq, ns) = (cells.len(), basis.k, rep.strength.len(), sslots.len());
    let one = n.max(1);
    // The cells' boxes, picked on the device.
    let idx = upload(s, &cells.iter().map(|&c| c as u32).collect::<Vec<_>>())?;
    let f = |v: &CudaSlice<f64>| gather(gpu, &idx, v, n);
    let center = [
        f(&tree.center[0])?,
        f(&tree.center[1])?,
        f(&tree.center[2])?,
    ];
    let half = f(&tree.half)?;
    // The runs: each cell's particles `run` at a time.
    let side = basis.p as usize + 1;
    let run = p2m_run(side, nq);
    let (mut run_cell, mut run_begin, mut run_end) = (Vec::new(), Vec::new(), Vec::new());
    for (u, &(begin, end)) in ranges.iter().enumerate() {
        for b in (begin..end).step_by(run) {
            run_cell.push(u as i32);
            run_begin.push(b as i32);
            run_end.push((b + run).min(end) as i32);
        }
    }
    let mut q = zeros::<f64>(s, one * k * nq)?;
    lap.say(&format!("{} cells, {} runs", n, run_cell.len()))?;
    if !run_cell.is_empty() {
        let qs = upload(
            s,
            &read_addresses(s, rep.strength.iter().map(|&i| &sslots[i])),
        )?;
        let cfg = LaunchConfig {
            grid_dim: (run_cell.len() as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: ((run * (3 * side + nq) + p2m_partial(side))
                * std::mem::size_of::<f64>()) as u32,
        };
        let (ki, nqi, runi) = (k as i32, nq as i32, run as i32);
        let runs = [
            upload(s, &run_cell)?,
            upload(s, &run_begin)?,
            upload(s, &run_end)?,
        ];
        launch!(s, nodes.p2m_cells, cfg, "far_nodes_p2m_cells";
            &runi, &runs[0], &runs[1], &runs[2],
            &center[0], &center[1], &center[2], &half, &basis.p, &ki, &basis.table,
            &pos[0], &pos[1], &pos[2], &nqi, &qs, &mut q)?;
    }
    lap.say("P2M of the runs")?;
    // The other slots' strength-weighted means, the cells' own (as
    // `upward` takes them).
    let slot_q = slot_components(ns, &rep.strength);
    let means = if slot_q.contains(&-1) {
        let refs: Vec<&CudaSlice<R>> = sslots.iter().collect();
        let all = device_pseudo_sources(gpu, tree, refs3(pos), &refs, &rep.strength, 0.0)?.slots;
        let idx: Vec<u32> = (0..ns)
            .flat_map(|slot| cells.iter().map(move |&c| (slot * tree.n_cells + c) as u32))
            .collect();
        gather(gpu, &upload(s, &idx)?, &all, idx.len())?
    } else {
        alloc::<R>(s, 1)?
    };
    let mut node_pos = [
        alloc::<R>(s, one * k)?,
        alloc::<R>(s, one * k)?,
        alloc::<R>(s, one * k)?,
    ];
    let mut slots: Vec<CudaSlice<R>> = (0..ns)
        .map(|_| alloc::<R>(s, one * k))
        .collect::<Result<_, _>>()?;
    if n > 0 {
        let (ni, ki, nqi, nsi) = (n as i32, k as i32, nq as i32, ns as i32);
        let [x, y, z] = &mut node_pos;
        launch!(s, nodes.positions, grid(n * k), "far_nodes_positions";
            &ni, &ki, &basis.nodes, &center[0], &center[1], &center[2], &half, x, y, z)?;
        let outs = upload(s, &device_addresses(s, &mut slots))?;
        let d_slot_q = upload(s, &slot_q)?;
        launch!(s, nodes.sources, grid(n * k), "far_nodes_sources";
            &ni, &ki, &nqi, &nsi, &d_slot_q, &q, &means, &outs)?;
    }
    lap.say("means and node sources")?;
    Ok((node_pos, slots))
}

/// For each of `ns` source slots, its component among the strength slots
/// `strength`, or -1 (a slot the node sources take the cell's mean of).
fn slot_components(ns: usize, strength: &[usize]) -> Vec<i32> {
    (0..ns)
        .map(|i| {
            strength
                .iter()
                .position(|&t| t == i)
                .map_or(-1, |p| p as i32)
        })
        .collect()
}

/// The positions of every cell's nodes (`centre + half node`, cell-major)
/// into `pos`.
pub(crate) fn node_positions<R: Real>(
    gpu: &Gpu,
    nodes: &NodeOps,
    basis: &DeviceBasis,
    tree: &DeviceOctree<R>,
    pos: &mut [CudaSlice<R>; 3],
) -> Result<(), Error> {
    let s = gpu.stream();
    let (nci, ki) = (tree.n_cells as i32, basis.k as i32);
    let [x, y, z] = pos;
    launch!(s, nodes.positions, grid(tree.n_cells * basis.k), "far_nodes_positions";
        &nci, &ki, &basis.nodes, &tree.center[0], &tree.center[1], &tree.center[2],
        &tree.half, x, y, z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_takes_every_pseudo_particle_order_and_chebyshev_to_11() {
        // The chosen cells' P2M fits the default 48 KB of shared memory
        // at every order and at the most slots.
        for side in 2..=chebyshev::MAX_ORDER + 1 {
            let bytes = (p2m_run(side, MAX_SLOTS) * (3 * side + MAX_SLOTS) + p2m_partial(side)) * 8;
            assert!(
                p2m_partial(side) * 8 <= 4096 && bytes <= 48 * 1024,
                "{side}: {bytes}"
            );
        }
        assert_eq!(max_gpu_order(FarField::Ppm), pseudo::MAX_ORDER);
        assert_eq!(max_gpu_order(FarField::KernelIndependent), 11);
        assert_eq!(
            nodes_at(FarField::Ppm, 6),
            PseudoParticles::new(6).len(),
            "t-design points"
        );
        assert_eq!(nodes_at(FarField::KernelIndependent, 4), 125);
    }
}
