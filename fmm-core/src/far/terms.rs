//! The outputs a kernel's declared Laplace terms (`far_field laplace {
//! .. }`) make of the harmonic potentials of its strengths: what the FMM's
//! L2P, the Ewald sum and the periodic boxes' surface terms share, so the
//! terms are read in one place.

use fmm_codegen::kernel::{FarTerm, Term};

/// What L2P gives at one target for each of the (up to 3) expansions.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FarValues {
    pub phi: [f64; 3],
    pub grad: [[f64; 3]; 3],
    /// Second derivatives, where a term needs them.
    pub hess: [[[f64; 3]; 3]; 3],
}

/// The far-field outputs of one target from the L2P values of its `nq`
/// expansions, by the declared terms; `target(slot)` reads the target's
/// field slots (the vector of a stretching term).
#[allow(clippy::needless_range_loop)] // axes index several arrays at once
pub(crate) fn far_outputs(
    def: &fmm_codegen::KernelDef,
    terms: &[FarTerm],
    nq: usize,
    x: &FarValues,
    target: impl Fn(usize) -> f64,
    out: &mut [f64],
) {
    let (g, h) = (&x.grad, &x.hess);
    for t in terms {
        let o = def.outputs[t.output].offset;
        let c = t.coefficient;
        match t.term {
            Term::Potential => {
                for k in 0..nq {
                    out[o + k] += c * x.phi[k];
                }
            }
            Term::Gradient => {
                for a in 0..3 {
                    out[o + a] += c * g[0][a];
                }
            }
            Term::Curl => {
                out[o] += c * (g[2][1] - g[1][2]);
                out[o + 1] += c * (g[0][2] - g[2][0]);
                out[o + 2] += c * (g[1][0] - g[0][1]);
            }
            // (alpha_i . grad) curl psi
            Term::Stretching(ti) => {
                let f = def.targets[ti].offset;
                for b in 0..3 {
                    let ab = c * target(f + b);
                    out[o] += ab * (h[2][b][1] - h[1][b][2]);
                    out[o + 1] += ab * (h[0][b][2] - h[2][b][0]);
                    out[o + 2] += ab * (h[1][b][0] - h[0][b][1]);
                }
            }
        }
    }
}
