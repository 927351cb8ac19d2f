//! The body's statements: `let NAME = EXPR;`, `OUTPUT += EXPR;` and
//! `OUTPUT -= EXPR;`.

use fmm_codegen::ast::Stmt;
use quote::ToTokens;
use syn::parse::ParseStream;
use syn::spanned::Spanned;
use syn::Token;

use super::decl::expect_semi;
use super::expr::{convert_expr, plain_name};
use super::spans::Spans;

/// The accepted statement forms, quoted by several errors.
const STMT_FORMS: &str = "expected `let NAME = EXPR;`, `OUTPUT += EXPR;` or `OUTPUT -= EXPR;` \
     (or a declaration: `param`, `source`, `target`, `output`, `require`, `strength`, \
     `far_field`)";

/// `let NAME = EXPR;`, `OUTPUT += EXPR;` or `OUTPUT -= EXPR;`.
///
/// The statement's span is that of its name (joined up to the `;` where the
/// compiler can): "unknown output" and "bound twice" errors point there.
pub(super) fn parse_stmt(input: ParseStream, sp: &mut Spans) -> syn::Result<Stmt> {
    if input.peek(Token![let]) {
        return parse_let(input, sp);
    }
    let expr: syn::Expr = input.parse()?;
    let syn::Expr::Binary(bin) = &expr else {
        if let syn::Expr::Assign(assign) = &expr {
            return Err(syn::Error::new(
                assign.eq_token.span,
                "plain assignment `NAME = EXPR;` is not allowed in a kernel body: accumulate \
                 into an output with `OUTPUT += EXPR;` / `OUTPUT -= EXPR;`, or bind a new value \
                 with `let NAME = EXPR;`",
            ));
        }
        return Err(syn::Error::new_spanned(&expr, STMT_FORMS));
    };
    let negate = match bin.op {
        syn::BinOp::AddAssign(_) => false,
        syn::BinOp::SubAssign(_) => true,
        syn::BinOp::MulAssign(_)
        | syn::BinOp::DivAssign(_)
        | syn::BinOp::RemAssign(_)
        | syn::BinOp::BitXorAssign(_)
        | syn::BinOp::BitAndAssign(_)
        | syn::BinOp::BitOrAssign(_)
        | syn::BinOp::ShlAssign(_)
        | syn::BinOp::ShrAssign(_) => {
            return Err(syn::Error::new_spanned(
                bin.op,
                format!(
                    "`{}` is not supported: outputs are sums over sources, so only `+=` and `-=` \
                     accumulate into them",
                    bin.op.to_token_stream()
                ),
            ))
        }
        _ => return Err(syn::Error::new_spanned(&expr, STMT_FORMS)),
    };
    let output = match plain_name(&bin.left) {
        Some(id) => id.clone(),
        None => {
            return Err(syn::Error::new_spanned(
                &bin.left,
                format!(
                    "the left side of `{}` must be the name of an output",
                    bin.op.to_token_stream()
                ),
            ))
        }
    };
    let value = convert_expr(&bin.right, sp)?;
    let semi = expect_semi(input, bin.op.span(), "this statement")?;
    Ok(Stmt::Accumulate {
        output: output.to_string(),
        negate,
        value,
        span: sp.push_range(output.span(), semi),
    })
}

fn parse_let(input: ParseStream, sp: &mut Spans) -> syn::Result<Stmt> {
    let let_token = input.parse::<Token![let]>()?;
    let pat = syn::Pat::parse_single(input)?;
    let name = match &pat {
        syn::Pat::Ident(p)
            if p.by_ref.is_none() && p.mutability.is_none() && p.subpat.is_none() =>
        {
            p.ident.clone()
        }
        _ => {
            return Err(syn::Error::new_spanned(
                &pat,
                "a `let` in a kernel body binds one plain name: `let NAME = EXPR;` \
                 (no patterns, no `mut`: bindings are never reassigned)",
            ))
        }
    };
    if input.peek(Token![:]) {
        return Err(syn::Error::new(
            input.parse::<Token![:]>()?.span,
            format!(
                "type annotations are not supported in a kernel body: the shape of `{name}` \
                 (scalar or vec3) is inferred; write `let {name} = EXPR;`"
            ),
        ));
    }
    if !input.peek(Token![=]) {
        let msg = format!("expected `=` after `let {name}`: `let NAME = EXPR;`");
        return Err(if input.is_empty() {
            syn::Error::new(let_token.span, msg)
        } else {
            input.error(msg)
        });
    }
    input.parse::<Token![=]>()?;
    let value: syn::Expr = input.parse()?;
    let value = convert_expr(&value, sp)?;
    let semi = expect_semi(input, name.span(), &format!("`let {name} = ...`"))?;
    Ok(Stmt::Let {
        name: name.to_string(),
        value,
        span: sp.push_range(name.span(), semi),
    })
}
