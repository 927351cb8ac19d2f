//! The treecode's walk on the GPU, in a module of its own.
//!
//! One thread block walks the source tree for one group of at most
//! [`WALK_BLOCK`] targets, one thread per target, and the opening criterion
//! is decided for the whole group from its bounding box, so every thread
//! agrees and the walk never diverges. The walk is breadth-first in chunks,
//! as in the GPU treecodes after nakasato2009 (Bonsai): the block pops up to
//! [`WALK_BLOCK`] cells from a stack in global memory, each thread tests one
//! cell, and a block-wide prefix sum places the accepted cells in the far
//! list, the leaves in the near list and the children of the opened cells
//! back on the stack. A serial walk along the `next`/`more` links (what the
//! CPU does) would test one cell at a time with the whole block waiting on
//! each load; here 128 cells are tested at once.
//!
//! The lists are evaluated in tiles, like the all-pairs kernel: the block
//! loads up to [`WALK_BLOCK`] pseudo-sources or leaf particles into shared
//! memory, and every thread runs the declaration's pair interaction over the
//! tile. An accepted cell's pseudo-sources are `per_cell` of them: its
//! summed strength at its centre of strength (1), or a node far field's
//! nodes carrying its node strengths (`fmm_core::far`), where the kernel
//! from the nodes is the cell's far field. The far list is flushed when it
//! holds a tile's worth of cells, the near list when its leaves hold a
//! tile's worth of particles.
//!
//! Blocks are persistent: the grid holds as many blocks as fit on the GPU at
//! once and each takes the next group from a global counter, so a block's
//! stack (`stack_cap` cells at `stacks + blockIdx.x * stack_cap`) is reused
//! from group to group. A stack that would overflow sets `overflow` and the
//! block stops; the host then runs the walk again with larger stacks.
//!
//! The arguments of `<kernel>_walk_f32` / `_f64` are [`Signature::walk`];
//! the host pushes them through the same value (`fmm_core::cuda::launch`).
//! The walk has a module of its own ([`super::Module::Walk`]).

use super::cuda::{slots, target_prologue, CudaSyntax, Tile};
use super::signature::{Precision, Signature};
use super::Schedule;
use crate::kernel::KernelDef;

/// Most targets in a group: the block size of the walk, and the most cells
/// a block tests at once.
pub const WALK_BLOCK: u32 = 128;

/// The name of the walk entry point for one precision.
pub fn walk_entry_name(def: &KernelDef, precision: &str) -> String {
    format!("{}_walk_{precision}", def.symbol())
}

/// A block-wide exclusive prefix sum of two counts at once (warp shuffles,
/// then the warps' totals through shared memory), with the totals: part
/// of the walk's module and of the P2P lists'.
pub(super) const BLOCK_SCAN: &str = r#"// Exclusive prefix sums over the block of `a` and `b`, and their totals.
// `sums` holds two ints per warp; the caller synchronises before reusing it.
__device__ __forceinline__ void fmm_block_scan2(int& a, int& b, int& total_a, int& total_b,
                                                int (*sums)[2])
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int ia = a, ib = b;
    for (int d = 1; d < 32; d <<= 1) {
        const int xa = __shfl_up_sync(0xffffffffu, ia, d);
        const int xb = __shfl_up_sync(0xffffffffu, ib, d);
        if (lane >= d) { ia += xa; ib += xb; }
    }
    if (lane == 31) { sums[warp][0] = ia; sums[warp][1] = ib; }
    __syncthreads();
    int oa = 0, ob = 0;
    total_a = 0;
    total_b = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) {
        if (w < warp) { oa += sums[w][0]; ob += sums[w][1]; }
        total_a += sums[w][0];
        total_b += sums[w][1];
    }
    a = oa + ia - a;
    b = ob + ib - b;
}
"#;

/// Emits the walk template and its entry points.
pub(crate) fn emit(def: &KernelDef, sch: &Schedule, syn: &CudaSyntax) -> String {
    let sym = def.symbol();
    let no = def.n_outputs();
    let tile = Tile::new(def, sch);
    let mut o = String::new();

    let sig = Signature::walk(def);

    // The accepted cells' pseudo-sources: `per_cell` a cell.
    let flush_far = String::from("        const int n_far_src = n_far * per_cell;\n")
        + &count("n_far_src", 1)
        + &flush(
            def,
            &tile,
            sch,
            syn,
            "n_far_src",
            concat!(
                "                const int j = per_cell == 1 ? far_list[q]\n",
                "                    : far_list[q / per_cell] * per_cell + q % per_cell;\n",
            ),
            &|stem| format!("cell_{stem}[j]"),
        );
    let flush_near = count("n_near_src", 0) + &flush_leaves(def, &tile, sch, syn, false);

    o.push_str(BLOCK_SCAN);
    o.push_str("\ntemplate <typename T>\n");
    o.push_str(&format!(
        "__device__ __forceinline__ void {sym}_walk(\n    "
    ));
    o.push_str(&sig.declare("T"));
    o.push_str(")\n{\n");
    o.push_str(&format!("    constexpr int B = {WALK_BLOCK};\n"));
    o.push_str(&tile.declare("B"));
    o.push_str(concat!(
        "    // Accepted cells; leaves to sum directly (first source, and where\n",
        "    // its sources start in the flattened list). Each holds less than B\n",
        "    // before a step adds at most B.\n",
        "    __shared__ int far_list[2 * B];\n",
        "    __shared__ int near_first[2 * B], near_start[2 * B];\n",
        "    __shared__ int sums[B / 32][2];\n",
        "    __shared__ int s_group, s_top, s_far, s_near, s_near_src;\n",
        "    const int tid = threadIdx.x;\n",
        "    int* stack = stacks + (size_t)blockIdx.x * stack_cap;\n",
        "    while (true) {\n",
        "        if (tid == 0) s_group = atomicAdd(next_group, 1);\n",
        "        __syncthreads();\n",
        "        const int g = s_group;\n",
        "        if (g >= n_groups) return;\n",
        "        const int gb = group_begin[g];\n",
        "        const int i = gb + tid;\n",
        "        const bool active = i < group_end[g];\n",
        "        const int n_active = group_end[g] - gb;\n",
        "        const int ii = active ? i : gb;\n",
    ));
    for line in target_prologue(def, sch, syn).lines() {
        o.push_str(&format!("    {line}\n"));
    }
    for k in 0..no {
        o.push_str(&format!("        T total_{k} = T(0);\n"));
    }
    o.push_str(concat!(
        "        const T lo_x = group_lo_x[g], lo_y = group_lo_y[g], lo_z = group_lo_z[g];\n",
        "        const T hi_x = group_hi_x[g], hi_y = group_hi_y[g], hi_z = group_hi_z[g];\n",
        "        if (tid == 0) {\n",
        "            stack[0] = 0;\n",
        "            s_top = 1;\n",
        "            s_far = 0;\n",
        "            s_near = 0;\n",
        "            s_near_src = 0;\n",
        "        }\n",
        "        __syncthreads();\n",
        "        bool overflowed = false;\n",
        "        while (true) {\n",
        "            const int top = s_top;\n",
        "            if (top == 0) break;\n",
        "            const int k = min(top, B);\n",
        "            const int base = top - k;\n",
        "            const int c = tid < k ? stack[base + tid] : -1;\n",
        "            // The opening criterion for the whole group: accepted when the\n",
        "            // cell's point (centre of strength, or centre) is far enough\n",
        "            // from the group's box and the cell's box does not overlap it.\n",
        "            int accept = 0, leaf = 0, nchild = 0, n_src = 0;\n",
        "            if (c >= 0) {\n",
        "                const T px = cell_px[c], py = cell_py[c], pz = cell_pz[c];\n",
        "                const T dx = fmax(fmax(lo_x - px, px - hi_x), T(0));\n",
        "                const T dy = fmax(fmax(lo_y - py, py - hi_y), T(0));\n",
        "                const T dz = fmax(fmax(lo_z - pz, pz - hi_z), T(0));\n",
        "                const T h = cell_half[c];\n",
        "                const bool overlap = lo_x <= cell_cx[c] + h && hi_x >= cell_cx[c] - h\n",
        "                    && lo_y <= cell_cy[c] + h && hi_y >= cell_cy[c] - h\n",
        "                    && lo_z <= cell_cz[c] + h && hi_z >= cell_cz[c] - h;\n",
        "                if (!overlap && dx * dx + dy * dy + dz * dz > cell_accept2[c]) {\n",
        "                    accept = 1;\n",
        "                } else {\n",
        "                    nchild = cell_nchild[c];\n",
        "                    if (nchild == 0) {\n",
        "                        leaf = 1;\n",
        "                        n_src = cell_end[c] - cell_begin[c];\n",
        "                    }\n",
        "                }\n",
        "            }\n",
        "            // Where each goes: the accepted, leaf and children counts packed\n",
        "            // in one sum (at most B, B and 8 B), the leaves' sources in the other.\n",
        "            int at = accept | (leaf << 8) | (nchild << 16), src_at = n_src;\n",
        "            int n_at, n_listed;\n",
        "            fmm_block_scan2(at, src_at, n_at, n_listed, sums);\n",
        "            const int n_children = n_at >> 16;\n",
        "            const int far0 = s_far, near0 = s_near, near_src0 = s_near_src;\n",
        "            if (base + n_children > stack_cap) {\n",
        "                // Every thread sees the same totals: the block stops together.\n",
        "                if (tid == 0) atomicExch(overflow, 1);\n",
        "                overflowed = true;\n",
        "                break;\n",
        "            }\n",
        "            if (accept) far_list[far0 + (at & 0xff)] = c;\n",
        "            if (leaf) {\n",
        "                const int e = near0 + ((at >> 8) & 0xff);\n",
        "                near_first[e] = cell_begin[c];\n",
        "                near_start[e] = near_src0 + src_at;\n",
        "            }\n",
        "            for (int m = 0; m < nchild; ++m) stack[base + (at >> 16) + m] = cell_child[8 * c + m];\n",
        "            __syncthreads();\n",
        "            if (tid == 0) {\n",
        "                s_top = base + n_children;\n",
        "                s_far = far0 + (n_at & 0xff);\n",
        "                s_near = near0 + ((n_at >> 8) & 0xff);\n",
        "                s_near_src = near_src0 + n_listed;\n",
        "            }\n",
        "            __syncthreads();\n",
        "            if (s_far >= B) {\n",
        "                const int n_far = s_far;\n",
    ));
    o.push_str(&indent(&flush_far, "        "));
    o.push_str(concat!(
        "                if (tid == 0) s_far = 0;\n",
        "            }\n",
        "            if (s_near_src >= B) {\n",
        "                const int n_near = s_near, n_near_src = s_near_src;\n",
    ));
    o.push_str(&indent(&flush_near, "        "));
    o.push_str(concat!(
        "                if (tid == 0) { s_near = 0; s_near_src = 0; }\n",
        "            }\n",
        "            __syncthreads();\n",
        "        }\n",
        "        if (overflowed) return;\n",
        "        {\n",
        "            const int n_far = s_far;\n",
    ));
    o.push_str(&indent(&flush_far, "    "));
    o.push_str("            const int n_near = s_near, n_near_src = s_near_src;\n");
    o.push_str(&indent(&flush_near, "    "));
    o.push_str("        }\n");
    o.push_str(&store_outputs(def));
    o.push_str("        __syncthreads();\n");
    o.push_str("    }\n");
    o.push_str("}\n");
    o.push_str(&entry_points(
        &sig,
        WALK_BLOCK,
        &format!("{sym}_walk"),
        |prec| walk_entry_name(def, prec),
    ));
    o
}

/// Each active thread's totals into the outputs (added with `accumulate`).
pub(super) fn store_outputs(def: &KernelDef) -> String {
    let mut o = String::from("        if (active) {\n");
    for (k, s) in slots(&def.outputs, "o").iter().enumerate() {
        o.push_str(&format!(
            "            {s}[i] = accumulate ? {s}[i] + total_{k} : total_{k};\n"
        ));
    }
    o.push_str("        }\n");
    o
}

/// The `extern "C"` entry points of template `template` for each
/// precision, with the arguments of `sig` and `block` threads at most.
pub(super) fn entry_points(
    sig: &Signature,
    block: u32,
    template: &str,
    name: impl Fn(&str) -> String,
) -> String {
    let pass = sig.pass();
    let mut o = String::new();
    for prec in Precision::ALL {
        let ty = prec.c_type();
        o.push_str(&format!(
            "\nextern \"C\" __global__ void __launch_bounds__({block}) {}(\n    {})\n{{\n    {template}<{ty}>({pass});\n}}\n",
            name(prec.name()),
            sig.declare(ty),
        ));
    }
    o
}

/// The interactions a flush makes, counted once per block.
pub(super) fn count(n: &str, slot: usize) -> String {
    format!(
        "        if (tid == 0) atomicAdd(&counts[{slot}], (unsigned long long)({n}) * n_active);\n"
    )
}

/// One flush: the tiles of `count` list entries, `index` the source (or
/// pseudo-source) index of entry `q`, read from the arrays `prefix_*`;
/// every thread adds the tile's interactions with its target to `total_*`.
fn flush(
    def: &KernelDef,
    tile: &Tile,
    sch: &Schedule,
    syn: &CudaSyntax,
    count: &str,
    index: &str,
    load: &dyn Fn(&str) -> String,
) -> String {
    let no = def.n_outputs();
    let mut f = String::new();
    f.push_str(&format!(
        "        for (int base = 0; base < {count}; base += B) {{\n"
    ));
    f.push_str("            const int q = base + tid;\n");
    f.push_str(&format!("            if (q < {count}) {{\n"));
    f.push_str(index);
    f.push_str(&tile.store(sch, syn, "                ", &|_, stem| load(stem), "tid"));
    f.push_str("            }\n");
    f.push_str("            __syncthreads();\n");
    f.push_str(&format!(
        "            const int count = min(B, {count} - base);\n"
    ));
    for k in 0..no {
        f.push_str(&format!("            T part_{k} = T(0);\n"));
    }
    f.push_str(&tile.pair(sch, syn, "            "));
    f.push_str("            if (count == B) {\n");
    f.push_str("#pragma unroll 8\n");
    f.push_str("                for (int k = 0; k < B; ++k) pair(k);\n");
    f.push_str("            } else {\n");
    f.push_str("                for (int k = 0; k < count; ++k) pair(k);\n");
    f.push_str("            }\n");
    for k in 0..no {
        f.push_str(&format!("            total_{k} += part_{k};\n"));
    }
    f.push_str("            __syncthreads();\n");
    f.push_str("        }\n");
    f
}

/// The flush of a list of leaves: `n_near` leaves, the first source of
/// each in `near_first` and where its sources start in the flattened list
/// in `near_start`, `n_near_src` sources in all. With `shifted`, each
/// leaf's sources are moved by its lattice shift `near_shift[axis][leaf]`
/// (a periodic box's image of the leaf).
pub(super) fn flush_leaves(
    def: &KernelDef,
    tile: &Tile,
    sch: &Schedule,
    syn: &CudaSyntax,
    shifted: bool,
) -> String {
    let load = |stem: &str| match (shifted, stem) {
        (true, "x") => "src_x[j] + near_shift[0][lo]".to_string(),
        (true, "y") => "src_y[j] + near_shift[1][lo]".to_string(),
        (true, "z") => "src_z[j] + near_shift[2][lo]".to_string(),
        _ => format!("src_{stem}[j]"),
    };
    flush(
        def,
        tile,
        sch,
        syn,
        "n_near_src",
        concat!(
            "                // The leaf holding the q-th listed source: the last\n",
            "                // whose first listed source is at or before q.\n",
            "                int lo = 0, hi = n_near - 1;\n",
            "                while (lo < hi) {\n",
            "                    const int mid = (lo + hi + 1) >> 1;\n",
            "                    if (near_start[mid] <= q) lo = mid; else hi = mid - 1;\n",
            "                }\n",
            "                const int j = near_first[lo] + q - near_start[lo];\n",
        ),
        &load,
    )
}

/// `text` with every non-empty line indented by `by` more.
pub(super) fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() || l.starts_with('#') {
                format!("{l}\n")
            } else {
                format!("{by}{l}\n")
            }
        })
        .collect()
}
