//! The FMM on the CPU: its error falls with the order, bad options are
//! refused by name, and a tolerance is met or said to be out of reach.
//! Its accuracy for every kernel, in f32 and f64, against the f64 direct
//! sum, the refusal of a kernel without a far field, and degenerate inputs
//! (no sources, one particle, ...) are rows of the conformance matrix
//! (`conformance.rs`).

use fmm_core::kernels::*;
use fmm_core::{Error, FmmOptions, Kernel, Particles};
use fmm_tests::sets::{set, Dist, Spec, Strengths};
use fmm_tests::{direct_cpu, fmm_cpu, fmm_options, rel_l2};

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
    for (name, dist, seed) in [("cube", Dist::Cube, 1), ("plummer", Dist::Plummer, 2)] {
        let (t, s) = set::<Gravity, f64>(&Spec::new(dist, 3000, Strengths::RandomSign, seed));
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

/// The M2L in f32 lanes (chosen where the settings' expected error is
/// 1e-6 or more): it changes the outputs by about f32's rounding of the
/// far field (so it ran: the f64 M2L gives other bits) and the error
/// against the direct sum by under 1%, on a cube and a Plummer sphere
/// with strengths of both signs.
#[test]
fn the_m2l_in_f32_leaves_the_error_as_it_is() {
    use fmm_core::M2lChoice;
    for (name, dist, seed) in [("cube", Dist::Cube, 3), ("plummer", Dist::Plummer, 4)] {
        let (t, s) = set::<Gravity, f64>(&Spec::new(dist, 4000, Strengths::RandomSign, seed));
        let exact = direct_cpu::<Gravity, f64>(&[0.0], &t, &s).unwrap();
        for (p, theta) in [(4, 0.6), (9, 0.6), (12, 0.6)] {
            let run = |cpu_m2l| {
                let opts = FmmOptions {
                    cpu_m2l,
                    ..fmm_options(p, theta, 32)
                };
                fmm_cpu::<Gravity, f64>(&[0.0], &t, &s, &opts)
                    .unwrap()
                    .0
                    .slots()
                    .concat()
            };
            let (single, double) = (run(M2lChoice::Auto), run(M2lChoice::Double));
            let apart = rel_l2(&single, &double);
            let (es, ed) = (
                rel_l2(&single, &exact.slots().concat()),
                rel_l2(&double, &exact.slots().concat()),
            );
            println!(
                "{name} p {p} theta {theta}: f32 M2L {es:.3e}, f64 M2L {ed:.3e}, apart {apart:.1e}"
            );
            assert!(apart > 0.0 && apart < 1e-6, "{name} p {p}: {apart:e} apart");
            assert!(
                (es - ed).abs() < 0.01 * ed,
                "{name} p {p}: {es:e} against {ed:e}"
            );
        }
    }
}

#[test]
fn bad_options_and_kernels_are_refused_by_name() {
    let (t, s) = set::<Gravity, f64>(&Spec::new(Dist::Cube, 100, Strengths::RandomSign, 11));
    let run =
        |p, theta, ncrit| fmm_cpu::<Gravity, f64>(&[0.0], &t, &s, &fmm_options(p, theta, ncrit));
    for (p, theta, ncrit, word) in [
        (0, 0.5, 32, "order"),
        (31, 0.5, 32, "order"),
        (8, 1.0, 32, "theta"),
        (8, f64::NAN, 32, "theta"),
    ] {
        match run(p, theta, ncrit) {
            Err(Error::BadOption(m)) => assert!(m.contains(word), "{m}"),
            other => panic!("p {p} theta {theta} ncrit {ncrit}: {other:?}"),
        }
    }
    match fmm_cpu::<Gravity, f64>(&[-1.0], &t, &s, &FmmOptions::default()) {
        Err(Error::Requirement { requirement, .. }) => assert!(requirement.contains("eps")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_tolerance_is_met_and_measured_on_the_cpu() {
    use fmm_core::{evaluate, Backend, Method};
    // Plummer masses of one sign: what the tolerance table is measured on.
    let (t, s) = set::<Gravity, f64>(&Spec::new(Dist::Plummer, 3000, Strengths::Coherent, 3));
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
/// Laplace expansions' error stops falling near 1e-3 (they drop the
/// softening): asked for them, the driver stops within three runs and says
/// why and what to do. By default the far field follows the tolerance:
/// the floor predicted from the declaration is above it at every MAC, so
/// the kernel-independent far field, which keeps the softening, runs at
/// once and meets the tolerance, measured on every target; the next
/// evaluation of the same problem starts there.
#[test]
fn a_tolerance_the_smoothing_puts_out_of_reach_of_the_expansions_is_met_by_the_nodes() {
    use fmm_core::{evaluate, Backend, FarField, Method};
    let n = 5000;
    let (t, s) = set::<Gravity, f64>(&Spec::new(Dist::Cube, n, Strengths::Coherent, 31));
    let eps = 0.5 / (n as f64).cbrt();
    let laplace = Method::Fmm(FmmOptions::tolerance(1e-4).with_far_field(FarField::Laplace));
    let e = evaluate::<Gravity, f64>(Backend::Cpu, &laplace, &[eps], &t, &s).unwrap_err();
    let Error::ToleranceNotMet { best, tried, .. } = &e else {
        panic!("{e:?}");
    };
    println!("{e}");
    assert!(tried.len() <= 3, "{tried:?}");
    assert!(*best > 1e-4, "{best:e}");
    let text = e.to_string();
    assert!(text.contains("stopped falling"), "{text}");
    assert!(text.contains("smoothing"), "{text}");
    assert!(text.contains("--far-field ki"), "{text}");

    let ev = evaluate::<Gravity, f64>(Backend::Cpu, &Method::fmm_tolerance(1e-4), &[eps], &t, &s)
        .unwrap();
    let a = ev.achieved.expect("a tolerance was asked for");
    let exact = direct_cpu::<Gravity, f64>(&[eps], &t, &s).unwrap();
    let err = rel_l2(&ev.outputs.slots().concat(), &exact.slots().concat());
    println!(
        "default far field at 1e-4: {a:?}, {} runs, error on every target {err:.2e}",
        ev.stats.runs
    );
    assert_eq!(a.far_field, FarField::KernelIndependent);
    assert!(a.estimated_error <= 1e-4);
    assert!(err < 2e-4, "{err:e}");
    // The floor is predicted from the declaration (issue 27): the
    // expansions are not run to it, the nodes run at once.
    assert!(ev.stats.runs < tried.len(), "{} runs", ev.stats.runs);
    // Remembered: the next evaluation of the same kernel, parameters and
    // tolerance (a simulation's next step) starts with the nodes.
    let again =
        evaluate::<Gravity, f64>(Backend::Cpu, &Method::fmm_tolerance(1e-4), &[eps], &t, &s)
            .unwrap();
    assert_eq!(
        again.achieved.unwrap().far_field,
        FarField::KernelIndependent
    );
    assert!(
        again.stats.runs <= ev.stats.runs,
        "{} runs",
        again.stats.runs
    );
}

/// A root cube given with the problem (`Problem::in_cube`: a distributed
/// run's lattice, shared by every process's trees) keeps the FMM's error,
/// with the expansions and with the Chebyshev nodes, whether it holds the
/// points with room to spare or misses some of them (then it is grown);
/// and it is used: the outputs differ from those of the points' own cube
/// by round-off-sized amounts, not by nothing.
#[test]
fn a_given_root_cube_keeps_the_error() {
    use fmm_core::tree::Bounds;
    use fmm_core::{evaluate, Backend, FarField, Method, Problem};
    let (t, s) = set::<Gravity, f64>(&Spec::new(Dist::Plummer, 2000, Strengths::RandomSign, 5));
    let exact = direct_cpu::<Gravity, f64>(&[0.0], &t, &s).unwrap();
    let roomy = Bounds {
        center: [0.3, -0.2, 0.1],
        half: 40.0,
    };
    let short = Bounds {
        center: [0.0; 3],
        half: 0.5,
    };
    for far_field in [FarField::Laplace, FarField::KernelIndependent] {
        let opts = FmmOptions {
            far_field,
            ..fmm_options(5, 0.5, 32)
        };
        let run = |cube: Option<Bounds>| {
            let mut problem = Problem::new(&[0.0]);
            if let Some(c) = cube {
                problem = problem.in_cube(c);
            }
            let ev =
                evaluate::<Gravity, f64>(Backend::Cpu, &Method::Fmm(opts.clone()), problem, &t, &s)
                    .unwrap();
            ev.outputs.slots().concat()
        };
        let own = run(None);
        let e_own = rel_l2(&own, &exact.slots().concat());
        for (name, cube) in [("roomy", roomy), ("short", short)] {
            let got = run(Some(cube));
            let e = rel_l2(&got, &exact.slots().concat());
            let apart = rel_l2(&got, &own);
            println!("{far_field:?}, {name} cube: error {e:.2e} (own cube {e_own:.2e}), {apart:.1e} from the own cube's");
            assert!(
                e < 3.0 * e_own.max(1e-7),
                "{far_field:?} {name}: {e:e} against {e_own:e}"
            );
            assert!(apart > 0.0, "{far_field:?} {name}: the cube was not used");
        }
    }
}
