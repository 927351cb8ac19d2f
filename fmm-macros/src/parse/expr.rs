//! Expressions: syn's expression tree converted to the AST's, refusing
//! what the DSL does not have with a message saying what it does have.

use fmm_codegen::ast::{self, BinOp, UnOp};
use proc_macro2::Span;
use quote::ToTokens;
use syn::Ident;

use super::spans::Spans;

/// What the body's expressions may use, quoted by the "unsupported" errors.
const EXPR_FORMS: &str = "supported are numbers, names, unary `-` and `!`, `+ - * /`, \
     comparisons `< <= > >= == !=`, `&&` and `||`, calls `f(x, ..)` and `x.f(..)`, \
     components `v.x` / `v.y` / `v.z`, parentheses and `if c { a } else { b }`";

/// Converts a body expression. Names and function names are not checked
/// here: `lower` knows what is in scope and reports with the spans.
pub(super) fn convert_expr(e: &syn::Expr, sp: &mut Spans) -> syn::Result<ast::Expr> {
    Ok(match e {
        syn::Expr::Lit(lit) => {
            let value = match &lit.lit {
                syn::Lit::Float(f) => {
                    check_suffix(f.suffix(), f.span())?;
                    f.base10_parse::<f64>()?
                }
                syn::Lit::Int(i) => {
                    check_suffix(i.suffix(), i.span())?;
                    i.base10_parse::<f64>()?
                }
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "only numeric literals are supported in a kernel body",
                    ))
                }
            };
            ast::Expr::Num(value, sp.range(e))
        }
        syn::Expr::Path(p) => match plain_name(e) {
            Some(id) => ast::Expr::Name(id.to_string(), sp.push(id.span())),
            None => {
                return Err(syn::Error::new_spanned(
                    p,
                    "paths are not supported in a kernel body: write a plain name \
                     (e.g. `PI`, not `std::f64::consts::PI`)",
                ))
            }
        },
        syn::Expr::Unary(u) => {
            let op = match u.op {
                syn::UnOp::Neg(_) => UnOp::Neg,
                syn::UnOp::Not(_) => UnOp::Not,
                _ => {
                    return Err(syn::Error::new_spanned(
                        u.op,
                        format!(
                            "the operator `{}` is not supported in a kernel body; only unary \
                             `-` and `!` are",
                            u.op.to_token_stream()
                        ),
                    ))
                }
            };
            let inner = convert_expr(&u.expr, sp)?;
            ast::Expr::Unary(op, Box::new(inner), sp.range(e))
        }
        syn::Expr::Binary(b) => {
            let op = convert_bin_op(&b.op)?;
            let l = convert_expr(&b.left, sp)?;
            let r = convert_expr(&b.right, sp)?;
            ast::Expr::Binary(op, Box::new(l), Box::new(r), sp.range(e))
        }
        syn::Expr::Paren(p) => convert_expr(&p.expr, sp)?,
        syn::Expr::Group(g) => convert_expr(&g.expr, sp)?,
        syn::Expr::Call(c) => {
            let Some(name) = plain_name(&c.func) else {
                return Err(syn::Error::new_spanned(
                    &c.func,
                    "only built-in functions called by a plain name are supported: `f(x, ..)`",
                ));
            };
            let args = c
                .args
                .iter()
                .map(|a| convert_expr(a, sp))
                .collect::<syn::Result<Vec<_>>>()?;
            ast::Expr::Call(name.to_string(), args, sp.range(e))
        }
        syn::Expr::MethodCall(m) => {
            if let Some(turbofish) = &m.turbofish {
                return Err(syn::Error::new_spanned(
                    turbofish,
                    "generic arguments are not supported in a kernel body",
                ));
            }
            // `x.f(a)` is `f(x, a)`, so that `r2.sqrt()` reads like Rust.
            let mut args = vec![convert_expr(&m.receiver, sp)?];
            for a in &m.args {
                args.push(convert_expr(a, sp)?);
            }
            ast::Expr::Call(m.method.to_string(), args, sp.range(e))
        }
        syn::Expr::Field(f) => {
            let component = match &f.member {
                syn::Member::Named(id) if matches!(id.to_string().as_str(), "x" | "y" | "z") => {
                    id.to_string()
                }
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        format!(
                            "`.{}` is not supported: only `.x`, `.y`, `.z` select a component of \
                             a vector",
                            other.to_token_stream()
                        ),
                    ))
                }
            };
            let base = convert_expr(&f.base, sp)?;
            ast::Expr::Component(Box::new(base), component, sp.range(e))
        }
        syn::Expr::If(i) => {
            let cond = convert_expr(&i.cond, sp)?;
            let then = single_expr(&i.then_branch, sp)?;
            let otherwise =
                match &i.else_branch {
                    None => return Err(syn::Error::new(
                        i.if_token.span,
                        "an `if` in a kernel body needs an else branch: both sides are evaluated \
                         and one is kept",
                    )),
                    Some((_, els)) => match &**els {
                        syn::Expr::Block(b) if b.label.is_none() && b.attrs.is_empty() => {
                            single_expr(&b.block, sp)?
                        }
                        // `else if`: syn nests the next `if` as the else branch.
                        syn::Expr::If(_) => convert_expr(els, sp)?,
                        other => return Err(unsupported(other)),
                    },
                };
            ast::Expr::If(
                Box::new(cond),
                Box::new(then),
                Box::new(otherwise),
                sp.range(e),
            )
        }
        other => return Err(unsupported(other)),
    })
}

/// Literal suffixes would suggest a choice of type; all arithmetic is `f64`.
fn check_suffix(suffix: &str, span: Span) -> syn::Result<()> {
    if suffix.is_empty() || suffix == "f64" {
        Ok(())
    } else {
        Err(syn::Error::new(
            span,
            format!("literal suffix `{suffix}` is not supported: all kernel arithmetic is f64"),
        ))
    }
}

/// The one expression of an `if` branch.
fn single_expr(block: &syn::Block, sp: &mut Spans) -> syn::Result<ast::Expr> {
    match block.stmts.as_slice() {
        [syn::Stmt::Expr(e, None)] => convert_expr(e, sp),
        _ => Err(syn::Error::new(
            block.brace_token.span.join(),
            "each branch of an `if` in a kernel body holds exactly one expression, without \
             `let` or `;`: bind values with `let` before the `if`",
        )),
    }
}

fn convert_bin_op(op: &syn::BinOp) -> syn::Result<BinOp> {
    Ok(match op {
        syn::BinOp::Add(_) => BinOp::Add,
        syn::BinOp::Sub(_) => BinOp::Sub,
        syn::BinOp::Mul(_) => BinOp::Mul,
        syn::BinOp::Div(_) => BinOp::Div,
        syn::BinOp::Lt(_) => BinOp::Lt,
        syn::BinOp::Le(_) => BinOp::Le,
        syn::BinOp::Gt(_) => BinOp::Gt,
        syn::BinOp::Ge(_) => BinOp::Ge,
        syn::BinOp::Eq(_) => BinOp::Eq,
        syn::BinOp::Ne(_) => BinOp::Ne,
        syn::BinOp::And(_) => BinOp::And,
        syn::BinOp::Or(_) => BinOp::Or,
        syn::BinOp::AddAssign(_)
        | syn::BinOp::SubAssign(_)
        | syn::BinOp::MulAssign(_)
        | syn::BinOp::DivAssign(_)
        | syn::BinOp::RemAssign(_)
        | syn::BinOp::BitXorAssign(_)
        | syn::BinOp::BitAndAssign(_)
        | syn::BinOp::BitOrAssign(_)
        | syn::BinOp::ShlAssign(_)
        | syn::BinOp::ShrAssign(_) => {
            return Err(syn::Error::new_spanned(
                op,
                format!(
                    "`{}` cannot appear inside an expression: accumulation `OUTPUT += EXPR;` \
                     is a statement of its own",
                    op.to_token_stream()
                ),
            ))
        }
        _ => {
            return Err(syn::Error::new_spanned(
                op,
                format!(
                    "the operator `{}` is not supported in a kernel body; supported are \
                     `+ - * /`, comparisons `< <= > >= == !=`, and `&&` / `||`",
                    op.to_token_stream()
                ),
            ))
        }
    })
}

/// The error for an expression kind the DSL does not have.
fn unsupported(e: &syn::Expr) -> syn::Error {
    let what = match e {
        syn::Expr::Array(_) | syn::Expr::Repeat(_) => "an array",
        syn::Expr::Assign(_) => "an assignment",
        syn::Expr::Async(_) => "an async block",
        syn::Expr::Await(_) => "`.await`",
        syn::Expr::Block(_) => "a block",
        syn::Expr::Break(_) => "`break`",
        syn::Expr::Cast(_) => "a cast",
        syn::Expr::Closure(_) => "a closure",
        syn::Expr::Const(_) => "a const block",
        syn::Expr::Continue(_) => "`continue`",
        syn::Expr::ForLoop(_) => "a `for` loop",
        syn::Expr::Index(_) => "indexing",
        syn::Expr::Infer(_) => "`_`",
        syn::Expr::Let(_) => "a `let` expression",
        syn::Expr::Loop(_) => "a `loop`",
        syn::Expr::Macro(_) => "a macro invocation",
        syn::Expr::Match(_) => "a `match`",
        syn::Expr::Range(_) => "a range",
        syn::Expr::RawAddr(_) | syn::Expr::Reference(_) => "a reference",
        syn::Expr::Return(_) => "`return`",
        syn::Expr::Struct(_) => "a struct literal",
        syn::Expr::Try(_) => "`?`",
        syn::Expr::TryBlock(_) => "a try block",
        syn::Expr::Tuple(_) => "a tuple",
        syn::Expr::Unsafe(_) => "an unsafe block",
        syn::Expr::While(_) => "a `while` loop",
        syn::Expr::Yield(_) => "`yield`",
        _ => "this kind of expression",
    };
    syn::Error::new_spanned(
        e,
        format!("unsupported expression in a kernel body: {what}; {EXPR_FORMS}"),
    )
}

/// The identifier of a path expression that is one plain name.
pub(super) fn plain_name(e: &syn::Expr) -> Option<&Ident> {
    match e {
        syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
}
