//! Time integration of `dy/dt = f(y)` on a flat state: second-order
//! Adams-Bashforth (the papers' scheme: one evaluation a step), Heun's
//! Runge-Kutta 2, Williamson's low-storage Runge-Kutta 3 (two registers)
//! and the classical Runge-Kutta 4. A vortex step's state is the
//! particles' positions and strengths ([`Stepper::step_particles`]).

use crate::diagnostics::norm;
use crate::error::VortexError;
use crate::particles::VortexParticles;
use crate::rates::Rates;

/// A time-integration scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Second-order Adams-Bashforth (variable step), started by Heun.
    Ab2,
    /// Heun's method (explicit trapezoid), second order.
    Rk2,
    /// Williamson's (1980) 2N-storage Runge-Kutta, third order.
    Rk3,
    /// The classical Runge-Kutta, fourth order.
    Rk4,
}

impl Scheme {
    /// Its order of accuracy.
    pub fn order(self) -> usize {
        match self {
            Scheme::Ab2 | Scheme::Rk2 => 2,
            Scheme::Rk3 => 3,
            Scheme::Rk4 => 4,
        }
    }

    /// Evaluations of `f` a step (Adams-Bashforth: two on its first).
    pub fn stages(self) -> usize {
        match self {
            Scheme::Ab2 => 1,
            Scheme::Rk2 => 2,
            Scheme::Rk3 => 3,
            Scheme::Rk4 => 4,
        }
    }
}

impl std::str::FromStr for Scheme {
    type Err = VortexError;
    fn from_str(s: &str) -> Result<Self, VortexError> {
        match s.to_ascii_lowercase().as_str() {
            "ab2" => Ok(Scheme::Ab2),
            "rk2" => Ok(Scheme::Rk2),
            "rk3" => Ok(Scheme::Rk3),
            "rk4" => Ok(Scheme::Rk4),
            _ => Err(VortexError::BadSetting {
                what: "the scheme",
                value: f64::NAN,
                why: "one of ab2, rk2, rk3, rk4",
            }),
        }
    }
}

/// Williamson's 2N-storage RK3 coefficients (J. Comput. Phys. 35, 1980,
/// case 7): `q = A q + dt f(y); y += B q`.
const RK3_A: [f64; 3] = [0.0, -5.0 / 9.0, -153.0 / 128.0];
const RK3_B: [f64; 3] = [1.0 / 3.0, 15.0 / 16.0, 8.0 / 15.0];

/// A scheme with what it carries between steps (Adams-Bashforth: the last
/// step's rates and its length).
#[derive(Clone, Debug)]
pub struct Stepper {
    pub scheme: Scheme,
    /// Adams-Bashforth's last rates and step length (a checkpoint's too).
    pub(crate) last: Option<(Vec<f64>, f64)>,
}

/// `y + h * k`.
fn axpy(y: &[f64], h: f64, k: &[f64]) -> Vec<f64> {
    y.iter().zip(k).map(|(a, b)| a + h * b).collect()
}

impl Stepper {
    pub fn new(scheme: Scheme) -> Self {
        Stepper { scheme, last: None }
    }

    /// Forgets the rates Adams-Bashforth keeps (after the state was
    /// changed other than by a step: the next step starts again by Heun).
    pub fn restart(&mut self) {
        self.last = None;
    }

    /// One step of `dt` of `dy/dt = f(y)` from `y`, in place.
    pub fn step<E>(
        &mut self,
        y: &mut [f64],
        dt: f64,
        mut f: impl FnMut(&[f64]) -> Result<Vec<f64>, E>,
    ) -> Result<(), E> {
        match self.scheme {
            Scheme::Ab2 => {
                let k = f(y)?;
                match self.last.take() {
                    Some((prev, dt_prev)) => {
                        // y += dt ((1 + w/2) f_n - (w/2) f_{n-1}), w = dt / dt_prev.
                        let w = dt / dt_prev;
                        for ((a, b), c) in y.iter_mut().zip(&k).zip(&prev) {
                            *a += dt * ((1.0 + 0.5 * w) * b - 0.5 * w * c);
                        }
                    }
                    None => {
                        let k2 = f(&axpy(y, dt, &k))?;
                        for ((a, b), c) in y.iter_mut().zip(&k).zip(&k2) {
                            *a += 0.5 * dt * (b + c);
                        }
                    }
                }
                self.last = Some((k, dt));
            }
            Scheme::Rk2 => {
                let k1 = f(y)?;
                let k2 = f(&axpy(y, dt, &k1))?;
                for ((a, b), c) in y.iter_mut().zip(&k1).zip(&k2) {
                    *a += 0.5 * dt * (b + c);
                }
            }
            Scheme::Rk3 => {
                let mut q = vec![0.0; y.len()];
                for (a, b) in RK3_A.iter().zip(RK3_B) {
                    let k = f(y)?;
                    for ((qi, yi), ki) in q.iter_mut().zip(y.iter_mut()).zip(&k) {
                        *qi = a * *qi + dt * ki;
                        *yi += b * *qi;
                    }
                }
            }
            Scheme::Rk4 => {
                let k1 = f(y)?;
                let k2 = f(&axpy(y, 0.5 * dt, &k1))?;
                let k3 = f(&axpy(y, 0.5 * dt, &k2))?;
                let k4 = f(&axpy(y, dt, &k3))?;
                for (i, a) in y.iter_mut().enumerate() {
                    *a += dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
                }
            }
        }
        Ok(())
    }

    /// One step of `dt` of the particles `p` (positions and strengths;
    /// cores and volumes kept), the rates by `rates`; the rates of the
    /// step's first evaluation are handed back (the state at the step's
    /// start: what diagnostics and the time-step check read).
    pub fn step_particles(
        &mut self,
        p: &mut VortexParticles,
        dt: f64,
        mut rates: impl FnMut(&VortexParticles) -> Result<Rates, VortexError>,
    ) -> Result<Rates, VortexError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(VortexError::BadSetting {
                what: "the time step",
                value: dt,
                why: "must be finite and positive",
            });
        }
        let n = p.len();
        let mut y = Vec::with_capacity(6 * n);
        for i in 0..n {
            y.extend(p.x[i]);
            y.extend(p.alpha[i]);
        }
        let mut work = p.clone();
        let mut first = None;
        self.step(&mut y, dt, |s: &[f64]| {
            for i in 0..n {
                work.x[i] = [s[6 * i], s[6 * i + 1], s[6 * i + 2]];
                work.alpha[i] = [s[6 * i + 3], s[6 * i + 4], s[6 * i + 5]];
            }
            let r = rates(&work)?;
            let mut k = Vec::with_capacity(6 * n);
            for i in 0..n {
                k.extend(r.u[i]);
                k.extend(r.dalpha[i]);
            }
            first.get_or_insert(r);
            Ok::<_, VortexError>(k)
        })?;
        for i in 0..n {
            p.x[i] = [y[6 * i], y[6 * i + 1], y[6 * i + 2]];
            p.alpha[i] = [y[6 * i + 3], y[6 * i + 4], y[6 * i + 5]];
        }
        p.check()?;
        Ok(first.expect("a step evaluates the rates"))
    }
}

/// The largest stretching rate `|d alpha/dt| / |alpha|` over the
/// particles (a measure of the strain rate), times `dt`: a step resolves
/// the flow where this is small (at most about 0.1); past it the caller
/// should shorten the step.
pub fn strain_number(p: &VortexParticles, r: &Rates, dt: f64) -> f64 {
    p.alpha
        .iter()
        .zip(&r.dalpha)
        .filter(|(a, _)| norm(**a) > 0.0)
        .map(|(a, d)| norm(*d) / norm(*a))
        .fold(0.0, f64::max)
        * dt
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error at t = 1 of `y' = y cos t`, `y(0) = 1` (exact `e^{sin t}`)
    /// with `steps` steps.
    fn error(scheme: Scheme, steps: usize) -> f64 {
        let dt = 1.0 / steps as f64;
        let mut s = Stepper::new(scheme);
        // The state carries time as a second component (dt/dt = 1).
        let mut y = vec![1.0, 0.0];
        for _ in 0..steps {
            s.step(&mut y, dt, |v: &[f64]| {
                Ok::<_, ()>(vec![v[0] * v[1].cos(), 1.0])
            })
            .unwrap();
        }
        (y[0] - 1f64.sin().exp()).abs()
    }

    #[test]
    fn each_scheme_converges_at_its_order() {
        for scheme in [Scheme::Ab2, Scheme::Rk2, Scheme::Rk3, Scheme::Rk4] {
            let (coarse, fine) = (error(scheme, 40), error(scheme, 80));
            let measured = (coarse / fine).log2();
            let want = scheme.order() as f64;
            assert!(
                (measured - want).abs() < 0.15,
                "{scheme:?}: measured order {measured:.3}, want {want}"
            );
        }
    }

    #[test]
    fn a_step_that_is_not_positive_is_refused() {
        let mut p =
            VortexParticles::new(vec![[0.0; 3]], vec![[0.0, 0.0, 1.0]], vec![0.1], vec![1.0])
                .unwrap();
        for dt in [0.0, -1.0, f64::NAN] {
            let e = Stepper::new(Scheme::Rk2)
                .step_particles(&mut p, dt, |_| unreachable!("no rates for a bad step"))
                .unwrap_err();
            assert!(e.to_string().contains("time step"), "{e}");
        }
    }
}
