//! The treecode meeting a tolerance: Barnes-Hut with the monopole, whose
//! one setting is theta. At loose tolerances it is the fastest way on the
//! GPU (gravity, f32, one H100, `SWEEP=tree scripts/tolerance_table.sh`: at 1e-3 the
//! treecode at theta 0.7 took 0.0054 s at 10^6 points where the FMM's
//! tolerance took 0.016 s, and 0.038 s against 0.069 s at 10^7); below
//! about 1e-4 the monopole's error needs so narrow a MAC that the FMM is
//! sooner. So [`super::choose`] runs it where the tolerance is within
//! [`reach`] and gives the FMM the treecode's time as its budget.
//!
//! The search: theta from the backend's table of the monopole's error
//! (gravity without softening in a cube), the error estimated on the same
//! sampled targets as the FMM's, and while it is above the tolerance a
//! narrower theta by the error's fall (about `theta^2.5`: gravity at 10^5
//! points, 2 cores, 8.1e-4 at 0.7, 2.9e-4 at 0.5, 8.4e-5 at 0.3), no run
//! predicted slower than the budget.

use super::cost::AIM;
use super::memory::{remember_start, remembered_start, ProblemKey};
use super::{Achieved, Stopped};
use crate::error::Error;
use crate::far::FarField;
use crate::methods::fmm::Settings;
use crate::reference::Estimate;
use crate::stats::{Stage, Stats};

/// The monopole's error by theta on a backend, widest first: gravity
/// without softening in a cube, the relative L2 error on 256 sampled
/// targets.
pub(crate) struct Table(&'static [(f64, f64)]);

/// 10^5 points, f64, 2 cores (`fmm_bench --method tree --params 0
/// --precision f64 --theta T`, 2026-11-26), down to theta 0.5: on the
/// CPU the treecode at 1e-3 took 0.065 s at theta 0.7 (8.1e-4) where
/// the FMM's tolerance took 0.084 s, but at 1e-4 it needed theta 0.3
/// (0.22 s, 8.4e-5) against the FMM's 0.096 s
/// (`SWEEP=tree scripts/tolerance_table.sh cpu f64`).
pub(crate) const CPU: Table = Table(&[(0.7, 8.1e-4), (0.6, 3.8e-4), (0.5, 2.9e-4)]);

/// 10^6 points, f32, one H100 (`fmm_bench --backend cuda --method tree
/// --params 0 --resident --theta T`, 2026-11-26): the GPU's MAC is
/// measured from a group's box, so a theta there is more accurate than
/// the CPU's.
pub(crate) const GPU: Table = Table(&[
    (0.8, 1.8e-3),
    (0.7, 8.4e-4),
    (0.6, 3.4e-4),
    (0.5, 2.0e-4),
    (0.4, 1.1e-4),
    (0.3, 5.6e-5),
]);

/// The error's fall with theta: `(theta' / theta)^ERROR_EXPONENT`, on the
/// low side of the measured 2.4 to 3.1 (a step too small costs a run, a
/// step too large a slower one).
const ERROR_EXPONENT: f64 = 2.5;

/// The time's growth as theta falls, `theta^-TIME_EXPONENT`, on the high
/// side of the measured (1.6 on 2 cores from theta 0.7 to 0.3), so that a
/// run that may lose to the budget is not made.
const TIME_EXPONENT: f64 = 2.0;

impl Table {
    /// The narrowest theta the treecode is taken to.
    fn narrowest(&self) -> f64 {
        self.0.last().expect("a row").0
    }

    /// Whether `tol` is within the monopole's reach on this backend: no
    /// tighter than its error at the narrowest theta.
    pub(crate) fn reach(&self, tol: f64) -> bool {
        tol >= self.0.last().expect("a row").1
    }

    /// The widest theta whose error is within `tol` (the narrowest where
    /// none is).
    fn first(&self, tol: f64) -> f64 {
        self.0
            .iter()
            .find(|r| r.1 <= tol)
            .map_or(self.narrowest(), |r| r.0)
    }
}

/// Runs the treecode (`run`, at a theta) from the table's theta (or the
/// one that met `key`'s tolerance last), estimating each result's error
/// with `error`, until it is within `tol`; stops, with the time spent,
/// where the narrowest theta missed it or the next run is predicted at or
/// above `budget` seconds (or the runs past twice it: `driver::SEARCH`).
pub(crate) fn drive_treecode<O>(
    tol: f64,
    table: &Table,
    key: &ProblemKey,
    budget: f64,
    mut run: impl FnMut(f64, &mut Stats) -> Result<O, Error>,
    mut error: impl FnMut(&O) -> Result<Estimate, Error>,
) -> Result<(O, Stats, Achieved), Stopped> {
    let mut theta =
        remembered_start(key, FarField::Monopole).map_or_else(|| table.first(tol), |s| s.theta);
    let mut total = Stats::default();
    let mut tried = Vec::new();
    loop {
        let mut stats = Stats::default();
        let out = run(theta, &mut stats)?;
        stats.runs = 1;
        let t = std::time::Instant::now();
        let estimate = error(&out)?;
        stats.add(Stage::ErrorEstimate, t.elapsed().as_secs_f64());
        let e = estimate.bound();
        if !e.is_finite() {
            return Err(Stopped::from(Error::NonFinite {
                what: "the treecode's estimated error (outputs sampled against the direct sum) \
                       at theta x 1000"
                    .into(),
                index: (theta * 1e3).round() as usize,
                value: e,
            }));
        }
        tried.push((0, e));
        let seconds = super::driver::every_time(&stats);
        if crate::stats::trace() {
            eprintln!(
                "[fmm] tolerance {tol:e}: treecode theta {theta}: estimated {:.2e} (on the safe \
                 side {e:.2e}) in {:.3} s",
                estimate.value,
                stats.total_seconds()
            );
        }
        let earlier = std::mem::take(&mut total);
        total = stats;
        total.absorb_time(&earlier);
        if e <= tol {
            remember_start(key, FarField::Monopole, Settings { p: 0, theta });
            let achieved = Achieved {
                tolerance: tol,
                method: "treecode",
                settings: Settings { p: 0, theta },
                estimated_error: e,
                samples: estimate.samples,
                far_field: FarField::Monopole,
                near: 0.0,
            };
            return Ok((out, total, achieved));
        }
        // The theta the fall predicts, with the safe side's room.
        let (value, room) = super::driver::value_and_room(&estimate, tol);
        let next = (theta * (AIM * room / value).powf(1.0 / ERROR_EXPONENT))
            .min(0.9 * theta)
            .max(table.narrowest());
        let predicted = seconds * (theta / next).powf(TIME_EXPONENT);
        let spent = super::driver::weighed(&total);
        let reason = if theta <= table.narrowest() + 1e-9 {
            Some(format!(
                "the treecode's monopole missed it at its narrowest theta ({theta}): {e:.1e}"
            ))
        } else if predicted >= budget || spent + predicted > super::driver::SEARCH * budget {
            Some(format!(
                "the treecode's runs took {spent:.3} s and the next (theta {next:.3}) is \
                 predicted at {predicted:.3} s, against a budget of {budget:.3} s"
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Stopped {
                error: Error::ToleranceNotMet {
                    tolerance: tol,
                    best: e,
                    p: 0,
                    theta,
                    reason,
                    advice: "the FMM or the direct sum".into(),
                    tried,
                },
                spent: Box::new(total),
                floor: false,
                over_budget: true,
            });
        }
        theta = (next * 1e3).round() / 1e3;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &'static str) -> ProblemKey {
        ProblemKey::new(name, &[], 1e-4, false, false)
    }

    /// A table 2.6 times below the error `4e-3 theta^3` of the runs
    /// below (other points than the table's).
    const CUBE: Table = Table(&[(0.7, 5.3e-4), (0.5, 1.9e-4), (0.3, 4.2e-5)]);

    /// An error `c theta^3` (the monopole's measured fall is 2.4 to 3.1),
    /// runs taking `theta^-2` seconds: from the table's theta the search
    /// narrows to one that meets the tolerance, and the next evaluation
    /// starts there.
    #[test]
    fn theta_narrows_to_the_tolerance() {
        let err = |theta: f64| Estimate::from(4e-3 * theta.powi(3));
        let thetas = std::cell::RefCell::new(Vec::new());
        let run = |theta: f64, stats: &mut Stats| {
            thetas.borrow_mut().push(theta);
            stats.add(Stage::P2p, 0.01 * theta.powi(-2));
            Ok(theta)
        };
        let k = key("narrows");
        let (out, _, a) = drive_treecode(2e-4, &CUBE, &k, 10.0, run, |t| Ok(err(*t))).unwrap();
        let first = thetas.take();
        assert!(err(out).value <= 2e-4, "{first:?}");
        assert_eq!(a.settings.theta, out);
        assert!(first.len() >= 2 && first[0] > out, "{first:?}");
        drive_treecode(2e-4, &CUBE, &k, 10.0, run, |t| Ok(err(*t))).unwrap();
        assert_eq!(
            thetas.take(),
            vec![out],
            "starts where it met the tolerance"
        );
    }

    /// Past the narrowest theta, or past the budget, the search stops
    /// with its time, over budget (the FMM or the direct sum is sooner).
    #[test]
    fn it_stops_at_the_narrowest_or_the_budget() {
        let run = |theta: f64, stats: &mut Stats| {
            stats.add(Stage::P2p, 0.01 * theta.powi(-2));
            Ok(theta)
        };
        let far = |_: &f64| Ok(Estimate::from(1e-2));
        let stop = drive_treecode(1e-4, &CUBE, &key("far"), 10.0, run, far).unwrap_err();
        assert!(stop.over_budget && stop.spent.total_seconds() > 0.0);
        assert!(
            stop.error.to_string().contains("narrowest"),
            "{}",
            stop.error
        );
        let near = |t: &f64| Ok(Estimate::from(4e-3 * t.powi(3)));
        let stop = drive_treecode(2e-4, &CUBE, &key("dear"), 0.02, run, near).unwrap_err();
        assert!(stop.error.to_string().contains("budget"), "{}", stop.error);
    }

    #[test]
    fn reach_and_first_theta() {
        assert!(GPU.reach(1e-4) && !GPU.reach(1e-5));
        assert_eq!(GPU.first(1e-3), 0.7);
        assert_eq!(CPU.first(1e-6), 0.5);
        assert!(CPU.reach(1e-3) && !CPU.reach(1e-4));
    }
}
