//! Direct summation: every source to every target, on the CPU ([`cpu`],
//! parallel over targets) or the GPU ([`cuda`], nyland2007's tiles, split
//! into chunks where the problem does not fit in device memory).

pub mod cpu;
pub mod cuda;

pub use cuda::{plan_chunks, Chunks};

/// Settings of the direct sum (they matter on the GPU only).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirectOptions {
    /// Use at most this many bytes of device memory (default: 80% of what
    /// is free). Smaller values force chunking, which tests use.
    pub max_device_bytes: Option<usize>,
    /// Launch shape `(P, Q)` to use instead of the tuned one: `P` targets
    /// per block, `Q` threads per target.
    pub shape: Option<(u32, u32)>,
    /// Fill the outputs with NaN before the launch, so that an element the
    /// kernel fails to write shows up (tests).
    pub poison: bool,
}
