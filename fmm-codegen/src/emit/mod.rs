//! What the emitters share: the schedule of the IR (which node is computed
//! where and which is inlined) and the rendering of expressions.
//!
//! A node is given a named temporary when it is used more than once, or
//! when it is computed before the source loop (it depends only on the
//! parameters and the target) and used inside it. Every other node is
//! inlined into its single user, so the generated code reads like the
//! formula it came from.
//!
//! A kernel's CUDA comes in one module per method ([`Module`]), each a
//! source of its own with its own prologue; the arguments of every entry
//! point are one [`signature::Signature`] that the emitters print and the
//! host's launcher checks its pushes against.

pub mod cuda;
pub mod p2p_list;
pub mod rust;
pub mod signature;
pub mod walk;

use crate::ir::{Cmp, Func, Graph, Node, NodeId, Op, Stage};
use crate::kernel::KernelDef;
use signature::{EntryPoint, Precision};

/// The CUDA modules of a kernel, one per method that runs its pair
/// interaction on the GPU. Each is a source of its own (the doc header, the
/// math helpers the kernel uses, what the method needs such as the block
/// scan, the method's template and entry points), compiled by NVRTC and
/// cached on its own as `<symbol>_<module>` ([`Module::module_name`]): a new
/// GPU method adds a module, and changes only its own snapshots and cache
/// entries rather than every kernel's one source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    /// The tiled all-pairs sum ([`cuda`]): the direct method.
    Direct,
    /// The treecode walk ([`walk`]).
    Walk,
    /// The FMM's P2P lists ([`p2p_list`]).
    P2pList,
}

impl Module {
    /// Every module, in the order the snapshots and the debug print list
    /// them. The `kernel!` macro matches over this list, so a module left
    /// out of it is a compile error there.
    pub const ALL: [Module; 3] = [Module::Direct, Module::Walk, Module::P2pList];

    /// The short name: `direct`, `walk`, `p2p_list`.
    pub const fn name(self) -> &'static str {
        match self {
            Module::Direct => "direct",
            Module::Walk => "walk",
            Module::P2pList => "p2p_list",
        }
    }

    /// What the module holds, for its header.
    pub const fn what(self) -> &'static str {
        match self {
            Module::Direct => "the tiled all-pairs sum (fmm_codegen::emit::cuda)",
            Module::Walk => "the treecode walk (fmm_codegen::emit::walk)",
            Module::P2pList => "the FMM's P2P lists (fmm_codegen::emit::p2p_list)",
        }
    }

    /// The name the runtime compiles and caches the module under:
    /// `gravity_walk`.
    pub fn module_name(self, def: &KernelDef) -> String {
        format!("{}_{self}", def.symbol())
    }

    /// Every entry point the module holds, with the launch shapes of
    /// `opts` for the tile kernel: what the host may load from it.
    pub fn entry_points(self, def: &KernelDef, opts: &cuda::CudaOptions) -> Vec<EntryPoint> {
        Precision::ALL
            .into_iter()
            .flat_map(|p| match self {
                Module::Direct => opts
                    .shapes
                    .iter()
                    .map(|&shape| EntryPoint::tile(def, p, shape))
                    .collect(),
                Module::Walk => vec![EntryPoint::walk(def, p)],
                Module::P2pList => vec![EntryPoint::p2p_list(def, p)],
            })
            .collect()
    }
}

impl std::fmt::Display for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a language spells the pieces of an expression.
pub trait Syntax {
    fn literal(&self, c: f64) -> String;
    fn leaf(&self, node: Node) -> String;
    /// A call of a built-in function on rendered arguments, spelled as
    /// the function's row says for this language.
    fn call(&self, f: Func, args: &[String]) -> String;
    fn select(&self, c: &str, a: &str, b: &str) -> String;

    /// A comparison of two rendered operands (parenthesised where needed).
    fn compare(&self, c: Cmp, a: &str, b: &str) -> String {
        let sym = match c {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
        };
        format!("{a} {sym} {b}")
    }

    fn and(&self, a: &str, b: &str) -> String {
        format!("{a} && {b}")
    }

    fn or(&self, a: &str, b: &str) -> String {
        format!("{a} || {b}")
    }

    fn not(&self, a: &str) -> String {
        format!("!{a}")
    }

    /// `a * b + c` (`sign` +1), `a * b - c` (-1 with `negate_c`) or
    /// `c - a * b` (`negate_ab`) in one rounding, for a language that has
    /// it; `None` keeps the product and the sum apart.
    fn fused(&self, _a: &str, _b: &str, _c: &str, _form: Fused) -> Option<String> {
        None
    }
}

/// The three shapes of a fused multiply-add over a product `a * b` and `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fused {
    /// `a * b + c`
    Add,
    /// `a * b - c`
    SubC,
    /// `c - a * b`
    SubAb,
}

/// One accumulation into an output slot.
#[derive(Clone, Debug)]
pub struct Update {
    pub slot: usize,
    /// The value to add, rendered.
    pub value: String,
    /// Subtract instead of add (a negation at the root, folded away).
    pub subtract: bool,
    /// The factors, rendered, when the value is a product: a language
    /// with a fused multiply-add accumulates it in one operation.
    pub product: Option<(String, String)>,
    /// Whether the value changes from source to source; a value fixed per
    /// target (never the case for a physical kernel) is still summed.
    pub stage: Stage,
}

/// The IR laid out for emission.
pub struct Schedule<'a> {
    pub def: &'a KernelDef,
    live: Vec<bool>,
    pub stages: Vec<Stage>,
    temp: Vec<bool>,
    /// Read by a per-pair node or accumulated: what a per-source value
    /// must carry into the pair loop.
    pair_use: Vec<bool>,
}

impl<'a> Schedule<'a> {
    pub fn new(def: &'a KernelDef) -> Self {
        let g = &def.graph;
        let live = g.reachable(&def.contributions);
        let stages = g.stages();
        let mut uses = g.use_counts(&live);
        let mut crosses = vec![false; g.nodes.len()];
        let mut pair_use = vec![false; g.nodes.len()];
        for (i, n) in g.nodes.iter().enumerate() {
            if live[i] {
                for c in n.children() {
                    if stages[c.index()] < stages[i] {
                        crosses[c.index()] = true;
                    }
                    if stages[i] == Stage::Pair {
                        pair_use[c.index()] = true;
                    }
                }
            }
        }
        for &root in &def.contributions {
            let r = match g.node(root) {
                Node::Neg(x) => x,
                _ => root,
            };
            uses[r.index()] += 1;
            pair_use[r.index()] = true;
        }
        // The value operands of a select are computed before it, so the
        // select is a plain blend: a compiler that sees an expression inside
        // a conditional may predicate it and recompute its hoisted operands
        // there (seen with NVRTC 13: `eps * eps` reloaded per interaction).
        let mut select_operand = vec![false; g.nodes.len()];
        for (i, n) in g.nodes.iter().enumerate() {
            if let (true, Node::Select(_, a, b)) = (live[i], n) {
                select_operand[a.index()] = true;
                select_operand[b.index()] = true;
            }
        }
        let temp = (0..g.nodes.len())
            .map(|i| {
                let n = g.nodes[i];
                live[i]
                    && !n.children().is_empty()
                    && (uses[i] > 1
                        || select_operand[i]
                        || (crosses[i] && stages[i] != Stage::Const))
            })
            .collect();
        Schedule {
            def,
            live,
            stages,
            temp,
            pair_use,
        }
    }

    pub fn graph(&self) -> &Graph {
        &self.def.graph
    }

    /// Whether any live node reads this leaf.
    pub fn uses_leaf(&self, leaf: Node) -> bool {
        self.graph()
            .nodes
            .iter()
            .enumerate()
            .any(|(i, n)| self.live[i] && *n == leaf)
    }

    /// The temporaries of one stage, in evaluation order.
    pub fn temps(&self, stage: Stage) -> Vec<NodeId> {
        (0..self.graph().nodes.len())
            .filter(|&i| self.temp[i] && self.stages[i] == stage)
            .map(|i| NodeId(i as u32))
            .collect()
    }

    /// The temporaries of several stages, in evaluation order.
    pub fn temps_in(&self, stages: &[Stage]) -> Vec<NodeId> {
        (0..self.graph().nodes.len())
            .filter(|&i| self.temp[i] && stages.contains(&self.stages[i]))
            .map(|i| NodeId(i as u32))
            .collect()
    }

    /// Whether a node is read by a per-pair node or accumulated.
    pub fn used_in_pair(&self, id: NodeId) -> bool {
        self.pair_use[id.index()]
    }

    /// The node of a leaf, if the live graph has it.
    pub fn leaf_node(&self, leaf: Node) -> Option<NodeId> {
        self.graph()
            .nodes
            .iter()
            .enumerate()
            .find(|(i, n)| self.live[*i] && **n == leaf)
            .map(|(i, _)| NodeId(i as u32))
    }

    /// The name of a temporary.
    pub fn temp_name(&self, id: NodeId) -> String {
        format!("v{}", id.0)
    }

    /// Renders a node as an expression (its temporary's name if it has one).
    pub fn expr(&self, s: &dyn Syntax, id: NodeId) -> String {
        if self.temp[id.index()] {
            return self.temp_name(id);
        }
        self.body(s, id)
    }

    /// An operand of an infix operator: parenthesised unless it is a name
    /// or a call.
    fn operand(&self, s: &dyn Syntax, c: NodeId) -> String {
        let e = self.expr(s, c);
        let n = self.graph().node(c);
        if self.temp[c.index()] || n.children().is_empty() || is_call(n) {
            e
        } else {
            format!("({e})")
        }
    }

    fn infix(&self, s: &dyn Syntax, op: Op, a: NodeId, b: NodeId) -> String {
        let sym = match op {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            _ => "/",
        };
        format!("{} {sym} {}", self.operand(s, a), self.operand(s, b))
    }

    /// A product rendered inline (no temporary), which a sum may fuse.
    fn fusable(&self, id: NodeId) -> bool {
        !self.temp[id.index()] && matches!(self.graph().node(id), Node::Binary(Op::Mul, _, _))
    }

    /// Renders the definition of a node, ignoring its own temporary.
    pub fn body(&self, s: &dyn Syntax, id: NodeId) -> String {
        let g = self.graph();
        let sub = |c: NodeId| self.operand(s, c);
        match g.node(id) {
            Node::Const(c) => s.literal(c),
            n @ (Node::Param(_)
            | Node::Src(_)
            | Node::Tgt(_)
            | Node::SrcPos(_)
            | Node::TgtPos(_)) => s.leaf(n),
            Node::Neg(a) => format!("-{}", sub(a)),
            Node::Call1(f, a) => s.call(f, &[self.expr(s, a)]),
            Node::Call2(f, a, b) => s.call(f, &[self.expr(s, a), self.expr(s, b)]),
            Node::Binary(op @ (Op::Add | Op::Sub), a, b) if self.fusable(b) || self.fusable(a) => {
                let operands = |m: NodeId| match g.node(m) {
                    Node::Binary(Op::Mul, x, y) => (self.expr(s, x), self.expr(s, y)),
                    _ => unreachable!("fusable"),
                };
                let (m, c, form) = match (op, self.fusable(b)) {
                    (Op::Add, true) => (b, a, Fused::Add),
                    (Op::Add, false) => (a, b, Fused::Add),
                    (_, true) => (b, a, Fused::SubAb),
                    (_, false) => (a, b, Fused::SubC),
                };
                let (x, y) = operands(m);
                s.fused(&x, &y, &self.expr(s, c), form)
                    .unwrap_or_else(|| self.infix(s, op, a, b))
            }
            Node::Binary(op, a, b) => self.infix(s, op, a, b),
            Node::Compare(c, a, b) => s.compare(c, &sub(a), &sub(b)),
            Node::And(a, b) => s.and(&sub(a), &sub(b)),
            Node::Or(a, b) => s.or(&sub(a), &sub(b)),
            Node::Not(a) => s.not(&sub(a)),
            Node::Select(c, a, b) => s.select(&self.expr(s, c), &self.expr(s, a), &self.expr(s, b)),
        }
    }

    /// The accumulations, one per output slot, in slot order.
    pub fn updates(&self, s: &dyn Syntax) -> Vec<Update> {
        let g = self.graph();
        self.def
            .contributions
            .iter()
            .enumerate()
            .map(|(slot, &root)| {
                let (r, subtract) = match g.node(root) {
                    Node::Neg(x) => (x, true),
                    _ => (root, false),
                };
                let product = match g.node(r) {
                    Node::Binary(Op::Mul, a, b) => Some((self.expr(s, a), self.expr(s, b))),
                    _ => None,
                };
                Update {
                    slot,
                    value: self.expr(s, r),
                    subtract,
                    product,
                    stage: self.stages[root.index()],
                }
            })
            .collect()
    }

    /// Whether a function is used anywhere in the live graph.
    pub fn uses_func(&self, f: Func) -> bool {
        self.graph().nodes.iter().enumerate().any(|(i, n)| {
            self.live[i] && matches!(n, Node::Call1(g, _) | Node::Call2(g, _, _) if *g == f)
        })
    }
}

fn is_call(n: Node) -> bool {
    matches!(n, Node::Call1(..) | Node::Call2(..) | Node::Select(..))
}

/// Formats an f64 so that it reads back to the same value (`1.0`, `0.5`,
/// `0.07957747154594767`, `1e-300`).
pub fn float_literal(c: f64) -> String {
    let s = format!("{c:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}
