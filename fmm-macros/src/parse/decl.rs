//! The kernel and its declarations: the doc comment and attributes,
//! `kernel NAME { .. }`, and `param`, `source`, `target`, `output`,
//! `require`, `strength` and `far_field` items; anything else is a body
//! statement.

use fmm_codegen::ast::{self, Decl, FarFieldSpec, KernelSpec, Shape};
use proc_macro2::Span;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::{token, Attribute, Ident, Token, Visibility};

use super::expr::convert_expr;
use super::far_field::parse_far_field;
use super::kw;
use super::spans::{error_at, token_range, Spans};
use super::stmt::parse_stmt;

pub(super) fn parse_top(
    input: ParseStream,
    sp: &mut Spans,
) -> syn::Result<(Visibility, Vec<Attribute>, KernelSpec)> {
    let (doc, attrs) = split_doc(input.call(Attribute::parse_outer)?);
    let vis: Visibility = input.parse()?;
    if !input.peek(kw::kernel) {
        return Err(input.error("expected `kernel NAME { ... }`"));
    }
    input.parse::<kw::kernel>()?;
    let name: Ident = input.parse()?;
    if !input.peek(token::Brace) {
        return Err(input.error("expected `{` opening the kernel's declarations and body"));
    }
    let content;
    syn::braced!(content in input);

    let mut spec = KernelSpec {
        name: name.to_string(),
        name_span: sp.push(name.span()),
        doc,
        params: Vec::new(),
        sources: Vec::new(),
        targets: Vec::new(),
        outputs: Vec::new(),
        strength: None,
        far_field: FarFieldSpec::None,
        requires: Vec::new(),
        cutoff: None,
        body: Vec::new(),
    };
    let mut far_field_seen = false;
    while !content.is_empty() {
        parse_item(&content, sp, &mut spec, &mut far_field_seen)?;
    }
    if !input.is_empty() {
        return Err(input.error(
            "unexpected tokens after the kernel: one `kernel!` invocation declares one kernel",
        ));
    }
    Ok((vis, attrs, spec))
}

/// Separates `///` comments (`#[doc = "..."]`) from the attributes that are
/// passed through. One leading space per line is dropped, as rustdoc does.
/// A doc attribute that is not a string literal (`#[doc(hidden)]`,
/// `#[doc = include_str!(..)]`) is passed through untouched.
fn split_doc(all: Vec<Attribute>) -> (String, Vec<Attribute>) {
    let mut lines = Vec::new();
    let mut rest = Vec::new();
    for attr in all {
        if let syn::Meta::NameValue(nv) = &attr.meta {
            if nv.path.is_ident("doc") {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
                    let line = s.value();
                    lines.push(line.strip_prefix(' ').unwrap_or(&line).to_string());
                    continue;
                }
            }
        }
        rest.push(attr);
    }
    (lines.join("\n"), rest)
}

/// Whether the next tokens are a declaration introduced by keyword `K`.
/// The keywords are not reserved, so `output += x;` (an output that happens
/// to be called `output`) is a statement, not a declaration.
fn starts_decl<K: syn::parse::Peek>(input: ParseStream, keyword: K) -> bool {
    input.peek(keyword)
        && !(input.peek2(Token![=])
            || input.peek2(Token![+=])
            || input.peek2(Token![-=])
            || input.peek2(Token![*=])
            || input.peek2(Token![/=]))
}

/// One declaration or body statement.
fn parse_item(
    input: ParseStream,
    sp: &mut Spans,
    spec: &mut KernelSpec,
    far_field_seen: &mut bool,
) -> syn::Result<()> {
    // A stray `;` is an empty statement, as in Rust.
    if input.peek(Token![;]) {
        input.parse::<Token![;]>()?;
    } else if starts_decl(input, kw::param) {
        input.parse::<kw::param>()?;
        spec.params.push(parse_decl(input, sp, "parameter")?);
    } else if starts_decl(input, kw::source) {
        input.parse::<kw::source>()?;
        spec.sources.push(parse_decl(input, sp, "source field")?);
    } else if starts_decl(input, kw::target) {
        input.parse::<kw::target>()?;
        spec.targets.push(parse_decl(input, sp, "target field")?);
    } else if starts_decl(input, kw::output) {
        input.parse::<kw::output>()?;
        spec.outputs.push(parse_decl(input, sp, "output")?);
    } else if starts_decl(input, kw::require) {
        // `require COND;`: a check of the inputs, not part of the body.
        input.parse::<kw::require>()?;
        let cond: syn::Expr = input.parse()?;
        let semi = expect_semi(input, cond.span(), "the requirement")?;
        let (first, _) = token_range(&cond);
        let text = quote::quote!(#cond).to_string();
        let converted = convert_expr(&cond, sp)?;
        spec.requires.push(ast::Require {
            cond: converted,
            text,
            span: sp.push_range(first, semi),
        });
    } else if starts_decl(input, kw::cutoff) {
        // `cutoff RC;`: the pairs' truncation radius, of the parameters.
        let keyword = input.parse::<kw::cutoff>()?;
        let value: syn::Expr = input.parse()?;
        let semi = expect_semi(input, value.span(), "the cutoff")?;
        if spec.cutoff.is_some() {
            return Err(syn::Error::new(
                keyword.span,
                "duplicate `cutoff`: a kernel has one truncation radius",
            ));
        }
        let (first, _) = token_range(&value);
        let text = quote::quote!(#value).to_string();
        let converted = convert_expr(&value, sp)?;
        spec.cutoff = Some(ast::Cutoff {
            value: converted,
            text,
            span: sp.push_range(first, semi),
        });
    } else if starts_decl(input, kw::strength) {
        let keyword = input.parse::<kw::strength>()?;
        let decl = parse_strength(input, sp, keyword.span)?;
        if let Some(first) = &spec.strength {
            return Err(error_at(
                sp.get(decl.span),
                &format!(
                    "duplicate `strength`: a kernel has one additive source strength, and `{}` is \
                     it already (a vector strength is one vec3 source field)",
                    first.field
                ),
            ));
        }
        spec.strength = Some(decl);
    } else if starts_decl(input, kw::far_field) {
        let keyword = input.parse::<kw::far_field>()?;
        let far = parse_far_field(input, sp)?;
        if *far_field_seen {
            return Err(syn::Error::new(
                keyword.span,
                "duplicate `far_field`: a kernel has at most one far-field declaration",
            ));
        }
        *far_field_seen = true;
        spec.far_field = far;
    } else {
        spec.body.push(parse_stmt(input, sp)?);
    }
    Ok(())
}

/// `FIELD;` after `strength` (at `keyword`). Whether `FIELD` is a source
/// field is lowering's to check; a shape here would repeat (or contradict)
/// the field's own.
fn parse_strength(
    input: ParseStream,
    sp: &mut Spans,
    keyword: Span,
) -> syn::Result<ast::StrengthDecl> {
    if !input.peek(Ident) {
        return Err(input.error(
            "expected the name of the source field that is the strength: `strength FIELD;`",
        ));
    }
    let field: Ident = input.parse()?;
    if input.peek(Token![:]) {
        return Err(syn::Error::new(
            input.parse::<Token![:]>()?.span,
            format!(
                "the strength has the shape of the source field it names: write `strength {field};` \
                 and give the shape where the field is declared (`source {field}: vec3;`)"
            ),
        ));
    }
    let semi = expect_semi(input, field.span(), &format!("`strength {field}`"))?;
    Ok(ast::StrengthDecl {
        field: field.to_string(),
        field_span: sp.push(field.span()),
        span: sp.push_range(keyword, semi),
    })
}

/// `NAME;` or `NAME: SHAPE;` after a declaration keyword.
fn parse_decl(input: ParseStream, sp: &mut Spans, what: &str) -> syn::Result<Decl> {
    if !input.peek(Ident) {
        return Err(input.error(format!("expected the {what}'s name")));
    }
    let name: Ident = input.parse()?;
    let shape = if input.peek(Token![:]) {
        input.parse::<Token![:]>()?;
        parse_shape(input)?
    } else {
        Shape::Scalar
    };
    let semi = expect_semi(input, name.span(), &format!("the {what} `{name}`"))?;
    Ok(Decl {
        name: name.to_string(),
        shape,
        span: sp.push_range(name.span(), semi),
    })
}

fn parse_shape(input: ParseStream) -> syn::Result<Shape> {
    if input.peek(kw::scalar) {
        input.parse::<kw::scalar>()?;
        Ok(Shape::Scalar)
    } else if input.peek(kw::vec3) {
        input.parse::<kw::vec3>()?;
        Ok(Shape::Vec3)
    } else {
        Err(input.error("expected a shape: `scalar` or `vec3`"))
    }
}

/// Consumes the `;` ending something; returns its span. At the end of the
/// enclosing braces there is no next token to point at, so the error goes
/// to `anchor` (the thing that lacks its `;`).
pub(super) fn expect_semi(input: ParseStream, anchor: Span, what: &str) -> syn::Result<Span> {
    if input.peek(Token![;]) {
        Ok(input.parse::<Token![;]>()?.span)
    } else if input.is_empty() {
        Err(syn::Error::new(
            anchor,
            format!("expected `;` after {what}"),
        ))
    } else {
        Err(input.error(format!("expected `;` after {what}")))
    }
}
