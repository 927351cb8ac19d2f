//! Mistakes in the `kernel!` DSL are compile errors that say what is wrong
//! and point at the offending tokens. One file per mistake in `ui/`, with
//! the expected compiler output in the `.stderr` beside it; regenerate with
//! `TRYBUILD=overwrite cargo test -p fmm-tests --test compile_fail`.

#[test]
fn dsl_mistakes_are_compile_errors_with_spans() {
    let t = trybuild::TestCases::new();
    // No pass cases (valid kernels are the suite's `custom_kernels`):
    // with none, trybuild checks without generating code.
    t.compile_fail("ui/*.rs");
}
