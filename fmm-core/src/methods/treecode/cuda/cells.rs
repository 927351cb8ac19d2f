//! What the treecode's GPU walk reads besides the tree and the cells'
//! pseudo-sources (`crate::far::monopole::cuda`, or a node far field's):
//! each cell's children and geometry in the walk's precision, and the
//! target groups' bounding boxes (`cells.cu`).

use cudarc::driver::CudaSlice;

use crate::cuda::device::{alloc, blocks, launch, BLOCK};
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::real::Real;
use crate::tree::{DeviceGroups, DeviceOctree};

/// The module name the kernels are compiled and cached under.
pub const MODULE: &str = "fmm_treecode_cells";

/// The source, with the constants it takes from here.
pub fn source() -> String {
    with_defines(&[("BLOCK", BLOCK as i64)], include_str!("cells.cu"))
}

entry_points! {
    /// The entry points of `cells.cu`.
    pub struct Cells {
        children8 = "children8",
        to_real = "to_real" per_precision,
        group_box = "group_box" per_precision,
    }
}

impl Cells {
    fn get<R: Real>(gpu: &Gpu) -> Result<Self, Error> {
        let (module, _) = gpu.module(MODULE, &source())?;
        Self::load::<R>(gpu, &module)
    }
}

/// What the GPU walk reads of a source tree besides the links and ranges:
/// each cell's children (eight slots a cell) and its geometry in the
/// walk's precision (the acceptance distances depend on the far field:
/// [`WalkCells::accept2`]).
pub struct WalkCells<R> {
    /// `child[8 c + m]`: the `m`-th child of cell `c`.
    pub child: CudaSlice<i32>,
    pub center: [CudaSlice<R>; 3],
    pub half: CudaSlice<R>,
}

/// The cells of `tree` as the walk reads them.
pub fn walk_cells<R: Real>(gpu: &Gpu, tree: &DeviceOctree<R>) -> Result<WalkCells<R>, Error> {
    let k = Cells::get::<R>(gpu)?;
    let s = gpu.stream();
    let nc = tree.n_cells;
    let nci = nc as i32;
    let mut child = alloc::<i32>(s, 8 * nc)?;
    launch!(s, k.children8, blocks(nc, BLOCK as usize), "children8";
        &nci, &tree.more, &tree.next, &tree.n_children, &mut child)?;
    Ok(WalkCells {
        child,
        center: [
            to_real(gpu, &tree.center[0])?,
            to_real(gpu, &tree.center[1])?,
            to_real(gpu, &tree.center[2])?,
        ],
        half: to_real(gpu, &tree.half)?,
    })
}

impl<R: Real> WalkCells<R> {
    /// The squared acceptance distances `accept2` (f64, one a cell) in the
    /// walk's precision.
    pub fn accept2(&self, gpu: &Gpu, accept2: &CudaSlice<f64>) -> Result<CudaSlice<R>, Error> {
        to_real(gpu, accept2)
    }
}

/// `v` rounded to `R` on the device.
fn to_real<R: Real>(gpu: &Gpu, v: &CudaSlice<f64>) -> Result<CudaSlice<R>, Error> {
    let k = Cells::get::<R>(gpu)?;
    let s = gpu.stream();
    let n = v.len();
    let ni = n as i32;
    let mut out = alloc::<R>(s, n)?;
    launch!(s, k.to_real, blocks(n, BLOCK as usize), "to_real"; &ni, v, &mut out)?;
    Ok(out)
}

/// The bounding boxes of `groups`' targets (positions `pos` in tree
/// order): low corner x, y, z, high corner x, y, z.
pub fn group_boxes<R: Real>(
    gpu: &Gpu,
    groups: &DeviceGroups,
    pos: [&CudaSlice<R>; 3],
) -> Result<[CudaSlice<R>; 6], Error> {
    let k = Cells::get::<R>(gpu)?;
    let s = gpu.stream();
    let n = groups.n;
    let mut boxes = [
        alloc::<R>(s, n)?,
        alloc::<R>(s, n)?,
        alloc::<R>(s, n)?,
        alloc::<R>(s, n)?,
        alloc::<R>(s, n)?,
        alloc::<R>(s, n)?,
    ];
    if n > 0 {
        let ngi = n as i32;
        let [lx, ly, lz, hx, hy, hz] = &mut boxes;
        launch!(s, k.group_box, blocks(n, BLOCK as usize), "group_box";
            &ngi, &groups.begin, &groups.end, pos[0], pos[1], pos[2], lx, ly, lz, hx, hy, hz)?;
    }
    Ok(boxes)
}
