//! What the FMM's next settings will cost and what error they will give,
//! predicted from the run just made, so that the driver can weigh a higher
//! order at the same MAC against a narrower MAC at a lower order.
//!
//! **Cost.** A run's stages scale differently: the P2P with the near
//! field's pairs, the M2L with the far field's pairs times a power of the
//! order, the P2M, M2M, L2L and L2P with the particles times a power of
//! the order, and the trees, the traversal and the copies with neither.
//! Pairs grow as theta falls about as `theta^-a`, `a` fitted from two
//! runs at different MACs once there are two, before that the far field's:
//! from theta 0.7 to 0.5 the Laplace expansions' pairs (leaves of 64,
//! gravity at 10^5 points) grew 2.75x (P2P) and 2.3x (M2L), `a` about 2.7;
//! the Chebyshev nodes' (leaves of 200, Biot-Savart at 3x10^4) 1.9x and
//! 2.0x, `a` about 2: big leaves in a shallow tree have most of their
//! near field at any MAC (2 cores, 2026-11-26). The M2L's
//! time a pair grows as `(p + 1)^k`: k about 3 for the Laplace expansions;
//! for the node far fields it depends on the kernel's channels, 2.5 to 3
//! for gravity's compressed M2L (p 3 to 5), 5 for Biot-Savart's (p 3 to 5
//! at theta 0.8: 0.047, 0.143, 0.370 s), 4 taken before;
//! fitted from two runs of different orders once there are two.
//!
//! **Error.** At one MAC the error falls by a factor `r` an order (the
//! runs' own fall, or the table's before there are two); a narrower MAC
//! multiplies the error of order `p` by `(theta' / theta)^(s (p + 1))`,
//! with `s` 1 for the expansions (their convergence, `theta^(p+1)`) and
//! about 1.6 for the Chebyshev nodes (the median of twelve measured from
//! theta 0.8 to 0.6 at p 3 and 5, 2x10^4 points, f64: 1.1 to 1.5 for the
//! Stokeslet and Biot-Savart with cores of three spacings, 1.5 to 1.8
//! for gravity and Yukawa, 1.9 for velocity + stretching, 1.2 to 2.6 for
//! a Gaussian of width 0.1). The prediction chooses; the estimate that
//! follows the run checks.

use crate::far::FarField;
use crate::methods::fmm::{Settings, MAX_F32_M2L_ORDER};
use crate::stats::{M2lKind, Stage, Stats};

/// How much dearer the GPU's M2L a pair is in double than in float, where
/// an order past [`MAX_F32_M2L_ORDER`] leaves the float M2L: velocity +
/// stretching at 2^24 points, p 12 in float 1.09 s and p 13 in double
/// 10.4 s (H200, 2026-11-28), 7.6 times the float's growth of an order.
/// Unseen, the model took p 13 for 1.8 s and the run took 11.2.
const DOUBLE_M2L: f64 = 8.0;

/// A narrower MAC is taken where it is predicted to meet the tolerance
/// at most this fraction as dear as the current MAC (the model's
/// slack: a narrower MAC's error is the less certain).
pub(crate) const NARROWER_GAIN: f64 = 0.8;

/// The same, once the tolerance is met at the current MAC: a wrong guess
/// then costs one run of the first evaluation, a right one is remembered
/// and saves on every later evaluation of the problem.
pub(crate) const NARROWER_GAIN_AFTER: f64 = 0.9;

/// The error aimed at, as a fraction of the tolerance: the estimate is
/// taken on the safe side (`Estimate::bound`), so an order whose error is
/// predicted just under the tolerance is often not met.
pub(super) const AIM: f64 = 0.7;

/// One run's cost, split by how each part scales.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    pub settings: Settings,
    /// P2P seconds and pairs.
    near: f64,
    near_pairs: f64,
    /// M2L seconds and pairs.
    far: f64,
    far_pairs: f64,
    /// P2M, M2M, L2L, L2P seconds.
    expansions: f64,
    /// Trees, traversal, copies: neither theta nor p.
    fixed: f64,
    /// Whether its M2L ran in float (the GPU's, f32 particles).
    float_m2l: bool,
}

impl Run {
    /// The run at `settings` whose stages are `stats` (one run: the
    /// setup, compiling kernels once, and the error estimate left out).
    pub fn new(settings: Settings, stats: &Stats) -> Self {
        let s = |stage| stats.seconds(stage);
        Run {
            settings,
            near: s(Stage::P2p),
            near_pairs: stats.p2p as f64,
            far: s(Stage::M2l),
            far_pairs: stats.m2l as f64,
            expansions: s(Stage::Upward) + s(Stage::Downward),
            fixed: s(Stage::Tree) + s(Stage::Traversal) + s(Stage::Upload) + s(Stage::Download),
            float_m2l: stats.m2l_kind == Some(M2lKind::FloatLanes),
        }
    }
}

/// The predictions for one evaluation's far field, from its runs.
#[derive(Debug)]
pub(crate) struct Model {
    far_field: FarField,
    runs: Vec<Run>,
}

impl Model {
    pub fn new(far_field: FarField) -> Self {
        Model {
            far_field,
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, run: Run) {
        self.runs.push(run);
    }

    /// The M2L's growth with the order: `(p + 1)^k` a pair, k fitted from
    /// the last two runs of different orders at one MAC, else the far
    /// field's.
    fn far_exponent(&self) -> f64 {
        let last = self.runs.last().expect("a run");
        let fitted = self.runs.iter().rev().skip(1).find_map(|r| {
            let (a, b) = (r.settings, last.settings);
            let same_kind = r.float_m2l == last.float_m2l;
            (a.theta == b.theta && a.p != b.p && same_kind && r.far > 0.0 && last.far > 0.0).then(
                || {
                    ((last.far / last.far_pairs.max(1.0)) / (r.far / r.far_pairs.max(1.0))).ln()
                        / ((b.p + 1) as f64 / (a.p + 1) as f64).ln()
                },
            )
        });
        fitted_or(fitted, self.by_far_field(3.0, 4.0), 2.0..=7.0)
    }

    /// The pairs' growth as theta falls: `theta^-a` (module doc), `a`
    /// fitted from the last run and the latest at another MAC (the P2P's
    /// and the M2L's, weighted by their seconds), else the far field's.
    fn pair_exponent(&self) -> f64 {
        let last = self.runs.last().expect("a run");
        let fitted = self.runs.iter().rev().skip(1).find_map(|r| {
            let ln = |a: f64, b: f64| (a > 0.0 && b > 0.0).then(|| (a / b).ln());
            let near = ln(last.near_pairs, r.near_pairs)?;
            let far = ln(last.far_pairs, r.far_pairs)?;
            let w = last.near / (last.near + last.far).max(1e-12);
            let narrow = (r.settings.theta / last.settings.theta).ln();
            (narrow.abs() > 1e-9).then(|| (w * near + (1.0 - w) * far) / narrow)
        });
        fitted_or(fitted, self.by_far_field(2.7, 2.0), 1.0..=3.5)
    }

    /// The error's theta exponent `s` (module doc).
    fn theta_exponent(&self) -> f64 {
        self.by_far_field(1.0, 1.6)
    }

    /// `expansions` for the Laplace far field, `nodes` for the node ones.
    fn by_far_field(&self, expansions: f64, nodes: f64) -> f64 {
        match self.far_field {
            FarField::Laplace | FarField::Auto | FarField::Monopole => expansions,
            FarField::KernelIndependent | FarField::Ppm => nodes,
        }
    }

    /// Predicted seconds of a run at `to`, from the last run.
    pub fn seconds(&self, to: Settings) -> f64 {
        let last = self.runs.last().expect("a run");
        let pairs = (last.settings.theta / to.theta).powf(self.pair_exponent());
        let order = (to.p + 1) as f64 / (last.settings.p + 1) as f64;
        let double = if last.float_m2l && to.p > MAX_F32_M2L_ORDER {
            DOUBLE_M2L
        } else {
            1.0
        };
        last.near * pairs
            + last.far * pairs * order.powf(self.far_exponent()) * double
            + last.expansions * order.powi(3)
            + last.fixed
    }

    /// Predicted error at `to`, from the last run's `error` and the fall
    /// an order `fall` at its MAC.
    pub fn error(&self, error: f64, fall: f64, to: Settings) -> f64 {
        let from = self.runs.last().expect("a run").settings;
        let narrow = to.theta / from.theta;
        let s = self.theta_exponent();
        error * fall.powi(to.p as i32 - from.p as i32) * narrow.powf(s * (to.p + 1) as f64)
    }

    /// The lowest order at `theta`, up to `most`, predicted to meet `tol`
    /// (with the safe side's room), with its predicted seconds.
    fn order_for(
        &self,
        error: f64,
        fall: f64,
        tol: f64,
        theta: f64,
        most: usize,
    ) -> Option<(Settings, f64)> {
        (1..=most)
            .map(|p| Settings { p, theta })
            .find(|&s| self.error(error, fall, s) <= AIM * tol)
            .map(|s| (s, self.seconds(s)))
    }

    /// The lowest order at `theta` predicted to meet `tol` (with the safe
    /// side's room), up to `most`.
    pub fn order_at(
        &self,
        error: f64,
        fall: f64,
        tol: f64,
        theta: f64,
        most: usize,
    ) -> Option<usize> {
        self.order_for(error, fall, tol, theta, most)
            .map(|(s, _)| s.p)
    }

    /// Among the MACs `thetas`, the one predicted to meet `tol` soonest,
    /// at its lowest order up to `most`, with its predicted seconds.
    pub fn soonest(
        &self,
        error: f64,
        fall: f64,
        tol: f64,
        most: usize,
        thetas: impl IntoIterator<Item = f64>,
    ) -> Option<(Settings, f64)> {
        thetas
            .into_iter()
            .filter_map(|t| self.order_for(error, fall, tol, t, most))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// A narrower MAC than the last run's, among `narrower` (each
    /// narrower than the one before), with the order it needs, where that
    /// is predicted clearly cheaper (at most `gain` as dear, as
    /// [`NARROWER_GAIN`]) than reaching `tol` at the last run's MAC (or
    /// where that MAC cannot by `most`).
    /// `error` and `fall` are the last run's error and the fall an order
    /// at its MAC.
    pub fn cheaper_narrower(
        &self,
        error: f64,
        fall: f64,
        tol: f64,
        most: usize,
        narrower: impl IntoIterator<Item = f64>,
        gain: f64,
    ) -> Option<Settings> {
        let theta = self.runs.last()?.settings.theta;
        let here = self
            .order_for(error, fall, tol, theta, most)
            .map_or(f64::INFINITY, |(_, t)| t);
        self.soonest(error, fall, tol, most, narrower)
            .filter(|&(_, t)| t < gain * here)
            .map(|(s, _)| s)
    }
}

/// An exponent fitted from the runs where there is one (and finite), else
/// the prior, within `range`.
fn fitted_or(fitted: Option<f64>, prior: f64, range: std::ops::RangeInclusive<f64>) -> f64 {
    fitted
        .filter(|x| x.is_finite())
        .unwrap_or(prior)
        .clamp(*range.start(), *range.end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(near: f64, near_pairs: u64, far: f64, far_pairs: u64, compressed: bool) -> Stats {
        // Which M2L ran is in the stats; the model goes by the far field.
        let mut st = Stats::default();
        st.add(Stage::P2p, near);
        st.add(Stage::M2l, far);
        st.add(Stage::Tree, 0.005);
        st.p2p = near_pairs;
        st.m2l = far_pairs;
        st.m2l_compressed = if compressed { far_pairs } else { 0 };
        st
    }

    /// Biot-Savart with cores of three spacings on Chebyshev nodes (3x10^4
    /// points, random strengths, f64, 2 cores, 2026-11-26): from the run
    /// at the table's p 3, theta 0.8 (P2P 0.086 s, M2L 0.047 s, error
    /// 1.6e-3, the table's fall 0.156 an order), p 5 at theta 0.8 (run:
    /// 0.47 s, 6.7e-5), not the p 6 a fall of 0.5 took (0.96 s); the
    /// narrower MACs that meet 1e-4 measured no faster (p 4 at 0.64:
    /// 0.50 s, 5.5e-5; p 3 at 0.5: 0.48 s, 8.3e-5).
    #[test]
    fn the_order_a_mac_needs_comes_from_the_fall() {
        let mut model = Model::new(FarField::KernelIndependent);
        let at = Settings { p: 3, theta: 0.8 };
        model.push(Run::new(at, &stats(0.086, 44_500_000, 0.047, 34_220, true)));
        let (e, fall) = (1.63e-3, 0.156);
        assert_eq!(model.order_at(e, fall, 1e-4, 0.8, 6), Some(5));
        let narrower = model.cheaper_narrower(e, fall, 1e-4, 6, [0.64, 0.512, 0.41], NARROWER_GAIN);
        assert_eq!(narrower, None);
    }

    /// The expansions' error falling by 0.9 an order at theta 0.7 from 5e-4
    /// at p 6 (velocity + stretching, cores of one spacing, on the GPU):
    /// the order that meets 1e-4 there is past the highest, so a narrower
    /// MAC (the explicit p 9 at theta 0.55 meets 5.3e-5).
    #[test]
    fn a_narrower_mac_is_taken_where_this_one_cannot_reach() {
        let mut model = Model::new(FarField::Laplace);
        let at = Settings { p: 6, theta: 0.7 };
        model.push(Run::new(
            at,
            &stats(0.2, 4_000_000_000, 0.05, 5_000_000, false),
        ));
        assert_eq!(model.order_at(5e-4, 0.9, 1e-4, 0.7, 20), None);
        let next = model.cheaper_narrower(5e-4, 0.9, 1e-4, 20, [0.56, 0.448, 0.4], NARROWER_GAIN);
        let next = next.expect("a narrower MAC");
        assert!(next.theta < 0.7 && next.p <= 12, "{next:?}");
        assert!(model.error(5e-4, 0.9, next) <= AIM * 1e-4);
    }

    /// The GPU's float M2L stops at p 12: past it the M2L runs in double,
    /// which the prediction counts. Velocity + stretching at 2^24 points
    /// on one H200 (2026-11-28): p 10 at theta 0.7 took 1.60 s (P2P 0.68,
    /// M2L 0.66 in float), error 3.0e-4 on the safe side, falling 0.55 an
    /// order from p 6; p 13
    /// there was predicted at 2.2 s and took 11.2 s (M2L 10.4 in double),
    /// where p 9 at theta 0.56 met the tolerance in 1.49 s.
    #[test]
    fn an_order_past_the_float_m2l_counts_the_double_one() {
        let mut model = Model::new(FarField::Laplace);
        let at = Settings { p: 10, theta: 0.7 };
        let mut st = stats(0.68, 2_000_000_000, 0.66, 40_000_000, false);
        st.m2l_kind = Some(M2lKind::FloatLanes);
        model.push(Run::new(at, &st));
        let p13 = Settings { p: 13, theta: 0.7 };
        assert!(model.seconds(p13) > 4.0, "{}", model.seconds(p13));
        let (e, fall) = (3.0e-4, 0.55);
        assert_eq!(model.order_at(e, fall, 1e-4, 0.7, 20), Some(13));
        let next = model.cheaper_narrower(e, fall, 1e-4, 20, [0.56, 0.448, 0.4], NARROWER_GAIN);
        let next = next.expect("a narrower MAC, at an order the float M2L takes");
        assert!(next.p <= MAX_F32_M2L_ORDER, "{next:?}");
        // Where the M2L ran in double anyway, no such jump.
        model.push(Run::new(
            at,
            &stats(0.68, 2_000_000_000, 0.66, 40_000_000, false),
        ));
        assert!(model.seconds(p13) < 2.5, "{}", model.seconds(p13));
    }

    /// Two runs at two MACs fit the pairs' growth.
    #[test]
    fn the_pairs_growth_is_fitted_from_two_macs() {
        let mut model = Model::new(FarField::Laplace);
        let (a, b) = (Settings { p: 6, theta: 0.7 }, Settings { p: 6, theta: 0.5 });
        model.push(Run::new(
            a,
            &stats(0.024, 68_700_000, 0.014, 481_776, false),
        ));
        assert_eq!(model.pair_exponent(), 2.7, "the prior");
        model.push(Run::new(
            b,
            &stats(0.051, 189_000_000, 0.025, 1_100_678, false),
        ));
        let a = model.pair_exponent();
        assert!(a > 2.4 && a < 3.1, "{a}");
    }

    /// The expansions' error falling fast at a cheap M2L: raising the
    /// order at the same MAC stays the choice (gravity at 10^5: p 6 to
    /// 10 at theta 0.6, not p 8 at 0.5).
    #[test]
    fn the_same_mac_stays_where_orders_are_cheap() {
        let mut model = Model::new(FarField::Laplace);
        let at = Settings { p: 6, theta: 0.6 };
        model.push(Run::new(
            at,
            &stats(0.035, 129_000_000, 0.015, 693_000, false),
        ));
        let next = model.cheaper_narrower(5.5e-5, 0.5, 5e-6, 20, [0.48, 0.4], NARROWER_GAIN);
        assert_eq!(next, None);
    }

    /// The M2L's exponent is fitted from two orders at one MAC.
    #[test]
    fn the_m2l_exponent_is_fitted_from_two_orders() {
        let mut model = Model::new(FarField::KernelIndependent);
        let (a, b) = (Settings { p: 2, theta: 0.7 }, Settings { p: 3, theta: 0.7 });
        model.push(Run::new(a, &stats(0.17, 9e7 as u64, 0.022, 46_528, true)));
        assert_eq!(model.far_exponent(), 4.0, "the prior");
        model.push(Run::new(b, &stats(0.17, 9e7 as u64, 0.097, 46_528, true)));
        let k = model.far_exponent();
        assert!(
            (k - (0.097f64 / 0.022).ln() / (4.0f64 / 3.0).ln()).abs() < 1e-9,
            "{k}"
        );
        let p4 = model.seconds(Settings { p: 4, theta: 0.7 });
        assert!(p4 > 0.17 + 0.097 * 2.0 && p4 < 0.17 + 0.097 * 5.0, "{p4}");
    }
}
