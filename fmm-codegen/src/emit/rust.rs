//! The Rust emitter: the CPU evaluator of a kernel.
//!
//! It writes one generic function, `p2p_target`, that adds the interaction
//! of a run of sources to one target. It is generic over the runtime's
//! `Real` trait, so one emission serves f32 and f64. The loop over sources
//! is the runtime's `sum_sources`, which keeps several independent partial
//! sums (so the compiler can vectorise across sources) and sums in blocks
//! (so that f32 keeps its accuracy over long sums); the emitted closure is
//! the interaction of one pair, with everything that depends only on the
//! parameters and the target computed before the loop.

use super::{float_literal, Schedule, Syntax};
use crate::ir::{Func, Node, Op, Stage};
use crate::kernel::KernelDef;

struct RustSyntax<'a> {
    def: &'a KernelDef,
}

impl Syntax for RustSyntax<'_> {
    fn literal(&self, c: f64) -> String {
        format!("R::c({})", float_literal(c))
    }

    fn leaf(&self, node: Node) -> String {
        leaf_name(self.def, node)
    }

    fn func(&self, f: Func, a: &str) -> String {
        let name = match f {
            Func::Neg => return format!("-{a}"),
            Func::Sqrt => "sqrt",
            Func::Rsqrt => "rsqrt",
            Func::Exp => "exp",
            Func::Erf => "erf",
            Func::Log => "ln",
            Func::Abs => "abs",
        };
        format!("R::{name}({a})")
    }

    fn min_max(&self, op: Op, a: &str, b: &str) -> String {
        let name = if op == Op::Min { "min" } else { "max" };
        format!("R::{name}({a}, {b})")
    }

    fn select(&self, c: &str, a: &str, b: &str) -> String {
        format!("R::select({c}, {a}, {b})")
    }
}

/// The variable name of a leaf in generated code (shared with CUDA, whose
/// names are the same so the two read alike).
pub(crate) fn leaf_name(def: &KernelDef, node: Node) -> String {
    let slot = |fields: &[crate::kernel::Field], k: u16, prefix: &str| {
        for f in fields {
            let k = k as usize;
            if k >= f.offset && k < f.offset + f.shape.slots() {
                return format!("{prefix}_{}", f.slot_names()[k - f.offset]);
            }
        }
        unreachable!("slot {k} is in the layout")
    };
    let axis = |c: u8| ["x", "y", "z"][c as usize];
    match node {
        Node::Param(k) => slot(&def.params, k, "p"),
        Node::Src(k) => slot(&def.sources, k, "s"),
        Node::Tgt(k) => slot(&def.targets, k, "t"),
        Node::SrcPos(c) => format!("{}_j", axis(c)),
        Node::TgtPos(c) => format!("{}_i", axis(c)),
        _ => unreachable!("not a leaf"),
    }
}

/// Emits `fn p2p_target`, with `core` the path of the runtime crate (for
/// example `::fmm_core`).
pub fn emit_p2p_target(def: &KernelDef, core: &str) -> String {
    let sch = Schedule::new(def);
    let syn = RustSyntax { def };
    let no = def.n_outputs();
    let mut o = String::new();
    o.push_str("#[inline]\n#[allow(unused_variables, clippy::all)]\n");
    o.push_str(&format!(
        "fn p2p_target<R: {core}::Real>(p: &[R], xi: [R; 3], t: &[R], src: {core}::SourceSlices<'_, R>, out: &mut [R]) {{\n"
    ));
    // Loads of parameters and target values.
    for f in &def.params {
        for (c, name) in f.slot_names().iter().enumerate() {
            if sch.uses_leaf(Node::Param((f.offset + c) as u16)) {
                o.push_str(&format!("    let p_{name} = p[{}];\n", f.offset + c));
            }
        }
    }
    for (c, axis) in ["x", "y", "z"].iter().enumerate() {
        if sch.uses_leaf(Node::TgtPos(c as u8)) {
            o.push_str(&format!("    let {axis}_i = xi[{c}];\n"));
        }
    }
    for f in &def.targets {
        for (c, name) in f.slot_names().iter().enumerate() {
            if sch.uses_leaf(Node::Tgt((f.offset + c) as u16)) {
                o.push_str(&format!("    let t_{name} = t[{}];\n", f.offset + c));
            }
        }
    }
    for stage in [Stage::Param, Stage::Target] {
        for id in sch.temps(stage) {
            o.push_str(&format!(
                "    let {} = {};\n",
                sch.temp_name(id),
                sch.body(&syn, id)
            ));
        }
    }
    // Source slices cut to one length, so the loop has no bounds checks.
    o.push_str("    let n = src.len();\n");
    for (c, axis) in ["x", "y", "z"].iter().enumerate() {
        if sch.uses_leaf(Node::SrcPos(c as u8)) {
            o.push_str(&format!("    let {axis}s = &src.pos[{c}][..n];\n"));
        }
    }
    for f in &def.sources {
        for (c, name) in f.slot_names().iter().enumerate() {
            if sch.uses_leaf(Node::Src((f.offset + c) as u16)) {
                o.push_str(&format!(
                    "    let sl_{name} = &src.fields[{}][..n];\n",
                    f.offset + c
                ));
            }
        }
    }
    o.push_str(&format!(
        "    let sums = {core}::sum_sources::<R, {no}>(n, |j| {{\n"
    ));
    for (c, axis) in ["x", "y", "z"].iter().enumerate() {
        if sch.uses_leaf(Node::SrcPos(c as u8)) {
            o.push_str(&format!("        let {axis}_j = {axis}s[j];\n"));
        }
    }
    for f in &def.sources {
        for (c, name) in f.slot_names().iter().enumerate() {
            if sch.uses_leaf(Node::Src((f.offset + c) as u16)) {
                o.push_str(&format!("        let s_{name} = sl_{name}[j];\n"));
            }
        }
    }
    for id in sch.temps(Stage::Pair) {
        o.push_str(&format!(
            "        let {} = {};\n",
            sch.temp_name(id),
            sch.body(&syn, id)
        ));
    }
    let updates = sch.updates(&syn);
    let values: Vec<String> = updates.iter().map(|u| u.value.clone()).collect();
    o.push_str(&format!("        [{}]\n", values.join(", ")));
    o.push_str("    });\n");
    for u in &updates {
        let op = if u.subtract { "-=" } else { "+=" };
        o.push_str(&format!("    out[{}] {op} sums[{}];\n", u.slot, u.slot));
    }
    o.push_str("}\n");
    o
}
