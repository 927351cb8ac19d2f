//! Direct all-pairs summation on the CPU: every source to every target,
//! parallel over targets with rayon.

use rayon::prelude::*;

use crate::kernel::{Kernel, MAX_SLOTS};
use crate::outputs::Outputs;
use crate::particles::Particles;
use crate::real::Real;

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
