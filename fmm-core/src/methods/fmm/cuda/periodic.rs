//! The GPU FMM in a periodic box, the CPU's way ([`super::super::cpu`],
//! `docs/PERIODIC.md`): the points wrapped into the box on the device
//! (copies: the caller's arrays stay as given), the box the root cube of
//! both trees; the traversal, the M2L and the P2P lists against the
//! nearest images (a list entry names the image in its top bits,
//! [`crate::tree::traversal::IMAGE_BITS`], whose lattice shift [`Images`]
//! holds); the farther images and the boundary by the host's image
//! expansions ([`images::periodic_local`]) from the root's multipole, a
//! few kilobytes each way, into the target root's local expansion before
//! the L2L, so they reach every target through the L2L and the L2P.

use cudarc::driver::CudaSlice;

use crate::cuda::device::{alloc, cuda_err, download, launch, per_item, upload, zeros};
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::Gpu;
use crate::domain::{Moments, PeriodicBox};
use crate::error::Error;
use crate::far::laplace::harmonics::{degree, ncoef, C};
use crate::far::laplace::operators::{l2l, m2m, Scratch};
use crate::far::laplace::{background, images};
use crate::far::terms::{far_outputs, FarValues};
use crate::real::Real;
use crate::tree::morton::Bounds;
use fmm_codegen::kernel::FarTerm;
use fmm_codegen::KernelDef;

/// The module of `periodic.cu`.
pub const MODULE: &str = "fmm_periodic";

/// Most strength components (the FMM's expansions a cell).
const MAX_NQ: usize = 3;

/// The CUDA source of `periodic.cu`, with the constant it takes from here.
pub fn source() -> String {
    with_defines(
        &[("MOMENTS", 7 * MAX_NQ as i64 + 1)],
        include_str!("periodic.cu"),
    )
}

entry_points! {
    /// The entry points of `periodic.cu`.
    pub struct PeriodicOps {
        wrap = "fmm_wrap" per_precision,
        moments = "fmm_moments" per_precision,
        background = "fmm_background" per_precision,
        add = "fmm_add" per_precision,
        shifted = "fmm_shifted" per_precision,
    }
}

impl PeriodicOps {
    fn get<R: Real>(gpu: &Gpu) -> Result<Self, Error> {
        let (module, _) = gpu.module(MODULE, &source())?;
        Self::load::<R>(gpu, &module)
    }
}

/// The lattice shifts that list entries name, `x, y, z` an image: in f64
/// for the traversal and the M2L, in `R` for the P2P lists. Free space
/// has one image, of no shift.
pub(super) struct Images<R> {
    pub shift: CudaSlice<f64>,
    pub shift_real: CudaSlice<R>,
}

impl<R: Real> Images<R> {
    /// The nearest images of `pbox` (box first), or free space's one.
    pub fn of(gpu: &Gpu, pbox: Option<&PeriodicBox>) -> Result<Self, Error> {
        let v: Vec<f64> = PeriodicBox::near_shifts(pbox).concat();
        let r: Vec<R> = v.iter().map(|&x| R::c(x)).collect();
        let s = gpu.stream();
        Ok(Images {
            shift: upload(s, &v)?,
            shift_real: upload(s, &r)?,
        })
    }

    /// The image count.
    pub fn len(&self) -> usize {
        self.shift.len() / 3
    }
}

/// The box as a root cube: its centre and half side.
pub(super) fn root_cube(b: &PeriodicBox) -> Bounds {
    Bounds {
        center: b.center(),
        half: 0.5 * b.side,
    }
}

/// Copies of the points `pos` wrapped into `b` along its periodic axes; a
/// point off an open axis is an error naming it, as on the CPU
/// ([`PeriodicBox::wrap`]).
pub(crate) fn wrapped<R: Real>(
    gpu: &Gpu,
    b: &PeriodicBox,
    pos: [&CudaSlice<R>; 3],
) -> Result<[CudaSlice<R>; 3], Error> {
    let ops = PeriodicOps::get::<R>(gpu)?;
    let s = gpu.stream();
    let n = pos[0].len();
    let ni = n as i32;
    let mut out = [alloc::<R>(s, n)?, alloc::<R>(s, n)?, alloc::<R>(s, n)?];
    let mut outside = upload(s, &[ni; 3])?;
    let mask: i32 = (0..3).filter(|&a| b.axes[a]).map(|a| 1 << a).sum();
    let [o0, o1, o2] = b.origin;
    {
        let [w0, w1, w2] = &mut out;
        launch!(s, ops.wrap, per_item(n, 256), "fmm_wrap";
            &ni, pos[0], pos[1], pos[2], &o0, &o1, &o2, &b.side, &mask, w0, w1, w2,
            &mut outside)?;
    }
    let first = download(s, &outside, 3)?;
    if let Some(a) = (0..3).find(|&a| (first[a] as usize) < n) {
        let i = first[a] as usize;
        let x = s
            .clone_dtoh(&pos[a].slice(i..i + 1))
            .map_err(cuda_err("copy from the device"))?[0]
            .to_f64();
        return Err(b.outside(i, a, x));
    }
    Ok(out)
}

/// The sources' moments about the box's centre (box of side 1), `q` their
/// `nq` strength components (tree order, as `pos`): what the neutrality
/// check, the vacuum surface term and a slab's tail are made of.
pub(super) fn moments<R: Real>(
    gpu: &Gpu,
    b: &PeriodicBox,
    pos: &[CudaSlice<R>; 3],
    q: [&CudaSlice<R>; 3],
    nq: usize,
) -> Result<Moments, Error> {
    assert!(nq <= MAX_NQ);
    let ops = PeriodicOps::get::<R>(gpu)?;
    let s = gpu.stream();
    let n = pos[0].len();
    let (ni, nqi) = (n as i32, nq as i32);
    let mut out = zeros::<f64>(s, 7 * MAX_NQ + 1)?;
    let [cx, cy, cz] = b.center();
    let inv = 1.0 / b.side;
    let mut cfg = per_item(n, 256);
    cfg.grid_dim.0 = cfg.grid_dim.0.min(1024);
    launch!(s, ops.moments, cfg, "fmm_moments";
        &ni, &pos[0], &pos[1], &pos[2], &nqi, q[0], q[1], q[2], &cx, &cy, &cz, &inv, &mut out)?;
    let v = download(s, &out, 7 * nq + 1)?;
    let mut m = Moments {
        total: Vec::new(),
        dipole: Vec::new(),
        second: Vec::new(),
        second_axes: Vec::new(),
        scale: v[7 * nq],
    };
    for k in 0..nq {
        let w = &v[7 * k..7 * k + 7];
        m.total.push(w[0]);
        m.dipole.push([w[1], w[2], w[3]]);
        m.second_axes.push([w[4], w[5], w[6]]);
        m.second.push(w[4] + w[5] + w[6]);
    }
    Ok(m)
}

/// Adds a neutralising background's quadratic part
/// ([`background::quadratic`]; its harmonic part came with the far images)
/// to the outputs `out` at the targets `pos` (wrapped into `b`, in the
/// outputs' order): `a |d|^2 + b . d` an output, `d` about the box's
/// centre, `(a, b)` what the kernel's far `terms` (one scalar strength's
/// potential and gradient: [`background::check`]) make of the quadratic's
/// value and gradient, by [`far_outputs`] itself. Nothing without a
/// background.
pub(super) fn add_background<R: Real>(
    gpu: &Gpu,
    b: &PeriodicBox,
    m: &Moments,
    (def, terms): (&KernelDef, &[FarTerm]),
    pos: &[CudaSlice<R>; 3],
    out: &mut [CudaSlice<R>],
) -> Result<(), Error> {
    if !b.background {
        return Ok(());
    }
    let ops = PeriodicOps::get::<R>(gpu)?;
    let s = gpu.stream();
    let no = out.len();
    // The outputs of a unit potential and of a unit gradient along each axis.
    let unit = |phi: f64, axis: Option<usize>| {
        let mut v = FarValues::default();
        v.phi[0] = phi;
        if let Some(a) = axis {
            v.grad[0][a] = 1.0;
        }
        let mut o = vec![0.0; no];
        far_outputs(def, terms, 1, &v, |_| 0.0, &mut o);
        o
    };
    let of_phi = unit(1.0, None);
    let of_grad = [0, 1, 2].map(|a| unit(0.0, Some(a)));
    // The quadratic in the box's units: phi = kappa |d|^2, grad = 2 kappa d.
    let (kappa, _, _) = background::quadratic(m.total[0], [1.0, 0.0, 0.0]);
    let kappa = kappa / b.side.powi(3);
    let n = pos[0].len();
    let ni = n as i32;
    let [cx, cy, cz] = b.center();
    for (o, slot) in out.iter_mut().enumerate() {
        let a = kappa * of_phi[o];
        let [bx, by, bz] = [0, 1, 2].map(|x| 2.0 * kappa * of_grad[x][o]);
        if a == 0.0 && bx == 0.0 && by == 0.0 && bz == 0.0 {
            continue;
        }
        launch!(s, ops.background, per_item(n, 256), "fmm_background";
            &ni, &pos[0], &pos[1], &pos[2], &cx, &cy, &cz, &a, &bx, &by, &bz, slot)?;
    }
    Ok(())
}

/// `out += a`, elementwise.
pub(super) fn add<R: Real>(
    gpu: &Gpu,
    a: &CudaSlice<R>,
    out: &mut CudaSlice<R>,
) -> Result<(), Error> {
    let ops = PeriodicOps::get::<R>(gpu)?;
    let n = a.len();
    let ni = n as i32;
    launch!(gpu.stream(), ops.add, per_item(n, 256), "fmm_add"; &ni, a, out)
}

/// A copy of the points `pos` moved by `v` (a lattice shift).
pub(crate) fn shifted<R: Real>(
    gpu: &Gpu,
    pos: &[CudaSlice<R>; 3],
    v: [f64; 3],
) -> Result<[CudaSlice<R>; 3], Error> {
    let ops = PeriodicOps::get::<R>(gpu)?;
    let s = gpu.stream();
    let n = pos[0].len();
    let ni = n as i32;
    let mut out = [alloc::<R>(s, n)?, alloc::<R>(s, n)?, alloc::<R>(s, n)?];
    for (a, o) in out.iter_mut().enumerate() {
        launch!(s, ops.shifted, per_item(n, 256), "fmm_shifted"; &ni, &pos[a], &v[a], o)?;
    }
    Ok(out)
}

/// Where the run's expansions are: the roots' centres, the unit scale `u`
/// of the device's expansions (positions times `u`), the order and the
/// expansions a cell.
pub(super) struct Roots {
    pub source_center: [f64; 3],
    pub target_center: [f64; 3],
    pub u: f64,
    pub p: usize,
    pub nq: usize,
}

/// `x` in the box's units: about its centre, over its side.
pub(super) fn in_box(b: &PeriodicBox, x: [f64; 3]) -> [f64; 3] {
    let c = b.center();
    [0, 1, 2].map(|a| (x[a] - c[a]) / b.side)
}

/// The local expansion about the box's centre (box of side 1) of the
/// images past the nearest and the boundary's terms, for strength
/// component `k`, from the source root's multipole `root` as the device
/// keeps it (of positions times `u`, about `center`): `M_n` taken to the
/// box's units by `(u side)^-n`, moved to the box's centre, then
/// [`images::periodic_local`].
pub(super) fn far_local(
    b: &PeriodicBox,
    m: &Moments,
    levels: u32,
    k: usize,
    root: &[C],
    center: [f64; 3],
    u: f64,
) -> Vec<C> {
    let to_box = 1.0 / (u * b.side);
    let p = degree(root.len() - 1);
    let scaled: Vec<C> = root
        .iter()
        .enumerate()
        .map(|(i, v)| v.scale(to_box.powi(degree(i) as i32)))
        .collect();
    let mut centred = vec![C::ZERO; root.len()];
    m2m(
        &scaled,
        in_box(b, center),
        &mut Scratch::new(p),
        &mut centred,
    );
    images::periodic_local(&centred, p, b, m, k, levels)
}

/// Adds the farther images' and the boundary's local expansion of the
/// source root's multipoles (`mult`, the root cell first) to the target
/// root's local expansions (`local`, the root first), through the host:
/// the device's expansions are of positions times `u` about the roots'
/// centres, the host's of the box of side 1 about its centre, so each is
/// rescaled on the way (`R_n` is of degree `n`: a multipole's `M_n` takes
/// `(u side)^-n`, a local expansion's `L_n`, a potential, `(u side)^(n+1)`).
pub(super) fn add_far_images(
    gpu: &Gpu,
    b: &PeriodicBox,
    m: &Moments,
    levels: u32,
    roots: &Roots,
    mult: &CudaSlice<f64>,
    local: &mut CudaSlice<f64>,
) -> Result<(), Error> {
    let s = gpu.stream();
    let Roots { p, nq, u, .. } = *roots;
    let nc = ncoef(p);
    let to_box = 1.0 / (u * b.side);
    let flat = download(s, mult, 2 * nq * nc)?;
    let mut add = vec![0.0f64; 2 * nq * nc];
    let mut scratch = Scratch::new(p);
    for k in 0..nq {
        let root: Vec<C> = flat[2 * k * nc..2 * (k + 1) * nc]
            .chunks(2)
            .map(|w| C::new(w[0], w[1]))
            .collect();
        let far = far_local(b, m, levels, k, &root, roots.source_center, u);
        let mut at_root = vec![C::ZERO; nc];
        l2l(
            &far,
            in_box(b, roots.target_center),
            &mut scratch,
            &mut at_root,
        );
        for (i, v) in at_root.iter().enumerate() {
            let f = to_box.powi(degree(i) as i32 + 1);
            let o = 2 * (k * nc + i);
            add[o] = v.re * f;
            add[o + 1] = v.im * f;
        }
    }
    let mut root = download(s, local, 2 * nq * nc)?;
    for (x, a) in root.iter_mut().zip(&add) {
        *x += a;
    }
    s.memcpy_htod(&root, &mut local.slice_mut(0..2 * nq * nc))
        .map_err(cuda_err("copy to the device"))?;
    Ok(())
}
