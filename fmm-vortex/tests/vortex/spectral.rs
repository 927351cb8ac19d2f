//! The pseudo-spectral Navier-Stokes solver against closed forms: the 2D
//! Taylor-Green vortex and an ABC (Beltrami) flow, exact solutions that
//! decay as `exp(-nu k^2 t)` while their nonlinear terms are gradients
//! the projection removes; a random field's energy kept without
//! viscosity (the Galerkin truncation conserves it) and spent at the
//! dissipation rate with it; the 3D Taylor-Green vortex's starting energy
//! and dissipation; bad input named.

use std::f64::consts::TAU;

use fmm_vortex::spectral::{passot_pouquet, spectrum_of, SpectralNs};

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn exact_solutions_decay_at_their_viscous_rates() {
    let (n, nu, dt, steps) = (16, 0.05, 0.05, 20);
    let tg = |x: [f64; 3]| [x[0].sin() * x[1].cos(), -x[0].cos() * x[1].sin(), 0.0];
    let (a, b, c) = (1.0, 0.7, 0.4);
    let abc = move |x: [f64; 3]| {
        [
            a * x[2].sin() + c * x[1].cos(),
            b * x[0].sin() + a * x[2].cos(),
            c * x[1].sin() + b * x[0].cos(),
        ]
    };
    for (name, k2, f) in [
        (
            "Taylor-Green 2D",
            2.0,
            &tg as &(dyn Fn([f64; 3]) -> [f64; 3] + Sync),
        ),
        ("ABC", 1.0, &abc),
    ] {
        let mut s = SpectralNs::from_fn(n, TAU, nu, f).unwrap();
        let start = s.velocity();
        for _ in 0..steps {
            s.step(dt).unwrap();
        }
        let decay = (-nu * k2 * s.time()).exp();
        let got = s.velocity();
        let err = (0..3)
            .map(|c| {
                let want: Vec<f64> = start[c].iter().map(|v| v * decay).collect();
                max_diff(&got[c], &want)
            })
            .fold(0.0, f64::max);
        println!("{name}: t = {:.2}, largest error {err:.1e}", s.time());
        assert!(err < 1e-13, "{name}: {err}");
    }
}

/// A random smooth field: a few dozen modes of random amplitude and
/// phase, made divergence-free by the solver.
fn random_field(n: usize, nu: f64, seed: u64) -> SpectralNs {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let modes: Vec<([f64; 3], [f64; 3], f64)> = (0..40)
        .map(|_| {
            let k = [(); 3].map(|_| (8.0 * next()).round());
            let a = [(); 3].map(|_| next());
            (k, a, TAU * next())
        })
        .collect();
    SpectralNs::from_fn(n, TAU, nu, move |x| {
        let mut u = [0.0; 3];
        for (k, a, ph) in &modes {
            let s = (k[0] * x[0] + k[1] * x[1] + k[2] * x[2] + ph).cos();
            for c in 0..3 {
                u[c] += a[c] * s;
            }
        }
        u
    })
    .unwrap()
}

#[test]
fn without_viscosity_the_energy_is_kept_and_with_it_spent_at_the_dissipation_rate() {
    // The Galerkin truncation keeps the energy exactly: what drifts is
    // RK4's, falling as dt^4 (a 16-fold fall for half the step).
    let drift = |steps: usize| {
        let mut s = random_field(16, 0.0, 3);
        let (k0, dt) = (s.energy(), 0.2 / steps as f64);
        for _ in 0..steps {
            s.step(dt).unwrap();
        }
        assert!(s.divergence() < 1e-12, "{}", s.divergence());
        (s.energy() / k0 - 1.0).abs()
    };
    let (coarse, fine) = (drift(10), drift(20));
    println!("inviscid: energy drift {coarse:.1e} (10 steps to t = 0.2), {fine:.1e} (20 steps)");
    assert!(coarse < 1e-6 && fine < coarse / 10.0, "{coarse} {fine}");
    // dK/dt = -epsilon: a centred difference of the energy against the
    // dissipation between.
    let mut s = random_field(16, 0.02, 4);
    let h = 1e-3;
    let k0 = s.energy();
    s.step(h).unwrap();
    let eps = s.dissipation();
    s.step(h).unwrap();
    let rate = (k0 - s.energy()) / (2.0 * h);
    println!("viscous: -dK/dt {rate:.8} against epsilon {eps:.8}");
    // The centred difference is good to h^2 K''' / 6: 2e-6 here.
    assert!((rate / eps - 1.0).abs() < 1e-5, "{rate} vs {eps}");
    // The spectrum's shells hold the energy.
    let e: f64 = s.spectrum().iter().sum();
    assert!((e / s.energy() - 1.0).abs() < 1e-12);
}

#[test]
fn the_taylor_green_vortex_starts_at_its_closed_forms() {
    // u = (sin x cos y cos z, -cos x sin y cos z, 0): K = 1/8, <|w|^2> = 3/4.
    let nu = 1.0 / 1600.0;
    let s = SpectralNs::from_fn(16, TAU, nu, |x| {
        [
            x[0].sin() * x[1].cos() * x[2].cos(),
            -x[0].cos() * x[1].sin() * x[2].cos(),
            0.0,
        ]
    })
    .unwrap();
    assert!((s.energy() - 0.125).abs() < 1e-15);
    assert!((s.dissipation() - 0.75 * nu).abs() < 1e-17);
    // All of it in the shell |k| = sqrt 3.
    let e = s.spectrum();
    assert!((e[2] - 0.125).abs() < 1e-15, "{e:?}");
}

#[test]
fn bad_settings_are_named() {
    let f = |_: [f64; 3]| [0.0; 3];
    for (n, side, nu, what) in [
        (15, TAU, 0.1, "points a side"),
        (2, TAU, 0.1, "points a side"),
        (16, 0.0, 0.1, "side"),
        (16, TAU, -1.0, "viscosity"),
        (16, TAU, f64::NAN, "viscosity"),
    ] {
        let e = SpectralNs::from_fn(n, side, nu, f)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(what), "{e}");
    }
    let mut s = SpectralNs::from_fn(8, TAU, 0.1, f).unwrap();
    assert!(s.step(0.0).unwrap_err().to_string().contains("step"));
    let short = [vec![0.0; 10], vec![0.0; 512], vec![0.0; 512]];
    assert!(SpectralNs::from_velocity(8, TAU, 0.1, &short).is_err());
}

#[test]
fn the_isotropic_field_has_the_spectrum_asked_for_and_is_real_and_solenoidal() {
    // A box of side 3 (the wavenumbers' units checked), 16^3, the
    // Passot-Pouquet spectrum peaked at kp = 3 (2 pi / 3 units).
    let (n, side) = (16, 3.0);
    let dk = TAU / side;
    let want = |k: f64| 0.7 * passot_pouquet(k, 3.0 * dk);
    let s = SpectralNs::isotropic(n, side, 0.01, want, 7).unwrap();
    let e = s.spectrum();
    let mut worst = 0.0f64;
    for (j, &ej) in e.iter().enumerate() {
        let target = if (1..n / 2).contains(&j) {
            want(j as f64 * dk) * dk
        } else {
            0.0
        };
        worst = worst.max((ej - target).abs() / (want(3.0 * dk) * dk));
    }
    // Real: the grid's velocity has the coefficients' spectrum (an
    // imaginary part dropped on the grid would take energy out).
    let on_grid = spectrum_of(&s.velocity(), n).unwrap();
    let real = max_diff(&on_grid, &e) / e.iter().cloned().fold(0.0, f64::max);
    println!(
        "spectrum off by {worst:.1e} of its peak; the grid's by {real:.1e}; divergence {:.1e}",
        s.divergence()
    );
    assert!(worst < 1e-12 && real < 1e-12 && s.divergence() < 1e-12);
    // The same seed, the same field; another, another.
    let again = SpectralNs::isotropic(n, side, 0.01, want, 7).unwrap();
    let other = SpectralNs::isotropic(n, side, 0.01, want, 8).unwrap();
    let (u, v, w) = (s.velocity(), again.velocity(), other.velocity());
    assert_eq!(u, v);
    assert!(max_diff(&u[0], &w[0]) > 0.1);
    // A spectrum negative or not finite at a shell is named.
    let e = SpectralNs::isotropic(n, side, 0.01, |k| 1.0 - k, 7)
        .err()
        .unwrap();
    assert!(e.to_string().contains("spectrum"), "{e}");
}
