//! Declarations through parsing and lowering: the checks of meaning that
//! `fmm_codegen::lower` makes, seen from the DSL as written (the compile
//! errors with their spans are pinned by the trybuild cases in `dsl-errors/tests/ui`).

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
            strength q;
            far_field laplace { #entry }
            f += select(r2 > 0.0, rsqrt(r2), 0.0) * cross(q, d);
        }
    })?;
    let fmm_codegen::FarField::Laplace { terms } = def.far_field else {
        panic!("no far field")
    };
    Ok((terms[0].coefficient, terms[0].term.clone()))
}

/// The same with a scalar strength `m` and a vec3 output.
fn far_scalar(entry: TokenStream) -> Result<(f64, Term), String> {
    let def = lowered(quote! {
        kernel K {
            source m; output f: vec3;
            strength m;
            far_field laplace { #entry }
            f += m * select(r2 > 0.0, rsqrt(r2), 0.0) * d;
        }
    })?;
    let fmm_codegen::FarField::Laplace { terms } = def.far_field else {
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

#[test]
fn the_strength_is_a_source_field() {
    let def = lowered(quote! {
        kernel K { source sigma; source q: vec3; strength q; output u: vec3;
            u += select(r2 > 0.0, rsqrt(r2 + sigma * sigma), 0.0) * cross(q, d); }
    })
    .unwrap();
    assert_eq!(def.strength, Some(1));
    assert_eq!(def.strength_slots(), Some(1..4));
    assert_eq!(def.far_field, fmm_codegen::FarField::None);
    let e = lowered(
        quote! { kernel K { param eps; source m; strength eps; output phi; phi += m * r; } },
    )
    .unwrap_err();
    assert!(
        e.contains("`eps` is a parameter") && e.contains("the source fields are: m"),
        "{e}"
    );
    let e = lowered(quote! { kernel K { target t; strength t; output phi; phi += t * r; } })
        .unwrap_err();
    assert!(
        e.contains("`t` is a target field") && e.contains("declares none"),
        "{e}"
    );
    let e = lowered(quote! { kernel K { source m; strength phi; output phi; phi += m * r; } })
        .unwrap_err();
    assert!(e.contains("`phi` is an output"), "{e}");
    let e = lowered(quote! { kernel K { source m; strength q; output phi; phi += m * r; } })
        .unwrap_err();
    assert!(e.contains("`q` is not a declared field"), "{e}");
}

#[test]
fn a_laplace_far_field_needs_a_strength() {
    let e = lowered(quote! {
        kernel K { source m; output phi; far_field laplace { phi = potential; }
            phi += m * select(r2 > 0.0, rsqrt(r2), 0.0); }
    })
    .unwrap_err();
    assert!(e.contains("declares none: add `strength FIELD;`"), "{e}");
}

/// A kernel with strength `m` (and a parameter, a core radius and a target
/// field that are not strengths) whose one output is `value`.
fn with_strength(value: TokenStream) -> Result<KernelDef, String> {
    lowered(quote! {
        kernel K { param eps; source m; source sigma; target t; strength m; output phi;
            let inv = select(r2 > 0.0, rsqrt(r2 + eps * eps), 0.0);
            phi += #value; }
    })
}

#[test]
fn contributions_must_be_linear_in_the_strength() {
    for linear in [
        quote! { m * inv },
        quote! { -m * inv * exp(-r / sigma) * t },
        quote! { (m * 2.0 + m / sigma) * inv * inv },
        quote! { select(r < sigma, m * r2, m * inv) * inv },
        quote! { if m * t > 0.0 { 0.0 } else { 0.0 } + m * inv },
    ] {
        with_strength(linear.clone()).unwrap_or_else(|e| panic!("{linear}: {e}"));
    }
    for nonlinear in [
        quote! { m * m * inv },
        quote! { abs(m) * inv },
        quote! { (m + 1e-3) * inv },
        quote! { exp(m) * inv - inv },
        quote! { max(m, 0.0) * inv },
        quote! { select(m > 0.0, m, 0.0) * inv },
        quote! { m * inv + sigma * inv * 1e-6 },
    ] {
        let e = with_strength(nonlinear.clone())
            .err()
            .unwrap_or_else(|| panic!("{nonlinear} passed as linear in m"));
        assert!(
            e.contains("the outputs are not linear in `m`") && e.contains("`phi` does not"),
            "{nonlinear}: {e}"
        );
    }
}

#[test]
fn vec3_strengths_are_checked_component_by_component() {
    let ok = lowered(quote! {
        kernel K { source q: vec3; strength q; output u: vec3;
            u += select(r2 > 0.0, rsqrt(r2), 0.0) * cross(q, d); }
    });
    assert!(ok.is_ok(), "{ok:?}");
    let e = lowered(quote! {
        kernel K { source q: vec3; strength q; output u: vec3;
            u += select(r2 > 0.0, rsqrt(r2), 0.0) * norm(q) * d; }
    })
    .unwrap_err();
    assert!(e.contains("not linear in `q`") && e.contains("`u_"), "{e}");
}
