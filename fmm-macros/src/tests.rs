//! Declarations through parsing and lowering: the checks of meaning that
//! `fmm_codegen::lower` makes, seen from the DSL as written (the compile
//! errors with their spans are pinned by the trybuild cases in `tests/ui`).

use fmm_codegen::{KernelDef, Term};
use proc_macro2::TokenStream;
use quote::quote;

/// Parses and lowers a declaration; the error's message on failure.
fn lowered(input: TokenStream) -> Result<KernelDef, String> {
    let parsed = crate::parse::parse_kernel(input).map_err(|e| format!("parse: {e}"))?;
    fmm_codegen::lower(&parsed.spec).map_err(|e| e.message)
}

/// A kernel with a vec3 strength `q`, a target vec3 `a` and one vec3
/// output `f` whose far field is `entry`: (coefficient, term).
fn far_vec3(entry: TokenStream) -> Result<(f64, Term), String> {
    let def = lowered(quote! {
        kernel K {
            source q: vec3; target a: vec3; output f: vec3;
            far_field laplace(q) { #entry }
            f += select(r2 > 0.0, rsqrt(r2), 0.0) * cross(q, d);
        }
    })?;
    let fmm_codegen::FarField::Laplace { terms, .. } = def.far_field else {
        panic!("no far field")
    };
    Ok((terms[0].coefficient, terms[0].term.clone()))
}

/// The same with a scalar strength `m` and a vec3 output.
fn far_scalar(entry: TokenStream) -> Result<(f64, Term), String> {
    let def = lowered(quote! {
        kernel K {
            source m; output f: vec3;
            far_field laplace(m) { #entry }
            f += m * select(r2 > 0.0, rsqrt(r2), 0.0) * d;
        }
    })?;
    let fmm_codegen::FarField::Laplace { terms, .. } = def.far_field else {
        panic!("no far field")
    };
    Ok((terms[0].coefficient, terms[0].term.clone()))
}

fn close(got: (f64, Term), want: (f64, Term)) {
    assert!(
        (got.0 - want.0).abs() <= 1e-15 * want.0.abs() && got.1 == want.1,
        "{got:?} != {want:?}"
    );
}

#[test]
fn far_field_entries_split_into_coefficient_and_term() {
    let pi4 = 1.0 / (4.0 * std::f64::consts::PI);
    close(
        far_vec3(quote! { f = curl / (4.0 * PI); }).unwrap(),
        (pi4, Term::Curl),
    );
    close(
        far_scalar(quote! { f = 0.5 * gradient * 2.0; }).unwrap(),
        (1.0, Term::Gradient),
    );
    close(
        far_scalar(quote! { f = 2.0 * (0.5 * gradient); }).unwrap(),
        (1.0, Term::Gradient),
    );
    close(
        far_vec3(quote! { f = -(2.0 * potential); }).unwrap(),
        (-2.0, Term::Potential),
    );
    close(
        far_vec3(quote! { f = -potential / 2.0; }).unwrap(),
        (-0.5, Term::Potential),
    );
    close(
        far_vec3(quote! { f = (1.0 + 1.0) * curl; }).unwrap(),
        (2.0, Term::Curl),
    );
    close(
        far_vec3(quote! { f = stretching(a) / (4.0 * PI); }).unwrap(),
        (pi4, Term::Stretching(0)),
    );
}

#[test]
fn far_field_entries_that_are_not_a_scaled_term_are_refused() {
    let e = far_scalar(quote! { f = 2.0 * m; }).unwrap_err();
    assert!(
        e.contains("names no Laplace term") && e.contains("potential"),
        "{e}"
    );
    let e = far_scalar(quote! { f = potential * gradient; }).unwrap_err();
    assert!(e.contains("names 2 Laplace terms"), "{e}");
    let e = far_scalar(quote! { f = gradient + 1.0; }).unwrap_err();
    assert!(
        e.contains("not used inside `+`") && e.contains("stretching(FIELD)"),
        "{e}"
    );
    let e = far_scalar(quote! { f = 1.0 / gradient; }).unwrap_err();
    assert!(e.contains("in a denominator"), "{e}");
    let e = far_scalar(quote! { f = sqrt(gradient); }).unwrap_err();
    assert!(e.contains("as an argument of `sqrt`"), "{e}");
    let e = far_vec3(quote! { f = stretching(1.0); }).unwrap_err();
    assert!(
        e.contains("`stretching` takes one target vector field"),
        "{e}"
    );
    let e = far_vec3(quote! { f = stretching(q); }).unwrap_err();
    assert!(e.contains("`q` is not a target field"), "{e}");
    let e = far_scalar(quote! { f = curl; }).unwrap_err();
    assert!(e.contains("`curl` needs a vec3 strength"), "{e}");
}
