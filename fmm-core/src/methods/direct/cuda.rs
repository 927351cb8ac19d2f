//! Direct summation on the GPU with the generated tile kernel.
//!
//! Work that does not fit in device memory is split: sources into chunks
//! whose contributions are added on the device (the kernel's `accumulate`
//! flag), targets into chunks evaluated one after the other (yokota2009
//! section 4.2). Only a problem whose smallest chunk does not fit is an
//! error, and it says how much memory was needed.

use cudarc::driver::{CudaSlice, LaunchConfig};

use super::DirectOptions;
use crate::cuda::device::cuda_err;
use crate::cuda::launch::{self, Args, Entry};
use crate::cuda::resident::DeviceParticles;
use crate::cuda::Gpu;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;
use crate::stats::{Clock, Stage, Stats};
use fmm_codegen::emit::cuda::CudaOptions;
use fmm_codegen::emit::signature::Role;
use fmm_codegen::emit::Module;

/// Particle arrays on the device: positions and field slots.
struct DeviceSet<R: Real> {
    pos: Vec<CudaSlice<R>>,
    slots: Vec<CudaSlice<R>>,
}

impl<R: Real> DeviceSet<R> {
    fn view(&self) -> View<'_, R> {
        View {
            pos: [&self.pos[0], &self.pos[1], &self.pos[2]],
            slots: self.slots.iter().collect(),
        }
    }
}

/// The arrays a launch reads of one side: positions and field slots.
struct View<'a, R> {
    pos: [&'a CudaSlice<R>; 3],
    slots: Vec<&'a CudaSlice<R>>,
}

impl<'a, R> View<'a, R> {
    fn of(pos: &'a [CudaSlice<R>; 3], slots: &'a [CudaSlice<R>]) -> Self {
        View {
            pos: [&pos[0], &pos[1], &pos[2]],
            slots: slots.iter().collect(),
        }
    }
}

fn upload<R: Real>(
    gpu: &Gpu,
    p: &Particles<R>,
    lo: usize,
    hi: usize,
) -> Result<DeviceSet<R>, Error> {
    let s = gpu.stream();
    let up = |v: &[R]| {
        s.clone_htod(&v[lo..hi])
            .map_err(cuda_err("copy to the device"))
    };
    Ok(DeviceSet {
        pos: p
            .positions()
            .iter()
            .map(|v| up(v))
            .collect::<Result<_, _>>()?,
        slots: p.slots().iter().map(|v| up(v)).collect::<Result<_, _>>()?,
    })
}

/// How the problem is split to fit the memory budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunks {
    pub targets: usize,
    pub sources: usize,
}

/// Chunk sizes for `m` targets and `n` sources within `budget` bytes.
pub fn plan_chunks(
    m: usize,
    n: usize,
    target_bytes: usize,
    source_bytes: usize,
    budget: usize,
) -> Result<Chunks, Error> {
    // Counts are passed to the kernel as `int`.
    const MAX: usize = i32::MAX as usize;
    if m * target_bytes + n * source_bytes <= budget && m <= MAX && n <= MAX {
        return Ok(Chunks {
            targets: m.max(1),
            sources: n.max(1),
        });
    }
    // Half the budget to each side; a tile of sources and a block of
    // targets is the least that makes sense.
    const LEAST: usize = 256;
    let sources = (budget / 2 / source_bytes).min(n).min(MAX);
    let targets = ((budget - sources * source_bytes) / target_bytes)
        .min(m)
        .min(MAX);
    if sources < LEAST.min(n) || targets < LEAST.min(m) {
        return Err(Error::OutOfMemory {
            what: "even the smallest chunk of this direct sum".into(),
            needed: LEAST.min(n) * source_bytes + LEAST.min(m) * target_bytes,
            available: budget,
        });
    }
    Ok(Chunks { targets, sources })
}

/// Everything one launch needs besides the sizes.
struct Launch<'a, R: Real> {
    gpu: &'a Gpu,
    entry: &'a Entry,
    shape: (u32, u32),
    params: &'a [R],
}

impl<R: Real> Launch<'_, R> {
    fn run(
        &self,
        m: usize,
        tgt: &View<'_, R>,
        n: usize,
        src: &View<'_, R>,
        out: &mut [CudaSlice<R>],
        accumulate: bool,
    ) -> Result<(), Error> {
        if m == 0 {
            return Ok(());
        }
        let (p, q) = self.shape;
        let mut a = Args::new();
        a.int(Role::TargetCount, m as i32)
            .read(Role::TargetPositions, tgt.pos)
            .read(Role::TargetSlots, tgt.slots.iter().copied())
            .int(Role::SourceCount, n as i32)
            .read(Role::SourcePositions, src.pos)
            .read(Role::SourceSlots, src.slots.iter().copied())
            .values(Role::Params, self.params)
            .write(Role::Outputs, out.iter_mut())
            .int(Role::Accumulate, accumulate as i32);
        let cfg = LaunchConfig {
            grid_dim: ((m as u32).div_ceil(p), 1, 1),
            block_dim: (p, q, 1),
            shared_mem_bytes: 0,
        };
        let name = self.entry.name();
        // SAFETY: the arguments are checked against the entry point's
        // signature (`Signature::tile`); every slot array has the layout
        // the particles were checked against and is at least as long as
        // the count passed before it, and the outputs hold `m`.
        unsafe {
            self.entry.launch(a, self.gpu.stream(), cfg, |e| {
                Error::Cuda(format!("launching {name}: {e}"))
            })
        }
    }
}

fn ceil_log2(x: usize) -> u32 {
    usize::BITS - x.saturating_sub(1).leading_zeros()
}

/// Every source to every target on `gpu`, with the parameters `p`
/// (checked and converted by the front door); the problem is not empty.
/// Books the kernel time (device events) to [`Stage::P2p`] and the copies
/// to [`Stage::Upload`] and [`Stage::Download`].
pub(crate) fn run<K: Kernel, R: Real>(
    gpu: &Gpu,
    p: &[R],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &DirectOptions,
    stats: &mut Stats,
) -> Result<Outputs<R>, Error> {
    let def = K::def();
    let (m, n, no) = (targets.len(), sources.len(), def.n_outputs());
    let t_setup = std::time::Instant::now();
    launch::module::<K>(gpu, Module::Direct)?;
    stats.add(Stage::Setup, t_setup.elapsed().as_secs_f64());

    let size = std::mem::size_of::<R>();
    let target_bytes = (3 + def.n_targets() + no) * size;
    let source_bytes = (3 + def.n_sources()) * size;
    let budget = match opts.max_device_bytes {
        Some(b) => b,
        None => gpu.memory()?.0 / 10 * 8,
    };
    let chunks = plan_chunks(m, n, target_bytes, source_bytes, budget)?;

    // Sources that fit in one chunk are uploaded once.
    let mut copies = std::time::Duration::ZERO;
    let t_copy = std::time::Instant::now();
    let whole_sources = if chunks.sources >= n {
        Some(upload(gpu, sources, 0, n)?)
    } else {
        None
    };
    copies += t_copy.elapsed();
    let t_setup = std::time::Instant::now();

    let shape = shape_for::<K, R>(gpu, opts, m, || {
        // Tuned on the first chunk of targets against a slice of the
        // sources.
        let mt = chunks.targets.min(m);
        let nt = chunks.sources.min(n).min(1024);
        let tgt = upload(gpu, targets, 0, mt)?;
        let own;
        let src = match &whole_sources {
            Some(s) => s,
            None => {
                own = upload(gpu, sources, 0, nt)?;
                &own
            }
        };
        autotune::<K, R>(gpu, p, &tgt.view(), mt, &src.view(), nt)
    })?;
    stats.add(Stage::Setup, t_setup.elapsed().as_secs_f64());
    let entry = Entry::tile::<K, R>(gpu, shape)?;
    let launch = Launch {
        gpu,
        entry: &entry,
        shape,
        params: p,
    };

    let stream = gpu.stream();
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let event_err = cuda_err("timing events");
    let mut events = Vec::new();
    let mut result: Vec<Vec<R>> = vec![Vec::with_capacity(m); no];
    let mut downloads = std::time::Duration::ZERO;
    for t0 in (0..m).step_by(chunks.targets) {
        let t1 = (t0 + chunks.targets).min(m);
        let t_copy = std::time::Instant::now();
        let tgt = upload(gpu, targets, t0, t1)?;
        copies += t_copy.elapsed();
        let mut out: Vec<CudaSlice<R>> = if opts.poison {
            let nan = vec![R::c(f64::NAN); t1 - t0];
            (0..no)
                .map(|_| stream.clone_htod(&nan))
                .collect::<Result<_, _>>()
        } else {
            // SAFETY: every element is written by the first launch below
            // (`accumulate` = 0 overwrites), also when there are no sources.
            (0..no)
                .map(|_| unsafe { stream.alloc::<R>(t1 - t0) })
                .collect::<Result<_, _>>()
        }
        .map_err(cuda_err("allocating outputs"))?;
        for s0 in (0..n).step_by(chunks.sources) {
            let s1 = (s0 + chunks.sources).min(n);
            let chunk;
            let src = match &whole_sources {
                Some(s) => s,
                None => {
                    let t_copy = std::time::Instant::now();
                    chunk = upload(gpu, sources, s0, s1)?;
                    copies += t_copy.elapsed();
                    &chunk
                }
            };
            let start = gpu.context().new_event(timing).map_err(event_err)?;
            let end = gpu.context().new_event(timing).map_err(event_err)?;
            start.record(stream).map_err(event_err)?;
            launch.run(t1 - t0, &tgt.view(), s1 - s0, &src.view(), &mut out, s0 > 0)?;
            end.record(stream).map_err(event_err)?;
            events.push((start, end));
        }
        let t_copy = std::time::Instant::now();
        for (k, o) in out.iter().enumerate() {
            let host = stream
                .clone_dtoh(o)
                .map_err(cuda_err("copy from the device"))?;
            result[k].extend_from_slice(&host);
        }
        downloads += t_copy.elapsed();
    }
    let mut kernel_ms = 0.0;
    for (start, end) in &events {
        kernel_ms += start.elapsed_ms(end).map_err(event_err)? as f64;
    }
    stats.add(Stage::Upload, copies.as_secs_f64());
    stats.add(Stage::P2p, kernel_ms / 1e3);
    stats.add(Stage::Download, downloads.as_secs_f64());
    stats.launch_shape = Some(shape);
    stats.chunks = Some((chunks.targets, chunks.sources));
    stats.p2p += (m * n) as u64;
    Ok(Outputs::new(def.name.as_str(), &def.outputs, result))
}

/// Every source to every target on particles already on `gpu` (input
/// order), with the parameters `p` (checked and converted by the front
/// door); the problem is not empty. Returns the outputs on the device.
/// Everything is on the device already, so nothing is split: only the
/// outputs are allocated (an out-of-memory error names their size).
pub(crate) fn run_resident<K: Kernel, R: Real>(
    gpu: &Gpu,
    p: &[R],
    targets: &DeviceParticles<R>,
    sources: &DeviceParticles<R>,
    opts: &DirectOptions,
    clock: &mut Clock<'_>,
) -> Result<Vec<CudaSlice<R>>, Error> {
    let def = K::def();
    let (m, n, no) = (targets.len(), sources.len(), def.n_outputs());
    launch::module::<K>(gpu, Module::Direct)?;
    let spos = sources
        .positions()
        .ok_or_else(|| Error::BadOption("the sources have no positions of their own".into()))?;
    let tpos = targets.positions().unwrap_or(spos);
    let (tgt, src) = (
        View::of(tpos, targets.slots()),
        View::of(spos, sources.slots()),
    );
    let shape = shape_for::<K, R>(gpu, opts, m, || {
        autotune::<K, R>(gpu, p, &tgt, m, &src, n.min(1024))
    })?;
    let entry = Entry::tile::<K, R>(gpu, shape)?;
    let s = gpu.stream();
    let mut out: Vec<CudaSlice<R>> = Vec::with_capacity(no);
    for _ in 0..no {
        // Every element is written by the launch (`accumulate` = 0).
        out.push(crate::cuda::device::alloc::<R>(s, m)?);
    }
    clock.lap(Stage::Setup)?;
    let launch = Launch {
        gpu,
        entry: &entry,
        shape,
        params: p,
    };
    launch.run(m, &tgt, n, &src, &mut out, false)?;
    clock.lap(Stage::P2p)?;
    let stats = clock.stats();
    stats.launch_shape = Some(shape);
    stats.p2p += (m * n) as u64;
    Ok(out)
}

/// The launch shape for `m` targets: the one the options ask for, else
/// the one tuned for this kernel, precision and size class, else `tune`'s
/// (then remembered).
fn shape_for<K: Kernel, R: Real>(
    gpu: &Gpu,
    opts: &DirectOptions,
    m: usize,
    tune: impl FnOnce() -> Result<(u32, u32), Error>,
) -> Result<(u32, u32), Error> {
    if let Some(s) = shape_asked(opts)? {
        return Ok(s);
    }
    let key = (K::def().symbol(), R::NAME, ceil_log2(m));
    if let Some(s) = gpu.tuned_shape(&key) {
        return Ok(s);
    }
    let s = tune()?;
    gpu.remember_shape(key, s);
    Ok(s)
}

/// The launch shape the options ask for, checked against those the
/// kernel is compiled for.
fn shape_asked(opts: &DirectOptions) -> Result<Option<(u32, u32)>, Error> {
    let Some(s) = opts.shape else {
        return Ok(None);
    };
    let shapes = CudaOptions::default().shapes;
    if !shapes.contains(&s) {
        let list = shapes
            .iter()
            .map(|(p, q)| format!("{p}x{q}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Error::Cuda(format!(
            "launch shape {}x{} is not one the kernel is compiled for ({list})",
            s.0, s.1
        )));
    }
    Ok(Some(s))
}

/// Times every launch shape on `m` of this problem's targets against `n`
/// of its sources and returns the fastest. Targets decide the occupancy,
/// and the time per source is the same for all sources, so a few
/// thousand sources rank the shapes as the whole problem would.
fn autotune<K: Kernel, R: Real>(
    gpu: &Gpu,
    p: &[R],
    tgt: &View<'_, R>,
    m: usize,
    src: &View<'_, R>,
    n: usize,
) -> Result<(u32, u32), Error> {
    let def = K::def();
    let stream = gpu.stream();
    // SAFETY: written by every launch (`accumulate` = 0).
    let mut out: Vec<CudaSlice<R>> = (0..def.n_outputs())
        .map(|_| unsafe { stream.alloc::<R>(m) })
        .collect::<Result<_, _>>()
        .map_err(cuda_err("allocating outputs"))?;
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let mut best: Option<((u32, u32), f32)> = None;
    for shape in CudaOptions::default().shapes {
        let entry = Entry::tile::<K, R>(gpu, shape)?;
        let launch = Launch {
            gpu,
            entry: &entry,
            shape,
            params: p,
        };
        launch.run(m, tgt, n, src, &mut out, false)?;
        let mut fastest = f32::INFINITY;
        for _ in 0..2 {
            let err = cuda_err("timing events");
            let start = gpu.context().new_event(timing).map_err(err)?;
            let end = gpu.context().new_event(timing).map_err(err)?;
            start.record(stream).map_err(err)?;
            launch.run(m, tgt, n, src, &mut out, false)?;
            end.record(stream).map_err(err)?;
            fastest = fastest.min(start.elapsed_ms(&end).map_err(err)?);
        }
        if best.is_none_or(|(_, t)| fastest < t) {
            best = Some((shape, fastest));
        }
    }
    Ok(best.map_or((256, 1), |b| b.0))
}

/// Interactions a second of the direct sum of gravity on the GPU, f32 and
/// f64 (one H200, `direct_bench --backend cuda --kernel gravity --n
/// 1048576 --precision f32|f64`: 1.51e12 and 6.20e11, 2026-11-26,
/// `docs/ACCURACY.md`), for the time a direct sum is predicted to take
/// before it has run once (after that its measured time is used).
const GRAVITY_RATE: [f64; 2] = [1.5e12, 6.2e11];

/// The seconds the GPU's direct sum is predicted to take for `m` targets
/// and `n` sources of kernel `K`: gravity's measured rate scaled by the
/// kernel's weighted flops a pair against gravity's.
pub(crate) fn predicted_seconds<K: Kernel>(m: usize, n: usize, f32: bool) -> f64 {
    let gravity = <crate::kernels::Gravity as Kernel>::flops().weighted as f64;
    let flops = K::flops().weighted as f64;
    let rate = GRAVITY_RATE[usize::from(!f32)] * gravity / flops.max(1.0);
    m as f64 * n as f64 / rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_fits_in_one_chunk() {
        let c = plan_chunks(1000, 2000, 32, 16, 1 << 20).unwrap();
        assert_eq!(
            c,
            Chunks {
                targets: 1000,
                sources: 2000
            }
        );
    }

    #[test]
    fn large_problems_are_split_within_the_budget() {
        let (m, n, tb, sb, budget) = (1_000_000, 3_000_000, 32, 16, 8 << 20);
        let c = plan_chunks(m, n, tb, sb, budget).unwrap();
        assert!(c.targets * tb + c.sources * sb <= budget, "{c:?}");
        assert!(c.targets >= 256 && c.sources >= 256, "{c:?}");
    }

    #[test]
    fn a_budget_below_one_tile_is_an_error_that_says_how_much_is_needed() {
        let e = plan_chunks(10_000, 10_000, 32, 16, 4096).unwrap_err();
        assert_eq!(
            e,
            Error::OutOfMemory {
                what: "even the smallest chunk of this direct sum".into(),
                needed: 256 * 16 + 256 * 32,
                available: 4096
            }
        );
        assert!(e.to_string().contains("needs 12288 bytes"), "{e}");
    }

    #[test]
    fn log2_buckets() {
        assert_eq!(
            [1, 2, 3, 4, 5, 1024, 1025].map(ceil_log2),
            [0, 1, 2, 2, 3, 10, 11]
        );
    }
}
