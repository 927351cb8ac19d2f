//! The kernel declaration as written: names, shapes and an expression tree.
//!
//! This is what the `kernel!` macro (or a program building kernels at run
//! time) hands to [`crate::lower`]. Every node carries a [`Span`], an opaque
//! number that the front end maps back to a place in its source, so that the
//! checks in `lower` can point at the mistake.

/// Where a node came from. The front end decides what the number means
/// (the proc-macro keeps a table of `proc_macro2::Span`s); `Span::NONE` is
/// for nodes built by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span(pub u32);

impl Span {
    pub const NONE: Span = Span(u32::MAX);
}

/// Scalar or 3-vector: the only two shapes of fields, parameters and outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    Scalar,
    Vec3,
}

impl Shape {
    /// Number of scalar slots this shape takes in a flattened layout.
    pub fn slots(self) -> usize {
        match self {
            Shape::Scalar => 1,
            Shape::Vec3 => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Shape::Scalar => "scalar",
            Shape::Vec3 => "vec3",
        }
    }
}

/// A named parameter, source field, target field or output.
#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    pub name: String,
    pub shape: Shape,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

/// An expression of the kernel body.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A numeric literal.
    Num(f64, Span),
    /// A name: a `let` binding, a field, a parameter, a built-in (`d`, `r2`,
    /// `r`) or a constant (`PI`).
    Name(String, Span),
    Unary(UnOp, Box<Expr>, Span),
    Binary(BinOp, Box<Expr>, Box<Expr>, Span),
    /// A call of a built-in function (`sqrt`, `dot`, `select` ...).
    Call(String, Vec<Expr>, Span),
    /// A component of a vector: `v.x`, `v.y`, `v.z`.
    Component(Box<Expr>, String, Span),
    /// `if cond { a } else { b }`: both branches are evaluated, one is kept.
    If(Box<Expr>, Box<Expr>, Box<Expr>, Span),
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Num(_, s)
            | Expr::Name(_, s)
            | Expr::Unary(_, _, s)
            | Expr::Binary(_, _, _, s)
            | Expr::Call(_, _, s)
            | Expr::Component(_, _, s)
            | Expr::If(_, _, _, s) => *s,
        }
    }
}

/// A statement of the kernel body.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `let name = value;`
    Let {
        name: String,
        value: Expr,
        span: Span,
    },
    /// `output += value;` (`negate` for `-=`).
    Accumulate {
        output: String,
        negate: bool,
        value: Expr,
        span: Span,
    },
}

/// One output's far field as written: `OUTPUT = VALUE;`, where the value is
/// a constant coefficient times exactly one Laplace term (`-potential`,
/// `curl / (4.0 * PI)`). Lowering splits it and checks it
/// ([`crate::lower`]); the parser only reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct FarOutput {
    pub output: String,
    /// The right-hand side, in which the terms (`potential`, `gradient`,
    /// `curl`, `stretching(FIELD)`) appear as names and calls.
    pub value: Expr,
    /// The whole entry.
    pub span: Span,
}

/// `strength FIELD;`: the source field that is the kernel's additive
/// source strength (a mass, a charge, a vortex strength). Each source's
/// contribution is linear in it, so the strengths of many sources add up:
/// the treecode replaces a cell's sources by one carrying their summed
/// strength, and the FMM expands the Laplace sum of it.
#[derive(Clone, Debug, PartialEq)]
pub struct StrengthDecl {
    /// The source field named.
    pub field: String,
    /// Where the field's name is written.
    pub field_span: Span,
    /// The whole declaration.
    pub span: Span,
}

/// How the far field is represented.
#[derive(Clone, Debug, PartialEq)]
pub enum FarFieldSpec {
    /// No expansion: direct summation and pseudo-particles only.
    None,
    /// Laplace expansions of the declared strength ([`StrengthDecl`]).
    Laplace {
        outputs: Vec<FarOutput>,
        /// Where `laplace` is written.
        span: Span,
    },
}

/// A whole kernel declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelSpec {
    /// The type name (`Gravity`).
    pub name: String,
    pub name_span: Span,
    /// The doc comment, lines joined with `\n`.
    pub doc: String,
    pub params: Vec<Decl>,
    pub sources: Vec<Decl>,
    pub targets: Vec<Decl>,
    pub outputs: Vec<Decl>,
    /// The additive source strength, if declared.
    pub strength: Option<StrengthDecl>,
    pub far_field: FarFieldSpec,
    /// Conditions on the inputs (`require sigma > 0.0;`), checked by the
    /// runtime before an evaluation.
    pub requires: Vec<Require>,
    /// `cutoff RC;`: the interaction is truncated at distance `RC`.
    pub cutoff: Option<Cutoff>,
    pub body: Vec<Stmt>,
}

/// `cutoff RC;`: pairs at distance `RC` or more do not interact. `RC` is an
/// expression of the parameters. A kernel with a cutoff is short-range:
/// its sums are direct (in a periodic box by the minimum image), and the
/// far fields, which would sum what the cutoff drops, do not run it.
#[derive(Clone, Debug, PartialEq)]
pub struct Cutoff {
    pub value: Expr,
    /// The radius as written, for messages.
    pub text: String,
    pub span: Span,
}

/// `require COND;`: a condition every evaluation checks on its inputs. It
/// may use the parameters and the fields of one side (sources or targets).
#[derive(Clone, Debug, PartialEq)]
pub struct Require {
    pub cond: Expr,
    /// The condition as written, for the error message.
    pub text: String,
    pub span: Span,
}
