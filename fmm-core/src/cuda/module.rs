//! Hand-written CUDA modules (the tree build, the primitives, the
//! treecode's cells, the FMM's operators): each one's constants and entry
//! points have one source on the host.
//!
//! - The `#define`s a `.cu` file needs from the host (block sizes, tile
//!   sizes, the depth bound) are generated from the Rust constants by
//!   [`with_defines`], never written twice.
//! - The entry points a module's loader knows are declared once, with
//!   [`entry_points!`], which makes the struct of functions, its loader and
//!   the list [`EntryList`] that a test compiles the source against (every
//!   listed entry is in the module and every kernel of the module is
//!   listed).
//!
//! Each method has modules of its own, so adding a method adds modules
//! rather than changing every method's.

/// `source` with `#define NAME VALUE` lines for `defines` in front.
pub fn with_defines(defines: &[(&str, i64)], source: &str) -> String {
    let mut s = String::new();
    for (name, value) in defines {
        s.push_str(&format!("#define {name} {value}\n"));
    }
    s.push_str(source);
    s
}

/// The entry points a loader declares: each name, and whether it comes in
/// an `_f32` and an `_f64` form.
pub type EntryList = &'static [(&'static str, bool)];

/// Every entry name of a list, the per-precision ones in both precisions.
pub fn expand(entries: EntryList) -> Vec<String> {
    entries
        .iter()
        .flat_map(|&(name, per_precision)| {
            if per_precision {
                vec![format!("{name}_f32"), format!("{name}_f64")]
            } else {
                vec![name.to_string()]
            }
        })
        .collect()
}

/// The kernels a compiled module (CUBIN) holds, by the names of their code
/// sections (`.text.NAME`); template instances (mangled `_Z` names) are
/// left out.
pub fn kernels_in_cubin(cubin: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    let pat = b".text.";
    let mut i = 0;
    while i + pat.len() <= cubin.len() {
        if &cubin[i..i + pat.len()] == pat && (i == 0 || cubin[i - 1] == 0) {
            let start = i + pat.len();
            let end = cubin[start..]
                .iter()
                .position(|&b| b == 0)
                .map_or(cubin.len(), |e| start + e);
            if let Ok(name) = std::str::from_utf8(&cubin[start..end]) {
                if !name.starts_with("_Z") && !name.is_empty() {
                    names.push(name.to_string());
                }
            }
            i = end;
        } else {
            i += 1;
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Declares the entry points of a hand-written module once: a struct with
/// one `CudaFunction` per entry, `load::<R>(gpu, module)` (the entries
/// marked `per_precision` in `R`'s form, `name_f32` or `name_f64`), and
/// `ENTRIES`, the list a test checks the compiled module against.
///
/// ```ignore
/// entry_points! {
///     /// The tree build's kernels.
///     pub(crate) struct Kernels {
///         bbox_final = "bbox_final",
///         keys = "keys" per_precision,
///     }
/// }
/// ```
macro_rules! entry_points {
    (
        $(#[$doc:meta])*
        $vis:vis struct $name:ident {
            $($field:ident = $entry:literal $($per:ident)?),* $(,)?
        }
    ) => {
        $(#[$doc])*
        $vis struct $name {
            $(pub(crate) $field: cudarc::driver::CudaFunction,)*
        }

        impl $name {
            /// Every entry point, and whether it is per precision.
            pub const ENTRIES: $crate::cuda::module::EntryList =
                &[$(($entry, $crate::cuda::module::entry_points!(@per $($per)?))),*];

            /// The entry points from `module`, those per precision in `R`.
            pub(crate) fn load<R: $crate::real::Real>(
                gpu: &$crate::cuda::Gpu,
                module: &std::sync::Arc<cudarc::driver::CudaModule>,
            ) -> Result<Self, $crate::error::Error> {
                Ok($name {
                    $($field: gpu.function(
                        module,
                        &$crate::cuda::module::entry_points!(@name R, $entry $($per)?),
                    )?,)*
                })
            }
        }
    };
    (@per per_precision) => { true };
    (@per) => { false };
    (@name $r:ident, $entry:literal per_precision) => {
        format!("{}_{}", $entry, <$r as $crate::real::Real>::NAME)
    };
    (@name $r:ident, $entry:literal) => { $entry.to_string() };
}
pub(crate) use entry_points;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_come_first() {
        assert_eq!(
            with_defines(&[("BLOCK", 256), ("MAX_LEVEL", 21)], "body\n"),
            "#define BLOCK 256\n#define MAX_LEVEL 21\nbody\n"
        );
    }

    #[test]
    fn kernels_are_read_from_section_names() {
        let fake = b"\0.shstrtab\0.text.scan_add_u32\0.nv.info.scan_add_u32\0.text._Z3fooi\0.text.gather_f32\0";
        assert_eq!(kernels_in_cubin(fake), ["gather_f32", "scan_add_u32"]);
        assert_eq!(
            expand(&[("scan", false), ("gather", true)]),
            ["scan", "gather_f32", "gather_f64"]
        );
    }
}
