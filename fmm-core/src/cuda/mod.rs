//! The CUDA floor every GPU method stands on: a GPU context, run-time
//! compilation (NVRTC, to CUBIN, cached on disk), the device helpers
//! ([`device`]), the hand-written modules' constants and entry points
//! ([`module`]), the launcher of the generated entry points (`launch`:
//! every launch checked against the entry's signature), the primitives
//! ([`primitives`]: the one scan, the moves into tree order and back),
//! long copies ([`transfer`]) and particles kept on the device
//! ([`resident`]).
//!
//! The CUDA libraries are loaded at run time (cudarc's dynamic loading), so
//! everything builds and the CPU path runs on machines without CUDA; asking
//! for the GPU there is a clear error, and [`crate::Backend::Auto`] falls
//! back to the CPU and says so.

pub mod cache;
pub(crate) mod device;
pub(crate) mod laps;
pub(crate) mod launch;
pub mod module;
pub mod nvrtc;
pub mod primitives;
pub mod resident;
pub mod transfer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

use crate::error::Error;
pub use cache::{CacheKey, CacheOutcome, ModuleCache};
use device::cuda_err;

/// What the backend knows about its GPU.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    /// Compute capability as one number: 90 for 9.0 (Hopper).
    pub arch: i32,
    pub multiprocessors: i32,
    pub total_memory: usize,
    /// The driver's CUDA version, as CUDA writes it (13000 for 13.0).
    pub driver_version: i32,
    pub nvrtc_version: (i32, i32),
}

impl std::fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (device {}, sm_{}, {} SMs, {:.1} GiB), driver CUDA {}.{}, NVRTC {}.{}",
            self.name,
            self.ordinal,
            self.arch,
            self.multiprocessors,
            self.total_memory as f64 / (1u64 << 30) as f64,
            self.driver_version / 1000,
            self.driver_version % 1000 / 10,
            self.nvrtc_version.0,
            self.nvrtc_version.1
        )
    }
}

/// Where the last module came from, for logs and benchmarks.
#[derive(Clone, Debug)]
pub struct ModuleReport {
    pub kernel: String,
    pub outcome: CacheOutcome,
    pub seconds: f64,
}

/// Which tuned launch shape: kernel symbol, precision, log2 of the target
/// count (the shape depends on how many blocks fill the GPU).
pub type ShapeKey = (String, &'static str, u32);

/// One GPU: its context and stream, compiled modules and tuned launch
/// shapes.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: GpuInfo,
    cache: ModuleCache,
    modules: Mutex<HashMap<String, (Arc<CudaModule>, ModuleReport)>>,
    /// Launch shape per (kernel, precision, log2 of the target count).
    shapes: Mutex<HashMap<ShapeKey, (u32, u32)>>,
    /// Page-locked buffers for long copies ([`transfer`]).
    staging: transfer::StagingSlot,
    /// Whether long copies skip the staging buffers ([`Gpu::set_staging`]).
    staging_off: std::sync::atomic::AtomicBool,
    /// A folder of CUDA sources to compile instead of the generated ones
    /// ([`Gpu::set_source_dir`]).
    source_dir: Mutex<Option<std::path::PathBuf>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("info", &self.info).finish()
    }
}

/// Keeps device memory freed on the stream in the device's memory pool
/// instead of returning it to the driver at every synchronisation: the
/// treecode allocates its trees and lists afresh at every evaluation, and
/// mapping hundreds of megabytes again each time costs more than the walk.
fn keep_freed_memory(ctx: &CudaContext) -> Result<(), Error> {
    // SAFETY: the device comes from a live context; the attribute takes a
    // pointer to a u64 that outlives the call.
    unsafe {
        let pool = cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device())
            .map_err(cuda_err("the device's memory pool"))?;
        let mut threshold = u64::MAX;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut threshold as *mut u64 as *mut std::ffi::c_void,
        )
        .result()
        .map_err(cuda_err("the device's memory pool"))
    }
}

/// Memory freed on one stream is not handed to an allocation on another
/// before the freeing stream's work is done (CUDA's pools allow it by
/// default, and make the allocating stream wait for the freeing one): a
/// second stream's small kernels beside a long near field on the first
/// would otherwise wait for it whenever their memory came from a list
/// the near field's launch freed. Set when a second stream is made.
fn no_waits_for_freed_memory(ctx: &CudaContext) -> Result<(), Error> {
    // SAFETY: as `keep_freed_memory`; this attribute takes an int.
    unsafe {
        let pool = cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device())
            .map_err(cuda_err("the device's memory pool"))?;
        let mut allow: std::ffi::c_int = 0;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
            &mut allow as *mut std::ffi::c_int as *mut std::ffi::c_void,
        )
        .result()
        .map_err(cuda_err("the device's memory pool"))
    }
}

/// Whether the CUDA driver library can be loaded.
pub fn driver_available() -> bool {
    // SAFETY: only tries to open the shared library.
    unsafe { sys::is_culib_present() }
}

/// The process's GPU ([`Gpu::shared`]) and the device named for it
/// ([`Gpu::choose`]).
static SHARED: OnceLock<Result<Gpu, Error>> = OnceLock::new();
static CHOSEN: OnceLock<usize> = OnceLock::new();

impl Gpu {
    /// Opens GPU `ordinal`, with the module cache from the environment
    /// (see [`ModuleCache::from_env`]).
    pub fn new(ordinal: usize) -> Result<Gpu, Error> {
        if !driver_available() {
            return Err(Error::CudaUnavailable(
                "the CUDA driver library (libcuda.so) was not found on the loader path".into(),
            ));
        }
        let nvrtc_version = nvrtc::version()?;
        let count = CudaContext::device_count()
            .map_err(|e| Error::CudaUnavailable(format!("no CUDA device ({e})")))?;
        if count <= 0 {
            return Err(Error::CudaUnavailable(
                "the CUDA driver reports no device".into(),
            ));
        }
        if ordinal >= count as usize {
            return Err(Error::CudaUnavailable(format!(
                "device {ordinal} was asked for, but there are {count}"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(cuda_err("opening the device"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(cuda_err("compute capability"))?;
        let mut driver_version = 0;
        // SAFETY: the driver library is loaded; the pointer is valid.
        unsafe { sys::cuDriverGetVersion(&mut driver_version) };
        let info = GpuInfo {
            ordinal,
            name: ctx.name().map_err(cuda_err("device name"))?,
            arch: major * 10 + minor,
            multiprocessors: ctx
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(cuda_err("multiprocessor count"))?,
            total_memory: ctx.total_mem().map_err(cuda_err("memory size"))?,
            driver_version,
            nvrtc_version,
        };
        keep_freed_memory(&ctx)?;
        let stream = ctx.default_stream();
        Ok(Gpu {
            ctx,
            stream,
            info,
            cache: ModuleCache::from_env(),
            modules: Mutex::new(HashMap::new()),
            shapes: Mutex::new(HashMap::new()),
            staging: Mutex::new(None),
            staging_off: std::sync::atomic::AtomicBool::new(false),
            source_dir: Mutex::new(None),
        })
    }

    /// The process's GPU, opened once: device `FMM_CUDA_DEVICE` where it
    /// is set, else the one [`Gpu::choose`] named, else 0.
    pub fn shared() -> Result<&'static Gpu, Error> {
        SHARED
            .get_or_init(|| {
                let ordinal = std::env::var("FMM_CUDA_DEVICE")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .or_else(|| CHOSEN.get().copied())
                    .unwrap_or(0);
                Gpu::new(ordinal)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The process's GPU ([`Gpu::shared`]) on a second stream, one that
    /// runs beside the first (CUDA's non-blocking stream): over MPI the
    /// local essential trees are built on it while the evaluation of a
    /// process's own sources runs on the first. Its modules are its own
    /// (loaded again from the module cache).
    pub fn shared_beside() -> Result<&'static Gpu, Error> {
        static BESIDE: OnceLock<Result<Gpu, Error>> = OnceLock::new();
        BESIDE
            .get_or_init(|| {
                let first = Gpu::shared()?;
                // At the highest priority: the trees' kernels are small
                // and many, each waited for, and at the default priority
                // each queued behind the evaluation's blocks.
                first
                    .ctx
                    .bind_to_thread()
                    .map_err(cuda_err("the context"))?;
                let (_, highest) = cudarc::driver::result::stream::get_priority_range()
                    .map_err(cuda_err("the streams' priorities"))?;
                let stream = first
                    .ctx
                    .new_stream_with_priority(highest)
                    .map_err(cuda_err("a second stream"))?;
                no_waits_for_freed_memory(&first.ctx)?;
                Ok(Gpu {
                    ctx: first.ctx.clone(),
                    stream,
                    info: first.info.clone(),
                    cache: first.cache.clone(),
                    modules: Mutex::new(HashMap::new()),
                    shapes: Mutex::new(HashMap::new()),
                    staging: Mutex::new(None),
                    staging_off: std::sync::atomic::AtomicBool::new(
                        first.staging_off.load(std::sync::atomic::Ordering::Relaxed),
                    ),
                    source_dir: Mutex::new(
                        first
                            .source_dir
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .clone(),
                    ),
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Names the device [`Gpu::shared`] opens (MPI processes of one node
    /// each take their own: `distributed::node_device`); an error once
    /// another is open or named.
    pub fn choose(ordinal: usize) -> Result<(), Error> {
        let taken = |now: usize| {
            Error::CudaUnavailable(format!(
                "device {ordinal} was chosen after device {now} had been"
            ))
        };
        if let Some(Ok(g)) = SHARED.get() {
            if g.info.ordinal != ordinal {
                return Err(taken(g.info.ordinal));
            }
        }
        match CHOSEN.set(ordinal) {
            Ok(()) => Ok(()),
            Err(_) if CHOSEN.get() == Some(&ordinal) => Ok(()),
            Err(_) => Err(taken(*CHOSEN.get().unwrap_or(&0))),
        }
    }

    /// How many CUDA devices this process sees (0 without a driver).
    pub fn count() -> usize {
        if !driver_available() {
            return 0;
        }
        CudaContext::device_count().map_or(0, |c| c.max(0) as usize)
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// A tuning hook: modules are compiled from `DIR/<module name>.cu`
    /// where that file exists, instead of the generated or built-in source
    /// (the cache key follows the source); `None` turns it off. Modules
    /// already loaded by this process are kept.
    pub fn set_source_dir(&self, dir: Option<std::path::PathBuf>) {
        *self.source_dir.lock().unwrap_or_else(|e| e.into_inner()) = dir;
    }

    /// Replaces the module cache (tests use a private directory).
    pub fn set_cache(&mut self, cache: ModuleCache) {
        self.cache = cache;
    }

    /// Free and total device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize), Error> {
        self.ctx.mem_get_info().map_err(cuda_err("memory info"))
    }

    /// The module compiled from `source` (kernel `name`): from this
    /// process's modules, else from the disk cache, else compiled now.
    pub fn module(
        &self,
        name: &str,
        source: &str,
    ) -> Result<(Arc<CudaModule>, ModuleReport), Error> {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((m, r)) = modules.get(name) {
            return Ok((m.clone(), r.clone()));
        }
        let t0 = std::time::Instant::now();
        // A developer's hook for tuning: compile `<dir>/<name>.cu` instead
        // of the generated source (the cache key follows the source).
        let replaced;
        let dir = self
            .source_dir
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let source =
            match dir.and_then(|d| std::fs::read_to_string(d.join(format!("{name}.cu"))).ok()) {
                Some(s) => {
                    eprintln!("[fmm] compiling {name}.cu from the source folder set on the GPU");
                    replaced = s;
                    replaced.as_str()
                }
                None => source,
            };
        let options = nvrtc::default_options();
        let key = CacheKey::new(
            &[
                ("arch", format!("sm_{}", self.info.arch)),
                ("options", options.join(" ")),
                (
                    "nvrtc",
                    format!(
                        "{}.{}",
                        self.info.nvrtc_version.0, self.info.nvrtc_version.1
                    ),
                ),
                ("driver", self.info.driver_version.to_string()),
            ],
            source,
        );
        let (cubin, outcome) = self.cache.get_or_build(&key, || {
            nvrtc::compile_cubin(name, source, self.info.arch, &options)
        })?;
        let module = self
            .ctx
            .load_module(Ptx::from_binary(cubin))
            .map_err(cuda_err("loading the compiled module"))?;
        let report = ModuleReport {
            kernel: name.to_string(),
            outcome,
            seconds: t0.elapsed().as_secs_f64(),
        };
        modules.insert(name.to_string(), (module.clone(), report.clone()));
        Ok((module, report))
    }

    /// An entry point of a module.
    pub fn function(&self, module: &Arc<CudaModule>, entry: &str) -> Result<CudaFunction, Error> {
        module
            .load_function(entry)
            .map_err(|e| Error::Cuda(format!("entry point `{entry}` in the compiled module: {e}")))
    }

    pub(crate) fn tuned_shape(&self, key: &ShapeKey) -> Option<(u32, u32)> {
        self.shapes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
    }

    pub(crate) fn remember_shape(&self, key: ShapeKey, shape: (u32, u32)) {
        self.shapes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, shape);
    }
}
