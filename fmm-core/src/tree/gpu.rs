//! The treecode on the GPU: the particles go to the device once; the trees,
//! the cells' pseudo-sources and the target groups are built there
//! ([`super::device_build`], hu2011), and the walk runs there as the
//! generated walk kernel (`fmm_codegen::emit::walk`), one block per target
//! group; the outputs come back in the caller's order.
//! Same trees, same criterion and, for the same groups (`group` = 128, the
//! GPU's default), the same interactions as [`super::treecode_cpu`], so the
//! two agree to rounding.

use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::device_build::{device_pseudo_sources, DeviceOctree};
use super::treecode::{start, TreeOptions, TreeStats};
use crate::cuda::Gpu;
use crate::direct::Outputs;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;
use fmm_codegen::emit::walk::{walk_entry_name, WALK_BLOCK};

/// Cells of stack per block the walk starts with; a walk that needs more
/// (small theta on a deep tree) runs again with four times as many, up to
/// [`MAX_STACK`].
const INITIAL_STACK: usize = 8192;
const MAX_STACK: usize = 1 << 22;

/// The initial stack depth when not 0; for tests of the walk's retry.
static INITIAL_STACK_OVERRIDE: AtomicUsize = AtomicUsize::new(0);

/// Starts the walk with stacks of `cells` cells per block (0: the default),
/// so tests can make it overflow and retry.
#[doc(hidden)]
pub fn set_initial_stack(cells: usize) {
    INITIAL_STACK_OVERRIDE.store(cells, Ordering::Relaxed);
}

fn cuda_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda(format!("{what}: {e}"))
}

/// Positions and slots of a particle set on the device.
type DeviceSet<R> = ([CudaSlice<R>; 3], Vec<CudaSlice<R>>);

/// Whether two particle sets sit at the same points (compared on all
/// cores: for 10^7 points a few milliseconds, against tens for the copy).
pub(crate) fn same_points<R: Real>(a: &Particles<R>, b: &Particles<R>) -> bool {
    use rayon::prelude::*;
    a.len() == b.len()
        && a.positions().iter().zip(b.positions()).all(|(x, y)| {
            std::ptr::eq(*x, y)
                || x.par_chunks(1 << 16)
                    .zip(y.par_chunks(1 << 16))
                    .all(|(p, q)| p == q)
        })
}

fn refs<T>(v: &[T; 3]) -> [&T; 3] {
    [&v[0], &v[1], &v[2]]
}

/// The Barnes-Hut treecode of kernel `K` with the walk on `gpu`. Same
/// contract as [`super::treecode_cpu`].
pub fn treecode_cuda<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &TreeOptions,
) -> Result<(Outputs<R>, TreeStats), Error> {
    let def = K::def();
    let Some((p, strength)) = start::<K, R>(params, targets, sources, opts)? else {
        return Ok((Outputs::zeros::<K>(targets.len()), TreeStats::default()));
    };
    let (m, n, no) = (targets.len(), sources.len(), def.n_outputs());
    let (module, _) = gpu.module(&def.symbol(), K::cuda_source())?;
    let func = gpu.function(&module, &walk_entry_name(def, R::NAME))?;

    let group = opts.group_size();

    let three = |v: Vec<CudaSlice<R>>| -> [CudaSlice<R>; 3] {
        v.try_into().unwrap_or_else(|_| unreachable!("three axes"))
    };
    let t0 = std::time::Instant::now();
    let s = gpu.stream();
    let upload = |p: &Particles<R>| -> Result<DeviceSet<R>, Error> {
        let mut host: Vec<&[R]> = p.positions().to_vec();
        host.extend(p.slots().iter().map(|v| v.as_slice()));
        let mut d = gpu.upload_many(&host)?;
        let slots = d.split_off(3);
        Ok((three(d), slots))
    };
    // The source tree, the sources in its order and its cells' pseudo-sources.
    let (spos, sslots) = upload(sources)?;
    let stree = DeviceOctree::build(gpu, refs(&spos), opts.ncrit)?;
    let gather = |tree: &DeviceOctree<R>, v: &[CudaSlice<R>]| -> Result<Vec<CudaSlice<R>>, Error> {
        v.iter().map(|x| tree.gather(gpu, x)).collect()
    };
    let d_spos = three(gather(&stree, &spos)?);
    let d_sslots = gather(&stree, &sslots)?;
    drop(sslots);
    let cells = device_pseudo_sources(
        gpu,
        &stree,
        refs(&d_spos),
        &d_sslots.iter().collect::<Vec<_>>(),
        &strength,
        opts.theta,
    )?;
    let walk_cells = stree.walk_cells(gpu, &cells)?;
    // The target tree, the targets in its order and the groups.
    // Targets at the sources' points (the usual case: forces on the
    // particles themselves) reuse the uploaded positions.
    let (tpos, tslots) = if same_points(targets, sources) {
        let slots: Vec<&[R]> = targets.slots().iter().map(|v| v.as_slice()).collect();
        (spos, gpu.upload_many(&slots)?)
    } else {
        drop(spos);
        upload(targets)?
    };
    let ttree = DeviceOctree::build(gpu, refs(&tpos), group)?;
    let d_tpos = three(gather(&ttree, &tpos)?);
    let d_tslots = gather(&ttree, &tslots)?;
    drop((tpos, tslots));
    let groups = ttree.groups(gpu, group, WALK_BLOCK as usize, refs(&d_tpos))?;
    s.synchronize().map_err(cuda_err("building the trees"))?;
    let build_seconds = t0.elapsed().as_secs_f64();

    // SAFETY: every element is written by the launch (`accumulate` = 0):
    // the groups cover every target.
    let mut d_out: Vec<CudaSlice<R>> = (0..no)
        .map(|_| unsafe { s.alloc::<R>(m) })
        .collect::<Result<_, _>>()
        .map_err(cuda_err("allocating outputs"))?;
    // The pseudo-sources' slots as separate arrays.
    let cell_slots = (0..cells.n_slots)
        .map(|k| {
            let mut v = unsafe { s.alloc::<R>(stree.n_cells.max(1)) }
                .map_err(cuda_err("allocating the walk's cells"))?;
            s.memcpy_dtod(&cells.slot(k), &mut v)
                .map_err(cuda_err("copy on the device"))?;
            Ok(v)
        })
        .collect::<Result<Vec<_>, Error>>()?;

    let (n_t, n_g, n_c, n_s, acc) = (
        m as i32,
        groups.n as i32,
        stree.n_cells as i32,
        n as i32,
        0i32,
    );
    // Persistent blocks: as many as fit on the GPU at once.
    let per_sm = func
        .occupancy_max_active_blocks_per_multiprocessor(WALK_BLOCK, 0, None)
        .map_err(cuda_err("occupancy of the walk"))?
        .max(1);
    let blocks = (per_sm as usize * gpu.info().multiprocessors.max(1) as usize)
        .min(groups.n)
        .max(1);
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let new_event = || {
        gpu.context()
            .new_event(timing)
            .map_err(cuda_err("timing events"))
    };
    let (start, stop) = (new_event()?, new_event()?);
    start.record(s).map_err(cuda_err("timing events"))?;
    let (p2p, p2c);
    let mut stack_cap = match INITIAL_STACK_OVERRIDE.load(Ordering::Relaxed) {
        0 => INITIAL_STACK,
        cells => cells,
    };
    loop {
        let stacks = s
            .alloc_zeros::<i32>(blocks * stack_cap)
            .map_err(cuda_err("allocating the walk's stacks"))?;
        let zero = || {
            s.alloc_zeros::<i32>(1)
                .map_err(cuda_err("allocating the walk's state"))
        };
        let (mut next_group, mut overflow) = (zero()?, zero()?);
        let counts = s
            .alloc_zeros::<u64>(2)
            .map_err(cuda_err("allocating the walk's state"))?;
        let cap = stack_cap as i32;
        let mut b = s.launch_builder(&func);
        b.arg(&n_t);
        for a in d_tpos.iter().chain(&d_tslots) {
            b.arg(a);
        }
        b.arg(&n_g).arg(&groups.begin).arg(&groups.end);
        for a in &groups.boxes {
            b.arg(a);
        }
        b.arg(&n_c)
            .arg(&stree.n_children)
            .arg(&walk_cells.child)
            .arg(&stree.begin)
            .arg(&stree.end)
            .arg(&walk_cells.accept2);
        for a in &walk_cells.center {
            b.arg(a);
        }
        b.arg(&walk_cells.half);
        for a in &cells.pos {
            b.arg(a);
        }
        for a in &cell_slots {
            b.arg(a);
        }
        b.arg(&n_s);
        for a in d_spos.iter().chain(&d_sslots) {
            b.arg(a);
        }
        for v in &p {
            b.arg(v);
        }
        for o in d_out.iter_mut() {
            b.arg(o);
        }
        b.arg(&acc);
        let mut stacks = stacks;
        b.arg(&mut stacks)
            .arg(&cap)
            .arg(&mut next_group)
            .arg(&mut overflow)
            .arg(&counts);
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (WALK_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments follow the walk entry point's signature
        // (see `fmm_codegen::emit::walk`): every array has the length its
        // count says, the cells' children are cells, the group ranges lie
        // within `0..n_targets`, and `stacks` holds `blocks * cap` ints.
        unsafe { b.launch(cfg) }.map_err(|e| {
            use cudarc::driver::sys::CUfunction_attribute as A;
            let at = |a| func.get_attribute(a).unwrap_or(-1);
            Error::Cuda(format!(
                "launching the walk ({blocks} blocks of {WALK_BLOCK}, {n_g} groups, {n_c} cells, stacks of {stack_cap}, {per_sm} blocks per SM; kernel: {} registers, {} B shared, at most {} threads): {e}",
                at(A::CU_FUNC_ATTRIBUTE_NUM_REGS),
                at(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                at(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            ))
        })?;
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
                opts.theta, stree.n_cells
            )));
        }
    }
    stop.record(s).map_err(cuda_err("timing events"))?;
    let eval_seconds = start.elapsed_ms(&stop).map_err(cuda_err("timing events"))? as f64 / 1e3;

    // Back to the caller's order on the device, then to the host.
    let back = d_out
        .iter()
        .map(|o| ttree.scatter(gpu, o))
        .collect::<Result<Vec<_>, _>>()?;
    let slots = gpu.download_many(&back.iter().collect::<Vec<_>>(), m)?;
    let stats = TreeStats {
        source_cells: stree.n_cells,
        target_groups: groups.n,
        p2p,
        p2c,
        build_seconds,
        eval_seconds,
    };
    Ok((Outputs::new(def.name.as_str(), &def.outputs, slots), stats))
}
