//! The `require COND;` checks of a kernel declaration, run on the inputs
//! before an evaluation (a negative core radius is an error that names the
//! particle, not a velocity with the wrong sign).

use fmm_codegen::eval::{eval_nodes_into, PairInputs};
use fmm_codegen::ir::{Node, Stage};
use fmm_codegen::{Field, KernelDef};

use rayon::prelude::*;

use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;

/// `name = value` for the slots of `fields` a requirement reads.
fn describe(
    graph: &fmm_codegen::ir::Graph,
    fields: &[Field],
    values: &[f64],
    source: bool,
) -> String {
    let mut parts = Vec::new();
    for f in fields {
        for (c, name) in f.slot_names().iter().enumerate() {
            let k = (f.offset + c) as u16;
            let leaf = if source { Node::Src(k) } else { Node::Tgt(k) };
            if graph.nodes.contains(&leaf) {
                parts.push(format!("{name} = {}", values[k as usize]));
            }
        }
    }
    parts.join(", ")
}

/// Checks every requirement of `K` on the parameters and particles.
pub fn check_requirements<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<(), Error> {
    let def: &KernelDef = K::def();
    for r in &def.requirements {
        let fail = |what: String| Error::Requirement {
            kernel: def.name.clone(),
            requirement: r.text.clone(),
            what,
        };
        let holds = |target: &[f64], source: &[f64], buffer: &mut Vec<f64>| {
            let inputs = PairInputs {
                params,
                target_pos: [0.0; 3],
                target,
                source_pos: [0.0; 3],
                source,
            };
            eval_nodes_into(&r.graph, &inputs, buffer);
            buffer[r.root.index()] != 0.0
        };
        let nt = def.n_targets();
        let ns = def.n_sources();
        // The first particle of `p` (in `role`'s layout) where the
        // requirement fails, all cores on chunks of particles: it is
        // interpreted from the IR, about 20 ns a particle.
        let first_failing = |p: &Particles<R>, role: Stage| -> Option<(usize, Vec<f64>)> {
            const CHUNK: usize = 1 << 14;
            (0..p.len().div_ceil(CHUNK))
                .into_par_iter()
                .find_map_first(|c| {
                    let mut buffer = Vec::with_capacity(r.graph.nodes.len());
                    let (zeros_t, zeros_s) = (vec![0.0; nt], vec![0.0; ns]);
                    let mut v = vec![0.0; p.slots().len()];
                    for j in c * CHUNK..((c + 1) * CHUNK).min(p.len()) {
                        for (k, slot) in p.slots().iter().enumerate() {
                            v[k] = slot[j].to_f64();
                        }
                        let ok = match role {
                            Stage::Source => holds(&zeros_t, &v, &mut buffer),
                            _ => holds(&v, &zeros_s, &mut buffer),
                        };
                        if !ok {
                            return Some((j, v));
                        }
                    }
                    None
                })
        };
        match r.graph.stage(r.root) {
            Stage::Source => {
                if let Some((j, s)) = first_failing(sources, Stage::Source) {
                    return Err(fail(format!(
                        "source {j} has {}",
                        describe(&r.graph, &def.sources, &s, true)
                    )));
                }
            }
            Stage::Target => {
                if let Some((i, t)) = first_failing(targets, Stage::Target) {
                    return Err(fail(format!(
                        "target {i} has {}",
                        describe(&r.graph, &def.targets, &t, false)
                    )));
                }
            }
            _ => {
                if !holds(&vec![0.0; nt], &vec![0.0; ns], &mut Vec::new()) {
                    let values: Vec<String> = def
                        .params
                        .iter()
                        .flat_map(|f| f.slot_names())
                        .zip(params)
                        .map(|(n, v)| format!("{n} = {v}"))
                        .collect();
                    return Err(fail(format!("the parameters are {}", values.join(", "))));
                }
            }
        }
    }
    Ok(())
}
