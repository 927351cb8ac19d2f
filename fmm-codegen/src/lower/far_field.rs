//! The far-field declaration: each output as a constant coefficient times
//! a Laplace term of the declared strength.

use super::expr::{Lowerer, Value};
use super::{err, names, Error};
use crate::ast::{Expr, FarFieldSpec, KernelSpec, LaplaceTerm, Shape, Span};
use crate::kernel::{FarField, FarTerm, Field, Term};

pub(super) fn lower_far_field(
    spec: &KernelSpec,
    sources: &[Field],
    targets: &[Field],
    outputs: &[Field],
) -> Result<FarField, Error> {
    let FarFieldSpec::Laplace {
        strength,
        strength_span,
        outputs: far_outputs,
    } = &spec.far_field
    else {
        return Ok(FarField::None);
    };
    let Some(si) = sources.iter().position(|s| &s.name == strength) else {
        return err(
            *strength_span,
            format!("the far-field strength `{strength}` must be a source field"),
        );
    };
    let strength_shape = sources[si].shape;
    let mut terms = Vec::new();
    for fo in far_outputs {
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
        let (term, want_strength, want_out) = match &fo.term {
            LaplaceTerm::Potential => (Term::Potential, strength_shape, strength_shape),
            LaplaceTerm::Gradient => (Term::Gradient, Shape::Scalar, Shape::Vec3),
            LaplaceTerm::Curl => (Term::Curl, Shape::Vec3, Shape::Vec3),
            LaplaceTerm::Stretching(t) => {
                let Some(ti) = targets.iter().position(|f| &f.name == t) else {
                    return err(
                        fo.term_span,
                        format!(
                            "stretching needs a target vec3 field, and `{t}` is not a target field"
                        ),
                    );
                };
                if targets[ti].shape != Shape::Vec3 {
                    return err(
                        fo.term_span,
                        format!("stretching needs a target vec3 field, and `{t}` is a scalar"),
                    );
                }
                (Term::Stretching(ti), Shape::Vec3, Shape::Vec3)
            }
        };
        let tname = fo.term.name();
        if want_strength != strength_shape {
            let hint = match strength_shape {
                Shape::Vec3 => "a vec3 strength has `potential`, `curl` and `stretching(FIELD)`",
                Shape::Scalar => "a scalar strength has `potential` and `gradient`",
            };
            return err(
                fo.term_span,
                format!(
                    "`{tname}` needs a {} strength, but `{strength}` is a {}; {hint}",
                    want_strength.name(),
                    strength_shape.name()
                ),
            );
        }
        if want_out != out_shape {
            return err(
                fo.term_span,
                format!(
                    "`{tname}` of `{strength}` is a {}, but output `{}` is a {}",
                    want_out.name(),
                    fo.output,
                    out_shape.name()
                ),
            );
        }
        let coefficient = constant_expr(&fo.coefficient)?;
        terms.push(FarTerm {
            output: oi,
            coefficient,
            term,
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
    Ok(FarField::Laplace {
        strength: si,
        terms,
    })
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
