//! The parser's tests: what it reads, and the syntax errors it gives.

use super::*;
use fmm_codegen::ast::{self, Decl, FarFieldSpec, Shape, Stmt, UnOp};
use quote::quote;
use syn::Visibility;

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
            strength m; far_field laplace { #entry } }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    match parsed.spec.far_field {
        FarFieldSpec::Laplace { mut outputs, .. } => show(&outputs.remove(0).value),
        FarFieldSpec::None => panic!("no far field"),
    }
}

fn far_err(entry: TokenStream) -> String {
    err(quote! {
        kernel K { source m; output f; strength m; far_field laplace { #entry } }
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
            strength m;
            far_field laplace {
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

    let strength = spec.strength.as_ref().expect("a strength");
    assert_eq!(strength.field, "m");
    let FarFieldSpec::Laplace { outputs, span } = &spec.far_field else {
        panic!("expected a Laplace far field");
    };
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
    let mut all = vec![spec.name_span, strength.field_span, strength.span, *span];
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
    let p = parse_kernel(quote! { kernel K { output phi; far_field none; phi += 1.0; } }).unwrap();
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
    let e = err(quote! { kernel K { far_field dipole {} } });
    assert!(e.contains("expected `laplace { OUTPUT = ...; }`"), "{e}");
}

#[test]
fn strength_declarations() {
    let p = parse_kernel(quote! { kernel K { source q: vec3; strength q; output u: vec3; } })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.spec.strength.map(|s| s.field), Some("q".into()));
    // Not reserved: an output called `strength` is accumulated into.
    let p = parse_kernel(quote! { kernel K { output strength; strength += 1.0; } }).unwrap();
    assert!(p.spec.strength.is_none());
    let e = err(quote! { kernel K { source m; strength m; strength m; } });
    assert!(
        e.contains("duplicate `strength`") && e.contains("`m` is it already"),
        "{e}"
    );
    let e = err(quote! { kernel K { source q: vec3; strength q: vec3; } });
    assert!(e.contains("write `strength q;`"), "{e}");
    let e = err(quote! { kernel K { strength; } });
    assert!(e.contains("`strength FIELD;`"), "{e}");
    let e = err(quote! { kernel K { source m; strength m } });
    assert!(e.contains("expected `;` after `strength m`"), "{e}");
}

#[test]
fn the_first_form_of_laplace_says_what_to_write() {
    let e = err(quote! {
        kernel K { source m; output phi; far_field laplace(m) { phi = potential; } }
    });
    assert!(
        e.contains("`strength m;` and `far_field laplace { .. }`"),
        "{e}"
    );
}

#[test]
fn duplicate_far_field() {
    let e = err(quote! {
        kernel K { source m; output f; far_field none; far_field laplace { f = potential; } }
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
