//! The FMM on the GPU: the particles go to the device once; the trees are
//! built there ([`crate::tree::device_build`], hu2011), and P2M, M2M, M2L,
//! L2L, L2P (`ops.cu`, compiled once per order) and the P2P lists (the
//! kernel's generated `_p2p_list` entry, `fmm_codegen::emit::p2p_list`)
//! run there; the outputs come back in the caller's order.
//!
//! The dual tree traversal runs there too, level by level over the target
//! tree as [`super::traversal::traverse_levels`] does on the CPU: one
//! thread per target cell of a level, a counting pass, a scan, a writing
//! pass; the host reads three totals per level to size the lists. Same
//! trees, same spheres, same decisions as [`super::fmm_cpu`], and
//! expansions in f64 on both, so the two agree to rounding in f64.
//!
//! Nothing but those totals (and the group count) crosses the bus between
//! the particles' upload and the outputs' download.

use std::time::Instant;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, CudaView, LaunchConfig, PushKernelArg};
use std::sync::Arc;

use super::cpu::start;
use super::harmonics::ncoef;
use super::{FmmOptions, FmmStats};
use crate::cuda::Gpu;
use crate::direct::Outputs;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;
use crate::tree::device_build::{alloc, cuda_err, download, launch, upload, zeros, DeviceOctree};
use crate::tree::gpu::same_points;
use fmm_codegen::emit::p2p_list::{p2p_list_entry_name, P2P_BLOCK};
use fmm_codegen::kernel::Term;

mod m2l;
pub use m2l::MAX_F32_M2L_ORDER;

/// The CUDA source of the operators; the host prepends `#define FMM_P`.
pub const OPS_SOURCE: &str = include_str!("ops.cu");

/// The highest order the GPU operators take: the M2L keeps a source's
/// singular harmonics and multipoles in shared memory, `(1 + nq) (p + 1)^2`
/// complex doubles, which must fit in 48 KB for one source at `nq = 3`.
pub const MAX_GPU_ORDER: usize = 20;

/// Threads per block of the one-thread-per-item operators.
const BLOCK: u32 = 128;

fn grid(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(BLOCK as usize).max(1) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The entry points of the operators for one order and precision.
struct Ops {
    parents: CudaFunction,
    leaf_of: CudaFunction,
    cell_radius2: CudaFunction,
    sqrt_radius: CudaFunction,
    traverse: CudaFunction,
    scan: CudaFunction,
    groups: CudaFunction,
    p2m: CudaFunction,
    m2m: CudaFunction,
    full_range: CudaFunction,
    full_range_f32: CudaFunction,
    m2l: CudaFunction,
    /// The float M2L, lanes over sources, by the number of expansions.
    m2l_lanes: [CudaFunction; 3],
    l2l: CudaFunction,
    l2p: CudaFunction,
}

impl Ops {
    fn load<R: Real>(gpu: &Gpu, p: usize) -> Result<Ops, Error> {
        let source = format!("#define FMM_P {p}\n{OPS_SOURCE}");
        let (module, _) = gpu.module(&format!("fmm_ops_p{p}"), &source)?;
        let f = |name: &str| gpu.function(&module, name);
        let r = |name: &str| gpu.function(&module, &format!("{name}_{}", R::NAME));
        Ok(Ops {
            parents: f("fmm_parents")?,
            leaf_of: f("fmm_leaf_of")?,
            cell_radius2: r("fmm_cell_radius2")?,
            sqrt_radius: f("fmm_sqrt_radius")?,
            traverse: f("fmm_traverse")?,
            scan: f("fmm_scan")?,
            groups: f("fmm_groups")?,
            p2m: r("fmm_p2m")?,
            m2m: f("fmm_m2m")?,
            full_range: f("fmm_full_range")?,
            full_range_f32: f("fmm_full_range_f32")?,
            m2l: f("fmm_m2l")?,
            m2l_lanes: [
                f("fmm_m2l_lanes_1")?,
                f("fmm_m2l_lanes_2")?,
                f("fmm_m2l_lanes_3")?,
            ],
            l2l: f("fmm_l2l")?,
            l2p: r("fmm_l2p")?,
        })
    }

    /// Exclusive scan of the first `n` entries of each array in place,
    /// the total in entry `n`; returns the totals.
    fn scan(
        &self,
        s: &Arc<CudaStream>,
        n: usize,
        arrays: &mut [&mut CudaSlice<i32>],
    ) -> Result<Vec<i32>, Error> {
        let (ni, k) = (n as i32, arrays.len() as i32);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = s.launch_builder(&self.scan);
        b.arg(&ni).arg(&k);
        // Unused slots repeat the first array (the kernel reads `k` only).
        // Passed as shared references: the kernel writes them in place on
        // this one stream, which is all cudarc's read/write tracking guards.
        for i in 0..3 {
            b.arg(&*arrays[i.min(arrays.len() - 1)]);
        }
        // SAFETY: fmm_scan(n, k, a0, a1, a2) over k arrays of n + 1 ints.
        unsafe { b.launch(cfg) }.map_err(cuda_err("launching fmm_scan"))?;
        arrays
            .iter()
            .map(|a| {
                s.clone_dtoh(&a.slice(n..n + 1))
                    .map(|v| v[0])
                    .map_err(cuda_err("copy from the device"))
            })
            .collect()
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
    fn of(
        def: &fmm_codegen::KernelDef,
        terms: &[fmm_codegen::kernel::FarTerm],
    ) -> Result<TermTable, Error> {
        if terms.len() > 4 || def.n_outputs() > 8 {
            return Err(Error::Cuda(format!(
                "kernel `{}`: the GPU FMM takes at most 4 far-field terms and 8 output slots",
                def.name
            )));
        }
        let mut t = TermTable {
            kinds: Vec::new(),
            coefficients: Vec::new(),
            alpha: None,
        };
        for term in terms {
            let kind = match term.term {
                Term::Potential => 0,
                Term::Gradient => 1,
                Term::Curl => 2,
                Term::Stretching(ti) => {
                    let f = def.targets[ti].offset;
                    if t.alpha.is_some_and(|a| a != f) {
                        return Err(Error::Cuda(format!(
                            "kernel `{}`: the GPU FMM takes stretching terms of one target vector only",
                            def.name
                        )));
                    }
                    t.alpha = Some(f);
                    3
                }
            };
            t.kinds
                .extend([kind, def.outputs[term.output].offset as i32]);
            t.coefficients.push(term.coefficient);
        }
        Ok(t)
    }
}

/// Device arrays (input order) in the order of `tree`.
fn tree_order<R: Real>(
    gpu: &Gpu,
    tree: &DeviceOctree<R>,
    v: &[CudaSlice<R>],
) -> Result<Vec<CudaSlice<R>>, Error> {
    v.iter().map(|x| tree.gather(gpu, x)).collect()
}

/// The field slots of `p` on the device (input order).
fn upload_slots<R: Real>(gpu: &Gpu, p: &Particles<R>) -> Result<Vec<CudaSlice<R>>, Error> {
    let host: Vec<&[R]> = p.slots().iter().map(|v| v.as_slice()).collect();
    gpu.upload_many(&host)
}

fn three<T>(v: Vec<T>) -> [T; 3] {
    v.try_into().unwrap_or_else(|_| unreachable!("three axes"))
}

/// A tree on the device with what the FMM adds: the cells' radii (the
/// farthest particle from the centre), the positions in tree order, each
/// cell's parent and each particle's leaf.
struct FmmTree<R> {
    tree: DeviceOctree<R>,
    radius: CudaSlice<f64>,
    pos: [CudaSlice<R>; 3],
    parent: CudaSlice<i32>,
    leaf_of: CudaSlice<i32>,
}

impl<R: Real> FmmTree<R> {
    /// The tree of positions already on the device (input order).
    fn build(gpu: &Gpu, ops: &Ops, pos: &[CudaSlice<R>], ncrit: usize) -> Result<Self, Error> {
        let s = gpu.stream();
        let tree = DeviceOctree::build(gpu, [&pos[0], &pos[1], &pos[2]], ncrit)?;
        let sorted = three(tree_order(gpu, &tree, pos)?);
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
            &sorted[0], &sorted[1], &sorted[2], &mut radius)?;
        launch!(s, ops.sqrt_radius, grid(nc), "fmm_sqrt_radius"; &nci, &mut radius)?;
        Ok(FmmTree {
            tree,
            radius,
            pos: sorted,
            parent,
            leaf_of,
        })
    }

    fn levels(&self) -> usize {
        self.tree.level_start.len().saturating_sub(1)
    }

    /// The cells of level `l` (depth-first indices).
    fn level(&self, l: usize) -> (usize, CudaView<'_, i32>) {
        let (a, b) = (self.tree.level_start[l], self.tree.level_start[l + 1]);
        (b - a, self.tree.by_level.slice(a..b))
    }
}

/// The interaction lists on the device: for every target cell its M2L
/// list `m2l[m2l_begin[c]..m2l_end[c]]` and, for leaves, its P2P list.
struct DeviceLists {
    m2l_begin: CudaSlice<i32>,
    m2l_end: CudaSlice<i32>,
    m2l: CudaSlice<i32>,
    p2p_begin: CudaSlice<i32>,
    p2p_end: CudaSlice<i32>,
    p2p: CudaSlice<i32>,
    n_m2l: usize,
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
    let mut bigger = alloc::<i32>(s, need.max(2 * pool.len()))?;
    if used > 0 {
        s.memcpy_dtod(&pool.slice(0..used), &mut bigger.slice_mut(0..used))
            .map_err(cuda_err("copy on the device"))?;
    }
    Ok(bigger)
}

/// The dual tree traversal on the device (see the module's doc).
fn traverse<R: Real>(
    gpu: &Gpu,
    ops: &Ops,
    tt: &FmmTree<R>,
    st: &FmmTree<R>,
    theta: f64,
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
    // The root's frontier is the source root.
    let mut f_end_host = vec![0i32; nt];
    f_end_host[0] = 1;
    let mut f_begin = zeros::<i32>(s, nt)?;
    let mut f_end = upload(s, &f_end_host)?;
    // The children's frontiers, written while a level reads its own.
    let mut next_begin = zeros::<i32>(s, nt)?;
    let mut next_end = zeros::<i32>(s, nt)?;
    let mut frontier = upload(s, &[0i32])?;
    let widest = (0..tt.levels()).map(|l| tt.level(l).0).max().unwrap_or(0);
    let mut counts = [
        alloc::<i32>(s, widest + 1)?,
        alloc::<i32>(s, widest + 1)?,
        alloc::<i32>(s, widest + 1)?,
    ];
    let overflow = zeros::<i32>(s, 1)?;
    let theta2 = theta * theta;
    let (mut m2l_used, mut p2p_used) = (0usize, 0usize);
    let (mut m2l_base, mut p2p_base) = (0i32, 0i32);
    for l in 0..tt.levels() {
        let (n, cells) = tt.level(l);
        let ni = n as i32;
        let mut deferred = alloc::<i32>(s, 1)?;
        for emit in [0i32, 1] {
            let [c0, c1, c2] = &mut counts;
            let mut b = s.launch_builder(&ops.traverse);
            b.arg(&ni).arg(&cells).arg(&emit).arg(&theta2);
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
            b.arg(&f_begin)
                .arg(&f_end)
                .arg(&frontier)
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
            // counts hold n + 1 ints, the pools and `deferred` the totals
            // the first pass counted.
            unsafe { b.launch(grid(n)) }.map_err(cuda_err("launching fmm_traverse"))?;
            if emit == 0 {
                let [c0, c1, c2] = &mut counts;
                let tot = ops.scan(s, n, &mut [c0, c1, c2])?;
                let (tm, tp, td) = (tot[0] as usize, tot[1] as usize, tot[2] as usize);
                let m2l = std::mem::replace(&mut lists.m2l, alloc(s, 1)?);
                lists.m2l = grow(s, m2l, m2l_used, m2l_used + tm)?;
                let p2p = std::mem::replace(&mut lists.p2p, alloc(s, 1)?);
                lists.p2p = grow(s, p2p, p2p_used, p2p_used + tp)?;
                deferred = alloc::<i32>(s, td)?;
                (m2l_base, p2p_base) = (m2l_used as i32, p2p_used as i32);
                m2l_used += tm;
                p2p_used += tp;
            }
        }
        frontier = deferred;
        std::mem::swap(&mut f_begin, &mut next_begin);
        std::mem::swap(&mut f_end, &mut next_end);
    }
    if download(s, &overflow, 1)?[0] != 0 {
        return Err(Error::Cuda(
            "the FMM traversal's stack overflowed (a source tree deeper than 22 levels)".into(),
        ));
    }
    lists.n_m2l = m2l_used;
    Ok(lists)
}

/// The fast multipole method of kernel `K` on `gpu`. Same contract as
/// [`super::fmm_cpu`]; `opts.p` at most [`MAX_GPU_ORDER`].
pub fn fmm_cuda<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &FmmOptions,
) -> Result<(Outputs<R>, FmmStats), Error> {
    let def = K::def();
    let t_setup = Instant::now();
    let (pv, strength, terms) = start::<K, R>(params, targets, sources, opts)?;
    if opts.p > MAX_GPU_ORDER {
        return Err(Error::BadOption(format!(
            "the GPU FMM takes orders up to {MAX_GPU_ORDER}, not {} (use the CPU for higher orders)",
            opts.p
        )));
    }
    let table = TermTable::of(def, &terms)?;
    let no = def.n_outputs();
    let mut stats = FmmStats::default();
    if targets.is_empty() || sources.is_empty() || no == 0 {
        return Ok((Outputs::zeros::<K>(targets.len()), stats));
    }
    let (m, n) = (targets.len(), sources.len());
    let p = opts.p;
    let nq = strength.len();
    let nc = ncoef(p);
    let ops = Ops::load::<R>(gpu, p)?;
    let (module, _) = gpu.module(&def.symbol(), K::cuda_source())?;
    let p2p = gpu.function(&module, &p2p_list_entry_name(def, R::NAME))?;
    let s = gpu.stream();
    let sync = |what: &'static str| s.synchronize().map_err(cuda_err(what));
    stats.setup_seconds = t_setup.elapsed().as_secs_f64();

    // The particles to the device.
    let t0 = Instant::now();
    let same = same_points(targets, sources);
    let spos = gpu.upload_many(&sources.positions())?;
    let sslots = upload_slots(gpu, sources)?;
    let tpos = if same {
        None
    } else {
        Some(gpu.upload_many(&targets.positions())?)
    };
    let tslots = upload_slots(gpu, targets)?;
    sync("copying the particles to the device")?;
    stats.upload_seconds = t0.elapsed().as_secs_f64();

    // Both trees, their cells' radii, the particles in tree order. Targets
    // at the sources' points (forces on the particles themselves) have the
    // sources' tree: built once.
    let t0 = Instant::now();
    let st = FmmTree::build(gpu, &ops, &spos, opts.ncrit)?;
    drop(spos);
    let sslots = tree_order(gpu, &st.tree, &sslots)?;
    let built;
    let tt = match &tpos {
        None => &st,
        Some(tpos) => {
            built = FmmTree::build(gpu, &ops, tpos, opts.ncrit)?;
            &built
        }
    };
    drop(tpos);
    let tslots = tree_order(gpu, &tt.tree, &tslots)?;
    let (snc, tnc) = (st.tree.n_cells, tt.tree.n_cells);
    stats.source_cells = snc;
    stats.target_cells = tnc;
    sync("building the trees")?;
    stats.tree_seconds = t0.elapsed().as_secs_f64();

    // Dual tree traversal, and the P2P groups.
    let t1 = Instant::now();
    let lists = traverse(gpu, &ops, tt, &st, opts.theta)?;
    stats.m2l = lists.n_m2l as u64;
    let (tnci, block, zero, one) = (tnc as i32, P2P_BLOCK as i32, 0i32, 1i32);
    let mut count = zeros::<i32>(s, tnc + 1)?;
    let none = zeros::<i32>(s, 1)?;
    let (none2, none3) = (none.clone(), none.clone());
    launch!(s, ops.groups, grid(tnc), "fmm_groups";
        &tnci, &block, &zero, &tt.tree.n_children, &tt.tree.begin, &tt.tree.end,
        &mut count, &none, &none2, &none3)?;
    let n_groups = ops.scan(s, tnc, &mut [&mut count])?[0] as usize;
    let mut g_begin = alloc::<i32>(s, n_groups)?;
    let mut g_end = alloc::<i32>(s, n_groups)?;
    let mut g_cell = alloc::<i32>(s, n_groups)?;
    launch!(s, ops.groups, grid(tnc), "fmm_groups";
        &tnci, &block, &one, &tt.tree.n_children, &tt.tree.begin, &tt.tree.end,
        &mut count, &mut g_begin, &mut g_end, &mut g_cell)?;
    sync("the traversal")?;
    stats.traversal_seconds = t1.elapsed().as_secs_f64();

    // Upward pass: P2M at the leaves, M2M level by level up.
    let t2 = Instant::now();
    let nqi = nq as i32;
    let mut mult = zeros::<f64>(s, 2 * snc * nq * nc)?;
    let snci = snc as i32;
    let q = |k: usize| &sslots[strength[k.min(nq - 1)]];
    launch!(s, ops.p2m, grid(snc * nq), "fmm_p2m";
        &snci, &st.tree.n_children, &st.tree.begin, &st.tree.end,
        &st.tree.center[0], &st.tree.center[1], &st.tree.center[2],
        &st.pos[0], &st.pos[1], &st.pos[2], &nqi, q(0), q(1), q(2), &mut mult)?;
    for l in (0..st.levels()).rev() {
        let (nl, cells) = st.level(l);
        let nli = nl as i32;
        launch!(s, ops.m2m, grid(nl * nq), "fmm_m2m";
            &nli, &cells, &st.tree.more, &st.tree.next, &st.tree.n_children,
            &st.tree.center[0], &st.tree.center[1], &st.tree.center[2], &nqi, &mut mult)?;
    }
    sync("the upward pass")?;
    stats.upward_seconds = t2.elapsed().as_secs_f64();

    // M2L, one target cell per block.
    let t3 = Instant::now();
    let (mut local, m2l_kind) = m2l::m2l(gpu, &ops, tt, &st, &lists, &mult, nq, p)?;
    drop(mult);
    stats.m2l_kind = m2l_kind;
    sync("M2L")?;
    stats.m2l_seconds = t3.elapsed().as_secs_f64();

    // Downward pass: L2L level by level down, L2P at every target.
    let t4 = Instant::now();
    let mut far = alloc::<R>(s, no * m)?;
    {
        for l in 1..tt.levels() {
            let (nl, cells) = tt.level(l);
            let nli = nl as i32;
            launch!(s, ops.l2l, grid(nl * nq), "fmm_l2l";
                &nli, &cells, &tt.parent, &tt.tree.center[0], &tt.tree.center[1],
                &tt.tree.center[2], &nqi, &mut local)?;
        }
        let d_term = upload(s, &table.kinds)?;
        let d_coef = upload(s, &table.coefficients)?;
        // A stretching term's target vector; any array where there is none
        // (the kernel reads it only for a stretching term).
        let a = |c: usize| match table.alpha {
            Some(f) => &tslots[f + c],
            None => &tt.pos[0],
        };
        let (mi, nti, noi) = (m as i32, terms.len() as i32, no as i32);
        launch!(s, ops.l2p, grid(m), "fmm_l2p";
            &mi, &tt.leaf_of, &tt.tree.center[0], &tt.tree.center[1], &tt.tree.center[2],
            &tt.pos[0], &tt.pos[1], &tt.pos[2], &nqi, &local, &nti, &d_term, &d_coef,
            a(0), a(1), a(2), &noi, &mut far)?;
    }
    sync("the downward pass")?;
    stats.downward_seconds = t4.elapsed().as_secs_f64();

    // P2P lists, added to the far field.
    let t5 = Instant::now();
    let mut out: Vec<CudaSlice<R>> = Vec::with_capacity(no);
    for k in 0..no {
        let mut o = alloc::<R>(s, m)?;
        s.memcpy_dtod(&far.slice(k * m..(k + 1) * m), &mut o)
            .map_err(cuda_err("copy on the device"))?;
        out.push(o);
    }
    drop(far);
    let counts = zeros::<u64>(s, 1)?;
    {
        let (mi, ngi, ni) = (m as i32, n_groups as i32, n as i32);
        let mut b = s.launch_builder(&p2p);
        b.arg(&mi);
        for a in tt.pos.iter().chain(&tslots) {
            b.arg(a);
        }
        b.arg(&ngi)
            .arg(&g_begin)
            .arg(&g_end)
            .arg(&g_cell)
            .arg(&lists.p2p_begin)
            .arg(&lists.p2p_end)
            .arg(&lists.p2p)
            .arg(&st.tree.begin)
            .arg(&st.tree.end)
            .arg(&ni);
        for a in st.pos.iter().chain(&sslots) {
            b.arg(a);
        }
        for v in &pv {
            b.arg(v);
        }
        for o in out.iter_mut() {
            b.arg(o);
        }
        b.arg(&one).arg(&counts);
        let cfg = LaunchConfig {
            grid_dim: (n_groups.clamp(1, 1 << 20) as u32, 1, 1),
            block_dim: (P2P_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments follow the P2P list entry point's signature
        // (`fmm_codegen::emit::p2p_list`); the groups lie within the
        // targets, the lists name source cells, the outputs hold `m`.
        unsafe { b.launch(cfg) }.map_err(cuda_err("launching the P2P lists"))?;
    }
    stats.p2p = download(s, &counts, 1)?[0];
    stats.p2p_seconds = t5.elapsed().as_secs_f64();

    // Back to the caller's order on the device, then to the host.
    let t6 = Instant::now();
    let back = out
        .iter()
        .map(|o| tt.tree.scatter(gpu, o))
        .collect::<Result<Vec<_>, _>>()?;
    sync("the outputs to the caller's order")?;
    let slots = gpu.download_many(&back.iter().collect::<Vec<_>>(), m)?;
    stats.download_seconds = t6.elapsed().as_secs_f64();
    Ok((Outputs::new(def.name.as_str(), &def.outputs, slots), stats))
}
