//! A checked kernel: its layout (names and shapes of every slot) and the IR
//! of one pairwise interaction. This is the single source of truth the
//! emitters, the flop counter and the runtime read.

use crate::ast::Shape;
use crate::ir::{Graph, NodeId};

/// A named slot group: a parameter, a field or an output.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub shape: Shape,
    /// First flattened scalar slot of this field.
    pub offset: usize,
}

impl Field {
    /// The names of its scalar slots: `m`, or `acc_x`, `acc_y`, `acc_z`.
    pub fn slot_names(&self) -> Vec<String> {
        match self.shape {
            Shape::Scalar => vec![self.name.clone()],
            Shape::Vec3 => ["x", "y", "z"]
                .iter()
                .map(|c| format!("{}_{}", self.name, c))
                .collect(),
        }
    }
}

/// Total number of scalar slots of a list of fields.
pub fn slot_count(fields: &[Field]) -> usize {
    fields.iter().map(|f| f.shape.slots()).sum()
}

/// A Laplace quantity of `Phi(x_i) = sum_j q_j / |x_i - x_j|`.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Potential,
    Gradient,
    Curl,
    /// Stretching with the target vector field of this index in `targets`.
    Stretching(usize),
}

/// One output's far field: `outputs[output] = coefficient * term`.
#[derive(Clone, Debug, PartialEq)]
pub struct FarTerm {
    pub output: usize,
    pub coefficient: f64,
    pub term: Term,
}

/// How the far field of a kernel is represented.
#[derive(Clone, Debug, PartialEq)]
pub enum FarField {
    /// Direct summation and pseudo-particles only.
    None,
    /// Laplace expansions of the kernel's strength ([`KernelDef::strength`]).
    Laplace { terms: Vec<FarTerm> },
}

impl FarField {
    /// A short name for logs and tables.
    pub fn class_name(&self) -> &'static str {
        match self {
            FarField::None => "none",
            FarField::Laplace { terms } => {
                if terms.iter().any(|t| matches!(t.term, Term::Stretching(_))) {
                    "laplace-stretching"
                } else if terms.iter().any(|t| t.term == Term::Curl) {
                    "laplace-curl"
                } else {
                    "laplace-potential"
                }
            }
        }
    }
}

/// A kernel after checking and lowering.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelDef {
    /// The type name given in the declaration (`Gravity`).
    pub name: String,
    /// The doc comment of the declaration.
    pub doc: String,
    pub params: Vec<Field>,
    pub sources: Vec<Field>,
    pub targets: Vec<Field>,
    pub outputs: Vec<Field>,
    pub graph: Graph,
    /// What one source adds to each flattened output slot of one target.
    pub contributions: Vec<NodeId>,
    /// The additive source strength (`strength FIELD;`), an index into
    /// `sources`. Every contribution is linear in it (checked when the
    /// kernel is lowered), so a cell of sources acts from afar like one
    /// source carrying their summed strength: what the treecode needs, and
    /// what the FMM's expansions are expansions of.
    pub strength: Option<usize>,
    pub far_field: FarField,
    /// Conditions on the inputs, checked before every evaluation.
    pub requirements: Vec<Requirement>,
    /// `cutoff RC;`: the truncation radius, a value of the parameters (its
    /// truncation is in `contributions` already); `None`: long-range.
    pub cutoff: Option<Cutoff>,
}

/// `cutoff RC;` of a declaration: the radius, in a graph of its own over
/// the parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Cutoff {
    /// The radius as written (`rc`, `4.0 * sigma`).
    pub text: String,
    pub graph: Graph,
    pub root: NodeId,
}

impl Cutoff {
    /// The radius at the parameters `params`.
    pub fn radius(&self, params: &[f64]) -> f64 {
        let inputs = crate::eval::PairInputs {
            params,
            target_pos: [0.0; 3],
            target: &[],
            source_pos: [0.0; 3],
            source: &[],
        };
        crate::eval::eval_nodes(&self.graph, &inputs)[self.root.index()]
    }
}

/// `require COND;` of a declaration: a boolean over the parameters and the
/// fields of one side, in a graph of its own.
#[derive(Clone, Debug, PartialEq)]
pub struct Requirement {
    /// The condition as written (`sigma > 0.0`).
    pub text: String,
    pub graph: Graph,
    pub root: NodeId,
}

impl KernelDef {
    pub fn n_params(&self) -> usize {
        slot_count(&self.params)
    }

    pub fn n_sources(&self) -> usize {
        slot_count(&self.sources)
    }

    pub fn n_targets(&self) -> usize {
        slot_count(&self.targets)
    }

    pub fn n_outputs(&self) -> usize {
        slot_count(&self.outputs)
    }

    /// The flattened source slots of the strength (one for a scalar, three
    /// for a vec3), if the kernel declares one.
    pub fn strength_slots(&self) -> Option<std::ops::Range<usize>> {
        let f = &self.sources[self.strength?];
        Some(f.offset..f.offset + f.shape.slots())
    }

    /// The snake_case name used for generated symbols (`gravity`,
    /// `biot_savart`).
    pub fn symbol(&self) -> String {
        snake_case(&self.name)
    }
}

/// `BiotSavart` -> `biot_savart`, `Gravity` -> `gravity`.
pub fn snake_case(name: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower = i > 0 && chars[i - 1].is_lowercase();
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if i > 0 && (prev_lower || (next_lower && chars[i - 1].is_uppercase())) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn snake() {
        assert_eq!(snake_case("Gravity"), "gravity");
        assert_eq!(snake_case("BiotSavart"), "biot_savart");
        assert_eq!(snake_case("HuBiotSavart"), "hu_biot_savart");
        assert_eq!(snake_case("P2PKernel"), "p2p_kernel");
        assert_eq!(snake_case("already_snake"), "already_snake");
    }
}
