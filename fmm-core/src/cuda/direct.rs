//! Direct summation on the GPU with the generated tile kernel.
//!
//! Work that does not fit in device memory is split: sources into chunks
//! whose contributions are added on the device (the kernel's `accumulate`
//! flag), targets into chunks evaluated one after the other (yokota2009
//! section 4.2). Only a problem whose smallest chunk does not fit is an
//! error, and it says how much memory was needed.

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};

use super::Gpu;
use crate::direct::Outputs;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;
use fmm_codegen::emit::cuda::{entry_name, CudaOptions};

/// Options of a GPU evaluation.
#[derive(Clone, Debug, Default)]
pub struct CudaRunOptions {
    /// Use at most this many bytes of device memory (default: 80% of what
    /// is free). Smaller values force chunking, which tests use.
    pub max_device_bytes: Option<usize>,
    /// Launch shape `(P, Q)` to use instead of the tuned one: `P` targets
    /// per block, `Q` threads per target.
    pub shape: Option<(u32, u32)>,
    /// Fill the outputs with NaN before the launch, so that an element the
    /// kernel fails to write shows up (tests).
    pub poison: bool,
}

/// Particle arrays on the device: positions and field slots.
struct DeviceSet<R: Real> {
    pos: Vec<CudaSlice<R>>,
    slots: Vec<CudaSlice<R>>,
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
            .map_err(|e| Error::Cuda(format!("copy to the device: {e}")))
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
            needed: LEAST.min(n) * source_bytes + LEAST.min(m) * target_bytes,
            available: budget,
        });
    }
    Ok(Chunks { targets, sources })
}

/// Everything one launch needs besides the sizes.
struct Launch<'a, R: Real> {
    gpu: &'a Gpu,
    func: &'a CudaFunction,
    shape: (u32, u32),
    params: &'a [R],
}

impl<R: Real> Launch<'_, R> {
    fn run(
        &self,
        m: usize,
        tgt: &DeviceSet<R>,
        n: usize,
        src: &DeviceSet<R>,
        out: &mut [CudaSlice<R>],
        accumulate: bool,
    ) -> Result<(), Error> {
        if m == 0 {
            return Ok(());
        }
        let (p, q) = self.shape;
        let (m_i, n_i, acc_i) = (m as i32, n as i32, accumulate as i32);
        let stream = self.gpu.stream();
        let mut b = stream.launch_builder(self.func);
        b.arg(&m_i);
        for s in tgt.pos.iter().chain(&tgt.slots) {
            b.arg(s);
        }
        b.arg(&n_i);
        for s in src.pos.iter().chain(&src.slots) {
            b.arg(s);
        }
        for v in self.params {
            b.arg(v);
        }
        for o in out.iter_mut() {
            b.arg(o);
        }
        b.arg(&acc_i);
        let cfg = LaunchConfig {
            grid_dim: ((m as u32).div_ceil(p), 1, 1),
            block_dim: (p, q, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments follow the entry point's signature (see
        // `fmm_codegen::emit::cuda`): counts, then every slot array of the
        // layout the particles were checked against, each of length at
        // least the count passed before it, parameters, outputs of length
        // `m`, and the flag.
        unsafe { b.launch(cfg) }
            .map_err(|e| Error::Cuda(format!("launching {:?}: {e}", self.func)))?;
        Ok(())
    }
}

fn ceil_log2(x: usize) -> u32 {
    usize::BITS - x.saturating_sub(1).leading_zeros()
}

/// Direct summation of kernel `K` on `gpu`: every source to every target.
/// Same contract as [`crate::direct_cpu`].
pub fn direct_cuda<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &CudaRunOptions,
) -> Result<Outputs<R>, Error> {
    direct_cuda_report::<K, R>(gpu, params, targets, sources, opts).map(|r| r.0)
}

/// What a GPU evaluation did, for benchmarks and logs.
#[derive(Clone, Debug, Default)]
pub struct CudaReport {
    /// The launch shape `(P, Q)` used.
    pub shape: (u32, u32),
    /// Target and source chunk sizes.
    pub chunks: Option<Chunks>,
    /// Time in the kernel launches, measured with device events
    /// (transfers excluded).
    pub kernel_seconds: f64,
    /// Where the module came from (cache hit, compiled ...).
    pub module: Option<super::ModuleReport>,
}

/// [`direct_cuda`], also returning what it did.
pub fn direct_cuda_report<K: Kernel, R: Real>(
    gpu: &Gpu,
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
    opts: &CudaRunOptions,
) -> Result<(Outputs<R>, CudaReport), Error> {
    let def = K::def();
    let p = crate::direct::check_inputs::<K, R>(params, targets, sources)?;
    let (m, n, no) = (targets.len(), sources.len(), def.n_outputs());
    if m == 0 || n == 0 || no == 0 {
        // Nothing to launch: no targets, or sums over no sources.
        return Ok((Outputs::zeros::<K>(m), CudaReport::default()));
    }
    let (module, module_report) = gpu.module(&def.symbol(), K::cuda_source())?;

    let size = std::mem::size_of::<R>();
    let target_bytes = (3 + def.n_targets() + no) * size;
    let source_bytes = (3 + def.n_sources()) * size;
    let budget = match opts.max_device_bytes {
        Some(b) => b,
        None => gpu.memory()?.0 / 10 * 8,
    };
    let chunks = plan_chunks(m, n, target_bytes, source_bytes, budget)?;

    // Sources that fit in one chunk are uploaded once.
    let whole_sources = if chunks.sources >= n {
        Some(upload(gpu, sources, 0, n)?)
    } else {
        None
    };

    let shape = match opts.shape {
        Some(s) => {
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
            s
        }
        None => {
            let key = (def.symbol(), R::NAME, ceil_log2(m));
            match gpu.tuned_shape(&key) {
                Some(s) => s,
                None => {
                    let s = autotune::<K, R>(
                        gpu,
                        &module,
                        &p,
                        targets,
                        sources,
                        chunks,
                        whole_sources.as_ref(),
                    )?;
                    gpu.remember_shape(key, s);
                    s
                }
            }
        }
    };
    let func = gpu.function(&module, &entry_name(def, R::NAME, shape))?;
    let launch = Launch {
        gpu,
        func: &func,
        shape,
        params: &p,
    };

    let stream = gpu.stream();
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let event_err = |e| Error::Cuda(format!("timing events: {e}"));
    let mut events = Vec::new();
    let mut result: Vec<Vec<R>> = vec![Vec::with_capacity(m); no];
    for t0 in (0..m).step_by(chunks.targets) {
        let t1 = (t0 + chunks.targets).min(m);
        let tgt = upload(gpu, targets, t0, t1)?;
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
        .map_err(|e| Error::Cuda(format!("allocating outputs: {e}")))?;
        for s0 in (0..n).step_by(chunks.sources) {
            let s1 = (s0 + chunks.sources).min(n);
            let chunk;
            let src = match &whole_sources {
                Some(s) => s,
                None => {
                    chunk = upload(gpu, sources, s0, s1)?;
                    &chunk
                }
            };
            let start = gpu.context().new_event(timing).map_err(event_err)?;
            let end = gpu.context().new_event(timing).map_err(event_err)?;
            start.record(stream).map_err(event_err)?;
            launch.run(t1 - t0, &tgt, s1 - s0, src, &mut out, s0 > 0)?;
            end.record(stream).map_err(event_err)?;
            events.push((start, end));
        }
        for (k, o) in out.iter().enumerate() {
            let host = stream
                .clone_dtoh(o)
                .map_err(|e| Error::Cuda(format!("copy from the device: {e}")))?;
            result[k].extend_from_slice(&host);
        }
    }
    let mut kernel_ms = 0.0;
    for (start, end) in &events {
        kernel_ms += start.elapsed_ms(end).map_err(event_err)? as f64;
    }
    let report = CudaReport {
        shape,
        chunks: Some(chunks),
        kernel_seconds: kernel_ms / 1e3,
        module: Some(module_report),
    };
    Ok((
        Outputs::new(def.name.as_str(), &def.outputs, result),
        report,
    ))
}

/// Times every launch shape on this problem's targets against a slice of
/// its sources and returns the fastest. Targets decide the occupancy, and
/// the time per source is the same for all sources, so a few thousand
/// sources rank the shapes as the whole problem would.
fn autotune<K: Kernel, R: Real>(
    gpu: &Gpu,
    module: &std::sync::Arc<cudarc::driver::CudaModule>,
    p: &[R],
    targets: &Particles<R>,
    sources: &Particles<R>,
    chunks: Chunks,
    whole_sources: Option<&DeviceSet<R>>,
) -> Result<(u32, u32), Error> {
    let def = K::def();
    let m = chunks.targets.min(targets.len());
    let n = chunks.sources.min(sources.len()).min(1024);
    let tgt = upload(gpu, targets, 0, m)?;
    let own;
    let src = match whole_sources {
        Some(s) => s,
        None => {
            own = upload(gpu, sources, 0, n)?;
            &own
        }
    };
    let stream = gpu.stream();
    // SAFETY: written by every launch (`accumulate` = 0).
    let mut out: Vec<CudaSlice<R>> = (0..def.n_outputs())
        .map(|_| unsafe { stream.alloc::<R>(m) })
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Cuda(format!("allocating outputs: {e}")))?;
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let mut best: Option<((u32, u32), f32)> = None;
    for shape in CudaOptions::default().shapes {
        let func = gpu.function(module, &entry_name(def, R::NAME, shape))?;
        let launch = Launch {
            gpu,
            func: &func,
            shape,
            params: p,
        };
        launch.run(m, &tgt, n, src, &mut out, false)?;
        let mut fastest = f32::INFINITY;
        for _ in 0..2 {
            let err = |e| Error::Cuda(format!("timing events: {e}"));
            let start = gpu.context().new_event(timing).map_err(err)?;
            let end = gpu.context().new_event(timing).map_err(err)?;
            start.record(stream).map_err(err)?;
            launch.run(m, &tgt, n, src, &mut out, false)?;
            end.record(stream).map_err(err)?;
            fastest = fastest.min(start.elapsed_ms(&end).map_err(err)?);
        }
        if best.is_none_or(|(_, t)| fastest < t) {
            best = Some((shape, fastest));
        }
    }
    Ok(best.map_or((256, 1), |b| b.0))
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
