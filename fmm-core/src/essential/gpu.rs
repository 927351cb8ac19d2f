//! The local essential tree on the GPU ([`super::essential_sources_on`]):
//! the sender's tree built there (the FMM's own build), walked there for
//! every receiver at once (`walk.cu`, a launch a level, the CPU walk's
//! arithmetic to the bit, so that both send the same cells), the nodes'
//! strengths of the cells sent as nodes summed there from their particles,
//! and each receiver's sources gathered there into one array a field and
//! copied back through the staging buffers.
//!
//! Why the walk is on the GPU: walked on the host, every cell crossed the
//! bus and was rebuilt there first, 0.007 to 0.01 s of the 0.06 s that
//! the trees for three receivers took at 2^24 sources on an H200
//! (`FMM_TRACE=1 overlap_bench`, 2026-11-29), for the few thousand cells
//! the walks choose. Now a byte a cell and receiver (the walk's verdict)
//! and the chosen cells' particle ranges come back, and the sends: the
//! particles sent were first listed one by one on the host and gathered
//! field by field into pageable memory.

use std::borrow::Cow;

use cudarc::driver::{CudaSlice, LaunchConfig};
use rayon::prelude::*;

use super::walk::{Selection, Walk};
use crate::cuda::device::{alloc, blocks, cuda_err, download, launch, upload, zeros, BLOCK};
use crate::cuda::laps::Laps;
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::primitives;
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::error::Error;
use crate::far::cuda::{self as far_cuda, DeviceBasis};
use crate::far::{FarField, Representation};
use crate::particles::Particles;
use crate::real::Real;
use crate::tree::{Bounds, DeviceOctree, TreeOrdered};

/// The module name the kernels are compiled and cached under.
pub const MODULE: &str = "fmm_essential";

/// A cell's state in one receiver's walk (`walk.cu`; 0: not reached).
const REACHED: u8 = 1;
const AS_NODES: u8 = 2;
const AS_PARTICLES: u8 = 3;
const OPENED: u8 = 4;

/// Threads a block of the sends' gather, a run of sources a block.
const RUN_THREADS: u32 = 128;

/// Most sources a run of the sends' gather: a block copies a run, so runs
/// joined without bound (the nodes of a thousand cells in a row, the
/// leaves along a face) left a few blocks copying a million values each.
const MAX_RUN: usize = 1024;

/// A receiver's send of fewer sources than this is gathered with the
/// other small ones, in one launch and one copy a field.
const SMALL_SEND: usize = 1 << 16;

/// The source, with the constants it takes from here.
pub fn source() -> String {
    with_defines(
        &[
            ("REACHED", REACHED as i64),
            ("AS_NODES", AS_NODES as i64),
            ("AS_PARTICLES", AS_PARTICLES as i64),
            ("OPENED", OPENED as i64),
        ],
        include_str!("walk.cu"),
    )
}

entry_points! {
    /// The entry points of `walk.cu`.
    pub struct EssentialOps {
        walk = "essential_walk",
        gather_runs = "essential_gather_runs" per_precision,
    }
}

impl EssentialOps {
    fn get<R: Real>(gpu: &Gpu) -> Result<Self, Error> {
        let (module, _) = gpu.module(MODULE, &source())?;
        Self::load::<R>(gpu, &module)
    }
}

/// The GPU's part of [`super::essential_sources_on`]: the tree of the
/// positions `here` (wrapped into a periodic box; on the device already
/// where `resident` is given) built on `gpu` (`p`, `ncrit`, `cube`: the
/// nodes' order, the leaves' size and the root cube), walked there by
/// `walk`, the nodes'
/// strengths of the cells sent summed there from their particles, and
/// each receiver's sources gathered there and copied back.
pub(super) fn on_gpu<R: Real>(
    gpu: &Gpu,
    sources: &Particles<R>,
    here: [Cow<'_, [R]>; 3],
    resident: Option<&DeviceParticles<R>>,
    strength: &Option<Vec<usize>>,
    walk: &Walk<'_>,
    (p, ncrit, cube): (usize, usize, Option<Bounds>),
) -> Result<(Vec<Particles<R>>, Vec<Selection>), Error> {
    let mut lap = Laps::new(Some(gpu), "local essential tree");
    // The sources on the device already (`resident`, where their
    // positions are `here`'s), else copied there through the staging
    // buffers (`Gpu::upload_many`: a plain copy from pageable memory took
    // 0.039 s for 2^24 positions on the GPU hosts).
    let uploaded;
    let (d_pos, d_slots): (&[CudaSlice<R>; 3], &[CudaSlice<R>]) =
        match resident.and_then(|r| r.positions().map(|p| (p, r.slots()))) {
            Some(on_device) => on_device,
            None => {
                let pos: [CudaSlice<R>; 3] = gpu
                    .upload_many(&[&here[0][..], &here[1], &here[2]])?
                    .try_into()
                    .unwrap_or_else(|_| unreachable!("three axes"));
                let slots =
                    gpu.upload_many(&sources.slots.iter().map(|v| &v[..]).collect::<Vec<_>>())?;
                uploaded = (pos, slots);
                (&uploaded.0, &uploaded.1[..])
            }
        };
    lap.say("upload")?;
    let d_pos3 = [&d_pos[0], &d_pos[1], &d_pos[2]];
    let root = match cube {
        Some(c) => Some(c.holding(&DeviceOctree::span(gpu, d_pos3)?)),
        None => None,
    };
    let ordered = TreeOrdered::build_in(gpu, d_pos3, d_slots, ncrit, root)?;
    lap.say("tree, the sources in its order")?;
    from_tree(gpu, sources, &ordered, strength, walk, p, lap)
}

/// [`on_gpu`] from a tree built already, with the sources in its order
/// (`ordered`: an FMM's own source tree, [`super::essential_sources_from_tree`]).
pub(super) fn from_tree<R: Real>(
    gpu: &Gpu,
    sources: &Particles<R>,
    ordered: &TreeOrdered<R>,
    strength: &Option<Vec<usize>>,
    walk: &Walk<'_>,
    p: usize,
    mut lap: Laps<'_>,
) -> Result<(Vec<Particles<R>>, Vec<Selection>), Error> {
    let TreeOrdered {
        tree,
        pos: sorted,
        slots,
    } = ordered;
    let ops = EssentialOps::get::<R>(gpu)?;
    let basis = DeviceBasis::without_children(gpu, FarField::KernelIndependent, p)?;
    let k = basis.k;
    let selections = walk_on_gpu(gpu, &ops, tree, walk, k, basis.radius)?;
    // Every cell chosen for some receiver, once, and its particles.
    let mut picked: Vec<usize> = selections
        .iter()
        .flat_map(|s| s.nodes.iter().chain(&s.particles).copied())
        .collect();
    picked.sort_unstable();
    picked.dedup();
    let picked_ranges = ranges(gpu, tree, &picked)?;
    let range = |c: &usize| picked_ranges[picked.binary_search(c).expect("a chosen cell")];
    lap.say("walk")?;
    // Every cell sent as nodes to some process, once: node `i` of the
    // `u`-th at `u k + i` of the node arrays.
    let mut cells: Vec<usize> = selections.iter().flat_map(|s| s.nodes.clone()).collect();
    cells.sort_unstable();
    cells.dedup();
    let nodes = match (strength, cells.is_empty()) {
        (Some(strength), false) => {
            let rep = Representation {
                far_field: FarField::KernelIndependent,
                strength: strength.clone(),
                target_slots: 0,
            };
            let cell_ranges: Vec<(usize, usize)> = cells.iter().map(range).collect();
            let ops = far_cuda::NodeOps::get::<R>(gpu)?;
            Some(far_cuda::cell_node_sources(
                gpu,
                &ops,
                &basis,
                tree,
                &cells,
                &cell_ranges,
                sorted,
                slots,
                &rep,
            )?)
        }
        _ => None,
    };
    lap.say("nodes' strengths")?;
    // Each receiver's sources: the nodes of its cells sent as nodes, then
    // the particles of those sent as particles, runs of the node arrays
    // and of the sources in tree order.
    let split = cells.len() * k;
    let none = alloc::<R>(gpu.stream(), 1)?;
    let fields: Vec<(&CudaSlice<R>, &CudaSlice<R>)> = match &nodes {
        Some((pos, node_slots)) => pos
            .iter()
            .chain(node_slots)
            .zip(sorted.iter().chain(slots))
            .collect(),
        None => sorted.iter().chain(slots).map(|b| (&none, b)).collect(),
    };
    let runs: Vec<Runs> = selections
        .par_iter()
        .map(|sel| {
            let mut runs = Runs::default();
            for c in &sel.nodes {
                let u = cells.binary_search(c).expect("a cell sent as nodes");
                runs.push(u * k, k);
            }
            for c in &sel.particles {
                let (b, e) = range(c);
                runs.push(split + b, e - b);
            }
            runs
        })
        .collect();
    let as_particles = |mut out: Vec<Vec<R>>| {
        let slots = out.split_off(3);
        let pos: [Vec<R>; 3] = out
            .try_into()
            .unwrap_or_else(|_| unreachable!("three axes"));
        Particles {
            kernel: sources.kernel,
            role: sources.role,
            layout: sources.layout.clone(),
            pos,
            slots,
        }
    };
    // The small sends (far receivers': a few cells' nodes each) gathered
    // together, one launch and one copy a field, then cut apart here (a
    // gather each, 4,095 receivers' sends took 0.41 to 0.48 s on an H200).
    let small: Vec<usize> = (0..runs.len())
        .filter(|&q| runs[q].total > 0 && runs[q].total < SMALL_SEND)
        .collect();
    let mut together = Runs::default();
    let mut starts = Vec::with_capacity(small.len());
    for &q in &small {
        starts.push(together.total);
        together.append(&runs[q]);
    }
    let mut joined: Vec<Vec<R>> = (0..fields.len())
        .map(|_| vec![R::zero(); together.total])
        .collect();
    together.gather(gpu, &ops, split, &fields, &mut joined)?;
    let mut sends: Vec<Option<Particles<R>>> = (0..runs.len()).map(|_| None).collect();
    let cut: Vec<(usize, Particles<R>)> = small
        .par_iter()
        .zip(&starts)
        .map(|(&q, &at)| {
            let len = runs[q].total;
            let out = joined.iter().map(|f| f[at..at + len].to_vec()).collect();
            (q, as_particles(out))
        })
        .collect();
    for (q, p) in cut {
        sends[q] = Some(p);
    }
    for (q, runs) in runs.iter().enumerate() {
        if sends[q].is_some() {
            continue;
        }
        // Zeroed pages, first written by the staged copy on every core.
        let mut out: Vec<Vec<R>> = (0..fields.len())
            .map(|_| vec![R::zero(); runs.total])
            .collect();
        runs.gather(gpu, &ops, split, &fields, &mut out)?;
        sends[q] = Some(as_particles(out));
    }
    let sends: Vec<Particles<R>> = sends
        .into_iter()
        .map(|s| s.expect("every receiver's"))
        .collect();
    lap.say("sends gathered")?;
    Ok((sends, selections))
}

/// Every receiver's walk of `tree` at once, a launch a level over the
/// receivers still walking, and the selections from the verdicts each
/// appended as it was made (cells in depth-first order, as the CPU walk
/// lists them). Launched over every receiver at every level and read back
/// whole, a byte a cell and receiver, 4,095 receivers' walk of an FMM's
/// 1.4 million cells took 1.0 to 1.3 s on an H200; most receivers stop
/// within a few levels, and each sends a few cells.
fn walk_on_gpu<R: Real>(
    gpu: &Gpu,
    ops: &EssentialOps,
    tree: &DeviceOctree<R>,
    walk: &Walk<'_>,
    k: usize,
    radius: f64,
) -> Result<Vec<Selection>, Error> {
    let s = gpu.stream();
    let (nr, nc) = (walk.regions.len(), tree.n_cells);
    let live: Vec<u8> = (0..nr).map(|q| u8::from(walk.live(q))).collect();
    let boxes: Vec<f64> = walk
        .regions
        .iter()
        .flat_map(|r| r.lo.into_iter().chain(r.hi))
        .collect();
    let (k, radius, theta) = walk.mac(k, radius);
    let k = i64::try_from(k).unwrap_or(i64::MAX);
    let (periodic, side) = match walk.limits.periodic {
        Some((axes, l)) => ((0..3).filter(|&a| axes[a]).map(|a| 1 << a).sum(), l),
        None => (0i32, 0.0),
    };
    let limits: Vec<f64> = walk.limits.lo.into_iter().chain(walk.limits.hi).collect();
    let (d_live, d_boxes, d_limits) = (upload(s, &live)?, upload(s, &boxes)?, upload(s, &limits)?);
    let mut state = zeros::<u8>(s, nr * nc)?;
    let mut walking = zeros::<u8>(s, nr)?;
    let mut found = zeros::<i32>(s, 1)?;
    let mut picks = alloc::<i32>(s, 2 * PICKS)?;
    let cap = PICKS as i32;
    let nci = nc as i32;
    // Every live receiver reaches the root.
    let mut active: Vec<i32> = (0..nr as i32).filter(|&q| live[q as usize] == 1).collect();
    for l in 0..tree.levels() {
        let (m, cells) = tree.level(l);
        if m == 0 || active.is_empty() {
            break;
        }
        let d_active = upload(s, &active)?;
        let (mi, first, nai) = (m as i32, i32::from(l == 0), active.len() as i32);
        launch!(s, ops.walk, blocks(m * active.len(), BLOCK as usize), "essential_walk";
            &mi, &cells, &first, &nci, &nai, &d_active, &d_live, &d_boxes,
            &tree.center[0], &tree.center[1], &tree.center[2], &tree.half,
            &tree.begin, &tree.end, &tree.more, &tree.next, &tree.n_children,
            &k, &radius, &theta, &periodic, &side, &d_limits, &mut state, &mut walking,
            &mut found, &mut picks, &cap)?;
        let next = download(s, &walking, nr)?;
        active = (0..nr as i32).filter(|&q| next[q as usize] == 1).collect();
        s.memset_zeros(&mut walking)
            .map_err(cuda_err("clearing the walk's receivers"))?;
    }
    let n = download(s, &found, 1)?[0] as usize;
    if n > PICKS {
        return Ok(read_verdicts(&download(s, &state, nr * nc)?, nc));
    }
    let mut picked: Vec<(i32, i32)> = download(s, &picks, 2 * n)?
        .chunks_exact(2)
        .map(|p| (p[0], p[1]))
        .collect();
    // By receiver, then cell (as particles or not, in the low bit).
    picked.par_sort_unstable_by_key(|&(q, c)| (q >> 1, c));
    let mut selections = vec![Selection::default(); nr];
    for (q, c) in picked {
        let sel = &mut selections[(q >> 1) as usize];
        match q & 1 {
            0 => sel.nodes.push(c as usize),
            _ => sel.particles.push(c as usize),
        }
    }
    Ok(selections)
}

/// Most verdicts [`walk_on_gpu`] keeps as they are made (32 MB); past it
/// the verdicts are read back whole.
const PICKS: usize = 1 << 22;

/// Each receiver's selection from the verdicts `state` (`nc` a receiver).
fn read_verdicts(state: &[u8], nc: usize) -> Vec<Selection> {
    state
        .par_chunks(nc.max(1))
        .map(|verdicts| {
            let mut sel = Selection::default();
            for (c, &v) in verdicts.iter().enumerate() {
                match v {
                    AS_NODES => sel.nodes.push(c),
                    AS_PARTICLES => sel.particles.push(c),
                    _ => {}
                }
            }
            sel
        })
        .collect()
}

/// The particles (`begin..end` in tree order) of the cells `cells` of
/// `tree`.
fn ranges<R: Real>(
    gpu: &Gpu,
    tree: &DeviceOctree<R>,
    cells: &[usize],
) -> Result<Vec<(usize, usize)>, Error> {
    let s = gpu.stream();
    let n = cells.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let idx = upload(s, &cells.iter().map(|&c| c as u32).collect::<Vec<_>>())?;
    let begin = download(s, &primitives::gather_i32(gpu, &idx, &tree.begin, n)?, n)?;
    let end = download(s, &primitives::gather_i32(gpu, &idx, &tree.end, n)?, n)?;
    Ok(begin
        .iter()
        .zip(&end)
        .map(|(&b, &e)| (b as usize, e as usize))
        .collect())
}

/// What one receiver gets, as runs of a pair of arrays (the node arrays,
/// then the sources in tree order from `split` on) laid end to end.
#[derive(Default)]
struct Runs {
    from: Vec<i64>,
    to: Vec<i64>,
    len: Vec<i32>,
    total: usize,
}

impl Runs {
    /// `len` values from index `from` on, after the others: a run that
    /// continues the last one joins it up to [`MAX_RUN`], longer ones are
    /// cut there.
    fn push(&mut self, mut from: usize, mut len: usize) {
        while len > 0 {
            let room = match (self.from.last(), self.len.last()) {
                (Some(&f), Some(&l)) if f as usize + l as usize == from => MAX_RUN - l as usize,
                _ => 0,
            };
            let take = len.min(if room > 0 { room } else { MAX_RUN });
            if room > 0 {
                *self.len.last_mut().expect("a last run") += take as i32;
            } else {
                self.from.push(from as i64);
                self.to.push(self.total as i64);
                self.len.push(take as i32);
            }
            (from, len, self.total) = (from + take, len - take, self.total + take);
        }
    }

    /// `other`'s runs after these.
    fn append(&mut self, other: &Runs) {
        let at = self.total as i64;
        self.from.extend_from_slice(&other.from);
        self.to.extend(other.to.iter().map(|t| t + at));
        self.len.extend_from_slice(&other.len);
        self.total += other.total;
    }

    /// The runs of each field's pair `fields` (below `split`, the first
    /// array's index; above, the second's at `index - split`) gathered on
    /// the GPU and copied into `out` (one array of `total` per field).
    fn gather<R: Real>(
        &self,
        gpu: &Gpu,
        ops: &EssentialOps,
        split: usize,
        fields: &[(&CudaSlice<R>, &CudaSlice<R>)],
        out: &mut [Vec<R>],
    ) -> Result<(), Error> {
        if self.total == 0 {
            return Ok(());
        }
        let s = gpu.stream();
        let (from, to, len) = (
            upload(s, &self.from)?,
            upload(s, &self.to)?,
            upload(s, &self.len)?,
        );
        let cfg = LaunchConfig {
            grid_dim: (self.len.len() as u32, 1, 1),
            block_dim: (RUN_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let split = split as i64;
        let mut gathered = alloc::<R>(s, self.total)?;
        for ((a, b), o) in fields.iter().zip(out.iter_mut()) {
            launch!(s, ops.gather_runs, cfg, "essential_gather_runs";
                &from, &to, &len, &split, *a, *b, &mut gathered)?;
            gpu.download_into(&gathered, o)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runs lay the pieces pushed end to end, each value once and in
    /// order, continuing pieces joined, none longer than [`MAX_RUN`].
    #[test]
    fn runs_cover_what_is_pushed_in_order() {
        let pieces = [(0, 10), (10, 5), (40, 0), (40, 3000), (3040, 7), (5000, 1)];
        let mut runs = Runs::default();
        for &(from, len) in &pieces {
            runs.push(from, len);
        }
        let want: Vec<i64> = pieces
            .iter()
            .flat_map(|&(f, l)| (f as i64)..(f + l) as i64)
            .collect();
        let mut got = vec![-1i64; runs.total];
        for ((&f, &t), &l) in runs.from.iter().zip(&runs.to).zip(&runs.len) {
            assert!(l > 0 && l as usize <= MAX_RUN);
            for j in 0..l as i64 {
                assert_eq!(got[(t + j) as usize], -1, "each place once");
                got[(t + j) as usize] = f + j;
            }
        }
        assert_eq!(got, want);
        // (0, 15) joined; 3007 values from 40 in runs of at most 1024; 5000.
        assert_eq!(runs.len, vec![15, 1024, 1024, 959, 1]);
    }
}
