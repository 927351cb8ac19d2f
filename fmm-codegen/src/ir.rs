//! The kernel IR: a DAG of scalar operations for one source-target pair.
//!
//! Vectors are lowered to their three components before they reach the IR,
//! so every node is a scalar (or a boolean, for `select`). Nodes are
//! hash-consed when they are built: asking twice for `a * b` (or `b * a`)
//! returns the same node, which is the common subexpression sharing, and
//! operations on constants are folded on the spot (KeOps simplifies the same
//! way, while building). Children always come before their parents, so the
//! node order is a valid evaluation order.

use std::collections::HashMap;

/// Index of a node in [`Graph::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

pub use crate::builtins::Func;

/// The arithmetic operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

/// Comparisons, giving a boolean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// One IR node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Node {
    /// A constant.
    Const(f64),
    /// Scalar slot `k` of the flattened runtime parameters.
    Param(u16),
    /// Scalar slot `k` of the flattened per-source fields.
    Src(u16),
    /// Scalar slot `k` of the flattened per-target fields.
    Tgt(u16),
    /// Coordinate `c` of the source position `x_j`.
    SrcPos(u8),
    /// Coordinate `c` of the target position `x_i`.
    TgtPos(u8),
    /// `-a`.
    Neg(NodeId),
    Binary(Op, NodeId, NodeId),
    /// A built-in function of one argument (a row of
    /// [`crate::builtins::BUILTINS`]).
    Call1(Func, NodeId),
    /// A built-in function of two arguments.
    Call2(Func, NodeId, NodeId),
    Compare(Cmp, NodeId, NodeId),
    And(NodeId, NodeId),
    Or(NodeId, NodeId),
    Not(NodeId),
    /// `if cond { a } else { b }`; both sides are computed.
    Select(NodeId, NodeId, NodeId),
}

/// Hashable image of a node (constants by their bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Const(u64),
    Param(u16),
    Src(u16),
    Tgt(u16),
    SrcPos(u8),
    TgtPos(u8),
    Neg(NodeId),
    Binary(Op, NodeId, NodeId),
    Call1(Func, NodeId),
    Call2(Func, NodeId, NodeId),
    Compare(Cmp, NodeId, NodeId),
    And(NodeId, NodeId),
    Or(NodeId, NodeId),
    Not(NodeId),
    Select(NodeId, NodeId, NodeId),
}

impl Node {
    fn key(&self) -> Key {
        match *self {
            // +0.0 and -0.0 fold to one constant only when they are equal bits.
            Node::Const(c) => Key::Const(c.to_bits()),
            Node::Param(k) => Key::Param(k),
            Node::Src(k) => Key::Src(k),
            Node::Tgt(k) => Key::Tgt(k),
            Node::SrcPos(c) => Key::SrcPos(c),
            Node::TgtPos(c) => Key::TgtPos(c),
            Node::Neg(a) => Key::Neg(a),
            Node::Binary(o, a, b) => Key::Binary(o, a, b),
            Node::Call1(f, a) => Key::Call1(f, a),
            Node::Call2(f, a, b) => Key::Call2(f, a, b),
            Node::Compare(c, a, b) => Key::Compare(c, a, b),
            Node::And(a, b) => Key::And(a, b),
            Node::Or(a, b) => Key::Or(a, b),
            Node::Not(a) => Key::Not(a),
            Node::Select(c, a, b) => Key::Select(c, a, b),
        }
    }

    /// The node's operands.
    pub fn children(&self) -> Vec<NodeId> {
        match *self {
            Node::Const(_)
            | Node::Param(_)
            | Node::Src(_)
            | Node::Tgt(_)
            | Node::SrcPos(_)
            | Node::TgtPos(_) => vec![],
            Node::Neg(a) | Node::Call1(_, a) | Node::Not(a) => vec![a],
            Node::Binary(_, a, b)
            | Node::Call2(_, a, b)
            | Node::Compare(_, a, b)
            | Node::And(a, b)
            | Node::Or(a, b) => vec![a, b],
            Node::Select(c, a, b) => vec![c, a, b],
        }
    }

    /// Whether the node's value is a boolean rather than a number.
    pub fn is_bool(&self) -> bool {
        matches!(
            self,
            Node::Compare(..) | Node::And(..) | Node::Or(..) | Node::Not(_)
        )
    }
}

/// What a node's value depends on. The emitters compute `Param` nodes once
/// per launch, `Target` nodes once per target, `Source` nodes once per
/// source (the GPU kernel does it while loading a tile into shared memory)
/// and only `Pair` nodes in the inner loop.
///
/// The order is that of hoisting cost, but `Target` and `Source` are not
/// comparable: a node depending on both is a `Pair` node ([`Stage::join`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    Const,
    Param,
    Target,
    Source,
    Pair,
}

impl Stage {
    /// The stage of a node whose operands are of stages `self` and `other`.
    pub fn join(self, other: Stage) -> Stage {
        match (self, other) {
            (Stage::Target, Stage::Source) | (Stage::Source, Stage::Target) => Stage::Pair,
            (a, b) => a.max(b),
        }
    }
}

/// A hash-consed DAG of scalar nodes.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    index: HashMap<Key, NodeId>,
    /// The stage of every node, kept as nodes are added.
    stage: Vec<Stage>,
}

impl PartialEq for Graph {
    fn eq(&self, other: &Self) -> bool {
        self.nodes == other.nodes
    }
}

impl Graph {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn node(&self, id: NodeId) -> Node {
        self.nodes[id.index()]
    }

    /// The constant value of a node, if it is one.
    pub fn constant(&self, id: NodeId) -> Option<f64> {
        match self.node(id) {
            Node::Const(c) => Some(c),
            _ => None,
        }
    }

    fn intern(&mut self, node: Node) -> NodeId {
        let key = node.key();
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = NodeId(self.nodes.len() as u32);
        let stage = self.stage_of(&node, &self.stage);
        self.nodes.push(node);
        self.stage.push(stage);
        self.index.insert(key, id);
        id
    }

    /// Adds a node as it is, without simplification (used by the text
    /// reader, which must reproduce a graph exactly).
    pub fn push_raw(&mut self, node: Node) -> NodeId {
        self.intern(node)
    }

    pub fn constant_node(&mut self, c: f64) -> NodeId {
        self.intern(Node::Const(c))
    }

    pub fn leaf(&mut self, node: Node) -> NodeId {
        debug_assert!(node.children().is_empty());
        self.intern(node)
    }

    pub fn neg(&mut self, a: NodeId) -> NodeId {
        if let Some(x) = self.constant(a) {
            return self.constant_node(-x);
        }
        match self.node(a) {
            // -(-x) = x
            Node::Neg(x) => return x,
            // -(x - y) = y - x
            Node::Binary(Op::Sub, x, y) => return self.binary(Op::Sub, y, x),
            _ => {}
        }
        self.intern(Node::Neg(a))
    }

    /// A built-in function of its arguments (as many as its row's arity),
    /// folded when they are constants and simplified by the row's algebra
    /// (`even`, `idempotent`, `commutative`).
    pub fn call(&mut self, f: Func, args: &[NodeId]) -> NodeId {
        let row = f.row();
        assert_eq!(
            args.len(),
            row.arity,
            "`{}` takes {} arguments",
            row.name,
            row.arity
        );
        let consts: Option<Vec<f64>> = args.iter().map(|&a| self.constant(a)).collect();
        if let Some(v) = consts.map(|c| (row.eval)(&c)) {
            // A value that is not finite (`sqrt(-1)`) is left to run
            // time, so that it reaches the checks instead of vanishing.
            if v.is_finite() {
                return self.constant_node(v);
            }
        }
        match *args {
            [a] => {
                match self.node(a) {
                    // f(-x) = f(x)
                    Node::Neg(x) if row.even => return self.call(f, &[x]),
                    // f(f(x)) = f(x)
                    Node::Call1(g, _) if row.idempotent && g == f => return a,
                    _ => {}
                }
                self.intern(Node::Call1(f, a))
            }
            [a, b] => {
                // f(x, x) = x
                if row.idempotent && a == b {
                    return a;
                }
                let (a, b) = if row.commutative && b < a {
                    (b, a)
                } else {
                    (a, b)
                };
                self.intern(Node::Call2(f, a, b))
            }
            _ => unreachable!("rows have one or two arguments"),
        }
    }

    pub fn binary(&mut self, op: Op, a: NodeId, b: NodeId) -> NodeId {
        let (ca, cb) = (self.constant(a), self.constant(b));
        if let (Some(x), Some(y)) = (ca, cb) {
            return self.constant_node(fold_binary(op, x, y));
        }
        match op {
            Op::Add => {
                if ca == Some(0.0) {
                    return b;
                }
                if cb == Some(0.0) {
                    return a;
                }
                // a + (-b) = a - b
                if let Node::Neg(nb) = self.node(b) {
                    return self.binary(Op::Sub, a, nb);
                }
                if let Node::Neg(na) = self.node(a) {
                    return self.binary(Op::Sub, b, na);
                }
            }
            Op::Sub => {
                if cb == Some(0.0) {
                    return a;
                }
                if ca == Some(0.0) {
                    return self.neg(b);
                }
                if a == b {
                    return self.constant_node(0.0);
                }
                // a - (-b) = a + b
                if let Node::Neg(nb) = self.node(b) {
                    return self.binary(Op::Add, a, nb);
                }
            }
            Op::Mul => {
                for (c, other) in [(ca, b), (cb, a)] {
                    match c {
                        Some(1.0) => return other,
                        Some(-1.0) => return self.neg(other),
                        // 0 * x = 0: kernels are evaluated with finite inputs,
                        // and a literal zero factor is always meant as zero.
                        Some(0.0) => return self.constant_node(0.0),
                        _ => {}
                    }
                }
                // Pull negations out so that they can fold into an add or an
                // accumulation: (-x) * y = -(x * y).
                if let Node::Neg(na) = self.node(a) {
                    let m = self.binary(Op::Mul, na, b);
                    return self.neg(m);
                }
                if let Node::Neg(nb) = self.node(b) {
                    let m = self.binary(Op::Mul, a, nb);
                    return self.neg(m);
                }
            }
            Op::Div => {
                if cb == Some(1.0) {
                    return a;
                }
                if cb == Some(-1.0) {
                    return self.neg(a);
                }
                if ca == Some(0.0) {
                    return self.constant_node(0.0);
                }
                // a / b = a * (1 / b) when b is computed less often than
                // the quotient (b depends on the parameters, the target or
                // the source alone, a on the pair): the reciprocal is then
                // hoisted out of the pair loop or, on the GPU, computed once
                // per source (`r / sigma_j`, `e / sigma_j^3` in the vortex
                // kernels, `r2 / eps^2` in hu2011's smoothing).
                let (sa, sb) = (self.stage(a), self.stage(b));
                if ca != Some(1.0) && cb.is_none() && sa.join(sb) != sb {
                    let one = self.constant_node(1.0);
                    let inv = self.div(one, b);
                    return self.mul(a, inv);
                }
                // 1 / sqrt(x) = rsqrt(x): one instruction on the GPU.
                if ca == Some(1.0) {
                    if let Node::Call1(Func::SQRT, x) = self.node(b) {
                        return self.call(Func::RSQRT, &[x]);
                    }
                }
                // x / c = x * (1/c): a multiplication instead of a division
                // (exact when c is a power of two, within an ulp otherwise,
                // as a compiler with fast math would do).
                if let Some(c) = cb {
                    let inv = 1.0 / c;
                    if c != 0.0 && inv.is_finite() && inv != 0.0 {
                        let k = self.constant_node(inv);
                        return self.binary(Op::Mul, a, k);
                    }
                }
                if let Node::Neg(na) = self.node(a) {
                    let d = self.binary(Op::Div, na, b);
                    return self.neg(d);
                }
            }
        }
        let (a, b) = if is_commutative(op) && b < a {
            (b, a)
        } else {
            (a, b)
        };
        self.intern(Node::Binary(op, a, b))
    }

    pub fn add(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.binary(Op::Add, a, b)
    }

    pub fn sub(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.binary(Op::Sub, a, b)
    }

    pub fn mul(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.binary(Op::Mul, a, b)
    }

    pub fn div(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.binary(Op::Div, a, b)
    }

    pub fn compare(&mut self, c: Cmp, a: NodeId, b: NodeId) -> NodeId {
        self.intern(Node::Compare(c, a, b))
    }

    pub fn and(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let (a, b) = if b < a { (b, a) } else { (a, b) };
        self.intern(Node::And(a, b))
    }

    pub fn or(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let (a, b) = if b < a { (b, a) } else { (a, b) };
        self.intern(Node::Or(a, b))
    }

    pub fn not(&mut self, a: NodeId) -> NodeId {
        if let Node::Not(x) = self.node(a) {
            return x;
        }
        self.intern(Node::Not(a))
    }

    pub fn select(&mut self, c: NodeId, a: NodeId, b: NodeId) -> NodeId {
        if a == b {
            return a;
        }
        self.intern(Node::Select(c, a, b))
    }

    /// `x^n` for an integer `n`, by repeated squaring (what a compiler would
    /// do for `powi`): `x^5 = (x^2)^2 * x` costs three multiplications.
    pub fn powi(&mut self, x: NodeId, n: i32) -> NodeId {
        if n == 0 {
            return self.constant_node(1.0);
        }
        if n < 0 {
            let p = self.powi(x, -n);
            let one = self.constant_node(1.0);
            return self.div(one, p);
        }
        if n == 1 {
            return x;
        }
        let half = self.powi(x, n / 2);
        let sq = self.mul(half, half);
        if n % 2 == 1 {
            self.mul(sq, x)
        } else {
            sq
        }
    }

    /// The stage of every node (see [`Stage`]).
    pub fn stages(&self) -> Vec<Stage> {
        self.stage.clone()
    }

    /// The stage of one node.
    pub fn stage(&self, id: NodeId) -> Stage {
        self.stage[id.index()]
    }

    /// The stage of `node`, given the stages of the nodes before it.
    fn stage_of(&self, node: &Node, before: &[Stage]) -> Stage {
        match node {
            Node::Const(_) => Stage::Const,
            Node::Param(_) => Stage::Param,
            Node::Tgt(_) | Node::TgtPos(_) => Stage::Target,
            Node::Src(_) | Node::SrcPos(_) => Stage::Source,
            n => n
                .children()
                .iter()
                .map(|c| before[c.index()])
                .fold(Stage::Const, Stage::join),
        }
    }

    /// Marks the nodes reachable from `roots`.
    pub fn reachable(&self, roots: &[NodeId]) -> Vec<bool> {
        let mut live = vec![false; self.nodes.len()];
        for r in roots {
            live[r.index()] = true;
        }
        for i in (0..self.nodes.len()).rev() {
            if live[i] {
                for c in self.nodes[i].children() {
                    live[c.index()] = true;
                }
            }
        }
        live
    }

    /// How many live nodes use each node as an operand.
    pub fn use_counts(&self, live: &[bool]) -> Vec<u32> {
        let mut uses = vec![0u32; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            if live[i] {
                for c in n.children() {
                    uses[c.index()] += 1;
                }
            }
        }
        uses
    }
}

fn is_commutative(op: Op) -> bool {
    matches!(op, Op::Add | Op::Mul)
}

pub fn fold_binary(op: Op, x: f64, y: f64) -> f64 {
    match op {
        Op::Add => x + y,
        Op::Sub => x - y,
        Op::Mul => x * y,
        Op::Div => x / y,
    }
}

pub fn eval_compare(c: Cmp, x: f64, y: f64) -> bool {
    match c {
        Cmp::Lt => x < y,
        Cmp::Le => x <= y,
        Cmp::Gt => x > y,
        Cmp::Ge => x >= y,
        Cmp::Eq => x == y,
        Cmp::Ne => x != y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharing_and_commutativity() {
        let mut g = Graph::new();
        let a = g.leaf(Node::Src(0));
        let b = g.leaf(Node::Param(0));
        let ab = g.mul(a, b);
        let ba = g.mul(b, a);
        assert_eq!(ab, ba);
        let s1 = g.sub(a, b);
        let s2 = g.sub(b, a);
        assert_ne!(s1, s2, "subtraction is not commutative");
    }

    #[test]
    fn folding() {
        let mut g = Graph::new();
        let two = g.constant_node(2.0);
        let three = g.constant_node(3.0);
        let six = g.mul(two, three);
        assert_eq!(g.constant(six), Some(6.0));
        let x = g.leaf(Node::Src(0));
        let one = g.constant_node(1.0);
        assert_eq!(g.mul(x, one), x);
        let zero = g.constant_node(0.0);
        assert_eq!(g.add(zero, x), x);
        let nx = g.neg(x);
        assert_eq!(g.neg(nx), x);
        let y = g.leaf(Node::Src(1));
        let sum = g.add(y, nx);
        assert_eq!(g.node(sum), Node::Binary(Op::Sub, y, x));
        let half = g.div(x, two);
        assert!(matches!(g.node(half), Node::Binary(Op::Mul, _, _)));
    }

    #[test]
    fn division_by_a_source_value_becomes_a_per_source_reciprocal() {
        let mut g = Graph::new();
        let r = {
            let t = g.leaf(Node::TgtPos(0));
            let s = g.leaf(Node::SrcPos(0));
            g.sub(t, s)
        };
        let sigma = g.leaf(Node::Src(0));
        let q = g.div(r, sigma);
        let Node::Binary(Op::Mul, _, inv) = g.node(q) else {
            panic!("{:?}", g.node(q))
        };
        assert_eq!(g.stage(inv), Stage::Source);
    }

    #[test]
    fn calls_follow_their_rows_algebra() {
        let f = |name| Func::named(name).unwrap();
        let mut g = Graph::new();
        let x = g.leaf(Node::Src(0));
        let y = g.leaf(Node::Src(1));
        let nx = g.neg(x);
        // abs is even and idempotent.
        let ax = g.call(f("abs"), &[x]);
        assert_eq!(g.call(f("abs"), &[nx]), ax);
        assert_eq!(g.call(f("abs"), &[ax]), ax);
        // min is commutative and min(x, x) = x.
        let m = g.call(f("min"), &[x, y]);
        assert_eq!(g.call(f("min"), &[y, x]), m);
        assert_eq!(g.call(f("min"), &[x, x]), x);
        // Constants fold through the row's evaluation; a value that is not
        // finite is left to run time.
        let four = g.constant_node(4.0);
        let two = g.call(f("sqrt"), &[four]);
        assert_eq!(g.constant(two), Some(2.0));
        let minus = g.constant_node(-1.0);
        let nan = g.call(f("sqrt"), &[minus]);
        assert_eq!(g.node(nan), Node::Call1(Func::SQRT, minus));
        // 1 / sqrt(x) = rsqrt(x).
        let s = g.call(Func::SQRT, &[x]);
        let one = g.constant_node(1.0);
        let r = g.div(one, s);
        assert_eq!(g.node(r), Node::Call1(Func::RSQRT, x));
    }

    #[test]
    fn powi_uses_squaring() {
        let mut g = Graph::new();
        let x = g.leaf(Node::Src(0));
        let before = g.nodes.len();
        g.powi(x, 5);
        assert_eq!(g.nodes.len() - before, 3, "x^2, x^4, x^4*x");
    }

    #[test]
    fn stages_propagate() {
        let mut g = Graph::new();
        let p = g.leaf(Node::Param(0));
        let t = g.leaf(Node::TgtPos(0));
        let s = g.leaf(Node::SrcPos(0));
        let pp = g.mul(p, p);
        let tp = g.add(t, pp);
        let d = g.sub(tp, s);
        let st = g.stages();
        assert_eq!(st[pp.index()], Stage::Param);
        assert_eq!(st[tp.index()], Stage::Target);
        assert_eq!(st[d.index()], Stage::Pair);
        let sp = g.mul(s, p);
        assert_eq!(g.stages()[sp.index()], Stage::Source);
        assert_eq!(g.stage(sp), Stage::Source);
        assert_eq!(g.stage(d), Stage::Pair);
    }
}
