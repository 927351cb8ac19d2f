//! The body's expressions: names resolved, shapes checked, vectors split
//! into components, and the scalar operations added to the IR graph.

use std::collections::HashMap;

use super::{err, functions, Error};
use crate::ast::{BinOp, Expr, Shape, Span, UnOp};
use crate::ir::{Cmp, Func, Graph, Node, NodeId};
use crate::kernel::Field;

/// A typed value during lowering.
#[derive(Clone, Copy, Debug)]
pub(super) enum Value {
    Scalar(NodeId),
    Vec3([NodeId; 3]),
    Bool(NodeId),
}

impl Value {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Value::Scalar(_) => "a scalar",
            Value::Vec3(_) => "a vec3",
            Value::Bool(_) => "a boolean",
        }
    }
}

pub(super) struct Lowerer {
    pub(super) g: Graph,
    pub(super) names: HashMap<String, Value>,
    /// Names whose value is computed only when first used (`r`), so an
    /// unused built-in costs nothing.
    pub(super) lazy_r: bool,
}

pub(super) fn dot(g: &mut Graph, a: [NodeId; 3], b: [NodeId; 3]) -> NodeId {
    let xx = g.mul(a[0], b[0]);
    let yy = g.mul(a[1], b[1]);
    let zz = g.mul(a[2], b[2]);
    let s = g.add(xx, yy);
    g.add(s, zz)
}

fn cross(g: &mut Graph, a: [NodeId; 3], b: [NodeId; 3]) -> [NodeId; 3] {
    let mut c = |i: usize, j: usize| {
        let p = g.mul(a[i], b[j]);
        let q = g.mul(a[j], b[i]);
        g.sub(p, q)
    };
    [c(1, 2), c(2, 0), c(0, 1)]
}

impl Lowerer {
    /// A lowerer with the declared parameters and fields, and `PI`, in scope.
    pub(super) fn with_fields(params: &[Field], targets: &[Field], sources: &[Field]) -> Lowerer {
        let mut lw = Lowerer {
            g: Graph::new(),
            names: HashMap::new(),
            lazy_r: false,
        };
        for (fields, make) in [
            (params, Node::Param as fn(u16) -> Node),
            (targets, Node::Tgt),
            (sources, Node::Src),
        ] {
            for f in fields {
                let v = match f.shape {
                    Shape::Scalar => Value::Scalar(lw.g.leaf(make(f.offset as u16))),
                    Shape::Vec3 => {
                        Value::Vec3([0, 1, 2].map(|c| lw.g.leaf(make((f.offset + c) as u16))))
                    }
                };
                lw.names.insert(f.name.clone(), v);
            }
        }
        let pi = lw.g.constant_node(std::f64::consts::PI);
        lw.names.insert("PI".into(), Value::Scalar(pi));
        lw
    }

    fn name(&mut self, name: &str, span: Span) -> Result<Value, Error> {
        if let Some(v) = self.names.get(name) {
            return Ok(*v);
        }
        if name == "r" && self.lazy_r {
            let Value::Scalar(r2) = self.names["r2"] else {
                unreachable!("r2 is a scalar")
            };
            let r = self.g.call(Func::SQRT, &[r2]);
            self.names.insert("r".into(), Value::Scalar(r));
            return Ok(Value::Scalar(r));
        }
        let mut known: Vec<&str> = self.names.keys().map(|s| s.as_str()).collect();
        if self.lazy_r {
            known.push("r");
        }
        known.sort();
        known.dedup();
        err(
            span,
            format!("unknown name `{name}`; in scope are: {}", known.join(", ")),
        )
    }

    pub(super) fn scalar(&mut self, e: &Expr, what: &str) -> Result<NodeId, Error> {
        match self.expr(e)? {
            Value::Scalar(x) => Ok(x),
            v => err(
                e.span(),
                format!("{what} must be a scalar, but this is {}", v.kind()),
            ),
        }
    }

    fn vector(&mut self, e: &Expr, what: &str) -> Result<[NodeId; 3], Error> {
        match self.expr(e)? {
            Value::Vec3(x) => Ok(x),
            v => err(
                e.span(),
                format!("{what} must be a vec3, but this is {}", v.kind()),
            ),
        }
    }

    pub(super) fn boolean(&mut self, e: &Expr, what: &str) -> Result<NodeId, Error> {
        match self.expr(e)? {
            Value::Bool(x) => Ok(x),
            v => err(
                e.span(),
                format!(
                    "{what} must be a comparison (such as `r2 > 0.0`), but this is {}",
                    v.kind()
                ),
            ),
        }
    }

    pub(super) fn expr(&mut self, e: &Expr) -> Result<Value, Error> {
        match e {
            Expr::Num(x, _) => Ok(Value::Scalar(self.g.constant_node(*x))),
            Expr::Name(n, s) => self.name(n, *s),
            Expr::Unary(UnOp::Neg, a, _) => match self.expr(a)? {
                Value::Scalar(x) => Ok(Value::Scalar(self.g.neg(x))),
                Value::Vec3(v) => Ok(Value::Vec3(v.map(|x| self.g.neg(x)))),
                Value::Bool(_) => err(a.span(), "cannot negate a boolean with `-`; use `!`"),
            },
            Expr::Unary(UnOp::Not, a, _) => {
                let x = self.boolean(a, "the operand of `!`")?;
                Ok(Value::Bool(self.g.not(x)))
            }
            Expr::Binary(op, a, b, span) => self.binary(*op, a, b, *span),
            Expr::Call(f, args, span) => self.call(f, args, *span),
            Expr::Component(v, c, span) => {
                let x = self.vector(v, &format!("the operand of `.{c}`"))?;
                let i = match c.as_str() {
                    "x" => 0,
                    "y" => 1,
                    "z" => 2,
                    _ => {
                        return err(
                            *span,
                            format!("a vec3 has components .x, .y and .z, not .{c}"),
                        )
                    }
                };
                Ok(Value::Scalar(x[i]))
            }
            Expr::If(c, a, b, _) => {
                let c = self.boolean(c, "the condition of an `if`")?;
                let (va, vb) = (self.expr(a)?, self.expr(b)?);
                self.select(c, va, vb, b.span())
            }
        }
    }

    fn select(&mut self, c: NodeId, a: Value, b: Value, span: Span) -> Result<Value, Error> {
        match (a, b) {
            (Value::Scalar(x), Value::Scalar(y)) => Ok(Value::Scalar(self.g.select(c, x, y))),
            (Value::Vec3(x), Value::Vec3(y)) => {
                Ok(Value::Vec3([0, 1, 2].map(|i| self.g.select(c, x[i], y[i]))))
            }
            (a, b) => err(
                span,
                format!(
                    "both branches must have the same shape, but one is {} and the other {}",
                    a.kind(),
                    b.kind()
                ),
            ),
        }
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr, span: Span) -> Result<Value, Error> {
        use Value::*;
        if matches!(op, BinOp::And | BinOp::Or) {
            let x = self.boolean(a, "an operand of `&&`/`||`")?;
            let y = self.boolean(b, "an operand of `&&`/`||`")?;
            return Ok(Bool(match op {
                BinOp::And => self.g.and(x, y),
                _ => self.g.or(x, y),
            }));
        }
        let cmp = match op {
            BinOp::Lt => Some(Cmp::Lt),
            BinOp::Le => Some(Cmp::Le),
            BinOp::Gt => Some(Cmp::Gt),
            BinOp::Ge => Some(Cmp::Ge),
            BinOp::Eq => Some(Cmp::Eq),
            BinOp::Ne => Some(Cmp::Ne),
            _ => None,
        };
        if let Some(c) = cmp {
            let x = self.scalar(a, "an operand of a comparison")?;
            let y = self.scalar(b, "an operand of a comparison")?;
            return Ok(Bool(self.g.compare(c, x, y)));
        }
        let (va, vb) = (self.expr(a)?, self.expr(b)?);
        let g = &mut self.g;
        let arith = |g: &mut Graph, x: NodeId, y: NodeId| match op {
            BinOp::Add => g.add(x, y),
            BinOp::Sub => g.sub(x, y),
            BinOp::Mul => g.mul(x, y),
            _ => g.div(x, y),
        };
        match (va, vb) {
            (Scalar(x), Scalar(y)) => Ok(Scalar(arith(g, x, y))),
            (Vec3(x), Vec3(y)) if matches!(op, BinOp::Add | BinOp::Sub) => {
                Ok(Vec3([0, 1, 2].map(|i| arith(g, x[i], y[i]))))
            }
            (Vec3(_), Vec3(_)) => err(
                span,
                "cannot multiply or divide two vectors; use dot(a, b), cross(a, b), or a component such as a.x",
            ),
            (Scalar(s), Vec3(v)) if op == BinOp::Mul => Ok(Vec3(v.map(|x| g.mul(s, x)))),
            (Vec3(v), Scalar(s)) if op == BinOp::Mul => Ok(Vec3(v.map(|x| g.mul(x, s)))),
            (Vec3(v), Scalar(s)) if op == BinOp::Div => {
                // One division and three multiplications instead of three
                // divisions.
                let one = g.constant_node(1.0);
                let inv = g.div(one, s);
                Ok(Vec3(v.map(|x| g.mul(x, inv))))
            }
            (Bool(_), _) | (_, Bool(_)) => err(
                if matches!(va, Bool(_)) { a.span() } else { b.span() },
                "a comparison is a boolean and can only be used as a condition (in select or if)",
            ),
            (a, b) => err(
                span,
                format!(
                    "cannot {} {} and {}; a scalar and a vec3 can only be multiplied, or the vec3 divided by the scalar",
                    match op {
                        BinOp::Add => "add",
                        BinOp::Sub => "subtract",
                        BinOp::Div => "divide",
                        _ => "combine",
                    },
                    a.kind(),
                    b.kind()
                ),
            ),
        }
    }

    fn arity(&self, f: &str, args: &[Expr], n: usize, span: Span) -> Result<(), Error> {
        if args.len() != n {
            return err(
                span,
                format!(
                    "`{f}` takes {n} argument{}, but {} were given",
                    if n == 1 { "" } else { "s" },
                    args.len()
                ),
            );
        }
        Ok(())
    }

    fn call(&mut self, f: &str, args: &[Expr], span: Span) -> Result<Value, Error> {
        // A row of the built-in functions: scalars in, a scalar out.
        if let Some(func) = Func::named(f) {
            let n = func.row().arity;
            self.arity(f, args, n, span)?;
            let what = if n == 1 {
                format!("the argument of `{f}`")
            } else {
                format!("an argument of `{f}`")
            };
            let xs = args
                .iter()
                .map(|a| self.scalar(a, &what))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Value::Scalar(self.g.call(func, &xs)));
        }
        match f {
            "powi" => {
                self.arity(f, args, 2, span)?;
                let x = self.expr(&args[0])?;
                let n = match &args[1] {
                    Expr::Num(n, _) if n.fract() == 0.0 && n.abs() <= 64.0 => *n as i32,
                    Expr::Unary(UnOp::Neg, inner, _) if matches!(**inner, Expr::Num(n, _) if n.fract() == 0.0 && n.abs() <= 64.0) => {
                        let Expr::Num(n, _) = **inner else { unreachable!() };
                        -(n as i32)
                    }
                    other => {
                        return err(
                            other.span(),
                            "the exponent of `powi` must be an integer literal between -64 and 64; for other powers write exp(y * log(x))",
                        )
                    }
                };
                match x {
                    Value::Scalar(x) => Ok(Value::Scalar(self.g.powi(x, n))),
                    v => err(
                        args[0].span(),
                        format!(
                            "the base of `powi` must be a scalar, but this is {}",
                            v.kind()
                        ),
                    ),
                }
            }
            "select" => {
                self.arity(f, args, 3, span)?;
                let c = self.boolean(&args[0], "the first argument of `select`")?;
                let (a, b) = (self.expr(&args[1])?, self.expr(&args[2])?);
                self.select(c, a, b, args[2].span())
            }
            "dot" => {
                self.arity(f, args, 2, span)?;
                let a = self.vector(&args[0], "the first argument of `dot`")?;
                let b = self.vector(&args[1], "the second argument of `dot`")?;
                Ok(Value::Scalar(dot(&mut self.g, a, b)))
            }
            "cross" => {
                self.arity(f, args, 2, span)?;
                let a = self.vector(&args[0], "the first argument of `cross`")?;
                let b = self.vector(&args[1], "the second argument of `cross`")?;
                Ok(Value::Vec3(cross(&mut self.g, a, b)))
            }
            "norm" => {
                self.arity(f, args, 1, span)?;
                let a = self.vector(&args[0], "the argument of `norm`")?;
                let n2 = dot(&mut self.g, a, a);
                Ok(Value::Scalar(self.g.call(Func::SQRT, &[n2])))
            }
            "vec3" => {
                self.arity(f, args, 3, span)?;
                let mut c = [NodeId(0); 3];
                for (i, a) in args.iter().enumerate() {
                    c[i] = self.scalar(a, "a component of `vec3`")?;
                }
                Ok(Value::Vec3(c))
            }
            "pow" | "powf" => err(
                span,
                "`pow` is not available: use powi(x, n) for integer n, or exp(y * log(x))",
            ),
            _ => err(
                span,
                format!(
                    "unknown function `{f}`; the kernel body can call: {}",
                    functions().join(", ")
                ),
            ),
        }
    }
}
