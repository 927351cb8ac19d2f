//! `far_field none;` or `far_field laplace { OUTPUT = VALUE; .. }`.
//! Each value is kept as written; lowering splits it into a coefficient
//! and a Laplace term. The strength the expansions are of is declared on
//! its own (`strength FIELD;`, in [`super::decl`]).

use fmm_codegen::ast::{FarFieldSpec, FarOutput};
use fmm_codegen::lower::FAR_FORMS;
use quote::ToTokens;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{token, Ident, Token};

use super::decl::expect_semi;
use super::expr::convert_expr;
use super::kw;
use super::spans::{error_at, Spans};

/// After `far_field`: `none;` or `laplace { OUTPUT = EXPR; ... }`.
pub(super) fn parse_far_field(input: ParseStream, sp: &mut Spans) -> syn::Result<FarFieldSpec> {
    const EXPECTED: &str = "expected `laplace { OUTPUT = ...; }` or `none;` after `far_field`";
    if input.peek(kw::none) {
        let none = input.parse::<kw::none>()?;
        expect_semi(input, none.span, "`far_field none`")?;
        return Ok(FarFieldSpec::None);
    }
    if !input.peek(kw::laplace) {
        return Err(input.error(EXPECTED));
    }
    let laplace = input.parse::<kw::laplace>()?;
    if input.peek(token::Paren) {
        // The first form of the DSL named the strength here.
        let args;
        let parens = syn::parenthesized!(args in input);
        let rest: proc_macro2::TokenStream = args.parse()?;
        let field = syn::parse2::<Ident>(rest.clone())
            .map(|id| id.to_string())
            .unwrap_or_else(|_| {
                let text = rest.to_token_stream().to_string();
                if text.is_empty() {
                    "FIELD".into()
                } else {
                    text
                }
            });
        return Err(error_at(
            (laplace.span, parens.span.close()),
            &format!(
                "`laplace(..)` no longer names the strength: declare it on its own and name only \
                 the Laplace quantities here, `strength {field};` and \
                 `far_field laplace {{ .. }}`"
            ),
        ));
    }
    if !input.peek(token::Brace) {
        return Err(input
            .error("expected `{ OUTPUT = ...; }` giving each output's far field after `laplace`"));
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
        outputs,
        span: sp.push(laplace.span),
    })
}

/// `OUTPUT = EXPR;` inside `laplace { .. }`.
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
