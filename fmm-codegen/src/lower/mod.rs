//! Type checking and lowering of a [`KernelSpec`] to a [`KernelDef`].
//!
//! Vectors are split into their components here, names are resolved, and
//! every mistake is reported with the [`Span`] of the expression at fault.
//! Parsing (the `kernel!` macro's `parse`) checks syntax only; what a
//! declaration means is checked here, in four parts:
//! - this file: the declarations (names, slot counts) and the body's
//!   statements, in order;
//! - [`expr`]: the body's expressions, typed (scalar, vec3, boolean) and
//!   lowered to the IR;
//! - [`far_field`]: the far-field declaration, each output split into a
//!   constant coefficient times a Laplace term;
//! - [`checks`]: what the whole kernel must satisfy, checked by evaluating
//!   its IR ([`crate::eval`]).

mod checks;
mod expr;
mod far_field;

pub use far_field::FAR_FORMS;

use std::collections::HashMap;

use crate::ast::{Decl, KernelSpec, Shape, Span, Stmt};
use crate::ir::{Graph, Node, NodeId};
use crate::kernel::{Field, KernelDef};
use expr::{dot, Lowerer, Value};

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

pub(super) fn err<T>(span: Span, message: impl Into<String>) -> Result<T, Error> {
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

/// The calls of a kernel body that are not rows of
/// [`crate::builtins::BUILTINS`]: they take vectors, booleans or a literal,
/// and are lowered to arithmetic and built-in functions (in [`expr`]).
pub const FORMS: &[&str] = &["powi", "select", "dot", "cross", "norm", "vec3"];

/// The functions a kernel body may call, by their main names: the built-in
/// functions, then the forms.
pub fn functions() -> Vec<&'static str> {
    crate::ir::Func::all()
        .map(|f| f.name())
        .chain(FORMS.iter().copied())
        .collect()
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
    let strength = resolve_strength(spec, &sources)?;

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
    // A cutoff truncates every contribution: what every backend's P2P
    // then sums (the direct sums, the tree methods' near fields).
    let cutoff = match &spec.cutoff {
        Some(c) => {
            let lowered = lower_cutoff(c, &params, &targets, &sources)?;
            let rc = match lw.expr(&c.value)? {
                Value::Scalar(x) => x,
                v => {
                    return err(
                        c.value.span(),
                        format!(
                            "the cutoff is a distance, a scalar, but this value is {}",
                            v.kind()
                        ),
                    )
                }
            };
            let rc2 = lw.g.mul(rc, rc);
            let inside = lw.g.compare(crate::ir::Cmp::Lt, r2, rc2);
            for x in contributions.iter_mut() {
                *x = lw.g.select(inside, *x, zero);
            }
            Some(lowered)
        }
        None => None,
    };
    let far_field = far_field::lower_far_field(spec, strength, &sources, &targets, &outputs)?;
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
        strength,
        far_field,
        requirements,
        cutoff,
    };
    checks::check_self_interaction(&def, spec)?;
    checks::check_linear_in_strength(&def, spec)?;
    Ok(def)
}

/// The index in `sources` of the field `strength FIELD;` names. A strength
/// is what each source carries and what adds up over a cell of sources, so
/// it must be a source field: not a parameter (the same for every source),
/// a target field or an output.
fn resolve_strength(spec: &KernelSpec, sources: &[Field]) -> Result<Option<usize>, Error> {
    let Some(s) = &spec.strength else {
        return Ok(None);
    };
    if let Some(k) = sources.iter().position(|f| f.name == s.field) {
        return Ok(Some(k));
    }
    let known = if sources.is_empty() {
        "this kernel declares none (`source q;`)".to_string()
    } else {
        format!("the source fields are: {}", names(sources))
    };
    let name = &s.field;
    let what = [
        (&spec.params, "a parameter"),
        (&spec.targets, "a target field"),
        (&spec.outputs, "an output"),
    ]
    .into_iter()
    .find_map(|(decls, what)| decls.iter().any(|d| &d.name == name).then_some(what));
    let message = match what {
        Some(what) => format!(
            "`{name}` is {what}, but the strength must be a source field: what each source \
             carries and what adds up over a cell of sources; {known}"
        ),
        None => format!(
            "`{name}` is not a declared field; the strength names a source field, and {known}"
        ),
    };
    err(s.field_span, message)
}

/// The names of some fields, for error messages: `phi, acc`.
pub(super) fn names(fields: &[Field]) -> String {
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
            Node::Neg(a) => Node::Neg(m(a)),
            Node::Binary(o, a, b) => Node::Binary(o, m(a), m(b)),
            Node::Call1(f, a) => Node::Call1(f, m(a)),
            Node::Call2(f, a, b) => Node::Call2(f, m(a), m(b)),
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
            if functions().contains(&d.name.as_str()) {
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

/// Lowers `cutoff RC;` into a graph of its own: a scalar of the
/// parameters (the same for every pair, so a periodic box can check it
/// against its side before a sum).
fn lower_cutoff(
    c: &crate::ast::Cutoff,
    params: &[Field],
    targets: &[Field],
    sources: &[Field],
) -> Result<crate::kernel::Cutoff, Error> {
    let mut lw = Lowerer::with_fields(params, targets, sources);
    let root = match lw.expr(&c.value)? {
        Value::Scalar(x) => x,
        v => {
            return err(
                c.span,
                format!(
                    "the cutoff is a distance, a scalar, but this value is {}",
                    v.kind()
                ),
            )
        }
    };
    if !matches!(
        lw.g.stage(root),
        crate::ir::Stage::Param | crate::ir::Stage::Const
    ) {
        return err(
            c.span,
            "the cutoff may use the parameters only (one radius for every pair)",
        );
    }
    let (graph, roots) = prune(&lw.g, &[root]);
    Ok(crate::kernel::Cutoff {
        text: c.text.clone(),
        graph,
        root: roots[0],
    })
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
