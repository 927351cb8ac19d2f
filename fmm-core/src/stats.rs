//! What an evaluation did and how long each stage took, for every method
//! and backend alike.
//!
//! A method times its stages with a [`Clock`] keyed by [`Stage`], once per
//! stage, instead of keeping a field per stage: the stages of a new method
//! (or of the same method on another backend) are new uses of the same
//! enum, and printing a breakdown is one loop.

use std::time::Instant;

use crate::cuda::Gpu;
use crate::error::Error;

/// A stage of an evaluation, in the papers' vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Loading the compiled operators and kernel (the GPU).
    Setup,
    /// Copying the particles to the device.
    Upload,
    /// Building the trees (and the treecode's pseudo-sources and groups).
    Tree,
    /// The FMM's dual tree traversal: the M2L and P2P lists.
    Traversal,
    /// P2M and M2M.
    Upward,
    M2l,
    /// L2L and L2P.
    Downward,
    /// The near field: particle-particle interactions (the whole direct
    /// sum).
    P2p,
    /// The treecode's walk and evaluation (near and far together).
    Walk,
    /// Putting the outputs back in the caller's order and copying them to
    /// the host.
    Download,
    /// Estimating the error on sampled targets against an f64 direct sum
    /// (tolerance-driven evaluations).
    ErrorEstimate,
    /// Over MPI: finding the processes' parts (orthogonal recursive
    /// bisection) and moving the particles there.
    Partition,
    /// Over MPI: the walk that picks what each other process needs of
    /// this one's sources, and their nodes' strengths (the local
    /// essential tree).
    Essential,
    /// Over MPI: sending and receiving the local essential trees.
    Exchange,
}

impl Stage {
    /// Every stage, in the order an evaluation runs them.
    pub const ALL: [Stage; 14] = [
        Stage::Setup,
        Stage::Upload,
        Stage::Tree,
        Stage::Traversal,
        Stage::Upward,
        Stage::M2l,
        Stage::Downward,
        Stage::P2p,
        Stage::Walk,
        Stage::Download,
        Stage::ErrorEstimate,
        Stage::Partition,
        Stage::Essential,
        Stage::Exchange,
    ];

    /// A short name for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Setup => "setup",
            Stage::Upload => "upload",
            Stage::Tree => "tree",
            Stage::Traversal => "traversal",
            Stage::Upward => "upward",
            Stage::M2l => "m2l",
            Stage::Downward => "downward",
            Stage::P2p => "p2p",
            Stage::Walk => "walk",
            Stage::Download => "download",
            Stage::ErrorEstimate => "error_estimate",
            Stage::Partition => "partition",
            Stage::Essential => "essential",
            Stage::Exchange => "exchange",
        }
    }
}

/// Which M2L ran on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum M2lKind {
    /// Float products on normalised coefficients, lanes over source cells.
    FloatLanes,
    /// Double precision, one thread per (coefficient rows, expansion).
    Double,
}

impl M2lKind {
    pub fn name(self) -> &'static str {
        match self {
            M2lKind::FloatLanes => "f32 lanes",
            M2lKind::Double => "f64",
        }
    }
}

/// What an evaluation did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Seconds per stage, in the order the stages first ran; a stage that
    /// ran more than once (a tolerance-driven evaluation that raised its
    /// order) holds the sum.
    pub stages: Vec<(Stage, f64)>,
    /// Cells of the source tree.
    pub source_cells: usize,
    /// Cells of the target tree (the FMM).
    pub target_cells: usize,
    /// Target groups that walked the tree together (the treecode).
    pub target_groups: usize,
    /// M2L translations (the FMM).
    pub m2l: u64,
    /// Of the M2L translations, those by compressed operators (the node
    /// far fields), the operators they took (a homogeneous kernel's
    /// levels share theirs), and how many of those were kept from an
    /// earlier evaluation of the same geometry.
    pub m2l_compressed: u64,
    pub m2l_operators: usize,
    pub m2l_operators_reused: usize,
    /// Particle-particle interactions.
    pub p2p: u64,
    /// Particle-cell interactions (the treecode's far field).
    pub p2c: u64,
    /// Which M2L ran (the FMM on the GPU).
    pub m2l_kind: Option<M2lKind>,
    /// Of the float M2L's translations, those it left to the double one
    /// (cells too close or too far apart in size for float's range).
    pub m2l_in_double: u64,
    /// The launch shape `(P, Q)` of the direct sum on the GPU: `P` targets
    /// per block, `Q` threads per target.
    pub launch_shape: Option<(u32, u32)>,
    /// How the direct sum on the GPU split the problem to fit in memory:
    /// (targets, sources) per chunk.
    pub chunks: Option<(usize, usize)>,
    /// Evaluations run (more than one when a tolerance needed a higher
    /// order).
    pub runs: usize,
    /// Over MPI: bytes of particles this process sent to others and got
    /// from them (the partition's moves, the local essential trees and the
    /// outputs brought back).
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// Over MPI: the own sources were evaluated while the local essential
    /// trees were exchanged, and those the others sent after
    /// (`distributed::Overlap`); `false`: every source joined.
    pub split: bool,
}

impl Stats {
    /// Adds `seconds` to `stage`.
    pub fn add(&mut self, stage: Stage, seconds: f64) {
        match self.stages.iter_mut().find(|(s, _)| *s == stage) {
            Some((_, t)) => *t += seconds,
            None => self.stages.push((stage, seconds)),
        }
    }

    /// Seconds in `stage` (0 if it did not run).
    pub fn seconds(&self, stage: Stage) -> f64 {
        self.stages
            .iter()
            .find(|(s, _)| *s == stage)
            .map_or(0.0, |(_, t)| *t)
    }

    /// Moves `seconds` booked under `from` to `to` (a stage's one-off part,
    /// such as operators built inside the M2L, booked as setup).
    pub(crate) fn rebook(&mut self, from: Stage, to: Stage, seconds: f64) {
        self.add(from, -seconds);
        self.add(to, seconds);
    }

    /// Seconds in all stages.
    pub fn total_seconds(&self) -> f64 {
        self.stages.iter().map(|(_, t)| t).sum()
    }

    /// Adds the stages and counts of `part`, an evaluation of more sources
    /// at the same targets (its outputs added to these ones').
    pub(crate) fn add_part(&mut self, part: &Stats) {
        for &(stage, t) in &part.stages {
            self.add(stage, t);
        }
        self.source_cells += part.source_cells;
        self.m2l += part.m2l;
        self.m2l_compressed += part.m2l_compressed;
        self.m2l_in_double += part.m2l_in_double;
        self.p2p += part.p2p;
        self.p2c += part.p2c;
    }

    /// Adds the stages and runs of `other` (an earlier attempt) to these.
    pub(crate) fn absorb_time(&mut self, other: &Stats) {
        for &(stage, t) in &other.stages {
            self.add(stage, t);
        }
        self.runs += other.runs;
    }
}

/// Times the stages of one evaluation: each [`Clock::lap`] books the time
/// since the last to a stage. On the GPU the stream is synchronised first,
/// so a stage's time is its kernels' and not only their launches'.
pub(crate) struct Clock<'a> {
    stats: &'a mut Stats,
    gpu: Option<&'a Gpu>,
    last: Instant,
}

impl<'a> Clock<'a> {
    /// A clock for a CPU evaluation.
    pub(crate) fn cpu(stats: &'a mut Stats) -> Self {
        Clock {
            stats,
            gpu: None,
            last: Instant::now(),
        }
    }

    /// A clock that waits for `gpu`'s stream before each lap.
    pub(crate) fn gpu(stats: &'a mut Stats, gpu: &'a Gpu) -> Self {
        Clock {
            stats,
            gpu: Some(gpu),
            last: Instant::now(),
        }
    }

    /// Books the time since the last lap to `stage`.
    pub(crate) fn lap(&mut self, stage: Stage) -> Result<(), Error> {
        if let Some(gpu) = self.gpu {
            gpu.stream()
                .synchronize()
                .map_err(crate::cuda::device::cuda_err(stage.name()))?;
        }
        let now = Instant::now();
        self.stats.add(stage, (now - self.last).as_secs_f64());
        self.last = now;
        Ok(())
    }

    /// Starts the next lap now, booking the time since the last nowhere
    /// (a wait for something that is not this evaluation's work).
    pub(crate) fn restart(&mut self) {
        self.last = Instant::now();
    }

    /// The statistics, for counts.
    pub(crate) fn stats(&mut self) -> &mut Stats {
        self.stats
    }
}

/// Whether `FMM_TRACE` is set: the tolerance's driver then says every
/// run's settings, error and time on stderr, and the stages that estimate
/// its error say theirs.
pub fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("FMM_TRACE").is_some_and(|v| !v.is_empty() && v != "0"))
}
