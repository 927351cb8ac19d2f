//! `Method::tolerance(tol)`: the direct sum or the FMM, whichever meets the
//! tolerance sooner.
//!
//! The direct sum's time is predicted from its pairs and the time a pair
//! takes for this kernel, precision and backend (on the CPU timed on a
//! slice of the targets, on the GPU from its measured throughput), or is
//! the time it took the last time for the same problem. The FMM's is the
//! time its one run took the last time it met the tolerance in one run
//! (the settings met are the next evaluation's first), its error estimate
//! in. Both leave out setup (compiling, building operators): the next
//! evaluations do not pay it. So:
//! - the FMM known to be slower than the direct sum: the direct sum;
//! - the direct sum predicted below [`DIRECT_FIRST`]: the direct sum (the
//!   FMM's trees and error estimate alone cost about that);
//! - else the FMM, with the direct sum's predicted time as its budget (no
//!   run predicted slower than it, the search within twice it:
//!   `driver::SEARCH`): a tolerance that its runs have not met within the
//!   budget (or cannot meet) is met by the direct sum instead, the FMM's
//!   time counted, and the next evaluation of the problem goes straight
//!   to the faster.
//!
//! The direct sum's own error (f32's rounding) is measured as the FMM's
//! is; a tolerance below it is refused, saying f64 would meet it.

use super::memory::{remember_time, remembered_time, ProblemKey};
use super::{Achieved, Stopped};
use crate::error::Error;
use crate::far::FarField;
use crate::methods::fmm::Settings;
use crate::reference::Estimate;
use crate::stats::{Stage, Stats};

/// Below this many predicted seconds the direct sum runs without trying
/// the FMM.
pub(crate) const DIRECT_FIRST: f64 = 0.01;

/// How [`choose`] runs each method: `fmm` with a time budget in seconds,
/// `direct` plain, and `direct_error` the direct sum's error estimate.
pub(crate) struct Ways<F, D, E> {
    /// The FMM meeting the tolerance, within the budget; `None` where the
    /// kernel has no far field the FMM can run.
    pub fmm: Option<F>,
    pub direct: D,
    /// `None` for f64 particles: their direct sum is the f64 direct sum
    /// every error is measured against (its error is 0 by that measure,
    /// and its rounding is below [`crate::methods::fmm::MIN_TOLERANCE`]);
    /// measuring it would cost as much again at small sizes.
    pub direct_error: Option<E>,
}

/// Meets `tol` by the direct sum or the FMM (see the module doc);
/// `predict_direct` gives the direct sum's predicted seconds, asked only
/// where its time for the problem is not known yet.
pub(crate) fn choose<O, F, D, E>(
    tol: f64,
    key: &ProblemKey,
    predict_direct: impl FnOnce() -> f64,
    ways: Ways<F, D, E>,
) -> Result<(O, Stats, Achieved), Error>
where
    F: FnOnce(f64) -> Result<(O, Stats, Achieved), Stopped>,
    D: FnOnce() -> Result<(O, Stats), Error>,
    E: FnOnce(&O) -> Result<Estimate, Error>,
{
    let direct_time = remembered_time(key, "direct").unwrap_or_else(predict_direct);
    let fmm_time = remembered_time(key, "fmm");
    let mut spent = Stats::default();
    if let Some(fmm) = ways.fmm {
        let fmm_slower = fmm_time.is_some_and(|t| t >= direct_time);
        if !fmm_slower && direct_time >= DIRECT_FIRST {
            match fmm(direct_time) {
                Ok((out, stats, achieved)) => {
                    // One run's time, where it was one run (a first
                    // evaluation's searches say little of the next one's,
                    // which starts at the settings met).
                    if stats.runs == 1 {
                        remember_time(key, "fmm", run_seconds(&stats));
                    }
                    return Ok((out, stats, achieved));
                }
                // Not met within the budget, or not at all: the direct sum.
                Err(stop) if matches!(stop.error, Error::ToleranceNotMet { .. }) => {
                    remember_time(key, "fmm", f64::INFINITY);
                    spent = *stop.spent;
                }
                Err(stop) => return Err(stop.error),
            }
        }
    }
    let (out, mut stats) = (ways.direct)()?;
    // Its time less the setup (the GPU's first load of the module: 0.08 s
    // for 1000 points where the sum takes 0.0002 s, which sent the next
    // evaluations to the FMM).
    remember_time(key, "direct", super::driver::every_time(&stats));
    let t = std::time::Instant::now();
    let (e, samples) = match ways.direct_error {
        Some(estimate) => (estimate(&out)?, super::ERROR_SAMPLES),
        None => (Estimate::from(0.0), 0),
    };
    stats.add(Stage::ErrorEstimate, t.elapsed().as_secs_f64());
    stats.absorb_time(&spent);
    if e.bound() > tol {
        return Err(Error::ToleranceNotMet {
            tolerance: tol,
            best: e.value,
            p: 0,
            theta: 0.0,
            reason: format!("the direct sum itself is {:.1e} from the f64 sum", e.value),
            advice: "the particles' rounding bounds every method's error: use f64 particles, or \
                     a looser tolerance"
                .into(),
            tried: Vec::new(),
        });
    }
    let achieved = Achieved {
        tolerance: tol,
        method: "direct",
        settings: Settings { p: 0, theta: 0.0 },
        estimated_error: e.bound(),
        samples,
        far_field: FarField::Auto,
    };
    Ok((out, stats, achieved))
}

/// The seconds of an evaluation of one FMM run: its stages, the error
/// estimate included (every evaluation at a tolerance pays it: 0.17 s of
/// a GPU FMM of 1000 points whose run took 0.002 s), less the setup
/// (`driver::every_time`).
fn run_seconds(stats: &Stats) -> f64 {
    super::driver::every_time(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &'static str) -> ProblemKey {
        ProblemKey::new(name, &[], 1e-4, false, false).with_sizes(100, 100)
    }

    fn exact(_: &u8) -> Result<Estimate, Error> {
        Ok(Estimate::from(0.0))
    }

    fn fmm_met(_budget: f64) -> Result<(u8, Stats, Achieved), Stopped> {
        let mut stats = Stats {
            runs: 1,
            ..Stats::default()
        };
        stats.add(Stage::M2l, 0.5);
        Ok((
            1,
            stats,
            Achieved {
                tolerance: 1e-4,
                method: "fmm",
                settings: Settings { p: 4, theta: 0.6 },
                estimated_error: 5e-5,
                samples: 64,
                far_field: FarField::Laplace,
            },
        ))
    }

    fn direct() -> Result<(u8, Stats), Error> {
        Ok((2, Stats::default()))
    }

    /// A cheap direct sum runs without the FMM; a dear one lets the FMM
    /// try, and an FMM slower than the direct sum is not tried again.
    #[test]
    fn the_cheaper_way_runs() {
        let ways = |fmm| Ways {
            fmm: Some(fmm),
            direct,
            direct_error: Some(exact),
        };
        let (out, _, a) = choose(1e-4, &key("cheap"), || 1e-4, ways(fmm_met)).unwrap();
        assert_eq!((out, a.method), (2, "direct"));
        let (out, _, a) = choose(1e-4, &key("dear"), || 10.0, ways(fmm_met)).unwrap();
        assert_eq!((out, a.method), (1, "fmm"));
        // The FMM took 0.5 s, the direct sum is predicted at 0.2 s now.
        let (out, _, _) = choose(1e-4, &key("dear"), || 0.2, ways(fmm_met)).unwrap();
        assert_eq!(out, 2, "the FMM measured slower");
    }

    /// An FMM that did not meet the tolerance within its budget gives way
    /// to the direct sum, its time counted; a direct sum whose own
    /// rounding misses the tolerance is refused.
    #[test]
    fn an_fmm_over_budget_gives_way() {
        let over = |budget: f64| -> Result<(u8, Stats, Achieved), Stopped> {
            let mut spent = Stats::default();
            spent.add(Stage::M2l, budget);
            Err(Stopped {
                error: Error::ToleranceNotMet {
                    tolerance: 1e-4,
                    best: 1e-3,
                    p: 6,
                    theta: 0.6,
                    reason: "over budget".into(),
                    advice: String::new(),
                    tried: vec![(6, 1e-3)],
                },
                spent: Box::new(spent),
                floor: false,
                over_budget: true,
            })
        };
        let ways = Ways {
            fmm: Some(over),
            direct,
            direct_error: Some(exact),
        };
        let (out, stats, a) = choose(1e-4, &key("over"), || 1.0, ways).unwrap();
        assert_eq!((out, a.method), (2, "direct"));
        assert!(stats.seconds(Stage::M2l) >= 1.0, "the FMM's time counts");
        let rounded = |_: &u8| Ok(Estimate::from(3e-7));
        let ways = Ways {
            fmm: None::<fn(f64) -> Result<(u8, Stats, Achieved), Stopped>>,
            direct,
            direct_error: Some(rounded),
        };
        let e = choose(1e-8, &key("f32"), || 1.0, ways).unwrap_err();
        assert!(e.to_string().contains("f64"), "{e}");
    }
}
