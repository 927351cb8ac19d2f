//! The `kernel!` DSL's mistakes as compile errors: one trybuild case a
//! mistake in `tests/ui/`, each calling `fmm_macros::kernel!` (what
//! `fmm_core::kernel!` re-exports). Every mistake is caught while the
//! macro expands, so trybuild checks this crate and the macro's few
//! dependencies, not fmm-core's tree. A crate of its own rather than
//! fmm-macros' tests: trybuild as a dev-dependency of the proc-macro crate
//! resolved the macro's dependencies' features differently for the doc
//! tests, and CI rebuilt fmm-core for them (2 min 15 s).
