//! What the vortex layer refuses, each naming the value.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum VortexError {
    /// A particle's field is not finite, or out of its range.
    #[error("particle {index}: {what} is {value} ({why})")]
    BadParticle {
        index: usize,
        what: &'static str,
        value: f64,
        why: &'static str,
    },
    /// A setting out of its range.
    #[error("{what} is {value}: {why}")]
    BadSetting {
        what: &'static str,
        value: f64,
        why: &'static str,
    },
    /// Arrays of different lengths.
    #[error("{what}: {got} values given, {expected} expected")]
    LengthMismatch {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    /// An iterative solve that did not reach its tolerance.
    #[error("{what} did not reach a relative residual of {tolerance:e} in {iterations} iterations (it reached {residual:.2e}): {hint}")]
    NotConverged {
        what: &'static str,
        iterations: usize,
        residual: f64,
        tolerance: f64,
        hint: &'static str,
    },
    /// A combination this layer does not run, and what to do instead.
    #[error("{what} is not supported: {instead}")]
    Unsupported {
        what: &'static str,
        instead: &'static str,
    },
    /// A checkpoint that cannot be written or read.
    #[error("checkpoint {path}: {why}")]
    Checkpoint { path: String, why: String },
    /// An output file that cannot be written.
    #[error("{path}: {why}")]
    Output { path: String, why: String },
    /// What the front door said.
    #[error(transparent)]
    Fmm(#[from] fmm_core::Error),
}
