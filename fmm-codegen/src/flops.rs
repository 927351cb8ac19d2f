//! Floating-point operation counts per pairwise interaction.
//!
//! Two counts, as in yokota2009 Table 2: the plain count (every operation is
//! one flop, as nyland2007 counts its 20 flops of gravity), and a count
//! weighted by clock cycles relative to an add, with the weights of that
//! table (from the CUDA programming guide of the time): `+ - *` 1,
//! division 5; the built-in functions' counts are their rows'
//! ([`crate::builtins::Builtin::flops`] and `weighted`). Negation is free
//! (an operand modifier on the GPU), and so are comparisons and selects,
//! which are not floating-point arithmetic.
//!
//! Only the work done per pair is counted: what depends on parameters or on
//! the target alone is hoisted out of the source loop by the emitters. Each
//! accumulation into an output component counts one add.

use std::collections::BTreeMap;

use crate::ir::{Node, Op, Stage};
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

/// Name, plain count and weight (cycles relative to an add) of an
/// operation; `None` for operations that are not counted.
fn cost(node: &Node) -> Option<(&'static str, u32, u32)> {
    match node {
        Node::Binary(op, _, _) => Some(match op {
            Op::Add => ("+", 1, 1),
            Op::Sub => ("-", 1, 1),
            Op::Mul => ("*", 1, 1),
            Op::Div => ("/", 1, 5),
        }),
        Node::Call1(f, _) | Node::Call2(f, _, _) => {
            let row = f.row();
            (row.flops > 0).then_some((row.name, row.flops, row.weighted))
        }
        _ => None,
    }
}

/// Counts the flops of one interaction of `def`.
pub fn count(def: &KernelDef) -> FlopCount {
    let g = &def.graph;
    let live = g.reachable(&def.contributions);
    let stages = g.stages();
    let mut fc = FlopCount::default();
    let mut add = |name: &'static str, plain: u32, w: u32| {
        fc.plain += plain;
        fc.weighted += w;
        *fc.by_op.entry(name).or_insert(0) += 1;
    };
    for (i, node) in g.nodes.iter().enumerate() {
        if !live[i] || stages[i] != Stage::Pair {
            continue;
        }
        // A negation at the root of a contribution becomes a subtraction
        // from the accumulator, and is not an operation of its own.
        if let Some((name, plain, w)) = cost(node) {
            add(name, plain, w);
        }
    }
    for &c in &def.contributions {
        if stages[c.index()] == Stage::Pair {
            let name = if matches!(g.node(c), Node::Neg(_)) {
                "-"
            } else {
                "+"
            };
            add(name, 1, 1);
        }
    }
    fc
}
