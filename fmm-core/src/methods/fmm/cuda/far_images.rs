//! A periodic box's images past the nearest at every target, for the
//! GPU's methods without a Laplace root expansion to carry them: the FMM
//! with node far fields and the treecode. The CPU's counterpart is
//! [`crate::far::laplace::far_images::FarImages`]: the sources' Laplace
//! multipole about the box's centre, the images' local expansion of it
//! ([`periodic::far_local`]: the boundary's terms and a background's
//! harmonic part in), its L2P at every target, and a background's
//! quadratic.

use cudarc::driver::CudaSlice;

use super::{l2p, periodic, unit_scale, upward, Ops, TermTable};
use crate::cuda::device::{alloc, upload, zeros};
use crate::cuda::Gpu;
use crate::domain::{Moments, PeriodicBox};
use crate::error::Error;
use crate::far::laplace::far_images::{image_levels, image_terms};
use crate::far::laplace::harmonics::ncoef;
use crate::kernel::Kernel;
use crate::real::Real;
use crate::tree::DeviceOctree;
use fmm_codegen::kernel::FarTerm;

/// What the far images need of the sources: the kernel's Laplace
/// strengths and terms, and the cell's moments, its neutrality (or
/// background) checked before any more work.
pub(crate) struct ImageSources {
    strength: Vec<usize>,
    terms: Vec<FarTerm>,
    moments: Moments,
}

impl ImageSources {
    /// Of the sources at `pos` with field slots `slots` (one order), for
    /// `method` (named where the kernel has no Laplace far field).
    pub(crate) fn of<K: Kernel, R: Real>(
        gpu: &Gpu,
        b: &PeriodicBox,
        (pos, slots): (&[CudaSlice<R>; 3], &[CudaSlice<R>]),
        method: &str,
    ) -> Result<Self, Error> {
        let def = K::def();
        let (strength, terms) = image_terms::<K>(b, method)?;
        let nq = strength.len();
        let q = |k: usize| &slots[strength[k.min(nq - 1)]];
        let moments = periodic::moments::<R>(gpu, b, pos, [q(0), q(1), q(2)], nq)?;
        super::super::check_neutral(b, &moments, def, &terms, nq)?;
        Ok(ImageSources {
            strength,
            terms,
            moments,
        })
    }
}

/// The sources' side: their tree, and its points and field slots in its
/// order.
pub(crate) type SourceSide<'a, R> = (
    &'a DeviceOctree<R>,
    &'a [CudaSlice<R>; 3],
    &'a [CudaSlice<R>],
);

/// The targets' side: their points and field slots (one order, that of
/// `out`) and the centre their expansion is taken about.
pub(crate) type TargetSide<'a, R> = (&'a [CudaSlice<R>; 3], &'a [CudaSlice<R>], [f64; 3]);

/// Adds the images past the nearest of the sources `src` (described by
/// `images`, multipoles of order `order`) to `out` at the targets `tgt`:
/// P2M and M2M up the source tree, the root's images' local expansion
/// on the host, one L2P at every target, and a background's quadratic.
pub(crate) fn far_images_at_targets<K: Kernel, R: Real>(
    gpu: &Gpu,
    b: &PeriodicBox,
    (order, images): (usize, &ImageSources),
    (stree, spos, sslots): SourceSide<'_, R>,
    (tpos, tslots, tcenter): TargetSide<'_, R>,
    out: &mut [CudaSlice<R>],
) -> Result<(), Error> {
    let def = K::def();
    let s = gpu.stream();
    let nq = images.strength.len();
    let nc = ncoef(order);
    let q = |k: usize| &sslots[images.strength[k.min(nq - 1)]];
    let ops = Ops::get::<R>(gpu, order)?;
    let u = unit_scale(stree.bounds.half);
    let mult = upward(gpu, &ops, (stree, spos), [q(0), q(1), q(2)], nq, nc, u)?;
    let roots = periodic::Roots {
        source_center: stree.bounds.center,
        target_center: tcenter,
        u,
        p: order,
        nq,
    };
    // The images' local expansion as the targets' one cell's.
    let mut local = zeros::<f64>(s, 2 * nq * nc)?;
    let levels = image_levels(b);
    periodic::add_far_images(gpu, b, &images.moments, levels, &roots, &mult, &mut local)?;
    drop(mult);
    let m = tpos[0].len();
    let leaf_of = zeros::<i32>(s, m)?;
    let center: Vec<CudaSlice<f64>> = (0..3)
        .map(|a| upload(s, &[tcenter[a]]))
        .collect::<Result<_, _>>()?;
    let mut far: Vec<CudaSlice<R>> = (0..out.len())
        .map(|_| alloc::<R>(s, m))
        .collect::<Result<_, _>>()?;
    let table = TermTable::of(def, &images.terms)?;
    let cells = (&leaf_of, [&center[0], &center[1], &center[2]]);
    l2p(
        gpu,
        &ops,
        &table,
        (tpos, tslots),
        cells,
        (&local, nq, u),
        &mut far,
    )?;
    for (o, f) in out.iter_mut().zip(&far) {
        periodic::add(gpu, f, o)?;
    }
    periodic::add_background(gpu, b, &images.moments, (def, &images.terms), tpos, out)
}
