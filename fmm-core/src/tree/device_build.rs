//! The octree built on the GPU from positions already there (hu2011's
//! parallel data-structure construction), cell for cell the tree of
//! [`Octree::build`], and the cells' pseudo-sources built there too
//! ([`device_pseudo_sources`]).
//!
//! Why on the device: for millions of particles the CPU build (sort and
//! split) costs more than the GPU walk, and uploading a CPU-built tree means
//! moving the particles twice. Here no particle data crosses the bus: the
//! host reads back six numbers (the bounding box, to compute the cube with
//! [`Bounds::of`] itself, so the cube is the CPU's to the bit) and one count
//! per level (to size the next level's launch).
//!
//! Why identical to the CPU tree and not merely equivalent: the GPU and CPU
//! walks can then be checked against each other interaction for
//! interaction, and a test can compare the trees cell by cell. That fixes
//! three choices: keys are computed in double from the positions converted
//! to f64, with the CPU's operations and rounding; the sort is a *stable*
//! radix sort (hu2011's bin sort ranks points within a bin in atomicAdd
//! order, which is neither deterministic nor the CPU's order of equal
//! keys); and cells are numbered depth first from subtree sizes, as the
//! CPU's recursive split numbers them.
//!
//! The stages (kernels in `build.cu`): bounding box by reduction; Morton
//! keys; 16 passes of a 4-bit LSD radix sort of (key, index) pairs over the
//! 63 key bits (per-block bin counts, an exclusive prefix scan of them, a
//! stable scatter); cells level by level (each open cell's octant runs by
//! binary search over the sorted keys, the non-empty ones compacted into
//! the next level by a prefix scan; a cell is a leaf at `ncrit` particles
//! or fewer, or at [`MAX_LEVEL`]); subtree sizes bottom-up; depth-first
//! indices and the `next`/`more` links of nakasato2009 top-down.
//!
//! CUDA refuses empty allocations, so every device array here holds at
//! least one element: `n` and `n_cells` are the counts.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaStream, DeviceRepr, DriverError, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
/// The device arrays of this API, for callers that do not depend on cudarc.
pub use cudarc::driver::{CudaSlice, CudaView};

use super::morton::{Bounds, MAX_LEVEL};
use super::octree::{Cell, Octree};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::kernel::MAX_SLOTS;
use crate::real::Real;

/// The CUDA source of the tree construction and pseudo-source kernels.
pub const BUILD_SOURCE: &str = include_str!("build.cu");

/// The module name the kernels are compiled and cached under.
pub const BUILD_MODULE: &str = "fmm_tree_build";

/// Every entry point of [`BUILD_SOURCE`] (the precision-specific ones end
/// in `_f32` / `_f64`).
pub const BUILD_ENTRIES: &[&str] = &[
    "scan_tiles",
    "scan_add",
    "bbox_final",
    "radix_hist",
    "radix_scatter",
    "split_count",
    "split_emit",
    "subtree_size",
    "place",
    "children8",
    "group_count",
    "group_emit",
    "bbox_f32",
    "keys_f32",
    "gather_f32",
    "weight_f32",
    "moments_f32",
    "finish_f32",
    "scatter_f32",
    "to_real_f32",
    "group_box_f32",
    "bbox_f64",
    "keys_f64",
    "gather_f64",
    "weight_f64",
    "moments_f64",
    "finish_f64",
    "scatter_f64",
    "to_real_f64",
    "group_box_f64",
];

// These match the #defines of build.cu.
const BLOCK: u32 = 256;
const SCAN_TILE: usize = 1024;
const SORT_TILE: usize = 2048;
const RADIX_BITS: usize = 4;
const RADIX: usize = 1 << RADIX_BITS;
/// Significant bits of a key: 21 levels of 3.
const KEY_BITS: usize = 3 * MAX_LEVEL as usize;
/// Most blocks of the first bounding-box pass.
const BBOX_BLOCKS: usize = 1024;

pub(crate) fn cuda_err(what: &'static str) -> impl Fn(DriverError) -> Error {
    move |e| Error::Cuda(format!("{what}: {e}"))
}

/// At least one element (CUDA refuses empty allocations), uninitialised.
pub(crate) fn alloc<T: DeviceRepr>(s: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<T>, Error> {
    // SAFETY: every use below writes an element before any kernel reads it,
    // or reads only the elements it was told hold data.
    unsafe { s.alloc::<T>(len.max(1)) }.map_err(cuda_err("allocating device memory"))
}

pub(crate) fn zeros<T: DeviceRepr + ValidAsZeroBits>(
    s: &Arc<CudaStream>,
    len: usize,
) -> Result<CudaSlice<T>, Error> {
    s.alloc_zeros::<T>(len.max(1))
        .map_err(cuda_err("allocating device memory"))
}

/// `v` on the device (one default element when empty: CUDA refuses empty
/// allocations).
pub(crate) fn upload<T: DeviceRepr + Default + Clone>(
    s: &Arc<CudaStream>,
    v: &[T],
) -> Result<CudaSlice<T>, Error> {
    let one = [T::default()];
    let v = if v.is_empty() { &one[..] } else { v };
    s.clone_htod(v).map_err(cuda_err("copy to the device"))
}

/// The first `n` elements on the host (none for `n = 0`, without touching
/// the device).
pub(crate) fn download<T: DeviceRepr + Default + Clone>(
    s: &Arc<CudaStream>,
    v: &CudaSlice<T>,
    n: usize,
) -> Result<Vec<T>, Error> {
    if n == 0 {
        return Ok(Vec::new());
    }
    s.clone_dtoh(&v.slice(0..n))
        .map_err(cuda_err("copy from the device"))
}

/// One block of `BLOCK` threads per `per_block` items, at least one block.
fn blocks(n: usize, per_block: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(per_block).max(1) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launches `f` with the arguments in order. Scalars must be places (let
/// bindings), since the builder keeps references to them.
macro_rules! launch {
    ($s:expr, $f:expr, $cfg:expr, $what:literal; $($arg:expr),* $(,)?) => {{
        let mut b = $s.launch_builder(&$f);
        $( b.arg($arg); )*
        // SAFETY: the arguments follow the entry point's signature in its
        // CUDA source (build.cu, or the FMM's ops.cu), and every array is
        // at least as long as the counts passed with it say.
        unsafe { b.launch($cfg) }
            .map(|_| ())
            .map_err($crate::tree::device_build::cuda_err(concat!("launching ", $what)))
    }};
}
pub(crate) use launch;

/// The entry points, loaded once per build.
struct Kernels {
    scan_tiles: CudaFunction,
    scan_add: CudaFunction,
    bbox: CudaFunction,
    bbox_final: CudaFunction,
    keys: CudaFunction,
    radix_hist: CudaFunction,
    radix_scatter: CudaFunction,
    split_count: CudaFunction,
    split_emit: CudaFunction,
    subtree_size: CudaFunction,
    place: CudaFunction,
    gather: CudaFunction,
    weight: CudaFunction,
    moments: CudaFunction,
    finish: CudaFunction,
    children8: CudaFunction,
    group_count: CudaFunction,
    group_emit: CudaFunction,
    scatter: CudaFunction,
    to_real: CudaFunction,
    group_box: CudaFunction,
}

impl Kernels {
    fn load<R: Real>(gpu: &Gpu) -> Result<Kernels, Error> {
        let (module, _) = gpu.module(BUILD_MODULE, BUILD_SOURCE)?;
        let f = |name: &str| gpu.function(&module, name);
        let p = |name: &str| gpu.function(&module, &format!("{name}_{}", R::NAME));
        Ok(Kernels {
            scan_tiles: f("scan_tiles")?,
            scan_add: f("scan_add")?,
            bbox: p("bbox")?,
            bbox_final: f("bbox_final")?,
            keys: p("keys")?,
            radix_hist: f("radix_hist")?,
            radix_scatter: f("radix_scatter")?,
            split_count: f("split_count")?,
            split_emit: f("split_emit")?,
            subtree_size: f("subtree_size")?,
            place: f("place")?,
            gather: p("gather")?,
            weight: p("weight")?,
            moments: p("moments")?,
            finish: p("finish")?,
            children8: f("children8")?,
            group_count: f("group_count")?,
            group_emit: f("group_emit")?,
            scatter: p("scatter")?,
            to_real: p("to_real")?,
            group_box: p("group_box")?,
        })
    }
}

/// Exclusive prefix scan of the first `n` elements of `data`, in place
/// (hu2011's bookmarks): tiles scanned, then the tiles' sums scanned the
/// same way and added back.
fn scan(
    s: &Arc<CudaStream>,
    k: &Kernels,
    data: &mut CudaSlice<u32>,
    n: usize,
) -> Result<(), Error> {
    if n == 0 {
        return Ok(());
    }
    let nb = n.div_ceil(SCAN_TILE);
    let mut sums = alloc::<u32>(s, nb)?;
    let ni = n as i32;
    launch!(s, k.scan_tiles, blocks(n, SCAN_TILE), "scan_tiles"; &ni, &mut *data, &mut sums)?;
    if nb > 1 {
        scan(s, k, &mut sums, nb)?;
        launch!(s, k.scan_add, blocks(n, SCAN_TILE), "scan_add"; &ni, &mut *data, &sums)?;
    }
    Ok(())
}

/// Milliseconds per build stage, in order.
pub type Stages = Vec<(&'static str, f64)>;

/// One level of cells in key (breadth-first) order while the tree grows.
struct Level {
    m: usize,
    begin: CudaSlice<i32>,
    end: CudaSlice<i32>,
    center: [CudaSlice<f64>; 3],
    /// Children per cell, then (scanned) the index of the first child in
    /// the next level; `m + 1` entries, the last the next level's size.
    offset: CudaSlice<u32>,
    /// Cells in each cell's subtree.
    size: CudaSlice<i32>,
}

impl Level {
    fn alloc(s: &Arc<CudaStream>, m: usize) -> Result<Level, Error> {
        Ok(Level {
            m,
            begin: alloc(s, m)?,
            end: alloc(s, m)?,
            center: [alloc(s, m)?, alloc(s, m)?, alloc(s, m)?],
            offset: alloc(s, m + 1)?,
            size: alloc(s, m)?,
        })
    }
}

/// An octree whose arrays live on the GPU: the particles' keys and order,
/// and the cells, in the depth-first order of [`Octree`] (cell 0 the
/// root), as one array per field.
pub struct DeviceOctree<R> {
    pub bounds: Bounds,
    pub ncrit: usize,
    /// Particles.
    pub n: usize,
    pub n_cells: usize,
    /// Morton keys in tree order.
    pub keys: CudaSlice<u64>,
    /// `order[k]`: the input index of the `k`-th particle in tree order.
    pub order: CudaSlice<u32>,
    pub center: [CudaSlice<f64>; 3],
    /// Half the side length.
    pub half: CudaSlice<f64>,
    pub level: CudaSlice<i32>,
    /// The cell's particles are `begin..end` in tree order.
    pub begin: CudaSlice<i32>,
    pub end: CudaSlice<i32>,
    /// The cell after this one's subtree (`n_cells` at the end).
    pub next: CudaSlice<i32>,
    /// The first child (equal to `next` for a leaf).
    pub more: CudaSlice<i32>,
    pub n_children: CudaSlice<i32>,
    /// The cells level by level: the depth-first indices of level `l`'s
    /// cells are `by_level[level_start[l]..level_start[l + 1]]`, for sweeps
    /// that need every child done before its parent.
    pub by_level: CudaSlice<i32>,
    /// `levels + 1` entries, the last `n_cells`.
    pub level_start: Vec<usize>,
    _real: PhantomData<R>,
}

impl<R: Real> DeviceOctree<R> {
    /// Builds the tree of the points `pos` (on the device, in `R`), leaves
    /// of at most `ncrit` particles except at the depth bound: the tree
    /// [`Octree::build`] builds from the same points converted to f64.
    pub fn build(gpu: &Gpu, pos: [&CudaSlice<R>; 3], ncrit: usize) -> Result<Self, Error> {
        Self::build_inner(gpu, pos, ncrit, None)
    }

    /// [`DeviceOctree::build`], also returning the milliseconds of each
    /// stage (bounding box, keys, sort, levels, links). The stream is
    /// synchronised between stages, so the total is a little longer.
    pub fn build_profiled(
        gpu: &Gpu,
        pos: [&CudaSlice<R>; 3],
        ncrit: usize,
    ) -> Result<(Self, Stages), Error> {
        let mut stages = Vec::new();
        let tree = Self::build_inner(gpu, pos, ncrit, Some(&mut stages))?;
        Ok((tree, stages))
    }

    fn build_inner(
        gpu: &Gpu,
        pos: [&CudaSlice<R>; 3],
        ncrit: usize,
        mut stages: Option<&mut Stages>,
    ) -> Result<Self, Error> {
        let mut t0 = std::time::Instant::now();
        let mut stage = |name: &'static str| -> Result<(), Error> {
            if let Some(v) = stages.as_deref_mut() {
                gpu.stream()
                    .synchronize()
                    .map_err(cuda_err("synchronising"))?;
                v.push((name, t0.elapsed().as_secs_f64() * 1e3));
                t0 = std::time::Instant::now();
            }
            Ok(())
        };
        let n = pos[0].len();
        for (a, p) in pos.iter().enumerate() {
            if p.len() != n {
                return Err(Error::LengthMismatch {
                    what: format!("positions along axis {a}"),
                    got: p.len(),
                    expected: n,
                });
            }
        }
        if n >= i32::MAX as usize {
            return Err(Error::BadOption(format!(
                "the GPU tree indexes particles with 32-bit integers: {n} are too many"
            )));
        }
        let ncrit = ncrit.max(1);
        let k = Kernels::load::<R>(gpu)?;
        let s = gpu.stream();
        let ni = n as i32;

        // The bounding cube: min and max on the device, the cube from them
        // by the CPU's own code, which on the two points (lo, hi) per axis
        // finds the same min and max.
        let bounds = if n == 0 {
            Bounds::of([&[], &[], &[]])
        } else {
            let nb = n.div_ceil(BLOCK as usize).min(BBOX_BLOCKS);
            let mut part = alloc::<f64>(s, 6 * nb)?;
            let mut out = alloc::<f64>(s, 6)?;
            let cfg = LaunchConfig {
                grid_dim: (nb as u32, 1, 1),
                ..blocks(1, 1)
            };
            launch!(s, k.bbox, cfg, "bbox"; &ni, pos[0], pos[1], pos[2], &mut part)?;
            let nbi = nb as i32;
            launch!(s, k.bbox_final, blocks(1, 1), "bbox_final"; &nbi, &part, &mut out)?;
            let mm = download(s, &out, 6)?;
            Bounds::of([&[mm[0], mm[3]], &[mm[1], mm[4]], &[mm[2], mm[5]]])
        };
        stage("bounds")?;

        // Keys and their stable sort.
        let mut keys = alloc::<u64>(s, n)?;
        let mut order = alloc::<u32>(s, n)?;
        if n > 0 {
            let low = bounds.low();
            let side = 2.0 * bounds.half;
            launch!(s, k.keys, blocks(n, BLOCK as usize), "keys";
                &ni, pos[0], pos[1], pos[2], &low[0], &low[1], &low[2], &side,
                &mut keys, &mut order)?;
            stage("keys")?;
            let nb = n.div_ceil(SORT_TILE);
            let mut hist = alloc::<u32>(s, RADIX * nb)?;
            let mut keys_b = alloc::<u64>(s, n)?;
            let mut order_b = alloc::<u32>(s, n)?;
            for pass in 0..KEY_BITS.div_ceil(RADIX_BITS) {
                let shift = (pass * RADIX_BITS) as i32;
                launch!(s, k.radix_hist, blocks(n, SORT_TILE), "radix_hist";
                    &ni, &keys, &shift, &mut hist)?;
                scan(s, &k, &mut hist, RADIX * nb)?;
                launch!(s, k.radix_scatter, blocks(n, SORT_TILE), "radix_scatter";
                    &ni, &keys, &order, &shift, &hist, &mut keys_b, &mut order_b)?;
                std::mem::swap(&mut keys, &mut keys_b);
                std::mem::swap(&mut order, &mut order_b);
            }
            stage("sort")?;
        }

        // Cells level by level, from the root.
        let ncrit_i = ncrit.min(i32::MAX as usize) as i32;
        let mut levels = vec![Level {
            m: 1,
            begin: upload(s, &[0i32])?,
            end: upload(s, &[ni])?,
            center: [
                upload(s, &[bounds.center[0]])?,
                upload(s, &[bounds.center[1]])?,
                upload(s, &[bounds.center[2]])?,
            ],
            offset: alloc(s, 2)?,
            size: alloc(s, 1)?,
        }];
        // Half sides by level, halved as the CPU halves them.
        let mut halves = vec![bounds.half];
        loop {
            let l = levels.len() - 1;
            let lev = &mut levels[l];
            let (m, mi, li) = (lev.m, lev.m as i32, l as i32);
            launch!(s, k.split_count, blocks(m, BLOCK as usize), "split_count";
                &mi, &li, &ncrit_i, &lev.begin, &lev.end, &keys, &mut lev.offset)?;
            scan(s, &k, &mut lev.offset, m + 1)?;
            let total = s
                .clone_dtoh(&lev.offset.slice(m..m + 1))
                .map_err(cuda_err("copy from the device"))?[0] as usize;
            if total == 0 {
                break;
            }
            let h = halves[l] / 2.0;
            halves.push(h);
            let mut next = Level::alloc(s, total)?;
            let [ncx, ncy, ncz] = &mut next.center;
            launch!(s, k.split_emit, blocks(m, BLOCK as usize), "split_emit";
                &mi, &li, &ncrit_i, &lev.begin, &lev.end,
                &lev.center[0], &lev.center[1], &lev.center[2], &keys, &lev.offset, &h,
                &mut next.begin, &mut next.end, ncx, ncy, ncz)?;
            levels.push(next);
        }
        stage("levels")?;

        // Subtree sizes, deepest level first.
        let dummy = alloc::<i32>(s, 1)?;
        for l in (0..levels.len()).rev() {
            let (head, tail) = levels.split_at_mut(l + 1);
            let lev = &mut head[l];
            let child_size = tail.first().map_or(&dummy, |c| &c.size);
            let mi = lev.m as i32;
            launch!(s, k.subtree_size, blocks(lev.m, BLOCK as usize), "subtree_size";
                &mi, &lev.offset, child_size, &mut lev.size)?;
        }

        let mut level_start = vec![0usize];
        for lev in &levels {
            level_start.push(level_start.last().unwrap() + lev.m);
        }
        let n_cells = *level_start.last().unwrap();
        if n_cells >= i32::MAX as usize {
            return Err(Error::BadOption(format!(
                "the GPU tree indexes cells with 32-bit integers: {n_cells} are too many"
            )));
        }

        // Depth-first indices from the root down, each cell written there.
        let mut center = [alloc(s, n_cells)?, alloc(s, n_cells)?, alloc(s, n_cells)?];
        let mut half = alloc::<f64>(s, n_cells)?;
        let mut level = alloc::<i32>(s, n_cells)?;
        let mut begin = alloc::<i32>(s, n_cells)?;
        let mut end = alloc::<i32>(s, n_cells)?;
        let mut next = alloc::<i32>(s, n_cells)?;
        let mut more = alloc::<i32>(s, n_cells)?;
        let mut n_children = alloc::<i32>(s, n_cells)?;
        // Zeros: the root's depth-first index.
        let mut by_level = zeros::<i32>(s, n_cells)?;
        for (l, lev) in levels.iter().enumerate() {
            let child_size = levels.get(l + 1).map_or(&lev.size, |c| &c.size);
            let (mi, li, hl) = (lev.m as i32, l as i32, halves[l]);
            let (start, next_start) = (level_start[l] as i32, level_start[l + 1] as i32);
            let [cx, cy, cz] = &mut center;
            launch!(s, k.place, blocks(lev.m, BLOCK as usize), "place";
                &mi, &li, &hl, &start, &next_start, &lev.offset, &lev.size, child_size,
                &lev.begin, &lev.end, &lev.center[0], &lev.center[1], &lev.center[2],
                &mut by_level, cx, cy, cz, &mut half, &mut level, &mut begin, &mut end,
                &mut next, &mut more, &mut n_children)?;
        }
        stage("links")?;

        Ok(DeviceOctree {
            bounds,
            ncrit,
            n,
            n_cells,
            keys,
            order,
            center,
            half,
            level,
            begin,
            end,
            next,
            more,
            n_children,
            by_level,
            level_start,
            _real: PhantomData,
        })
    }

    /// The tree on the host, as [`Octree`] (for tests and the CPU walk).
    pub fn to_host(&self, gpu: &Gpu) -> Result<Octree, Error> {
        let s = gpu.stream();
        let nc = self.n_cells;
        let f = |v: &CudaSlice<f64>| download(s, v, nc);
        let i = |v: &CudaSlice<i32>| download(s, v, nc);
        let (cx, cy, cz, half) = (
            f(&self.center[0])?,
            f(&self.center[1])?,
            f(&self.center[2])?,
            f(&self.half)?,
        );
        let (level, begin, end) = (i(&self.level)?, i(&self.begin)?, i(&self.end)?);
        let (next, more, n_children) = (i(&self.next)?, i(&self.more)?, i(&self.n_children)?);
        let cells = (0..nc)
            .map(|c| Cell {
                center: [cx[c], cy[c], cz[c]],
                half: half[c],
                level: level[c] as u32,
                begin: begin[c] as usize,
                end: end[c] as usize,
                next: next[c] as usize,
                more: more[c] as usize,
                n_children: n_children[c] as u8,
            })
            .collect();
        Ok(Octree {
            bounds: self.bounds,
            order: download(s, &self.order, self.n)?,
            keys: download(s, &self.keys, self.n)?,
            cells,
            ncrit: self.ncrit,
        })
    }

    /// `x` (one value per particle, input order) in tree order:
    /// `out[k] = x[order[k]]`.
    pub fn gather(&self, gpu: &Gpu, x: &CudaSlice<R>) -> Result<CudaSlice<R>, Error> {
        if x.len() < self.n {
            return Err(Error::LengthMismatch {
                what: "values to put in tree order".into(),
                got: x.len(),
                expected: self.n,
            });
        }
        let k = Kernels::load::<R>(gpu)?;
        let s = gpu.stream();
        let mut out = alloc::<R>(s, self.n)?;
        if self.n > 0 {
            let ni = self.n as i32;
            launch!(s, k.gather, blocks(self.n, BLOCK as usize), "gather";
                &ni, &self.order, x, &mut out)?;
        }
        Ok(out)
    }
}

/// What the GPU walk reads of a source tree besides the links and ranges:
/// each cell's children (eight slots a cell) and its geometry and
/// acceptance distance in the walk's precision.
pub struct WalkCells<R> {
    /// `child[8 c + m]`: the `m`-th child of cell `c`.
    pub child: CudaSlice<i32>,
    pub center: [CudaSlice<R>; 3],
    pub half: CudaSlice<R>,
    pub accept2: CudaSlice<R>,
}

/// The target groups of a walk on the device: `begin..end` in tree order.
pub struct DeviceGroups<R> {
    pub n: usize,
    pub begin: CudaSlice<i32>,
    pub end: CudaSlice<i32>,
    /// The groups' bounding boxes: low corner x, y, z, high corner x, y, z.
    pub boxes: [CudaSlice<R>; 6],
}

impl<R: Real> DeviceOctree<R> {
    /// The cells as the walk reads them, with `ps` the tree's pseudo-sources.
    pub fn walk_cells(
        &self,
        gpu: &Gpu,
        ps: &DevicePseudoSources<R>,
    ) -> Result<WalkCells<R>, Error> {
        let k = Kernels::load::<R>(gpu)?;
        let s = gpu.stream();
        let nc = self.n_cells;
        let nci = nc as i32;
        let mut child = alloc::<i32>(s, 8 * nc)?;
        launch!(s, k.children8, blocks(nc, BLOCK as usize), "children8";
            &nci, &self.more, &self.next, &self.n_children, &mut child)?;
        let real = |v: &CudaSlice<f64>| -> Result<CudaSlice<R>, Error> {
            let mut out = alloc::<R>(s, nc)?;
            launch!(s, k.to_real, blocks(nc, BLOCK as usize), "to_real"; &nci, v, &mut out)?;
            Ok(out)
        };
        Ok(WalkCells {
            child,
            center: [
                real(&self.center[0])?,
                real(&self.center[1])?,
                real(&self.center[2])?,
            ],
            half: real(&self.half)?,
            accept2: real(&ps.accept2)?,
        })
    }

    /// The target groups of this (target) tree: runs of sibling leaves with
    /// at most `cap` targets together, as the CPU treecode's groups, cut
    /// into pieces of at most `block` targets; with their bounding boxes
    /// from the positions in tree order `pos`.
    pub fn groups(
        &self,
        gpu: &Gpu,
        cap: usize,
        block: usize,
        pos: [&CudaSlice<R>; 3],
    ) -> Result<DeviceGroups<R>, Error> {
        let k = Kernels::load::<R>(gpu)?;
        let s = gpu.stream();
        let nc = self.n_cells;
        let (nci, capi, blocki) = (nc as i32, cap as i32, block as i32);
        let (begin, end, n) = if nc <= 1 {
            // The root is the only cell: its targets, cut into blocks.
            let (b, e): (Vec<i32>, Vec<i32>) = (0..self.n)
                .step_by(block)
                .map(|b| (b as i32, (b + block).min(self.n) as i32))
                .unzip();
            let n = b.len();
            (
                upload(s, &b.iter().copied().chain([0]).collect::<Vec<_>>())?,
                upload(s, &e.iter().copied().chain([0]).collect::<Vec<_>>())?,
                n,
            )
        } else {
            // Counts per cell, scanned into offsets; the last entry the total.
            let mut offset = zeros::<u32>(s, nc + 1)?;
            launch!(s, k.group_count, blocks(nc, BLOCK as usize), "group_count";
                &nci, &capi, &blocki, &self.begin, &self.end, &self.more, &self.next, &mut offset)?;
            scan(s, &k, &mut offset, nc + 1)?;
            let n = s
                .clone_dtoh(&offset.slice(nc..nc + 1))
                .map_err(cuda_err("copy from the device"))?[0] as usize;
            let mut begin = alloc::<i32>(s, n)?;
            let mut end = alloc::<i32>(s, n)?;
            launch!(s, k.group_emit, blocks(nc, BLOCK as usize), "group_emit";
                &nci, &capi, &blocki, &self.begin, &self.end, &self.more, &self.next, &offset,
                &mut begin, &mut end)?;
            (begin, end, n)
        };
        let mut boxes = [
            alloc::<R>(s, n)?,
            alloc::<R>(s, n)?,
            alloc::<R>(s, n)?,
            alloc::<R>(s, n)?,
            alloc::<R>(s, n)?,
            alloc::<R>(s, n)?,
        ];
        if n > 0 {
            let ngi = n as i32;
            let [lx, ly, lz, hx, hy, hz] = &mut boxes;
            launch!(s, k.group_box, blocks(n, BLOCK as usize), "group_box";
                &ngi, &begin, &end, pos[0], pos[1], pos[2], lx, ly, lz, hx, hy, hz)?;
        }
        Ok(DeviceGroups {
            n,
            begin,
            end,
            boxes,
        })
    }

    /// `x` (one value per particle, tree order) back in input order:
    /// `out[order[k]] = x[k]`.
    pub fn scatter(&self, gpu: &Gpu, x: &CudaSlice<R>) -> Result<CudaSlice<R>, Error> {
        let k = Kernels::load::<R>(gpu)?;
        let s = gpu.stream();
        let mut out = alloc::<R>(s, self.n)?;
        if self.n > 0 {
            let ni = self.n as i32;
            launch!(s, k.scatter, blocks(self.n, BLOCK as usize), "scatter";
                &ni, &self.order, x, &mut out)?;
        }
        Ok(out)
    }
}

/// The cells' pseudo-sources on the device, as the CPU treecode's
/// `pseudo_sources` makes them: per cell (depth-first order), the summed
/// strength at the centre of strength, the other slots averaged with the
/// strength's magnitude as weight (their plain mean where the cell has no
/// strength), and the square of the acceptance distance.
pub struct DevicePseudoSources<R> {
    pub n_cells: usize,
    pub n_slots: usize,
    /// Centre of strength, in `R` (the pseudo-source's position).
    pub pos: [CudaSlice<R>; 3],
    /// Slot `k` of cell `c` at `k * n_cells + c`.
    pub slots: CudaSlice<R>,
    /// Centre of strength in f64, for the acceptance test.
    pub com: [CudaSlice<f64>; 3],
    /// `(2 half / theta + delta)^2`, `delta` the offset of the centre of
    /// strength from the cell's centre (nakasato2009); infinite for
    /// `theta = 0`.
    pub accept2: CudaSlice<f64>,
}

/// [`DevicePseudoSources`] on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct PseudoSources<R> {
    pub pos: [Vec<R>; 3],
    /// `slots[k][c]`.
    pub slots: Vec<Vec<R>>,
    pub com: Vec<[f64; 3]>,
    pub accept2: Vec<f64>,
}

impl<R: Real> DevicePseudoSources<R> {
    /// Slot `k` of every cell.
    pub fn slot(&self, k: usize) -> CudaView<'_, R> {
        self.slots.slice(k * self.n_cells..(k + 1) * self.n_cells)
    }

    pub fn to_host(&self, gpu: &Gpu) -> Result<PseudoSources<R>, Error> {
        let s = gpu.stream();
        let nc = self.n_cells;
        let pos = [
            download(s, &self.pos[0], nc)?,
            download(s, &self.pos[1], nc)?,
            download(s, &self.pos[2], nc)?,
        ];
        let all = download(s, &self.slots, self.n_slots * nc)?;
        let slots = all.chunks(nc.max(1)).map(<[R]>::to_vec).collect();
        let com_a = [
            download(s, &self.com[0], nc)?,
            download(s, &self.com[1], nc)?,
            download(s, &self.com[2], nc)?,
        ];
        let com = (0..nc)
            .map(|c| [com_a[0][c], com_a[1][c], com_a[2][c]])
            .collect();
        Ok(PseudoSources {
            pos,
            slots,
            com,
            accept2: download(s, &self.accept2, nc)?,
        })
    }
}

/// The pseudo-sources of `tree`'s cells from the sources in tree order
/// (positions and slots put there with [`DeviceOctree::gather`]; the first
/// `tree.n` elements are used): the device version of the CPU treecode's
/// `pseudo_sources`, with every sum accumulated in f64 in the CPU's order
/// (a leaf over its particles, an inner cell over its children), so the
/// two agree to the last bit but for the final rounding to `R`.
/// `strength` lists the slots that are the additive strength.
pub fn device_pseudo_sources<R: Real>(
    gpu: &Gpu,
    tree: &DeviceOctree<R>,
    pos: [&CudaSlice<R>; 3],
    slots: &[&CudaSlice<R>],
    strength: &[usize],
    theta: f64,
) -> Result<DevicePseudoSources<R>, Error> {
    let (n, nc, ns) = (tree.n, tree.n_cells, slots.len());
    if !(theta >= 0.0 && theta.is_finite()) {
        return Err(Error::BadOption(format!(
            "theta must be a finite number >= 0, not {theta}"
        )));
    }
    if ns > MAX_SLOTS {
        return Err(Error::BadOption(format!(
            "{ns} source slots given, at most {MAX_SLOTS} are supported"
        )));
    }
    if let Some(&bad) = strength.iter().find(|&&k| k >= ns) {
        return Err(Error::BadOption(format!(
            "strength slot {bad} given, but there are {ns} slots"
        )));
    }
    for (what, v) in pos
        .iter()
        .map(|p| ("source positions in tree order", p))
        .chain(slots.iter().map(|p| ("source slots in tree order", p)))
    {
        if v.len() < n {
            return Err(Error::LengthMismatch {
                what: what.into(),
                got: v.len(),
                expected: n,
            });
        }
    }
    let k = Kernels::load::<R>(gpu)?;
    let s = gpu.stream();

    // The slots packed in one array: slot k at k * n.
    let mut packed = alloc::<R>(s, ns * n)?;
    if n > 0 {
        for (q, slot) in slots.iter().enumerate() {
            s.memcpy_dtod(&slot.slice(0..n), &mut packed.slice_mut(q * n..(q + 1) * n))
                .map_err(cuda_err("copy on the device"))?;
        }
    }
    let strength_i: Vec<i32> = strength.iter().map(|&q| q as i32).collect();
    let mask: u32 = strength.iter().fold(0, |m, &q| m | (1 << q));
    let d_strength = upload(
        s,
        if strength_i.is_empty() {
            &[0]
        } else {
            &strength_i
        },
    )?;
    let (ni, nci, nsi, nstr) = (n as i32, nc as i32, ns as i32, strength.len() as i32);

    let mut wpart = alloc::<f64>(s, n)?;
    if n > 0 {
        launch!(s, k.weight, blocks(n, BLOCK as usize), "weight";
            &ni, &packed, &nstr, &d_strength, &mut wpart)?;
    }

    let mut w = alloc::<f64>(s, nc)?;
    let mut wx = [
        alloc::<f64>(s, nc)?,
        alloc::<f64>(s, nc)?,
        alloc::<f64>(s, nc)?,
    ];
    let mut acc = alloc::<f64>(s, ns * nc)?;
    let mut plain = alloc::<f64>(s, ns * nc)?;
    for l in (0..tree.level_start.len() - 1).rev() {
        let m = tree.level_start[l + 1] - tree.level_start[l];
        let (mi, start) = (m as i32, tree.level_start[l] as i32);
        let [wxx, wxy, wxz] = &mut wx;
        launch!(s, k.moments, blocks(m, BLOCK as usize), "moments";
            &mi, &start, &tree.by_level, &nci, &tree.begin, &tree.end, &tree.more, &tree.next,
            pos[0], pos[1], pos[2], &ni, &packed, &nsi, &mask, &wpart,
            &mut w, wxx, wxy, wxz, &mut acc, &mut plain)?;
    }

    let mut out_pos = [alloc::<R>(s, nc)?, alloc::<R>(s, nc)?, alloc::<R>(s, nc)?];
    let mut com = [
        alloc::<f64>(s, nc)?,
        alloc::<f64>(s, nc)?,
        alloc::<f64>(s, nc)?,
    ];
    let mut out_slots = alloc::<R>(s, ns * nc)?;
    let mut accept2 = alloc::<f64>(s, nc)?;
    {
        let [ox, oy, oz] = &mut out_pos;
        let [cx, cy, cz] = &mut com;
        launch!(s, k.finish, blocks(nc, BLOCK as usize), "finish";
            &nci, &theta, &tree.center[0], &tree.center[1], &tree.center[2], &tree.half,
            &tree.begin, &tree.end, &w, &wx[0], &wx[1], &wx[2], &acc, &plain, &nsi, &mask,
            ox, oy, oz, cx, cy, cz, &mut out_slots, &mut accept2)?;
    }
    Ok(DevicePseudoSources {
        n_cells: nc,
        n_slots: ns,
        pos: out_pos,
        slots: out_slots,
        com,
        accept2,
    })
}
