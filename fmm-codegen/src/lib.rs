//! Kernel IR and code generation for N-body interaction kernels.
//!
//! The path from a declaration to code:
//! [`ast::KernelSpec`] (what the `kernel!` macro parses) is checked and
//! lowered by [`lower::lower`] to a [`KernelDef`]: the layout of the
//! kernel's slots and a DAG of scalar operations for one pair ([`ir`]).
//! From that one definition come the flop counts ([`flops`]), the CPU
//! evaluator ([`emit::rust`]), the CUDA source ([`emit::cuda`]) and a text
//! form that the runtime reads back ([`text`]). Each built-in function of
//! the DSL is one row of [`builtins::BUILTINS`], which all of these read.

pub mod ast;
pub mod builtins;
pub mod emit;
pub mod eval;
pub mod flops;
pub mod ir;
pub mod kernel;
pub mod lower;
pub mod text;

pub use flops::FlopCount;
pub use kernel::{Cutoff, FarField, FarTerm, Field, KernelDef, Term};
pub use lower::{lower, Error};
