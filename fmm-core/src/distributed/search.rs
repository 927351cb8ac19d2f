//! One tolerance over every process: each process's evaluation searches
//! its own way to meet it (the treecode or the FMM, an order, a MAC), and
//! the searches end in different places (the timings' and estimates'
//! noise): on 2 H200s, velocity + stretching at 1e-4 and 2^24 particles a
//! process, one process ended at p 7, theta 0.4 (3.29 s a run) where the
//! other met it at p 9, theta 0.56 (1.27 s), and the slowest process sets
//! every step (2026-11-28). So after an evaluation the processes compare
//! their ways; one whose way took more than [`SLOWER`] times the fastest
//! process's takes that up as its next first try (once for each way, so
//! that two processes whose own ways are fastest for them do not trade
//! back and forth); its own error estimate still checks it, and where it
//! runs slower here the way this process found comes back.

use std::sync::Mutex;

use mpi::traits::{Communicator, CommunicatorCollectives};

use crate::accuracy::memory::{adopt, remembered_time, ProblemKey};
use crate::accuracy::Achieved;
use crate::evaluate::problem_key;
use crate::far::FarField;
use crate::kernel::Kernel;
use crate::methods::fmm::Settings;
use crate::methods::Method;
use crate::problem::Problem;

/// How much slower than the fastest process's a process's way may be
/// before it takes the fastest's up.
pub(super) const SLOWER: f64 = 1.25;

/// The ways a tolerance's search ends in that another process can take up
/// (the direct sum has no settings to share).
const WAYS: [&str; 2] = ["treecode", "fmm"];

/// The far fields, numbered for the exchange.
const FARS: [FarField; 5] = [
    FarField::Auto,
    FarField::Monopole,
    FarField::Laplace,
    FarField::Ppm,
    FarField::KernelIndependent,
];

/// The ways taken up, each once: the problem, way, far field, order and
/// MAC's bits.
type Taken = (ProblemKey, usize, usize, usize, u64);
static TAKEN: Mutex<Vec<Taken>> = Mutex::new(Vec::new());

/// A process's way, for the exchange: seconds a run, way, far field,
/// order, MAC (seconds infinite: none to share). Only an evaluation of one
/// run has its way's own time: a search's is remembered as its runs' mean.
fn way_of(key: &ProblemKey, sizes: (usize, usize), runs: usize, a: Option<&Achieved>) -> [f64; 5] {
    let none = [f64::INFINITY, 0.0, 0.0, 0.0, 0.0];
    let Some(a) = a.filter(|_| runs == 1) else {
        return none;
    };
    let (Some(way), Some(far)) = (
        WAYS.iter().position(|&w| w == a.method),
        FARS.iter().position(|&f| f == a.far_field),
    ) else {
        return none;
    };
    let seconds = remembered_time(&key.with_sizes(sizes.0, sizes.1), a.method);
    [
        seconds.unwrap_or(f64::INFINITY),
        way as f64,
        far as f64,
        a.settings.p as f64,
        a.settings.theta,
    ]
}

/// The problem key of a `Method::Tolerance` evaluation of kernel `K`
/// (`None` for other methods: nothing to share).
pub(super) fn tolerance_key<K: Kernel>(
    method: &Method,
    problem: &Problem<'_>,
    f32: bool,
    gpu: bool,
) -> Option<ProblemKey> {
    match *method {
        Method::Tolerance(tol) => Some(problem_key::<K>(problem, tol, f32, gpu)),
        _ => None,
    }
}

/// After an evaluation of the problem `key` ([`tolerance_key`]; `sizes`:
/// its targets and sources here, `runs` its runs, `achieved` what it
/// met): every process's way compared, and the fastest taken up where
/// this process's took more than [`SLOWER`] times as long. Ways of one run
/// only (a search's time is its runs' mean). A collective call where
/// `key` is given (on every process alike).
pub(super) fn share_the_fastest<C: Communicator>(
    comm: &C,
    key: &ProblemKey,
    sizes: (usize, usize),
    runs: usize,
    achieved: Option<&Achieved>,
) {
    let mine = way_of(key, sizes, runs, achieved);
    let mut all = vec![0.0f64; 5 * comm.size() as usize];
    comm.all_gather_into(&mine[..], &mut all[..]);
    let Some(fastest) = to_take(&mine, &all) else {
        return;
    };
    let (way, far) = (fastest[1] as usize, fastest[2] as usize);
    let settings = Settings {
        p: fastest[3] as usize,
        theta: fastest[4],
    };
    let taken: Taken = (key.clone(), way, far, settings.p, settings.theta.to_bits());
    let mut before = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    if before.contains(&taken) {
        return;
    }
    before.push(taken);
    if crate::stats::trace() {
        eprintln!(
            "[fmm] process {}: takes up the fastest process's way, {} {} p {} theta {} ({:.3} s a \
             run there, {:.3} s here)",
            comm.rank(),
            WAYS[way],
            FARS[far].name(),
            settings.p,
            settings.theta,
            fastest[0],
            mine[0]
        );
    }
    adopt(key, sizes, WAYS[way], FARS[far], settings, fastest[0]);
}

/// The way among `all` (five values a process, as [`way_of`] gives them)
/// that a process whose own is `mine` takes up: the fastest, where `mine`
/// took more than [`SLOWER`] times as long and is another.
fn to_take<'a>(mine: &[f64; 5], all: &'a [f64]) -> Option<&'a [f64]> {
    let fastest = all.chunks_exact(5).min_by(|a, b| a[0].total_cmp(&b[0]))?;
    let slower = mine[0].is_finite() && mine[0] > SLOWER * fastest[0];
    (slower && fastest[1..] != mine[1..]).then_some(fastest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slower_process_takes_the_fastest_way_up() {
        // Velocity + stretching on 2 H200s: p 7 at 0.4 (3.29 s) and p 9
        // at 0.56 (1.27 s).
        let slow = [3.29, 1.0, 2.0, 7.0, 0.4];
        let fast = [1.27, 1.0, 2.0, 9.0, 0.56];
        let all = [slow, fast].concat();
        assert_eq!(to_take(&slow, &all), Some(&fast[..]));
        assert_eq!(to_take(&fast, &all), None, "the fastest keeps its own");
        // Within SLOWER: each keeps its own.
        let near = [1.5, 0.0, 1.0, 0.0, 0.3];
        assert_eq!(to_take(&near, &[near, fast].concat()), None);
        // A process that searched (no time of its way) takes nothing up,
        // and is no one's fastest.
        let searched = [f64::INFINITY, 0.0, 0.0, 0.0, 0.0];
        assert_eq!(to_take(&searched, &[searched, fast].concat()), None);
        assert_eq!(to_take(&slow, &[slow, searched].concat()), None);
    }
}
