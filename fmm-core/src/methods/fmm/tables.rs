//! The FMM's measured errors: for each backend and far field, the error
//! of gravity without softening at the settings that backend runs fastest
//! for that error, cheapest first. The accuracy driver
//! ([`crate::accuracy`]) starts from them; the CPU's M2L asks them what
//! error its settings can expect ([`expected_error`]).

use super::Settings;
use crate::far::FarField;

/// The error of gravity by (p, theta) a backend starts from.
#[derive(Clone)]
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
    /// The cheapest settings whose tabled error is within `tol` (orders
    /// between two rows of one theta interpolated); past the
    /// table, the last theta with the order extrapolated at a factor 0.5
    /// an order (capped at the backend's highest).
    pub(crate) fn first(&self, tol: f64) -> Settings {
        match self.rows.iter().position(|r| r.2 <= tol) {
            Some(i) => {
                let (p, theta, e) = self.rows[i];
                // Between this row and the one before at the same theta,
                // orders the table skips, their error log-linear: the
                // lowest within the tolerance (gravity at 10^5, 1e-6: p 13
                // rather than the row's 14).
                let lower = i
                    .checked_sub(1)
                    .map(|j| self.rows[j])
                    .filter(|r| r.1 == theta && r.0 + 1 < p);
                let p = match lower {
                    Some((p0, _, e0)) => (p0 + 1..p)
                        .find(|&q| {
                            let t = (q - p0) as f64 / (p - p0) as f64;
                            (e0.ln() + t * (e.ln() - e0.ln())).exp() <= tol
                        })
                        .unwrap_or(p),
                    None => p,
                };
                // Capped at the highest order taken (the compressed
                // M2L's, with the direct sum to fall back on: softened
                // gravity at 1e-8 ran ki p 7 by the kernel, 3.0 s against
                // the direct sum's 0.2 s).
                Settings {
                    p: p.min(self.most_p),
                    theta,
                }
            }
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

impl Table {
    /// The error's fall an order at the MAC of the table nearest `theta`
    /// (over that MAC's rows, lowest order to highest); 0.5 where it has
    /// fewer than two. The driver's guess before its own runs give one.
    pub(crate) fn fall(&self, theta: f64) -> f64 {
        let nearest = self
            .rows
            .iter()
            .map(|r| r.1)
            .min_by(|a, b| (a - theta).abs().total_cmp(&(b - theta).abs()))
            .expect("a table has rows");
        let at: Vec<_> = self.rows.iter().filter(|r| r.1 == nearest).collect();
        match (at.first(), at.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => (b.2 / a.2).powf(1.0 / (b.0 - a.0) as f64),
            _ => 0.5,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cheapest_entry_within_the_tolerance_comes_first() {
        assert_eq!(CPU.first(1e-4), Settings { p: 6, theta: 0.6 });
        assert_eq!(CPU.first(1e-3), Settings { p: 4, theta: 0.6 });
        // Between the rows of p 12 (1.5e-6) and 14 (5.3e-7).
        assert_eq!(CPU.first(1e-6), Settings { p: 13, theta: 0.6 });
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
}
