//! The treecode on the GPU: the trees and the cells' pseudo-sources are
//! built on the CPU (for now), the walk runs on the GPU as the generated
//! walk kernel (`fmm_codegen::emit::walk`), one block per target group.
//! Same trees, same criterion and, for the same groups (`group` = 128, the
//! GPU's default), the same interactions as [`super::treecode_cpu`], so the
//! two agree to rounding.

use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::treecode::{prepare, start, Prepared, TreeOptions, TreeStats};
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

    let t0 = std::time::Instant::now();
    let Prepared {
        stree,
        src,
        cells,
        ttree,
        tgt,
        groups,
    } = prepare(targets, sources, &strength, opts, WALK_BLOCK as usize);
    // Groups of at most one block of targets (a larger `group` asked for
    // is cut into blocks).
    let (mut begin, mut end) = (Vec::new(), Vec::new());
    for &(gb, ge) in &groups {
        for b in (gb..ge).step_by(WALK_BLOCK as usize) {
            begin.push(b as i32);
            end.push((b + WALK_BLOCK as usize).min(ge) as i32);
        }
    }
    // The groups' bounding boxes.
    let mut lo = [Vec::new(), Vec::new(), Vec::new()];
    let mut hi = [Vec::new(), Vec::new(), Vec::new()];
    for (&b, &e) in begin.iter().zip(&end) {
        for a in 0..3 {
            let xs = &tgt.pos[a][b as usize..e as usize];
            lo[a].push(
                xs.iter()
                    .copied()
                    .fold(xs[0], |x, y| if y < x { y } else { x }),
            );
            hi[a].push(
                xs.iter()
                    .copied()
                    .fold(xs[0], |x, y| if y > x { y } else { x }),
            );
        }
    }
    let build_seconds = t0.elapsed().as_secs_f64();

    let s = gpu.stream();
    let up = |v: &[R]| s.clone_htod(v).map_err(cuda_err("copy to the device"));
    let up_i = |v: &[i32]| s.clone_htod(v).map_err(cuda_err("copy to the device"));
    let as_r = |v: &[f64]| v.iter().map(|&x| R::c(x)).collect::<Vec<R>>();
    let ints = |f: &dyn Fn(&super::Cell) -> usize| {
        stree
            .cells
            .iter()
            .map(|c| f(c) as i32)
            .collect::<Vec<i32>>()
    };

    let d_tpos = [up(&tgt.pos[0])?, up(&tgt.pos[1])?, up(&tgt.pos[2])?];
    let d_tslots = tgt
        .slots
        .iter()
        .map(|v| up(v))
        .collect::<Result<Vec<_>, _>>()?;
    let (d_gb, d_ge) = (up_i(&begin)?, up_i(&end)?);
    let d_lo = [up(&lo[0])?, up(&lo[1])?, up(&lo[2])?];
    let d_hi = [up(&hi[0])?, up(&hi[1])?, up(&hi[2])?];
    let d_nchild = up_i(&ints(&|c| c.n_children as usize))?;
    let mut child = vec![0i32; 8 * stree.cells.len()];
    for c in 0..stree.cells.len() {
        for (m, k) in stree.children(c).into_iter().enumerate() {
            child[8 * c + m] = k as i32;
        }
    }
    let d_child = up_i(&child)?;
    let d_begin = up_i(&ints(&|c| c.begin))?;
    let d_end = up_i(&ints(&|c| c.end))?;
    let d_accept2 = up(&as_r(&cells.accept2))?;
    let centre = |a: usize| as_r(&stree.cells.iter().map(|c| c.center[a]).collect::<Vec<_>>());
    let d_centre = [up(&centre(0))?, up(&centre(1))?, up(&centre(2))?];
    let d_half = up(&as_r(
        &stree.cells.iter().map(|c| c.half).collect::<Vec<_>>(),
    ))?;
    let d_cpos = [
        up(&cells.soa.pos[0])?,
        up(&cells.soa.pos[1])?,
        up(&cells.soa.pos[2])?,
    ];
    let d_cslots = cells
        .soa
        .slots
        .iter()
        .map(|v| up(v))
        .collect::<Result<Vec<_>, _>>()?;
    let d_spos = [up(&src.pos[0])?, up(&src.pos[1])?, up(&src.pos[2])?];
    let d_sslots = src
        .slots
        .iter()
        .map(|v| up(v))
        .collect::<Result<Vec<_>, _>>()?;
    // SAFETY: every element is written by the launch (`accumulate` = 0):
    // the groups cover every target.
    let mut d_out: Vec<CudaSlice<R>> = (0..no)
        .map(|_| unsafe { s.alloc::<R>(m) })
        .collect::<Result<_, _>>()
        .map_err(cuda_err("allocating outputs"))?;

    let (n_t, n_g, n_c, n_s, acc) = (
        m as i32,
        begin.len() as i32,
        stree.cells.len() as i32,
        n as i32,
        0i32,
    );
    // Persistent blocks: as many as fit on the GPU at once.
    let per_sm = func
        .occupancy_max_active_blocks_per_multiprocessor(WALK_BLOCK, 0, None)
        .map_err(cuda_err("occupancy of the walk"))?
        .max(1);
    let blocks = (per_sm as usize * gpu.info().multiprocessors.max(1) as usize).min(begin.len());
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let new_event = || {
        gpu.context()
            .new_event(timing)
            .map_err(cuda_err("timing events"))
    };
    let (start, stop) = (new_event()?, new_event()?);
    start.record(s).map_err(cuda_err("timing events"))?;
    let (mut p2p, mut p2c) = (0, 0);
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
        let mut counts = s
            .alloc_zeros::<u64>(2)
            .map_err(cuda_err("allocating the walk's state"))?;
        let cap = stack_cap as i32;
        let mut b = s.launch_builder(&func);
        b.arg(&n_t);
        for a in d_tpos.iter().chain(&d_tslots) {
            b.arg(a);
        }
        b.arg(&n_g).arg(&d_gb).arg(&d_ge);
        for a in d_lo.iter().chain(&d_hi) {
            b.arg(a);
        }
        b.arg(&n_c)
            .arg(&d_nchild)
            .arg(&d_child)
            .arg(&d_begin)
            .arg(&d_end)
            .arg(&d_accept2);
        for a in d_centre.iter() {
            b.arg(a);
        }
        b.arg(&d_half);
        for a in d_cpos.iter().chain(&d_cslots) {
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
            .arg(&mut overflow);
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (WALK_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments follow the walk entry point's signature
        // (see `fmm_codegen::emit::walk`): every array has the length its
        // count says, the cells' children are cells, the group ranges lie
        // within `0..n_targets`, and `stacks` holds `blocks * cap` ints.
        unsafe { b.launch(cfg) }.map_err(cuda_err("launching the walk"))?;
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
                opts.theta,
                stree.cells.len()
            )));
        }
    }
    stop.record(s).map_err(cuda_err("timing events"))?;
    let eval_seconds = start.elapsed_ms(&stop).map_err(cuda_err("timing events"))? as f64 / 1e3;

    let mut slots = vec![vec![R::zero(); m]; no];
    for (k, o) in d_out.iter().enumerate() {
        let host = s.clone_dtoh(o).map_err(cuda_err("copy from the device"))?;
        for (r, v) in host.into_iter().enumerate() {
            slots[k][ttree.order[r] as usize] = v;
        }
    }
    let stats = TreeStats {
        source_cells: stree.cells.len(),
        target_groups: begin.len(),
        p2p,
        p2c,
        build_seconds,
        eval_seconds,
    };
    Ok((Outputs::new(def.name.as_str(), &def.outputs, slots), stats))
}
