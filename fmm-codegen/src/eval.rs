//! A plain f64 interpreter of the IR.
//!
//! Slow and simple on purpose: it is the meaning of the IR, used by the
//! checks (what does the kernel give at r = 0?) and by tests that compare
//! the generated evaluators against it.

use crate::ir::{eval_compare, fold_binary, Graph, Node, NodeId};
use crate::kernel::KernelDef;

/// The inputs of one source-target pair, as flattened slots.
#[derive(Clone, Copy, Debug)]
pub struct PairInputs<'a> {
    pub params: &'a [f64],
    pub target_pos: [f64; 3],
    pub target: &'a [f64],
    pub source_pos: [f64; 3],
    pub source: &'a [f64],
}

/// Value of every node of `graph` for one pair (booleans as 0.0 / 1.0).
pub fn eval_nodes(graph: &Graph, inp: &PairInputs) -> Vec<f64> {
    let mut v = Vec::with_capacity(graph.nodes.len());
    eval_nodes_into(graph, inp, &mut v);
    v
}

/// [`eval_nodes`] into a buffer the caller reuses (checks over millions of
/// particles allocate nothing per particle).
pub fn eval_nodes_into(graph: &Graph, inp: &PairInputs, v: &mut Vec<f64>) {
    v.clear();
    let b = |x: f64| x != 0.0;
    let f = |x: bool| if x { 1.0 } else { 0.0 };
    for node in &graph.nodes {
        let g = |id: NodeId| v[id.index()];
        let x = match *node {
            Node::Const(c) => c,
            Node::Param(k) => inp.params[k as usize],
            Node::Src(k) => inp.source[k as usize],
            Node::Tgt(k) => inp.target[k as usize],
            Node::SrcPos(c) => inp.source_pos[c as usize],
            Node::TgtPos(c) => inp.target_pos[c as usize],
            Node::Neg(a) => -g(a),
            Node::Binary(op, a, c) => fold_binary(op, g(a), g(c)),
            Node::Call1(fun, a) => (fun.row().eval)(&[g(a)]),
            Node::Call2(fun, a, c) => (fun.row().eval)(&[g(a), g(c)]),
            Node::Compare(cmp, a, c) => f(eval_compare(cmp, g(a), g(c))),
            Node::And(a, c) => f(b(g(a)) && b(g(c))),
            Node::Or(a, c) => f(b(g(a)) || b(g(c))),
            Node::Not(a) => f(!b(g(a))),
            Node::Select(c, a, e) => {
                if b(g(c)) {
                    g(a)
                } else {
                    g(e)
                }
            }
        };
        v.push(x);
    }
}

/// What one source adds to each flattened output slot of one target.
pub fn eval_pair(def: &KernelDef, inp: &PairInputs) -> Vec<f64> {
    let v = eval_nodes(&def.graph, inp);
    def.contributions.iter().map(|id| v[id.index()]).collect()
}
