//! The cells' monopoles on the device (`monopole.cu`): the CPU's
//! [`super::pseudo_sources`] to the last bit but for the final rounding to
//! `R`. The treecode's walk reads them; the node far fields' upward pass
//! takes the cells' summed strengths from them.

use cudarc::driver::{CudaSlice, CudaView};

use super::PseudoSources;
use crate::cuda::device::{alloc, blocks, cuda_err, download, launch, upload, BLOCK};
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::kernel::MAX_SLOTS;
use crate::real::Real;
use crate::tree::DeviceOctree;

/// The module name the kernels are compiled and cached under.
pub const MODULE: &str = "fmm_far_monopole";

/// The source, with the constants it takes from here.
pub fn source() -> String {
    with_defines(&[("BLOCK", BLOCK as i64)], include_str!("monopole.cu"))
}

entry_points! {
    /// The entry points of `monopole.cu`.
    pub struct MonopoleOps {
        weight = "weight" per_precision,
        moments = "moments" per_precision,
        finish = "finish" per_precision,
    }
}

impl MonopoleOps {
    fn get<R: Real>(gpu: &Gpu) -> Result<Self, Error> {
        let (module, _) = gpu.module(MODULE, &source())?;
        Self::load::<R>(gpu, &module)
    }
}

/// The cells' pseudo-sources on the device, as the CPU treecode's
/// `pseudo_sources` makes them: per cell (depth-first order), the summed
/// strength at the centre of strength, the other slots averaged with the
/// strength's magnitude as weight (their plain mean where the cell has no
/// strength), and the square of the acceptance distance.
pub struct DevicePseudoSources<R> {
    pub n_cells: usize,
    pub n_slots: usize,
    /// Centre of strength, in `R` (the pseudo-source's position).
    pub pos: [CudaSlice<R>; 3],
    /// Slot `k` of cell `c` at `k * n_cells + c`.
    pub slots: CudaSlice<R>,
    /// Centre of strength in f64, for the acceptance test.
    pub com: [CudaSlice<f64>; 3],
    /// `(2 half / theta + delta)^2`, `delta` the offset of the centre of
    /// strength from the cell's centre (nakasato2009); infinite for
    /// `theta = 0`.
    pub accept2: CudaSlice<f64>,
}

impl<R: Real> DevicePseudoSources<R> {
    /// Slot `k` of every cell.
    pub fn slot(&self, k: usize) -> CudaView<'_, R> {
        self.slots.slice(k * self.n_cells..(k + 1) * self.n_cells)
    }

    pub fn to_host(&self, gpu: &Gpu) -> Result<PseudoSources<R>, Error> {
        let s = gpu.stream();
        let nc = self.n_cells;
        let pos = [
            download(s, &self.pos[0], nc)?,
            download(s, &self.pos[1], nc)?,
            download(s, &self.pos[2], nc)?,
        ];
        let all = download(s, &self.slots, self.n_slots * nc)?;
        let slots = all.chunks(nc.max(1)).map(<[R]>::to_vec).collect();
        let com_a = [
            download(s, &self.com[0], nc)?,
            download(s, &self.com[1], nc)?,
            download(s, &self.com[2], nc)?,
        ];
        let com = (0..nc)
            .map(|c| [com_a[0][c], com_a[1][c], com_a[2][c]])
            .collect();
        Ok(PseudoSources {
            pos,
            slots,
            com,
            accept2: download(s, &self.accept2, nc)?,
        })
    }
}

/// The pseudo-sources of `tree`'s cells from the sources in tree order
/// (positions and slots put there with [`DeviceOctree::gather`]; the first
/// `tree.n` elements are used): the device version of the CPU treecode's
/// `pseudo_sources`, with every sum accumulated in f64 in the CPU's order
/// (a leaf over its particles, an inner cell over its children), so the
/// two agree to the last bit but for the final rounding to `R`.
/// `strength` lists the slots that are the additive strength.
pub fn device_pseudo_sources<R: Real>(
    gpu: &Gpu,
    tree: &DeviceOctree<R>,
    pos: [&CudaSlice<R>; 3],
    slots: &[&CudaSlice<R>],
    strength: &[usize],
    theta: f64,
) -> Result<DevicePseudoSources<R>, Error> {
    let (n, nc, ns) = (tree.n, tree.n_cells, slots.len());
    if !(theta >= 0.0 && theta.is_finite()) {
        return Err(Error::BadOption(format!(
            "theta must be a finite number >= 0, not {theta}"
        )));
    }
    if ns > MAX_SLOTS {
        return Err(Error::BadOption(format!(
            "{ns} source slots given, at most {MAX_SLOTS} are supported"
        )));
    }
    if let Some(&bad) = strength.iter().find(|&&k| k >= ns) {
        return Err(Error::BadOption(format!(
            "strength slot {bad} given, but there are {ns} slots"
        )));
    }
    for (what, v) in pos
        .iter()
        .map(|p| ("source positions in tree order", p))
        .chain(slots.iter().map(|p| ("source slots in tree order", p)))
    {
        if v.len() < n {
            return Err(Error::LengthMismatch {
                what: what.into(),
                got: v.len(),
                expected: n,
            });
        }
    }
    let k = MonopoleOps::get::<R>(gpu)?;
    let s = gpu.stream();

    // The slots packed in one array: slot k at k * n.
    let mut packed = alloc::<R>(s, ns * n)?;
    if n > 0 {
        for (q, slot) in slots.iter().enumerate() {
            s.memcpy_dtod(&slot.slice(0..n), &mut packed.slice_mut(q * n..(q + 1) * n))
                .map_err(cuda_err("copy on the device"))?;
        }
    }
    let strength_i: Vec<i32> = strength.iter().map(|&q| q as i32).collect();
    let mask: u32 = strength.iter().fold(0, |m, &q| m | (1 << q));
    let d_strength = upload(
        s,
        if strength_i.is_empty() {
            &[0]
        } else {
            &strength_i
        },
    )?;
    let (ni, nci, nsi, nstr) = (n as i32, nc as i32, ns as i32, strength.len() as i32);

    let mut wpart = alloc::<f64>(s, n)?;
    if n > 0 {
        launch!(s, k.weight, blocks(n, BLOCK as usize), "weight";
            &ni, &packed, &nstr, &d_strength, &mut wpart)?;
    }

    let mut w = alloc::<f64>(s, nc)?;
    let mut wx = [
        alloc::<f64>(s, nc)?,
        alloc::<f64>(s, nc)?,
        alloc::<f64>(s, nc)?,
    ];
    let mut acc = alloc::<f64>(s, ns * nc)?;
    let mut plain = alloc::<f64>(s, ns * nc)?;
    for l in (0..tree.level_start.len() - 1).rev() {
        let m = tree.level_start[l + 1] - tree.level_start[l];
        let (mi, start) = (m as i32, tree.level_start[l] as i32);
        let [wxx, wxy, wxz] = &mut wx;
        launch!(s, k.moments, blocks(m, BLOCK as usize), "moments";
            &mi, &start, &tree.by_level, &nci, &tree.begin, &tree.end, &tree.more, &tree.next,
            pos[0], pos[1], pos[2], &ni, &packed, &nsi, &mask, &wpart,
            &mut w, wxx, wxy, wxz, &mut acc, &mut plain)?;
    }

    let mut out_pos = [alloc::<R>(s, nc)?, alloc::<R>(s, nc)?, alloc::<R>(s, nc)?];
    let mut com = [
        alloc::<f64>(s, nc)?,
        alloc::<f64>(s, nc)?,
        alloc::<f64>(s, nc)?,
    ];
    let mut out_slots = alloc::<R>(s, ns * nc)?;
    let mut accept2 = alloc::<f64>(s, nc)?;
    {
        let [ox, oy, oz] = &mut out_pos;
        let [cx, cy, cz] = &mut com;
        launch!(s, k.finish, blocks(nc, BLOCK as usize), "finish";
            &nci, &theta, &tree.center[0], &tree.center[1], &tree.center[2], &tree.half,
            &tree.begin, &tree.end, &w, &wx[0], &wx[1], &wx[2], &acc, &plain, &nsi, &mask,
            ox, oy, oz, cx, cy, cz, &mut out_slots, &mut accept2)?;
    }
    Ok(DevicePseudoSources {
        n_cells: nc,
        n_slots: ns,
        pos: out_pos,
        slots: out_slots,
        com,
        accept2,
    })
}
