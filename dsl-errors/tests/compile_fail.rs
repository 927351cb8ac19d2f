//! Mistakes in the `kernel!` DSL are compile errors that say what is wrong
//! and point at the offending tokens. One file per mistake in `ui/`, with
//! the expected compiler output in the `.stderr` beside it; regenerate with
//! `TRYBUILD=overwrite cargo test -p fmm-dsl-errors --test compile_fail`.
//! The cases call `fmm_macros::kernel!`: every mistake is found while the
//! macro expands, so trybuild checks this crate and the macro's few
//! dependencies, not fmm-core's tree (92 s of CI's 2 cores as a test of
//! fmm-tests; 9 s here).

#[test]
fn dsl_mistakes_are_compile_errors_with_spans() {
    let t = trybuild::TestCases::new();
    // No pass cases (valid kernels are the suite's `custom_kernels`):
    // with none, trybuild checks without generating code.
    t.compile_fail("tests/ui/*.rs");
}
