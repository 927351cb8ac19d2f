//! The far-field declaration: each output as a constant coefficient times
//! a Laplace term of the declared strength.
//!
//! An entry is written as an expression (`u = curl / (4.0 * PI);`); it is
//! split here into `coefficient * term`. Only scaling is linear in the
//! term, so only unary minus, `*` and `/` (the term in the numerator) may
//! stand between the term and the root of the expression, and the
//! coefficient must be a constant: the expansions of the FMM (and the
//! treecode's monopoles) approximate the Laplace sum
//! `Phi(x_i) = sum_j q_j / |x_i - x_j|` and its derivatives, and an output
//! is one of them times a number.

use super::expr::{Lowerer, Value};
use super::{err, names, Error};
use crate::ast::{BinOp, Expr, FarFieldSpec, KernelSpec, Shape, Span, UnOp};
use crate::kernel::{FarField, FarTerm, Field, Term};

/// The accepted far-field entry forms, quoted by the errors.
pub const FAR_FORMS: &str = "expected `OUTPUT = TERM;`, `-TERM`, `COEFFICIENT * TERM`, \
     `TERM * COEFFICIENT` or `TERM / COEFFICIENT` (with parentheses as needed), \
     where TERM is exactly one of `potential`, `gradient`, `curl` or `stretching(FIELD)` \
     and COEFFICIENT is an expression without a term";

/// What a far-field output is, in terms of the Laplace sum
/// `Phi(x_i) = sum_j q_j / |x_i - x_j|` of the declared strength `q`: the
/// term as written, before its target field is resolved.
#[derive(Clone, Debug, PartialEq)]
enum LaplaceTerm {
    /// `Phi` itself (scalar for a scalar strength, vector for a vector one).
    Potential,
    /// `grad_i Phi` (scalar strength only).
    Gradient,
    /// `curl_i Phi` (vector strength only): Biot-Savart.
    Curl,
    /// `(a_i . grad_i)(curl_i Phi)` with `a_i` the named target vector field:
    /// the vortex stretching term.
    Stretching(String),
}

impl LaplaceTerm {
    /// The term as it is written in the DSL.
    fn name(&self) -> &'static str {
        match self {
            LaplaceTerm::Potential => "potential",
            LaplaceTerm::Gradient => "gradient",
            LaplaceTerm::Curl => "curl",
            LaplaceTerm::Stretching(_) => "stretching",
        }
    }
}

/// One entry split: `coefficient * term`, with where the term is written.
struct Split {
    coefficient: Expr,
    term: LaplaceTerm,
    term_span: Span,
}

/// The far field of `spec`; `strength` is the declared strength's index in
/// `sources`, which a Laplace far field needs.
pub(super) fn lower_far_field(
    spec: &KernelSpec,
    strength: Option<usize>,
    sources: &[Field],
    targets: &[Field],
    outputs: &[Field],
) -> Result<FarField, Error> {
    let FarFieldSpec::Laplace {
        outputs: far_outputs,
        span,
    } = &spec.far_field
    else {
        return Ok(FarField::None);
    };
    let Some(si) = strength else {
        return err(
            *span,
            "a Laplace far field expands the sum of the kernel's strength (`Phi = sum_j q_j / r`), \
             and this kernel declares none: add `strength FIELD;` naming the source field that \
             adds up (a mass, a charge, a vortex strength)",
        );
    };
    let strength = &sources[si].name;
    let strength_shape = sources[si].shape;
    let mut terms = Vec::new();
    for fo in far_outputs {
        let Split {
            coefficient,
            term,
            term_span,
        } = split_entry(&fo.output, &fo.value)?;
        let Some(oi) = outputs.iter().position(|o| o.name == fo.output) else {
            let list = names(outputs);
            return err(
                fo.span,
                format!(
                    "`{}` is not an output; the declared outputs are: {list}",
                    fo.output
                ),
            );
        };
        if terms.iter().any(|t: &FarTerm| t.output == oi) {
            return err(
                fo.span,
                format!("output `{}` has two far-field expressions", fo.output),
            );
        }
        let out_shape = outputs[oi].shape;
        let (resolved, want_strength, want_out) = match &term {
            LaplaceTerm::Potential => (Term::Potential, strength_shape, strength_shape),
            LaplaceTerm::Gradient => (Term::Gradient, Shape::Scalar, Shape::Vec3),
            LaplaceTerm::Curl => (Term::Curl, Shape::Vec3, Shape::Vec3),
            LaplaceTerm::Stretching(t) => {
                let Some(ti) = targets.iter().position(|f| &f.name == t) else {
                    return err(
                        term_span,
                        format!(
                            "stretching needs a target vec3 field, and `{t}` is not a target field"
                        ),
                    );
                };
                if targets[ti].shape != Shape::Vec3 {
                    return err(
                        term_span,
                        format!("stretching needs a target vec3 field, and `{t}` is a scalar"),
                    );
                }
                (Term::Stretching(ti), Shape::Vec3, Shape::Vec3)
            }
        };
        let tname = term.name();
        if want_strength != strength_shape {
            let hint = match strength_shape {
                Shape::Vec3 => "a vec3 strength has `potential`, `curl` and `stretching(FIELD)`",
                Shape::Scalar => "a scalar strength has `potential` and `gradient`",
            };
            return err(
                term_span,
                format!(
                    "`{tname}` needs a {} strength, but `{strength}` is a {}; {hint}",
                    want_strength.name(),
                    strength_shape.name()
                ),
            );
        }
        if want_out != out_shape {
            return err(
                term_span,
                format!(
                    "`{tname}` of `{strength}` is a {}, but output `{}` is a {}",
                    want_out.name(),
                    fo.output,
                    out_shape.name()
                ),
            );
        }
        let coefficient = constant_expr(&coefficient)?;
        terms.push(FarTerm {
            output: oi,
            coefficient,
            term: resolved,
        });
    }
    for (oi, o) in outputs.iter().enumerate() {
        if !terms.iter().any(|t| t.output == oi) {
            return err(
                spec.outputs[oi].span,
                format!("output `{}` has no far-field expression; add `{} = ...;` to the far_field block or declare `far_field none;`", o.name, o.name),
            );
        }
    }
    Ok(FarField::Laplace { terms })
}

/// The first name in an expression other than `PI`.
fn first_name(e: &Expr) -> Option<(&str, Span)> {
    match e {
        Expr::Num(..) => None,
        Expr::Name(n, s) => (n != "PI").then_some((n.as_str(), *s)),
        Expr::Unary(_, a, _) | Expr::Component(a, _, _) => first_name(a),
        Expr::Binary(_, a, b, _) => first_name(a).or_else(|| first_name(b)),
        Expr::Call(_, args, _) => args.iter().find_map(first_name),
        Expr::If(c, a, b, _) => first_name(c)
            .or_else(|| first_name(a))
            .or_else(|| first_name(b)),
    }
}

/// Evaluates an expression that may only use numbers and `PI`.
fn constant_expr(e: &Expr) -> Result<f64, Error> {
    if let Some((name, span)) = first_name(e) {
        return err(
            span,
            format!("a far-field coefficient must be a constant (numbers and `PI` only), but it uses `{name}`"),
        );
    }
    // Only `PI` is in scope.
    let mut lw = Lowerer::with_fields(&[], &[], &[]);
    match lw.expr(e)? {
        Value::Scalar(x) => match lw.g.constant(x) {
            Some(c) => Ok(c),
            None => err(e.span(), "a far-field coefficient must be a constant"),
        },
        v => err(
            e.span(),
            format!(
                "a far-field coefficient must be a scalar constant, not {}",
                v.kind()
            ),
        ),
    }
}

/// Splits the value of the entry for `output` into `coefficient * term`.
fn split_entry(output: &str, value: &Expr) -> Result<Split, Error> {
    match count_terms(value) {
        1 => match split_term(value.clone())? {
            Part::Term { coef, term, span } => Ok(Split {
                coefficient: coef.unwrap_or(Expr::Num(1.0, span)),
                term,
                term_span: span,
            }),
            Part::Const(_) => unreachable!("an expression with one term splits into a term"),
        },
        0 => err(
            value.span(),
            format!("the far field of `{output}` names no Laplace term; {FAR_FORMS}"),
        ),
        n => err(
            value.span(),
            format!(
                "the far field of `{output}` names {n} Laplace terms, but exactly one is \
                 allowed; {FAR_FORMS}"
            ),
        ),
    }
}

/// Whether a node is itself a Laplace term: `potential`, `gradient`,
/// `curl` or a call of `stretching`. (The call's arguments are checked in
/// [`split_term`].)
fn is_term(e: &Expr) -> bool {
    match e {
        Expr::Name(n, _) => matches!(n.as_str(), "potential" | "gradient" | "curl"),
        Expr::Call(n, _, _) => n == "stretching",
        _ => false,
    }
}

/// How many Laplace terms occur anywhere in `e`.
fn count_terms(e: &Expr) -> usize {
    if is_term(e) {
        return 1;
    }
    match e {
        Expr::Num(..) | Expr::Name(..) => 0,
        Expr::Unary(_, a, _) | Expr::Component(a, _, _) => count_terms(a),
        Expr::Binary(_, a, b, _) => count_terms(a) + count_terms(b),
        Expr::Call(_, args, _) => args.iter().map(count_terms).sum(),
        Expr::If(c, a, b, _) => count_terms(c) + count_terms(a) + count_terms(b),
    }
}

/// A far-field expression split into a term and its coefficient.
enum Part {
    /// No term inside: part of the coefficient.
    Const(Expr),
    /// The term scaled by `coef` (`None`: by one). `span` is the term's, for
    /// the implicit `1.0` when there is no coefficient.
    Term {
        coef: Option<Expr>,
        term: LaplaceTerm,
        span: Span,
    },
}

/// Splits an expression holding exactly one term into `coef * term`. Only
/// scaling is linear in the term, so only unary minus, `*` and `/` (term in
/// the numerator) may stand between the term and the root.
fn split_term(e: Expr) -> Result<Part, Error> {
    if count_terms(&e) == 0 {
        return Ok(Part::Const(e));
    }
    let misplaced = |span: Span, place: String| {
        err(
            span,
            format!(
                "a Laplace term can only be scaled by a coefficient, not used {place}; {FAR_FORMS}"
            ),
        )
    };
    match e {
        Expr::Name(n, span) => Ok(Part::Term {
            coef: None,
            term: match n.as_str() {
                "potential" => LaplaceTerm::Potential,
                "gradient" => LaplaceTerm::Gradient,
                _ => LaplaceTerm::Curl,
            },
            span,
        }),
        Expr::Call(n, args, span) if n == "stretching" => match args.as_slice() {
            [Expr::Name(field, _)] => Ok(Part::Term {
                coef: None,
                term: LaplaceTerm::Stretching(field.clone()),
                span,
            }),
            _ => err(
                span,
                "`stretching` takes one target vector field by name: `stretching(FIELD)`",
            ),
        },
        Expr::Unary(UnOp::Neg, inner, span) => match split_term(*inner)? {
            Part::Term {
                coef,
                term,
                span: ts,
            } => Ok(Part::Term {
                coef: Some(Expr::Unary(
                    UnOp::Neg,
                    Box::new(coef.unwrap_or(Expr::Num(1.0, ts))),
                    span,
                )),
                term,
                span: ts,
            }),
            Part::Const(_) => unreachable!("the term is inside"),
        },
        Expr::Binary(BinOp::Mul, l, r, span) => match (split_term(*l)?, split_term(*r)?) {
            (
                Part::Term {
                    coef,
                    term,
                    span: ts,
                },
                Part::Const(k),
            ) => Ok(Part::Term {
                coef: Some(match coef {
                    None => k,
                    Some(c) => Expr::Binary(BinOp::Mul, Box::new(c), Box::new(k), span),
                }),
                term,
                span: ts,
            }),
            (
                Part::Const(k),
                Part::Term {
                    coef,
                    term,
                    span: ts,
                },
            ) => Ok(Part::Term {
                coef: Some(match coef {
                    None => k,
                    Some(c) => Expr::Binary(BinOp::Mul, Box::new(k), Box::new(c), span),
                }),
                term,
                span: ts,
            }),
            _ => unreachable!("exactly one side holds the one term"),
        },
        Expr::Binary(BinOp::Div, l, r, span) => {
            if count_terms(&r) > 0 {
                return misplaced(r.span(), "in a denominator".into());
            }
            match split_term(*l)? {
                Part::Term {
                    coef,
                    term,
                    span: ts,
                } => Ok(Part::Term {
                    coef: Some(Expr::Binary(
                        BinOp::Div,
                        Box::new(coef.unwrap_or(Expr::Num(1.0, ts))),
                        r,
                        span,
                    )),
                    term,
                    span: ts,
                }),
                Part::Const(_) => unreachable!("the term is in the numerator"),
            }
        }
        Expr::Binary(op, _, _, span) => misplaced(span, format!("inside `{}`", op.symbol())),
        Expr::Unary(UnOp::Not, _, span) => misplaced(span, "inside `!`".into()),
        Expr::Call(n, _, span) => misplaced(span, format!("as an argument of `{n}`")),
        Expr::Component(_, c, span) => misplaced(span, format!("with a component `.{c}`")),
        Expr::If(_, _, _, span) => misplaced(span, "inside an `if`".into()),
        Expr::Num(..) => unreachable!("a number holds no term"),
    }
}
