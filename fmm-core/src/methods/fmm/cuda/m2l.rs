//! The M2L on the GPU (`fmm_m2l` and `fmm_m2l_lanes_*` in `ops.cu`): which
//! of the two runs, how their work is cut, and the launches.
//!
//! - f32 particles, p up to [`MAX_F32_M2L_ORDER`]: the float M2L, lanes
//!   over source cells, on coefficients normalised by the target cell's
//!   size. Its work is cut into items by [`lane_plan`]; where the
//!   expansions' shared memory does not fit a block, one expansion a pass.
//! - Otherwise (f64 particles, higher orders, [`M2lChoice::Double`]), or
//!   where a float pair's cells differ too much in size or lie too close
//!   (two trees) or a float sum leaves float's range: the double M2L,
//!   one thread per (coefficient rows, expansion), its tasks from
//!   [`m2l_tasks`].

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaSlice, LaunchConfig};

use super::periodic::Images;
use super::{grid, DeviceLists, FmmTree, Ops};
use crate::cuda::device::{alloc, cuda_err, download, launch, upload, zeros};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::methods::fmm::harmonics::ncoef;
use crate::methods::fmm::{GpuTuning, M2lChoice};
use crate::real::Real;
use crate::stats::M2lKind;

/// Shared memory the double M2L uses per block by default, which sets how
/// many source cells a block takes at once: small enough for many blocks
/// per multiprocessor.
const M2L_SHARED: usize = 8 * 1024;

fn m2l_shared(tuning: &GpuTuning) -> usize {
    match tuning.m2l_shared_bytes {
        0 => M2L_SHARED,
        b => b.min(48 * 1024),
    }
}

/// The highest order at which the M2L of f32 particles runs in float (its
/// normalised harmonics of order p reach about (2p)! / (2^p p!), 3e11 at
/// 12, and float carries 7 digits, what p 12 gives already).
pub const MAX_F32_M2L_ORDER: usize = 12;

/// Whether the M2L's products run in float: for f32 particles up to
/// [`MAX_F32_M2L_ORDER`], and when the cells' sizes keep the scale
/// factors 2^(-e (k + 1)) of `ops.cu` in double's range. Otherwise, and
/// where [`M2lChoice::Double`] asks for it (to compare), in double.
///
/// The float form normalises the translation by the source cell's size,
/// and |v| is at least twice that for two distinct cells of one octree;
/// cells of two trees (targets apart from the sources: a process's
/// targets against its sources and the local essential trees it got) can
/// be closer, where the harmonics of a short normalised v would overflow
/// float; so can sparse cells of one tree, whose tight radii pass the MAC
/// beside a cell of another size. The kernel checks each pair and leaves
/// one closer than twice the source's size to the double M2L, which adds
/// those pairs alone ([`spilled_in_double`]; it ran the whole M2L in
/// double for one such pair before: 0.26 s where 0.051 s at 2^24). (Two
/// trees ran the double M2L always before: three times the float's time
/// at 2^24 targets, 2026-11-28.)
///
/// Where the float M2L's shared memory for all the expansions does not fit
/// in a block (p 12 with three expansions on an H100: 249 KB of 227), it
/// runs one expansion a pass; where one does not fit either, the double
/// one runs.
fn float_m2l<R: Real>(p: usize, root_halves: [f64; 2], choice: M2lChoice) -> bool {
    let forced = choice == M2lChoice::Double;
    // ilogb of the roots' half sides; cells are at most MAX_LEVEL below.
    let in_range = |root_half: f64| {
        let e_root = ((root_half.to_bits() >> 52) & 0x7ff) as i64 - 1023;
        let e_most = e_root.abs() + crate::tree::morton::MAX_LEVEL as i64 + 1;
        e_most * (p as i64 + 1) < 1000
    };
    R::NAME == "f32" && p <= MAX_F32_M2L_ORDER && root_halves.into_iter().all(in_range) && !forced
}

/// The double M2L's tasks (see `fmm_m2l` in `ops.cu`): `(c, n_lo, n_hi,
/// 0)`, rows `n_lo..=n_hi` of the sum for local coefficient `c = idx(k,
/// l)`, each about one row of the widest length `2p + 1` long, so the
/// threads of a warp do about equal work; longer where `nq` expansions
/// would need more than 1024 threads.
fn m2l_tasks(p: usize, nq: usize) -> Vec<[i32; 4]> {
    let mut most = 2 * p + 1;
    loop {
        let tasks = m2l_tasks_of(p, most);
        if nq * tasks.len() <= 1024 {
            return tasks;
        }
        most *= 2;
    }
}

fn m2l_tasks_of(p: usize, most: usize) -> Vec<[i32; 4]> {
    let mut tasks = Vec::new();
    for k in 0..=p {
        for l in 0..=k {
            let c = (k * (k + 1) / 2 + l) as i32;
            let (mut lo, mut work) = (0, 0);
            for n in 0..=p - k {
                work += 2 * n + 1;
                if work >= most || n == p - k {
                    tasks.push([c, lo as i32, n as i32, 0]);
                    (lo, work) = (n + 1, 0);
                }
            }
        }
    }
    tasks
}

/// The widest run of neighbouring coefficients `L_k^l` one thread of the
/// float M2L takes (`m2l_item` in `ops.cu` is instantiated for 1 to 4).
const MAX_WIDTH: usize = 4;

/// The float M2L's work dealt to the warps of a block (see `m2l_lanes` in
/// `ops.cu`).
#[derive(Debug)]
struct LanePlan {
    /// `(k | l0 << 8 | w << 16, n_lo, n_hi, slot)`: coefficients `L_k^l0`
    /// to `L_k^(l0 + w - 1)` over the rows `n_lo..=n_hi` of the
    /// multipoles; `slot` the first of its `2 w nq` floats per lane of
    /// shared memory, -1 in a warp of one item (kept in registers).
    items: Vec<[i32; 4]>,
    /// Each warp's items, `items[begin..end]`.
    warps: Vec<[i32; 2]>,
    /// Floats per lane of shared memory for the items' sums.
    slots: usize,
}

/// Instructions of one row `n` of an item `w` wide: per `m`, one harmonic
/// and `nq` multipoles loaded, `4 w nq` multiply-adds, moving the window
/// and the loop; a few to start the row.
fn row_cost(n: usize, w: usize, nq: usize) -> usize {
    (2 * n + 1) * (nq + 4 + 4 * w * nq) + 8
}

/// Cuts `L_k^l` for all `k <= p`, `l <= k` into runs of at most
/// [`MAX_WIDTH`] neighbouring `l` (as equal as possible), the runs' rows
/// into pieces of at most a `warps`-th of the work, and deals the pieces,
/// longest first, each to the warp with the least work so far (LPT).
fn lane_plan(p: usize, nq: usize, warps: usize) -> LanePlan {
    let mut runs = Vec::new();
    for k in 0..=p {
        let n_runs = (k + 1).div_ceil(MAX_WIDTH);
        let mut l0 = 0;
        for r in 0..n_runs {
            let w = (k + 1 - l0).div_ceil(n_runs - r);
            runs.push((k, l0, w));
            l0 += w;
        }
    }
    let total: usize = runs
        .iter()
        .map(|&(k, _, w)| (0..=p - k).map(|n| row_cost(n, w, nq)).sum::<usize>())
        .sum();
    let share = total.div_ceil(warps);
    // (cost, k, l0, w, n_lo, n_hi), rows from high to low.
    let mut pieces = Vec::new();
    for &(k, l0, w) in &runs {
        let (mut hi, mut cost) = (p - k, 0);
        for n in (0..=p - k).rev() {
            let c = row_cost(n, w, nq);
            if cost > 0 && cost + c > share {
                pieces.push((cost, k, l0, w, n + 1, hi));
                (hi, cost) = (n, 0);
            }
            cost += c;
        }
        pieces.push((cost, k, l0, w, 0, hi));
    }
    pieces.sort_by(|a, b| b.cmp(a));
    let mut load = vec![0usize; warps];
    let mut dealt = vec![Vec::new(); warps];
    for piece in pieces {
        let i = (0..warps).min_by_key(|&i| load[i]).unwrap_or(0);
        // A warp of several items moves each one's sums in and out of
        // shared memory once per chunk of sources.
        load[i] += piece.0 + 4 * piece.3 * nq;
        dealt[i].push(piece);
    }
    dealt.retain(|d| !d.is_empty());
    let (mut items, mut bounds, mut slots) = (Vec::new(), Vec::new(), 0);
    for d in &dealt {
        let begin = items.len() as i32;
        for &(_, k, l0, w, lo, hi) in d {
            let slot = if d.len() == 1 {
                -1
            } else {
                slots += 2 * w * nq;
                (slots - 2 * w * nq) as i32
            };
            items.push([(k | l0 << 8 | w << 16) as i32, lo as i32, hi as i32, slot]);
        }
        bounds.push([begin, items.len() as i32]);
    }
    LanePlan {
        items,
        warps: bounds,
        slots,
    }
}

/// Warps per block of the float M2L: as tuned, or 8 for one expansion
/// and 16 for more; at most 16 for more than one (`ops.cu` compiles those
/// for 512 threads, the sums of three expansions need more than 64
/// registers).
fn lane_warps(nq: usize, tuning: &GpuTuning) -> usize {
    let (default, most) = if nq == 1 { (8, 32) } else { (16, 16) };
    match tuning.m2l_warps {
        0 => default,
        w => w.clamp(1, most),
    }
}

/// How many levels apart a float M2L pair's cells may be (`max_d` in
/// `ops.cu`): `64 / p`; the factors 2^(d (k + 1)) that take the sums
/// between the cells' scales then stay within 2^(64 (p + 1) / p), and as
/// cells are at most `MAX_LEVEL` (21) levels apart, within 2^84 at any p
/// (measured pairs are at most 3 apart); a pair further apart is left to
/// the double M2L ([`spilled_in_double`]). The tuning may lower it (the
/// tests set -1 to take the double M2L's way for every pair).
fn max_levels_apart(p: usize, tuning: &GpuTuning) -> i32 {
    let most = (64 / p.max(1)) as i32;
    tuning.m2l_max_levels_apart.map_or(most, |v| v.min(most))
}

/// M2L from the source tree's multipoles `mult` (`nq` expansions per cell,
/// stored for `m >= 0`, of positions times `u`: the unit box, see
/// `unit_scale`), each at the lattice shift of the image its list entry
/// names (`images`), to the target cells' local expansions, returned with
/// the name of the M2L that ran and how many translations the float one
/// left to the double one.
#[allow(clippy::too_many_arguments)]
pub(super) fn m2l<R: Real>(
    gpu: &Gpu,
    ops: &Ops,
    tt: &FmmTree<R>,
    st: &FmmTree<R>,
    lists: &DeviceLists,
    images: &Images<R>,
    mult: &CudaSlice<f64>,
    nq: usize,
    p: usize,
    u: f64,
    tuning: &GpuTuning,
) -> Result<(CudaSlice<f64>, M2lKind, u64), Error> {
    let s = gpu.stream();
    let nc = ncoef(p);
    let nf = (p + 1) * (p + 1);
    let (snc, tnc) = (st.tree.n_cells, tt.tree.n_cells);
    let (n_exp, nqi, tnci) = ((snc * nq) as i32, nq as i32, tnc as i32);
    let mut local = zeros::<f64>(s, 2 * tnc * nq * nc)?;
    // Log2 of the unit box's scale (a power of two): the float M2L's
    // exponents are the unit box's cells'.
    let eu = u.log2().round() as i32;
    let roots = [st.tree.bounds.half * u, tt.tree.bounds.half * u];
    // No pair may be apart in levels: the double M2L's way (the tests').
    let none_apart = max_levels_apart(p, tuning) < 0;
    if float_m2l::<R>(p, roots, tuning.m2l) && !none_apart {
        let most = gpu
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(cuda_err("the device's shared memory"))? as usize;
        // One buffer of sources, then the items' sums; 128 bytes of static
        // shared memory besides (the sources' levels).
        let fits = |k: usize| {
            let plan = lane_plan(p, k, lane_warps(k, tuning));
            let shared = lane_shared(p, k, plan.slots);
            (shared + 128 <= most).then_some((plan, shared))
        };
        // The nq expansions in one pass where their shared memory fits, else
        // one a pass (velocity + stretching at p 12: 249 KB of 227 on an
        // H100 for three; its M2L in double took 2.08 s of 2.37 at 10^7).
        let chosen = fits(nq)
            .map(|fit| (fit, 1))
            .or_else(|| fits(1).map(|fit| (fit, nq)));
        if let Some(((plan, shared), passes)) = chosen {
            let mut mfull = alloc::<f32>(s, 2 * snc * nq * nf)?;
            launch!(s, ops.full_range_f32, grid(snc * nq * nf), "fmm_full_range_f32";
                &n_exp, &nqi, &st.tree.half, &eu, mult, &mut mfull)?;
            let f = ops.m2l_lanes(nq / passes);
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared as i32,
            )
            .map_err(cuda_err("setting the M2L's shared memory"))?;
            let items: Vec<i32> = plan.items.iter().flatten().copied().collect();
            let warps: Vec<i32> = plan.warps.iter().flatten().copied().collect();
            let (d_items, d_warps) = (upload(s, &items)?, upload(s, &warps)?);
            let mut flag = zeros::<i32>(s, 1)?;
            let mut spill = zeros::<i32>(s, 1 + 2 * SPILL_CAP)?;
            let spill_cap = SPILL_CAP as i32;
            let max_d = max_levels_apart(p, tuning);
            let cfg = LaunchConfig {
                grid_dim: (tnc.clamp(1, 1 << 20) as u32, 1, 1),
                block_dim: (32 * plan.warps.len() as u32, 1, 1),
                shared_mem_bytes: shared as u32,
            };
            let mut lanes = |m: &CudaSlice<f32>, l: &mut CudaSlice<f64>| {
                launch!(s, f, cfg, "fmm_m2l_lanes";
                    &tnci, &lists.m2l_begin, &lists.m2l_end, &lists.m2l,
                    &st.tree.center[0], &st.tree.center[1], &st.tree.center[2], &images.shift,
                    &st.tree.half,
                    &tt.tree.center[0], &tt.tree.center[1], &tt.tree.center[2], &tt.tree.half,
                    &d_items, &d_warps, &max_d, &eu, m, l, &mut flag, &mut spill, &spill_cap)
            };
            if passes == 1 {
                lanes(&mfull, &mut local)?;
            } else {
                // Expansion k's multipoles taken out, its locals added back.
                let (snci, nfi, nci) = (snc as i32, 2 * nf as i32, nc as i32);
                let mut one = alloc::<f32>(s, 2 * snc * nf)?;
                let mut part = alloc::<f64>(s, 2 * tnc * nc)?;
                for k in 0..nq as i32 {
                    launch!(s, ops.take_expansion, grid(snc * 2 * nf), "fmm_take_expansion";
                        &snci, &nqi, &k, &nfi, &mfull, &mut one)?;
                    s.memset_zeros(&mut part)
                        .map_err(cuda_err("clearing an expansion's locals"))?;
                    lanes(&one, &mut part)?;
                    launch!(s, ops.add_expansion, grid(tnc * nc), "fmm_add_expansion";
                        &tnci, &nqi, &k, &nci, &part, &mut local)?;
                }
            }
            let why = download(s, &flag, 1)?[0];
            if why == 0 {
                let spilled = download(s, &spill, 1)?[0] as usize;
                if spilled > 0 {
                    let pairs = download(s, &spill, 1 + 2 * spilled)?;
                    let sources = (refs(&st.tree.center), snc);
                    let targets = (refs(&tt.tree.center), tnc);
                    let (mult, shift) = (mult, &images.shift);
                    let add = |l: M2lLists<'_>, local: &mut CudaSlice<f64>| {
                        let tasks = m2l_tasks(p, nq);
                        double_m2l(
                            gpu, ops, targets, l, sources, shift, mult, nq, p, u, &tasks, tuning,
                            local,
                        )
                    };
                    let in_double = spilled_in_double(gpu, &pairs[1..], tnc, add, &mut local)?;
                    return Ok((local, M2lKind::FloatLanes, in_double));
                }
                return Ok((local, M2lKind::FloatLanes, 0));
            }
            // A pair's cells too far apart in size for float, or a sum out
            // of float's range: all in double.
            if crate::stats::trace() {
                let reasons = [
                    (1, "cells more levels apart than float's scales allow"),
                    (2, "cells closer than twice the source's size"),
                    (4, "a sum out of float's range"),
                ];
                let said: Vec<&str> = reasons
                    .iter()
                    .filter(|(bit, _)| why & bit != 0)
                    .map(|(_, what)| *what)
                    .collect();
                eprintln!(
                    "[fmm] the float M2L ran again in double: {}",
                    said.join("; ")
                );
            }
            s.memset_zeros(&mut local)
                .map_err(cuda_err("clearing the local expansions"))?;
        }
    }
    let lists = M2lLists {
        begin: &lists.m2l_begin,
        end: &lists.m2l_end,
        list: &lists.m2l,
    };
    let targets = (refs(&tt.tree.center), tnc);
    let sources = (refs(&st.tree.center), snc);
    let tasks = m2l_tasks(p, nq);
    double_m2l(
        gpu,
        ops,
        targets,
        lists,
        sources,
        &images.shift,
        mult,
        nq,
        p,
        u,
        &tasks,
        tuning,
        &mut local,
    )?;
    Ok((local, M2lKind::Double, 0))
}

/// Most pairs the float M2L leaves to the double one ([`spilled_in_double`])
/// before it runs all in double (8 MB of room).
const SPILL_CAP: usize = 1 << 20;

/// The pairs the float M2L left out (`pairs`: target cell, list entry,
/// each pair as often as the passes met it), as lists of their own over
/// the `tnc` target cells, added to `local` by `add` (the double M2L);
/// returns how many.
/// Sparse cells, whose tight radii pass the MAC beside a cell of another
/// size, are the few such pairs (an f32 point rounded onto a part's face
/// made some at 2^24: the whole M2L in double took 0.26 s where the float
/// one 0.051 s).
fn spilled_in_double(
    gpu: &Gpu,
    pairs: &[i32],
    tnc: usize,
    add: impl FnOnce(M2lLists<'_>, &mut CudaSlice<f64>) -> Result<(), Error>,
    local: &mut CudaSlice<f64>,
) -> Result<u64, Error> {
    let s = gpu.stream();
    let mut by_target: Vec<(i32, i32)> = pairs.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    by_target.sort_unstable();
    by_target.dedup();
    let (mut begin, mut end) = (vec![0i64; tnc], vec![0i64; tnc]);
    for (i, &(t, _)) in by_target.iter().enumerate() {
        let t = t as usize;
        if end[t] == 0 {
            begin[t] = i as i64;
        }
        end[t] = i as i64 + 1;
    }
    let list: Vec<i32> = by_target.iter().map(|&(_, e)| e).collect();
    if crate::stats::trace() {
        eprintln!(
            "[fmm] the float M2L left {} pairs to the double one",
            list.len()
        );
    }
    let (begin, end, list) = (upload(s, &begin)?, upload(s, &end)?, upload(s, &list)?);
    let lists = M2lLists {
        begin: &begin,
        end: &end,
        list: &list,
    };
    add(lists, local)?;
    Ok(by_target.len() as u64)
}

/// A list per target of the M2L: `list[begin[t]..end[t]]`, entries of a
/// source cell and its image (`tree::traversal::entry`).
struct M2lLists<'a> {
    begin: &'a CudaSlice<i64>,
    end: &'a CudaSlice<i64>,
    list: &'a CudaSlice<i32>,
}

fn refs(x: &[CudaSlice<f64>; 3]) -> [&CudaSlice<f64>; 3] {
    [&x[0], &x[1], &x[2]]
}

/// The double M2L (`fmm_m2l`) of the `tasks`' coefficients, from the
/// multipoles `mult` of the sources (their centres, how many) to the
/// local expansions `local` of the targets (the same), over `lists`.
#[allow(clippy::too_many_arguments)]
fn double_m2l(
    gpu: &Gpu,
    ops: &Ops,
    (tc, tnc): ([&CudaSlice<f64>; 3], usize),
    lists: M2lLists<'_>,
    (sc, snc): ([&CudaSlice<f64>; 3], usize),
    shift: &CudaSlice<f64>,
    mult: &CudaSlice<f64>,
    nq: usize,
    p: usize,
    u: f64,
    tasks: &[[i32; 4]],
    tuning: &GpuTuning,
    local: &mut CudaSlice<f64>,
) -> Result<(), Error> {
    let s = gpu.stream();
    let nf = (p + 1) * (p + 1);
    let (n_exp, nqi, tnci) = ((snc * nq) as i32, nq as i32, tnc as i32);
    let mut mfull = alloc::<f64>(s, 2 * snc * nq * nf)?;
    launch!(s, ops.full_range, grid(snc * nq * nf), "fmm_full_range";
        &n_exp, mult, &mut mfull)?;
    let per_source = (1 + nq) * nf * 16;
    let sb = (m2l_shared(tuning) / per_source).clamp(1, 32);
    let flat: Vec<i32> = tasks.iter().flatten().copied().collect();
    let d_tasks = upload(s, &flat)?;
    let (n_tasks, sbi) = (tasks.len() as i32, sb as i32);
    let cfg = LaunchConfig {
        grid_dim: (tnc.clamp(1, 1 << 20) as u32, 1, 1),
        block_dim: ((nq * tasks.len()).div_ceil(32) as u32 * 32, 1, 1),
        shared_mem_bytes: (sb * per_source) as u32,
    };
    launch!(s, ops.m2l, cfg, "fmm_m2l";
        &tnci, lists.begin, lists.end, lists.list,
        tc[0], tc[1], tc[2], sc[0], sc[1], sc[2], shift,
        &nqi, &sbi, &n_tasks, &d_tasks, &u, &mfull, local)?;
    Ok(())
}

/// The local expansions of degree `degree` about `points` (`n` of them,
/// targets of no size) of the multipoles `mult` of order `p` of the
/// cells at `centres` (`cells` of them) over `lists`, by the double M2L
/// with the tasks of `L_k` for `k <= degree` only (a point's own M2P).
/// Each point's expansion is `ncoef(p)` coefficients wide, those past
/// `degree` zero; the sums run over the multipoles' degrees `n <= p - k`.
#[allow(clippy::too_many_arguments)]
pub(super) fn m2l_to_points(
    gpu: &Gpu,
    ops: &Ops,
    (points, n): ([&CudaSlice<f64>; 3], usize),
    (begin, end, list): (&CudaSlice<i64>, &CudaSlice<i64>, &CudaSlice<i32>),
    (centres, cells): ([&CudaSlice<f64>; 3], usize),
    shift: &CudaSlice<f64>,
    mult: &CudaSlice<f64>,
    nq: usize,
    p: usize,
    degree: usize,
    u: f64,
) -> Result<CudaSlice<f64>, Error> {
    let mut local = zeros::<f64>(gpu.stream(), 2 * n * nq * ncoef(p))?;
    let low = ncoef(degree) as i32;
    let tasks: Vec<[i32; 4]> = m2l_tasks(p, nq)
        .into_iter()
        .filter(|t| t[0] < low)
        .collect();
    let lists = M2lLists { begin, end, list };
    let tuning = GpuTuning::default();
    double_m2l(
        gpu,
        ops,
        (points, n),
        lists,
        (centres, cells),
        shift,
        mult,
        nq,
        p,
        u,
        &tasks,
        &tuning,
        &mut local,
    )?;
    Ok(local)
}

/// Row stride of the float M2L's shared arrays, in complex floats: 32
/// lanes and one more, so the copies into them, a source's coefficients
/// by consecutive threads, fall on distinct banks. (`ops.cu` gets it as a
/// #define.)
pub(super) const LANE_LD: usize = 33;

/// Dynamic shared memory of the float M2L: one buffer of sources'
/// harmonics and multipoles, and 32 floats per slot of the items' sums.
fn lane_shared(p: usize, nq: usize, slots: usize) -> usize {
    (1 + nq) * (p + 1) * (p + 1) * LANE_LD * 8 + slots * 32 * 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::fmm::MAX_GPU_ORDER;

    #[test]
    fn m2l_tasks_cover_every_row_of_every_coefficient_once() {
        for p in 1..=MAX_GPU_ORDER {
            for nq in [1, 3] {
                let tasks = m2l_tasks(p, nq);
                assert!(nq * tasks.len() <= 1024, "p {p}: {} tasks", tasks.len());
                let mut rows = vec![Vec::new(); ncoef(p)];
                for &[c, lo, hi, _] in &tasks {
                    rows[c as usize].extend(lo..=hi);
                }
                for k in 0..=p {
                    for l in 0..=k {
                        let want: Vec<i32> = (0..=(p - k) as i32).collect();
                        assert_eq!(rows[k * (k + 1) / 2 + l], want, "p {p}, k {k}, l {l}");
                    }
                }
            }
        }
    }

    #[test]
    fn lane_plans_cover_every_row_of_every_coefficient_once() {
        for p in 1..=MAX_F32_M2L_ORDER {
            for nq in 1..=3 {
                for warps in [1, 4, 8, 16, 24, 32] {
                    let plan = lane_plan(p, nq, warps);
                    assert!(plan.warps.len() <= warps);
                    let mut rows = vec![Vec::new(); ncoef(p)];
                    let mut slot_used = vec![false; plan.slots];
                    for &[begin, end] in &plan.warps {
                        assert!(begin < end, "p {p}: an empty warp");
                        for &[x, lo, hi, slot] in &plan.items[begin as usize..end as usize] {
                            let (k, l0, w) = (
                                (x & 255) as usize,
                                (x >> 8 & 255) as usize,
                                (x >> 16) as usize,
                            );
                            assert!((1..=MAX_WIDTH).contains(&w) && l0 + w <= k + 1);
                            assert!(0 <= lo && lo <= hi && hi as usize <= p - k);
                            for l in l0..l0 + w {
                                rows[k * (k + 1) / 2 + l].extend(lo..=hi);
                            }
                            // Slots: none in a warp of one item, else each
                            // item its own.
                            assert_eq!(slot < 0, end - begin == 1);
                            if slot >= 0 {
                                for u in &mut slot_used[slot as usize..slot as usize + 2 * w * nq] {
                                    assert!(!*u, "p {p}: slots overlap");
                                    *u = true;
                                }
                            }
                        }
                    }
                    for k in 0..=p {
                        for l in 0..=k {
                            let mut got = rows[k * (k + 1) / 2 + l].clone();
                            got.sort();
                            let want: Vec<i32> = (0..=(p - k) as i32).collect();
                            assert_eq!(got, want, "p {p}, nq {nq}, warps {warps}, k {k}, l {l}");
                        }
                    }
                }
            }
        }
    }

    /// Balance of the plans the GPU runs (printed for tuning): the busiest
    /// warp against an even share, both by [`row_cost`].
    #[test]
    fn lane_plans_share_the_work_evenly() {
        for (p, nq) in [
            (5, 1),
            (6, 1),
            (8, 1),
            (12, 1),
            (8, 3),
            (10, 3),
            (11, 3),
            (12, 3),
        ] {
            let plan = lane_plan(p, nq, lane_warps(nq, &GpuTuning::default()));
            let load = |&[begin, end]: &[i32; 2]| -> usize {
                plan.items[begin as usize..end as usize]
                    .iter()
                    .map(|&[x, lo, hi, _]| {
                        let w = (x >> 16) as usize;
                        (lo..=hi)
                            .map(|n| row_cost(n as usize, w, nq))
                            .sum::<usize>()
                    })
                    .sum()
            };
            let loads: Vec<usize> = plan.warps.iter().map(load).collect();
            let even = loads.iter().sum::<usize>() as f64 / loads.len() as f64;
            let most = *loads.iter().max().unwrap() as f64;
            let shared = lane_shared(p, nq, plan.slots) + 128;
            println!(
                "p {p:2} nq {nq}: {} items on {} warps, busiest {:.2} of an even share, {} KB of shared memory with one buffer",
                plan.items.len(),
                plan.warps.len(),
                most / even,
                shared / 1024
            );
            assert!(most <= 1.5 * even, "p {p} nq {nq}: {plan:?}");
            // An H100's block takes 227 KB: all but p 12 with three
            // expansions run in float there.
            assert_eq!(
                shared <= 232_448,
                p < 12 || nq == 1,
                "p {p} nq {nq}: {shared} bytes"
            );
        }
    }
}
