//! The treecode's walk on the GPU, emitted next to the tile kernel.
//!
//! One thread block per target group, one thread per target. The block
//! walks the source tree along the `next`/`more` links (nakasato2009: no
//! stack, no recursion) and decides the opening criterion for the whole
//! group, from the group's bounding box, so every thread of the block takes
//! the same path and the walk never diverges. An accepted cell is one
//! interaction with its pseudo-source (the cell's summed strength at its
//! centre of strength); a leaf that is not accepted is the interactions
//! with its particles. Both are the declaration's pair interaction.
//!
//! Arguments of `<kernel>_walk_f32` / `_f64`, in order: `n_targets`, target
//! `x, y, z`, target slots (tree order); `n_groups`, `group_begin`,
//! `group_end` (int), group box `lo_x, lo_y, lo_z, hi_x, hi_y, hi_z`;
//! `n_cells`, `cell_next`, `cell_more`, `cell_begin`, `cell_end` (int),
//! `cell_accept2` (squared acceptance distance), cell box `center x, y, z`
//! and `half`, the pseudo-sources `x, y, z` and source slots; `n_sources`,
//! source `x, y, z` and slots (tree order); the parameters; the outputs
//! (tree order); `accumulate`. Groups hold at most 128 targets.

use super::cuda::{slots, target_prologue, CudaSyntax, PRECISIONS};
use super::Schedule;
use crate::ir::{Node, Stage};
use crate::kernel::KernelDef;

/// Most targets in a group (the block size of the walk).
pub const WALK_BLOCK: u32 = 128;

/// The name of the walk entry point for one precision.
pub fn walk_entry_name(def: &KernelDef, precision: &str) -> String {
    format!("{}_walk_{precision}", def.symbol())
}

/// Emits the walk template and its entry points.
pub(crate) fn emit(def: &KernelDef, sch: &Schedule, syn: &CudaSyntax) -> String {
    let sym = def.symbol();
    let no = def.n_outputs();
    let mut o = String::new();

    // Argument list: (declaration with T, name).
    let mut args: Vec<(String, String)> = Vec::new();
    let mut arg = |decl: String, name: String| args.push((decl, name));
    arg("const int n_targets".into(), "n_targets".into());
    for a in ["x", "y", "z"] {
        arg(
            format!("const T* __restrict__ {a}_i_ptr"),
            format!("{a}_i_ptr"),
        );
    }
    for s in slots(&def.targets, "t") {
        arg(format!("const T* __restrict__ {s}_ptr"), format!("{s}_ptr"));
    }
    arg("const int n_groups".into(), "n_groups".into());
    for g in ["group_begin", "group_end"] {
        arg(format!("const int* __restrict__ {g}"), g.into());
    }
    for g in [
        "group_lo_x",
        "group_lo_y",
        "group_lo_z",
        "group_hi_x",
        "group_hi_y",
        "group_hi_z",
    ] {
        arg(format!("const T* __restrict__ {g}"), g.into());
    }
    arg("const int n_cells".into(), "n_cells".into());
    for c in ["cell_next", "cell_more", "cell_begin", "cell_end"] {
        arg(format!("const int* __restrict__ {c}"), c.into());
    }
    for c in ["cell_accept2", "cell_cx", "cell_cy", "cell_cz", "cell_half"] {
        arg(format!("const T* __restrict__ {c}"), c.into());
    }
    // Pseudo-source and source arrays: positions and the source slots.
    let source_slots = slots(&def.sources, "s");
    for prefix in ["cell", "src"] {
        for a in ["x", "y", "z"] {
            arg(
                format!("const T* __restrict__ {prefix}_{a}"),
                format!("{prefix}_{a}"),
            );
        }
        for s in &source_slots {
            arg(
                format!("const T* __restrict__ {prefix}_{s}"),
                format!("{prefix}_{s}"),
            );
        }
        if prefix == "cell" {
            arg("const int n_sources".into(), "n_sources".into());
        }
    }
    for s in slots(&def.params, "p") {
        arg(format!("const T {s}"), s);
    }
    for s in slots(&def.outputs, "o") {
        arg(format!("T* __restrict__ {s}"), s);
    }
    arg("const int accumulate".into(), "accumulate".into());

    // The pair interaction as a lambda over the source values it reads.
    let mut leaves: Vec<(String, String)> = Vec::new(); // (variable, slot suffix)
    for (c, a) in ["x", "y", "z"].iter().enumerate() {
        if sch.uses_leaf(Node::SrcPos(c as u8)) {
            leaves.push((format!("{a}_j"), a.to_string()));
        }
    }
    for f in &def.sources {
        for (c, name) in f.slot_names().iter().enumerate() {
            if sch.uses_leaf(Node::Src((f.offset + c) as u16)) {
                leaves.push((format!("s_{name}"), format!("s_{name}")));
            }
        }
    }

    o.push_str("\n// The treecode walk (see fmm_codegen::emit::walk).\n");
    o.push_str("template <typename T>\n");
    o.push_str(&format!(
        "__device__ __forceinline__ void {sym}_walk(\n    "
    ));
    o.push_str(
        &args
            .iter()
            .map(|a| a.0.clone())
            .collect::<Vec<_>>()
            .join(",\n    "),
    );
    o.push_str(")\n{\n");
    o.push_str("    const int g = blockIdx.x;\n");
    o.push_str("    if (g >= n_groups) return;\n");
    o.push_str("    const int gb = group_begin[g];\n");
    o.push_str("    const int i = gb + threadIdx.x;\n");
    o.push_str("    const bool active = i < group_end[g];\n");
    o.push_str("    const int ii = active ? i : gb;\n");
    o.push_str(&target_prologue(def, sch, syn));
    for k in 0..no {
        o.push_str(&format!("    T total_{k} = T(0);\n"));
    }
    let params: Vec<String> = leaves.iter().map(|(v, _)| format!("const T {v}")).collect();
    o.push_str(&format!("    auto pair = [&]({}) {{\n", params.join(", ")));
    for id in sch.temps_in(&[Stage::Source, Stage::Pair]) {
        o.push_str(&format!(
            "        const T {} = {};\n",
            sch.temp_name(id),
            sch.body(syn, id)
        ));
    }
    for u in sch.updates(syn) {
        let op = if u.subtract { "-=" } else { "+=" };
        o.push_str(&format!("        total_{} {op} {};\n", u.slot, u.value));
    }
    o.push_str("    };\n");
    o.push_str("    const T lo_x = group_lo_x[g], lo_y = group_lo_y[g], lo_z = group_lo_z[g];\n");
    o.push_str("    const T hi_x = group_hi_x[g], hi_y = group_hi_y[g], hi_z = group_hi_z[g];\n");
    o.push_str("    int c = 0;\n");
    o.push_str("    while (c < n_cells) {\n");
    o.push_str("        // The opening criterion for the whole group: every thread agrees.\n");
    o.push_str("        const T px = cell_x[c], py = cell_y[c], pz = cell_z[c];\n");
    o.push_str("        const T dx = fmax(fmax(lo_x - px, px - hi_x), T(0));\n");
    o.push_str("        const T dy = fmax(fmax(lo_y - py, py - hi_y), T(0));\n");
    o.push_str("        const T dz = fmax(fmax(lo_z - pz, pz - hi_z), T(0));\n");
    o.push_str("        const T h = cell_half[c];\n");
    o.push_str("        const bool overlap = lo_x <= cell_cx[c] + h && hi_x >= cell_cx[c] - h\n");
    o.push_str("            && lo_y <= cell_cy[c] + h && hi_y >= cell_cy[c] - h\n");
    o.push_str("            && lo_z <= cell_cz[c] + h && hi_z >= cell_cz[c] - h;\n");
    o.push_str("        if (!overlap && dx * dx + dy * dy + dz * dz > cell_accept2[c]) {\n");
    let cell_args: Vec<String> = leaves.iter().map(|(_, s)| format!("cell_{s}[c]")).collect();
    o.push_str(&format!("            pair({});\n", cell_args.join(", ")));
    o.push_str("            c = cell_next[c];\n");
    o.push_str("        } else if (cell_more[c] == cell_next[c]) {\n");
    o.push_str("            const int je = cell_end[c];\n");
    o.push_str("            for (int j = cell_begin[c]; j < je; ++j) {\n");
    let src_args: Vec<String> = leaves.iter().map(|(_, s)| format!("src_{s}[j]")).collect();
    o.push_str(&format!("                pair({});\n", src_args.join(", ")));
    o.push_str("            }\n");
    o.push_str("            c = cell_next[c];\n");
    o.push_str("        } else {\n");
    o.push_str("            c = cell_more[c];\n");
    o.push_str("        }\n");
    o.push_str("    }\n");
    o.push_str("    if (active) {\n");
    for (k, s) in slots(&def.outputs, "o").iter().enumerate() {
        o.push_str(&format!(
            "        {s}[i] = accumulate ? {s}[i] + total_{k} : total_{k};\n"
        ));
    }
    o.push_str("    }\n");
    o.push_str("}\n");

    let pass = args
        .iter()
        .map(|a| a.1.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    for (prec, ty) in PRECISIONS {
        let decl = args
            .iter()
            .map(|a| {
                a.0.replace("const T*", &format!("const {ty}*"))
                    .replace("const T ", &format!("const {ty} "))
                    .replace("T* ", &format!("{ty}* "))
            })
            .collect::<Vec<_>>()
            .join(",\n    ");
        o.push_str(&format!(
            "\nextern \"C\" __global__ void __launch_bounds__({WALK_BLOCK}) {}(\n    {decl})\n{{\n    {sym}_walk<{ty}>({pass});\n}}\n",
            walk_entry_name(def, prec)
        ));
    }
    o
}
