//! Floating-point operation counts per pairwise interaction.
//!
//! Two counts, as in yokota2009 Table 2: the plain count (every operation is
//! one flop, as nyland2007 counts its 20 flops of gravity), and a count
//! weighted by clock cycles relative to an add, with the weights of that
//! table (from the CUDA programming guide of the time): `+ - *` 1,
//! division 5, `sqrt` 4, `exp` 8, `erf` 8 (assumed equal to `exp` there).
//! Weights the table does not give: `rsqrt` 4 (like `sqrt`), `log` 8 (like
//! `exp`), `min`/`max` 1. Negation and `abs` are free (they become operand
//! modifiers on the GPU), and so are comparisons and selects, which are not
//! floating-point arithmetic.
//!
//! Only the work done per pair is counted: what depends on parameters or on
//! the target alone is hoisted out of the source loop by the emitters. Each
//! accumulation into an output component counts one add.

use std::collections::BTreeMap;

use crate::ir::{Func, Node, Op, Stage};
use crate::kernel::KernelDef;

/// Flop counts of one interaction.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FlopCount {
    /// Every operation counted as one flop.
    pub plain: u32,
    /// Operations weighted by their cost in clock cycles (yokota2009 Table 2).
    pub weighted: u32,
    /// How many of each operation, by name (`+`, `-`, `*`, `/`, `sqrt` ...).
    pub by_op: BTreeMap<&'static str, u32>,
}

impl std::fmt::Display for FlopCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} flops ({} weighted):", self.plain, self.weighted)?;
        for (op, n) in &self.by_op {
            write!(f, " {op} x{n}")?;
        }
        Ok(())
    }
}

/// Name and weight (cycles relative to an add) of an operation; `None` for
/// operations that are not counted.
fn cost(node: &Node) -> Option<(&'static str, u32)> {
    match node {
        Node::Binary(op, _, _) => Some(match op {
            Op::Add => ("+", 1),
            Op::Sub => ("-", 1),
            Op::Mul => ("*", 1),
            Op::Div => ("/", 5),
            Op::Min => ("min", 1),
            Op::Max => ("max", 1),
        }),
        Node::Unary(f, _) => match f {
            Func::Neg | Func::Abs => None,
            Func::Sqrt => Some(("sqrt", 4)),
            Func::Rsqrt => Some(("rsqrt", 4)),
            Func::Exp => Some(("exp", 8)),
            Func::Erf => Some(("erf", 8)),
            Func::Log => Some(("log", 8)),
        },
        _ => None,
    }
}

/// Counts the flops of one interaction of `def`.
pub fn count(def: &KernelDef) -> FlopCount {
    let g = &def.graph;
    let live = g.reachable(&def.contributions);
    let stages = g.stages();
    let mut fc = FlopCount::default();
    let mut add = |name: &'static str, w: u32| {
        fc.plain += 1;
        fc.weighted += w;
        *fc.by_op.entry(name).or_insert(0) += 1;
    };
    for (i, node) in g.nodes.iter().enumerate() {
        if !live[i] || stages[i] != Stage::Pair {
            continue;
        }
        // A negation at the root of a contribution becomes a subtraction
        // from the accumulator, and is not an operation of its own.
        if let Some((name, w)) = cost(node) {
            add(name, w);
        }
    }
    for &c in &def.contributions {
        if stages[c.index()] == Stage::Pair {
            let name = if matches!(g.node(c), Node::Unary(Func::Neg, _)) {
                "-"
            } else {
                "+"
            };
            add(name, 1);
        }
    }
    fc
}
