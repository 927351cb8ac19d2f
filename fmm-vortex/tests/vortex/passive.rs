//! Passive particles against closed forms: a tracer circles a straight
//! Gaussian vortex tube at its angular velocity; dust in still air relaxes
//! to its settling speed `g tau` as `1 - exp(-t / tau)`; the schemes keep
//! their order with passive particles aboard; bad input is refused by
//! name. The sums: the CPU's f64 direct sum.

use std::f64::consts::PI;

use fmm_core::Backend;
use fmm_vortex::*;

fn direct() -> Solver {
    Solver::direct_f64(Backend::Cpu)
}

/// A straight tube of blobs along z, circulation 1, cores `sigma`,
/// spacing `h`, `half` blobs each side of z = 0.
fn tube(sigma: f64, h: f64, half: i64) -> VortexParticles {
    let x: Vec<[f64; 3]> = (-half..=half).map(|k| [0.0, 0.0, k as f64 * h]).collect();
    let n = x.len();
    VortexParticles::new(
        x,
        vec![[0.0, 0.0, h]; n],
        vec![sigma; n],
        vec![h.powi(3); n],
    )
    .unwrap()
}

#[test]
fn a_tracer_circles_a_vortex_tube_at_its_angular_velocity() {
    let (sigma, h, half) = (0.1, 0.02, 400);
    let mut p = tube(sigma, h, half);
    let r0 = 0.2;
    // The tube's azimuthal velocity at r0: the Gaussian vortex's, less
    // the singular line past the tube's ends (as in tests/ring.rs).
    let l = (half as f64 + 0.5) * h;
    let u = (1.0 - (-r0 * r0 / (2.0 * sigma * sigma)).exp()) / (2.0 * PI * r0)
        - (1.0 - l / (l * l + r0 * r0).sqrt()) / (2.0 * PI * r0);
    let omega = u / r0;
    let mut q = Passive::tracers(vec![[r0, 0.0, 0.0]]).unwrap();
    let mut stepper = Stepper::new(Scheme::Rk4);
    let (dt, steps) = (0.02, 50);
    for _ in 0..steps {
        stepper
            .step_with_passive(&mut p, &mut q, dt, &direct())
            .unwrap();
    }
    let t = dt * steps as f64;
    let [x, y, z] = q.x[0];
    // Past half a turn: the angle from atan2, unwrapped.
    let (r, angle) = ((x * x + y * y).sqrt(), y.atan2(x).rem_euclid(2.0 * PI));
    println!(
        "after t = {t}: r {r:.9} (r0 {r0}), angle {angle:.9} against {:.9}",
        omega * t
    );
    assert!((r - r0).abs() < 1e-7, "{r}");
    assert!((angle / (omega * t) - 1.0).abs() < 1e-6, "{angle}");
    assert!(z.abs() < 1e-12, "{z}");
}

/// Dust from rest in still air: `v = g tau (1 - e^(-t/tau))`, `z = g tau
/// (t - tau (1 - e^(-t/tau)))`; the error at t = 0.5 with `steps` steps.
fn settling_error(scheme: Scheme, steps: usize) -> f64 {
    let (tau, g) = (0.1, -9.81);
    let mut p = VortexParticles::new(vec![], vec![], vec![], vec![]).unwrap();
    let mut q = Passive::inertial(vec![[0.0; 3]], vec![[0.0; 3]], tau, [0.0, 0.0, g]).unwrap();
    let mut stepper = Stepper::new(scheme);
    let dt = 0.5 / steps as f64;
    for _ in 0..steps {
        stepper
            .step_with_passive(&mut p, &mut q, dt, &direct())
            .unwrap();
    }
    let t: f64 = 0.5;
    let decay = 1.0 - (-t / tau).exp();
    let (v, z) = (g * tau * decay, g * tau * (t - tau * decay));
    (q.v[0][2] - v).abs().max((q.x[0][2] - z).abs())
}

#[test]
fn dust_settles_at_g_tau_and_each_scheme_keeps_its_order() {
    for scheme in [Scheme::Ab2, Scheme::Rk2, Scheme::Rk3, Scheme::Rk4] {
        let (coarse, fine) = (settling_error(scheme, 50), settling_error(scheme, 100));
        let order = (coarse / fine).log2();
        println!("{scheme:?}: error {fine:.2e} at 100 steps, order {order:.2}");
        assert!(
            (order - scheme.order() as f64).abs() < 0.2,
            "{scheme:?}: {order}"
        );
    }
    assert!(settling_error(Scheme::Rk4, 100) < 1e-7);
}

#[test]
fn bad_passive_particles_are_refused_by_name() {
    let e = Passive::inertial(vec![[0.0; 3]], vec![[0.0; 3]], 0.0, [0.0; 3]).unwrap_err();
    assert!(e.to_string().contains("response time"), "{e}");
    let e = Passive::inertial(vec![[0.0; 3]], vec![], 0.1, [0.0; 3]).unwrap_err();
    assert!(e.to_string().contains("velocities"), "{e}");
    let e = Passive::tracers(vec![[0.0, f64::NAN, 0.0]]).unwrap_err();
    assert!(e.to_string().contains("passive position"), "{e}");
    // A stepper that carried passive particles cannot be checkpointed as
    // the vortex particles'.
    let mut p = tube(0.1, 0.05, 3);
    let mut q = Passive::tracers(vec![[0.3, 0.0, 0.0]]).unwrap();
    let mut s = Stepper::new(Scheme::Ab2);
    s.step_with_passive(&mut p, &mut q, 0.01, &direct())
        .unwrap();
    let path = std::env::temp_dir().join(format!("passive_{}.ckpt", std::process::id()));
    let e = Checkpoint {
        step: 1,
        time: 0.01,
        particles: p,
        stepper: s,
    }
    .save(&path)
    .unwrap_err();
    assert!(e.to_string().contains("passive"), "{e}");
    assert!(!path.exists());
}
