//! What an inviscid run conserves (Winckelmans and Leonard 1993; Saffman,
//! Vortex Dynamics, 1992, section 3.2): the total circulation vector
//! `sum alpha`, the linear impulse `I = 1/2 sum x x alpha` and the angular
//! impulse `A = 1/3 sum x x (x x alpha)`; the discrete method keeps them
//! up to the time integration's error (and, with stretching, to the
//! divergence of the particles' vorticity field).

use crate::particles::VortexParticles;

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// The invariants of a particle set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Invariants {
    pub circulation: [f64; 3],
    pub linear_impulse: [f64; 3],
    pub angular_impulse: [f64; 3],
}

impl Invariants {
    pub fn of(p: &VortexParticles) -> Self {
        let mut v = Invariants {
            circulation: [0.0; 3],
            linear_impulse: [0.0; 3],
            angular_impulse: [0.0; 3],
        };
        for (&x, &a) in p.x.iter().zip(&p.alpha) {
            let xa = cross(x, a);
            let xxa = cross(x, xa);
            for k in 0..3 {
                v.circulation[k] += a[k];
                v.linear_impulse[k] += 0.5 * xa[k];
                v.angular_impulse[k] += xxa[k] / 3.0;
            }
        }
        v
    }
}

/// The length of `v`.
pub fn norm(v: [f64; 3]) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}
