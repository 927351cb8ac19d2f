//! The FMM driven by a tolerance: the caller gives the relative L2 error it
//! wants and gets the settings chosen for it and the error achieved,
//! measured rather than predicted.
//!
//! The first settings come from a table per backend (gravity without
//! softening in a cube, f64: the error of each order at the MAC the
//! backend runs fastest with for that error), the cheapest entry whose
//! error is within the tolerance. The error is then estimated on sampled
//! targets against an f64 direct sum (64 targets; on the GPU the sum runs
//! there too); while it is above the tolerance the order goes up by as
//! many orders as the error's fall so far says it needs (a factor 2 an
//! order before there is a fall to go by, at most 4 orders a step) and
//! the FMM runs again. Strengths of both signs, or clustered points, give
//! larger errors than the table's at the same settings: the estimate
//! catches that.
//!
//! A tolerance out of reach is said quickly, with why and what to do: when
//! the error falls by less than a tenth an order over two steps running
//! (each of up to 4 orders), it has stopped falling (an error that
//! converges falls by about theta an order at worst), and more orders will
//! not help. The Laplace far field is the singular kernel's, so a
//! kernel's smoothing (Plummer softening, a core radius) that is not
//! negligible at the distance of well-separated cells sets a floor under
//! its error, as does f32's rounding (near 1e-6 to 1e-7).
//!
//! The far field chosen by default (`FarField::Auto`) follows the
//! tolerance too: where it took the Laplace expansions and their error
//! stopped above the tolerance for the smoothing, or at their highest
//! order (not at f32's rounding), the evaluation says so and runs again
//! with the kernel-independent far field ([`switch_to_nodes`]), which
//! interpolates the kernel itself, smoothing included (softened gravity: a
//! floor of 1e-3 against 1e-6 and below). The Laplace runs' time counts in
//! the returned stats. The switch is decided by measurement, not
//! predicted: how far the smoothing reaches depends on the kernel, its
//! parameters, the points and the MAC. The switch and the settings that
//! met a tolerance are remembered per [`ProblemKey`] for the next
//! evaluation ([`SWITCHED`], [`STARTS`]).

use super::Settings;
use crate::error::Error;
use std::sync::Mutex;

use crate::far::FarField;
use crate::stats::{Stage, Stats};

/// The error of gravity by (p, theta) a backend starts from.
pub(crate) struct Table {
    /// `(p, theta, error)`, cheapest first.
    rows: &'static [(usize, f64, f64)],
    /// The highest order the backend takes.
    pub(crate) most_p: usize,
}

/// On the CPU, theta 0.6 (fewer M2L and P2P than 0.5 for a little more
/// order: at 10^6 points in a cube p 6 and theta 0.6 gave 3.9e-5 in 2.0 s
/// on 2 cores where p 6 and theta 0.5 gave 1.1e-5 in 2.9 s). Errors
/// measured for gravity without softening (f64, 5e4 points in a cube,
/// `fmm_bench --theta 0.6 --params 0 --precision f64`, 2026-11-22).
pub(crate) const CPU: Table = Table {
    rows: &[
        (4, 0.6, 4.6e-4),
        (5, 0.6, 2.0e-4),
        (6, 0.6, 9.3e-5),
        (7, 0.6, 4.7e-5),
        (8, 0.6, 2.1e-5),
        (10, 0.6, 6.0e-6),
        (12, 0.6, 1.5e-6),
        (14, 0.6, 5.3e-7),
        (16, 0.6, 1.4e-7),
    ],
    most_p: super::MAX_ORDER,
};

/// On the GPU, measured at 10^7 points in a cube (f32, one H200,
/// `scripts/gpu_scale_check.sh settings`, 2026-11-23; the errors are the
/// FMM's own, the f32 rounding of the inputs, 1.4e-6 there, taken out).
/// Theta 0.7 down to 4e-5: the M2L is cheap there and the P2P dear, so a
/// wider MAC with one order more is faster at the same error (p 6, theta
/// 0.7: 0.091 s at 9.0e-5). Below, theta 0.6 and then 0.5: at theta 0.7
/// an order gains a factor of only about 0.7 at worst (p 12, theta 0.7:
/// 0.234 s at 1.6e-6, where p 9, theta 0.6 gives 1.8e-6 in 0.170 s).
pub(crate) const GPU: Table = Table {
    rows: &[
        (5, 0.7, 2.0e-4),
        (6, 0.7, 9.0e-5),
        (7, 0.7, 4.4e-5),
        (8, 0.6, 4.6e-6),
        (9, 0.6, 1.8e-6),
        (8, 0.5, 7.0e-7),
    ],
    most_p: super::MAX_GPU_ORDER,
};

/// The kernel-independent far field on the CPU (Chebyshev nodes of degree
/// p, `p + 1` a side, leaves of 200): gravity without softening, 5e4
/// points in a cube, f64, 2 cores (`fmm_bench --far-field ki --params 0
/// --precision f64`, 2026-11-23). Theta 0.8 where it is cheaper for the
/// same error, else 0.7 (p 5 at theta 0.8, 2.2e-6 in 0.91 s, loses to p 4
/// at 0.7, 2.1e-6 in 0.46 s).
pub(crate) const KI_CPU: Table = Table {
    rows: &[
        (2, 0.8, 4.5e-4),
        (2, 0.7, 1.4e-4),
        (3, 0.8, 7.2e-5),
        (3, 0.7, 2.0e-5),
        (4, 0.8, 1.1e-5),
        (4, 0.7, 2.1e-6),
        (5, 0.7, 3.2e-7),
        (6, 0.7, 4.8e-8),
        (7, 0.7, 9.3e-9),
    ],
    most_p: crate::far::chebyshev::MAX_ORDER,
};

/// Pseudo-particles on the CPU (order p of yokota2009 Table 1, leaves of
/// 128, theta 0.6): measured as [`KI_CPU`].
pub(crate) const PPM_CPU: Table = Table {
    rows: &[
        (3, 0.6, 1.7e-4),
        (4, 0.6, 4.2e-5),
        (5, 0.6, 8.3e-6),
        (6, 0.6, 1.8e-6),
        (7, 0.6, 6.9e-7),
        (8, 0.6, 2.1e-7),
    ],
    most_p: crate::far::pseudo::MAX_ORDER,
};

/// The CPU's table for a far field.
pub(crate) fn cpu_table(far_field: crate::far::FarField) -> &'static Table {
    match far_field {
        FarField::KernelIndependent => &KI_CPU,
        FarField::Ppm => &PPM_CPU,
        FarField::Auto | FarField::Laplace | FarField::Monopole => &CPU,
    }
}

/// The kernel-independent far field on the GPU: the settings no other
/// was both faster and more accurate than, cheapest first, of a grid of p
/// 2 to 6 and theta 0.6, 0.7, 0.8 (gravity without softening, 10^6 points
/// in a cube, f64, compressed M2L, one H200, `scripts/gpu_far_check.sh
/// tables`, 2026-11-24). Unlike the CPU's [`KI_CPU`], theta 0.8 and 0.6
/// are on it: the GPU's P2P is cheap beside its M2L, so a wider MAC pays
/// at low orders, and a narrower one at high orders (p 4 at theta 0.6,
/// 8.1e-7 in 0.076 s, beats p 5 at 0.8, 1.8e-6 in 0.099 s).
pub(crate) const KI_GPU: &[(usize, f64, f64)] = &[
    (2, 0.8, 4.6e-4),
    (2, 0.7, 1.5e-4),
    (3, 0.8, 7.6e-5),
    (3, 0.7, 2.1e-5),
    (3, 0.6, 1.4e-5),
    // 1.006e-5: three digits, so that a tolerance of 1e-5 is not met by
    // a row its estimate then misses (softened gravity took two runs).
    (4, 0.8, 1.01e-5),
    (4, 0.7, 1.8e-6),
    (4, 0.6, 8.1e-7),
    (5, 0.7, 2.7e-7),
    (5, 0.6, 9.4e-8),
    (6, 0.7, 4.1e-8),
    (6, 0.6, 1.2e-8),
];

/// Pseudo-particles on the GPU, measured as [`KI_GPU`] over p 3 to 8.
pub(crate) const PPM_GPU: &[(usize, f64, f64)] = &[
    (3, 0.8, 1.4e-3),
    (4, 0.8, 4.8e-4),
    (3, 0.7, 3.6e-4),
    (4, 0.7, 9.6e-5),
    (4, 0.6, 3.1e-5),
    (5, 0.6, 6.8e-6),
    (6, 0.6, 1.7e-6),
    (8, 0.7, 1.1e-6),
    (7, 0.6, 7.5e-7),
    (8, 0.6, 1.6e-7),
];

/// The GPU's table for a node far field ([`KI_GPU`], [`PPM_GPU`]), capped
/// at the orders the GPU takes (`far::cuda::max_gpu_order`: Chebyshev
/// nodes to 11); the CPU's for the others.
pub(crate) fn gpu_node_table(far_field: crate::far::FarField) -> Table {
    let cpu = cpu_table(far_field);
    let rows = match far_field {
        FarField::KernelIndependent => KI_GPU,
        FarField::Ppm => PPM_GPU,
        _ => cpu.rows,
    };
    Table {
        rows,
        most_p: cpu.most_p.min(crate::far::cuda::max_gpu_order(far_field)),
    }
}

impl Table {
    /// The cheapest settings whose tabled error is within `tol`; past the
    /// table, the last theta with the order extrapolated at a factor 0.5
    /// an order (capped at the backend's highest).
    pub(crate) fn first(&self, tol: f64) -> Settings {
        match self.rows.iter().find(|r| r.2 <= tol) {
            Some(&(p, theta, _)) => Settings { p, theta },
            None => {
                let &(p, theta, e) = self.rows.last().expect("a table has rows");
                let more = (e / tol).log2().ceil().max(0.0) as usize;
                Settings {
                    p: (p + more).min(self.most_p),
                    theta,
                }
            }
        }
    }
}

/// The error of gravity expected at `settings` on the CPU, for choices
/// that need an estimate rather than a bound (f32 lanes for the M2L): the
/// [`CPU`] table's, log-linear between its orders and extrapolated past
/// them at its last factor an order, and scaled from the table's theta
/// by `(theta / 0.6)^(p + 1)`, the expansions' convergence rate.
pub(crate) fn expected_error(settings: Settings) -> f64 {
    let rows = CPU.rows;
    let Settings { p, theta } = settings;
    let at = |i: usize| (rows[i].0 as f64, rows[i].2.ln());
    // The two rows around p (or the last two past the ends).
    let i = rows
        .iter()
        .position(|r| r.0 >= p)
        .unwrap_or(rows.len() - 1)
        .clamp(1, rows.len() - 1);
    let ((p0, e0), (p1, e1)) = (at(i - 1), at(i));
    let log_error = e0 + (e1 - e0) * (p as f64 - p0) / (p1 - p0);
    let table_theta = rows[i].1;
    log_error.exp() * (theta / table_theta).powi(p as i32 + 1)
}

/// Targets the error is estimated on.
pub const ERROR_SAMPLES: usize = 64;

/// What a tolerance-driven evaluation chose and achieved.
#[derive(Clone, Debug, PartialEq)]
pub struct Achieved {
    /// The tolerance asked for.
    pub tolerance: f64,
    /// The settings of the evaluation returned.
    pub settings: Settings,
    /// Relative L2 error of all outputs on the sampled targets against an
    /// f64 direct sum: within the tolerance.
    pub estimated_error: f64,
    pub samples: usize,
    /// The far field that met it (the kernel-independent one where the
    /// default's Laplace expansions stopped short: [`switch_to_nodes`]).
    pub far_field: FarField,
}

/// A tolerance-driven evaluation that stopped short: why, and the time of
/// its runs.
#[derive(Debug)]
pub(crate) struct Stopped {
    pub(crate) error: Error,
    /// Boxed: the stats are large, and a `Result`'s error is best small.
    pub(crate) spent: Box<Stats>,
    /// Whether the error stopped falling (a floor), rather than the order
    /// reaching the backend's highest while it still fell.
    pub(crate) floor: bool,
}

impl From<Error> for Stopped {
    fn from(error: Error) -> Self {
        Stopped {
            error,
            spent: Box::default(),
            floor: false,
        }
    }
}

/// Whether a tolerance that the FMM with the far field `ran` stopped short
/// of (`stopped`), the caller having asked for `asked`, is one to run again
/// with the kernel-independent far field: the default (`Auto`) took the
/// Laplace expansions, and their error stopped above the tolerance for a
/// reason the nodes do not share: a floor that the kernel's smoothing,
/// which the expansions drop, explains, or the expansions' highest order
/// (the nodes converge faster an order: unsoftened gravity at 1e-9 on the
/// GPU, past order 20 there, met at ki order 10); not f32's rounding.
/// Whether the kernel can use that far field is the caller's to check.
pub(crate) fn switch_to_nodes(
    stopped: &Stopped,
    asked: FarField,
    ran: FarField,
    f32: bool,
) -> bool {
    let Error::ToleranceNotMet { best, .. } = &stopped.error else {
        return false;
    };
    asked == FarField::Auto && ran == FarField::Laplace && !f32_floor(f32, *best)
}

/// What a tolerance's choices are remembered by: the kernel, its
/// parameters' bits, the tolerance's, the particles' precision and the
/// backend.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProblemKey {
    kernel: &'static str,
    params: Vec<u64>,
    tol: u64,
    f32: bool,
    gpu: bool,
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
fn remembered_start(key: &ProblemKey, far: FarField) -> Option<Settings> {
    let kept = STARTS.lock().unwrap_or_else(|e| e.into_inner());
    kept.iter()
        .find(|(k, f, _)| k == key && *f == far)
        .map(|&(_, _, s)| s)
}

/// Remembers that `settings` met `key`'s tolerance with the far field `far`.
fn remember_start(key: &ProblemKey, far: FarField, settings: Settings) {
    keep(&STARTS, (key.clone(), far, settings), |(k, f, _)| {
        k == key && *f == far
    });
}

/// Says on stderr that the default far field is switched, and why.
pub(crate) fn announce_switch(stopped: &Stopped) {
    if let Error::ToleranceNotMet {
        tolerance, reason, ..
    } = &stopped.error
    {
        let why = if stopped.floor {
            ": the kernel's smoothing, which the expansions drop, sets a floor; the \
             kernel-independent far field keeps it"
        } else {
            ""
        };
        eprintln!(
            "[fmm] tolerance {tolerance:e} with the Laplace far field (the default for this \
             kernel): {reason}{why}; running the kernel-independent far field for this kernel, \
             parameters and tolerance from now on (ask for a far field to choose it yourself)"
        );
    }
}

/// Whether an error of `best` is at f32's rounding floor.
fn f32_floor(f32: bool, best: f64) -> bool {
    f32 && best < 1e-5
}

/// An error that falls by less than this factor an order, two steps
/// running, has stopped falling.
const STALL: f64 = 0.9;

/// Most orders one step adds.
const MOST_STEP: usize = 4;

/// Runs the FMM (`run`, at the settings given) from the table's settings
/// up, estimating each result's error with `error`, until the error is
/// within `tol`; stops early, with an error that says why, when the error
/// has stopped falling or the order is the backend's highest, with the
/// time spent. `far` is the far field run and `f32` says whether the
/// particles are f32 (both for the explanation). With `key`, the settings
/// that met the same problem's tolerance last are the first
/// ([`STARTS`]), and those that meet it now are kept for the next time.
pub(crate) fn drive<O>(
    tol: f64,
    table: &Table,
    far: FarField,
    f32: bool,
    key: Option<&ProblemKey>,
    mut run: impl FnMut(Settings, &mut Stats) -> Result<O, Error>,
    mut error: impl FnMut(&O) -> Result<f64, Error>,
) -> Result<(O, Stats, Achieved), Stopped> {
    let mut settings = key
        .and_then(|k| remembered_start(k, far))
        .unwrap_or_else(|| table.first(tol));
    let mut total = Stats::default();
    // (p, error) of every run.
    let mut history: Vec<(usize, f64)> = Vec::new();
    loop {
        let mut stats = Stats::default();
        let out = run(settings, &mut stats)?;
        stats.runs = 1;
        let t = std::time::Instant::now();
        let e = error(&out)?;
        stats.add(Stage::ErrorEstimate, t.elapsed().as_secs_f64());
        if !e.is_finite() {
            return Err(Stopped::from(Error::NonFinite {
                what: "the FMM's estimated error (outputs sampled against the direct sum) at order"
                    .into(),
                index: settings.p,
                value: e,
            }));
        }
        history.push((settings.p, e));
        let earlier = std::mem::take(&mut total);
        total = stats;
        total.absorb_time(&earlier);
        if e <= tol {
            let achieved = Achieved {
                tolerance: tol,
                settings,
                estimated_error: e,
                samples: ERROR_SAMPLES,
                far_field: far,
            };
            if let Some(k) = key {
                remember_start(k, far, settings);
            }
            return Ok((out, total, achieved));
        }
        let at_most = settings.p >= table.most_p;
        if let Some(reason) = stalled(&history, at_most, table.most_p) {
            let &(best_p, best) = history
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("one run");
            return Err(Stopped {
                error: not_met(
                    tol,
                    &history,
                    best,
                    best_p,
                    settings.theta,
                    reason,
                    far,
                    f32,
                ),
                spent: Box::new(total),
                floor: !at_most,
            });
        }
        settings.p = (settings.p + step(&history, tol)).min(table.most_p);
    }
}

/// The error's fall per order over the step that ended at run `k`.
fn per_order(history: &[(usize, f64)], k: usize) -> f64 {
    let (p0, e0) = history[k - 1];
    let (p1, e1) = history[k];
    (e1 / e0).powf(1.0 / (p1 - p0).max(1) as f64)
}

/// Orders to add for the error of the last run to reach `tol`: by the
/// fall per order so far (a factor 2 before there is one), 1 to
/// [`MOST_STEP`].
fn step(history: &[(usize, f64)], tol: f64) -> usize {
    let n = history.len();
    let fall = if n >= 2 {
        per_order(history, n - 1).clamp(0.25, 0.9)
    } else {
        0.5
    };
    let e = history[n - 1].1;
    ((e / tol).ln() / (1.0 / fall).ln())
        .ceil()
        .clamp(1.0, MOST_STEP as f64) as usize
}

/// Why the error will not reach the tolerance, if it will not: the order
/// is at the highest, or the error fell by less than [`STALL`] an order
/// over each of the last two steps.
fn stalled(history: &[(usize, f64)], at_most: bool, most: usize) -> Option<String> {
    if at_most {
        return Some(format!(
            "the order reached the highest this backend takes ({most})"
        ));
    }
    let n = history.len();
    // Two steps, not one: with few sources the error at a handful of
    // sampled targets can stand still over an order and then fall (one
    // BiotSavart source, 300 targets: 1.8e-4 at p 10, 1.9e-4 at p 11 and
    // 12, 7.2e-5 at p 14).
    let flat = n >= 3 && per_order(history, n - 1) > STALL && per_order(history, n - 2) > STALL;
    flat.then(|| {
        let from = history[n.saturating_sub(3)];
        format!(
            "the error stopped falling ({:.1e} at p {} to {:.1e} at p {})",
            from.1,
            from.0,
            history[n - 1].1,
            history[n - 1].0
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn not_met(
    tol: f64,
    history: &[(usize, f64)],
    best: f64,
    p: usize,
    theta: f64,
    reason: String,
    far: FarField,
    f32: bool,
) -> Error {
    let advice = if f32_floor(f32, best) {
        "f32 particles round the near field and the outputs in float, which stops the error \
         near 1e-6 to 1e-7: use f64 particles for this tolerance"
            .to_string()
    } else if far == FarField::Laplace {
        format!(
            "the Laplace far field is the singular kernel's, so a kernel's smoothing (Plummer \
             softening, a core radius) that is not negligible at the distance of \
             well-separated cells sets a floor under the error: use the kernel-independent \
             far field (`FarField::KernelIndependent`, `--far-field ki`), which keeps the \
             smoothing, a looser tolerance (at least {best:.1e}), or the direct sum"
        )
    } else {
        format!(
            "the {} far field converges for kernels smooth away from their sources; a kernel \
             that is not (or a tolerance past its highest order) needs a looser tolerance \
             (at least {best:.1e}), the `ki` far field if this is `ppm`, or the direct sum",
            far.name()
        )
    };
    Error::ToleranceNotMet {
        tolerance: tol,
        best,
        p,
        theta,
        reason,
        advice,
        tried: history.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cheapest_entry_within_the_tolerance_comes_first() {
        assert_eq!(CPU.first(1e-4), Settings { p: 6, theta: 0.6 });
        assert_eq!(CPU.first(1e-3), Settings { p: 4, theta: 0.6 });
        assert_eq!(GPU.first(1e-4), Settings { p: 6, theta: 0.7 });
        assert_eq!(GPU.first(1e-5), Settings { p: 8, theta: 0.6 });
        assert_eq!(GPU.first(1e-6), Settings { p: 8, theta: 0.5 });
        // Past the table: 0.5 an order.
        assert_eq!(CPU.first(3.5e-8), Settings { p: 18, theta: 0.6 });
        assert_eq!(GPU.first(1e-12).p, super::super::MAX_GPU_ORDER);
    }

    /// The GPU's node tables list settings cheapest first, each more
    /// accurate than every cheaper one (else it would never be chosen),
    /// and pick from them, capped at the GPU's orders.
    #[test]
    fn the_gpu_node_tables_fall_in_error_as_they_rise_in_cost() {
        for rows in [KI_GPU, PPM_GPU] {
            for w in rows.windows(2) {
                assert!(w[1].2 < w[0].2, "{w:?}");
            }
        }
        let ki = gpu_node_table(FarField::KernelIndependent);
        assert_eq!(ki.first(1e-4), Settings { p: 3, theta: 0.8 });
        assert_eq!(ki.first(1e-5), Settings { p: 4, theta: 0.7 });
        assert_eq!(ki.first(1e-6), Settings { p: 4, theta: 0.6 });
        let ppm = gpu_node_table(FarField::Ppm);
        assert_eq!(ppm.first(1e-5), Settings { p: 5, theta: 0.6 });
        assert!(ki.first(1e-14).p <= crate::far::cuda::max_gpu_order(FarField::KernelIndependent));
    }

    /// An error that halves with every order is met; one that stops
    /// falling is given up on within three orders of the stall, with the
    /// reason; one that rises at once is given up on at once.
    #[test]
    fn a_stalled_error_stops_the_driver_with_a_reason() {
        let run = |s: Settings, _: &mut Stats| Ok(s.p);
        // From p 10 (the table's for 1e-5): 9.8e-5, then 4 orders more.
        let falling = |p: &usize| Ok(1e-1 * 0.5f64.powi(*p as i32));
        let (p, stats, a) =
            drive(1e-5, &CPU, FarField::Laplace, false, None, run, falling).unwrap();
        assert_eq!((p, a.settings.p, stats.runs), (14, 14, 2));
        assert!(a.estimated_error <= 1e-5);
        // An error that falls only by 0.75 an order (theta 0.7 at worst)
        // is followed, not given up on.
        let slow = |p: &usize| Ok(2e-3 * 0.75f64.powi(*p as i32));
        let (p, stats, _) = drive(1e-5, &GPU, FarField::Laplace, false, None, run, slow).unwrap();
        assert!(2e-3 * 0.75f64.powi(p as i32) <= 1e-5, "p {p}");
        assert!(stats.runs <= 5, "{} runs", stats.runs);

        let floor = |p: &usize| Ok((1e-3 * 0.5f64.powi(*p as i32)).max(4e-4));
        let mut runs = 0;
        let e = drive(
            1e-5,
            &CPU,
            FarField::Laplace,
            false,
            None,
            |s, st| {
                runs += 1;
                run(s, st)
            },
            floor,
        )
        .unwrap_err()
        .error;
        assert!(runs <= 3, "{runs} runs");
        let text = e.to_string();
        assert!(text.contains("stopped falling"), "{text}");
        assert!(text.contains("smoothing"), "{text}");
        assert!(text.contains("4.0e-4"), "{text}");

        let rising = |p: &usize| Ok(1e-4 * (*p as f64));
        let mut runs = 0;
        let e = drive(
            1e-6,
            &GPU,
            FarField::Laplace,
            true,
            None,
            |s, st| {
                runs += 1;
                run(s, st)
            },
            rising,
        )
        .unwrap_err()
        .error;
        assert_eq!(runs, 3);
        assert!(matches!(e, Error::ToleranceNotMet { .. }), "{e}");
    }

    /// The default's Laplace expansions stopped by a smoothing switch to
    /// the nodes; f32's floor, a far field asked for, or a node far field
    /// that stopped do not; the Laplace advice names the switch.
    #[test]
    fn only_the_defaults_expansions_stopped_by_a_smoothing_switch() {
        let floor = |p: &usize| Ok((1e-3 * 0.5f64.powi(*p as i32)).max(4e-4));
        let run = |s: Settings, _: &mut Stats| Ok(s.p);
        let stop = drive(1e-5, &CPU, FarField::Laplace, false, None, run, floor).unwrap_err();
        assert!(stop.spent.runs >= 2, "{:?}", stop.spent);
        assert!(stop.floor);
        let text = stop.error.to_string();
        assert!(text.contains("--far-field ki"), "{text}");
        let (auto, laplace, ki) = (
            FarField::Auto,
            FarField::Laplace,
            FarField::KernelIndependent,
        );
        assert!(switch_to_nodes(&stop, auto, laplace, false));
        assert!(!switch_to_nodes(&stop, laplace, laplace, false));
        assert!(!switch_to_nodes(&stop, auto, ki, false));
        let f32_floor = drive(1e-8, &CPU, laplace, true, None, run, |_| Ok(3e-7)).unwrap_err();
        assert!(!switch_to_nodes(&f32_floor, auto, laplace, true));
        // Still falling at the highest order: not a floor, but switched.
        let slow = |p: &usize| Ok(1e-2 * 0.7f64.powi(*p as i32));
        let most = drive(1e-9, &CPU, laplace, false, None, run, slow).unwrap_err();
        assert!(!most.floor);
        assert!(switch_to_nodes(&most, auto, laplace, false));
        let e = drive(
            1e-5,
            &CPU,
            FarField::KernelIndependent,
            false,
            None,
            run,
            floor,
        )
        .unwrap_err()
        .error;
        assert!(!e.to_string().contains("singular"), "{e}");
    }

    /// A tolerance met on the second run is met on the first the next
    /// time the same problem is evaluated; another tolerance or far field
    /// starts from the table.
    #[test]
    fn the_settings_that_met_a_tolerance_are_the_next_start() {
        let run = |s: Settings, _: &mut Stats| Ok(s.p);
        let falling = |p: &usize| Ok(1e-1 * 0.5f64.powi(*p as i32));
        let key = ProblemKey::new("test kernel", &[0.25], 1e-5, false, false);
        let laplace = FarField::Laplace;
        let (_, first, a) = drive(1e-5, &CPU, laplace, false, Some(&key), run, falling).unwrap();
        assert_eq!((first.runs, a.settings.p), (2, 14));
        let (_, next, b) = drive(1e-5, &CPU, laplace, false, Some(&key), run, falling).unwrap();
        assert_eq!((next.runs, b.settings), (1, a.settings));
        let ki = FarField::KernelIndependent;
        let (_, other, _) = drive(1e-5, &CPU, ki, false, Some(&key), run, falling).unwrap();
        assert_eq!(other.runs, 2, "another far field starts from the table");
    }

    #[test]
    fn f32_rounding_is_named_when_it_is_the_floor() {
        let e = drive(
            1e-8,
            &CPU,
            FarField::Laplace,
            true,
            None,
            |s, _| Ok(s.p),
            |_| Ok(3e-7),
        )
        .unwrap_err()
        .error;
        assert!(e.to_string().contains("f64 particles"), "{e}");
    }
}
