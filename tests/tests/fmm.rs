//! The FMM on the CPU against the f64 direct sum, for the kernels with a
//! Laplace far field, and its errors.

use fmm_core::distributions::{plummer, uniform_cube};
use fmm_core::kernels::*;
use fmm_core::{Error, FmmOptions, Kernel, Particles};
use fmm_tests::{direct_cpu, fmm_cpu, fmm_options, rel_l2};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Sources of kernel `K` at `pos` with random strengths (core radii, if
/// any, `sigma`), and targets at `tpos`.
fn set<K: Kernel>(
    pos: &[[f64; 3]],
    tpos: &[[f64; 3]],
    sigma: f64,
    seed: u64,
) -> (Particles<f64>, Particles<f64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = Particles::sources::<K>(pos).unwrap();
    for f in &K::def().sources {
        let n = pos.len();
        if f.name == "sigma" {
            s.set("sigma", &vec![sigma; n]).unwrap();
        } else if f.shape.slots() == 1 {
            let v: Vec<f64> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
            s.set(&f.name, &v).unwrap();
        } else {
            let v: Vec<[f64; 3]> = (0..n)
                .map(|_| [0, 1, 2].map(|_| rng.gen_range(-1.0..1.0)))
                .collect();
            s.set_vec3(&f.name, &v).unwrap();
        }
    }
    (Particles::targets::<K>(tpos).unwrap(), s)
}

/// The relative L2 error of every output slot together, FMM against the
/// direct sum.
fn error<K: Kernel>(
    params: &[f64],
    t: &Particles<f64>,
    s: &Particles<f64>,
    opts: &FmmOptions,
) -> f64 {
    let exact = direct_cpu::<K, f64>(params, t, s).unwrap();
    let (got, stats) = fmm_cpu::<K, f64>(params, t, s, opts).unwrap();
    assert!(stats.m2l > 0, "the far field was used");
    rel_l2(&got.slots().concat(), &exact.slots().concat())
}

#[test]
fn gravity_error_falls_with_p_below_1e_9() {
    for (name, pos) in [
        ("cube", uniform_cube(3000, 1)),
        ("plummer", plummer(3000, 2).0),
    ] {
        let (t, s) = set::<Gravity>(&pos, &pos, 0.0, 3);
        let errs: Vec<f64> = [2, 4, 8, 12, 16]
            .iter()
            .map(|&p| {
                let opts = fmm_options(p, 0.35, 32);
                error::<Gravity>(&[0.0], &t, &s, &opts)
            })
            .collect();
        println!("{name}: p 2 4 8 12 16 -> {errs:?}");
        for w in errs.windows(2) {
            assert!(
                w[1] < 0.5 * w[0],
                "{name}: the error must fall with p: {errs:?}"
            );
        }
        assert!(errs[4] < 1e-9, "{name}: p = 16 gives {:e}", errs[4]);
    }
}

#[test]
fn coulomb_vortex_and_stretching_kernels_match_the_direct_sum() {
    let pos = uniform_cube(2500, 4);
    // Targets elsewhere, some outside the sources' box.
    let tpos: Vec<[f64; 3]> = uniform_cube(700, 5)
        .iter()
        .map(|x| x.map(|c| 1.4 * c - 0.2))
        .collect();
    let opts = fmm_options(12, 0.5, 32);
    let (t, s) = set::<Coulomb>(&pos, &tpos, 0.0, 6);
    let e = error::<Coulomb>(&[], &t, &s, &opts);
    assert!(e < 5e-6, "Coulomb: {e:e}");
    // Core radii far below the spacing: the far field's singular kernel
    // is the smoothed one there.
    let (t, s) = set::<BiotSavart>(&pos, &tpos, 1e-3, 7);
    let e = error::<BiotSavart>(&[], &t, &s, &opts);
    assert!(e < 5e-6, "BiotSavart: {e:e}");
    for seed in [21, 22] {
        // Stretching reads the targets' own strengths.
        let (mut t, s) = set::<Stretching>(&pos, &tpos, 1e-3, seed);
        let mut rng = StdRng::seed_from_u64(seed);
        let a: Vec<[f64; 3]> = (0..tpos.len())
            .map(|_| [0, 1, 2].map(|_| rng.gen_range(-1.0..1.0)))
            .collect();
        t.set_vec3("alpha_i", &a).unwrap();
        let e = if seed == 21 {
            error::<Stretching>(&[], &t, &s, &opts)
        } else {
            let (mut t2, s2) = set::<VelocityStretching>(&pos, &tpos, 1e-3, seed);
            t2.set_vec3("alpha_i", &a).unwrap();
            error::<VelocityStretching>(&[], &t2, &s2, &opts)
        };
        assert!(e < 5e-6, "stretching (seed {seed}): {e:e}");
    }
    let (t, s) = set::<HuBiotSavart>(&pos, &tpos, 0.0, 8);
    let e = error::<HuBiotSavart>(&[1e-3], &t, &s, &opts);
    assert!(e < 5e-6, "HuBiotSavart: {e:e}");
}

#[test]
fn f32_particles_give_f32_accuracy() {
    // Points and masses that f32 holds exactly, so that the f64 reference
    // sums the same problem; no softening, which the far field (singular)
    // would not have: with eps = 0.01 its model error is 2e-4 here.
    let pos: Vec<[f64; 3]> = uniform_cube(4000, 9)
        .iter()
        .map(|x| x.map(|c| c as f32 as f64))
        .collect();
    let pos32: Vec<[f32; 3]> = pos.iter().map(|x| x.map(|c| c as f32)).collect();
    let m: Vec<f32> = (0..pos.len()).map(|i| 1.0 + (i % 7) as f32 / 8.0).collect();
    let m64: Vec<f64> = m.iter().map(|&x| x as f64).collect();
    let mut s = Particles::sources::<Gravity>(&pos).unwrap();
    s.set("m", &m64).unwrap();
    let t = Particles::targets::<Gravity>(&pos).unwrap();
    let exact = direct_cpu::<Gravity, f64>(&[0.0], &t, &s).unwrap();
    let mut s32 = Particles::sources::<Gravity>(&pos32).unwrap();
    s32.set("m", &m).unwrap();
    let t32 = Particles::targets::<Gravity>(&pos32).unwrap();
    let opts = fmm_options(10, 0.5, 64);
    let (got, _) = fmm_cpu::<Gravity, f32>(&[0.0], &t32, &s32, &opts).unwrap();
    let got: Vec<f64> = got
        .vec3("acc")
        .unwrap()
        .concat()
        .iter()
        .map(|&x| x as f64)
        .collect();
    let e = rel_l2(&got, &exact.vec3("acc").unwrap().concat());
    assert!(e < 1e-5, "f32 acceleration: {e:e}");
}

#[test]
fn bad_options_and_kernels_are_refused_by_name() {
    let pos = uniform_cube(100, 11);
    let (t, s) = set::<Gravity>(&pos, &pos, 0.0, 12);
    let run =
        |p, theta, ncrit| fmm_cpu::<Gravity, f64>(&[0.0], &t, &s, &fmm_options(p, theta, ncrit));
    for (p, theta, ncrit, word) in [
        (0, 0.5, 32, "order"),
        (31, 0.5, 32, "order"),
        (8, 1.0, 32, "theta"),
        (8, f64::NAN, 32, "theta"),
        (8, 0.5, 0, "ncrit"),
    ] {
        match run(p, theta, ncrit) {
            Err(Error::BadOption(m)) => assert!(m.contains(word), "{m}"),
            other => panic!("p {p} theta {theta} ncrit {ncrit}: {other:?}"),
        }
    }
    let (t, s) = set::<Gravity>(&pos, &pos, 0.0, 13);
    match fmm_cpu::<Gravity, f64>(&[-1.0], &t, &s, &FmmOptions::default()) {
        Err(Error::Requirement { requirement, .. }) => assert!(requirement.contains("eps")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_sources_or_one_particle_give_exact_answers() {
    let pos = uniform_cube(50, 14);
    let (t, _) = set::<Gravity>(&pos, &pos, 0.0, 15);
    let none = Particles::sources::<Gravity>(&[]).unwrap();
    let (out, _) = fmm_cpu::<Gravity, f64>(&[0.0], &t, &none, &FmmOptions::default()).unwrap();
    assert!(out.slots().iter().flatten().all(|&x| x == 0.0));
    let one = [[0.5, 0.5, 0.5]];
    let (t1, s1) = set::<Gravity>(&one, &one, 0.0, 16);
    let (out, _) = fmm_cpu::<Gravity, f64>(&[0.0], &t1, &s1, &FmmOptions::default()).unwrap();
    assert!(
        out.slots().iter().flatten().all(|&x| x == 0.0),
        "a lone particle feels nothing"
    );
}

fmm_core::kernel! {
    /// A kernel without a far field.
    pub kernel Screened {
        param kappa;
        source q;
        output phi;
        phi += select(r2 > 0.0, q * exp(-kappa * r) * rsqrt(r2), 0.0);
    }
}

#[test]
fn a_kernel_without_far_field_is_refused_by_name() {
    let pos = uniform_cube(10, 5);
    let s = Particles::<f64>::sources::<Screened>(&pos).unwrap();
    let t = Particles::<f64>::targets::<Screened>(&pos).unwrap();
    let e = fmm_cpu::<Screened, f64>(&[1.0], &t, &s, &FmmOptions::default()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NoFarField {
                method: "the FMM",
                ..
            }
        ),
        "{e:?}"
    );
}

/// Plummer masses of one sign: what the tolerance table is measured on.
fn plummer_set(n: usize, seed: u64) -> (Particles<f64>, Particles<f64>) {
    let pos = plummer(n, seed).0;
    let mut s = Particles::sources::<Gravity>(&pos).unwrap();
    s.set("m", &vec![1.0 / n as f64; n]).unwrap();
    (Particles::targets::<Gravity>(&pos).unwrap(), s)
}

#[test]
fn the_tolerance_is_met_and_measured_on_the_cpu() {
    use fmm_core::{evaluate, Backend, Method};
    let (t, s) = plummer_set(3000, 3);
    let exact = direct_cpu::<Gravity, f64>(&[0.0], &t, &s).unwrap();
    for tol in [1e-3, 1e-5, 1e-8] {
        let ev =
            evaluate::<Gravity, f64>(Backend::Cpu, &Method::fmm_tolerance(tol), &[0.0], &t, &s)
                .unwrap();
        let a = ev.achieved.expect("a tolerance was asked for");
        assert!(a.estimated_error <= tol, "{tol}: {a:?}");
        // The whole error, not only the sampled one, is near the tolerance.
        let e = rel_l2(&ev.outputs.slots().concat(), &exact.slots().concat());
        assert!(e < 3.0 * tol, "{tol}: whole error {e:e}, {a:?}");
    }
}

/// Issue 13, defect 1: softened gravity (eps half the mean spacing) at
/// 1e-4 raised the order to 30 for minutes before saying "not met". The
/// error stops falling near 1e-3 (the far field drops the softening):
/// within three runs the driver stops and says why and what to do.
#[test]
fn a_tolerance_the_smoothing_puts_out_of_reach_is_refused_within_three_runs() {
    use fmm_core::{evaluate, Backend, Method};
    let n = 5000;
    let pos = uniform_cube(n, 31);
    let mut s = Particles::sources::<Gravity>(&pos).unwrap();
    s.set("m", &vec![1.0 / n as f64; n]).unwrap();
    let t = Particles::targets::<Gravity>(&pos).unwrap();
    let eps = 0.5 / (n as f64).cbrt();
    let e = evaluate::<Gravity, f64>(Backend::Cpu, &Method::fmm_tolerance(1e-4), &[eps], &t, &s)
        .unwrap_err();
    let Error::ToleranceNotMet { best, tried, .. } = &e else {
        panic!("{e:?}");
    };
    println!("{e}");
    assert!(tried.len() <= 3, "{tried:?}");
    assert!(*best > 1e-4, "{best:e}");
    let text = e.to_string();
    assert!(text.contains("stopped falling"), "{text}");
    assert!(text.contains("smoothing"), "{text}");
}
