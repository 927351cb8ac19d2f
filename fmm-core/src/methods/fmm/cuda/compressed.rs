//! The node far fields' M2L on the GPU by compressed operators: the CPU's
//! (`crate::far::compressed`, Fong and Darve 2009's) on the device.
//!
//! Why: M2L by the kernel between node sets costs `k^2` kernel evaluations
//! a pair of cells (125^2 at order 4) and was 75% of a 10^7 softened
//! gravity FMM on the H200; as a product `U C V^T` of rank `r` it costs
//! about `r^2` multiply-adds a pair, batched per operator into matrix
//! products.
//!
//! - **Keys on the device** (`compressed.cu`): every M2L pair's two levels
//!   and offset, into a hash table of the distinct keys with their counts.
//!   Only that table crosses the bus (2^16 slots; 1320 keys for 10^7
//!   points at order 4, 38,000 on a Plummer tree with small leaves).
//! - **Operators on the host**: the CPU's own ([`compressed::operator_set`]:
//!   the same bases, operators, rank tolerance and cache), for the keys of
//!   at least [`compressed::MIN_PAIRS`] pairs (a homogeneous kernel's keys
//!   of one shape counted together), as the CPU chooses; the rarer keys'
//!   pairs go to M2L by the kernel, as on the CPU, so the two agree to
//!   rounding.
//! - **Products on the device**, in the particles' precision (the node
//!   strengths and values stay f64): `V^T q` per source cell, `C` times those
//!   per operator's pairs added to the targets' compressed values (atomic
//!   adds: the order of a target's sums varies run to run, at rounding),
//!   `U` times those per target cell added to the node values. The bases
//!   and operators stay uploaded for the next evaluation with the same
//!   operators (`device_pool`).
//!
//! It applies where the CPU's does: both trees in one root cube (targets
//! apart too: `Trees::build` then builds them in the union of their cubes,
//! as the CPU does), so one lattice, and every source field other than the
//! strength (a core radius) the same in every cell, checked on the device
//! ([`common_fields`]); elsewhere M2L runs by the kernel.

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig};

use super::periodic::Images;
use super::{DeviceLists, FmmTree};
use crate::cuda::device::{alloc, download, launch, per_item, upload, zeros};
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::primitives::{scan, scanned_total};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::far::compressed::{self, Bases, Key, Operators};
use crate::far::nodes::Basis;
use crate::far::Representation;
use crate::kernel::Kernel;
use crate::real::Real;
use crate::tree::morton::MAX_LEVEL;
use crate::tree::traversal::IMAGE_BITS;

/// The module name the kernels are compiled and cached under.
pub const MODULE: &str = "fmm_compressed_m2l";

/// Slots of the keys' hash table, `2^bits`: tried in turn, the next where
/// the distinct keys fill more than half of one (adaptive trees have tens
/// of thousands: Plummer, leaves of 32, order 5). Past the last M2L runs
/// by the kernel.
const TABLE_BITS: [i32; 3] = [16, 20, 24];

/// Bits of a key's offset component (in half sides of the finer cell).
const OFFSET_BITS: u32 = 18;

/// Outputs a block of the gathered product computes (`TM x TN` in
/// `compressed.cu`), and its threads.
const TILE_ROWS: usize = 64;
const TILE_COLS: usize = 128;
const TILE_THREADS: u32 = 256;

/// Threads a block of the one-thread-per-cell kernels.
const BLOCK: u32 = 128;

/// The source, with the constants it takes from here.
pub fn source() -> String {
    with_defines(
        &[
            ("OFFSET_BITS", OFFSET_BITS as i64),
            ("CELL_BITS", (32 - IMAGE_BITS) as i64),
        ],
        include_str!("compressed.cu"),
    )
}

entry_points! {
    /// The entry points of `compressed.cu`.
    pub struct CompressedOps {
        keys = "compressed_keys",
        bucket = "compressed_bucket",
        rest = "compressed_rest",
        project = "compressed_project" per_precision,
        m2l = "compressed_m2l" per_precision,
        expand = "compressed_expand" per_precision,
        uniform = "compressed_uniform" per_precision,
    }
}

/// The M2L lists left to the kernel: the rare keys' pairs.
pub(super) struct Rest {
    pub(crate) begin: CudaSlice<i64>,
    pub(crate) end: CudaSlice<i64>,
    pub(crate) list: CudaSlice<i32>,
}

/// A compressed M2L ready to run: the operators on the device and the
/// pairs by operator; [`Plan::apply`] adds it to the node values.
pub(super) struct Plan<R: Real> {
    ops: CompressedOps,
    /// The bases and operators on the device.
    pool: Arc<Pool<R>>,
    project: Jobs,
    m2l: Jobs,
    expand: Jobs,
    /// Projected strengths and compressed values: `rs_max` and `rt_max` a
    /// cell.
    rs_max: usize,
    rt_max: usize,
    rows: usize,
    cols: usize,
    n_source_cells: usize,
    n_target_cells: usize,
    /// The pairs by operator (targets, sources); read through `m2l`'s jobs.
    _pairs: (CudaSlice<i32>, CudaSlice<i32>),
    /// What to leave to the kernel (`None`: nothing).
    pub(crate) rest: Option<Rest>,
    pub(crate) pairs: u64,
    pub(crate) operators: usize,
    pub(crate) reused: usize,
}

/// Jobs of a gathered product (`compressed.cu`), on the device, and their
/// blocks.
struct Jobs {
    table: CudaSlice<i64>,
    n: usize,
    blocks: usize,
}

impl Jobs {
    /// `jobs`: (offset of the matrix in the pool, address of its X column
    /// indices, of its Y column indices, rows, inner dimension, leading
    /// dimension, columns).
    fn upload(gpu: &Gpu, jobs: &[[i64; 7]]) -> Result<Jobs, Error> {
        let mut table = Vec::with_capacity(jobs.len() * 8);
        let mut blocks = 0i64;
        for j in jobs {
            table.extend_from_slice(j);
            table.push(blocks);
            let (m, nc) = (j[3] as usize, j[6] as usize);
            blocks += (m.div_ceil(TILE_ROWS) * nc.div_ceil(TILE_COLS)) as i64;
        }
        Ok(Jobs {
            table: upload(gpu.stream(), &table)?,
            n: jobs.len(),
            blocks: blocks as usize,
        })
    }

    fn config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.blocks as u32, 1, 1),
            block_dim: (TILE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// The bases and operators of a compressed M2L on the device, in `R`, one
/// array: `V^T` per level (`r_s x cols`, from `vt_at[level]`), `U` per
/// level (`rows x r_t`, from `u_at[level]`), then `C` per operator (from
/// `c_at[operator]`), all column-major.
pub(crate) struct Pool<R: Real> {
    data: CudaSlice<R>,
    vt_at: Vec<usize>,
    u_at: Vec<usize>,
    c_at: Vec<usize>,
}

/// A pool uploaded, kept for the next evaluation with the same operators
/// (the same bases and keys: the host's cache's, which they come from) on
/// the same device: building and uploading it took 80 ms of a 10^7
/// softened gravity FMM's 0.34 s on the H200. The last
/// [`compressed::CACHE_GEOMETRIES`] are kept, as the host keeps their
/// operators (a tolerance met on its second run uses two); the least
/// recently used is dropped for a new one.
struct KeptPool {
    context: usize,
    bases: Weak<Vec<Bases>>,
    keys: Vec<Key>,
    pool: Box<dyn Any + Send + Sync>,
}

/// The pools kept, the most recently used last.
static KEPT_POOL: Mutex<Vec<KeptPool>> = Mutex::new(Vec::new());

/// The pool of `bases` and the operators `small` (of `keys`), the kept one
/// where it is theirs.
fn device_pool<R: Real>(
    gpu: &Gpu,
    bases: &Arc<Vec<Bases>>,
    small: &[compressed::Small],
    keys: &[Key],
    cols: usize,
) -> Result<Arc<Pool<R>>, Error> {
    let context = Arc::as_ptr(gpu.context()) as usize;
    let mut kept = KEPT_POOL.lock().unwrap_or_else(|e| e.into_inner());
    // Pools whose bases the host's cache dropped serve no one.
    kept.retain(|k| k.bases.strong_count() > 0);
    let found = kept.iter().position(|k| {
        k.context == context
            && k.bases.upgrade().is_some_and(|b| Arc::ptr_eq(&b, bases))
            && k.keys == keys
            && k.pool.is::<Arc<Pool<R>>>()
    });
    if let Some(i) = found {
        let k = kept.remove(i);
        let pool = k
            .pool
            .downcast_ref::<Arc<Pool<R>>>()
            .expect("checked")
            .clone();
        kept.push(k);
        return Ok(pool);
    }
    let mut data: Vec<R> = Vec::new();
    let (mut vt_at, mut u_at) = (Vec::new(), Vec::new());
    for b in bases.iter() {
        // V^T (r_s x cols): entry (r, c) is V's (c, r).
        vt_at.push(data.len());
        for c in 0..cols {
            data.extend((0..b.rank_s).map(|r| R::c(b.v[r * cols + c])));
        }
        u_at.push(data.len());
        data.extend(b.u.iter().map(|&x| R::c(x)));
    }
    let mut c_at = Vec::with_capacity(small.len());
    for (c, key) in small.iter().zip(keys) {
        c_at.push(data.len());
        let rt = bases[key.target_level as usize].rank_t;
        data.extend(c.column_major(rt).iter().map(|&x| R::c(x)));
    }
    // The least recently used pool freed before the new one is allocated.
    if kept.len() >= compressed::CACHE_GEOMETRIES {
        kept.remove(0);
    }
    let pool = Arc::new(Pool {
        data: upload(gpu.stream(), &data)?,
        vt_at,
        u_at,
        c_at,
    });
    kept.push(KeptPool {
        context,
        bases: Arc::downgrade(bases),
        keys: keys.to_vec(),
        pool: Box::new(pool.clone()),
    });
    Ok(pool)
}

/// The device address of entry `at` of `a`.
fn address<T: cudarc::driver::DeviceRepr>(gpu: &Gpu, a: &CudaSlice<T>, at: usize) -> i64 {
    let (ptr, _record) = a.device_ptr(gpu.stream());
    (ptr + (at * std::mem::size_of::<T>()) as u64) as i64
}

/// The compressed M2L of the lists `lists` (target tree `tt`, source tree
/// `st`, one root cube), planned: the pairs' keys found on the device, the
/// operators computed (or taken from the cache) on the host, the pairs
/// sorted by operator; an entry's image (`images`, a periodic box's) moves
/// its source cell, only another offset. `None` where it does not apply (the caller runs M2L
/// by the kernel): the trees are not one, a source field is not a
/// strength, the operators are too large, or the keys overflow.
#[allow(clippy::too_many_arguments)]
pub(super) fn plan<K: Kernel, R: Real>(
    gpu: &Gpu,
    basis: &dyn Basis,
    tol: f64,
    params: &[R],
    rep: &Representation,
    node_slots: &[CudaSlice<R>],
    n_outputs: usize,
    (tt, st): (&FmmTree<R>, &FmmTree<R>),
    images: &Images<R>,
    lists: &DeviceLists,
) -> Result<Option<Plan<R>>, Error> {
    if tt.tree.bounds.center != st.tree.bounds.center
        || tt.tree.bounds.half != st.tree.bounds.half
        || lists.n_m2l == 0
    {
        return Ok(None);
    }
    let s = gpu.stream();
    let (module, _) = gpu.module(MODULE, &source())?;
    let ops = CompressedOps::load::<R>(gpu, &module)?;
    let (tnc, snc) = (tt.tree.n_cells, st.tree.n_cells);
    let Some(fields) = common_fields(gpu, &ops, node_slots, &rep.strength, basis.len(), snc)?
    else {
        return Ok(None);
    };
    let tnci = tnc as i32;

    // The keys and their counts, in the smallest table that holds them.
    let root_half = tt.tree.bounds.half;
    let mut slot = alloc::<i32>(s, lists.n_m2l)?;
    let mut table = None;
    for bits in TABLE_BITS {
        let size = 1usize << bits;
        let mut keys = upload(s, &vec![u64::MAX; size])?;
        let mut counts = zeros::<u32>(s, size)?;
        let mut failed = zeros::<i32>(s, 1)?;
        launch!(s, ops.keys, per_item(tnc, BLOCK), "compressed_keys";
            &tnci, &lists.m2l_begin, &lists.m2l_end, &lists.m2l, &tt.tree.level,
            &tt.tree.center[0], &tt.tree.center[1], &tt.tree.center[2], &st.tree.level,
            &st.tree.center[0], &st.tree.center[1], &st.tree.center[2], &images.shift,
            &root_half, &bits,
            &mut keys, &mut counts, &mut slot, &mut failed)?;
        let keys = download(s, &keys, size)?;
        let distinct = keys.iter().filter(|&&k| k != u64::MAX).count();
        let failed = download(s, &failed, 1)?[0] != 0;
        if !failed && distinct <= size / 2 {
            table = Some((keys, download(s, &counts, size)?));
            break;
        }
        if failed && distinct < size / 2 {
            // An offset past the key's range, not a full table.
            break;
        }
    }
    let Some((keys, counts)) = table else {
        eprintln!(
            "[fmm] compressed M2L on the GPU: the cells' offsets do not fit its keys; M2L runs \
             by the kernel between node sets"
        );
        return Ok(None);
    };
    let size = keys.len();

    // The keys with enough pairs, in key order (the CPU's), and their
    // operators.
    let mut found: Vec<(Key, usize, usize)> = keys
        .iter()
        .zip(&counts)
        .enumerate()
        .filter(|(_, (&k, _))| k != u64::MAX)
        .map(|(at, (&k, &n))| (decode(k), n as usize, at))
        .collect();
    found.sort_unstable();
    let counted: Vec<(Key, usize)> = found.iter().map(|&(k, n, _)| (k, n)).collect();
    let params64: Vec<f64> = params.iter().map(|x| x.to_f64()).collect();
    // `None` also where no key is frequent: every pair by the kernel, as
    // on the CPU.
    let Some(Operators {
        bases,
        small,
        distinct,
        reused,
        frequent,
    }) = compressed::operator_set::<K>(
        basis, tol, &params64, rep, fields, n_outputs, root_half, &counted,
    )
    else {
        return Ok(None);
    };
    let mut frequent = frequent.into_iter();
    found.retain(|_| frequent.next().unwrap_or(false));
    let k = basis.len();
    let rows = k * rep.channels(n_outputs);
    let cols = k * rep.strength.len();

    // Which operator each slot's pairs take, and where each operator's
    // pairs start.
    let mut op_of = vec![-1i32; size];
    let mut first = Vec::with_capacity(found.len());
    let mut pairs = 0u64;
    for (i, &(_, n, at)) in found.iter().enumerate() {
        op_of[at] = i as i32;
        first.push(pairs);
        pairs += n as u64;
    }
    let op_of = upload(s, &op_of)?;
    let mut cursor = upload(s, &first)?;
    let mut pair_t = alloc::<i32>(s, pairs as usize)?;
    let mut pair_s = alloc::<i32>(s, pairs as usize)?;
    let mut rare = zeros::<u64>(s, tnc + 1)?;
    launch!(s, ops.bucket, per_item(tnc, BLOCK), "compressed_bucket";
        &tnci, &lists.m2l_begin, &lists.m2l_end, &lists.m2l, &slot, &op_of,
        &mut cursor, &mut pair_t, &mut pair_s, &mut rare)?;
    let rest_pairs = lists.n_m2l - pairs as usize;
    let rest = if rest_pairs > 0 {
        scan(gpu, &mut rare, tnc + 1)?;
        debug_assert_eq!(scanned_total(gpu, &rare, tnc)? as usize, rest_pairs);
        let mut begin = alloc::<i64>(s, tnc)?;
        let mut end = alloc::<i64>(s, tnc)?;
        let mut list = alloc::<i32>(s, rest_pairs)?;
        launch!(s, ops.rest, per_item(tnc, BLOCK), "compressed_rest";
            &tnci, &lists.m2l_begin, &lists.m2l_end, &lists.m2l, &slot, &op_of, &rare,
            &mut begin, &mut end, &mut list)?;
        Some(Rest { begin, end, list })
    } else {
        None
    };

    let op_keys: Vec<Key> = found.iter().map(|&(k, _, _)| k).collect();
    let pool = device_pool::<R>(gpu, &bases, &small, &op_keys, cols)?;
    let (vt_at, u_at, c_at) = (&pool.vt_at, &pool.u_at, &pool.c_at);
    let rs_max = bases.iter().map(|b| b.rank_s).max().unwrap_or(0);
    // A multiple of 4: the M2L's vector atomics write 4 aligned values.
    let rt_max = bases
        .iter()
        .map(|b| b.rank_t)
        .max()
        .unwrap_or(0)
        .next_multiple_of(4);

    // The jobs. Project: every source cell of a level with a basis, V^T
    // times its node strengths. Expand: every target cell of a level with
    // a basis, U times its compressed values (zero where it received
    // nothing). M2L: each operator's pairs, C times their sources'
    // projected strengths into their targets' compressed values.
    let level_jobs = |tree: &FmmTree<R>, at: &[usize], dims: &dyn Fn(usize) -> (usize, usize)| {
        (0..tree.tree.levels().min(at.len()))
            .filter_map(|l| {
                let (m, kk) = dims(l);
                let (from, to) = (tree.tree.level_start[l], tree.tree.level_start[l + 1]);
                (m > 0 && kk > 0 && to > from).then(|| {
                    let idx = address(gpu, &tree.tree.by_level, from);
                    [
                        at[l] as i64,
                        idx,
                        idx,
                        m as i64,
                        kk as i64,
                        m as i64,
                        (to - from) as i64,
                    ]
                })
            })
            .collect::<Vec<_>>()
    };
    let project = level_jobs(st, vt_at, &|l| (bases[l].rank_s, cols));
    let expand = level_jobs(tt, u_at, &|l| (rows, bases[l].rank_t));
    let m2l: Vec<[i64; 7]> = found
        .iter()
        .zip(c_at)
        .zip(&first)
        .map(|((&(key, n, _), &at), &from)| {
            let rt = bases[key.target_level as usize].rank_t;
            let rs = bases[key.source_level as usize].rank_s;
            let from = from as usize;
            [
                at as i64,
                address(gpu, &pair_s, from),
                address(gpu, &pair_t, from),
                rt as i64,
                rs as i64,
                rt as i64,
                n as i64,
            ]
        })
        .collect();
    Ok(Some(Plan {
        ops,
        pool,
        project: Jobs::upload(gpu, &project)?,
        m2l: Jobs::upload(gpu, &m2l)?,
        expand: Jobs::upload(gpu, &expand)?,
        rs_max,
        rt_max,
        rows,
        cols,
        n_source_cells: snc,
        n_target_cells: tnc,
        _pairs: (pair_t, pair_s),
        rest,
        pairs,
        operators: distinct,
        reused,
    }))
}

impl<R: Real> Plan<R> {
    /// The compressed M2L from the node strengths `q` (`[cell][node]
    /// [component]`, f64) added to the node values `local` (`[cell][node]
    /// [channel]`, f64).
    pub(crate) fn apply(
        &self,
        gpu: &Gpu,
        q: &CudaSlice<f64>,
        local: &mut CudaSlice<f64>,
    ) -> Result<(), Error> {
        let s = gpu.stream();
        let mut hat_q = alloc::<R>(s, self.n_source_cells * self.rs_max)?;
        let mut hat_l = zeros::<R>(s, self.n_target_cells * self.rt_max)?;
        let (cols, rows) = (self.cols as i64, self.rows as i64);
        let (rs, rt) = (self.rs_max as i64, self.rt_max as i64);
        if self.project.blocks > 0 {
            let n = self.project.n as i32;
            launch!(s, self.ops.project, self.project.config(), "compressed_project";
                &n, &self.project.table, &self.pool.data, q, &cols, &mut hat_q, &rs)?;
        }
        if self.m2l.blocks > 0 {
            let n = self.m2l.n as i32;
            launch!(s, self.ops.m2l, self.m2l.config(), "compressed_m2l";
                &n, &self.m2l.table, &self.pool.data, &hat_q, &rs, &mut hat_l, &rt)?;
        }
        if self.expand.blocks > 0 {
            let n = self.expand.n as i32;
            launch!(s, self.ops.expand, self.expand.config(), "compressed_expand";
                &n, &self.expand.table, &self.pool.data, &hat_l, &rt, local, &rows)?;
        }
        Ok(())
    }
}

/// The source fields the operators are computed with, from the node
/// sources' slots `slots` (`k` a cell, `n_cells` cells): the strength slots
/// 0, each other slot (a core radius, each cell's strength-weighted mean)
/// its value where it is the same in every cell, relatively to 1e-12 as
/// the CPU's `common_fields` checks; `None` where one varies, so that the
/// operator is not one per offset.
fn common_fields<R: Real>(
    gpu: &Gpu,
    ops: &CompressedOps,
    slots: &[CudaSlice<R>],
    strength: &[usize],
    k: usize,
    n_cells: usize,
) -> Result<Option<Vec<f64>>, Error> {
    let s = gpu.stream();
    let mut fields = vec![0.0; slots.len()];
    for (i, v) in slots.iter().enumerate() {
        if strength.contains(&i) || n_cells == 0 {
            continue;
        }
        let mut differs = zeros::<i32>(s, 1)?;
        let (n, stride, tol) = (n_cells as i64, k as i32, 1e-12f64);
        launch!(s, ops.uniform, per_item(n_cells, BLOCK), "compressed_uniform";
            &n, &stride, v, &tol, &mut differs)?;
        if download(s, &differs, 1)?[0] != 0 {
            return Ok(None);
        }
        fields[i] = download(s, v, 1)?[0].to_f64();
    }
    Ok(Some(fields))
}

/// A key of `compressed.cu` (`pair_key`) as the CPU's: the offset from half
/// sides of the finer cell to half sides of the deepest level.
fn decode(key: u64) -> Key {
    let (lt, ls) = ((key >> 59) as u8, ((key >> 54) & 31) as u8);
    let fine = lt.max(ls) as u32;
    let mask = (1u64 << OFFSET_BITS) - 1;
    let bias = 1i64 << (OFFSET_BITS - 1);
    let offset = [0, 1, 2].map(|a| {
        let v = ((key >> (OFFSET_BITS * (2 - a))) & mask) as i64 - bias;
        (v << (MAX_LEVEL - fine)) as i32
    });
    Key {
        target_level: lt,
        source_level: ls,
        offset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pair_key`'s layout, written here: levels 3 and 5, offset (-7, 0, 12)
    /// half sides of a level-5 cell.
    #[test]
    fn keys_decode_to_the_cpus_offsets() {
        let bias = 1u64 << (OFFSET_BITS - 1);
        let key = (3u64 << 59)
            | (5u64 << 54)
            | ((bias - 7) << (2 * OFFSET_BITS))
            | (bias << OFFSET_BITS)
            | (bias + 12);
        let k = decode(key);
        assert_eq!((k.target_level, k.source_level), (3, 5));
        let unit = 1i32 << (MAX_LEVEL - 5);
        assert_eq!(k.offset, [-7 * unit, 0, 12 * unit]);
    }
}
