//! What a whole kernel must satisfy, checked by evaluating its IR with the
//! f64 interpreter ([`crate::eval`]) on sample inputs.

use super::{err, Error};
use crate::ast::{KernelSpec, Stmt};
use crate::eval::{eval_pair, PairInputs};
use crate::kernel::KernelDef;

/// A kernel must add exactly zero when a source sits on the target
/// (r = 0), so that the self-interaction drops out of every sum and
/// coincident particles never produce NaN. Checked by evaluating the IR
/// at d = 0 with two sets of sample inputs.
pub(super) fn check_self_interaction(def: &KernelDef, spec: &KernelSpec) -> Result<(), Error> {
    for value in [0.75f64, 1.25] {
        let fill =
            |n: usize, base: f64| -> Vec<f64> { (0..n).map(|k| base + 0.125 * k as f64).collect() };
        let params = fill(def.n_params(), value);
        let target = fill(def.n_targets(), value * 0.9);
        let source = fill(def.n_sources(), value * 1.1);
        let pos = [0.3, -0.2, 0.5];
        let out = eval_pair(
            def,
            &PairInputs {
                params: &params,
                target_pos: pos,
                target: &target,
                source_pos: pos,
                source: &source,
            },
        );
        for f in &def.outputs {
            for (c, slot) in f.slot_names().iter().enumerate() {
                let v = out[f.offset + c];
                if v != 0.0 {
                    // Point at the first accumulation into this output.
                    let span = spec
                        .body
                        .iter()
                        .find_map(|s| match s {
                            Stmt::Accumulate { output, value, .. } if *output == f.name => {
                                Some(value.span())
                            }
                            _ => None,
                        })
                        .unwrap_or(spec.name_span);
                    return err(
                        span,
                        format!(
                            "when a source sits on the target (r = 0) this kernel adds a non-zero or non-finite value to `{slot}` \
                             ({v} for sample inputs); it must add exactly 0 \
                             (the self-interaction, and coincident particles). Guard the singular part, for example \
                             `select(r2 > 0.0, value, 0.0)`"
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Every contribution must be linear in the declared strength `q`:
/// `f(2 q) = 2 f(q)` and `f(q1 + q2) = f(q1) + f(q2)`. That is what makes
/// strengths add up: the treecode replaces a cell's sources by one source
/// carrying their summed strength (a monopole), and the FMM expands the
/// Laplace sum `sum_j q_j / r` of it. Checked on a few pairs of fixed
/// pseudo-random inputs (other fields and parameters in [0.5, 1.5], so
/// core radii and the like stay positive; strengths of either sign) to
/// 1e-9 relative. An output that is not finite for a sample (a `log` or
/// `sqrt` outside its domain) says nothing about linearity and is skipped.
pub(super) fn check_linear_in_strength(def: &KernelDef, spec: &KernelSpec) -> Result<(), Error> {
    let (Some(slots), Some(decl)) = (def.strength_slots(), &spec.strength) else {
        return Ok(());
    };
    let name = &decl.field;
    let mut rng = SplitMix64(0x5eed_1e57_0f11_7ea2);
    for _ in 0..4 {
        let mut uniform = |n: usize, lo: f64, hi: f64| -> Vec<f64> {
            (0..n).map(|_| lo + (hi - lo) * rng.next_f64()).collect()
        };
        let params = uniform(def.n_params(), 0.5, 1.5);
        let target = uniform(def.n_targets(), 0.5, 1.5);
        let base = uniform(def.n_sources(), 0.5, 1.5);
        let q1 = uniform(slots.len(), -1.0, 1.0);
        let q2 = uniform(slots.len(), -1.0, 1.0);
        let target_pos: [f64; 3] = uniform(3, -1.0, 1.0).try_into().expect("three");
        let source_pos: [f64; 3] = uniform(3, -1.0, 1.0).try_into().expect("three");
        // The contributions for strength `q` (the other source fields fixed).
        let f = |q: &[f64]| -> Vec<f64> {
            let mut source = base.clone();
            source[slots.clone()].copy_from_slice(q);
            eval_pair(
                def,
                &PairInputs {
                    params: &params,
                    target_pos,
                    target: &target,
                    source_pos,
                    source: &source,
                },
            )
        };
        let sum: Vec<f64> = q1.iter().zip(&q2).map(|(a, b)| a + b).collect();
        let twice: Vec<f64> = q1.iter().map(|a| 2.0 * a).collect();
        let (f1, f2, f12, f2q) = (f(&q1), f(&q2), f(&sum), f(&twice));
        for out in &def.outputs {
            for (c, slot) in out.slot_names().iter().enumerate() {
                let k = out.offset + c;
                let (a, b, ab, a2) = (f1[k], f2[k], f12[k], f2q[k]);
                if ![a, b, ab, a2].iter().all(|v| v.is_finite()) {
                    continue;
                }
                let scaled = (a2 - 2.0 * a).abs() > 1e-9 * (a2.abs() + 2.0 * a.abs());
                let added = (ab - (a + b)).abs() > 1e-9 * (ab.abs() + a.abs() + b.abs());
                if scaled || added {
                    let sample = if scaled {
                        format!("f(2 {name}) = {a2:.3e}, 2 f({name}) = {:.3e}", 2.0 * a)
                    } else {
                        format!(
                            "f({name}1 + {name}2) = {ab:.3e}, f({name}1) + f({name}2) = {:.3e}",
                            a + b
                        )
                    };
                    return err(
                        decl.span,
                        format!(
                            "the outputs are not linear in `{name}`: a strength must add up (the \
                             treecode lets a cell's summed strength stand for its sources, the \
                             FMM expands its sum), so what a source adds must satisfy \
                             f(2 {name}) = 2 f({name}) and f({name}1 + {name}2) = f({name}1) + \
                             f({name}2); `{slot}` does not ({sample} for sample inputs). Declare \
                             as the strength the field every output is proportional to, or \
                             declare none (direct summation only)"
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}

/// A small deterministic generator (splitmix64), so that the samples, and
/// therefore the verdict, are the same on every build.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}
