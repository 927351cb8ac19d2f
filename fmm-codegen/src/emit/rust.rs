//! The Rust emitter: the CPU evaluator of a kernel.
//!
//! It writes one generic function, `p2p_target`, that adds the interaction
//! of a run of sources to one target. It is generic over the runtime's
//! `Real` trait, so one emission serves f32 and f64. The interaction of one
//! pair is a closure over the values computed before the loop (what depends
//! only on the parameters and the target); the loop keeps one partial sum
//! per lane and output in fixed-size arrays over fixed-size chunks of the
//! source slices. That exact shape is what LLVM vectorises (measured on the
//! 2-core development machine, f32 gravity: 1.9e8 interactions/s per core
//! with the loop in a generic helper taking the pair's source index, 7.6e8
//! with this one); sums in blocks keep f32 accurate over long runs.

use super::{float_literal, Fused, Schedule, Syntax};
use crate::ir::{Cmp, Func, Node, Stage};
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

    fn call(&self, f: Func, args: &[String]) -> String {
        format!("R::{}({})", f.row().real, args.join(", "))
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

/// Emits the CPU evaluators of `fmm_core::Kernel`, `p2p_target_portable`,
/// `p2p_target_wide`, `p2p_each_portable` and `p2p_each_wide`, with `core`
/// the path of the runtime crate (for example `::fmm_core`).
pub fn emit_p2p_target(def: &KernelDef, core: &str) -> String {
    let mut o = emit_portable(def, core);
    o.push_str(&emit_wide(def, core));
    o.push_str(&emit_each(def, core));
    o.push_str(&emit_each_wide(def, core));
    o
}

/// The loads of the parameters and target values the kernel reads, as
/// `let` statements; `wrap` turns the slot read into the value.
fn prologue_loads(
    def: &KernelDef,
    sch: &Schedule,
    wrap: &dyn Fn(String) -> String,
    indent: &str,
) -> String {
    let mut o = String::new();
    for f in &def.params {
        for (c, name) in f.slot_names().iter().enumerate() {
            if sch.uses_leaf(Node::Param((f.offset + c) as u16)) {
                let v = wrap(format!("p[{}]", f.offset + c));
                o.push_str(&format!("{indent}let p_{name} = {v};\n"));
            }
        }
    }
    for (c, axis) in ["x", "y", "z"].iter().enumerate() {
        if sch.uses_leaf(Node::TgtPos(c as u8)) {
            let v = wrap(format!("xi[{c}]"));
            o.push_str(&format!("{indent}let {axis}_i = {v};\n"));
        }
    }
    for f in &def.targets {
        for (c, name) in f.slot_names().iter().enumerate() {
            if sch.uses_leaf(Node::Tgt((f.offset + c) as u16)) {
                let v = wrap(format!("t[{}]", f.offset + c));
                o.push_str(&format!("{indent}let t_{name} = {v};\n"));
            }
        }
    }
    o
}

/// The source values the interaction reads: (variable, slice expression).
fn source_columns(def: &KernelDef, sch: &Schedule) -> Vec<(String, String)> {
    let mut cols: Vec<(String, String)> = Vec::new();
    for (c, axis) in ["x", "y", "z"].iter().enumerate() {
        if sch.uses_leaf(Node::SrcPos(c as u8)) {
            cols.push((format!("{axis}_j"), format!("src.pos[{c}]")));
        }
    }
    for f in &def.sources {
        for (c, name) in f.slot_names().iter().enumerate() {
            if sch.uses_leaf(Node::Src((f.offset + c) as u16)) {
                cols.push((format!("s_{name}"), format!("src.fields[{}]", f.offset + c)));
            }
        }
    }
    cols
}

/// The portable evaluator: scalar code in the lane-loop shape.
fn emit_portable(def: &KernelDef, core: &str) -> String {
    let no = def.n_outputs();
    let (mut o, cols, updates) = scalar_head(def, core, "p2p_target_portable");

    // The source loop: blocks of BLOCK sources (each summed on its own, then
    // added to the total, which keeps f32 sums accurate), and in a block
    // runs of LANES sources with one partial sum per lane and output (what
    // lets the compiler vectorise: floating-point sums are not reassociated).
    let lane_arrays: Vec<String> = (0..no).map(|k| format!("a{k}")).collect();
    o.push_str(&format!("    const L: usize = {core}::LANES;\n"));
    o.push_str(&format!("    let mut total = [R::zero(); {no}];\n"));
    o.push_str("    let mut start = 0;\n");
    o.push_str("    while start < n {\n");
    o.push_str(&format!(
        "        let end = (start + {core}::BLOCK).min(n);\n"
    ));
    o.push_str("        let full = start + (end - start) / L * L;\n");
    for a in &lane_arrays {
        o.push_str(&format!("        let mut {a} = [R::zero(); L];\n"));
    }
    o.push_str("        for c in (start..full).step_by(L) {\n");
    for (var, _) in &cols {
        o.push_str(&format!(
            "            let c_{var}: &[R; L] = sl_{var}[c..c + L].try_into().unwrap();\n"
        ));
    }
    o.push_str("            for l in 0..L {\n");
    let lane_args: Vec<String> = cols.iter().map(|(v, _)| format!("c_{v}[l]")).collect();
    o.push_str(&format!(
        "                let v = pair({});\n",
        lane_args.join(", ")
    ));
    for (k, a) in lane_arrays.iter().enumerate() {
        o.push_str(&format!("                {a}[l] += v[{k}];\n"));
    }
    o.push_str("            }\n");
    o.push_str("        }\n");
    o.push_str(&format!("        let mut block = [R::zero(); {no}];\n"));
    o.push_str("        for l in 0..L {\n");
    for (k, a) in lane_arrays.iter().enumerate() {
        o.push_str(&format!("            block[{k}] += {a}[l];\n"));
    }
    o.push_str("        }\n");
    o.push_str("        for j in full..end {\n");
    let tail_args: Vec<String> = cols.iter().map(|(v, _)| format!("sl_{v}[j]")).collect();
    o.push_str(&format!(
        "            let v = pair({});\n",
        tail_args.join(", ")
    ));
    o.push_str(&format!(
        "            for k in 0..{no} {{\n                block[k] += v[k];\n            }}\n"
    ));
    o.push_str("        }\n");
    o.push_str(&format!(
        "        for k in 0..{no} {{\n            total[k] += block[k];\n        }}\n"
    ));
    o.push_str("        start = end;\n");
    o.push_str("    }\n");
    for u in &updates {
        let op = if u.subtract { "-=" } else { "+=" };
        o.push_str(&format!("    out[{}] {op} total[{}];\n", u.slot, u.slot));
    }
    o.push_str("}\n");
    o
}

/// The shared head of the scalar evaluators: the signature of `name`, the
/// parameter and target loads, the slices of the source columns and the
/// closure `pair` of one source's contribution to every output slot.
/// Returns the text, the columns and the updates.
fn scalar_head(
    def: &KernelDef,
    core: &str,
    name: &str,
) -> (String, Vec<(String, String)>, Vec<super::Update>) {
    let sch = Schedule::new(def);
    let syn = RustSyntax { def };
    let no = def.n_outputs();
    let mut o = String::new();
    o.push_str("#[inline]\n#[allow(unused_variables, clippy::all)]\n");
    o.push_str(&format!(
        "fn {name}<R: {core}::Real>(p: &[R], xi: [R; 3], t: &[R], src: &{core}::SourceSlices<'_, R>, sources: ::core::ops::Range<usize>, out: &mut [R]) {{\n"
    ));
    o.push_str(&prologue_loads(def, &sch, &|v| v, "    "));
    for stage in [Stage::Param, Stage::Target] {
        for id in sch.temps(stage) {
            o.push_str(&format!(
                "    let {} = {};\n",
                sch.temp_name(id),
                sch.body(&syn, id)
            ));
        }
    }
    let cols = source_columns(def, &sch);
    // Slices cut to one length, so the loops have no bounds checks.
    o.push_str("    let n = sources.len();\n");
    for (var, slice) in &cols {
        o.push_str(&format!("    let sl_{var} = &{slice}[sources.clone()];\n"));
    }
    // The interaction of one source, from the declaration.
    let args: Vec<String> = cols.iter().map(|(v, _)| format!("{v}: R")).collect();
    o.push_str(&format!(
        "    let pair = |{}| -> [R; {no}] {{\n",
        args.join(", ")
    ));
    // Values of the source alone are computed per pair on the CPU: there is
    // no tile to compute them once for.
    for id in sch.temps_in(&[Stage::Source, Stage::Pair]) {
        o.push_str(&format!(
            "        let {} = {};\n",
            sch.temp_name(id),
            sch.body(&syn, id)
        ));
    }
    let updates = sch.updates(&syn);
    let values: Vec<String> = updates.iter().map(|u| u.value.clone()).collect();
    o.push_str(&format!("        [{}]\n", values.join(", ")));
    o.push_str("    };\n");
    (o, cols, updates)
}

/// The per-source evaluator `p2p_each_portable`: the contribution of every
/// source of the range on its own, added at `out[slot * n + j]` for the
/// range's `j`-th of `n` sources. The node far fields build their M2L operators
/// from it (a matrix entry per source and target node).
fn emit_each(def: &KernelDef, core: &str) -> String {
    let (mut o, cols, updates) = scalar_head(def, core, "p2p_each_portable");
    o.push_str("    for j in 0..n {\n");
    let args: Vec<String> = cols.iter().map(|(v, _)| format!("sl_{v}[j]")).collect();
    o.push_str(&format!("        let v = pair({});\n", args.join(", ")));
    for u in &updates {
        let op = if u.subtract { "-=" } else { "+=" };
        o.push_str(&format!(
            "        out[{} * n + j] {op} v[{}];\n",
            u.slot, u.slot
        ));
    }
    o.push_str("    }\n}\n");
    o
}

/// Expressions over `V: fmm_core::simd::Lanes`: constants splatted,
/// functions and comparisons as the vector type's methods, masks for
/// booleans.
struct WideSyntax<'a> {
    def: &'a KernelDef,
}

impl Syntax for WideSyntax<'_> {
    fn literal(&self, c: f64) -> String {
        format!("V::c({})", float_literal(c))
    }

    fn leaf(&self, node: Node) -> String {
        leaf_name(self.def, node)
    }

    fn call(&self, f: Func, args: &[String]) -> String {
        format!("V::{}({})", f.row().lanes, args.join(", "))
    }

    fn select(&self, c: &str, a: &str, b: &str) -> String {
        format!("V::select({c}, {a}, {b})")
    }

    fn compare(&self, c: Cmp, a: &str, b: &str) -> String {
        let name = match c {
            Cmp::Lt => "lt",
            Cmp::Le => "le",
            Cmp::Gt => "gt",
            Cmp::Ge => "ge",
            Cmp::Eq => "eq",
            Cmp::Ne => "ne",
        };
        format!("V::{name}({a}, {b})")
    }

    fn and(&self, a: &str, b: &str) -> String {
        format!("V::and({a}, {b})")
    }

    fn or(&self, a: &str, b: &str) -> String {
        format!("V::or({a}, {b})")
    }

    fn not(&self, a: &str) -> String {
        format!("V::not({a})")
    }

    fn fused(&self, a: &str, b: &str, c: &str, form: Fused) -> Option<String> {
        let name = match form {
            Fused::Add => "mul_add",
            Fused::SubC => "mul_sub",
            Fused::SubAb => "neg_mul_add",
        };
        Some(format!("V::{name}({a}, {b}, {c})"))
    }
}

/// The vector evaluator (`fmm_core::simd`; AVX-512 where the CPU has it,
/// else AVX2): one source per lane, the pair's
/// math in vector operations, one vector partial sum per output summed in
/// blocks of `BLOCK` sources like the portable loop. The last partial
/// vector of a block reads zeros past the end and its lanes there are
/// masked off. The math is written out twice (full vectors and the last
/// one) rather than put in a closure: a closure would not carry the
/// function's target features on every compiler the crate supports.
fn emit_wide(def: &KernelDef, core: &str) -> String {
    let sch = Schedule::new(def);
    let syn = WideSyntax { def };
    let no = def.n_outputs();
    let ind = "        ";
    let mut o = wide_prologue(def, &sch, &syn, ind);
    let updates = sch.updates(&syn);
    o.push_str(&format!(
        "{ind}let mut total = [<V::Scalar as {core}::Real>::zero(); {no}];\n"
    ));
    o.push_str(&format!("{ind}let mut start = 0;\n"));
    o.push_str(&format!("{ind}while start < n {{\n"));
    o.push_str(&format!(
        "{ind}    let end = (start + {core}::BLOCK).min(n);\n"
    ));
    o.push_str(&format!(
        "{ind}    let full = start + (end - start) / w * w;\n"
    ));
    o.push_str(&format!("{ind}    let mut acc = [V::c(0.0); {no}];\n"));
    o.push_str(&format!("{ind}    let mut c = start;\n"));
    o.push_str(&format!("{ind}    while c < full {{\n"));
    let inner = format!("{ind}        ");
    o.push_str(&wide_pair(def, &sch, &syn, &inner, "V::load_at(sl_{}, c)"));
    // A product is accumulated by a fused multiply-add (its temporary, if
    // any, is then dead and dropped by the compiler).
    for u in &updates {
        let k = u.slot;
        match &u.product {
            Some((a, b)) => o.push_str(&format!(
                "{ind}        acc[{k}] = V::mul_add({a}, {b}, acc[{k}]);\n"
            )),
            None => o.push_str(&format!(
                "{ind}        acc[{k}] = acc[{k}] + {};\n",
                u.value
            )),
        }
    }
    o.push_str(&format!("{ind}        c += w;\n{ind}    }}\n"));
    o.push_str(&format!("{ind}    if full < end {{\n"));
    o.push_str(&wide_pair(
        def,
        &sch,
        &syn,
        &inner,
        "V::load_partial(&sl_{}[full..end])",
    ));
    o.push_str(&format!("{ind}        let live = V::first(end - full);\n"));
    for u in &updates {
        let k = u.slot;
        o.push_str(&format!(
            "{ind}        acc[{k}] = acc[{k}] + V::select(live, {}, V::c(0.0));\n",
            u.value
        ));
    }
    o.push_str(&format!("{ind}    }}\n"));
    o.push_str(&format!(
        "{ind}    for k in 0..{no} {{\n{ind}        total[k] += V::sum(acc[k]);\n{ind}    }}\n"
    ));
    o.push_str(&format!("{ind}    start = end;\n{ind}}}\n"));
    for u in &updates {
        let op = if u.subtract { "-=" } else { "+=" };
        o.push_str(&format!("{ind}out[{}] {op} total[{}];\n", u.slot, u.slot));
    }
    wide_variants(core, "p2p_target_wide", &o)
}

/// The vector per-source evaluator `p2p_each_wide` ([`emit_each`]'s
/// contract in [`emit_wide`]'s vectors): the contributions of a vector of
/// sources at a time, added to each output's run of sources. The node far fields build their
/// M2L operators from it, a kernel value per pair of nodes; with the
/// scalar evaluator that was a third of their precomputation (Yukawa's
/// `exp` per entry).
fn emit_each_wide(def: &KernelDef, core: &str) -> String {
    let sch = Schedule::new(def);
    let syn = WideSyntax { def };
    let ind = "        ";
    let mut o = wide_prologue(def, &sch, &syn, ind);
    let updates = sch.updates(&syn);
    let add = |o: &mut String, lanes: &str| {
        for u in &updates {
            let op = if u.subtract { "-=" } else { "+=" };
            o.push_str(&format!("{ind}    let v = V::to_array({});\n", u.value));
            o.push_str(&format!(
                "{ind}    let run = &mut out[{} * n + c..{} * n + c + {lanes}];\n",
                u.slot, u.slot
            ));
            o.push_str(&format!(
                "{ind}    for (o, v) in run.iter_mut().zip(&v) {{\n{ind}        *o {op} *v;\n{ind}    }}\n"
            ));
        }
    };
    let inner = format!("{ind}    ");
    o.push_str(&format!("{ind}let full = n / w * w;\n"));
    o.push_str(&format!("{ind}let mut c = 0;\n"));
    o.push_str(&format!("{ind}while c < full {{\n"));
    o.push_str(&wide_pair(def, &sch, &syn, &inner, "V::load_at(sl_{}, c)"));
    add(&mut o, "w");
    o.push_str(&format!("{ind}    c += w;\n{ind}}}\n"));
    o.push_str(&format!("{ind}if full < n {{\n"));
    o.push_str(&wide_pair(
        def,
        &sch,
        &syn,
        &inner,
        "V::load_partial(&sl_{}[full..n])",
    ));
    add(&mut o, "n - full");
    o.push_str(&format!("{ind}}}\n"));
    wide_variants(core, "p2p_each_wide", &o)
}

/// The head shared by the vector evaluators: the parameter and target
/// loads splatted, the values of the parameters and target alone, and the
/// source columns' slices cut to the range (`n` sources, `w` lanes).
fn wide_prologue(def: &KernelDef, sch: &Schedule, syn: &WideSyntax<'_>, ind: &str) -> String {
    let mut o = prologue_loads(def, sch, &|v| format!("V::splat({v})"), ind);
    for stage in [Stage::Param, Stage::Target] {
        for id in sch.temps(stage) {
            o.push_str(&format!(
                "{ind}let {} = {};\n",
                sch.temp_name(id),
                sch.body(syn, id)
            ));
        }
    }
    o.push_str(&format!("{ind}let n = sources.len();\n"));
    o.push_str(&format!("{ind}let w = V::WIDTH;\n"));
    for (var, slice) in &source_columns(def, sch) {
        o.push_str(&format!("{ind}let sl_{var} = &{slice}[sources.clone()];\n"));
    }
    o
}

/// One vector of sources loaded (`load` with `{}` for a column's name)
/// and the pair's math on it.
fn wide_pair(
    def: &KernelDef,
    sch: &Schedule,
    syn: &WideSyntax<'_>,
    ind: &str,
    load: &str,
) -> String {
    let mut o = String::new();
    for (var, _) in &source_columns(def, sch) {
        let l = load.replace("{}", var);
        o.push_str(&format!("{ind}let {var} = {l};\n"));
    }
    for id in sch.temps_in(&[Stage::Source, Stage::Pair]) {
        o.push_str(&format!(
            "{ind}let {} = {};\n",
            sch.temp_name(id),
            sch.body(syn, id)
        ));
    }
    o
}

/// The vector evaluator `name` around `body`: the body generic over the
/// vector type and emitted twice, under the AVX2 and the AVX-512 target
/// features (the features decide which instructions the vector methods
/// inline to), and the choice between them at run time. The math is
/// written out rather than put in a closure: a closure would not carry the
/// function's target features on every compiler the crate supports.
fn wide_variants(core: &str, name: &str, body: &str) -> String {
    let mut o = String::new();
    o.push_str("#[cfg(target_arch = \"x86_64\")]\n#[inline]\n");
    o.push_str(&format!(
        "unsafe fn {name}<R: {core}::Real>(p: &[R], xi: [R; 3], t: &[R], src: &{core}::SourceSlices<'_, R>, sources: ::core::ops::Range<usize>, out: &mut [R]) {{\n"
    ));
    for (variant, features) in [
        ("wide", "avx2,fma"),
        ("wide512", "avx512f,avx512dq,avx2,fma"),
    ] {
        o.push_str(&format!("    #[target_feature(enable = \"{features}\")]\n"));
        o.push_str("    #[allow(unused_variables, unused_unsafe, unused_mut, clippy::all)]\n");
        o.push_str(&format!(
            "    unsafe fn {variant}<V: {core}::simd::Lanes>(p: &[V::Scalar], xi: [V::Scalar; 3], t: &[V::Scalar], src: &{core}::SourceSlices<'_, V::Scalar>, sources: ::core::ops::Range<usize>, out: &mut [V::Scalar]) {{\n"
        ));
        o.push_str("    unsafe {\n");
        o.push_str(body);
        o.push_str("    }\n    }\n");
    }
    o.push_str(&format!("    if {core}::simd::avx512() {{\n"));
    o.push_str("        wide512::<R::Wide512>(p, xi, t, src, sources, out)\n");
    o.push_str("    } else {\n");
    o.push_str("        wide::<R::Wide>(p, xi, t, src, sources, out)\n");
    o.push_str("    }\n}\n");
    o
}
