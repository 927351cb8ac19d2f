//! Stages timed on stderr where `FMM_TRACE` is set: what a call's cost is
//! made of, each stage's line after its GPU work is done (the stream
//! waited for) when there is a GPU.

use std::time::Instant;

use super::Gpu;
use crate::error::Error;

/// The laps of one call: each [`Laps::say`] prints the seconds since the
/// last.
pub(crate) struct Laps<'a> {
    gpu: Option<&'a Gpu>,
    what: String,
    last: Option<Instant>,
}

impl<'a> Laps<'a> {
    /// Laps of `what` (named in each line), waiting for `gpu`'s stream
    /// before each.
    pub(crate) fn new(gpu: Option<&'a Gpu>, what: impl Into<String>) -> Self {
        let last = crate::stats::trace().then(Instant::now);
        Laps {
            gpu,
            what: what.into(),
            last,
        }
    }

    /// Says the time since the last stage, `stage` its name.
    pub(crate) fn say(&mut self, stage: &str) -> Result<(), Error> {
        let Some(last) = self.last else {
            return Ok(());
        };
        if let Some(gpu) = self.gpu {
            gpu.stream()
                .synchronize()
                .map_err(crate::cuda::device::cuda_err(stage))?;
        }
        let now = Instant::now();
        eprintln!(
            "[fmm] {}: {stage} {:.4} s",
            self.what,
            (now - last).as_secs_f64()
        );
        self.last = Some(now);
        Ok(())
    }
}
