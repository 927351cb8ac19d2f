//! Mistakes in the `kernel!` DSL are compile errors that say what is wrong
//! and point at the offending tokens. One file per mistake in `ui/`, with
//! the expected compiler output in the `.stderr` beside it; regenerate with
//! `TRYBUILD=overwrite cargo test -p fmm-macros --test compile_fail`.
//!
//! The cases live here, beside the macro, and call `fmm_macros::kernel!`
//! (what `fmm_core::kernel!` re-exports): every mistake is found while
//! the macro expands, so trybuild need only check this crate and its few
//! dependencies, not fmm-core's tree (92 s of CI's 2 cores as a test of
//! fmm-tests).

#[test]
fn dsl_mistakes_are_compile_errors_with_spans() {
    let t = trybuild::TestCases::new();
    // No pass cases (valid kernels are the suite's `custom_kernels`):
    // with none, trybuild checks without generating code.
    t.compile_fail("tests/ui/*.rs");
}
