//! `Method::tolerance(tol)`: the direct sum, the treecode or the FMM,
//! whichever meets the tolerance soonest.
//!
//! The direct sum's time is predicted from its pairs and the time a pair
//! takes for this kernel, precision and backend (on the CPU timed on a
//! slice of the targets, on the GPU from its measured throughput), or is
//! the time it took the last time for the same problem. The treecode's
//! and the FMM's are their times a run the last time they met the
//! tolerance (the settings met are the next evaluation's first), the
//! error estimate in. All leave out setup (compiling,
//! building operators): the next evaluations do not pay it. So:
//! - the direct sum predicted below [`TREECODE_FIRST`]: the direct sum;
//!   below [`DIRECT_FIRST`], the direct sum or the treecode (the FMM's
//!   trees and error estimate alone cost about that);
//! - a tree method known slower than the direct sum, or than the other
//!   tree method, is not run;
//! - else the treecode, where the tolerance is within the monopole's
//!   reach ([`super::treecode`]), with the direct sum's time as its
//!   budget; then the FMM, with the time of the way met so far as its
//!   budget (no run predicted slower than it, the search within twice
//!   it: `driver::SEARCH`), so that it runs on only where it may be
//!   sooner;
//! - the fastest way that met the tolerance gives the outputs, the time
//!   of every way tried counted; where none did, the direct sum, and the
//!   next evaluation of the problem goes straight to the fastest.
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
/// the FMM (its trees and error estimate alone cost about that).
pub(crate) const DIRECT_FIRST: f64 = 0.01;

/// Below this many predicted seconds the direct sum runs without trying
/// the treecode either: gravity at 10^5 points on the GPU, f32, 1e-4,
/// took the direct sum (0.0093 s predicted, 0.011 s with its error
/// estimate) where the treecode at theta 0.3 takes 0.0059 s.
pub(crate) const TREECODE_FIRST: f64 = 0.004;

/// How [`choose`] runs each method: `tree` and `fmm` meet the tolerance
/// within a budget of seconds, `direct` runs plain, and `direct_error`
/// estimates the direct sum's error.
pub(crate) struct Ways<T, F, D, E> {
    /// The treecode meeting the tolerance, within the budget; `None` where
    /// the kernel's treecode has no monopole or the tolerance is out of
    /// its reach.
    pub tree: Option<T>,
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

/// What a tree method that met the tolerance gives back.
type Met<O> = (O, Stats, Achieved);

/// Meets `tol` by the direct sum, the treecode or the FMM (see the module
/// doc); `predict_direct` gives the direct sum's predicted seconds, asked
/// only where its time for the problem is not known yet.
pub(crate) fn choose<O, T, F, D, E>(
    tol: f64,
    key: &ProblemKey,
    predict_direct: impl FnOnce() -> f64,
    ways: Ways<T, F, D, E>,
) -> Result<(O, Stats, Achieved), Error>
where
    T: FnOnce(f64) -> Result<Met<O>, Stopped>,
    F: FnOnce(f64) -> Result<Met<O>, Stopped>,
    D: FnOnce() -> Result<(O, Stats), Error>,
    E: FnOnce(&O) -> Result<Estimate, Error>,
{
    let direct_time = remembered_time(key, "direct").unwrap_or_else(predict_direct);
    let tree_time = remembered_time(key, "treecode");
    let fmm_time = remembered_time(key, "fmm");
    let mut spent = Stats::default();
    let mut met: Option<Met<O>> = None;
    if direct_time >= TREECODE_FIRST {
        // A way is tried unless it is known slower than the direct sum or
        // than the other tree method; the FMM not below DIRECT_FIRST.
        let worth = |mine: Option<f64>, other: Option<f64>| {
            mine.is_none_or(|t| t < direct_time && other.is_none_or(|o| t <= o))
        };
        let fmm_first = direct_time >= DIRECT_FIRST;
        let mut budget = direct_time;
        let tree = ways.tree.filter(|_| worth(tree_time, fmm_time));
        let fmm = ways.fmm.filter(|_| fmm_first && worth(fmm_time, tree_time));
        let ways_tried: [(Option<Way<'_, O>>, &'static str); 2] = [
            (tree.map(|t| Box::new(t) as Way<'_, O>), "treecode"),
            (fmm.map(|f| Box::new(f) as Way<'_, O>), "fmm"),
        ];
        for (way, name) in ways_tried {
            let Some(way) = way else {
                continue;
            };
            match way(budget) {
                Ok((out, stats, achieved)) => {
                    // An evaluation's time; of a search (a first
                    // evaluation's), its time a run, below the met run's
                    // own: the next evaluation, which starts at the
                    // settings met, runs it alone and measures it (not
                    // remembered, both ways ran again when one had
                    // searched: the treecode's 0.089 s and the FMM's 0.071 s
                    // for gravity at 10^5 points, 1e-3, 2 cores).
                    let t = a_run(&stats);
                    remember_time(key, name, t);
                    // Both met: the outputs of the sooner (the FMM's first
                    // run is made whatever its prediction).
                    let sooner = met.as_ref().is_none_or(|(_, s, _)| t < a_run(s));
                    if sooner {
                        budget = budget.min(t);
                        if let Some((_, earlier, _)) = met.replace((out, stats, achieved)) {
                            spent.absorb_time(&earlier);
                        }
                    } else {
                        spent.absorb_time(&stats);
                    }
                }
                // Not met within the budget, or not at all: the way met so
                // far, or the direct sum.
                Err(stop) if matches!(stop.error, Error::ToleranceNotMet { .. }) => {
                    remember_time(key, name, f64::INFINITY);
                    spent.absorb_time(&stop.spent);
                }
                Err(stop) => return Err(stop.error),
            }
        }
    }
    if let Some((out, mut stats, achieved)) = met {
        stats.absorb_time(&spent);
        return Ok((out, stats, achieved));
    }
    let (out, mut stats) = (ways.direct)()?;
    // Its time less the setup (the GPU's first load of the module: 0.08 s
    // for 1000 points where the sum takes 0.0002 s, which sent the next
    // evaluations to the FMM).
    remember_time(key, "direct", super::driver::every_time(&stats));
    let t = std::time::Instant::now();
    let e = match ways.direct_error {
        Some(estimate) => estimate(&out)?,
        None => Estimate::from(0.0),
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
        samples: e.samples,
        far_field: FarField::Auto,
        near: 0.0,
    };
    Ok((out, stats, achieved))
}

/// The seconds of `stats` a run (every run's, less the setup:
/// `driver::every_time`).
fn a_run(stats: &Stats) -> f64 {
    super::driver::every_time(stats) / stats.runs.max(1) as f64
}

/// One of the tree methods, to run in turn within a budget of seconds.
type Way<'a, O> = Box<dyn FnOnce(f64) -> Result<Met<O>, Stopped> + 'a>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree method's run, as `choose` takes it.
    type Try = fn(f64) -> Result<(u8, Stats, Achieved), Stopped>;

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
                near: 0.0,
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
            tree: None::<Try>,
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
            tree: None::<Try>,
            fmm: Some(over),
            direct,
            direct_error: Some(exact),
        };
        let (out, stats, a) = choose(1e-4, &key("over"), || 1.0, ways).unwrap();
        assert_eq!((out, a.method), (2, "direct"));
        assert!(stats.seconds(Stage::M2l) >= 1.0, "the FMM's time counts");
        let rounded = |_: &u8| Ok(Estimate::from(3e-7));
        let ways = Ways {
            tree: None::<Try>,
            fmm: None::<Try>,
            direct,
            direct_error: Some(rounded),
        };
        let e = choose(1e-8, &key("f32"), || 1.0, ways).unwrap_err();
        assert!(e.to_string().contains("f64"), "{e}");
    }

    /// The treecode met the tolerance first: the FMM runs within the
    /// treecode's time, and one that gives way leaves the treecode's
    /// outputs, its own time counted; the next evaluation runs the
    /// treecode alone.
    #[test]
    fn the_treecode_sets_the_fmms_budget() {
        let budgets = std::cell::RefCell::new(Vec::new());
        let tree = |budget: f64| -> Result<(u8, Stats, Achieved), Stopped> {
            budgets.borrow_mut().push(("treecode", budget));
            let mut stats = Stats {
                runs: 1,
                ..Stats::default()
            };
            stats.add(Stage::Traversal, 0.1);
            let (_, _, mut a) = fmm_met(budget)?;
            a.method = "treecode";
            Ok((3, stats, a))
        };
        let fmm = |budget: f64| -> Result<(u8, Stats, Achieved), Stopped> {
            budgets.borrow_mut().push(("fmm", budget));
            let mut spent = Stats::default();
            spent.add(Stage::M2l, 0.2);
            Err(Stopped {
                error: Error::ToleranceNotMet {
                    tolerance: 1e-4,
                    best: 3e-4,
                    p: 4,
                    theta: 0.6,
                    reason: "over budget".into(),
                    advice: String::new(),
                    tried: vec![(4, 3e-4)],
                },
                spent: Box::new(spent),
                floor: false,
                over_budget: true,
            })
        };
        let ways = || Ways {
            tree: Some(tree),
            fmm: Some(fmm),
            direct,
            direct_error: Some(exact),
        };
        let k = key("treecode first");
        let (out, stats, a) = choose(1e-4, &k, || 10.0, ways()).unwrap();
        assert_eq!((out, a.method), (3, "treecode"));
        assert!(stats.seconds(Stage::M2l) >= 0.2, "the FMM's time counts");
        assert_eq!(*budgets.borrow(), vec![("treecode", 10.0), ("fmm", 0.1)]);
        budgets.borrow_mut().clear();
        let (out, _, _) = choose(1e-4, &k, || 10.0, ways()).unwrap();
        assert_eq!(out, 3);
        assert_eq!(
            *budgets.borrow(),
            vec![("treecode", 10.0)],
            "the FMM gave way"
        );
    }
}
