//! What the accuracy driver remembers between evaluations of one problem
//! (a simulation's steps, a benchmark's repeats): the far field the
//! default switched to, the settings that met a tolerance, and how long
//! each way took. Bounded: at most [`PROBLEMS_KEPT`] problems each, the
//! oldest dropped.

use std::sync::Mutex;

use crate::far::FarField;
use crate::methods::fmm::Settings;

/// What a tolerance's choices are remembered by: the kernel, its
/// parameters' bits, the tolerance's, the particles' precision and the
/// backend; for the methods' times also the sizes ([`Self::with_sizes`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProblemKey {
    kernel: &'static str,
    params: Vec<u64>,
    tol: u64,
    f32: bool,
    gpu: bool,
    sizes: Option<(usize, usize)>,
    /// The domain's name: a periodic box's choices are its own.
    domain: String,
}

impl ProblemKey {
    pub(crate) fn new(
        kernel: &'static str,
        params: &[f64],
        tol: f64,
        f32: bool,
        gpu: bool,
    ) -> Self {
        ProblemKey {
            kernel,
            params: params.iter().map(|x| x.to_bits()).collect(),
            tol: tol.to_bits(),
            f32,
            gpu,
            sizes: None,
            domain: String::new(),
        }
    }

    /// This key in the domain named `domain` (free space: none).
    pub(crate) fn in_domain(self, domain: String) -> Self {
        ProblemKey { domain, ..self }
    }

    /// This key for `targets` and `sources` particles.
    pub(crate) fn with_sizes(&self, targets: usize, sources: usize) -> Self {
        ProblemKey {
            sizes: Some((targets, sources)),
            ..self.clone()
        }
    }
}

/// The problems switched so far in this process, so that the next
/// evaluation of one (a simulation's next step, a benchmark's repeat)
/// starts with the nodes rather than running the expansions to their
/// floor again: softened gravity at 1e-5, 10^7 points on the H200, took
/// 2.42 s an evaluation switching each time against 0.27 s with the nodes
/// (a floor depends on the points too, so a problem of other points may
/// have met the tolerance with the expansions; it is still met, by the
/// nodes). At most [`PROBLEMS_KEPT`], the oldest dropped.
static SWITCHED: Mutex<Vec<ProblemKey>> = Mutex::new(Vec::new());

/// Problems whose switch, and whose settings, are remembered.
const PROBLEMS_KEPT: usize = 64;

/// `item` added last to `kept` in place of those `same` as it, the oldest
/// dropped past [`PROBLEMS_KEPT`].
fn keep<T>(kept: &Mutex<Vec<T>>, item: T, same: impl Fn(&T) -> bool) {
    let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
    kept.retain(|k| !same(k));
    if kept.len() >= PROBLEMS_KEPT {
        kept.remove(0);
    }
    kept.push(item);
}

/// Remembers that `key`'s default far field switched to the nodes.
pub(crate) fn remember_switch(key: ProblemKey) {
    let same = key.clone();
    keep(&SWITCHED, key, |k| *k == same);
}

/// Whether `key`'s default far field switched to the nodes before.
pub(crate) fn switched_before(key: &ProblemKey) -> bool {
    SWITCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(key)
}

/// The settings that met each problem's tolerance last, per far field
/// (at most [`PROBLEMS_KEPT`], the oldest dropped): the next evaluation
/// starts there rather than at the table's settings, so that a tolerance
/// met on the second run (clustered points, strengths of both signs) is
/// one run the next time, as a simulation's next step or a benchmark's
/// repeat wants; its error is still measured, and the order raised if
/// the points moved so that it is no longer met. (It is never lowered:
/// a problem whose error fell keeps the settings it needed before.)
static STARTS: Mutex<Vec<(ProblemKey, FarField, Settings)>> = Mutex::new(Vec::new());

/// The settings that met `key`'s tolerance with the far field `far` last.
pub(crate) fn remembered_start(key: &ProblemKey, far: FarField) -> Option<Settings> {
    let kept = STARTS.lock().unwrap_or_else(|e| e.into_inner());
    kept.iter()
        .find(|(k, f, _)| k == key && *f == far)
        .map(|&(_, _, s)| s)
}

/// Remembers that `settings` met `key`'s tolerance with the far field `far`.
pub(crate) fn remember_start(key: &ProblemKey, far: FarField, settings: Settings) {
    keep(&STARTS, (key.clone(), far, settings), |(k, f, _)| {
        k == key && *f == far
    });
}

/// The seconds each method took for a problem (its [`ProblemKey`] with the
/// sizes), the last time it ran: an FMM slower than the direct sum is not
/// tried again, a direct sum's time replaces its prediction.
static TIMES: Mutex<Vec<(ProblemKey, &'static str, f64)>> = Mutex::new(Vec::new());

/// The seconds `method` took for `key` last (infinite: it did not meet
/// the tolerance within its budget).
pub(crate) fn remembered_time(key: &ProblemKey, method: &str) -> Option<f64> {
    let kept = TIMES.lock().unwrap_or_else(|e| e.into_inner());
    kept.iter()
        .find(|(k, m, _)| k == key && *m == method)
        .map(|&(_, _, t)| t)
}

/// Remembers that `method` took `seconds` for `key`.
pub(crate) fn remember_time(key: &ProblemKey, method: &'static str, seconds: f64) {
    keep(&TIMES, (key.clone(), method, seconds), |(k, m, _)| {
        k == key && *m == method
    });
}

/// Another process's way of meeting the same tolerance taken up as this
/// process's next first try (`fmm_core::distributed`): `achieved`'s method
/// known to take `seconds` a run at the sizes `sizes`, starting at its
/// settings and far field. The next evaluation tries it first and
/// measures it; where it is slower here, or misses the tolerance here, the
/// way this process found comes back.
#[cfg(feature = "mpi")]
pub(crate) fn adopt(
    key: &ProblemKey,
    sizes: (usize, usize),
    method: &'static str,
    far: FarField,
    settings: Settings,
    seconds: f64,
) {
    remember_time(&key.with_sizes(sizes.0, sizes.1), method, seconds);
    remember_start(key, far, settings);
}
