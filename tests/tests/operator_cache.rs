//! The compressed M2L's operators are kept between evaluations of one
//! geometry (`fmm_core::far::clear_operator_cache`): a second evaluation
//! reuses them all and gives the first's outputs; another kernel
//! parameter or root cube computes its own; the last two geometries are
//! kept, the least recently used dropped; the rank tolerance is an
//! option, checked. Its own test binary: the cache is one per process, and
//! other tests' evaluations would replace it between these steps.

use fmm_core::far::clear_operator_cache;
use fmm_core::kernels::Yukawa;
use fmm_core::{Error, FarField, FmmOptions, Particles};
use fmm_tests::sets::{set, Dist, Spec, Strengths};
use fmm_tests::{direct_cpu, fmm_cpu, rel_l2};

fn error(lambda: f64, t: &Particles<f64>, s: &Particles<f64>, got: &fmm_core::Outputs<f64>) -> f64 {
    let exact = direct_cpu::<Yukawa, f64>(&[lambda], t, s).unwrap();
    rel_l2(&got.slots().concat(), &exact.slots().concat())
}

#[test]
fn operators_are_kept_for_the_same_geometry_only() {
    let spec = Spec::new(Dist::Cube, 3000, Strengths::RandomSign, 21);
    let (t, s) = set::<Yukawa, f64>(&spec);
    let opts = FmmOptions {
        ncrit: 32,
        ..FmmOptions::fixed(3, 0.7).with_far_field(FarField::KernelIndependent)
    };
    clear_operator_cache();
    let (a, sa) = fmm_cpu::<Yukawa, f64>(&[4.0], &t, &s, &opts).unwrap();
    assert!(sa.m2l_operators > 0 && sa.m2l_compressed > 0);
    assert_eq!(sa.m2l_operators_reused, 0, "nothing kept after clearing");

    // The same geometry: every operator kept, the same outputs (to the
    // order of the parallel sums).
    let (b, sb) = fmm_cpu::<Yukawa, f64>(&[4.0], &t, &s, &opts).unwrap();
    assert_eq!(sb.m2l_operators, sa.m2l_operators);
    assert_eq!(sb.m2l_operators_reused, sb.m2l_operators);
    let diff = rel_l2(&b.slots().concat(), &a.slots().concat());
    assert!(diff < 1e-13, "second evaluation differs by {diff:e}");
    let err = error(4.0, &t, &s, &a);
    assert!(err < 3e-4, "{err:e}");

    // Another screening: other operators, none of the kept ones.
    let (c, sc) = fmm_cpu::<Yukawa, f64>(&[9.0], &t, &s, &opts).unwrap();
    assert_eq!(sc.m2l_operators_reused, 0);
    let err9 = error(9.0, &t, &s, &c);
    assert!(err9 < 3e-4, "lambda 9 after lambda 4: {err9:e}");

    // Another root cube (the same points scaled): none kept either.
    let scaled = |p: &Particles<f64>| -> Vec<[f64; 3]> {
        (0..p.len())
            .map(|i| p.position(i).map(|x| 2.0 * x))
            .collect()
    };
    let t2 = Particles::targets::<Yukawa>(&scaled(&t)).unwrap();
    let mut s2 = Particles::sources::<Yukawa>(&scaled(&s)).unwrap();
    s2.set("q", &s.slots()[0]).unwrap();
    let (d, sd) = fmm_cpu::<Yukawa, f64>(&[9.0], &t2, &s2, &opts).unwrap();
    assert_eq!(sd.m2l_operators_reused, 0);
    let err2 = error(9.0, &t2, &s2, &d);
    assert!(err2 < 3e-4, "scaled cube: {err2:e}");

    // Two geometries are kept (a tolerance met on its second run uses two
    // orders): lambda 9 in the first cube is still there; lambda 4, the
    // least recently used of three, is not.
    let (_, sc2) = fmm_cpu::<Yukawa, f64>(&[9.0], &t, &s, &opts).unwrap();
    assert_eq!(sc2.m2l_operators_reused, sc2.m2l_operators);
    let (_, sa2) = fmm_cpu::<Yukawa, f64>(&[4.0], &t, &s, &opts).unwrap();
    assert_eq!(
        sa2.m2l_operators_reused, 0,
        "the least recently used, dropped"
    );

    println!("errors: lambda 4 {err:.2e}, lambda 9 {err9:.2e}, scaled {err2:.2e}");
    // A looser rank tolerance: fewer singular values, a larger but
    // bounded error; out-of-range tolerances refused by name.
    let loose = FmmOptions {
        rank_tolerance: Some(1e-2),
        ..opts.clone()
    };
    let (e, se) = fmm_cpu::<Yukawa, f64>(&[4.0], &t, &s, &loose).unwrap();
    assert_eq!(
        se.m2l_operators_reused, 0,
        "another tolerance, other operators"
    );
    let err_loose = error(4.0, &t, &s, &e);
    println!("errors: default rank {err:.2e}, rank tolerance 1e-2 {err_loose:.2e}");
    assert!(
        err_loose > err && err_loose < 1e-2,
        "{err_loose:e} against {err:e}"
    );
    for bad in [0.0, 1e-9, 1.0, -1e-4, f64::NAN] {
        let opts = FmmOptions {
            rank_tolerance: Some(bad),
            ..opts.clone()
        };
        match fmm_cpu::<Yukawa, f64>(&[4.0], &t, &s, &opts) {
            Err(Error::BadOption(m)) => assert!(m.contains("rank tolerance"), "{m}"),
            other => panic!("rank tolerance {bad}: {:?}", other.map(|_| ())),
        }
    }
}
