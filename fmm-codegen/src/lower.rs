//! Type checking and lowering of a [`KernelSpec`] to a [`KernelDef`].
//!
//! Vectors are split into their components here, names are resolved, and
//! every mistake is reported with the [`Span`] of the expression at fault.

use std::collections::HashMap;

use crate::ast::{
    BinOp, Decl, Expr, FarFieldSpec, KernelSpec, LaplaceTerm, Shape, Span, Stmt, UnOp,
};
use crate::eval::{eval_pair, PairInputs};
use crate::ir::{Cmp, Func, Graph, Node, NodeId, Op};
use crate::kernel::{FarField, FarTerm, Field, KernelDef, Term};

/// A mistake in a kernel declaration, with where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    pub message: String,
    pub span: Span,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

fn err<T>(span: Span, message: impl Into<String>) -> Result<T, Error> {
    Err(Error {
        message: message.into(),
        span,
    })
}

/// The most scalar slots a kernel may have in each group (parameters,
/// source fields, target fields, outputs); the runtime passes them in
/// fixed arrays of this length.
pub const MAX_SLOTS: usize = 16;

/// The built-in names of a kernel body, besides the declared ones.
pub const BUILTIN_NAMES: &[&str] = &["d", "r2", "r", "PI"];

/// The functions a kernel body may call.
pub const FUNCTIONS: &[&str] = &[
    "sqrt", "rsqrt", "exp", "erf", "log", "abs", "min", "max", "powi", "select", "dot", "cross",
    "norm", "vec3",
];

/// A typed value during lowering.
#[derive(Clone, Copy, Debug)]
enum Value {
    Scalar(NodeId),
    Vec3([NodeId; 3]),
    Bool(NodeId),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Scalar(_) => "a scalar",
            Value::Vec3(_) => "a vec3",
            Value::Bool(_) => "a boolean",
        }
    }
}

struct Lowerer {
    g: Graph,
    names: HashMap<String, Value>,
    /// Names whose value is computed only when first used (`r`), so an
    /// unused built-in costs nothing.
    lazy_r: bool,
}

fn layout(decls: &[Decl]) -> Vec<Field> {
    let mut offset = 0;
    decls
        .iter()
        .map(|d| {
            let f = Field {
                name: d.name.clone(),
                shape: d.shape,
                offset,
            };
            offset += d.shape.slots();
            f
        })
        .collect()
}

/// Checks a kernel declaration and lowers it to the IR.
pub fn lower(spec: &KernelSpec) -> Result<KernelDef, Error> {
    check_names(spec)?;
    let params = layout(&spec.params);
    let sources = layout(&spec.sources);
    let targets = layout(&spec.targets);
    let outputs = layout(&spec.outputs);

    let requirements = spec
        .requires
        .iter()
        .map(|r| lower_requirement(r, &params, &targets, &sources))
        .collect::<Result<Vec<_>, _>>()?;

    let mut lw = Lowerer::with_fields(&params, &targets, &sources);
    lw.lazy_r = true;
    // d = x_i - x_j and r2 = |d|^2, shared by every use.
    let d = [0u8, 1, 2].map(|c| {
        let xi = lw.g.leaf(Node::TgtPos(c));
        let xj = lw.g.leaf(Node::SrcPos(c));
        lw.g.sub(xi, xj)
    });
    let r2 = dot(&mut lw.g, d, d);
    lw.names.insert("d".into(), Value::Vec3(d));
    lw.names.insert("r2".into(), Value::Scalar(r2));
    let zero = lw.g.constant_node(0.0);
    let mut contributions = vec![zero; slot_count_of(&outputs)];
    let mut accumulated = vec![false; outputs.len()];
    for stmt in &spec.body {
        match stmt {
            Stmt::Let { name, value, span } => {
                if lw.names.contains_key(name) && !is_shadowable(spec, name) {
                    return err(
                        *span,
                        format!("`{name}` is already a field, parameter or built-in; choose another name for this binding"),
                    );
                }
                let v = lw.expr(value)?;
                if name == "r" {
                    lw.lazy_r = false;
                }
                lw.names.insert(name.clone(), v);
            }
            Stmt::Accumulate {
                output,
                negate,
                value,
                span,
            } => {
                let Some(k) = outputs.iter().position(|o| &o.name == output) else {
                    let list = names(&outputs);
                    return err(
                        *span,
                        format!("`{output}` is not an output, so it cannot be accumulated into; the declared outputs are: {list}"),
                    );
                };
                let out = &outputs[k];
                let v = lw.expr(value)?;
                let comps: Vec<NodeId> = match (out.shape, v) {
                    (Shape::Scalar, Value::Scalar(x)) => vec![x],
                    (Shape::Vec3, Value::Vec3(x)) => x.to_vec(),
                    (shape, v) => {
                        return err(
                            value.span(),
                            format!(
                                "output `{output}` is a {} but this value is {}",
                                shape.name(),
                                v.kind()
                            ),
                        )
                    }
                };
                for (c, x) in comps.into_iter().enumerate() {
                    let slot = &mut contributions[out.offset + c];
                    *slot = if *negate {
                        lw.g.sub(*slot, x)
                    } else {
                        lw.g.add(*slot, x)
                    };
                }
                accumulated[k] = true;
            }
        }
    }
    for (k, o) in outputs.iter().enumerate() {
        if !accumulated[k] {
            let span = spec.outputs[k].span;
            return err(
                span,
                format!(
                    "output `{}` is declared but nothing is accumulated into it (`{} += ...;`)",
                    o.name, o.name
                ),
            );
        }
    }
    let far_field = lower_far_field(spec, &sources, &targets, &outputs)?;
    let (graph, contributions) = prune(&lw.g, &contributions);
    let def = KernelDef {
        name: spec.name.clone(),
        doc: spec.doc.clone(),
        params,
        sources,
        targets,
        outputs,
        graph,
        contributions,
        far_field,
        requirements,
    };
    check_self_interaction(&def, spec)?;
    Ok(def)
}

/// The names of some fields, for error messages: `phi, acc`.
fn names(fields: &[Field]) -> String {
    fields
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn slot_count_of(fields: &[Field]) -> usize {
    crate::kernel::slot_count(fields)
}

/// Copies the nodes reachable from `roots` into a fresh graph, so that
/// bindings the body never used leave no trace in the IR.
fn prune(g: &Graph, roots: &[NodeId]) -> (Graph, Vec<NodeId>) {
    let live = g.reachable(roots);
    let mut map = vec![NodeId(u32::MAX); g.nodes.len()];
    let mut out = Graph::new();
    for (i, node) in g.nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let m = |id: NodeId| map[id.index()];
        let n = match *node {
            Node::Unary(f, a) => Node::Unary(f, m(a)),
            Node::Binary(o, a, b) => Node::Binary(o, m(a), m(b)),
            Node::Compare(c, a, b) => Node::Compare(c, m(a), m(b)),
            Node::And(a, b) => Node::And(m(a), m(b)),
            Node::Or(a, b) => Node::Or(m(a), m(b)),
            Node::Not(a) => Node::Not(m(a)),
            Node::Select(c, a, b) => Node::Select(m(c), m(a), m(b)),
            leaf => leaf,
        };
        map[i] = out.push_raw(n);
    }
    let roots = roots.iter().map(|r| map[r.index()]).collect();
    (out, roots)
}

/// Names a `let` may rebind: earlier `let`s (shadowing, as in Rust) and
/// the lazily computed `r`.
fn is_shadowable(spec: &KernelSpec, name: &str) -> bool {
    let declared = spec
        .params
        .iter()
        .chain(&spec.sources)
        .chain(&spec.targets)
        .any(|d| d.name == name);
    !declared && !["d", "r2", "PI"].contains(&name)
}

fn check_names(spec: &KernelSpec) -> Result<(), Error> {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    let groups: [(&str, &Vec<Decl>); 4] = [
        ("parameter", &spec.params),
        ("source field", &spec.sources),
        ("target field", &spec.targets),
        ("output", &spec.outputs),
    ];
    for (what, decls) in groups {
        let slots: usize = decls.iter().map(|d| d.shape.slots()).sum();
        if slots > MAX_SLOTS {
            let span = decls.last().map_or(spec.name_span, |d| d.span);
            return err(span, format!("a kernel may have at most {MAX_SLOTS} scalar {what} slots (a vec3 takes 3); this one has {slots}"));
        }
        for d in decls {
            if BUILTIN_NAMES.contains(&d.name.as_str()) {
                return err(
                    d.span,
                    format!(
                        "`{}` is a built-in name (one of {}); choose another name for this {what}",
                        d.name,
                        BUILTIN_NAMES.join(", ")
                    ),
                );
            }
            if FUNCTIONS.contains(&d.name.as_str()) {
                return err(
                    d.span,
                    format!(
                        "`{}` is a built-in function; choose another name for this {what}",
                        d.name
                    ),
                );
            }
            if let Some(prev) = seen.insert(&d.name, what) {
                return err(
                    d.span,
                    format!(
                        "`{}` is declared twice (as a {prev} and as a {what})",
                        d.name
                    ),
                );
            }
        }
    }
    Ok(())
}

fn dot(g: &mut Graph, a: [NodeId; 3], b: [NodeId; 3]) -> NodeId {
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

/// Lowers `require COND;` into a graph of its own: a boolean over the
/// parameters and the fields of one side.
fn lower_requirement(
    r: &crate::ast::Require,
    params: &[Field],
    targets: &[Field],
    sources: &[Field],
) -> Result<crate::kernel::Requirement, Error> {
    let mut lw = Lowerer::with_fields(params, targets, sources);
    let root = lw.boolean(&r.cond, "a requirement")?;
    if lw.g.stage(root) == crate::ir::Stage::Pair {
        return err(
            r.span,
            "a requirement may use the parameters and the fields of the sources or of the targets, not both",
        );
    }
    let (graph, roots) = prune(&lw.g, &[root]);
    Ok(crate::kernel::Requirement {
        text: r.text.clone(),
        graph,
        root: roots[0],
    })
}

impl Lowerer {
    /// A lowerer with the declared parameters and fields, and `PI`, in scope.
    fn with_fields(params: &[Field], targets: &[Field], sources: &[Field]) -> Lowerer {
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
            let r = self.g.unary(Func::Sqrt, r2);
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

    fn scalar(&mut self, e: &Expr, what: &str) -> Result<NodeId, Error> {
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

    fn boolean(&mut self, e: &Expr, what: &str) -> Result<NodeId, Error> {
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

    fn expr(&mut self, e: &Expr) -> Result<Value, Error> {
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
        let unary = match f {
            "sqrt" => Some(Func::Sqrt),
            "rsqrt" => Some(Func::Rsqrt),
            "exp" => Some(Func::Exp),
            "erf" => Some(Func::Erf),
            "log" | "ln" => Some(Func::Log),
            "abs" => Some(Func::Abs),
            _ => None,
        };
        if let Some(func) = unary {
            self.arity(f, args, 1, span)?;
            let x = self.scalar(&args[0], &format!("the argument of `{f}`"))?;
            return Ok(Value::Scalar(self.g.unary(func, x)));
        }
        match f {
            "min" | "max" => {
                self.arity(f, args, 2, span)?;
                let x = self.scalar(&args[0], &format!("an argument of `{f}`"))?;
                let y = self.scalar(&args[1], &format!("an argument of `{f}`"))?;
                let op = if f == "min" { Op::Min } else { Op::Max };
                Ok(Value::Scalar(self.g.binary(op, x, y)))
            }
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
                Ok(Value::Scalar(self.g.unary(Func::Sqrt, n2)))
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
                    FUNCTIONS.join(", ")
                ),
            ),
        }
    }
}

fn lower_far_field(
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
    let mut lw = Lowerer {
        g: Graph::new(),
        names: HashMap::new(),
        lazy_r: false,
    };
    let pi = lw.g.constant_node(std::f64::consts::PI);
    lw.names.insert("PI".into(), Value::Scalar(pi));
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

/// A kernel must add exactly zero when a source sits on the target
/// (r = 0), so that the self-interaction drops out of every sum and
/// coincident particles never produce NaN. Checked by evaluating the IR
/// at d = 0 with two sets of sample inputs.
fn check_self_interaction(def: &KernelDef, spec: &KernelSpec) -> Result<(), Error> {
    for value in [0.75f64, 1.25] {
        let fill =
            |n: usize, base: f64| -> Vec<f64> { (0..n).map(|k| base + 0.125 * k as f64).collect() };
        let params = fill(def.n_params(), value);
        let target = fill(def.n_targets(), value * 0.9);
        let source = fill(def.n_sources(), value * 1.1);
        let pos = [0.3, -0.2, 0.5];
        let out = eval_pair(
            def,
            &PairInputs {
                params: &params,
                target_pos: pos,
                target: &target,
                source_pos: pos,
                source: &source,
            },
        );
        for f in &def.outputs {
            for (c, slot) in f.slot_names().iter().enumerate() {
                let v = out[f.offset + c];
                if v != 0.0 {
                    // Point at the first accumulation into this output.
                    let span = spec
                        .body
                        .iter()
                        .find_map(|s| match s {
                            Stmt::Accumulate { output, value, .. } if *output == f.name => {
                                Some(value.span())
                            }
                            _ => None,
                        })
                        .unwrap_or(spec.name_span);
                    return err(
                        span,
                        format!(
                            "when a source sits on the target (r = 0) this kernel adds a non-zero or non-finite value to `{slot}` \
                             ({v} for sample inputs); it must add exactly 0 \
                             (the self-interaction, and coincident particles). Guard the singular part, for example \
                             `select(r2 > 0.0, value, 0.0)`"
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}
