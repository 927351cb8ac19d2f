//! Pseudo-particles (Anderson 1992, Makino 1999; yokota2009 section 3.3):
//! strengths at the `K` points of a spherical t-design on the sphere
//! circumscribing a cell, radius `r_s`.
//!
//! Upward (yokota2009 eq 36): a source of strength `q` at `x` (distance
//! `rho` from the centre) gives point `k` at `r_s u_k`
//! `q_k = q / K sum_{n=0}^{p} (2n+1) (rho / r_s)^n P_n(cos gamma_k)`,
//! `cos gamma_k = x . u_k / rho`. Outside the sphere the pseudo-particles'
//! `1/r` field equals the sources' to degree `p`: `1/|y - x|` expands in
//! `P_n`, and the t-design (`t = 2p`) integrates the product of two
//! harmonics of degree at most `p` exactly (the addition theorem does the
//! rest).
//!
//! Downward: a field harmonic inside the sphere is interpolated from its
//! values at the points by the same weights,
//! `u(x) ~ 1 / K sum_k u(r_s u_k) sum_n (2n+1) (|x| / r_s)^n P_n(cos gamma_k)`
//! (Poisson's formula truncated at degree `p`, with the t-design as its
//! quadrature); this is eq 37 with the field's values as the "physical
//! property" of the downward pass. The velocity gradient reaches the
//! targets the same way as every output that depends on the target's own
//! fields: the kernel is run at the points once per target slot
//! ([`super::nodes`]), so `(alpha . grad) u` is interpolated as three
//! harmonic fields (`d u / d x_a`) and contracted with the target's
//! `alpha` at L2P.
//!
//! The point sets are R. H. Hardin and N. J. A. Sloane's spherical
//! designs ("McLaren's improved snub cube and other new spherical designs
//! in three dimensions", Discrete Comput. Geom. 15 (1996) 429-441;
//! <http://neilsloane.com/sphdesigns/>), in `fmm-core/data/sphdesigns/`.

use std::sync::OnceLock;

use super::nodes::Basis;

/// The highest order: the 216-point 20-design.
pub const MAX_ORDER: usize = 10;

/// The design files by order (`t = 2p`), yokota2009 Table 1.
const DESIGNS: [(usize, &str); MAX_ORDER] = [
    (4, include_str!("../../data/sphdesigns/des.3.4.2.txt")),
    (14, include_str!("../../data/sphdesigns/des.3.14.4.txt")),
    (26, include_str!("../../data/sphdesigns/des.3.26.6.txt")),
    (36, include_str!("../../data/sphdesigns/des.3.36.8.txt")),
    (60, include_str!("../../data/sphdesigns/des.3.60.10.txt")),
    (84, include_str!("../../data/sphdesigns/des.3.84.12.txt")),
    (108, include_str!("../../data/sphdesigns/des.3.108.14.txt")),
    (144, include_str!("../../data/sphdesigns/des.3.144.16.txt")),
    (180, include_str!("../../data/sphdesigns/des.3.180.18.txt")),
    (216, include_str!("../../data/sphdesigns/des.3.216.20.txt")),
];

/// Points of the design order `p` uses (yokota2009 Table 1).
pub fn points_for(p: usize) -> usize {
    DESIGNS[p - 1].0
}

/// The unit vectors of the design for order `p`, parsed once.
fn design(p: usize) -> &'static [[f64; 3]] {
    static PARSED: [OnceLock<Vec<[f64; 3]>>; MAX_ORDER] = [const { OnceLock::new() }; MAX_ORDER];
    PARSED[p - 1].get_or_init(|| {
        let (k, text) = DESIGNS[p - 1];
        let v: Vec<f64> = text
            .split_whitespace()
            .map(|s| s.parse().expect("the shipped designs parse"))
            .collect();
        assert_eq!(v.len(), 3 * k, "design of order {p}");
        v.chunks(3).map(|c| [c[0], c[1], c[2]]).collect()
    })
}

/// Pseudo-particles of order `p` in the unit frame of a cell (centre 0,
/// half side 1): on the circumscribing sphere, radius `sqrt 3`.
#[derive(Clone, Debug)]
pub struct PseudoParticles {
    p: usize,
    units: &'static [[f64; 3]],
    nodes: Vec<[f64; 3]>,
}

/// The sphere's radius in the unit frame: it circumscribes the cell, so a
/// child's sphere lies inside its parent's (M2M and L2L stay inside the
/// sphere where the expansions converge).
const RADIUS: f64 = 1.732_050_807_568_877_2;

impl PseudoParticles {
    /// The design of order `p` (checked by the caller: 1 to
    /// [`MAX_ORDER`]).
    pub fn new(p: usize) -> Self {
        let units = design(p);
        let nodes = units.iter().map(|u| u.map(|c| c * RADIUS)).collect();
        PseudoParticles { p, units, nodes }
    }

    /// The design's unit vectors (the nodes over the radius): what the
    /// GPU's weights read, so that they are the CPU's.
    pub(crate) fn units(&self) -> &[[f64; 3]] {
        self.units
    }
}

impl Basis for PseudoParticles {
    fn nodes(&self) -> &[[f64; 3]] {
        &self.nodes
    }

    fn weights(&self, x: [f64; 3], w: &mut [f64]) {
        let inv_k = 1.0 / self.units.len() as f64;
        // (|x| / r_s)^n P_n(cos gamma) by the Legendre recurrence in the
        // scaled form, which needs no division by |x| (x may be the
        // centre): Q_{n+1} = ((2n+1) sc Q_n - n s^2 Q_{n-1}) / (n+1),
        // sc = x . u / r_s, s^2 = |x|^2 / r_s^2.
        let s2 = (x[0] * x[0] + x[1] * x[1] + x[2] * x[2]) / (RADIUS * RADIUS);
        for (wk, u) in w.iter_mut().zip(self.units) {
            let sc = (x[0] * u[0] + x[1] * u[1] + x[2] * u[2]) / RADIUS;
            let (mut q0, mut q1) = (1.0, sc);
            let mut sum = 1.0 + 3.0 * sc;
            for n in 1..self.p {
                let nf = n as f64;
                let q2 = ((2.0 * nf + 1.0) * sc * q1 - nf * s2 * q0) / (nf + 1.0);
                sum += (2.0 * nf + 3.0) * q2;
                (q0, q1) = (q1, q2);
            }
            *wk = sum * inv_k;
        }
    }

    fn radius(&self) -> f64 {
        RADIUS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(a: [f64; 3], b: [f64; 3]) -> f64 {
        ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
    }

    #[test]
    fn the_designs_are_unit_vectors_integrating_low_degrees() {
        for p in 1..=MAX_ORDER {
            let d = design(p);
            assert_eq!(d.len(), points_for(p));
            for u in d {
                assert!((dist(*u, [0.0; 3]) - 1.0).abs() < 1e-12);
            }
            // The mean of z^2 is 1/3 (t >= 2).
            let m: f64 = d.iter().map(|u| u[2] * u[2]).sum::<f64>() / d.len() as f64;
            assert!((m - 1.0 / 3.0).abs() < 1e-10, "p {p}: {m}");
        }
    }

    /// Eq 36 against what it represents: the pseudo-particles' 1/r field
    /// outside the sphere equals the sources', to an error falling with p.
    #[test]
    fn upward_weights_reproduce_the_far_field() {
        let sources = [
            ([0.3, -0.5, 0.8], 1.0),
            ([-0.9, 0.2, 0.1], -0.6),
            ([0.0, 0.0, 0.0], 0.4),
        ];
        let y = [5.0, 3.0, -2.0];
        let want: f64 = sources.iter().map(|&(x, q)| q / dist(x, y)).sum();
        let mut last = f64::INFINITY;
        for p in [2, 4, 6, 8, 10] {
            let b = PseudoParticles::new(p);
            let mut w = vec![0.0; b.len()];
            let mut qk = vec![0.0; b.len()];
            for &(x, q) in &sources {
                b.weights(x, &mut w);
                qk.iter_mut().zip(&w).for_each(|(a, b)| *a += q * b);
            }
            let got: f64 = b
                .nodes()
                .iter()
                .zip(&qk)
                .map(|(&x, q)| q / dist(x, y))
                .sum();
            let err = ((got - want) / want).abs();
            assert!(err < last, "p {p}: {err:.2e} after {last:.2e}");
            last = err;
        }
        assert!(last < 1e-6, "{last:.2e}");
    }

    /// Eq 37 (downward) against what it represents: a harmonic field inside
    /// the sphere interpolated from its values at the points.
    #[test]
    fn downward_weights_interpolate_a_harmonic_field() {
        let z = [6.0, -1.0, 2.5];
        let f = |x: [f64; 3]| 1.0 / dist(x, z);
        let x = [0.6, 0.9, -0.7];
        let b = PseudoParticles::new(8);
        let mut w = vec![0.0; b.len()];
        b.weights(x, &mut w);
        let got: f64 = b.nodes().iter().zip(&w).map(|(&n, w)| w * f(n)).sum();
        assert!(((got - f(x)) / f(x)).abs() < 1e-6);
    }
}
