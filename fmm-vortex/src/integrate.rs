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

/// Where a scheme's registers live and the one operation it does on them,
/// `y = a y + sum_j c_j v_j`: the host's `Vec<f64>` ([`Host`]) or the
/// GPU's arrays (`resident`). The schemes are written once over it, so a
/// run on the device steps exactly as one on the host.
pub trait Registers {
    type V;
    /// A register of zeros as long as `like`.
    fn zeros(&self, like: &Self::V) -> Result<Self::V, VortexError>;
    /// A copy of `y`.
    fn copy(&self, y: &Self::V) -> Result<Self::V, VortexError>;
    /// `y = a y + sum_j c_j v_j` (one to four terms).
    fn combine(
        &self,
        y: &mut Self::V,
        a: f64,
        terms: &[(f64, &Self::V)],
    ) -> Result<(), VortexError>;
}

/// Registers on the host.
pub struct Host;

impl Registers for Host {
    type V = Vec<f64>;
    fn zeros(&self, like: &Vec<f64>) -> Result<Vec<f64>, VortexError> {
        Ok(vec![0.0; like.len()])
    }
    fn copy(&self, y: &Vec<f64>) -> Result<Vec<f64>, VortexError> {
        Ok(y.clone())
    }
    fn combine(
        &self,
        y: &mut Vec<f64>,
        a: f64,
        terms: &[(f64, &Vec<f64>)],
    ) -> Result<(), VortexError> {
        for (i, yi) in y.iter_mut().enumerate() {
            let mut s = a * *yi;
            for (c, v) in terms {
                s += c * v[i];
            }
            *yi = s;
        }
        Ok(())
    }
}

/// A scheme with what it carries between steps (Adams-Bashforth: the last
/// step's rates and its length), in registers of type `V`.
#[derive(Clone, Debug)]
pub struct Stepper<V = Vec<f64>> {
    pub scheme: Scheme,
    /// Adams-Bashforth's last rates and step length (a checkpoint's too).
    pub(crate) last: Option<(V, f64)>,
}

impl<V> Stepper<V> {
    pub fn new(scheme: Scheme) -> Self {
        Stepper { scheme, last: None }
    }

    /// The length of the step Adams-Bashforth's last rates were taken
    /// over (none before the first step, and for the Runge-Kutta
    /// schemes): a restart's step length.
    pub fn last_step(&self) -> Option<f64> {
        self.last.as_ref().map(|l| l.1)
    }

    /// Forgets the rates Adams-Bashforth keeps (after the state was
    /// changed other than by a step: the next step starts again by Heun).
    pub fn restart(&mut self) {
        self.last = None;
    }

    /// One step of `dt` of `dy/dt = f(y)` from `y`, in place, in the
    /// registers of `regs`.
    pub fn step_in<S: Registers<V = V>>(
        &mut self,
        regs: &S,
        y: &mut V,
        dt: f64,
        mut f: impl FnMut(&V) -> Result<V, VortexError>,
    ) -> Result<(), VortexError> {
        // `y + h k`, a new register.
        let ahead = |y: &V, h: f64, k: &V| -> Result<V, VortexError> {
            let mut z = regs.copy(y)?;
            regs.combine(&mut z, 1.0, &[(h, k)])?;
            Ok(z)
        };
        match self.scheme {
            Scheme::Ab2 => {
                let k = f(y)?;
                match self.last.take() {
                    Some((prev, dt_prev)) => {
                        // y += dt ((1 + w/2) f_n - (w/2) f_{n-1}), w = dt / dt_prev.
                        let w = dt / dt_prev;
                        regs.combine(
                            y,
                            1.0,
                            &[(dt * (1.0 + 0.5 * w), &k), (-dt * 0.5 * w, &prev)],
                        )?;
                    }
                    None => {
                        let k2 = f(&ahead(y, dt, &k)?)?;
                        regs.combine(y, 1.0, &[(0.5 * dt, &k), (0.5 * dt, &k2)])?;
                    }
                }
                self.last = Some((k, dt));
            }
            Scheme::Rk2 => {
                let k1 = f(y)?;
                let k2 = f(&ahead(y, dt, &k1)?)?;
                regs.combine(y, 1.0, &[(0.5 * dt, &k1), (0.5 * dt, &k2)])?;
            }
            Scheme::Rk3 => {
                let mut q = regs.zeros(y)?;
                for (a, b) in RK3_A.iter().zip(RK3_B) {
                    let k = f(y)?;
                    regs.combine(&mut q, *a, &[(dt, &k)])?;
                    regs.combine(y, 1.0, &[(b, &q)])?;
                }
            }
            Scheme::Rk4 => {
                let k1 = f(y)?;
                let k2 = f(&ahead(y, 0.5 * dt, &k1)?)?;
                let k3 = f(&ahead(y, 0.5 * dt, &k2)?)?;
                let k4 = f(&ahead(y, dt, &k3)?)?;
                let c = dt / 6.0;
                regs.combine(
                    y,
                    1.0,
                    &[(c, &k1), (2.0 * c, &k2), (2.0 * c, &k3), (c, &k4)],
                )?;
            }
        }
        Ok(())
    }
}

/// The time step's check, shared by the host and the device steps.
pub(crate) fn check_dt(dt: f64) -> Result<(), VortexError> {
    if dt.is_finite() && dt > 0.0 {
        Ok(())
    } else {
        Err(VortexError::BadSetting {
            what: "the time step",
            value: dt,
            why: "must be finite and positive",
        })
    }
}

impl Stepper {
    /// One step of `dt` of `dy/dt = f(y)` from `y` on the host, in place.
    pub fn step(
        &mut self,
        y: &mut Vec<f64>,
        dt: f64,
        f: impl FnMut(&Vec<f64>) -> Result<Vec<f64>, VortexError>,
    ) -> Result<(), VortexError> {
        self.step_in(&Host, y, dt, f)
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
        check_dt(dt)?;
        let n = p.len();
        let mut y = Vec::with_capacity(6 * n);
        pack(p, &mut y);
        let mut work = p.clone();
        let mut first = None;
        self.step(&mut y, dt, |s: &Vec<f64>| {
            unpack(s, &mut work);
            let r = rates(&work)?;
            let mut k = Vec::with_capacity(6 * n);
            pack_rates(&r, &mut k);
            first.get_or_insert(r);
            Ok(k)
        })?;
        unpack(&y, p);
        p.check()?;
        Ok(first.expect("a step evaluates the rates"))
    }
}

/// The particles' positions and strengths appended to `y`, six values a
/// particle (the state a step integrates).
pub(crate) fn pack(p: &VortexParticles, y: &mut Vec<f64>) {
    for (x, a) in p.x.iter().zip(&p.alpha) {
        y.extend(x);
        y.extend(a);
    }
}

/// The positions and strengths of `p` from the state `y` (as [`pack`]
/// laid it out; `y` may run on past them).
pub(crate) fn unpack(y: &[f64], p: &mut VortexParticles) {
    for (i, (x, a)) in p.x.iter_mut().zip(p.alpha.iter_mut()).enumerate() {
        *x = [y[6 * i], y[6 * i + 1], y[6 * i + 2]];
        *a = [y[6 * i + 3], y[6 * i + 4], y[6 * i + 5]];
    }
}

/// The rates `r` appended to `k` in [`pack`]'s layout.
pub(crate) fn pack_rates(r: &Rates, k: &mut Vec<f64>) {
    for (u, d) in r.u.iter().zip(&r.dalpha) {
        k.extend(u);
        k.extend(d);
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
            s.step(&mut y, dt, |v: &Vec<f64>| Ok(vec![v[0] * v[1].cos(), 1.0]))
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
