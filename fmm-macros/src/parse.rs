//! Parsing of the `kernel!` DSL into [`fmm_codegen::ast`].
//!
//! The input is a single declaration:
//!
//! ```text
//! /// doc
//! #[derive(..)]
//! pub kernel Name {
//!     param eps;  source m;  target a: vec3;  output phi;  output acc: vec3;
//!     far_field laplace(m) { phi = -potential; acc = gradient; }   // or `far_field none;`
//!     let inv = rsqrt(r2 + eps * eps);
//!     phi -= m * inv;
//! }
//! ```
//!
//! This module only checks *syntax*: which names exist, which functions are
//! built in and whether shapes agree is the business of
//! `fmm_codegen::lower`, which reports through the spans recorded here.
//!
//! Every AST node carries an [`ast::Span`] that indexes [`Parsed::spans`].
//! A stable compiler cannot join two spans into one (`Span::join` returns
//! `None` outside nightly), so a node's span is the join of its first and
//! last tokens where that works, and otherwise its most telling token: the
//! operator of a binary expression, the method of a method call, the
//! component of `v.x`, the name of a declaration or statement.

use fmm_codegen::ast::{self, BinOp, Decl, FarFieldSpec, FarOutput, KernelSpec};
use fmm_codegen::ast::{Shape, Stmt, UnOp};
use fmm_codegen::lower::FAR_FORMS;
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{token, Attribute, Ident, Token, Visibility};

/// The DSL's own keywords. They are ordinary identifiers to Rust, so a
/// keyword only starts a declaration when it is not the target of an
/// assignment (see [`starts_decl`]).
mod kw {
    syn::custom_keyword!(kernel);
    syn::custom_keyword!(param);
    syn::custom_keyword!(source);
    syn::custom_keyword!(target);
    syn::custom_keyword!(output);
    syn::custom_keyword!(far_field);
    syn::custom_keyword!(require);
    syn::custom_keyword!(laplace);
    syn::custom_keyword!(none);
    syn::custom_keyword!(scalar);
    syn::custom_keyword!(vec3);
}

/// A parsed `kernel!` invocation.
pub struct Parsed {
    pub vis: syn::Visibility,
    /// Non-doc outer attributes on the kernel (e.g. `#[derive(..)]`), to be
    /// passed through to the generated type. Doc comments go to `spec.doc`.
    pub attrs: Vec<syn::Attribute>,
    pub spec: KernelSpec,
    /// `ast::Span(k)` refers to `spans[k]`: the first and last token of
    /// the syntax, so errors underline all of it (a stable compiler cannot
    /// join two spans into one, but an error can cover a token range).
    pub spans: Vec<(Span, Span)>,
}

/// Parses the whole macro input.
pub fn parse_kernel(input: TokenStream) -> syn::Result<Parsed> {
    let mut spans = Spans::default();
    let (vis, attrs, spec) = (|input: ParseStream| parse_top(input, &mut spans)).parse2(input)?;
    Ok(Parsed {
        vis,
        attrs,
        spec,
        spans: spans.0,
    })
}

/// The span table that `ast::Span` indexes: token ranges.
#[derive(Default)]
struct Spans(Vec<(Span, Span)>);

impl Spans {
    /// Records one token.
    fn push(&mut self, span: Span) -> ast::Span {
        self.push_range(span, span)
    }

    /// Records the tokens `first ..= last`.
    fn push_range(&mut self, first: Span, last: Span) -> ast::Span {
        let k = u32::try_from(self.0.len()).expect("more than u32::MAX spans");
        self.0.push((first, last));
        ast::Span(k)
    }

    /// Records all the tokens of a piece of syntax.
    fn range(&mut self, syntax: &impl ToTokens) -> ast::Span {
        let (first, last) = token_range(syntax);
        self.push_range(first, last)
    }
}

/// The spans of the first and last token of a piece of syntax.
pub fn token_range(syntax: &impl ToTokens) -> (Span, Span) {
    let mut tokens = syntax.to_token_stream().into_iter();
    let first = tokens.next().map_or_else(Span::call_site, |t| t.span());
    let last = tokens.last().map_or(first, |t| t.span());
    (first, last)
}

/// The accepted statement forms, quoted by several errors.
const STMT_FORMS: &str = "expected `let NAME = EXPR;`, `OUTPUT += EXPR;` or `OUTPUT -= EXPR;` \
     (or a declaration: `param`, `source`, `target`, `output`, `far_field`)";

/// What the body's expressions may use, quoted by the "unsupported" errors.
const EXPR_FORMS: &str = "supported are numbers, names, unary `-` and `!`, `+ - * /`, \
     comparisons `< <= > >= == !=`, `&&` and `||`, calls `f(x, ..)` and `x.f(..)`, \
     components `v.x` / `v.y` / `v.z`, parentheses and `if c { a } else { b }`";

// ---------------------------------------------------------------------------
// Declaration level
// ---------------------------------------------------------------------------

fn parse_top(
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
        far_field: FarFieldSpec::None,
        requires: Vec::new(),
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
fn expect_semi(input: ParseStream, anchor: Span, what: &str) -> syn::Result<Span> {
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

// ---------------------------------------------------------------------------
// Far field
// ---------------------------------------------------------------------------

/// After `far_field`: `none;` or `laplace(FIELD) { OUTPUT = EXPR; ... }`.
fn parse_far_field(input: ParseStream, sp: &mut Spans) -> syn::Result<FarFieldSpec> {
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

// ---------------------------------------------------------------------------
// Body statements
// ---------------------------------------------------------------------------

/// `let NAME = EXPR;`, `OUTPUT += EXPR;` or `OUTPUT -= EXPR;`.
///
/// The statement's span is that of its name (joined up to the `;` where the
/// compiler can): "unknown output" and "bound twice" errors point there.
fn parse_stmt(input: ParseStream, sp: &mut Spans) -> syn::Result<Stmt> {
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

/// The identifier of a path expression that is one plain name.
fn plain_name(e: &syn::Expr) -> Option<&Ident> {
    match e {
        syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------

/// Converts a body expression. Names and function names are not checked
/// here: `lower` knows what is in scope and reports with the spans.
fn convert_expr(e: &syn::Expr, sp: &mut Spans) -> syn::Result<ast::Expr> {
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

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    /// An expression as an s-expression without spans, for compact checks.
    fn show(e: &ast::Expr) -> String {
        match e {
            ast::Expr::Num(v, _) => format!("{v}"),
            ast::Expr::Name(n, _) => n.clone(),
            ast::Expr::Unary(UnOp::Neg, a, _) => format!("(neg {})", show(a)),
            ast::Expr::Unary(UnOp::Not, a, _) => format!("(not {})", show(a)),
            ast::Expr::Binary(op, a, b, _) => {
                format!("({} {} {})", op.symbol(), show(a), show(b))
            }
            ast::Expr::Call(f, args, _) => {
                let args: Vec<_> = args.iter().map(show).collect();
                format!("({f} {})", args.join(" "))
            }
            ast::Expr::Component(v, c, _) => format!("(.{c} {})", show(v)),
            ast::Expr::If(c, a, b, _) => format!("(if {} {} {})", show(c), show(a), show(b)),
        }
    }

    /// Every span of an expression, for checking that they index the table.
    fn expr_spans(e: &ast::Expr, out: &mut Vec<ast::Span>) {
        out.push(e.span());
        match e {
            ast::Expr::Num(..) | ast::Expr::Name(..) => {}
            ast::Expr::Unary(_, a, _) | ast::Expr::Component(a, _, _) => expr_spans(a, out),
            ast::Expr::Binary(_, a, b, _) => {
                expr_spans(a, out);
                expr_spans(b, out);
            }
            ast::Expr::Call(_, args, _) => args.iter().for_each(|a| expr_spans(a, out)),
            ast::Expr::If(c, a, b, _) => {
                expr_spans(c, out);
                expr_spans(a, out);
                expr_spans(b, out);
            }
        }
    }

    fn err(input: TokenStream) -> String {
        match parse_kernel(input) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    /// Wraps body lines in a minimal kernel and returns the error text.
    fn body_err(body: TokenStream) -> String {
        err(quote! { kernel K { source m; output phi; output acc: vec3; #body } })
    }

    fn body_ok(body: TokenStream) -> Vec<Stmt> {
        parse_kernel(quote! { kernel K { output phi; #body } })
            .unwrap_or_else(|e| panic!("{e}"))
            .spec
            .body
    }

    fn value(stmt: &Stmt) -> String {
        match stmt {
            Stmt::Let { value, .. } | Stmt::Accumulate { value, .. } => show(value),
        }
    }

    /// The far-field entry of a one-output kernel, as written.
    fn far(entry: TokenStream) -> String {
        let parsed = parse_kernel(quote! {
            kernel K { source m; target a: vec3; output f: vec3;
                far_field laplace(m) { #entry } }
        })
        .unwrap_or_else(|e| panic!("{e}"));
        match parsed.spec.far_field {
            FarFieldSpec::Laplace { mut outputs, .. } => show(&outputs.remove(0).value),
            FarFieldSpec::None => panic!("no far field"),
        }
    }

    fn far_err(entry: TokenStream) -> String {
        err(quote! {
            kernel K { source m; output f; far_field laplace(m) { #entry } }
        })
    }

    #[test]
    fn gravity() {
        let parsed = parse_kernel(quote! {
            /// Newtonian gravity.
            ///
            ///  Indented line.
            #[derive(Clone, Copy)]
            pub kernel Gravity {
                param eps;
                param omega: vec3;
                source m;
                source alpha_j: vec3;
                target alpha_i: vec3;
                output phi;
                output acc: vec3;
                far_field laplace(m) {
                    phi = -potential;
                    acc = gradient;
                }
                let inv = select(r2 > 0.0, rsqrt(r2 + eps * eps), 0.0);
                let k = if r2 < eps * eps { r2 / (eps * eps) } else { 1.0 };
                phi -= m * inv;
                acc += -m * inv * inv * inv * d;
                output extra: scalar;
                extra += d.x.abs() + 2;
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));

        assert!(matches!(parsed.vis, Visibility::Public(_)));
        assert_eq!(parsed.attrs.len(), 1);
        assert!(parsed.attrs[0].path().is_ident("derive"));
        let spec = &parsed.spec;
        assert_eq!(spec.name, "Gravity");
        assert_eq!(spec.doc, "Newtonian gravity.\n\n Indented line.");

        let decls = |ds: &[Decl]| -> Vec<(String, Shape)> {
            ds.iter().map(|d| (d.name.clone(), d.shape)).collect()
        };
        let s = |n: &str, sh| (n.to_string(), sh);
        assert_eq!(
            decls(&spec.params),
            [s("eps", Shape::Scalar), s("omega", Shape::Vec3)]
        );
        assert_eq!(
            decls(&spec.sources),
            [s("m", Shape::Scalar), s("alpha_j", Shape::Vec3)]
        );
        assert_eq!(decls(&spec.targets), [s("alpha_i", Shape::Vec3)]);
        assert_eq!(
            decls(&spec.outputs),
            [
                s("phi", Shape::Scalar),
                s("acc", Shape::Vec3),
                s("extra", Shape::Scalar)
            ]
        );

        let FarFieldSpec::Laplace {
            strength,
            strength_span,
            outputs,
        } = &spec.far_field
        else {
            panic!("expected a Laplace far field");
        };
        assert_eq!(strength, "m");
        assert_eq!(outputs.len(), 2);
        assert_eq!(outputs[0].output, "phi");
        assert_eq!(show(&outputs[0].value), "(neg potential)");
        assert_eq!(outputs[1].output, "acc");
        assert_eq!(show(&outputs[1].value), "gradient");

        let body: Vec<_> = spec
            .body
            .iter()
            .map(|st| match st {
                Stmt::Let { name, value, .. } => format!("let {name} = {}", show(value)),
                Stmt::Accumulate {
                    output,
                    negate,
                    value,
                    ..
                } => format!(
                    "{output} {} {}",
                    if *negate { "-=" } else { "+=" },
                    show(value)
                ),
            })
            .collect();
        assert_eq!(
            body,
            [
                "let inv = (select (> r2 0) (rsqrt (+ r2 (* eps eps))) 0)",
                "let k = (if (< r2 (* eps eps)) (/ r2 (* eps eps)) 1)",
                "phi -= (* m inv)",
                "acc += (* (* (* (* (neg m) inv) inv) inv) d)",
                "extra += (+ (abs (.x d)) 2)",
            ]
        );

        // Every span indexes the table; none is Span::NONE.
        let mut all = vec![spec.name_span, *strength_span];
        for d in spec
            .params
            .iter()
            .chain(&spec.sources)
            .chain(&spec.targets)
            .chain(&spec.outputs)
        {
            all.push(d.span);
        }
        for o in outputs {
            all.push(o.span);
            expr_spans(&o.value, &mut all);
        }
        for st in &spec.body {
            match st {
                Stmt::Let { value, span, .. } | Stmt::Accumulate { value, span, .. } => {
                    all.push(*span);
                    expr_spans(value, &mut all);
                }
            }
        }
        for span in all {
            assert_ne!(span, ast::Span::NONE);
            assert!((span.0 as usize) < parsed.spans.len());
        }
    }

    #[test]
    fn minimal_kernel_has_defaults() {
        let p = parse_kernel(quote! { kernel K { output phi; phi += 1.0; } }).unwrap();
        assert!(matches!(p.vis, Visibility::Inherited));
        assert!(p.attrs.is_empty());
        assert_eq!(p.spec.doc, "");
        assert_eq!(p.spec.far_field, FarFieldSpec::None);
        assert_eq!(p.spec.outputs[0].shape, Shape::Scalar);
    }

    #[test]
    fn far_field_none() {
        let p =
            parse_kernel(quote! { kernel K { output phi; far_field none; phi += 1.0; } }).unwrap();
        assert_eq!(p.spec.far_field, FarFieldSpec::None);
    }

    /// The parser keeps each far-field entry as written; splitting it into
    /// coefficient and term is lowering's (see `crate::tests`).
    #[test]
    fn far_field_entries_are_expressions() {
        assert_eq!(far(quote! { f = curl / (4.0 * PI); }), "(/ curl (* 4 PI))");
        assert_eq!(
            far(quote! { f = -(2.0 * potential); }),
            "(neg (* 2 potential))"
        );
        assert_eq!(
            far(quote! { f = stretching(a) / (4.0 * PI); }),
            "(/ (stretching a) (* 4 PI))"
        );
        // Not a term of the Laplace sum: still parsed, refused by lowering.
        assert_eq!(far(quote! { f = potential + 1.0; }), "(+ potential 1)");
    }

    #[test]
    fn far_field_syntax_errors() {
        let e = far_err(quote! { f += potential; });
        assert!(e.contains("expected `=` after `f`"), "{e}");
        let e = far_err(quote! { 2.0 * f; });
        assert!(e.contains("expected a far-field entry"), "{e}");
        let e = err(quote! { kernel K { far_field dipole(m) {} } });
        assert!(e.contains("expected `laplace(FIELD)"), "{e}");
    }

    #[test]
    fn duplicate_far_field() {
        let e = err(quote! {
            kernel K { source m; output f; far_field none; far_field laplace(m) { f = potential; } }
        });
        assert!(e.contains("duplicate `far_field`"), "{e}");
    }

    #[test]
    fn declaration_errors() {
        let e = err(quote! { kernel K { param x: mat3; } });
        assert!(e.contains("expected a shape: `scalar` or `vec3`"), "{e}");
        let e = err(quote! { kernel K { param x } });
        assert!(e.contains("expected `;` after the parameter `x`"), "{e}");
        let e = err(quote! { kernel K { } kernel L { } });
        assert!(
            e.contains("one `kernel!` invocation declares one kernel"),
            "{e}"
        );
        let e = err(quote! { struct K { } });
        assert!(e.contains("expected `kernel NAME"), "{e}");
    }

    #[test]
    fn keywords_are_not_reserved_in_statements() {
        let p = parse_kernel(quote! { kernel K { output output; output += 1.0; } }).unwrap();
        assert_eq!(p.spec.outputs[0].name, "output");
        assert!(matches!(&p.spec.body[0], Stmt::Accumulate { output, .. } if output == "output"));
    }

    #[test]
    fn expressions() {
        let body = body_ok(quote! {
            let a = r2.sqrt();
            let b = dot(d, d).max(1e-3);
            let c = if r2 < 1.0 { 1.0 } else if r2 < 2.0 { 2.0 } else { 3.0 };
            let e = !(a <= b) && (a != b || a == b) || a >= b;
            let f = 2;
            let g = 1.5f64 - v.z;
        });
        let got: Vec<_> = body.iter().map(value).collect();
        assert_eq!(
            got,
            [
                "(sqrt r2)",
                "(max (dot d d) 0.001)",
                "(if (< r2 1) 1 (if (< r2 2) 2 3))",
                "(|| (&& (not (<= a b)) (|| (!= a b) (== a b))) (>= a b))",
                "2",
                "(- 1.5 (.z v))",
            ]
        );
        assert!(matches!(body[4], Stmt::Let { value: ast::Expr::Num(v, _), .. } if v == 2.0));
    }

    #[test]
    fn statement_errors() {
        let e = body_err(quote! { phi = 1.0; });
        assert!(
            e.contains("plain assignment `NAME = EXPR;` is not allowed"),
            "{e}"
        );
        let e = body_err(quote! { phi *= 2.0; });
        assert!(
            e.contains("`*=` is not supported") && e.contains("only `+=` and `-=`"),
            "{e}"
        );
        let e = body_err(quote! { m * 2.0; });
        assert!(e.contains("expected `let NAME = EXPR;`"), "{e}");
        let e = body_err(quote! { acc.x += 1.0; });
        assert!(e.contains("must be the name of an output"), "{e}");
        let e = body_err(quote! { let x: f64 = 1.0; });
        assert!(e.contains("type annotations are not supported"), "{e}");
        let e = body_err(quote! { let (a, b) = 1.0; });
        assert!(e.contains("binds one plain name"), "{e}");
        let e = body_err(quote! { let mut a = 1.0; });
        assert!(e.contains("binds one plain name"), "{e}");
        let e = body_err(quote! { let a; });
        assert!(e.contains("expected `=` after `let a`"), "{e}");
        let e = body_err(quote! { let a = 1.0 });
        assert!(e.contains("expected `;` after `let a = ...`"), "{e}");
        let e = body_err(quote! { phi += 1.0 phi += 2.0; });
        assert!(e.contains("expected `;` after this statement"), "{e}");
    }

    #[test]
    fn expression_errors() {
        let e = body_err(quote! { phi += m % 2.0; });
        assert!(
            e.contains("the operator `%` is not supported") && e.contains("`&&`"),
            "{e}"
        );
        let e = body_err(quote! { phi += m ^ 2.0; });
        assert!(e.contains("the operator `^` is not supported"), "{e}");
        let e = body_err(quote! { let a = (phi += 1.0); });
        assert!(e.contains("`+=` cannot appear inside an expression"), "{e}");
        let e = body_err(quote! { phi += if m > 0.0 { 1.0 }; });
        assert!(
            e.contains("needs an else branch: both sides are evaluated"),
            "{e}"
        );
        let e = body_err(quote! { phi += if m > 0.0 { let a = 1.0; a } else { 0.0 }; });
        assert!(e.contains("exactly one expression"), "{e}");
        let e = body_err(quote! { phi += (|x| x)(m); });
        assert!(
            e.contains("only built-in functions called by a plain name"),
            "{e}"
        );
        let e = body_err(quote! { let f = |x| x; });
        assert!(
            e.contains("unsupported expression in a kernel body: a closure"),
            "{e}"
        );
        let e = body_err(quote! { phi += d[0]; });
        assert!(
            e.contains("unsupported expression in a kernel body: indexing"),
            "{e}"
        );
        let e = body_err(quote! { phi += m as f64; });
        assert!(
            e.contains("unsupported expression in a kernel body: a cast"),
            "{e}"
        );
        let e = body_err(quote! { phi += max!(m, 1.0); });
        assert!(
            e.contains("a macro invocation") && e.contains("supported are"),
            "{e}"
        );
        let e = body_err(quote! { phi += { m }; });
        assert!(
            e.contains("unsupported expression in a kernel body: a block"),
            "{e}"
        );
        let e = body_err(quote! { phi += (m, m); });
        assert!(e.contains("a tuple"), "{e}");
        let e = body_err(quote! { phi += &m; });
        assert!(e.contains("a reference"), "{e}");
        let e = body_err(quote! { phi += *m; });
        assert!(
            e.contains("the operator `*` is not supported") && e.contains("unary"),
            "{e}"
        );
        let e = body_err(quote! { phi += std::f64::consts::PI; });
        assert!(e.contains("paths are not supported"), "{e}");
        let e = body_err(quote! { phi += d.w; });
        assert!(e.contains("only `.x`, `.y`, `.z`"), "{e}");
        let e = body_err(quote! { phi += d.0; });
        assert!(e.contains("only `.x`, `.y`, `.z`"), "{e}");
        let e = body_err(quote! { phi += 1u32; });
        assert!(e.contains("literal suffix `u32`"), "{e}");
        let e = body_err(quote! { phi += "one"; });
        assert!(e.contains("only numeric literals"), "{e}");
    }
}
