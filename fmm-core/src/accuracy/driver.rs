//! The loop that meets a tolerance with one far field: from the table's
//! settings (or those that met the same problem before), each next run at
//! the settings the cost model predicts cheapest ([`super::cost`]: more
//! orders at this MAC, or a narrower MAC at fewer), until the estimated
//! error is within the tolerance, or a clear stop (the error stopped
//! falling, the highest order, the direct sum sooner) with why and what
//! to do.

use super::cost::{Model, Run, AIM, NARROWER_GAIN, NARROWER_GAIN_AFTER};
use super::memory::{remember_start, remember_switch, remembered_start, ProblemKey};
use super::Achieved;
use crate::error::Error;
use crate::far::FarField;
use crate::methods::fmm::{tables::Table, Settings};
use crate::reference::Estimate;
use crate::stats::{trace, Stage, Stats};

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
    /// Whether the runs stopped at the time budget (the direct sum's
    /// time): the direct sum is sooner, not another far field.
    pub(crate) over_budget: bool,
}

impl From<Error> for Stopped {
    fn from(error: Error) -> Self {
        Stopped {
            error,
            spent: Box::default(),
            floor: false,
            over_budget: false,
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
    asked == FarField::Auto
        && ran == FarField::Laplace
        && !f32_floor(f32, *best)
        && !stopped.over_budget
}

/// The default's Laplace expansions stopped short (`stop`, their time in
/// it) where the kernel-independent far field may meet the tolerance
/// ([`switch_to_nodes`], checked by the caller): `nodes` runs it with the
/// same `budget` where the expansions' search left time ([`SEARCH`]). Met, the switch is said on stderr and remembered
/// for `key`, and the Laplace runs' time counts; not met (or no time
/// left), one error names both far fields' stops and nothing is
/// remembered.
pub(crate) fn on_to_nodes<T>(
    stop: Stopped,
    key: ProblemKey,
    budget: f64,
    nodes: impl FnOnce(f64) -> Result<(T, Stats, Option<Achieved>), Stopped>,
) -> Result<(T, Stats, Option<Achieved>), Stopped> {
    if weighed(&stop.spent) >= SEARCH * budget {
        return Err(stop);
    }
    match nodes(budget) {
        Ok((out, mut stats, achieved)) => {
            announce_switch(&stop);
            remember_switch(key);
            stats.absorb_time(&stop.spent);
            Ok((out, stats, achieved))
        }
        Err(next) => Err(both(stop, next)),
    }
}

/// One stop for the Laplace expansions' (`first`) and then the nodes'
/// (`then`): the best error of either, the nodes' order and advice, both
/// reasons named by their far field, the time of both.
fn both(first: Stopped, then: Stopped) -> Stopped {
    let mut spent = *then.spent;
    spent.absorb_time(&first.spent);
    let error = match (first.error, then.error) {
        (
            Error::ToleranceNotMet {
                tolerance,
                best: laplace_best,
                reason: laplace,
                tried: mut tried_laplace,
                ..
            },
            Error::ToleranceNotMet {
                best,
                p,
                theta,
                reason: nodes,
                advice,
                tried,
                ..
            },
        ) => {
            tried_laplace.extend(tried);
            Error::ToleranceNotMet {
                tolerance,
                best: best.min(laplace_best),
                p,
                theta,
                reason: format!(
                    "with the Laplace expansions {laplace}; with the kernel-independent far \
                     field {nodes}"
                ),
                advice,
                tried: tried_laplace,
            }
        }
        (_, other) => other,
    };
    Stopped {
        error,
        spent: Box::new(spent),
        floor: then.floor,
        over_budget: then.over_budget,
    }
}

/// Runs `nodes` (the kernel-independent far field) where the Laplace
/// expansions' floor, predicted from the declaration, is above `tol` at
/// every MAC the driver takes (`floor::widest_theta`: `floor` there);
/// met, the switch is said and remembered for `key` as a measured one is;
/// not met, the error says the expansions were not run, and why.
pub(crate) fn predicted_switch<T>(
    tol: f64,
    floor: f64,
    key: ProblemKey,
    nodes: impl FnOnce() -> Result<(T, Stats, Option<Achieved>), Stopped>,
) -> Result<(T, Stats, Option<Achieved>), Stopped> {
    let why = format!(
        "the kernel's smoothing, which the Laplace expansions drop, is predicted to leave \
         them {floor:.1e} from the kernel at theta {MIN_THETA}"
    );
    match nodes() {
        Ok(done) => {
            eprintln!(
                "[fmm] tolerance {tol:e}: {why}; met by the kernel-independent far field, which \
                 this kernel, parameters and tolerance take from now on (ask for a far field to \
                 choose it yourself)"
            );
            remember_switch(key);
            Ok(done)
        }
        Err(mut stop) => {
            if let Error::ToleranceNotMet { reason, .. } = &mut stop.error {
                *reason = format!("{why}; with the kernel-independent far field {reason}");
            }
            Err(stop)
        }
    }
}

/// Says on stderr that the default far field switched, and why.
fn announce_switch(stopped: &Stopped) {
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
             kernel): {reason}{why}; met by the kernel-independent far field, which this \
             kernel, parameters and tolerance take from now on (ask for a far field to choose \
             it yourself)"
        );
    }
}

/// The seconds of `stats` that every evaluation pays: all but the setup
/// (compiling kernels, building the compressed M2L's operators), which the
/// first evaluation of a problem pays for the later ones.
pub(crate) fn every_time(stats: &Stats) -> f64 {
    stats.total_seconds() - stats.seconds(Stage::Setup)
}

/// The runs that search for the settings may take this many times the
/// direct sum's time (a first evaluation's search pays for the next
/// evaluations, which start from the settings met); each one must be
/// predicted faster than the direct sum. At 1, Yukawa at 3x10^4 points
/// (1e-5, 2 cores) gave way to the direct sum (0.63 s) after one run, for
/// good, where p 5 meets it in 0.48 s.
pub(crate) const SEARCH: f64 = 2.0;

/// Evaluations the setup is weighed over against the budget.
const SETUP_SHARED: f64 = 10.0;

/// The seconds of `stats` weighed against the budget (the direct sum's
/// time an evaluation): what every evaluation pays, and a tenth of the
/// setup. Counted in full, the compressed M2L's operators for a new order
/// (1.2 s for Biot-Savart at ki p 5, 3x10^4 points, against runs of 0.5 s)
/// sent a problem the FMM meets in 0.5 s to a direct sum of 1.6 s for
/// good; not counted, the FMM of Yukawa at 10^5 points on the GPU spent
/// 1.6 s of operators to lose to a direct sum of 0.01 s.
pub(crate) fn weighed(stats: &Stats) -> f64 {
    every_time(stats) + stats.seconds(Stage::Setup) / SETUP_SHARED
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
#[cfg(test)]
pub(crate) fn drive<O, V: Into<Estimate>>(
    tol: f64,
    table: &Table,
    far: FarField,
    f32: bool,
    key: Option<&ProblemKey>,
    run: impl FnMut(Settings, &mut Stats) -> Result<O, Error>,
    error: impl FnMut(&O) -> Result<V, Error>,
) -> Result<(O, Stats, Achieved), Stopped> {
    let goal = Goal {
        tol,
        table,
        far,
        f32,
        key,
        budget: f64::INFINITY,
        widest: 1.0,
    };
    drive_within(&goal, run, error)
}

/// What [`drive_within`] is to meet, and within what.
pub(crate) struct Goal<'a> {
    pub tol: f64,
    /// The far field's table of first settings.
    pub table: &'a Table,
    pub far: FarField,
    /// Whether the particles are f32 (for the explanation of a floor).
    pub f32: bool,
    /// What the settings that met it are remembered by.
    pub key: Option<&'a ProblemKey>,
    /// The direct sum's seconds an evaluation: no run predicted at or
    /// above it is made, and the runs stop at [`SEARCH`] times it.
    pub budget: f64,
    /// The widest MAC to start from (the floor predicted from the
    /// declaration: `floor::widest_theta`).
    pub widest: f64,
}

/// [`drive`] toward `goal`: within its budget of seconds (a tolerance not
/// met when the runs so far have taken that long stops there: the direct
/// sum's predicted time, for `Method::tolerance`, past which the direct
/// sum is sooner), from a MAC no wider than its `widest`.
pub(crate) fn drive_within<O, V: Into<Estimate>>(
    goal: &Goal<'_>,
    mut run: impl FnMut(Settings, &mut Stats) -> Result<O, Error>,
    mut error: impl FnMut(&O) -> Result<V, Error>,
) -> Result<(O, Stats, Achieved), Stopped> {
    let &Goal {
        tol,
        table,
        far,
        f32,
        key,
        budget,
        widest,
    } = goal;
    let mut settings = key
        .and_then(|k| remembered_start(k, far))
        .unwrap_or_else(|| {
            let first = table.first(tol);
            Settings {
                theta: first.theta.min(widest),
                ..first
            }
        });
    let first_p = settings.p;
    let mut model = Model::new(far);
    let mut total = Stats::default();
    // (p, error) of every run.
    let mut history: Vec<(usize, f64)> = Vec::new();
    // Every run's (p, error), over every theta tried.
    let mut tried: Vec<(usize, f64)> = Vec::new();
    loop {
        let mut stats = Stats::default();
        let out = run(settings, &mut stats)?;
        stats.runs = 1;
        let t = std::time::Instant::now();
        let estimate: Estimate = error(&out)?.into();
        // The safe side: the estimate plus three standard errors.
        let e = estimate.bound();
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
        tried.push((settings.p, e));
        model.push(Run::new(settings, &stats));
        if trace() {
            say_run(tol, far, settings, &estimate, &stats);
        }
        let earlier = std::mem::take(&mut total);
        total = stats;
        total.absorb_time(&earlier);
        if e <= tol {
            // A search of several runs that met the tolerance at a wide
            // MAC may have passed a cheaper way at a narrower one: the
            // model, now with this run, is asked once more, and what it
            // predicts clearly cheaper is run (what meets it is kept and
            // remembered, so later evaluations start there). Coulomb in a
            // periodic box at 1e-4 (10^7, f32, H100) met it at p 12, theta
            // 0.7 in 0.164 s a run, where p 8 at theta 0.56 meets it in
            // 0.123 s: from p 10 the prediction for the narrower MAC was
            // 4.06e-5 against an aim of 3.94e-5.
            let (mut out, mut settings, mut estimate, mut e) = (out, settings, estimate, e);
            let now = model.seconds(settings);
            let mut next = match tried.len() > 1 {
                true => cheaper_after(&model, &history, table, tol, settings, &estimate),
                false => None,
            };
            // At most two runs: the prediction, then one order more at its
            // MAC where that is still clearly cheaper (velocity +
            // stretching in a box at 1e-4: p 8 at theta 0.448 missed, p 9
            // met it in 0.685 s against p 12 at 0.56 in 0.781 s).
            for _ in 0..2 {
                let Some(try_at) = next.take() else { break };
                if budget.is_finite() && weighed(&total) + model.seconds(try_at) > SEARCH * budget {
                    break;
                }
                let mut stats = Stats::default();
                let again = run(try_at, &mut stats)?;
                stats.runs = 1;
                let t = std::time::Instant::now();
                let est: Estimate = error(&again)?.into();
                stats.add(Stage::ErrorEstimate, t.elapsed().as_secs_f64());
                if trace() {
                    say_run(tol, far, try_at, &est, &stats);
                }
                model.push(Run::new(try_at, &stats));
                let e2 = est.bound();
                if e2 <= tol {
                    let earlier = std::mem::take(&mut total);
                    total = stats;
                    total.absorb_time(&earlier);
                    (out, settings, estimate, e) = (again, try_at, est, e2);
                    break;
                }
                total.absorb_time(&stats);
                let up = Settings {
                    p: try_at.p + 1,
                    ..try_at
                };
                next = (up.p <= table.most_p && model.seconds(up) < NARROWER_GAIN_AFTER * now)
                    .then_some(up);
            }
            let achieved = Achieved {
                tolerance: tol,
                method: "fmm",
                settings,
                estimated_error: e,
                samples: estimate.samples,
                far_field: far,
                near: 0.0,
            };
            if let Some(k) = key {
                remember_start(k, far, settings);
            }
            return Ok((out, total, achieved));
        }
        let at_most = settings.p >= table.most_p;
        let over = (weighed(&total) >= SEARCH * budget).then(|| {
            format!(
                "its runs took {:.3} s (a tenth of their setup counted), {SEARCH} times the \
                 direct sum's predicted time ({budget:.3} s), which meets any tolerance sooner \
                 from here",
                weighed(&total)
            )
        });
        let in_time = over.is_none();
        let floor = in_time && !at_most;
        // At a wider MAC than the narrowest: an error that falls too
        // slowly to reach the tolerance by the highest order is given up on
        // at once (velocity + stretching at theta 0.7 ran p 6 to 20 at 10^7
        // before this), to narrow the MAC. The node far fields too: where
        // their orders are capped at the compressed M2L's, a narrower MAC
        // is the way on (Biot-Savart with cores of three spacings took ki
        // p 6 at theta 0.8 in 3.1 s where p 3 at theta 0.5 takes 0.43 s).
        let narrowable = narrower(settings.theta).is_some();
        let slow = || {
            narrowable
                .then(|| beyond_highest(&history, tol, settings.p, table.most_p))
                .flatten()
        };
        let reason = over
            .or_else(|| stalled(&history, at_most, table.most_p, far))
            .or_else(slow);
        if let Some(reason) = reason {
            let (best_p, best) = best_of(&history);
            if in_time && narrowable && !f32_floor(f32, best) {
                if let Some(theta) = narrower(settings.theta) {
                    // The expansions' floor (a smoothing they drop, or a
                    // slow convergence of derivatives) falls as cells
                    // further apart interact; at the narrower MAC the
                    // orders converge faster too, so from the first
                    // order again (what is met is remembered).
                    settings = Settings {
                        p: first_p.min(best_p),
                        theta,
                    };
                    history.clear();
                    continue;
                }
            }
            return Err(Stopped {
                error: not_met(tol, &tried, best, best_p, settings.theta, reason, far, f32),
                spent: Box::new(total),
                floor,
                over_budget: !in_time,
            });
        }
        let next = next_settings(&model, &history, table, tol, settings, &estimate);
        if trace() {
            eprintln!(
                "[fmm] tolerance {tol:e}: next p {}, theta {}, predicted {:.3} s",
                next.p,
                next.theta,
                model.seconds(next)
            );
        }
        if next.theta != settings.theta {
            history.clear();
        }
        // A next run predicted no faster than the direct sum, or to take
        // the search past its share: stop now (the direct sum is sooner),
        // not after it.
        let spent = weighed(&total);
        let predicted = model.seconds(next);
        if budget.is_finite() && (predicted >= budget || spent + predicted > SEARCH * budget) {
            let (best_p, best) = best_of(&tried);
            let reason = format!(
                "its runs took {spent:.3} s and the next (p {}, theta {}) is predicted at \
                 {predicted:.3} s, against the direct sum's predicted {budget:.3} s",
                next.p, next.theta
            );
            return Err(Stopped {
                error: not_met(tol, &tried, best, best_p, settings.theta, reason, far, f32),
                spent: Box::new(total),
                floor: false,
                over_budget: true,
            });
        }
        settings = next;
    }
}

/// The settings after a run at `settings` whose error (`estimate`) missed
/// `tol`: a narrower MAC at a lower order where the model predicts it
/// cheaper than the orders this MAC needs (Biot-Savart with cores of
/// three spacings: ki p 3 at theta 0.5 in 0.48 s against p 6 at 0.8 in
/// 1.08 s); else, at this MAC, the order the model predicts (Biot-Savart's
/// cores at ki p 3, theta 0.8: p 5, where a guessed fall of 0.5 took p 6
/// at twice the time), one to [`MOST_STEP`] orders up, and past the
/// highest by the fall alone. Predicted on the estimate itself (the fall
/// so far, or the table's before two runs), against the tolerance less
/// the room its safe side took this time. `history`: this MAC's runs.
fn next_settings(
    model: &Model,
    history: &[(usize, f64)],
    table: &Table,
    tol: f64,
    settings: Settings,
    estimate: &Estimate,
) -> Settings {
    let (fall, value, room) = predicting_from(history, table, tol, settings, estimate);
    let narrowing = narrowing(settings.theta);
    if let Some(next) =
        model.cheaper_narrower(value, fall, room, table.most_p, narrowing, NARROWER_GAIN)
    {
        return next;
    }
    let p = match model.order_at(value, fall, room, settings.theta, table.most_p) {
        Some(p) => p.clamp(settings.p + 1, settings.p + MOST_STEP),
        None => settings.p + step(history, tol),
    };
    Settings {
        p: p.min(table.most_p),
        ..settings
    }
}

/// What a prediction from the last run (at `settings`, its `estimate`)
/// starts from: the error's fall an order at this MAC (the fall so far,
/// or the table's before two runs), the estimate's value and the
/// tolerance less the room its safe side took ([`value_and_room`]).
/// `history`: this MAC's runs.
fn predicting_from(
    history: &[(usize, f64)],
    table: &Table,
    tol: f64,
    settings: Settings,
    estimate: &Estimate,
) -> (f64, f64, f64) {
    let fall = match history.len() {
        n if n >= 2 => per_order(history, n - 1),
        _ => table.fall(settings.theta),
    };
    let (value, room) = value_and_room(estimate, tol);
    (fall, value, room)
}

/// The MACs narrower than `theta`, each narrower than the one before.
fn narrowing(theta: f64) -> impl Iterator<Item = f64> {
    std::iter::successors(narrower(theta), |&t| narrower(t))
}

/// After a run at `settings` met `tol` (its `estimate`): a narrower MAC
/// at a lower order that the model predicts meets it too, clearly cheaper
/// than this run ([`NARROWER_GAIN_AFTER`]), if there is one. `history`:
/// this MAC's runs. The prediction is held to the room
/// the safe side leaves, not [`AIM`] of it as the search's are: a miss
/// costs one run of the first evaluation (Coulomb in a box at 1e-4, 10^7:
/// from p 12 at theta 0.7, p 8 at 0.56 was predicted at 3.96e-5 against
/// an aim of 3.7e-5 and a room of 5.3e-5, and met it at 3.7e-5).
fn cheaper_after(
    model: &Model,
    history: &[(usize, f64)],
    table: &Table,
    tol: f64,
    settings: Settings,
    estimate: &Estimate,
) -> Option<Settings> {
    let (fall, value, room) = predicting_from(history, table, tol, settings, estimate);
    let now = model.seconds(settings);
    model
        .soonest(
            value,
            fall,
            room / AIM,
            table.most_p,
            narrowing(settings.theta),
        )
        .filter(|&(_, t)| t < NARROWER_GAIN_AFTER * now)
        .map(|(s, _)| s)
}

/// The estimate's value and the tolerance less the room its safe side
/// took this time (`tol * value / bound`): what the next run's predicted
/// value is held to. An estimate of 0 is its bound, against `tol`.
pub(super) fn value_and_room(estimate: &Estimate, tol: f64) -> (f64, f64) {
    let e = estimate.bound();
    match estimate.value {
        v if v > 0.0 => (v, tol * v / e),
        _ => (e, tol),
    }
}

/// The `(p, error)` of least error among `runs` (at least one).
fn best_of(runs: &[(usize, f64)]) -> (usize, f64) {
    *runs
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("one run")
}

/// Says one run of the search on stderr (`FMM_TRACE`).
fn say_run(tol: f64, far: FarField, settings: Settings, estimate: &Estimate, stats: &Stats) {
    eprintln!(
        "[fmm] tolerance {tol:e}: {} p {}, theta {}: estimated {:.2e} (on the safe side \
         {:.2e}) in {:.3} s ({:.3} s of it setup; P2P {:.4}, M2L {:.4}, the rest {:.4}; error estimate {:.4})",
        far.name(),
        settings.p,
        settings.theta,
        estimate.value,
        estimate.bound(),
        stats.total_seconds(),
        stats.seconds(Stage::Setup),
        stats.seconds(Stage::P2p),
        stats.seconds(Stage::M2l),
        stats.total_seconds()
            - stats.seconds(Stage::Setup)
            - stats.seconds(Stage::P2p)
            - stats.seconds(Stage::M2l)
            - stats.seconds(Stage::ErrorEstimate),
        stats.seconds(Stage::ErrorEstimate),
    );
}

/// The narrowest MAC the expansions are taken to before a stall is given
/// up on: their cost grows about as theta^-3 (M2L and P2P), so past this
/// a node far field or the direct sum is sooner.
pub(crate) const MIN_THETA: f64 = 0.4;

/// Theta's next step down when the expansions' error has stopped falling.
const NARROWER: f64 = 0.8;

/// The MAC after `theta` when the error stopped falling at it, while it is
/// above [`MIN_THETA`].
pub(crate) fn narrower(theta: f64) -> Option<f64> {
    // To three digits (0.6, 0.48, 0.4; 0.8, 0.64, 0.512, 0.41): settings
    // people read and type.
    (theta > MIN_THETA + 1e-9).then(|| ((theta * NARROWER * 1e3).round() / 1e3).max(MIN_THETA))
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

/// Why the error, at the rate it fell over the last step, would not reach
/// `tol` by the highest order `most` from order `p`, if it would not.
fn beyond_highest(history: &[(usize, f64)], tol: f64, p: usize, most: usize) -> Option<String> {
    let n = history.len();
    if n < 2 {
        return None;
    }
    let fall = per_order(history, n - 1);
    let e = history[n - 1].1;
    let needed = if fall < 1.0 {
        (e / tol).ln() / (1.0 / fall).ln()
    } else {
        f64::INFINITY
    };
    (p as f64 + needed > most as f64).then(|| {
        format!(
            "the error falls by {fall:.2} an order ({e:.1e} at p {p}), which reaches {tol:.1e} \
             only past the highest order ({most})"
        )
    })
}

/// Why the error will not reach the tolerance, if it will not: the order
/// is at the highest, or the error fell by less than [`STALL`] an order
/// over each of the last two steps.
fn stalled(history: &[(usize, f64)], at_most: bool, most: usize, far: FarField) -> Option<String> {
    if at_most {
        return Some(format!(
            "the order reached the highest the {} far field takes on this backend ({most})",
            far.name()
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
    use crate::methods::fmm::tables::{CPU, GPU};
    use crate::methods::fmm::MAX_GPU_ORDER;

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
        // Three runs at each of theta 0.6, 0.48 and 0.4.
        assert!(runs <= 9, "{runs} runs");
        assert!(matches!(e, Error::ToleranceNotMet { theta, .. } if theta == MIN_THETA));
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
        assert!(runs <= 9, "{runs} runs");
        assert!(matches!(e, Error::ToleranceNotMet { .. }), "{e}");
    }

    /// A floor that falls as theta does (cells further apart see less of
    /// a smoothing) is met by narrowing the MAC from the best order, not
    /// given up on.
    #[test]
    fn a_floor_that_falls_with_theta_is_met_by_narrowing() {
        let run = |s: Settings, _: &mut Stats| Ok(s);
        let error =
            |s: &Settings| Ok((1e-3 * 0.5f64.powi(s.p as i32)).max(4e-4 * (s.theta / 0.6).powi(8)));
        let (_, stats, a) = drive(2e-5, &CPU, FarField::Laplace, false, None, run, error).unwrap();
        assert_eq!(a.settings.theta, MIN_THETA, "{a:?}");
        assert!(a.estimated_error <= 2e-5);
        assert!(stats.runs <= 9, "{} runs", stats.runs);
    }

    /// An error that falls too slowly at a wide MAC to reach the tolerance
    /// by the highest order narrows the MAC after two runs, rather than
    /// running every order up to the highest first.
    #[test]
    fn a_slow_fall_narrows_the_mac_before_the_highest_order() {
        let mut orders = Vec::new();
        let run = |s: Settings, _: &mut Stats| {
            orders.push(s.p);
            Ok(s)
        };
        let error = |s: &Settings| Ok(1e-2 * (0.9 * s.theta / 0.7).powi(s.p as i32));
        let (_, _, a) = drive(1e-4, &GPU, FarField::Laplace, false, None, run, error).unwrap();
        assert!(a.settings.theta < 0.7, "{a:?}");
        // Two runs at theta 0.7, then up from the first order again.
        assert_eq!(orders[..3], [6, 10, 6], "{orders:?}");
        assert!(orders.iter().all(|&p| p < MAX_GPU_ORDER), "{orders:?}");
    }

    /// A search that met the tolerance at a wide MAC and a high order runs
    /// once more at the narrower MAC that the model, with that last run,
    /// predicts clearly cheaper, and keeps it where it meets the tolerance
    /// too (errors and seconds as Coulomb's in a periodic box at 10^7 on
    /// an H100: p 12 at theta 0.7 3.2e-5 in 0.16 s, p 8 at 0.56 3.4e-5 in
    /// 0.12 s); a start that meets it at once is not second-guessed.
    #[test]
    fn a_cheaper_narrower_way_seen_after_meeting_is_taken() {
        let ran = std::cell::RefCell::new(Vec::new());
        let run = |s: Settings, st: &mut Stats| {
            ran.borrow_mut().push((s.p, s.theta));
            let (wide, order) = (0.7 / s.theta, (s.p + 1) as f64 / 13.0);
            st.add(Stage::P2p, 0.0145 * wide.powf(3.6));
            st.add(Stage::M2l, 0.092 * wide.powf(0.35) * order.powi(2));
            st.add(Stage::Upward, 0.036 * order.powi(3));
            st.add(Stage::Tree, 0.02);
            st.p2p = (2e10 * wide.powf(3.6)) as u64;
            st.m2l = (1e8 * wide.powf(0.35)) as u64;
            Ok(s)
        };
        // The safe side 1.9 times the value, as the 64 samples' was.
        let error = |s: &Settings| {
            let value = 0.0148 * (s.theta / 0.7).powi(s.p as i32 + 1) * 0.6f64.powi(s.p as i32);
            Ok(Estimate {
                value,
                standard_error: 0.3 * value,
                samples: 64,
            })
        };
        let (_, stats, a) = drive(1e-4, &GPU, FarField::Laplace, false, None, run, error).unwrap();
        let ran = ran.take();
        assert!(a.settings.theta < 0.7, "{ran:?}");
        assert!(
            ran.iter().any(
                |&(p, t)| t == 0.7 && error(&Settings { p, theta: t }).unwrap().bound() <= 1e-4
            ),
            "{ran:?}"
        );
        assert_eq!(stats.runs, ran.len());
        // Met by the table's first settings (p 5, theta 0.7): one run.
        let (_, stats, a) = drive(5e-3, &GPU, FarField::Laplace, false, None, run, error).unwrap();
        assert_eq!((a.settings.p, a.settings.theta, stats.runs), (5, 0.7, 1));
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

    /// Both far fields stopped short: one error names each one's stop
    /// and keeps the best error and every run; nothing is remembered, so
    /// the next evaluation tries the expansions again.
    #[test]
    fn when_the_nodes_stop_too_both_stops_are_named_and_nothing_kept() {
        let run = |s: Settings, _: &mut Stats| Ok(s.p);
        let floor = |_: &usize| Ok(4e-4);
        let laplace = drive(1e-6, &CPU, FarField::Laplace, false, None, run, floor).unwrap_err();
        let key = ProblemKey::new("both stop", &[], 1e-6, false, false);
        let nodes = |_left: f64| -> Result<((), Stats, Option<Achieved>), Stopped> {
            Err(drive(
                1e-6,
                &CPU,
                FarField::KernelIndependent,
                false,
                None,
                run,
                |_| Ok(2e-5),
            )
            .unwrap_err())
        };
        let stop = on_to_nodes(laplace, key.clone(), f64::INFINITY, nodes).unwrap_err();
        let Error::ToleranceNotMet {
            reason,
            best,
            tried,
            ..
        } = &stop.error
        else {
            panic!("{:?}", stop.error);
        };
        assert!(reason.contains("Laplace") && reason.contains("kernel-independent"));
        assert_eq!(*best, 2e-5);
        assert!(tried.len() >= 4, "{tried:?}");
        assert!(!super::super::memory::switched_before(&key));
    }

    /// A next run predicted to take the runs past the budget is not run:
    /// the stop says so, and is not one for the nodes (the direct sum is
    /// sooner).
    #[test]
    fn a_run_predicted_past_the_budget_is_not_run() {
        let mut runs = 0;
        let run = |s: Settings, st: &mut Stats| {
            runs += 1;
            st.add(Stage::M2l, 0.01 * ((s.p + 1) as f64).powi(3));
            st.m2l = 1000;
            Ok(s.p)
        };
        let falling = |p: &usize| Ok(1e-1 * 0.5f64.powi(*p as i32));
        let goal = Goal {
            tol: 1e-6,
            table: &CPU,
            far: FarField::Laplace,
            f32: false,
            key: None,
            budget: 5.0,
            widest: 1.0,
        };
        let stop = drive_within(&goal, run, falling).unwrap_err();
        // p 13 took 27 s a run; the first run alone is over.
        assert_eq!(runs, 1);
        assert!(stop.over_budget);
        assert!(!switch_to_nodes(
            &stop,
            FarField::Auto,
            FarField::Laplace,
            false
        ));
        let mut runs = 0;
        let cheap = |s: Settings, st: &mut Stats| {
            runs += 1;
            st.add(Stage::P2p, 0.2);
            st.add(Stage::M2l, 1e-4 * ((s.p + 1) as f64).powi(3));
            Ok(s.p)
        };
        // p 13 in 0.47 s at 2e-6; p 15 predicted at 0.6 s, slower than
        // the direct sum's 0.5 s (a narrower MAC dearer still: its P2P).
        let goal = Goal {
            budget: 0.5,
            ..goal
        };
        let error = |p: &usize| Ok(2e-6 * 0.5f64.powi(*p as i32 - 13));
        let stop = drive_within(&goal, cheap, error).unwrap_err();
        assert!(
            stop.error.to_string().contains("predicted"),
            "{}",
            stop.error
        );
        assert!(stop.over_budget);
        assert_eq!(runs, 1);
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
