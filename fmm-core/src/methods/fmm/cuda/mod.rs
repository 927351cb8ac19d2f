//! The FMM on the GPU, on particles already there: the trees are built
//! there ([`crate::tree::TreeOrdered`], hu2011), and P2M, M2M, M2L, L2L,
//! L2P (`ops.cu`, compiled once per order) and the P2P lists (the kernel's
//! generated `_p2p_list` entry, in its `p2p_list` module:
//! `fmm_codegen::emit::p2p_list`) run there;
//! the outputs go back to the caller's order on the device.
//!
//! The dual tree traversal runs there too, level by level over the target
//! tree as [`crate::tree::traversal::traverse_levels`] does on the CPU: one
//! thread per target cell of a level, a counting pass, a scan, a writing
//! pass; the host reads three totals per level to size the lists. Same
//! trees, same spheres, same decisions as [`super::cpu`] (the MAC in the
//! CPU's rounding), and expansions in f64 on both, so the two agree to
//! rounding in f64.
//!
//! The FMM with a node far field (`nodes`) runs the same trees (with
//! other radii), traversal and P2P lists (`Trees`, `traverse`,
//! `p2p_lists`), and its M2L through the P2P lists too.
//!
//! List offsets are 64-bit: at 2e8 particles (gravity, p 6, theta 0.7)
//! the M2L list passes 2^31 entries, where 32-bit offsets wrapped and
//! the M2L read out of bounds.
//!
//! Nothing but those totals (and the group count) crosses the bus.

pub mod compressed;
pub(crate) mod estimate;
pub(crate) mod far_images;
mod m2l;
pub(crate) mod nodes;
pub mod periodic;
mod periodic_reference;
mod skeleton;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use std::cell::OnceCell;
use std::sync::Arc;

pub use m2l::MAX_F32_M2L_ORDER;

use super::harmonics::ncoef;
use super::Plan;
use crate::cuda::device::{
    alloc, cuda_err, device_addresses, download, launch, per_item, refs3, upload, zeros,
};
use crate::cuda::laps::Laps;
use crate::cuda::launch::{Args, Entry};
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::primitives::{scan, scanned_total};
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::{Moments, PeriodicBox};
use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;
use crate::stats::{Clock, Stage, Stats};
use crate::tree::morton::{Bounds, MAX_LEVEL};
use crate::tree::traversal::{IMAGE_BITS, MAX_IMAGED_CELLS};
use crate::tree::{DeviceGroups, DeviceOctree, TreeOrdered};
use fmm_codegen::emit::p2p_list::P2P_BLOCK;
use fmm_codegen::emit::signature::Role;
use fmm_codegen::kernel::{FarTerm, Term};
use periodic::Images;
use skeleton::DeviceFarPasses;
pub(crate) use skeleton::{Later, Share, TwoLots};

/// The highest order the GPU operators take: the M2L keeps a source's
/// singular harmonics and multipoles in shared memory, `(1 + nq) (p + 1)^2`
/// complex doubles, which must fit in 48 KB for one source at `nq = 3`.
pub const MAX_GPU_ORDER: usize = 20;

/// Threads per block of the one-thread-per-item operators.
const BLOCK: u32 = 128;

/// Threads of a block of P2M (one block per cell), M2M or L2L (one per
/// (cell, expansion)): `ops.cu` gives each thread `PER_THREAD = ceil(NC /
/// 64)` coefficients, so at least 64.
const OPERATOR_THREADS: u32 = 64;

/// A block of [`OPERATOR_THREADS`] per item of `n` (the kernels loop over
/// the items past the grid's).
fn per_cell(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.clamp(1, 1 << 20) as u32, 1, 1),
        block_dim: (OPERATOR_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Far-field terms and output slots the L2P takes.
const MAX_TERMS: usize = 4;
const MAX_OUT: usize = 8;

fn grid(n: usize) -> LaunchConfig {
    per_item(n, BLOCK)
}

/// The kind `ops.cu` gives a far-field term (`TERM_*`).
fn term_kind(t: &Term) -> i32 {
    match t {
        Term::Potential => 0,
        Term::Gradient => 1,
        Term::Curl => 2,
        Term::Stretching(_) => 3,
    }
}

/// The module name of the operators of order `p`.
pub fn ops_module(p: usize) -> String {
    format!("fmm_ops_p{p}")
}

/// The CUDA source of the operators of order `p`, with the constants it
/// takes from here.
pub fn ops_source(p: usize) -> String {
    let kind = |t: Term| term_kind(&t) as i64;
    with_defines(
        &[
            ("FMM_P", p as i64),
            ("LANE_LD", m2l::LANE_LD as i64),
            ("TERM_POTENTIAL", kind(Term::Potential)),
            ("TERM_GRADIENT", kind(Term::Gradient)),
            ("TERM_CURL", kind(Term::Curl)),
            ("TERM_STRETCHING", kind(Term::Stretching(0))),
            ("MAX_TERMS", MAX_TERMS as i64),
            ("MAX_OUT", MAX_OUT as i64),
            // 7 cells a level of the source tree, and one.
            ("TRAVERSE_STACK", 7 * (MAX_LEVEL as i64 + 1) + 1),
            ("CELL_BITS", 32 - IMAGE_BITS as i64),
        ],
        include_str!("ops.cu"),
    )
}

entry_points! {
    /// The entry points of the operators (`ops.cu`) for one order.
    pub struct Ops {
        parents = "fmm_parents",
        leaf_of = "fmm_leaf_of",
        cell_radius2 = "fmm_cell_radius2" per_precision,
        sqrt_radius = "fmm_sqrt_radius",
        traverse = "fmm_traverse",
        frontier_pieces = "fmm_frontier_pieces",
        frontier_items = "fmm_frontier_items",
        p2m = "fmm_p2m" per_precision,
        m2m = "fmm_m2m",
        full_range = "fmm_full_range",
        full_range_f32 = "fmm_full_range_f32",
        take_expansion = "fmm_take_expansion",
        add_expansion = "fmm_add_expansion",
        m2l = "fmm_m2l",
        m2l_lanes_1 = "fmm_m2l_lanes_1",
        m2l_lanes_2 = "fmm_m2l_lanes_2",
        m2l_lanes_3 = "fmm_m2l_lanes_3",
        l2l = "fmm_l2l",
        l2p = "fmm_l2p" per_precision,
    }
}

impl Ops {
    fn get<R: Real>(gpu: &Gpu, p: usize) -> Result<Ops, Error> {
        let (module, _) = gpu.module(&ops_module(p), &ops_source(p))?;
        Self::load::<R>(gpu, &module)
    }

    /// The float M2L for `nq` expansions.
    fn m2l_lanes(&self, nq: usize) -> &cudarc::driver::CudaFunction {
        match nq {
            1 => &self.m2l_lanes_1,
            2 => &self.m2l_lanes_2,
            _ => &self.m2l_lanes_3,
        }
    }
}

/// The far-field terms as `ops.cu` reads them.
struct TermTable {
    /// (kind, first output slot) of each term.
    kinds: Vec<i32>,
    coefficients: Vec<f64>,
    /// The target slot of the first component of a stretching term's vector.
    alpha: Option<usize>,
}

impl TermTable {
    fn of(def: &fmm_codegen::KernelDef, terms: &[FarTerm]) -> Result<TermTable, Error> {
        if terms.len() > MAX_TERMS || def.n_outputs() > MAX_OUT {
            return Err(Error::Cuda(format!(
                "kernel `{}`: the GPU FMM takes at most {MAX_TERMS} far-field terms and \
                 {MAX_OUT} output slots",
                def.name
            )));
        }
        let mut t = TermTable {
            kinds: Vec::new(),
            coefficients: Vec::new(),
            alpha: None,
        };
        for term in terms {
            if let Term::Stretching(ti) = term.term {
                let f = def.targets[ti].offset;
                if t.alpha.is_some_and(|a| a != f) {
                    return Err(Error::Cuda(format!(
                        "kernel `{}`: the GPU FMM takes stretching terms of one target vector only",
                        def.name
                    )));
                }
                t.alpha = Some(f);
            }
            t.kinds.extend([
                term_kind(&term.term),
                def.outputs[term.output].offset as i32,
            ]);
            t.coefficients.push(term.coefficient);
        }
        Ok(t)
    }
}

/// A tree on the device with what the FMM adds: the cells' radii (the
/// farthest particle from the centre), each cell's parent and each
/// particle's leaf; and the particles in its order.
pub(crate) struct FmmTree<R> {
    tree: DeviceOctree<R>,
    radius: CudaSlice<f64>,
    pos: [CudaSlice<R>; 3],
    parent: CudaSlice<i32>,
    leaf_of: CudaSlice<i32>,
}

impl<R: Real> FmmTree<R> {
    /// What the FMM adds to a tree with its particles in its order; the
    /// field slots are handed back.
    fn of(gpu: &Gpu, ops: &Ops, t: TreeOrdered<R>) -> Result<(Self, Vec<CudaSlice<R>>), Error> {
        let s = gpu.stream();
        let TreeOrdered { tree, pos, slots } = t;
        let (nc, n) = (tree.n_cells, tree.n);
        let (nci, ni) = (nc as i32, n as i32);
        let mut parent = alloc::<i32>(s, nc)?;
        launch!(s, ops.parents, grid(nc), "fmm_parents";
            &nci, &tree.more, &tree.next, &tree.n_children, &mut parent)?;
        let mut leaf_of = alloc::<i32>(s, n)?;
        launch!(s, ops.leaf_of, grid(nc), "fmm_leaf_of";
            &nci, &tree.n_children, &tree.begin, &tree.end, &mut leaf_of)?;
        // Squared radii as bits by atomicMax from zero, then the roots.
        let mut radius = zeros::<f64>(s, nc)?;
        launch!(s, ops.cell_radius2, grid(n), "fmm_cell_radius2";
            &ni, &leaf_of, &parent, &tree.center[0], &tree.center[1], &tree.center[2],
            &pos[0], &pos[1], &pos[2], &mut radius)?;
        launch!(s, ops.sqrt_radius, grid(nc), "fmm_sqrt_radius"; &nci, &mut radius)?;
        let t = FmmTree {
            tree,
            radius,
            pos,
            parent,
            leaf_of,
        };
        Ok((t, slots))
    }
}

/// The interaction lists on the device: for every target cell its M2L
/// list `m2l[m2l_begin[c]..m2l_end[c]]` and, for leaves, its P2P list,
/// with 64-bit offsets.
struct DeviceLists {
    m2l_begin: CudaSlice<i64>,
    m2l_end: CudaSlice<i64>,
    m2l: CudaSlice<i32>,
    p2p_begin: CudaSlice<i64>,
    p2p_end: CudaSlice<i64>,
    p2p: CudaSlice<i32>,
    n_m2l: usize,
}

/// The P2P part of [`DeviceLists`], kept past the M2L (whose lists are
/// freed as soon as it has run).
struct NearLists {
    begin: CudaSlice<i64>,
    end: CudaSlice<i64>,
    list: CudaSlice<i32>,
}

impl DeviceLists {
    /// The P2P lists; the M2L lists are dropped.
    fn into_near(self) -> NearLists {
        NearLists {
            begin: self.p2p_begin,
            end: self.p2p_end,
            list: self.p2p,
        }
    }
}

/// `pool` with room for `need` entries, its first `used` kept.
fn grow(
    s: &Arc<CudaStream>,
    pool: CudaSlice<i32>,
    used: usize,
    need: usize,
) -> Result<CudaSlice<i32>, Error> {
    if need <= pool.len() {
        return Ok(pool);
    }
    let mut bigger = alloc::<i32>(s, need.max(pool.len() + pool.len() / 2))?;
    if used > 0 {
        s.memcpy_dtod(&pool.slice(0..used), &mut bigger.slice_mut(0..used))
            .map_err(cuda_err("copy on the device"))?;
    }
    Ok(bigger)
}

/// The dual tree traversal on the device (see the module's doc), against
/// the source tree's `images` (free space's one, or a periodic box's
/// nearest: the root's frontier is the source root's every image, and
/// entries name the image).
fn traverse<R: Real>(
    gpu: &Gpu,
    ops: &Ops,
    tt: &FmmTree<R>,
    st: &FmmTree<R>,
    (theta, near): (f64, f64),
    images: &Images<R>,
) -> Result<DeviceLists, Error> {
    let s = gpu.stream();
    let nt = tt.tree.n_cells;
    let (t, u) = (&tt.tree, &st.tree);
    let mut lists = DeviceLists {
        m2l_begin: zeros(s, nt)?,
        m2l_end: zeros(s, nt)?,
        m2l: alloc(s, 64 * nt)?,
        p2p_begin: zeros(s, nt)?,
        p2p_end: zeros(s, nt)?,
        p2p: alloc(s, 32 * nt)?,
        n_m2l: 0,
    };
    // The root's frontier is the source root, each of its images.
    let n_images = images.len();
    if n_images > 1 && u.n_cells > MAX_IMAGED_CELLS {
        return Err(Error::BadOption(format!(
            "the GPU FMM in a periodic box takes at most {MAX_IMAGED_CELLS} source cells, not {}: \
             use larger leaves (FmmOptions::ncrit)",
            u.n_cells
        )));
    }
    let mut f_end_host = vec![0i64; nt];
    f_end_host[0] = n_images as i64;
    let mut f_begin = zeros::<i64>(s, nt)?;
    let mut f_end = upload(s, &f_end_host)?;
    // The children's frontiers, written while a level reads its own.
    let mut next_begin = zeros::<i64>(s, nt)?;
    let mut next_end = zeros::<i64>(s, nt)?;
    let roots: Vec<i32> = (0..n_images)
        .map(|i| crate::tree::traversal::entry(0, i) as i32)
        .collect();
    let mut frontier = upload(s, &roots)?;
    let overflow = zeros::<i32>(s, 1)?;
    let theta2 = theta * theta;
    let (mut m2l_used, mut p2p_used) = (0usize, 0usize);
    // A level of fewer cells than this has its frontiers cut into pieces
    // (`fmm_frontier_items`).
    const SPLIT_BELOW: usize = 1 << 14;
    // Frontier entries a piece.
    const PIECE: i32 = 8;
    let no_pieces = (
        zeros::<i32>(s, 1)?,
        zeros::<i64>(s, 1)?,
        zeros::<i64>(s, 1)?,
    );
    let mut lap = Laps::new(Some(gpu), "traversal");
    lap.say("set up")?;
    for l in 0..tt.tree.levels() {
        let (cells_n, cells) = tt.tree.level(l);
        let split = cells_n < SPLIT_BELOW;
        // The level's items: its cells, or the pieces of their frontiers.
        let pieces = if split {
            let ci = cells_n as i32;
            let mut counts = zeros::<u64>(s, cells_n + 1)?;
            launch!(s, ops.frontier_pieces, grid(cells_n), "fmm_frontier_pieces";
                &ci, &cells, &f_begin, &f_end, &PIECE, &mut counts)?;
            scan(gpu, &mut counts, cells_n + 1)?;
            let items = scanned_total(gpu, &counts, cells_n)? as usize;
            let mut of = alloc::<i32>(s, items)?;
            let (mut lo, mut hi) = (alloc::<i64>(s, items)?, alloc::<i64>(s, items)?);
            launch!(s, ops.frontier_items, grid(cells_n), "fmm_frontier_items";
                &ci, &cells, &f_begin, &f_end, &PIECE, &counts, &mut of, &mut lo, &mut hi)?;
            Some((items, of, lo, hi))
        } else {
            None
        };
        let n = pieces.as_ref().map_or(cells_n, |p| p.0);
        let (piece_of, piece_lo, piece_hi) = match &pieces {
            Some((_, of, lo, hi)) => (of, lo, hi),
            None => (&no_pieces.0, &no_pieces.1, &no_pieces.2),
        };
        let (ni, spliti) = (n as i32, split as i32);
        // Counts per item, n + 1 each (the last stays 0 and receives the
        // total when scanned).
        let mut counts = [zeros::<u64>(s, n + 1)?, zeros(s, n + 1)?, zeros(s, n + 1)?];
        let mut deferred = alloc::<i32>(s, 1)?;
        let (mut m2l_base, mut p2p_base) = (0i64, 0i64);
        for emit in [0i32, 1] {
            let [c0, c1, c2] = &mut counts;
            let mut b = s.launch_builder(&ops.traverse);
            b.arg(&ni).arg(&cells).arg(&emit).arg(&theta2).arg(&near);
            for tree in [(t, &tt.radius), (u, &st.radius)] {
                let (x, r) = tree;
                b.arg(&x.center[0])
                    .arg(&x.center[1])
                    .arg(&x.center[2])
                    .arg(r)
                    .arg(&x.n_children)
                    .arg(&x.more)
                    .arg(&x.next);
            }
            b.arg(&images.shift)
                .arg(&f_begin)
                .arg(&f_end)
                .arg(&frontier)
                .arg(&spliti)
                .arg(piece_of)
                .arg(piece_lo)
                .arg(piece_hi)
                .arg(c0)
                .arg(c1)
                .arg(c2)
                .arg(&m2l_base)
                .arg(&p2p_base)
                .arg(&mut lists.m2l)
                .arg(&mut lists.m2l_begin)
                .arg(&mut lists.m2l_end)
                .arg(&mut lists.p2p)
                .arg(&mut lists.p2p_begin)
                .arg(&mut lists.p2p_end)
                .arg(&mut deferred)
                .arg(&mut next_begin)
                .arg(&mut next_end)
                .arg(&overflow);
            // SAFETY: the arguments follow fmm_traverse's signature; the
            // counts hold n + 1 entries, the pools and `deferred` the totals
            // the first pass counted.
            unsafe { b.launch(grid(n)) }.map_err(cuda_err("launching fmm_traverse"))?;
            if emit == 0 {
                let mut tot = [0usize; 3];
                for (c, total) in counts.iter_mut().zip(&mut tot) {
                    scan(gpu, c, n + 1)?;
                    *total = scanned_total(gpu, c, n)? as usize;
                }
                let [tm, tp, td] = tot;
                let m2l = std::mem::replace(&mut lists.m2l, alloc(s, 1)?);
                lists.m2l = grow(s, m2l, m2l_used, m2l_used + tm)?;
                let p2p = std::mem::replace(&mut lists.p2p, alloc(s, 1)?);
                lists.p2p = grow(s, p2p, p2p_used, p2p_used + tp)?;
                deferred = alloc::<i32>(s, td)?;
                (m2l_base, p2p_base) = (m2l_used as i64, p2p_used as i64);
                m2l_used += tm;
                p2p_used += tp;
                lap.say(&format!(
                    "level {l}, {n} items: counted ({tm} M2L, {tp} P2P)"
                ))?;
            }
        }
        lap.say(&format!("level {l}: written"))?;
        frontier = deferred;
        std::mem::swap(&mut f_begin, &mut next_begin);
        std::mem::swap(&mut f_end, &mut next_end);
    }
    if download(s, &overflow, 1)?[0] != 0 {
        return Err(Error::Cuda(format!(
            "the FMM traversal's stack overflowed (a source tree deeper than {} levels)",
            MAX_LEVEL + 1
        )));
    }
    lists.n_m2l = m2l_used;
    Ok(lists)
}

/// The fast multipole method of kernel `K` on `gpu`, on particles already
/// there (input order), as `plan` says (its far field the Laplace
/// expansions, `plan.settings.p` at most [`MAX_GPU_ORDER`]); the problem
/// is not empty. Its trees are `shared`'s where an earlier run of the
/// evaluation built them, else built and left there. Returns the outputs
/// in the targets' input order, on the device.
pub(crate) fn run<K: Kernel, R: Real>(
    gpu: &Gpu,
    plan: &Plan<'_, R>,
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
    shared: &SharedTrees<R>,
    clock: &mut Clock<'_>,
) -> Result<Vec<CudaSlice<R>>, Error> {
    let far = Laplace::of::<K>(gpu, plan)?;
    skeleton::run::<K, R, _>(gpu, plan, &far, targets, sources, shared, clock)
}

/// [`run`] of sources in two lots, the second asked for by `later` once
/// the first's work is on the GPU ([`skeleton::run_in_two_lots`]): one
/// evaluation, one downward pass. Returns the outputs (the targets'
/// input order, on the device) and the second lot.
pub(crate) fn run_in_two_lots<K: Kernel, R: Real>(
    gpu: &Gpu,
    plan: &Plan<'_, R>,
    targets: &DeviceParticles<R>,
    first: &DeviceParticles<R>,
    second: (Share<'_, R>, Later<'_, R>),
    clock: &mut Clock<'_>,
) -> Result<TwoLots<R>, Error> {
    let far = Laplace::of::<K>(gpu, plan)?;
    let beside = match beside_of(gpu) {
        Some(b) => Some((b, Laplace::of::<K>(b, plan)?)),
        None => None,
    };
    let fars = (far, beside);
    skeleton::run_in_two_lots::<K, R, _>(gpu, plan, fars, (targets, first), second, clock)
}

/// The process's GPU on its second stream ([`Gpu::shared_beside`]) where
/// `gpu` is the process's GPU (the one it runs beside), for the second
/// lot of an FMM in two lots ([`skeleton::run_in_two_lots`]).
pub(crate) fn beside_of(gpu: &Gpu) -> Option<&'static Gpu> {
    let first = Gpu::shared().ok()?;
    std::ptr::eq(first, gpu)
        .then(Gpu::shared_beside)
        .and_then(Result::ok)
}

/// The Laplace expansions' passes of the FMM on the GPU ([`skeleton`]):
/// multipoles and locals of order `p` in f64 (`nq` expansions a cell of
/// the strengths `strength`, `nc` coefficients each, of the positions
/// taken to the unit box), the far outputs through the kernel's far
/// `terms` (`table`, as `ops.cu` reads them).
struct Laplace<'a, R> {
    gpu: &'a Gpu,
    plan: &'a Plan<'a, R>,
    def: &'static fmm_codegen::KernelDef,
    table: TermTable,
    strength: &'a [usize],
    terms: &'a [FarTerm],
    nq: usize,
    nc: usize,
    ops: Ops,
}

impl<'a, R: Real> Laplace<'a, R> {
    /// The Laplace passes of kernel `K` as `plan` says.
    fn of<K: Kernel>(gpu: &'a Gpu, plan: &'a Plan<'a, R>) -> Result<Self, Error> {
        let def = K::def();
        let p = plan.settings.p;
        if p > MAX_GPU_ORDER {
            return Err(Error::BadOption(format!(
                "the GPU FMM takes orders up to {MAX_GPU_ORDER}, not {p} (use the CPU for higher \
                 orders)"
            )));
        }
        let (strength, terms) = plan.laplace();
        Ok(Laplace {
            gpu,
            plan,
            def,
            table: TermTable::of(def, terms)?,
            strength,
            terms,
            nq: strength.len(),
            nc: ncoef(p),
            ops: Ops::get::<R>(gpu, p)?,
        })
    }

    /// The strength slot of expansion `k` (the last again past `nq`: the
    /// kernels take three).
    fn q<'t>(&self, trees: &'t Trees<R>, k: usize) -> &'t CudaSlice<R> {
        &trees.sslots[self.strength[k.min(self.nq - 1)]]
    }
}

impl<R: Real> DeviceFarPasses<R> for Laplace<'_, R> {
    /// A periodic box's moments of the cell.
    type Own = Option<Moments>;
    type Multipoles = CudaSlice<f64>;

    fn ops(&self) -> &Ops {
        &self.ops
    }

    /// Both trees in one root cube in free space (as the CPU's): cells of
    /// two trees on one lattice.
    fn cube<'b>(&self, pbox: Option<&'b PeriodicBox>) -> Cube<'b> {
        pbox.map_or(Cube::Union, Cube::Box)
    }

    fn adjust(&self, _: &mut FmmTree<R>) -> Result<(), Error> {
        Ok(())
    }

    /// A periodic box's cell must be neutral: said before any more work.
    fn own(&self, trees: &Trees<R>) -> Result<Option<Moments>, Error> {
        let Some(b) = self.plan.domain.periodic() else {
            return Ok(None);
        };
        let q = |k| self.q(trees, k);
        let m = periodic::moments(self.gpu, b, &trees.source.pos, [q(0), q(1), q(2)], self.nq)?;
        super::check_neutral(b, &m, self.def, self.terms, self.nq)?;
        Ok(Some(m))
    }

    /// P2M at the leaves, M2M level by level up, of the positions taken
    /// to the unit box (`ops.cu`).
    fn upward(&self, trees: &Trees<R>, _: &Self::Own) -> Result<CudaSlice<f64>, Error> {
        let st = &trees.source;
        let q = |k| self.q(trees, k);
        upward(
            self.gpu,
            &self.ops,
            (&st.tree, &st.pos),
            [q(0), q(1), q(2)],
            self.nq,
            self.nc,
            unit_scale(st.tree.bounds.half),
        )
    }

    /// M2L, one target cell per block; a periodic box's farther images
    /// into the target root's expansion.
    fn m2l(
        &self,
        trees: &Trees<R>,
        lists: &DeviceLists,
        images: &Images<R>,
        mult: CudaSlice<f64>,
        moments: &Self::Own,
        stats: &mut Stats,
    ) -> Result<(CudaSlice<f64>, f64), Error> {
        let (st, tt) = (&trees.source, trees.target());
        let (p, u) = (self.plan.settings.p, unit_scale(st.tree.bounds.half));
        let (mut local, m2l_kind, in_double) = m2l::m2l(
            self.gpu,
            &self.ops,
            tt,
            st,
            lists,
            images,
            &mult,
            self.nq,
            p,
            u,
            &self.plan.opts.gpu,
        )?;
        if let (Some(b), Some(m)) = (self.plan.domain.periodic(), moments) {
            let roots = periodic::Roots {
                source_center: st.tree.bounds.center,
                target_center: tt.tree.bounds.center,
                u,
                p,
                nq: self.nq,
            };
            let levels = b.levels_for(super::expected_error(self.plan));
            periodic::add_far_images(self.gpu, b, m, levels, &roots, &mult, &mut local)?;
        }
        stats.m2l_kind = Some(m2l_kind);
        stats.m2l_in_double += in_double;
        Ok((local, 0.0))
    }

    /// L2L level by level down, L2P at every target into the output
    /// arrays (tree order), which the P2P lists then add to; a periodic
    /// box's background at every target.
    fn downward(
        &self,
        trees: &Trees<R>,
        moments: &Self::Own,
        mut local: CudaSlice<f64>,
        out: &mut [CudaSlice<R>],
    ) -> Result<(), Error> {
        let (st, tt) = (&trees.source, trees.target());
        let s = self.gpu.stream();
        let (nqi, u) = (self.nq as i32, unit_scale(st.tree.bounds.half));
        for l in 1..tt.tree.levels() {
            let (nl, cells) = tt.tree.level(l);
            let nli = nl as i32;
            launch!(s, self.ops.l2l, per_cell(nl * self.nq), "fmm_l2l";
                &nli, &cells, &tt.parent, &tt.tree.center[0], &tt.tree.center[1],
                &tt.tree.center[2], &nqi, &u, &mut local)?;
        }
        let cells = (&tt.leaf_of, [0, 1, 2].map(|a| &tt.tree.center[a]));
        l2p(
            self.gpu,
            &self.ops,
            &self.table,
            (&tt.pos, &trees.tslots),
            cells,
            (&local, self.nq, u),
            out,
        )?;
        drop(local);
        if let (Some(b), Some(m)) = (self.plan.domain.periodic(), moments) {
            periodic::add_background(self.gpu, b, m, (self.def, self.terms), &tt.pos, out)?;
        }
        Ok(())
    }
}

/// L2P at every target `tpos` (tree order; `tslots` its fields) of the
/// local expansions `local` (`nq` a cell, of positions times `u`) of the
/// cells `leaf_of` names (their centres `center`), through the kernel's
/// far terms `table`: written into `out`, one array per output slot.
fn l2p<R: Real>(
    gpu: &Gpu,
    ops: &Ops,
    table: &TermTable,
    (tpos, tslots): (&[CudaSlice<R>; 3], &[CudaSlice<R>]),
    (leaf_of, center): (&CudaSlice<i32>, [&CudaSlice<f64>; 3]),
    (local, nq, u): (&CudaSlice<f64>, usize, f64),
    out: &mut [CudaSlice<R>],
) -> Result<(), Error> {
    let s = gpu.stream();
    let m = tpos[0].len();
    let d_term = upload(s, &table.kinds)?;
    let d_coef = upload(s, &table.coefficients)?;
    // A stretching term's target vector; any array where there is none
    // (the kernel reads it only for a stretching term).
    let a = |c: usize| match table.alpha {
        Some(f) => &tslots[f + c],
        None => &tpos[0],
    };
    let (mi, nqi, nti, noi) = (
        m as i32,
        nq as i32,
        table.coefficients.len() as i32,
        out.len() as i32,
    );
    let outs = upload(s, &device_addresses(s, out))?;
    launch!(s, ops.l2p, grid(m), "fmm_l2p";
        &mi, leaf_of, center[0], center[1], center[2],
        &tpos[0], &tpos[1], &tpos[2], &nqi, local, &nti, &d_term, &d_coef,
        a(0), a(1), a(2), &u, &noi, &outs)
}

/// P2M at the leaves of `tree` (its points `pos`) and M2M level by level
/// up: the multipoles of its cells, `nq` expansions a cell of the strengths `q` (the first `nq`
/// read), `nc` coefficients each, of the positions times `u`.
fn upward<R: Real>(
    gpu: &Gpu,
    ops: &Ops,
    (tree, pos): (&DeviceOctree<R>, &[CudaSlice<R>; 3]),
    q: [&CudaSlice<R>; 3],
    nq: usize,
    nc: usize,
    u: f64,
) -> Result<CudaSlice<f64>, Error> {
    let s = gpu.stream();
    let snc = tree.n_cells;
    let (snci, nqi) = (snc as i32, nq as i32);
    let mut mult = zeros::<f64>(s, 2 * snc * nq * nc)?;
    launch!(s, ops.p2m, per_cell(snc), "fmm_p2m";
        &snci, &tree.n_children, &tree.begin, &tree.end,
        &tree.center[0], &tree.center[1], &tree.center[2],
        &pos[0], &pos[1], &pos[2], &nqi, q[0], q[1], q[2], &u, &mut mult)?;
    for l in (0..tree.levels()).rev() {
        let (nl, cells) = tree.level(l);
        let nli = nl as i32;
        launch!(s, ops.m2m, per_cell(nl * nq), "fmm_m2m";
            &nli, &cells, &tree.more, &tree.next, &tree.n_children,
            &tree.center[0], &tree.center[1], &tree.center[2], &nqi, &u, &mut mult)?;
    }
    Ok(mult)
}

/// The periodic sums of kernel `K` in `b` at the targets `idx` of
/// `targets` from `sources`, good to a thirtieth of `tol`, as the GPU's
/// tolerance computes them on the device to estimate its error against:
/// what a test holds against the host's
/// [`crate::methods::fmm::periodic_reference::periodic_at`] (one vector
/// per output slot, one value per target of `idx`).
#[doc(hidden)]
pub fn periodic_sums_on_device<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    b: &PeriodicBox,
    tol: f64,
    targets: &Particles<R>,
    idx: &[usize],
    sources: &Particles<R>,
) -> Result<Vec<Vec<f64>>, Error> {
    let src = DeviceParticles::upload(gpu, sources)?;
    let cols: Vec<Vec<f64>> = targets
        .pos
        .iter()
        .chain(&targets.slots)
        .map(|v| idx.iter().map(|&i| v[i].to_f64()).collect())
        .collect();
    let (st, sslots) = periodic_reference::source_tree(gpu, b, tol, &src)?;
    periodic_reference::periodic_sums::<K, R>(gpu, params, b, tol, (&st, &sslots), &cols)
}

/// The factor that takes positions to the unit box for the expansions:
/// `2^-ilogb(half)` of the source root's half side, a power of two (exact
/// in every product), so the root's half side becomes [1, 2). 1 for a
/// root of no size (one point).
pub(super) fn unit_scale(half: f64) -> f64 {
    if half > 0.0 && half.is_finite() {
        2f64.powi(-half.log2().floor() as i32)
    } else {
        1.0
    }
}

/// The near field (the P2P lists `near` over the target groups `groups`)
/// added to the far field's outputs `out` (target tree order), then the
/// outputs put back in the caller's order on the device: the last stage
/// of both GPU FMMs.
#[allow(clippy::too_many_arguments)]
fn near_field_and_scatter<R: Real>(
    gpu: &Gpu,
    p2p: &Entry,
    params: &[R],
    trees: &Trees<R>,
    groups: DeviceGroups,
    near: NearLists,
    images: &Images<R>,
    mut out: Vec<CudaSlice<R>>,
    clock: &mut Clock<'_>,
) -> Result<Vec<CudaSlice<R>>, Error> {
    let pairs = near_field(gpu, p2p, params, trees, &groups, near, images, &mut out)?;
    clock.stats().p2p = pairs.read(gpu)?;
    clock.lap(Stage::P2p)?;
    drop(groups);
    // Back to the caller's order, on the device.
    trees.target().tree.scatter_all(gpu, out)
}

/// The near field (the P2P lists `near` over the target groups `groups`)
/// added to `out` (target tree order), launched; the pairs counted.
#[allow(clippy::too_many_arguments)]
fn near_field<R: Real>(
    gpu: &Gpu,
    p2p: &Entry,
    params: &[R],
    trees: &Trees<R>,
    groups: &DeviceGroups,
    near: NearLists,
    images: &Images<R>,
    out: &mut [CudaSlice<R>],
) -> Result<Pairs, Error> {
    let (st, tt) = (&trees.source, trees.target());
    p2p_lists(
        gpu,
        p2p,
        params,
        &Points::of(tt.tree.n, &tt.pos, &trees.tslots),
        groups,
        [&near.begin, &near.end],
        &near.list,
        &images.shift_real,
        [&st.tree.begin, &st.tree.end],
        &Points::of(st.tree.n, &st.pos, &trees.sslots),
        out,
        true,
    )
}

/// Points as a P2P-list launch reads them, in their tree's order: how
/// many, their positions and their field slots.
struct Points<'a, R> {
    n: usize,
    pos: &'a [CudaSlice<R>; 3],
    slots: Vec<&'a CudaSlice<R>>,
}

impl<'a, R> Points<'a, R> {
    fn of(n: usize, pos: &'a [CudaSlice<R>; 3], slots: &'a [CudaSlice<R>]) -> Self {
        Points {
            n,
            pos,
            slots: slots.iter().collect(),
        }
    }
}

/// The kernel's P2P-list entry `entry` (`Entry::p2p_list`): every group of
/// `targets` (`begin..end`, in cell `cell`) takes the points of `sources`
/// in the source cells of its cell's list, `list[lists[0][c]..lists[1][c]]`,
/// source cell `b` holding `cells[0][b]..cells[1][b]`, moved by the
/// lattice shift `shift[3 i..3 i + 3]` of the image `i` an entry names
/// (free space: entries name image 0, of no shift); the sums are added
/// to `out` (`accumulate`) or written there. The near field of both FMMs,
/// and the node far fields' M2L (targets and sources their cells' nodes).
/// Launched, not waited for: returns the pairs it counts, read later.
#[allow(clippy::too_many_arguments)]
fn p2p_lists<R: Real>(
    gpu: &Gpu,
    entry: &Entry,
    params: &[R],
    targets: &Points<'_, R>,
    groups: &DeviceGroups,
    lists: [&CudaSlice<i64>; 2],
    list: &CudaSlice<i32>,
    shift: &CudaSlice<R>,
    cells: [&CudaSlice<i32>; 2],
    sources: &Points<'_, R>,
    out: &mut [CudaSlice<R>],
    accumulate: bool,
) -> Result<Pairs, Error> {
    let s = gpu.stream();
    let mut counts = zeros::<u64>(s, 1)?;
    {
        let mut a = Args::new();
        a.int(Role::TargetCount, targets.n as i32)
            .read(Role::TargetPositions, targets.pos)
            .read(Role::TargetSlots, targets.slots.iter().copied())
            .int(Role::GroupCount, groups.n as i32)
            .read(Role::Groups, [&groups.begin, &groups.end, &groups.cell])
            .read(Role::Lists, lists)
            .read(Role::Lists, [list])
            .read(Role::ImageShifts, [shift])
            .read(Role::Cells, cells)
            .int(Role::SourceCount, sources.n as i32)
            .read(Role::SourcePositions, sources.pos)
            .read(Role::SourceSlots, sources.slots.iter().copied())
            .values(Role::Params, params)
            .write(Role::Outputs, out.iter_mut())
            .int(Role::Accumulate, accumulate as i32)
            .write(Role::Counts, [&mut counts]);
        let cfg = LaunchConfig {
            grid_dim: (groups.n.clamp(1, 1 << 20) as u32, 1, 1),
            block_dim: (P2P_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments are checked against the P2P lists'
        // signature (`Signature::p2p_list`); the groups lie within the
        // targets, the lists name source cells, whose ranges lie within the
        // sources, and the outputs hold a value a target.
        unsafe { entry.launch(a, s, cfg, cuda_err("launching the P2P lists")) }?;
    }
    Ok(Pairs(counts))
}

/// The pairs a P2P-list launch counts, on the device until read (the
/// read waits for the launch: the node far fields' M2L, which does not
/// read them, and the near field of two lots' first, which runs beside
/// the second lot's tree, do not wait).
#[must_use = "the pairs are read, or dropped on purpose"]
pub(crate) struct Pairs(CudaSlice<u64>);

impl Pairs {
    /// The pairs counted, once the launch is done.
    pub(crate) fn read(self, gpu: &Gpu) -> Result<u64, Error> {
        Ok(download(gpu.stream(), &self.0, 1)?[0])
    }
}

/// The trees of an evaluation's runs, built by the first and kept for
/// the rest and for its error estimate: a tolerance's runs differ in `p`
/// and theta, not in their leaves, and the estimate takes its samples
/// from the targets' Morton order and, in a periodic box, sums its
/// reference on the sources' tree (at 10^7 in a box, an H100: a sort of
/// the estimate's own and its tree took 16 ms of an evaluation's 0.153 s).
pub(crate) struct SharedTrees<R>(OnceCell<Trees<R>>);

impl<R> Default for SharedTrees<R> {
    fn default() -> Self {
        SharedTrees(OnceCell::new())
    }
}

impl<R> SharedTrees<R> {
    /// The trees, where a run has built them.
    pub(crate) fn get(&self) -> Option<&Trees<R>> {
        self.0.get()
    }

    /// The trees, built by `build` where no run has yet.
    fn get_or_build(
        &self,
        build: impl FnOnce() -> Result<Trees<R>, Error>,
    ) -> Result<&Trees<R>, Error> {
        if self.0.get().is_none() {
            let _ = self.0.set(build()?);
        }
        Ok(self.0.get().expect("set above"))
    }
}

/// Both trees of a run, the particles in their orders. Targets at the
/// sources' points (forces on the particles themselves) have the sources'
/// tree: built once.
pub(crate) struct Trees<R> {
    source: FmmTree<R>,
    /// The targets' own tree (`None`: the sources').
    target: Option<FmmTree<R>>,
    /// The sources' and the targets' field slots, each in its tree's order.
    sslots: Vec<CudaSlice<R>>,
    tslots: Vec<CudaSlice<R>>,
}

impl<R> Trees<R> {
    /// The targets' Morton order (the input index at each place of their
    /// tree), the rest dropped.
    fn into_target_order(self) -> CudaSlice<u32> {
        self.target.unwrap_or(self.source).tree.order
    }
}

/// The root cube of a run's trees.
#[derive(Clone, Copy)]
enum Cube<'a> {
    /// Each tree its points' own.
    Own,
    /// Targets apart and the sources in one, the union of theirs, so that
    /// their cells lie on one lattice (the compressed M2L's operators are
    /// per offset; the CPU builds its trees so, `Bounds::union`).
    Union,
    /// A periodic box: both trees in the box, of the points wrapped into
    /// it (copies, [`periodic::wrapped`]).
    Box(&'a PeriodicBox),
    /// Both trees in a cube given with the problem (a distributed
    /// evaluation's lattice, [`crate::Problem::cube`]), grown to hold the
    /// points where it does not.
    Given(Bounds),
}

impl<'a> Cube<'a> {
    /// This far field's cube, or outside a periodic box the problem's
    /// where it gives one.
    pub(super) fn or_given(self, given: Option<Bounds>) -> Cube<'a> {
        match (self, given) {
            (Cube::Box(b), _) => Cube::Box(b),
            (_, Some(c)) => Cube::Given(c),
            (c, None) => c,
        }
    }
}

impl<R: Real> Trees<R> {
    /// The trees of `targets` and `sources`, leaves of at most `ncrit`, in
    /// the root cube `cube`, each passed to `adjust` once built (the node
    /// far fields give the cells other radii).
    fn build(
        gpu: &Gpu,
        ops: &Ops,
        targets: &DeviceParticles<R>,
        sources: &DeviceParticles<R>,
        ncrit: usize,
        cube: Cube<'_>,
        adjust: impl Fn(&mut FmmTree<R>) -> Result<(), Error>,
    ) -> Result<Self, Error> {
        let given = sources
            .positions()
            .ok_or_else(|| Error::BadOption("the sources have no positions of their own".into()))?;
        let wrapped_sources;
        let spos = match cube {
            Cube::Box(b) => {
                wrapped_sources = periodic::wrapped(gpu, b, refs3(given))?;
                &wrapped_sources
            }
            _ => given,
        };
        let root = match (cube, targets.positions()) {
            (Cube::Box(b), _) => Some(periodic::root_cube(b)),
            (Cube::Union, Some(tpos)) => {
                let sb = DeviceOctree::bounds(gpu, refs3(spos))?;
                Some(sb.union(&DeviceOctree::bounds(gpu, refs3(tpos))?))
            }
            (Cube::Given(c), tpos) => {
                let mut span = DeviceOctree::span(gpu, refs3(spos))?;
                if let Some(t) = tpos {
                    span = span.join(&DeviceOctree::span(gpu, refs3(t))?);
                }
                Some(c.holding(&span))
            }
            _ => None,
        };
        // Targets apart in the sources' root cube: the target tree is split
        // as far as the source tree is around them (its keys guide it).
        let guided = root.is_some() && targets.positions().is_some();
        let (mut source, sslots) = FmmTree::of(
            gpu,
            ops,
            TreeOrdered::build_guided(
                gpu,
                refs3(spos),
                sources.slots(),
                ncrit,
                root,
                None,
                guided,
            )?,
        )?;
        adjust(&mut source)?;
        let (target, tslots) = match targets.positions() {
            None => (None, source.tree.gather_all(gpu, targets.slots())?),
            Some(given) => {
                let wrapped_targets;
                let tpos = match cube {
                    Cube::Box(b) => {
                        wrapped_targets = periodic::wrapped(gpu, b, refs3(given))?;
                        &wrapped_targets
                    }
                    _ => given,
                };
                let guide = source.tree.keys.take();
                let (mut t, slots) = FmmTree::of(
                    gpu,
                    ops,
                    TreeOrdered::build_guided(
                        gpu,
                        refs3(tpos),
                        targets.slots(),
                        ncrit,
                        root,
                        guide.as_ref(),
                        false,
                    )?,
                )?;
                adjust(&mut t)?;
                (Some(t), slots)
            }
        };
        Ok(Trees {
            source,
            target,
            sslots,
            tslots,
        })
    }

    /// The target tree.
    pub(crate) fn target(&self) -> &FmmTree<R> {
        self.target.as_ref().unwrap_or(&self.source)
    }
}
