//! The treecode on the GPU, on particles already there: the trees are built
//! there ([`crate::tree::TreeOrdered`], hu2011), then the cells'
//! pseudo-sources and the target groups ([`cells`]), and the walk runs as
//! the generated walk kernel (`fmm_codegen::emit::walk`), one block per
//! target group; the outputs go back to the caller's order on the device.
//! Same trees, same criterion and, for the same groups (`group` = 128, the
//! GPU's default), the same interactions as [`super::cpu`], so the two
//! agree to rounding.
//!
//! A cell's pseudo-sources are its monopole (the summed strength at the
//! centre of strength), or with a node far field (pseudo-particles or
//! Chebyshev nodes, [`crate::far`]) its nodes carrying its node strengths,
//! from the GPU FMM's upward pass (`far::cuda::upward`, the CPU's P2M and
//! M2M): the walk then sums the kernel from an accepted cell's nodes, and
//! the cell is accepted when the group's box is farther from its centre
//! than its nodes' sphere over `theta`, as on the CPU.

pub mod cells;

use cudarc::driver::{CudaSlice, LaunchConfig};

use crate::far::monopole::cuda::device_pseudo_sources;
use cells::{group_boxes, walk_cells};

use super::TreeOptions;
use crate::cuda::device::{alloc, cuda_err, download, refs3, upload, zeros};
use crate::cuda::launch::{Args, Entry};
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::{Domain, PeriodicBox};
use crate::error::Error;
use crate::far::cuda::{upward, DeviceBasis, NodeOps};
use crate::far::monopole::resolution;
use crate::far::{self, Representation};
use crate::kernel::Kernel;
use crate::methods::fmm::cuda::far_images::{far_images_at_targets, ImageSources};
use crate::methods::fmm::cuda::periodic;
use crate::methods::treecode::IMAGE_ORDER;
use crate::real::Real;
use crate::stats::{Clock, Stage};
use crate::tree::TreeOrdered;
use fmm_codegen::emit::signature::Role;
use fmm_codegen::emit::walk::WALK_BLOCK;

/// Cells of stack per block the walk starts with; a walk that needs more
/// (small theta on a deep tree) runs again with four times as many, up to
/// [`MAX_STACK`].
const INITIAL_STACK: usize = 8192;
const MAX_STACK: usize = 1 << 22;

/// What the walk reads of the cells besides the tree: `per_cell`
/// pseudo-sources a cell (positions and slots, cell-major), the squared
/// acceptance distances (f64), and whether the criterion measures from
/// the cells' centres (else from the pseudo-sources, one a cell).
struct Far<R> {
    from_centres: bool,
    per_cell: usize,
    pos: [CudaSlice<R>; 3],
    slots: Vec<CudaSlice<R>>,
    accept2: CudaSlice<f64>,
}

/// The cells' monopoles (the CPU's `pseudo_sources`): one pseudo-source a
/// cell at its centre of strength, which the criterion measures from.
fn monopoles<R: Real>(
    gpu: &Gpu,
    tree: &crate::tree::DeviceOctree<R>,
    pos: &[CudaSlice<R>; 3],
    slots: &[CudaSlice<R>],
    strength: &[usize],
    theta: f64,
) -> Result<Far<R>, Error> {
    let s = gpu.stream();
    let cells = device_pseudo_sources(
        gpu,
        tree,
        refs3(pos),
        &slots.iter().collect::<Vec<_>>(),
        strength,
        theta,
    )?;
    // The slots as separate arrays.
    let slots = (0..cells.n_slots)
        .map(|k| {
            let mut v = alloc::<R>(s, tree.n_cells)?;
            s.memcpy_dtod(&cells.slot(k), &mut v)
                .map_err(cuda_err("copy on the device"))?;
            Ok(v)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(Far {
        from_centres: false,
        per_cell: 1,
        slots,
        accept2: cells.accept2,
        pos: cells.pos,
    })
}

/// The cells' node far fields (the CPU's `node_cells`): every cell's
/// nodes carrying its node strengths, accepted when the group's box is
/// farther from the cell's centre than the nodes' sphere over `theta`
/// (and the positions' resolution), computed here as the CPU does.
fn node_cells<R: Real>(
    gpu: &Gpu,
    tree: &crate::tree::DeviceOctree<R>,
    pos: &[CudaSlice<R>; 3],
    slots: &[CudaSlice<R>],
    rep: &Representation,
    order: usize,
    theta: f64,
) -> Result<Far<R>, Error> {
    let s = gpu.stream();
    let basis = DeviceBasis::upload(gpu, rep.far_field, order)?;
    let nc = tree.n_cells;
    // The walk indexes the node sources in `int`.
    if nc * basis.k > i32::MAX as usize {
        return Err(Error::BadOption(format!(
            "the treecode's {} far field on the GPU: {nc} cells of {} nodes pass 2^31 nodes;              use larger leaves (TreeOptions::ncrit) or a lower order",
            rep.far_field.name(),
            basis.k
        )));
    }
    let nodes = NodeOps::get::<R>(gpu)?;
    let (_q, node_pos, node_slots) = upward(gpu, &nodes, &basis, tree, pos, slots, rep)?;
    let c = [0, 1, 2].map(|a| download(s, &tree.center[a], nc));
    let [cx, cy, cz] = c;
    let (cx, cy, cz, half) = (cx?, cy?, cz?, download(s, &tree.half, nc)?);
    let accept2: Vec<f64> = (0..nc)
        .map(|i| {
            let (center, h) = ([cx[i], cy[i], cz[i]], half[i]);
            (basis.radius * h / theta + resolution(center, h)).powi(2)
        })
        .collect();
    Ok(Far {
        from_centres: true,
        per_cell: basis.k,
        pos: node_pos,
        slots: node_slots,
        accept2: upload(s, &accept2)?,
    })
}

/// The Barnes-Hut treecode of kernel `K` with the walk on `gpu`, on
/// particles already there (input order), with the parameters `p` and the
/// far field `far` (a monopole or a node far field, checked by the front
/// door), in `domain`; the problem is not empty. Returns the outputs in
/// the targets' input order, on the device.
///
/// In a periodic box, as on the CPU: the points wrapped into the box
/// (copies), the walk once per near image (the targets moved by `-v`
/// meet the tree, accumulating), the farther images by Laplace
/// expansions at every target ([`far_images_at_targets`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<K: Kernel, R: Real>(
    gpu: &Gpu,
    p: &[R],
    far: &far::Plan,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
    opts: &TreeOptions,
    domain: &Domain,
    clock: &mut Clock<'_>,
) -> Result<Vec<CudaSlice<R>>, Error> {
    let def = K::def();
    let (m, n, no) = (targets.len(), sources.len(), def.n_outputs());
    let entry = Entry::walk::<K, R>(gpu)?;
    let group = opts.group_size();
    let pbox = domain.periodic();
    clock.lap(Stage::Setup)?;

    let s = gpu.stream();
    let given = sources
        .positions()
        .ok_or_else(|| Error::BadOption("the sources have no positions of their own".into()))?;
    // In a periodic box, copies wrapped into it.
    let wrap = |pos: &[CudaSlice<R>; 3]| match pbox {
        Some(b) => periodic::wrapped(gpu, b, refs3(pos)).map(Some),
        None => Ok(None),
    };
    let wrapped_sources = wrap(given)?;
    let spos = wrapped_sources.as_ref().unwrap_or(given);
    // The source tree, the sources in its order and its cells' pseudo-sources.
    let src = TreeOrdered::build(gpu, refs3(spos), sources.slots(), opts.ncrit)?;
    // A periodic box's cell must be neutral: said before any more work.
    let images = match pbox {
        Some(b) => Some(ImageSources::of::<K, R>(
            gpu,
            b,
            (&src.pos, &src.slots),
            "the treecode",
        )?),
        None => None,
    };
    let walk = walk_cells(gpu, &src.tree)?;
    let cells = match far {
        far::Plan::Monopole { strength } => {
            monopoles(gpu, &src.tree, &src.pos, &src.slots, strength, opts.theta)?
        }
        far::Plan::Nodes(rep) => node_cells(
            gpu, &src.tree, &src.pos, &src.slots, rep, opts.order, opts.theta,
        )?,
        far::Plan::Laplace { .. } => unreachable!("the treecode has no Laplace expansions"),
    };
    let accept2 = walk.accept2(gpu, &cells.accept2)?;
    let point = if cells.from_centres {
        &walk.center
    } else {
        &cells.pos
    };
    // The target tree (leaves of at most a group), the targets in its order
    // and the groups. Targets at the sources' points use their positions.
    let wrapped_targets = match targets.positions() {
        Some(t) => wrap(t)?,
        None => None,
    };
    let tpos = match (&wrapped_targets, targets.positions()) {
        (Some(w), _) => w,
        (None, Some(t)) => t,
        (None, None) => spos,
    };
    let tgt = TreeOrdered::build(gpu, refs3(tpos), targets.slots(), group)?;
    drop((wrapped_sources, wrapped_targets));
    let groups = tgt.tree.groups(gpu, group, WALK_BLOCK as usize)?;
    let boxes = group_boxes(gpu, &groups, refs3(&tgt.pos))?;
    clock.lap(Stage::Tree)?;

    // Every element is written by the first launch (`accumulate` = 0):
    // the groups cover every target; a periodic box's other near images
    // add to it.
    let mut d_out: Vec<CudaSlice<R>> = (0..no)
        .map(|_| alloc::<R>(s, m))
        .collect::<Result<_, _>>()?;
    let (n_t, n_g, n_c, n_s, per_cell) = (
        m as i32,
        groups.n as i32,
        src.tree.n_cells as i32,
        n as i32,
        cells.per_cell as i32,
    );
    // Persistent blocks: as many as fit on the GPU at once.
    let per_sm = entry
        .function()
        .occupancy_max_active_blocks_per_multiprocessor(WALK_BLOCK, 0, None)
        .map_err(cuda_err("occupancy of the walk"))?
        .max(1);
    let blocks = (per_sm as usize * gpu.info().multiprocessors.max(1) as usize)
        .min(groups.n)
        .max(1);
    let shifts = PeriodicBox::near_shifts(pbox);
    let (p2p, p2c);
    let mut stack_cap = match opts.walk_stack {
        0 => INITIAL_STACK,
        cells => cells,
    };
    loop {
        let mut stacks = zeros::<i32>(s, blocks * stack_cap)?;
        let mut overflow = zeros::<i32>(s, 1)?;
        let mut counts = zeros::<u64>(s, 2)?;
        for (i, &v) in shifts.iter().enumerate() {
            // The targets moved by -v, and their groups' boxes.
            let moved = if v == [0.0; 3] {
                None
            } else {
                let pos = periodic::shifted(gpu, &tgt.pos, v.map(|x| -x))?;
                let boxes = group_boxes(gpu, &groups, refs3(&pos))?;
                Some((pos, boxes))
            };
            let (tp, bx) = moved
                .as_ref()
                .map_or((&tgt.pos, &boxes), |(pos, boxes)| (pos, boxes));
            let mut next_group = zeros::<i32>(s, 1)?;
            let acc = i32::from(i > 0);
            let mut a = Args::new();
            a.int(Role::TargetCount, n_t)
                .read(Role::TargetPositions, tp)
                .read(Role::TargetSlots, &tgt.slots)
                .int(Role::GroupCount, n_g)
                .read(Role::Groups, [&groups.begin, &groups.end])
                .read(Role::GroupBoxes, bx)
                .int(Role::CellCount, n_c)
                .read(
                    Role::Cells,
                    [
                        &src.tree.n_children,
                        &walk.child,
                        &src.tree.begin,
                        &src.tree.end,
                    ],
                )
                .read(Role::CellCriterion, [&accept2])
                .read(Role::CellCriterion, point)
                .read(Role::CellCriterion, &walk.center)
                .read(Role::CellCriterion, [&walk.half])
                .int(Role::PseudoSourcesPerCell, per_cell)
                .read(Role::PseudoSourcePositions, &cells.pos)
                .read(Role::PseudoSourceSlots, &cells.slots)
                .int(Role::SourceCount, n_s)
                .read(Role::SourcePositions, &src.pos)
                .read(Role::SourceSlots, &src.slots)
                .values(Role::Params, p)
                .write(Role::Outputs, d_out.iter_mut())
                .int(Role::Accumulate, acc)
                .write(Role::Stacks, [&mut stacks])
                .int(Role::Stacks, stack_cap as i32)
                .write(Role::WalkState, [&mut next_group, &mut overflow])
                .write(Role::Counts, [&mut counts]);
            let cfg = LaunchConfig {
                grid_dim: (blocks as u32, 1, 1),
                block_dim: (WALK_BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the arguments are checked against the walk's
            // signature (`Signature::walk`); every array has the length its
            // count says, the cells' children are cells, the group ranges
            // lie within `0..n_targets`, and `stacks` holds
            // `blocks * stack_cap` ints.
            unsafe {
                entry.launch(a, s, cfg, |e| {
                    use cudarc::driver::sys::CUfunction_attribute as A;
                    let at = |a| entry.function().get_attribute(a).unwrap_or(-1);
                    Error::Cuda(format!(
                        "launching the walk ({blocks} blocks of {WALK_BLOCK}, {n_g} groups, {n_c} cells, stacks of {stack_cap}, {per_sm} blocks per SM; kernel: {} registers, {} B shared, at most {} threads): {e}",
                        at(A::CU_FUNC_ATTRIBUTE_NUM_REGS),
                        at(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                        at(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                    ))
                })
            }?;
        }
        let flag = s
            .clone_dtoh(&overflow)
            .map_err(cuda_err("copy from the device"))?;
        if flag[0] == 0 {
            let c = s
                .clone_dtoh(&counts)
                .map_err(cuda_err("copy from the device"))?;
            (p2p, p2c) = (c[0], c[1]);
            break;
        }
        // A stack overflowed: the outputs are incomplete. Again, with
        // stacks four times as deep (the targets are overwritten).
        stack_cap *= 4;
        if stack_cap > MAX_STACK {
            return Err(Error::Cuda(format!(
                "the treecode walk needs more than {MAX_STACK} cells of stack per block \
                 (theta {} on {} cells)",
                opts.theta, src.tree.n_cells
            )));
        }
    }
    if let (Some(b), Some(images)) = (pbox, &images) {
        far_images_at_targets::<K, R>(
            gpu,
            b,
            (IMAGE_ORDER, images),
            (&src.tree, &src.pos, &src.slots),
            (&tgt.pos, &tgt.slots, tgt.tree.bounds.center),
            &mut d_out,
        )?;
    }
    let stats = clock.stats();
    stats.source_cells = src.tree.n_cells;
    stats.target_groups = groups.n;
    stats.p2p += p2p;
    stats.p2c += p2c;
    clock.lap(Stage::Walk)?;
    drop((src, cells, walk, accept2, groups, boxes));
    // Back to the caller's order, on the device.
    tgt.tree.scatter_all(gpu, d_out)
}
