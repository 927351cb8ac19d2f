//! The built-in scalar functions of the DSL, one row each.
//!
//! A row holds everything about a function that the rest of the compiler
//! needs: its name in the DSL, its arity, its cost in flops, how CUDA and
//! the CPU evaluators spell it, and what it means (its value in f64). The
//! lowering ([`crate::lower`]) resolves a call by this table, the IR refers
//! to a row by its index ([`crate::ir::Func`]), and the interpreter
//! ([`crate::eval`]), constant folding ([`crate::ir`]), the flop counter
//! ([`crate::flops`]), the emitters ([`crate::emit`]) and the text form
//! ([`crate::text`]) read the row. KeOps keeps each operation in a file of
//! its own with its code generation and test range; here the operations are
//! scalar functions with nothing more to them, so a row is enough.
//!
//! Adding a function: a row here; in `fmm-core`, the methods of `Real` and
//! of `simd::Lanes` that the row names (`real`, `lanes`); and a call of it
//! in the kernel of `fmm-core/tests/builtins.rs`, which evaluates every row
//! through both against `eval` and fails, naming the row, while any of this
//! is missing.
//!
//! The forms of the DSL that are not scalar functions of scalars (`powi`
//! with its literal exponent, `select`, `dot`, `cross`, `norm`, `vec3`) are
//! lowered to these and to arithmetic, and are not rows
//! ([`crate::lower::FORMS`]).

/// One built-in scalar function.
#[derive(Debug)]
pub struct Builtin {
    /// The name in the DSL, in the IR's text form and in the CUDA helper
    /// `fmm_<name>`.
    pub name: &'static str,
    /// Other names the DSL accepts for it (`ln` for `log`, as in Rust).
    pub aliases: &'static [&'static str],
    /// The number of scalar arguments: 1 or 2.
    pub arity: usize,
    /// Flops of one call, every operation counting one (nyland2007's
    /// count); 0 for what costs nothing on a GPU (`abs` is an operand
    /// modifier there).
    pub flops: u32,
    /// The call's cost in clock cycles relative to an add (yokota2009
    /// Table 2: `sqrt` 4, `exp` 8, `erf` 8 taken equal to `exp`). Weights
    /// the table does not give: `rsqrt` 4 (like `sqrt`), `log` 8 (like
    /// `exp`), `min` and `max` 1.
    pub weighted: u32,
    /// The CUDA function for `float`. In f32 the exponential and logarithm
    /// are the hardware's (`__expf`: a multiplication and one MUFU.EX2,
    /// relative error about 2^-21 for moderate arguments, against nine
    /// instructions for `expf`).
    pub cuda_f32: &'static str,
    /// The CUDA function for `double`: the accurate library function.
    pub cuda_f64: &'static str,
    /// The method of `fmm_core::Real` the CPU evaluator calls
    /// (`R::<real>(x)`).
    pub real: &'static str,
    /// The method of `fmm_core::simd::Lanes` the AVX2 evaluator calls
    /// (`V::<lanes>(x)`).
    pub lanes: &'static str,
    /// The function's meaning: its value in f64 for `arity` arguments.
    pub eval: fn(&[f64]) -> f64,
    /// `f(a, b) = f(b, a)`: the IR orders the operands so that both
    /// orders share one node.
    pub commutative: bool,
    /// `f(-x) = f(x)`: the IR drops a negated argument.
    pub even: bool,
    /// `f(f(x)) = f(x)` (one argument) or `f(x, x) = x` (two): the IR
    /// drops the repeated call.
    pub idempotent: bool,
    /// Where the test of the CPU evaluators samples each argument: the
    /// domain, or the part of it where the function is not flat.
    pub test_range: (f64, f64),
}

/// The table. Its order is the order of the CUDA helpers in the generated
/// source.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "sqrt",
        aliases: &[],
        arity: 1,
        flops: 1,
        weighted: 4,
        cuda_f32: "sqrtf",
        cuda_f64: "sqrt",
        real: "sqrt",
        lanes: "sqrt",
        eval: |x| x[0].sqrt(),
        commutative: false,
        even: false,
        idempotent: false,
        test_range: (0.0, 10.0),
    },
    Builtin {
        name: "rsqrt",
        aliases: &[],
        arity: 1,
        flops: 1,
        weighted: 4,
        cuda_f32: "rsqrtf",
        cuda_f64: "rsqrt",
        real: "rsqrt",
        lanes: "rsqrt",
        eval: |x| 1.0 / x[0].sqrt(),
        commutative: false,
        even: false,
        idempotent: false,
        test_range: (0.01, 10.0),
    },
    Builtin {
        name: "exp",
        aliases: &[],
        arity: 1,
        flops: 1,
        weighted: 8,
        cuda_f32: "__expf",
        cuda_f64: "exp",
        real: "exp",
        lanes: "exp",
        eval: |x| x[0].exp(),
        commutative: false,
        even: false,
        idempotent: false,
        test_range: (-10.0, 5.0),
    },
    Builtin {
        name: "erf",
        aliases: &[],
        arity: 1,
        flops: 1,
        weighted: 8,
        cuda_f32: "erff",
        cuda_f64: "erf",
        real: "erf",
        lanes: "erf",
        eval: |x| libm::erf(x[0]),
        commutative: false,
        even: false,
        idempotent: false,
        test_range: (-3.0, 3.0),
    },
    Builtin {
        name: "log",
        aliases: &["ln"],
        arity: 1,
        flops: 1,
        weighted: 8,
        cuda_f32: "__logf",
        cuda_f64: "log",
        real: "ln",
        lanes: "ln",
        eval: |x| x[0].ln(),
        commutative: false,
        even: false,
        idempotent: false,
        test_range: (0.01, 100.0),
    },
    Builtin {
        name: "abs",
        aliases: &[],
        arity: 1,
        flops: 0,
        weighted: 0,
        cuda_f32: "fabsf",
        cuda_f64: "fabs",
        real: "abs",
        lanes: "abs",
        eval: |x| x[0].abs(),
        commutative: false,
        even: true,
        idempotent: true,
        test_range: (-10.0, 10.0),
    },
    Builtin {
        name: "min",
        aliases: &[],
        arity: 2,
        flops: 1,
        weighted: 1,
        cuda_f32: "fminf",
        cuda_f64: "fmin",
        real: "min",
        lanes: "min",
        eval: |x| x[0].min(x[1]),
        commutative: true,
        even: false,
        idempotent: true,
        test_range: (-10.0, 10.0),
    },
    Builtin {
        name: "max",
        aliases: &[],
        arity: 2,
        flops: 1,
        weighted: 1,
        cuda_f32: "fmaxf",
        cuda_f64: "fmax",
        real: "max",
        lanes: "max",
        eval: |x| x[0].max(x[1]),
        commutative: true,
        even: false,
        idempotent: true,
        test_range: (-10.0, 10.0),
    },
];

/// A built-in function: the index of its row in [`BUILTINS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Func(u8);

impl Func {
    /// `sqrt`, which the lowering of `r` and `norm` calls.
    pub const SQRT: Func = Func::must("sqrt");
    /// `rsqrt`, what `1 / sqrt(x)` becomes (one instruction on a GPU).
    pub const RSQRT: Func = Func::must("rsqrt");

    /// The function the DSL calls `name` (its name or an alias).
    pub fn named(name: &str) -> Option<Func> {
        BUILTINS
            .iter()
            .position(|b| b.name == name || b.aliases.contains(&name))
            .map(|k| Func(k as u8))
    }

    /// Every function, in table order.
    pub fn all() -> impl Iterator<Item = Func> {
        (0..BUILTINS.len()).map(|k| Func(k as u8))
    }

    /// Its row.
    pub fn row(self) -> &'static Builtin {
        &BUILTINS[self.0 as usize]
    }

    /// Its name in the DSL and the text form.
    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// The function named `name`, found when this crate is compiled (a
    /// missing row is a compile error, not a run-time one).
    const fn must(name: &str) -> Func {
        let mut k = 0;
        while k < BUILTINS.len() {
            if str_eq(BUILTINS[k].name, name) {
                return Func(k as u8);
            }
            k += 1;
        }
        panic!("no built-in function of this name");
    }
}

/// String equality usable in a `const fn`.
const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is consistent with itself and with the names around it.
    #[test]
    fn rows_are_well_formed() {
        // Words the text form and the DSL give other meanings.
        let taken = [
            "neg", "add", "sub", "mul", "div", "lt", "le", "gt", "ge", "eq", "ne", "and", "or",
            "not", "sel", "const", "param", "src", "tgt", "spos", "tpos",
        ];
        let mut seen = Vec::new();
        for b in BUILTINS {
            let names = std::iter::once(&b.name).chain(b.aliases);
            for n in names {
                assert!(!seen.contains(n), "`{n}` names two rows");
                assert!(!taken.contains(n), "`{n}` is a word of the text form");
                assert!(
                    !crate::lower::FORMS.contains(n) && !crate::lower::BUILTIN_NAMES.contains(n),
                    "`{n}` is a form or a built-in name of the DSL"
                );
                seen.push(n);
            }
            assert!((1..=2).contains(&b.arity), "{}: arity {}", b.name, b.arity);
            assert!(!b.commutative || b.arity == 2, "{}", b.name);
            assert!(!b.even || b.arity == 1, "{}", b.name);
            assert!(b.flops <= b.weighted, "{}", b.name);
            let (lo, hi) = b.test_range;
            assert!(lo < hi, "{}", b.name);
            let mid = vec![0.5 * (lo + hi); b.arity];
            assert!((b.eval)(&mid).is_finite(), "{}", b.name);
        }
        assert_eq!(Func::named("ln"), Func::named("log"));
        assert_eq!(Func::SQRT.name(), "sqrt");
        assert_eq!(Func::RSQRT.name(), "rsqrt");
        assert_eq!(Func::all().count(), BUILTINS.len());
    }

    /// The algebraic flags say what the f64 evaluation does.
    #[test]
    fn flags_hold_for_the_evaluation() {
        let samples = [-2.5, -1.0, -0.3, 0.0, 0.7, 1.0, 3.2];
        for f in Func::all() {
            let b = f.row();
            for &x in &samples {
                for &y in &samples {
                    let e = |a: &[f64]| (b.eval)(a);
                    if b.commutative {
                        assert_eq!(e(&[x, y]), e(&[y, x]), "{}", b.name);
                    }
                    if b.even {
                        assert_eq!(e(&[-x]), e(&[x]), "{}", b.name);
                    }
                    if b.idempotent && b.arity == 1 {
                        assert_eq!(e(&[e(&[x])]), e(&[x]), "{}", b.name);
                    }
                    if b.idempotent && b.arity == 2 {
                        assert_eq!(e(&[x, x]), x, "{}", b.name);
                    }
                }
            }
        }
    }
}
