//! The octree built on the GPU from positions already there (hu2011's
//! parallel data-structure construction), cell for cell the tree of
//! [`Octree::build`], the moves of particle arrays into its order and back,
//! and its target groups; and [`TreeOrdered`], particles on the device put
//! in tree order once, which the treecode and the FMM both start from.
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
//! 63 key bits (per-block bin counts, an exclusive prefix scan of them by
//! the primitives' scan, a stable scatter); cells level by level (each open cell's octant runs by
//! binary search over the sorted keys, the non-empty ones compacted into
//! the next level by a prefix scan; a cell is a leaf at `ncrit` particles
//! or fewer, or at [`MAX_LEVEL`]); subtree sizes bottom-up; depth-first
//! indices and the `next`/`more` links of nakasato2009 top-down.
//!
//! CUDA refuses empty allocations, so every device array here holds at
//! least one element: `n` and `n_cells` are the counts.

use std::marker::PhantomData;
use std::sync::Arc;

/// The device arrays of this API, for callers that do not depend on cudarc.
pub use cudarc::driver::{CudaSlice, CudaView};
use cudarc::driver::{CudaStream, LaunchConfig};
use rayon::prelude::*;

use super::morton::{Bounds, Span, MAX_LEVEL};
use super::octree::{Cell, Octree, GUIDE_SLACK, NEIGHBOUR_SLACK};
use crate::cuda::device::{alloc, blocks, cuda_err, download, launch, upload, zeros, BLOCK};
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::primitives::{self, scan, scanned_total};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::real::Real;

/// Items a thread of the radix sort takes.
const SORT_ITEMS: usize = 8;
/// Items a block of the radix sort takes.
const SORT_TILE: usize = BLOCK as usize * SORT_ITEMS;
const RADIX_BITS: usize = 4;
const RADIX: usize = 1 << RADIX_BITS;
/// Significant bits of a key: 21 levels of 3.
const KEY_BITS: usize = 3 * MAX_LEVEL as usize;
/// Most blocks of the first bounding-box pass.
const BBOX_BLOCKS: usize = 1024;

/// The module name the kernels are compiled and cached under.
pub const BUILD_MODULE: &str = "fmm_tree_build";

/// The CUDA source of the tree construction, with the constants it takes
/// from here.
pub fn build_source() -> String {
    with_defines(
        &[
            ("MAX_LEVEL", MAX_LEVEL as i64),
            ("BLOCK", BLOCK as i64),
            ("SORT_ITEMS", SORT_ITEMS as i64),
            ("RADIX_BITS", RADIX_BITS as i64),
        ],
        include_str!("build.cu"),
    )
}

entry_points! {
    /// The entry points of `build.cu`.
    pub struct Kernels {
        bbox = "bbox" per_precision,
        bbox_final = "bbox_final",
        keys = "keys" per_precision,
        radix_hist = "radix_hist",
        radix_scatter = "radix_scatter",
        crowd_neighbours = "crowd_neighbours",
        split_count = "split_count",
        split_emit = "split_emit",
        subtree_size = "subtree_size",
        place = "place",
        group_count = "group_count",
        group_emit = "group_emit",
    }
}

impl Kernels {
    fn get<R: Real>(gpu: &Gpu) -> Result<Self, Error> {
        let (module, _) = gpu.module(BUILD_MODULE, &build_source())?;
        Self::load::<R>(gpu, &module)
    }
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
    /// Morton keys in tree order; `None` once the methods no longer need
    /// them ([`TreeOrdered`] drops them: 8 bytes a particle).
    pub keys: Option<CudaSlice<u64>>,
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

impl<R> DeviceOctree<R> {
    /// Levels of cells.
    pub(crate) fn levels(&self) -> usize {
        self.level_start.len().saturating_sub(1)
    }

    /// The cells of level `l` (depth-first indices).
    pub(crate) fn level(&self, l: usize) -> (usize, cudarc::driver::CudaView<'_, i32>) {
        let (a, b) = (self.level_start[l], self.level_start[l + 1]);
        (b - a, self.by_level.slice(a..b))
    }
}

impl<R: Real> DeviceOctree<R> {
    /// Builds the tree of the points `pos` (on the device, in `R`), leaves
    /// of at most `ncrit` particles except at the depth bound: the tree
    /// [`Octree::build`] builds from the same points converted to f64.
    pub fn build(gpu: &Gpu, pos: [&CudaSlice<R>; 3], ncrit: usize) -> Result<Self, Error> {
        Self::build_inner(gpu, pos, ncrit, None, None, None)
    }

    /// [`DeviceOctree::build`] in the root cube `root`, which holds every
    /// point.
    pub fn build_in(
        gpu: &Gpu,
        pos: [&CudaSlice<R>; 3],
        ncrit: usize,
        root: Bounds,
    ) -> Result<Self, Error> {
        Self::build_inner(gpu, pos, ncrit, Some(root), None, None)
    }

    /// The smallest cube around the points `pos` ([`Bounds::of`]: min and
    /// max on the device, the cube from them by the CPU's own code,
    /// [`Bounds::around`]).
    pub fn bounds(gpu: &Gpu, pos: [&CudaSlice<R>; 3]) -> Result<Bounds, Error> {
        let span = Self::span(gpu, pos)?;
        Ok(if span.is_empty() {
            Bounds::of([&[], &[], &[]])
        } else {
            Bounds::around(&span)
        })
    }

    /// The box around the points `pos` (min and max on the device).
    pub fn span(gpu: &Gpu, pos: [&CudaSlice<R>; 3]) -> Result<Span, Error> {
        let n = pos[0].len();
        if n == 0 {
            return Ok(Span::EMPTY);
        }
        let k = Kernels::get::<R>(gpu)?;
        let s = gpu.stream();
        let ni = n as i32;
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
        Ok(Span {
            lo: [mm[0], mm[1], mm[2]],
            hi: [mm[3], mm[4], mm[5]],
        })
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
        let tree = Self::build_inner(gpu, pos, ncrit, None, None, Some(&mut stages))?;
        Ok((tree, stages))
    }

    /// The tree of `pos`, in the root cube `root` (else the points' own),
    /// cells split where they hold more than `ncrit` points or `guide`
    /// (the sorted keys of another tree in the same root cube) holds more
    /// than `ncrit` in the same cell; the stages timed into `stages`.
    fn build_inner(
        gpu: &Gpu,
        pos: [&CudaSlice<R>; 3],
        ncrit: usize,
        root: Option<Bounds>,
        guide: Option<&CudaSlice<u64>>,
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
        let k = Kernels::get::<R>(gpu)?;
        let s = gpu.stream();
        let ni = n as i32;

        // The bounding cube, unless given.
        let bounds = match root {
            Some(b) => b,
            None => Self::bounds(gpu, pos)?,
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
                scan(gpu, &mut hist, RADIX * nb)?;
                launch!(s, k.radix_scatter, blocks(n, SORT_TILE), "radix_scatter";
                    &ni, &keys, &order, &shift, &hist, &mut keys_b, &mut order_b)?;
                std::mem::swap(&mut keys, &mut keys_b);
                std::mem::swap(&mut order, &mut order_b);
            }
            stage("sort")?;
        }

        // Cells level by level, from the root.
        let ncrit_i = ncrit.min(i32::MAX as usize) as i32;
        let guide_ncrit = (GUIDE_SLACK * ncrit).min(i32::MAX as usize) as i32;
        let crowd = NEIGHBOUR_SLACK.saturating_mul(ncrit).min(i32::MAX as usize) as i32;
        let no_guide;
        let (guide_keys, ng) = match guide {
            Some(g) => (g, g.len() as i32),
            None => {
                no_guide = alloc::<u64>(s, 1)?;
                (&no_guide, 0)
            }
        };
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
            // The cells beside a crowd, split whatever they hold
            // (`Octree`'s `NEIGHBOUR_SLACK` says why).
            let mut beside = zeros::<u8>(s, m)?;
            launch!(s, k.crowd_neighbours, blocks(m, BLOCK as usize), "crowd_neighbours";
                &mi, &li, &ncrit_i, &crowd, &lev.begin, &lev.end, &keys, &mut beside)?;
            launch!(s, k.split_count, blocks(m, BLOCK as usize), "split_count";
                &mi, &li, &ncrit_i, &lev.begin, &lev.end, &keys, &beside, guide_keys, &ng,
                &guide_ncrit, &mut lev.offset)?;
            scan(gpu, &mut lev.offset, m + 1)?;
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
                &lev.center[0], &lev.center[1], &lev.center[2], &keys, &beside, guide_keys, &ng,
                &guide_ncrit, &lev.offset, &h,
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
            keys: Some(keys),
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
        let mut tree = self.cells_to_host(gpu)?;
        tree.order = download(s, &self.order, self.n)?;
        if let Some(k) = &self.keys {
            tree.keys = download(s, k, self.n)?;
        }
        Ok(tree)
    }

    /// The cells on the host, without the particles' order and keys (a
    /// walk that needs only the cells: 12 bytes a particle not copied).
    pub fn cells_to_host(&self, gpu: &Gpu) -> Result<Octree, Error> {
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
        // In parallel: the cells' first touch of fresh memory is most of
        // the time on some hosts.
        let cells = (0..nc)
            .into_par_iter()
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
            order: Vec::new(),
            keys: Vec::new(),
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
        primitives::gather(gpu, &self.order, x, self.n)
    }

    /// `x` (one value per particle, tree order) back in input order:
    /// `out[order[k]] = x[k]`.
    pub fn scatter(&self, gpu: &Gpu, x: &CudaSlice<R>) -> Result<CudaSlice<R>, Error> {
        primitives::scatter(gpu, &self.order, x, self.n)
    }

    /// The target groups of this tree: runs of sibling leaves with at most
    /// `cap` targets together (the CPU treecode's groups; `cap` 0 makes
    /// every leaf a run of its own, the FMM's P2P groups), each cut into
    /// pieces of at most `block` targets.
    pub fn groups(&self, gpu: &Gpu, cap: usize, block: usize) -> Result<DeviceGroups, Error> {
        let k = Kernels::get::<R>(gpu)?;
        let s = gpu.stream();
        let nc = self.n_cells;
        let (nci, capi, blocki) = (nc as i32, cap as i32, block as i32);
        if nc <= 1 {
            // The root is the only cell: its targets, cut into blocks.
            let (b, e): (Vec<i32>, Vec<i32>) = (0..self.n)
                .step_by(block)
                .map(|b| (b as i32, (b + block).min(self.n) as i32))
                .unzip();
            return Ok(DeviceGroups {
                n: b.len(),
                cell: zeros(s, b.len())?,
                begin: upload(s, &b)?,
                end: upload(s, &e)?,
            });
        }
        // Counts per cell, scanned into offsets; the last entry the total.
        let mut offset = zeros::<u32>(s, nc + 1)?;
        launch!(s, k.group_count, blocks(nc, BLOCK as usize), "group_count";
            &nci, &capi, &blocki, &self.begin, &self.end, &self.more, &self.next, &mut offset)?;
        scan(gpu, &mut offset, nc + 1)?;
        let n = scanned_total(gpu, &offset, nc)? as usize;
        let mut begin = alloc::<i32>(s, n)?;
        let mut end = alloc::<i32>(s, n)?;
        let mut cell = alloc::<i32>(s, n)?;
        launch!(s, k.group_emit, blocks(nc, BLOCK as usize), "group_emit";
            &nci, &capi, &blocki, &self.begin, &self.end, &self.more, &self.next, &offset,
            &mut begin, &mut end, &mut cell)?;
        Ok(DeviceGroups {
            n,
            begin,
            end,
            cell,
        })
    }
}

/// Groups of targets on the device, `begin..end` in tree order.
pub struct DeviceGroups {
    pub n: usize,
    pub begin: CudaSlice<i32>,
    pub end: CudaSlice<i32>,
    /// The first leaf of each group's run (the leaf itself for the FMM's
    /// groups).
    pub cell: CudaSlice<i32>,
}

/// Particles on the device put in the order of their octree, once: the
/// tree, and the positions and field slots in its order. The treecode and
/// the FMM both start from this; outputs they compute in tree order go
/// back to the caller's order with [`DeviceOctree::scatter`].
pub struct TreeOrdered<R> {
    pub tree: DeviceOctree<R>,
    /// Positions in tree order.
    pub pos: [CudaSlice<R>; 3],
    /// Field slots in tree order.
    pub slots: Vec<CudaSlice<R>>,
}

impl<R: Real> TreeOrdered<R> {
    /// A copy on `gpu`'s stream, done when this returns (for another
    /// stream or thread to read): the tree without its keys, the
    /// positions and slots in its order.
    pub fn copied(&self, gpu: &Gpu) -> Result<Self, Error> {
        Self::copy_of(gpu, &self.tree, &self.pos, &self.slots)
    }

    /// [`TreeOrdered::copied`] of a tree and of positions and slots in its
    /// order held apart (an FMM's source tree).
    pub(crate) fn copy_of(
        gpu: &Gpu,
        t: &DeviceOctree<R>,
        pos: &[CudaSlice<R>; 3],
        slots: &[CudaSlice<R>],
    ) -> Result<Self, Error> {
        let s = gpu.stream();
        let c = |x: &CudaSlice<f64>| s.clone_dtod(x).map_err(cuda_err("copy on the device"));
        let i = |x: &CudaSlice<i32>| s.clone_dtod(x).map_err(cuda_err("copy on the device"));
        let r = |x: &CudaSlice<R>| s.clone_dtod(x).map_err(cuda_err("copy on the device"));
        let tree = DeviceOctree {
            bounds: t.bounds,
            ncrit: t.ncrit,
            n: t.n,
            n_cells: t.n_cells,
            keys: None,
            order: s
                .clone_dtod(&t.order)
                .map_err(cuda_err("copy on the device"))?,
            center: [c(&t.center[0])?, c(&t.center[1])?, c(&t.center[2])?],
            half: c(&t.half)?,
            level: i(&t.level)?,
            begin: i(&t.begin)?,
            end: i(&t.end)?,
            next: i(&t.next)?,
            more: i(&t.more)?,
            n_children: i(&t.n_children)?,
            by_level: i(&t.by_level)?,
            level_start: t.level_start.clone(),
            _real: PhantomData,
        };
        let copy = TreeOrdered {
            tree,
            pos: [r(&pos[0])?, r(&pos[1])?, r(&pos[2])?],
            slots: slots.iter().map(r).collect::<Result<_, _>>()?,
        };
        s.synchronize().map_err(cuda_err("copy on the device"))?;
        Ok(copy)
    }

    /// The octree of the points `pos` (input order) with leaves of at most
    /// `ncrit`, and `pos` and `slots` in its order.
    pub fn build(
        gpu: &Gpu,
        pos: [&CudaSlice<R>; 3],
        slots: &[CudaSlice<R>],
        ncrit: usize,
    ) -> Result<Self, Error> {
        Self::build_in(gpu, pos, slots, ncrit, None)
    }

    /// [`TreeOrdered::build`] in the root cube `root` where given (it must
    /// hold every point; a target tree and a source tree built in one cube
    /// have their cells on one lattice, as [`Octree::build_in`]'s), else
    /// the points' own.
    pub fn build_in(
        gpu: &Gpu,
        pos: [&CudaSlice<R>; 3],
        slots: &[CudaSlice<R>],
        ncrit: usize,
        root: Option<Bounds>,
    ) -> Result<Self, Error> {
        Self::build_guided(gpu, pos, slots, ncrit, root, None, false)
    }

    /// [`TreeOrdered::build_in`], cells also split where `guide` (the
    /// sorted keys of a tree in the same root cube, [`DeviceOctree::keys`])
    /// holds more than `ncrit` in them: a target tree split as far as the
    /// source tree around its targets ([`Octree::build_guided`] says why).
    /// The tree's own keys are kept where `keep_keys` (to guide another).
    pub fn build_guided(
        gpu: &Gpu,
        pos: [&CudaSlice<R>; 3],
        slots: &[CudaSlice<R>],
        ncrit: usize,
        root: Option<Bounds>,
        guide: Option<&CudaSlice<u64>>,
        keep_keys: bool,
    ) -> Result<Self, Error> {
        let mut tree = DeviceOctree::build_inner(gpu, pos, ncrit, root, guide, None)?;
        if !keep_keys {
            tree.keys = None;
        }
        let sorted = [
            tree.gather(gpu, pos[0])?,
            tree.gather(gpu, pos[1])?,
            tree.gather(gpu, pos[2])?,
        ];
        let slots = tree.gather_all(gpu, slots)?;
        Ok(TreeOrdered {
            tree,
            pos: sorted,
            slots,
        })
    }
}

impl<R: Real> DeviceOctree<R> {
    /// Each of `arrays` (input order) in tree order.
    pub fn gather_all(
        &self,
        gpu: &Gpu,
        arrays: &[CudaSlice<R>],
    ) -> Result<Vec<CudaSlice<R>>, Error> {
        arrays.iter().map(|x| self.gather(gpu, x)).collect()
    }

    /// Each of `arrays` (tree order) back in input order, each freed once
    /// moved (at 10^9 particles an array is 4 GB in f32).
    pub fn scatter_all(
        &self,
        gpu: &Gpu,
        arrays: Vec<CudaSlice<R>>,
    ) -> Result<Vec<CudaSlice<R>>, Error> {
        arrays.into_iter().map(|x| self.scatter(gpu, &x)).collect()
    }
}
