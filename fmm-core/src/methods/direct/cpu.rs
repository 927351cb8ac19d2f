//! Direct all-pairs summation on the CPU: every source to every target,
//! parallel over targets with rayon.

use rayon::prelude::*;

use crate::domain::PeriodicBox;
use crate::error::Error;
use crate::kernel::{Kernel, MAX_SLOTS};
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;
use crate::reference;
use crate::tree::soa::SoA;

/// Every source of `sources` to every target of `targets`, with the
/// parameters `p` (checked and converted by the front door). A source on a
/// target adds nothing (every kernel vanishes at r = 0, which the macro
/// checks).
pub(crate) fn run<K: Kernel, R: Real>(
    p: &[R],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Outputs<R> {
    let def = K::def();
    let no = def.n_outputs();
    let src = sources.source_slices();
    let mut aos = vec![R::zero(); targets.len() * no];
    if no > 0 {
        aos.par_chunks_mut(no).enumerate().for_each(|(i, out)| {
            let mut t = [R::zero(); MAX_SLOTS];
            targets.target_slots(i, &mut t);
            K::p2p_target(p, targets.position(i), &t, &src, 0..src.len(), out);
        });
    }
    let slots = (0..no)
        .map(|k| aos.iter().skip(k).step_by(no).copied().collect())
        .collect();
    Outputs::new(def.name.as_str(), &def.outputs, slots)
}

/// The seconds [`run`] is predicted to take for `targets` and `sources`:
/// a slice of the targets (about 2x10^6 pairs, a millisecond or two, and
/// at most a sixteenth of the targets) timed on one thread, scaled to all targets over rayon's threads. What the
/// direct sum costs depends on the kernel, the precision and this CPU's
/// vectors, so it is measured rather than tabled.
pub(crate) fn predicted_seconds<K: Kernel, R: Real>(
    p: &[R],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> f64 {
    let (m, n) = (targets.len(), sources.len());
    let no = K::def().n_outputs();
    if m == 0 || n == 0 || no == 0 {
        return 0.0;
    }
    let src = sources.source_slices();
    // At most a sixteenth of the targets: the slice runs on one thread.
    let k = (2_000_000 / n).clamp(1, 256).min(m / 16).max(1);
    let mut out = vec![R::zero(); no];
    let t = std::time::Instant::now();
    for s in 0..k {
        let i = s * m / k;
        let mut slots = [R::zero(); MAX_SLOTS];
        targets.target_slots(i, &mut slots);
        K::p2p_target(p, targets.position(i), &slots, &src, 0..n, &mut out);
    }
    std::hint::black_box(&out);
    let per_target = t.elapsed().as_secs_f64() / k as f64;
    per_target * m as f64 / rayon::current_num_threads() as f64
}

/// The direct sum in a box periodic along all three axes: every source and
/// all its images by the f64 Ewald sum ([`reference::ewald`]), at every
/// target. O(N^(3/2)) with the splitting balanced; the reference the other
/// methods are checked against, and a method for small N.
pub(crate) fn ewald<K: Kernel, R: Real>(
    params: &[f64],
    pbox: &PeriodicBox,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Outputs<R>, Error> {
    let def = K::def();
    let idx: Vec<usize> = (0..targets.len()).collect();
    let got =
        reference::ewald::ewald_at::<K, R>(params, pbox, targets, &idx, &sources.to_f64(None))?;
    let slots = got
        .into_iter()
        .map(|s| s.into_iter().map(R::c).collect())
        .collect();
    Ok(Outputs::new(def.name.as_str(), &def.outputs, slots))
}

/// The direct sum of a kernel with a cutoff `rc` in `pbox` by the
/// minimum image: each source at its image nearest the target along the
/// periodic axes, the pairs within `rc` summed (the kernel's own
/// truncation drops the rest); `rc` at most half the side, so no pair
/// meets twice ([`PeriodicBox::check_cutoff`]). Positions are wrapped
/// into the box in f64 and each pair's displacement folded there, so a
/// target anywhere sees the same sum. O(N^2), as the direct sum is.
pub(crate) fn minimum_image<K: Kernel, R: Real>(
    p: &[R],
    rc: f64,
    pbox: &PeriodicBox,
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Outputs<R>, Error> {
    let def = K::def();
    let no = def.n_outputs();
    let wrapped = |x: &Particles<R>| -> Result<[Vec<f64>; 3], Error> {
        let mut pos = x
            .positions()
            .map(|a| a.iter().map(|v| v.to_f64()).collect());
        pbox.wrap(&mut pos)?;
        Ok(pos)
    };
    let (tpos, spos) = (wrapped(targets)?, wrapped(sources)?);
    let (l, axes, rc2) = (pbox.side, pbox.axes, rc * rc);
    let n = sources.len();
    let mut aos = vec![R::zero(); targets.len() * no];
    aos.par_chunks_mut(no).enumerate().for_each_init(
        || SoA::<R>::with_capacity(sources.slots().len(), 256),
        |near, (i, out)| {
            near.clear();
            let x = [tpos[0][i], tpos[1][i], tpos[2][i]];
            for j in 0..n {
                let mut d = [0.0; 3];
                for a in 0..3 {
                    d[a] = x[a] - spos[a][j];
                    if axes[a] {
                        d[a] -= l * (d[a] / l).round();
                    }
                }
                if d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < rc2 {
                    for a in 0..3 {
                        near.pos[a].push(R::c(x[a] - d[a]));
                    }
                    for (s, f) in near.slots.iter_mut().zip(sources.slots()) {
                        s.push(f[j]);
                    }
                }
            }
            let mut t = [R::zero(); MAX_SLOTS];
            targets.target_slots(i, &mut t);
            let list = near.slices();
            K::p2p_target(p, x.map(R::c), &t, &list, 0..list.len(), out);
        },
    );
    let slots = (0..no)
        .map(|k| aos.iter().skip(k).step_by(no).copied().collect())
        .collect();
    Ok(Outputs::new(def.name.as_str(), &def.outputs, slots))
}
