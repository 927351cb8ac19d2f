//! The error of a GPU FMM estimated on the GPU: the f64 direct sum at a
//! few sampled targets, by the kernel's own P2P list entry in f64, and the
//! FMM's outputs at those targets, both read back (a few hundred numbers).
//!
//! Estimating on the CPU, as the first tolerance-driven GPU FMM did, cost
//! more than the FMM itself at 10^7 (64 targets against 10^7 sources in
//! f64 on the host). A handful of targets gives the GPU little to do one
//! thread per target, so the sum is spread: the sources are cut into
//! runs of [`RUN`], each run a "cell" of a list of its own, and the
//! sampled targets are repeated once per run, each copy a group of one
//! block that sums its run; the host adds the runs' partial sums. Sources
//! are widened to f64 a chunk at a time, so the memory it takes stays
//! small at any N.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, LaunchConfig};

use super::periodic_reference::{periodic_sums, source_tree};
use super::Trees;
use crate::cuda::device::{alloc, cuda_err, download, upload, zeros};
use crate::cuda::laps::Laps;
use crate::cuda::launch::{Args, Entry};
use crate::cuda::primitives::{gather, gather_u32, widen};
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::domain::PeriodicBox;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::real::Real;
use crate::reference::sample::Sampled;
use crate::reference::Estimate;
use crate::tree::device::DeviceOctree;
use fmm_codegen::emit::p2p_list::P2P_BLOCK;
use fmm_codegen::emit::signature::Role;

/// Sources one block of the reference sum takes.
const RUN: usize = 8192;

/// Sources widened to f64 at a time.
const CHUNK: usize = 1 << 24;

/// What the error of a GPU FMM's outputs is measured against: the f64
/// direct sum at sampled targets, computed once.
pub(crate) struct Estimator<K, R> {
    /// The sampled targets (input order).
    idx: CudaSlice<u32>,
    samples: usize,
    /// Whether every target is sampled (no sampling uncertainty).
    exhaustive: bool,
    /// The reference: one vector per output slot, one value per sample.
    want: Vec<Vec<f64>>,
    /// The samples' positions and fields in f64 (free space: more
    /// sources' sums are added at them by [`Estimator::add_sources`]).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    tcols: Option<Vec<Vec<f64>>>,
    _k: PhantomData<(K, R)>,
}

/// A fixed scramble of `j` (splitmix64's finaliser): the rank taken
/// within a run, the same every evaluation.
fn spread(j: u64) -> u64 {
    let mut z = j.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Up to this many target-source pairs the reference is summed at every
/// target (about 30 us of f64 sums on an H100).
const EVERY_TARGET_PAIRS: usize = 1 << 24;

/// `k` of the `m` targets at `pos` stratified over space, as the CPU's
/// `reference::stratified` takes them: one of each of `k` equal-count
/// runs along the Morton order, which a tree built on the device (one
/// leaf: only its sort) gives; in increasing index order.
/// Spread over the input order instead, half of 10^4 points at one spot
/// reported 7.0e-7 where the error over every target was 7.7e-6.
fn stratified<R: Real>(
    gpu: &Gpu,
    pos: &[CudaSlice<R>; 3],
    m: usize,
    k: usize,
) -> Result<Vec<u32>, Error> {
    if let Some(all_or_none) = all_or_none(m, k) {
        return Ok(all_or_none);
    }
    let tree = DeviceOctree::<R>::build(gpu, [&pos[0], &pos[1], &pos[2]], m)?;
    stratified_in(gpu, &tree.order, m, k)
}

/// Every target where `k` reaches `m`, none where `k` is 0 (no sort
/// needed, and no empty device arrays).
fn all_or_none(m: usize, k: usize) -> Option<Vec<u32>> {
    match k {
        0 => Some(Vec::new()),
        k if k >= m => Some((0..m as u32).collect()),
        _ => None,
    }
}

/// [`stratified`] from a Morton order of the `m` targets already made:
/// `order` the input index at each place of it.
fn stratified_in(gpu: &Gpu, order: &CudaSlice<u32>, m: usize, k: usize) -> Result<Vec<u32>, Error> {
    if let Some(all_or_none) = all_or_none(m, k) {
        return Ok(all_or_none);
    }
    let s = gpu.stream();
    // A fixed pseudo-random rank within each run, not its middle: the
    // middle of a run of the full-depth Morton order is the centre of a
    // cell, a corner of the leaves below it, where the FMM's error is
    // largest (velocity + stretching at 10^6 points read 9.98e-5 on the
    // runs' middles at p 9, theta 0.56, where 256 random targets give
    // 5.3e-5, and took p 11).
    let ranks: Vec<u32> = (0..k)
        .map(|j| {
            let (lo, hi) = (j * m / k, (j + 1) * m / k);
            (lo + (spread(j as u64) % (hi - lo).max(1) as u64) as usize) as u32
        })
        .collect();
    // The sampled ranks' targets picked on the device, one copy back (with
    // a copy a sample, each a synchronisation, the treecode at a tolerance
    // on 10^6 points took 0.0174 s an evaluation with 256 samples, its
    // run 0.0062 s; 0.0128 s with 64, its run 0.0089 s).
    let picked = gather_u32(gpu, &upload(s, &ranks)?, order, k)?;
    let mut idx = download(s, &picked, k)?;
    idx.sort_unstable();
    Ok(idx)
}

/// What an [`Estimator`]'s samples follow (and a periodic reference
/// builds on): whatever a run has made already, so that no sort of the
/// targets of its own is needed.
pub(crate) enum Along<'a, R> {
    /// Nothing made: the targets sorted for the samples (and in a
    /// periodic box a tree of the sources built for the reference).
    Nothing,
    /// The FMM's trees: the samples along their target tree's Morton
    /// order, a periodic reference on their source tree.
    Trees(&'a Trees<R>),
    /// A Morton order of the targets a run made and kept (the input
    /// index at each place; free space): the two lots' FMM's, whose trees
    /// are gone by the time its sum's error is estimated (a sort of 2^24
    /// targets of their own took 0.011 s of a 0.25 s distributed step on
    /// an H200).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Order(&'a CudaSlice<u32>),
}

impl<K: Kernel, R: Real> Estimator<K, R> {
    /// Samples `samples` targets stratified over space ([`stratified`])
    /// and sums the sources at them in f64 (`params`, the kernel's
    /// parameters). In a periodic box (`periodic`: the box and the
    /// tolerance) the periodic sums ([`periodic_sums`]: the near images by
    /// the kernel and high-order expansions, the rest by the images'
    /// expansions). `along`: what a run has made already that the
    /// samples follow ([`Along`]).
    pub(crate) fn new(
        gpu: &Gpu,
        params: &[f64],
        periodic: Option<(&PeriodicBox, f64)>,
        targets: &DeviceParticles<R>,
        sources: &DeviceParticles<R>,
        samples: usize,
        along: Along<'_, R>,
    ) -> Result<Self, Error> {
        let (trees, made) = match along {
            Along::Nothing => (None, None),
            Along::Trees(t) => (Some(t), None),
            Along::Order(o) => (None, Some(o)),
        };
        let def = K::def();
        let s = gpu.stream();
        let (m, n, no) = (targets.len(), sources.len(), def.n_outputs());
        let spos = sources
            .positions()
            .ok_or_else(|| Error::BadOption("the sources have no positions of their own".into()))?;
        let tpos = targets.positions().unwrap_or(spos);
        // Where the f64 sums at every target are cheap, every target: the
        // error then has no sampling uncertainty, and no sort is needed
        // (the f32 direct sum of 1000 points at a tolerance took 1.3 ms,
        // its sum 0.14 ms).
        let samples = if m.saturating_mul(n) <= EVERY_TARGET_PAIRS {
            m
        } else {
            samples
        };
        // The samples' positions and fields, in f64 on the host.
        let columns = |idx: &CudaSlice<u32>, ns: usize| -> Result<Vec<Vec<f64>>, Error> {
            let sampled = |x: &CudaSlice<R>| -> Result<Vec<f64>, Error> {
                let g = gather(gpu, idx, x, ns)?;
                Ok(download(s, &g, ns)?.iter().map(|v| v.to_f64()).collect())
            };
            tpos.iter().chain(targets.slots()).map(sampled).collect()
        };
        let mut lap = Laps::new(Some(gpu), "error estimate");
        // A periodic reference's tree of the sources where no run built
        // one (the node far fields').
        let own = match (periodic, trees) {
            (Some((b, tol)), None) => Some(source_tree(gpu, b, tol, sources)?),
            _ => None,
        };
        // The samples along a Morton order of the targets made already
        // where there is one, not a sort of their own (7 ms at 10^7 on an
        // H100).
        let order = match (trees, &own) {
            (Some(t), _) => Some(&t.target().tree.order),
            (None, None) if made.is_some() => made,
            (None, Some((st, _))) if targets.at_sources() => Some(&st.tree.order),
            _ => None,
        };
        let host_idx = match order {
            Some(order) => stratified_in(gpu, order, m, samples)?,
            None => stratified(gpu, tpos, m, samples)?,
        };
        lap.say("stratified samples")?;
        let ns = host_idx.len();
        let idx = upload(s, &host_idx)?;
        let tcols = columns(&idx, ns)?;
        if let Some((b, tol)) = periodic {
            let (st, sslots) = match (trees, &own) {
                (Some(t), _) => (&t.source, &t.sslots[..]),
                (None, Some((st, slots))) => (st, &slots[..]),
                (None, None) => unreachable!("made above where no run built the trees"),
            };
            let want = periodic_sums::<K, R>(gpu, params, b, tol, (st, sslots), &tcols)?;
            return Ok(Estimator {
                idx,
                samples: ns,
                exhaustive: ns == m,
                want,
                tcols: None,
                _k: PhantomData,
            });
        }
        let mut want = vec![vec![0.0f64; ns]; no];
        direct_sums::<K, R>(gpu, params, &tcols, (spos, sources.slots(), n), &mut want)?;
        lap.say("direct sums")?;
        Ok(Estimator {
            idx,
            samples: ns,
            exhaustive: ns == m,
            want,
            tcols: Some(tcols),
            _k: PhantomData,
        })
    }

    /// The f64 sums of `sources` (free space) added to the reference at
    /// the same samples: the error of outputs summed from two sets of
    /// sources (a process's own and those the others sent it) estimated
    /// without joining the sets.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn add_sources(
        &mut self,
        gpu: &Gpu,
        params: &[f64],
        sources: &DeviceParticles<R>,
    ) -> Result<(), Error> {
        let Some(tcols) = &self.tcols else {
            return Err(Error::BadOption(
                "sources added to a periodic box's reference".into(),
            ));
        };
        let Some(spos) = sources.positions() else {
            return Err(Error::BadOption(
                "the sources have no positions of their own".into(),
            ));
        };
        let n = sources.len();
        direct_sums::<K, R>(
            gpu,
            params,
            tcols,
            (spos, sources.slots(), n),
            &mut self.want,
        )
    }

    /// The relative L2 error of the outputs `out` (input order, on the
    /// device) at the sampled targets.
    pub(crate) fn error(&self, gpu: &Gpu, out: &[CudaSlice<R>]) -> Result<Estimate, Error> {
        Ok(self.sampled(gpu, out)?.estimate())
    }

    /// The outputs `out` (input order, on the device) at the sampled
    /// targets, beside their references.
    pub(crate) fn sampled(&self, gpu: &Gpu, out: &[CudaSlice<R>]) -> Result<Sampled, Error> {
        let s = gpu.stream();
        let mut got = Vec::with_capacity(out.len());
        for o in out {
            let g = gather(gpu, &self.idx, o, self.samples)?;
            got.push(
                download(s, &g, self.samples)?
                    .iter()
                    .map(|v| v.to_f64())
                    .collect(),
            );
        }
        Ok(Sampled {
            got,
            want: self.want.clone(),
            exhaustive: self.exhaustive,
        })
    }
}

/// The f64 sums of the sources `(spos, sslots)` of kernel `K` at the
/// sampled targets `tcols` (their positions and fields, one column each;
/// `n` sources) added to `want` (one vector per output slot), on the GPU.
fn direct_sums<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    tcols: &[Vec<f64>],
    (spos, sslots, n): (&[CudaSlice<R>; 3], &[CudaSlice<R>], usize),
    want: &mut [Vec<f64>],
) -> Result<(), Error> {
    let s = gpu.stream();
    let (no, ns) = (want.len(), tcols.first().map_or(0, Vec::len));
    if n == 0 || ns == 0 {
        return Ok(());
    }
    let entry = Entry::p2p_list::<K, f64>(gpu)?;
    // The lists name runs of sources, no periodic images.
    let no_shift = upload(s, &[0.0f64; 3])?;
    for c0 in (0..n).step_by(CHUNK) {
        let len = CHUNK.min(n - c0);
        let runs = len.div_ceil(RUN);
        // The samples repeated once per run, run g's copy at g * ns.
        let mut reps = Vec::with_capacity(tcols.len());
        for col in tcols {
            let v: Vec<f64> = (0..runs).flat_map(|_| col.iter().copied()).collect();
            reps.push(upload(s, &v)?);
        }
        // Groups of up to a block of the samples, each listing its
        // run (the run is the group's cell: the lists are the cells').
        let block = P2P_BLOCK as usize;
        let blocks = ns.div_ceil(block);
        let groups = runs * blocks;
        let (mut group_begin, mut group_end, mut group_cell) = (
            Vec::with_capacity(groups),
            Vec::with_capacity(groups),
            Vec::with_capacity(groups),
        );
        for g in 0..runs {
            for b in 0..blocks {
                group_begin.push((g * ns + b * block) as i32);
                group_end.push((g * ns + ((b + 1) * block).min(ns)) as i32);
                group_cell.push(g as i32);
            }
        }
        let runs_of: Vec<i32> = (0..runs as i32).collect();
        let list_begin: Vec<i64> = (0..runs as i64).collect();
        let list_end: Vec<i64> = (1..=runs as i64).collect();
        let cell_begin: Vec<i32> = (0..runs).map(|g| (g * RUN) as i32).collect();
        let cell_end: Vec<i32> = (0..runs).map(|g| ((g + 1) * RUN).min(len) as i32).collect();
        let (gb, ge, gc) = (
            upload(s, &group_begin)?,
            upload(s, &group_end)?,
            upload(s, &group_cell)?,
        );
        let (lb, le, list) = (
            upload(s, &list_begin)?,
            upload(s, &list_end)?,
            upload(s, &runs_of)?,
        );
        let (cb, ce) = (upload(s, &cell_begin)?, upload(s, &cell_end)?);
        let mut src = Vec::new();
        for x in spos.iter().chain(sslots) {
            src.push(widen(gpu, &x.slice(c0..c0 + len), len)?);
        }
        let mut out: Vec<CudaSlice<f64>> = (0..no)
            .map(|_| alloc::<f64>(s, runs * ns))
            .collect::<Result<_, _>>()?;
        let mut counts = zeros::<u64>(s, 1)?;
        // Positions first, then the slots, on both sides.
        let mut a = Args::new();
        a.int(Role::TargetCount, (runs * ns) as i32)
            .read(Role::TargetPositions, &reps[..3])
            .read(Role::TargetSlots, &reps[3..])
            .int(Role::GroupCount, groups as i32)
            .read(Role::Groups, [&gb, &ge, &gc])
            .read(Role::Lists, [&lb, &le])
            .read(Role::Lists, [&list])
            .read(Role::ImageShifts, [&no_shift])
            .read(Role::Cells, [&cb, &ce])
            .int(Role::SourceCount, len as i32)
            .read(Role::SourcePositions, &src[..3])
            .read(Role::SourceSlots, &src[3..])
            .values(Role::Params, params)
            .write(Role::Outputs, out.iter_mut())
            .int(Role::Accumulate, 0)
            .write(Role::Counts, [&mut counts]);
        let cfg = LaunchConfig {
            grid_dim: (groups.clamp(1, 1 << 20) as u32, 1, 1),
            block_dim: (P2P_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments are checked against the P2P lists'
        // signature (`Signature::p2p_list`) in f64: `groups` groups of
        // at most P2P_BLOCK targets, each listing its run of the
        // widened sources; every output element is written
        // (`accumulate` 0: each target copy is in exactly one group).
        unsafe { entry.launch(a, s, cfg, cuda_err("launching the reference sums")) }?;
        for (k, o) in out.iter().enumerate() {
            let parts = download(s, o, runs * ns)?;
            for g in 0..runs {
                for j in 0..ns {
                    want[k][j] += parts[g * ns + j];
                }
            }
        }
    }
    Ok(())
}
