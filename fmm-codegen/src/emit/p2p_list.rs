//! The FMM's near field on the GPU: the P2P list kernel, built from the
//! walk's pieces (the declaration's pair interaction over shared-memory
//! tiles of sources).
//!
//! One thread block takes one group of at most [`P2P_BLOCK`] targets of
//! one target leaf, one thread per target, and sums over the particles of
//! the source leaves in that leaf's P2P list (yokota2012: the P2P lists of
//! the dual tree traversal, one target cell per block). The list is read
//! in chunks of [`P2P_BLOCK`] leaves; a block-wide prefix sum of their
//! sizes flattens a chunk into one run of sources, loaded into shared
//! memory a tile at a time. In a periodic box a list entry names an image
//! of a leaf too ([`IMAGE_BITS`]): its sources are moved by that image's
//! lattice shift (`image_shift`, three values an image; one image of no
//! shift in free space) as they are loaded.
//!
//! The arguments of `<kernel>_p2p_list_f32` / `_f64` are
//! [`Signature::p2p_list`]; the host pushes them through the same value
//! (`fmm_core::cuda::launch`). The lists have a module of their own
//! ([`super::Module::P2pList`]), with its own copy of the walk's block scan.

use super::cuda::{target_prologue, CudaSyntax, Tile};
use super::signature::Signature;
use super::walk::{count, entry_points, flush_leaves, indent, store_outputs, BLOCK_SCAN};
use super::Schedule;
use crate::kernel::KernelDef;

/// Most targets in a group, the block size: half the walk's, since the
/// FMM's leaves hold `ncrit` (64) or fewer targets, about 40 in a uniform
/// cube, and a thread per target.
pub const P2P_BLOCK: u32 = 64;

/// The bits of a list entry that say which periodic image of the listed
/// cell it is: the top ones, 0 (the cell itself, no shift) in free space.
/// The 125 nearest images of a periodic box need 7; the cell index keeps
/// 25 bits, 3.3 x 10^7 cells. The traversals write entries so
/// (`fmm_core::tree::traversal::entry`), the kernels read them so.
pub const IMAGE_BITS: u32 = 7;

/// The name of the P2P list entry point for one precision.
pub fn p2p_list_entry_name(def: &KernelDef, precision: &str) -> String {
    format!("{}_p2p_list_{precision}", def.symbol())
}

/// Emits the block scan, the P2P list template and its entry points.
pub(crate) fn emit(def: &KernelDef, sch: &Schedule, syn: &CudaSyntax) -> String {
    let sym = def.symbol();
    let no = def.n_outputs();
    let tile = Tile::new(def, sch);

    let sig = Signature::p2p_list(def);

    let mut o = String::new();
    o.push_str(BLOCK_SCAN);
    o.push_str("\ntemplate <typename T>\n");
    o.push_str(&format!(
        "__device__ __forceinline__ void {sym}_p2p_list(\n    "
    ));
    o.push_str(&sig.declare("T"));
    o.push_str(")\n{\n");
    o.push_str(&format!("    constexpr int B = {P2P_BLOCK};\n"));
    o.push_str(&format!(
        "    constexpr int CELL_BITS = {};\n",
        32 - IMAGE_BITS
    ));
    o.push_str(&tile.declare("B"));
    o.push_str(concat!(
        "    __shared__ int near_first[B], near_start[B];\n",
        "    __shared__ T near_shift[3][B];\n",
        "    __shared__ int sums[B / 32][2];\n",
        "    const int tid = threadIdx.x;\n",
        "    for (int g = blockIdx.x; g < n_groups; g += gridDim.x) {\n",
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
        "        const int c = group_cell[g];\n",
        "        const long long ls = list_begin[c], le = list_end[c];\n",
        "        for (long long chunk = ls; chunk < le; chunk += B) {\n",
        "            const int n_near = (int)min((long long)B, le - chunk);\n",
        "            int first = 0, at = 0, none = 0, n_near_src, n_none, image = 0;\n",
        "            if (tid < n_near) {\n",
        "                // The listed cell and which of its periodic images.\n",
        "                const unsigned e = (unsigned)list[chunk + tid];\n",
        "                const int b = (int)(e & ((1u << CELL_BITS) - 1u));\n",
        "                image = (int)(e >> CELL_BITS);\n",
        "                first = cell_begin[b];\n",
        "                at = cell_end[b] - first;\n",
        "            }\n",
        "            fmm_block_scan2(at, none, n_near_src, n_none, sums);\n",
        "            if (tid < n_near) {\n",
        "                near_first[tid] = first;\n",
        "                near_start[tid] = at;\n",
        "                for (int a = 0; a < 3; ++a) near_shift[a][tid] = image_shift[3 * image + a];\n",
        "            }\n",
        "            __syncthreads();\n",
    ));
    o.push_str(&indent(
        &(count("n_near_src", 0) + &flush_leaves(def, &tile, sch, syn, true)),
        "    ",
    ));
    o.push_str(concat!(
        "            // `sums` and the leaf lists are reused by the next chunk.\n",
        "            __syncthreads();\n",
        "        }\n",
    ));
    o.push_str(&store_outputs(def));
    o.push_str("    }\n");
    o.push_str("}\n");
    o.push_str(&entry_points(
        &sig,
        P2P_BLOCK,
        &format!("{sym}_p2p_list"),
        |prec| p2p_list_entry_name(def, prec),
    ));
    o
}
