//! The GPU primitives every method uses (`primitives.cu`): the one prefix
//! scan, of 32- or 64-bit counts, the moves into tree order and back,
//! the conversion to f64 and a sum.

use cudarc::driver::{CudaSlice, CudaView, DeviceRepr, PushKernelArg, ValidAsZeroBits};

use super::device::{alloc, blocks, launch, BLOCK};
use super::module::{entry_points, with_defines};
use super::Gpu;
use crate::error::Error;
use crate::real::Real;

/// Items a thread of the scan takes.
const SCAN_ITEMS: usize = 4;
/// Items a block of the scan takes.
const SCAN_TILE: usize = BLOCK as usize * SCAN_ITEMS;

/// The module's name in the cache.
pub const MODULE: &str = "fmm_primitives";

/// The source, with the constants it takes from here.
pub fn source() -> String {
    with_defines(
        &[("BLOCK", BLOCK as i64), ("SCAN_ITEMS", SCAN_ITEMS as i64)],
        include_str!("primitives.cu"),
    )
}

entry_points! {
    /// The entry points of `primitives.cu` (the sum is MPI's alone).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub struct Primitives {
        scan_tiles_u32 = "scan_tiles_u32",
        scan_add_u32 = "scan_add_u32",
        scan_tiles_u64 = "scan_tiles_u64",
        scan_add_u64 = "scan_add_u64",
        gather = "gather" per_precision,
        gather_u32 = "gather_u32",
        gather_i32 = "gather_i32",
        scatter = "scatter" per_precision,
        widen = "widen" per_precision,
        add_into = "add_into" per_precision,
        mirror = "mirror" per_precision,
        first_below = "first_below" per_precision,
    }
}

impl Primitives {
    /// The primitives in precision `R` (compiled once per process, then
    /// from this process's modules).
    pub(crate) fn get<R: Real>(gpu: &Gpu) -> Result<Self, Error> {
        let (module, _) = gpu.module(MODULE, &source())?;
        Self::load::<R>(gpu, &module)
    }
}

/// A count type the scan takes.
pub(crate) trait Count: DeviceRepr + ValidAsZeroBits + Copy + Default {
    /// `(scan_tiles, scan_add)` of this type.
    fn entries(p: &Primitives) -> (&cudarc::driver::CudaFunction, &cudarc::driver::CudaFunction);
}

impl Count for u32 {
    fn entries(p: &Primitives) -> (&cudarc::driver::CudaFunction, &cudarc::driver::CudaFunction) {
        (&p.scan_tiles_u32, &p.scan_add_u32)
    }
}

impl Count for u64 {
    fn entries(p: &Primitives) -> (&cudarc::driver::CudaFunction, &cudarc::driver::CudaFunction) {
        (&p.scan_tiles_u64, &p.scan_add_u64)
    }
}

/// Exclusive prefix scan of the first `n` elements of `data`, in place
/// (hu2011's bookmarks): tiles scanned, then the tiles' sums scanned the
/// same way and added back. To get the total, scan `n + 1` elements with
/// the last 0: it receives the total.
pub(crate) fn scan<T: Count>(gpu: &Gpu, data: &mut CudaSlice<T>, n: usize) -> Result<(), Error> {
    let p = Primitives::get::<f32>(gpu)?;
    scan_with(gpu, &p, data, n)
}

fn scan_with<T: Count>(
    gpu: &Gpu,
    p: &Primitives,
    data: &mut CudaSlice<T>,
    n: usize,
) -> Result<(), Error> {
    if n == 0 {
        return Ok(());
    }
    let s = gpu.stream();
    let (tiles, add) = T::entries(p);
    let nb = n.div_ceil(SCAN_TILE);
    let mut sums = alloc::<T>(s, nb)?;
    let ni = n as i64;
    launch!(s, tiles, blocks(n, SCAN_TILE), "scan_tiles"; &ni, &mut *data, &mut sums)?;
    if nb > 1 {
        scan_with(gpu, p, &mut sums, nb)?;
        launch!(s, add, blocks(n, SCAN_TILE), "scan_add"; &ni, &mut *data, &sums)?;
    }
    Ok(())
}

/// The total of a scan of `n + 1` elements (entry `n`).
pub(crate) fn scanned_total<T: Count>(
    gpu: &Gpu,
    data: &CudaSlice<T>,
    n: usize,
) -> Result<T, Error> {
    Ok(gpu
        .stream()
        .clone_dtoh(&data.slice(n..n + 1))
        .map_err(super::device::cuda_err("copy from the device"))?[0])
}

/// `x` (input order) in tree order: `out[k] = x[order[k]]`, `n` values.
pub(crate) fn gather<R: Real>(
    gpu: &Gpu,
    order: &CudaSlice<u32>,
    x: &CudaSlice<R>,
    n: usize,
) -> Result<CudaSlice<R>, Error> {
    let p = Primitives::get::<R>(gpu)?;
    reorder(gpu, &p.gather, "gather", order, x, n)
}

/// `out[k] = x[order[k]]` for `n` indices `order` into `x`, of indices.
pub(crate) fn gather_u32(
    gpu: &Gpu,
    order: &CudaSlice<u32>,
    x: &CudaSlice<u32>,
    n: usize,
) -> Result<CudaSlice<u32>, Error> {
    let p = Primitives::get::<f32>(gpu)?;
    reorder(gpu, &p.gather_u32, "gather_u32", order, x, n)
}

/// `out[k] = x[order[k]]` for `n` indices `order` into `x`, of a tree's
/// cell fields (begins, ends, children).
pub(crate) fn gather_i32(
    gpu: &Gpu,
    order: &CudaSlice<u32>,
    x: &CudaSlice<i32>,
    n: usize,
) -> Result<CudaSlice<i32>, Error> {
    let p = Primitives::get::<f32>(gpu)?;
    reorder(gpu, &p.gather_i32, "gather_i32", order, x, n)
}

/// `x` (tree order) back in input order: `out[order[k]] = x[k]`, `n`
/// values.
pub(crate) fn scatter<R: Real>(
    gpu: &Gpu,
    order: &CudaSlice<u32>,
    x: &CudaSlice<R>,
    n: usize,
) -> Result<CudaSlice<R>, Error> {
    let p = Primitives::get::<R>(gpu)?;
    reorder(gpu, &p.scatter, "scatter", order, x, n)
}

/// `n` values of `x` moved by `order` with `f` (gather or scatter).
fn reorder<T: DeviceRepr>(
    gpu: &Gpu,
    f: &cudarc::driver::CudaFunction,
    what: &'static str,
    order: &CudaSlice<u32>,
    x: &CudaSlice<T>,
    n: usize,
) -> Result<CudaSlice<T>, Error> {
    let s = gpu.stream();
    let mut out = alloc::<T>(s, n)?;
    if n > 0 {
        let ni = n as i64;
        let mut b = s.launch_builder(f);
        b.arg(&ni).arg(order).arg(x).arg(&mut out);
        // SAFETY: gather_*/scatter_*(n, order, in, out) of primitives.cu;
        // `order` holds n indices of `x` (a permutation of 0..n for the
        // moves into and out of tree order), `out` n values.
        unsafe { b.launch(blocks(n, BLOCK as usize)) }.map_err(super::device::cuda_err(what))?;
    }
    Ok(out)
}

/// `y += x` over their first `n` values (outputs of two sets of sources
/// added on the device).
pub(crate) fn add_into<R: Real>(
    gpu: &Gpu,
    x: &CudaSlice<R>,
    y: &mut CudaSlice<R>,
    n: usize,
) -> Result<(), Error> {
    if n == 0 {
        return Ok(());
    }
    let p = Primitives::get::<R>(gpu)?;
    let s = gpu.stream();
    let ni = n as i64;
    launch!(s, p.add_into, blocks(n, BLOCK as usize), "add_into"; &ni, x, y)
}

/// The first `n` values of `x` in f64.
pub(crate) fn widen<R: Real>(
    gpu: &Gpu,
    x: &CudaView<'_, R>,
    n: usize,
) -> Result<CudaSlice<f64>, Error> {
    let p = Primitives::get::<R>(gpu)?;
    let s = gpu.stream();
    let mut out = alloc::<f64>(s, n)?;
    if n > 0 {
        let ni = n as i64;
        launch!(s, p.widen, blocks(n, BLOCK as usize), "widen"; &ni, x, &mut out)?;
    }
    Ok(out)
}

/// The `n` values of `x` followed by `scale * x + shift`: a wall's
/// images of a coordinate or a field.
pub(crate) fn mirror<R: Real>(
    gpu: &Gpu,
    x: &CudaSlice<R>,
    n: usize,
    scale: f64,
    shift: f64,
) -> Result<CudaSlice<R>, Error> {
    let p = Primitives::get::<R>(gpu)?;
    let s = gpu.stream();
    let mut out = alloc::<R>(s, 2 * n)?;
    if n > 0 {
        let (ni, scale, shift) = (n as i64, R::c(scale), R::c(shift));
        launch!(s, p.mirror, blocks(n, BLOCK as usize), "mirror"; &ni, x, &scale, &shift, &mut out)?;
    }
    Ok(out)
}

/// The least index of the first `n` values of `x` below `at` (or not a
/// number), if any: a point below a wall.
pub(crate) fn first_below<R: Real>(
    gpu: &Gpu,
    x: &CudaSlice<R>,
    n: usize,
    at: f64,
) -> Result<Option<usize>, Error> {
    if n == 0 {
        return Ok(None);
    }
    let p = Primitives::get::<R>(gpu)?;
    let s = gpu.stream();
    let ni = n as i64;
    let mut first = super::device::upload(s, &[ni])?;
    launch!(s, p.first_below, blocks(n, BLOCK as usize), "first_below"; &ni, x, &at, &mut first)?;
    let i = super::device::download(s, &first, 1)?[0];
    Ok((i < ni).then_some(i as usize))
}
