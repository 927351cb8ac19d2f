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
