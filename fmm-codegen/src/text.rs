//! A line-based text form of a [`KernelDef`].
//!
//! The `kernel!` macro checks and lowers a declaration at compile time and
//! embeds this text in the generated type; the runtime reads it back to emit
//! the variants it needs (CUDA entry points, later list-driven kernels) from
//! the same IR. Reading reproduces the graph exactly: constants are stored
//! by their bits, nodes in their order.

use crate::ast::Shape;
use crate::ir::{Cmp, Func, Graph, Node, NodeId, Op};
use crate::kernel::{Cutoff, FarField, FarTerm, Field, KernelDef, Requirement, Term};

fn shape_name(s: Shape) -> &'static str {
    s.name()
}

const OPS: [(Op, &str); 4] = [
    (Op::Add, "add"),
    (Op::Sub, "sub"),
    (Op::Mul, "mul"),
    (Op::Div, "div"),
];
const CMPS: [(Cmp, &str); 6] = [
    (Cmp::Lt, "lt"),
    (Cmp::Le, "le"),
    (Cmp::Gt, "gt"),
    (Cmp::Ge, "ge"),
    (Cmp::Eq, "eq"),
    (Cmp::Ne, "ne"),
];

/// Writes the text form.
pub fn write(def: &KernelDef) -> String {
    let mut o = format!("kernel {}\n", def.name);
    for line in def.doc.lines() {
        o.push_str(&format!("doc {line}\n"));
    }
    for (kw, fields) in [
        ("param", &def.params),
        ("source", &def.sources),
        ("target", &def.targets),
        ("output", &def.outputs),
    ] {
        for f in fields {
            o.push_str(&format!("{kw} {} {}\n", f.name, shape_name(f.shape)));
        }
    }
    if let Some(k) = def.strength {
        o.push_str(&format!("strength {k}\n"));
    }
    match &def.far_field {
        FarField::None => o.push_str("far none\n"),
        FarField::Laplace { terms } => {
            o.push_str("far laplace\n");
            for t in terms {
                let term = match t.term {
                    Term::Potential => "potential".to_string(),
                    Term::Gradient => "gradient".to_string(),
                    Term::Curl => "curl".to_string(),
                    Term::Stretching(k) => format!("stretching {k}"),
                };
                o.push_str(&format!(
                    "term {} {:016x} {term}\n",
                    t.output,
                    t.coefficient.to_bits()
                ));
            }
        }
    }
    for n in &def.graph.nodes {
        o.push_str(&format!("node {}\n", node_line(n)));
    }
    let c: Vec<String> = def.contributions.iter().map(|c| c.0.to_string()).collect();
    o.push_str(&format!("contrib {}\n", c.join(" ")));
    for r in &def.requirements {
        o.push_str(&format!("require {}\n", r.text));
        for n in &r.graph.nodes {
            o.push_str(&format!("rnode {}\n", node_line(n)));
        }
        o.push_str(&format!("rroot {}\n", r.root.0));
    }
    if let Some(c) = &def.cutoff {
        o.push_str(&format!("cutoff {}\n", c.text));
        for n in &c.graph.nodes {
            o.push_str(&format!("cnode {}\n", node_line(n)));
        }
        o.push_str(&format!("croot {}\n", c.root.0));
    }
    o
}

/// One node as text: the operation and its operands.
fn node_line(n: &Node) -> String {
    match *n {
        Node::Const(c) => format!("const {:016x}", c.to_bits()),
        Node::Param(k) => format!("param {k}"),
        Node::Src(k) => format!("src {k}"),
        Node::Tgt(k) => format!("tgt {k}"),
        Node::SrcPos(c) => format!("spos {c}"),
        Node::TgtPos(c) => format!("tpos {c}"),
        Node::Neg(a) => format!("neg {}", a.0),
        Node::Call1(f, a) => format!("{} {}", f.name(), a.0),
        Node::Call2(f, a, b) => format!("{} {} {}", f.name(), a.0, b.0),
        Node::Binary(op, a, b) => {
            let name = OPS.iter().find(|x| x.0 == op).map(|x| x.1).unwrap_or("?");
            format!("{name} {} {}", a.0, b.0)
        }
        Node::Compare(c, a, b) => {
            let name = CMPS.iter().find(|x| x.0 == c).map(|x| x.1).unwrap_or("?");
            format!("{name} {} {}", a.0, b.0)
        }
        Node::And(a, b) => format!("and {} {}", a.0, b.0),
        Node::Or(a, b) => format!("or {} {}", a.0, b.0),
        Node::Not(a) => format!("not {}", a.0),
        Node::Select(c, a, b) => format!("sel {} {} {}", c.0, a.0, b.0),
    }
}

/// Reads a node line's words (after `node`/`rnode`) into a node of a graph
/// that has `next` nodes so far.
fn parse_node(words: &[&str], next: u32) -> Result<Node, &'static str> {
    let op = *words.first().ok_or("expected an operation")?;
    let words = &words[1..];
    let w = |i: usize| -> Result<u32, &'static str> {
        words
            .get(i)
            .and_then(|w| w.parse::<u32>().ok())
            .ok_or("expected a number")
    };
    let n = |i: usize| -> Result<NodeId, &'static str> { w(i).map(NodeId) };
    let node = if let Some(f) = Func::all().find(|f| f.name() == op) {
        match f.row().arity {
            1 => Node::Call1(f, n(0)?),
            _ => Node::Call2(f, n(0)?, n(1)?),
        }
    } else if let Some((o, _)) = OPS.iter().find(|x| x.1 == op) {
        Node::Binary(*o, n(0)?, n(1)?)
    } else if let Some((c, _)) = CMPS.iter().find(|x| x.1 == op) {
        Node::Compare(*c, n(0)?, n(1)?)
    } else {
        match op {
            "const" => Node::Const(
                words
                    .first()
                    .and_then(|w| u64::from_str_radix(w, 16).ok())
                    .map(f64::from_bits)
                    .ok_or("expected a hexadecimal constant")?,
            ),
            "param" => Node::Param(w(0)? as u16),
            "src" => Node::Src(w(0)? as u16),
            "tgt" => Node::Tgt(w(0)? as u16),
            "spos" => Node::SrcPos(w(0)? as u8),
            "tpos" => Node::TgtPos(w(0)? as u8),
            "neg" => Node::Neg(n(0)?),
            "and" => Node::And(n(0)?, n(1)?),
            "or" => Node::Or(n(0)?, n(1)?),
            "not" => Node::Not(n(0)?),
            "sel" => Node::Select(n(0)?, n(1)?, n(2)?),
            _ => return Err("unknown operation"),
        }
    };
    if node.children().iter().any(|c| c.0 >= next) {
        return Err("an operand refers to a later node");
    }
    Ok(node)
}

/// Reads the text form back; the error names the line at fault.
pub fn read(text: &str) -> Result<KernelDef, String> {
    let mut def = KernelDef {
        name: String::new(),
        doc: String::new(),
        params: vec![],
        sources: vec![],
        targets: vec![],
        outputs: vec![],
        graph: Graph::new(),
        contributions: vec![],
        strength: None,
        far_field: FarField::None,
        requirements: vec![],
        cutoff: None,
    };
    let mut doc: Vec<&str> = Vec::new();
    for (lineno, line) in text.lines().enumerate() {
        let bad = |what: &str| format!("kernel IR text, line {}: {what}: `{line}`", lineno + 1);
        let (kw, rest) = line.split_once(' ').unwrap_or((line, ""));
        let words: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| -> Result<u32, String> {
            words
                .get(i)
                .and_then(|w| w.parse::<u32>().ok())
                .ok_or_else(|| bad("expected a number"))
        };
        let id = |i: usize| -> Result<NodeId, String> {
            let k = num(i)?;
            Ok(NodeId(k))
        };
        let bits = |i: usize| -> Result<f64, String> {
            words
                .get(i)
                .and_then(|w| u64::from_str_radix(w, 16).ok())
                .map(f64::from_bits)
                .ok_or_else(|| bad("expected a hexadecimal constant"))
        };
        match kw {
            "kernel" => def.name = rest.to_string(),
            "doc" => doc.push(rest),
            "param" | "source" | "target" | "output" => {
                let shape = match words.get(1) {
                    Some(&"scalar") => Shape::Scalar,
                    Some(&"vec3") => Shape::Vec3,
                    _ => return Err(bad("expected a shape")),
                };
                let list = match kw {
                    "param" => &mut def.params,
                    "source" => &mut def.sources,
                    "target" => &mut def.targets,
                    _ => &mut def.outputs,
                };
                let offset = crate::kernel::slot_count(list);
                list.push(Field {
                    name: words
                        .first()
                        .ok_or_else(|| bad("expected a name"))?
                        .to_string(),
                    shape,
                    offset,
                });
            }
            "strength" => {
                let k = num(0)? as usize;
                if k >= def.sources.len() {
                    return Err(bad("the strength is not a source field"));
                }
                def.strength = Some(k);
            }
            "far" => {
                def.far_field = match words.first() {
                    Some(&"none") => FarField::None,
                    Some(&"laplace") => FarField::Laplace { terms: vec![] },
                    _ => return Err(bad("expected `none` or `laplace`")),
                }
            }
            "term" => {
                let FarField::Laplace { terms, .. } = &mut def.far_field else {
                    return Err(bad("a term outside a laplace far field"));
                };
                let term = match words.get(2) {
                    Some(&"potential") => Term::Potential,
                    Some(&"gradient") => Term::Gradient,
                    Some(&"curl") => Term::Curl,
                    Some(&"stretching") => Term::Stretching(num(3)? as usize),
                    _ => return Err(bad("expected a Laplace term")),
                };
                terms.push(FarTerm {
                    output: num(0)? as usize,
                    coefficient: bits(1)?,
                    term,
                });
            }
            "node" => {
                let node = parse_node(&words, def.graph.nodes.len() as u32).map_err(bad)?;
                def.graph.push_raw(node);
            }
            "require" => def.requirements.push(Requirement {
                text: rest.to_string(),
                graph: Graph::new(),
                root: NodeId(0),
            }),
            "rnode" => {
                let r = def
                    .requirements
                    .last_mut()
                    .ok_or_else(|| bad("a node outside a requirement"))?;
                let node = parse_node(&words, r.graph.nodes.len() as u32).map_err(bad)?;
                r.graph.push_raw(node);
            }
            "rroot" => {
                let r = def
                    .requirements
                    .last_mut()
                    .ok_or_else(|| bad("a root outside a requirement"))?;
                r.root = id(0)?;
                if r.root.index() >= r.graph.nodes.len() {
                    return Err(bad("the root is not a node of the requirement"));
                }
            }
            "cutoff" => {
                def.cutoff = Some(Cutoff {
                    text: rest.to_string(),
                    graph: Graph::new(),
                    root: NodeId(0),
                })
            }
            "cnode" => {
                let c = def
                    .cutoff
                    .as_mut()
                    .ok_or_else(|| bad("a node outside the cutoff"))?;
                let node = parse_node(&words, c.graph.nodes.len() as u32).map_err(bad)?;
                c.graph.push_raw(node);
            }
            "croot" => {
                let c = def
                    .cutoff
                    .as_mut()
                    .ok_or_else(|| bad("a root outside the cutoff"))?;
                c.root = id(0)?;
                if c.root.index() >= c.graph.nodes.len() {
                    return Err(bad("the root is not a node of the cutoff"));
                }
            }
            "contrib" => {
                def.contributions = (0..words.len()).map(id).collect::<Result<_, _>>()?;
            }
            "" => {}
            _ => return Err(bad("unknown line")),
        }
    }
    def.doc = doc.join("\n");
    let nodes = def.graph.nodes.len() as u32;
    if def.contributions.len() != def.n_outputs() || def.contributions.iter().any(|c| c.0 >= nodes)
    {
        return Err("kernel IR text: the contributions do not match the outputs".into());
    }
    if def.strength.is_none() && def.far_field != FarField::None {
        return Err("kernel IR text: a Laplace far field without a strength".into());
    }
    Ok(def)
}
