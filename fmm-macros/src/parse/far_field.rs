//! `far_field none;` or `far_field laplace(FIELD) { OUTPUT = VALUE; .. }`.
//! Each value is kept as written; lowering splits it into a coefficient
//! and a Laplace term.

use fmm_codegen::ast::{FarFieldSpec, FarOutput};
use fmm_codegen::lower::FAR_FORMS;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{token, Ident, Token};

use super::decl::expect_semi;
use super::expr::convert_expr;
use super::kw;
use super::spans::Spans;

/// After `far_field`: `none;` or `laplace(FIELD) { OUTPUT = EXPR; ... }`.
pub(super) fn parse_far_field(input: ParseStream, sp: &mut Spans) -> syn::Result<FarFieldSpec> {
    const EXPECTED: &str =
        "expected `laplace(FIELD) { OUTPUT = ...; }` or `none;` after `far_field`";
    if input.peek(kw::none) {
        let none = input.parse::<kw::none>()?;
        expect_semi(input, none.span, "`far_field none`")?;
        return Ok(FarFieldSpec::None);
    }
    if !input.peek(kw::laplace) {
        return Err(input.error(EXPECTED));
    }
    let laplace = input.parse::<kw::laplace>()?;
    if !input.peek(token::Paren) {
        return Err(syn::Error::new(
            laplace.span,
            "expected `laplace(FIELD)`, naming the source field that is the strength",
        ));
    }
    let args;
    let parens = syn::parenthesized!(args in input);
    if !args.peek(Ident) {
        return Err(syn::Error::new(
            parens.span.join(),
            "expected `laplace(FIELD)`, naming the source field that is the strength",
        ));
    }
    let strength: Ident = args.parse()?;
    if !args.is_empty() {
        return Err(args.error("`laplace(..)` takes one source field name"));
    }
    if !input.peek(token::Brace) {
        return Err(input.error(
            "expected `{ OUTPUT = ...; }` giving each output's far field after `laplace(FIELD)`",
        ));
    }
    let entries;
    syn::braced!(entries in input);
    let mut outputs = Vec::new();
    while !entries.is_empty() {
        if entries.peek(Token![;]) {
            entries.parse::<Token![;]>()?;
            continue;
        }
        outputs.push(parse_far_output(&entries, sp)?);
    }
    Ok(FarFieldSpec::Laplace {
        strength: strength.to_string(),
        strength_span: sp.push(strength.span()),
        outputs,
    })
}

/// `OUTPUT = EXPR;` inside `laplace(..) { .. }`.
fn parse_far_output(input: ParseStream, sp: &mut Spans) -> syn::Result<FarOutput> {
    if !input.peek(Ident) {
        return Err(input.error(format!("expected a far-field entry: {FAR_FORMS}")));
    }
    let output: Ident = input.parse()?;
    if !input.peek(Token![=]) || input.peek(Token![==]) {
        return Err(input.error(format!(
            "expected `=` after `{output}`: a far-field entry is `OUTPUT = COEFFICIENT * TERM;`"
        )));
    }
    input.parse::<Token![=]>()?;
    let value: syn::Expr = input.parse()?;
    let semi = expect_semi(input, value.span(), "this far-field entry")?;

    Ok(FarOutput {
        output: output.to_string(),
        value: convert_expr(&value, sp)?,
        span: sp.push_range(output.span(), semi),
    })
}
