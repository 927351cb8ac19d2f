//! Device memory and launches: the helpers every GPU method uses, so that
//! allocation, copies and launch errors read the same everywhere.
//!
//! CUDA refuses empty allocations, so every array made here holds at least
//! one element; the counts passed with it say how many are meaningful.

use std::sync::Arc;

use cudarc::driver::{
    CudaSlice, CudaStream, DeviceRepr, DriverError, LaunchConfig, ValidAsZeroBits,
};

use crate::error::Error;

/// Threads per block of the one-thread-per-item kernels.
pub(crate) const BLOCK: u32 = 256;

/// Turns a driver error into ours, saying what was being done: the one
/// place CUDA errors are worded.
pub(crate) fn cuda_err(what: &str) -> impl Fn(DriverError) -> Error + Copy + '_ {
    move |e| Error::Cuda(format!("{what}: {e}"))
}

/// An allocation's error: out of memory says how many bytes were asked
/// for and how many were free, rather than only the driver's code.
fn alloc_err<T>(s: &Arc<CudaStream>, len: usize) -> impl Fn(DriverError) -> Error + '_ {
    move |e| {
        if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory {
                what: format!(
                    "an array of {len} {} on the device (the treecode and the FMM keep the \
                     whole problem there: use the CPU, or fewer particles)",
                    std::any::type_name::<T>()
                ),
                needed: len * std::mem::size_of::<T>(),
                available: s.context().mem_get_info().map_or(0, |(free, _)| free),
            }
        } else {
            Error::Cuda(format!("allocating device memory: {e}"))
        }
    }
}

/// At least one element (CUDA refuses empty allocations), uninitialised.
pub(crate) fn alloc<T: DeviceRepr>(s: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<T>, Error> {
    // SAFETY: every use below writes an element before any kernel reads it,
    // or reads only the elements it was told hold data.
    unsafe { s.alloc::<T>(len.max(1)) }.map_err(alloc_err::<T>(s, len))
}

pub(crate) fn zeros<T: DeviceRepr + ValidAsZeroBits>(
    s: &Arc<CudaStream>,
    len: usize,
) -> Result<CudaSlice<T>, Error> {
    s.alloc_zeros::<T>(len.max(1))
        .map_err(alloc_err::<T>(s, len))
}

/// `v` on the device (one default element when empty: CUDA refuses empty
/// allocations).
pub(crate) fn upload<T: DeviceRepr + Default + Clone>(
    s: &Arc<CudaStream>,
    v: &[T],
) -> Result<CudaSlice<T>, Error> {
    let one = [T::default()];
    let v = if v.is_empty() { &one[..] } else { v };
    s.clone_htod(v).map_err(cuda_err("copy to the device"))
}

/// The first `n` elements on the host (none for `n = 0`, without touching
/// the device), into memory first written on every core
/// ([`crate::memory`]).
pub(crate) fn download<T: DeviceRepr + Default + Copy + Send + Sync>(
    s: &Arc<CudaStream>,
    v: &CudaSlice<T>,
    n: usize,
) -> Result<Vec<T>, Error> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut out = crate::memory::touched(n);
    s.memcpy_dtoh(&v.slice(0..n), &mut out[..])
        .map_err(cuda_err("copy from the device"))?;
    Ok(out)
}

/// One block of [`BLOCK`] threads per `per_block` items, at least one
/// block.
pub(crate) fn blocks(n: usize, per_block: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(per_block).max(1) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One thread per item in blocks of `threads`, at least one block.
pub(crate) fn per_item(n: usize, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(threads as usize).max(1) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Launches `f` with the arguments in order. Scalars must be places (let
/// bindings), since the builder keeps references to them.
macro_rules! launch {
    ($s:expr, $f:expr, $cfg:expr, $what:literal; $($arg:expr),* $(,)?) => {{
        use cudarc::driver::PushKernelArg as _;
        let mut b = $s.launch_builder(&$f);
        $( b.arg($arg); )*
        // SAFETY: the arguments follow the entry point's signature in its
        // hand-written CUDA source, and every array is at least as long as
        // the counts passed with it say.
        unsafe { b.launch($cfg) }
            .map(|_| ())
            .map_err($crate::cuda::device::cuda_err(concat!("launching ", $what)))
    }};
}
pub(crate) use launch;

/// References to the three arrays of a position set.
pub(crate) fn refs3<T>(v: &[T; 3]) -> [&T; 3] {
    [&v[0], &v[1], &v[2]]
}

/// The device addresses of `arrays`, for a kernel that takes a table of
/// them (the L2P writes each output slot to an array of its own). The
/// arrays are used on this one stream only, so the kernel that writes
/// them is ordered after every earlier use.
pub(crate) fn device_addresses<T: DeviceRepr>(
    s: &Arc<CudaStream>,
    arrays: &mut [CudaSlice<T>],
) -> Vec<u64> {
    use cudarc::driver::DevicePtrMut;
    arrays
        .iter_mut()
        .map(|a| {
            let (ptr, _record) = a.device_ptr_mut(s);
            ptr
        })
        .collect()
}

/// The device addresses of `arrays`, for a kernel that reads a table of
/// them (the strength slots of a P2M, the target fields of an L2P); on
/// this one stream, as [`device_addresses`].
pub(crate) fn read_addresses<'a, T: DeviceRepr + 'a>(
    s: &Arc<CudaStream>,
    arrays: impl IntoIterator<Item = &'a CudaSlice<T>>,
) -> Vec<u64> {
    use cudarc::driver::DevicePtr;
    arrays
        .into_iter()
        .map(|a| {
            let (ptr, _record) = a.device_ptr(s);
            ptr
        })
        .collect()
}
