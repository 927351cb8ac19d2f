//! Errors of the runtime: each names the input at fault.

/// What can go wrong in an evaluation.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    #[error("{what}: {got} values given, {expected} expected")]
    LengthMismatch {
        what: String,
        got: usize,
        expected: usize,
    },
    #[error("{what} {index} is not finite ({value})")]
    NonFinite {
        what: String,
        index: usize,
        value: f64,
    },
    #[error("kernel {kernel} has no {role} field `{name}`; its {role} fields are: {known}")]
    UnknownField {
        kernel: String,
        role: &'static str,
        name: String,
        known: String,
    },
    #[error("field `{name}` is declared as a {declared}, but a {given} was given")]
    FieldShape {
        name: String,
        declared: &'static str,
        given: &'static str,
    },
    #[error(
        "kernel {kernel} needs its own {expected}s, but these particles were made as {made_for}"
    )]
    WrongParticles {
        kernel: String,
        expected: &'static str,
        made_for: String,
    },
    #[error("kernel {kernel} takes {expected} parameter value(s) ({names}), but {got} were given")]
    Params {
        kernel: String,
        expected: usize,
        names: String,
        got: usize,
    },
    #[error("kernel {kernel} has no output `{name}`; its outputs are: {known}")]
    UnknownOutput {
        kernel: String,
        name: String,
        known: String,
    },
    #[error("kernel {kernel} requires `{requirement}`, but {what}")]
    Requirement {
        kernel: String,
        requirement: String,
        what: String,
    },
    #[error(
        "kernel {kernel} declares no far field, so {method} cannot approximate distant sources: \
         declare `strength FIELD;` and `far_field laplace {{ ... }}`, or use direct summation"
    )]
    NoFarField {
        kernel: String,
        method: &'static str,
    },
    #[error(
        "the FMM cannot reach a relative error of {tolerance:.1e} here: {reason}; the best was \
         {best:.1e} (p {p}, theta {theta}; tried {}). {advice}",
        tried.iter().map(|(p, e)| format!("p {p}: {e:.1e}")).collect::<Vec<_>>().join(", ")
    )]
    ToleranceNotMet {
        tolerance: f64,
        best: f64,
        p: usize,
        theta: f64,
        reason: String,
        advice: String,
        /// The orders run and the error each gave.
        tried: Vec<(usize, f64)>,
    },
    #[error(
        "kernel {kernel} declares no strength, so {method} cannot let a cell's summed strength \
         stand for its sources: declare `strength FIELD;` naming the source field every output \
         is proportional to (a mass, a charge, a vortex strength), or use direct summation"
    )]
    NoStrength {
        kernel: String,
        method: &'static str,
    },
    #[error("kernel {kernel} cannot use the {far_field} far field: {why}")]
    FarFieldUnusable {
        kernel: String,
        far_field: &'static str,
        why: String,
    },
    #[error("{0}")]
    BadOption(String),
    #[error("bad domain: {0}")]
    BadDomain(String),
    #[error("{method} does not run in a {domain} yet; {instead}")]
    DomainUnsupported {
        method: String,
        domain: String,
        instead: String,
    },
    #[error(
        "the strengths of the {domain} sum to {total:.3e} (of {scale:.3e} in all), so its lattice \
         sum diverges: make the cell neutral, or ask for a neutralising background \
         (PeriodicBox::with_background)"
    )]
    NetStrength {
        domain: String,
        total: f64,
        scale: f64,
    },
    #[error("{0}")]
    Io(String),
    #[error("no CUDA GPU can be used: {0}")]
    CudaUnavailable(String),
    #[error("CUDA error: {0}")]
    Cuda(String),
    #[error("NVRTC could not compile the generated CUDA for kernel {kernel}:\n{log}")]
    Nvrtc { kernel: String, log: String },
    #[error("{what} needs {needed} bytes, but the GPU has {available} bytes free")]
    OutOfMemory {
        /// What did not fit.
        what: String,
        needed: usize,
        available: usize,
    },
    #[error("unknown backend `{0}` (FMM_BACKEND or the API option): use cpu, cuda or auto")]
    UnknownBackend(String),
    /// A distributed evaluation that failed on a process, said on every
    /// process.
    #[error("process {rank}: {message}")]
    Distributed { rank: i32, message: String },
    /// Processes of a distributed evaluation given different jobs.
    #[error("{0}")]
    Mismatch(String),
}
