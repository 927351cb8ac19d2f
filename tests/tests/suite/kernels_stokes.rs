//! The Stokes and screened Coulomb built-ins (`Stokeslet`,
//! `StokesletSingular`, `Yukawa`): the direct sum on the CPU, through the
//! front door, against independent naive f64 loops written another way
//! (the Stokeslets as the explicit 3x3 tensor applied to the force, the
//! Yukawa field by central differences of the naive potential), closed
//! forms (FMM3D's normalisation of the singular Stokeslet, the blob's own
//! velocity), the limits (eps -> 0 far from the sources, lambda = 0), and
//! the errors of invalid parameters.

use fmm_core::fmm_codegen::ast::Shape;
use fmm_core::kernels::{Coulomb, Stokeslet, StokesletSingular, Yukawa};
use fmm_core::{Error, Kernel, Real};
use fmm_tests::naive::*;
use fmm_tests::rel_l2;
use fmm_tests::sets::{self, build, case_at, Dist, Strengths};
use fmm_tests::{direct_cpu, user};
use std::f64::consts::PI;

// ---------------------------------------------------------------------------
// Problems and outputs.

/// `n` sources in the unit cube with forces and charges of random sign,
/// and targets: the sources themselves (`m = None`) or `m` other points of
/// the cube. Every value rounded to f32, so f32 and f64 see one problem.
fn cube(seed: u64, m: Option<usize>, n: usize) -> Case {
    let spos = sets::positions(Dist::Cube, n, seed);
    let tpos = match m {
        None => spos.clone(),
        Some(m) => sets::positions(Dist::Cube, m, seed + 1),
    };
    case_at(spos, tpos, Strengths::RandomSign, 1.0, seed)
}

/// The shapes every kernel is checked on: own sources, targets apart, one
/// target and many sources, and particles twice on one spot (pairs at
/// r = 0 between distinct particles add nothing).
fn shapes() -> Vec<(&'static str, Case)> {
    let mut twins = cube(34, None, 150);
    twins.spos = twins.spos.iter().flat_map(|&p| [p, p]).collect();
    twins.tpos = twins.spos.clone();
    twins.q = twins.q.iter().flat_map(|&q| [q, -0.5 * q]).collect();
    twins.qv = twins.qv.iter().flat_map(|&f| [f, mul(0.25, f)]).collect();
    vec![
        ("300 particles, own sources", cube(31, None, 300)),
        ("200 targets, 250 sources", cube(32, Some(200), 250)),
        ("1 target, 400 sources", cube(33, Some(1), 400)),
        ("150 twins, own sources", twins),
    ]
}

/// Output `name` of the CPU direct sum of `K` in `R`, as f64 (a vec3
/// flattened target by target, as the naive loops give it).
fn output<K: Kernel, R: Real>(params: &[f64], c: &Case, name: &str) -> Vec<f64> {
    let (t, s) = build::<K, R>(c);
    let out = direct_cpu::<K, R>(params, &t, &s).unwrap();
    assert_eq!(out.len(), c.tpos.len());
    let shape = K::def()
        .outputs
        .iter()
        .find(|f| f.name == name)
        .unwrap()
        .shape;
    match shape {
        Shape::Scalar => out
            .scalar(name)
            .unwrap()
            .iter()
            .map(|x| x.to_f64())
            .collect(),
        Shape::Vec3 => {
            let v = out.vec3(name).unwrap();
            (0..out.len())
                .flat_map(|i| [v[0][i], v[1][i], v[2][i]].map(R::to_f64))
                .collect()
        }
    }
}

/// The one named output of a naive loop.
fn naive_output(named: Named, name: &str) -> Vec<f64> {
    named.into_iter().find(|(n, _)| *n == name).unwrap().1
}

/// Output `name` of `K` in f64 and f32 against `want` on case `c`: f64
/// within 1e-13, f32 within 1e-5 (relative L2); failures are collected.
fn compare<K: Kernel>(
    params: &[f64],
    c: &Case,
    name: &str,
    want: &[f64],
    label: &str,
    failures: &mut Vec<String>,
) {
    assert!(
        want.iter().all(|x| x.is_finite()) && want.iter().any(|x| *x != 0.0),
        "{label}: the naive `{name}` is zero or not finite"
    );
    let e64 = rel_l2(&output::<K, f64>(params, c, name), want);
    let e32 = rel_l2(&output::<K, f32>(params, c, name), want);
    println!(
        "{:<18} {params:?} {label:<28} {name:<3} f64 {e64:.2e}  f32 {e32:.2e}",
        K::name()
    );
    // NaN fails both.
    if e64.is_nan() || e64 > 1e-13 {
        failures.push(format!("{label} {params:?} `{name}` f64: {e64:e}"));
    }
    if e32.is_nan() || e32 > 1e-5 {
        failures.push(format!("{label} {params:?} `{name}` f32: {e32:e}"));
    }
}

/// `|a - b| / |b|` of two vectors.
fn rel3(a: V3, b: V3) -> f64 {
    norm(sub(a, b)) / norm(b)
}

// ---------------------------------------------------------------------------
// Stokeslets.

#[test]
fn stokeslet_against_the_explicit_tensor() {
    let mut failures = vec![];
    for (label, c) in shapes() {
        for (eps, mu) in [(0.0, 1.0), (0.02, 1.0), (0.3, 0.7), (1.5, 2.5)] {
            let want = naive_output(ref_stokeslet(eps, mu, &c), "u");
            compare::<Stokeslet>(&[eps, mu], &c, "u", &want, label, &mut failures);
        }
    }
    assert!(failures.is_empty(), "Stokeslet:\n{}", failures.join("\n"));
}

#[test]
fn stokeslet_singular_against_the_oseen_tensor() {
    let mut failures = vec![];
    for (label, c) in shapes() {
        let want = naive_output(ref_stokeslet_singular(&c), "u");
        compare::<StokesletSingular>(&[], &c, "u", &want, label, &mut failures);
        // The regularised one at eps = 0 and mu = 1 is the same sum.
        let reg = output::<Stokeslet, f64>(&[0.0, 1.0], &c, "u");
        let sing = output::<StokesletSingular, f64>(&[], &c, "u");
        let e = rel_l2(&reg, &sing);
        if e > 1e-14 {
            failures.push(format!(
                "{label}: Stokeslet(0, 1) {e:e} off StokesletSingular"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "StokesletSingular:\n{}",
        failures.join("\n")
    );
}

/// One force `f = (1, 2, 3)` at the origin, one target at `d = (3, 4, 0)`
/// (r = 5): `f / r + (f . d) d / r^3 = (0.464, 0.752, 0.6)`. FMM3D 2.1's
/// stfmm3d gives that over 8 pi (ours); FMM3D up to 2.0 gave it over 2,
/// 4 pi times more.
#[test]
fn stokeslet_singular_has_fmm3d_normalisation() {
    let c = case_at(
        vec![[0.0; 3]],
        vec![[3.0, 4.0, 0.0]],
        Strengths::RandomSign,
        1.0,
        0,
    );
    let c = Case {
        qv: vec![[1.0, 2.0, 3.0]],
        ..c
    };
    let bracket = [0.464, 0.752, 0.6];
    let u = output::<StokesletSingular, f64>(&[], &c, "u");
    let u = [u[0], u[1], u[2]];
    let want = mul(1.0 / (8.0 * PI), bracket);
    assert!(rel3(u, want) < 1e-15, "{u:?} vs {want:?}");
    let fmm3d_v2_0 = mul(0.5, bracket);
    assert!(rel3(mul(4.0 * PI, u), fmm3d_v2_0) < 1e-15);
    // Viscosity mu divides the regularised one's velocity.
    let u2 = output::<Stokeslet, f64>(&[0.0, 2.5], &c, "u");
    assert!(rel3([u2[0], u2[1], u2[2]], mul(1.0 / 2.5, u)) < 1e-15);
}

/// Far from the sources the regularised Stokeslet tends to the singular one
/// as eps^2 / r^2: `(r^2 + 2 eps^2) / (r^2 + eps^2)^(3/2) = (1 + eps^2 /
/// (2 r^2) + ...) / r` and `1 / (r^2 + eps^2)^(3/2) = (1 - 3 eps^2 /
/// (2 r^2) + ...) / r^3`.
#[test]
fn stokeslet_tends_to_the_singular_one_as_eps_falls() {
    let mut c = cube(41, Some(60), 500);
    // Targets in [3, 4]^3: at least 2 sqrt(3) from every source.
    c.tpos = c
        .tpos
        .iter()
        .map(|p| p.map(|x| sets::r32(3.0 + x)))
        .collect();
    let dmin = 2.0 * 3f64.sqrt();
    let sing = output::<StokesletSingular, f64>(&[], &c, "u");
    let mu = 0.8;
    let sing_mu: Vec<f64> = sing.iter().map(|x| x / mu).collect();
    let mut diffs = vec![];
    for eps in [0.1, 0.01, 0.001] {
        let reg = output::<Stokeslet, f64>(&[eps, mu], &c, "u");
        let e = rel_l2(&reg, &sing_mu);
        println!("eps {eps}: {e:.3e} off the singular Stokeslet / mu");
        assert!(
            e > 0.0 && e <= 2.0 * eps * eps / (dmin * dmin),
            "eps {eps}: {e:e}"
        );
        diffs.push(e);
    }
    for w in diffs.windows(2) {
        let ratio = w[0] / w[1];
        assert!((80.0..125.0).contains(&ratio), "{diffs:?}: ratio {ratio}");
    }
}

/// The self term is excluded: a target on its source gets nothing, and the
/// blob's own velocity `f / (4 pi mu eps)` (what the doc tells users to add)
/// is the kernel's limit at r -> 0.
#[test]
fn stokeslet_self_term_is_excluded_and_is_the_blob_velocity() {
    let (eps, mu) = (0.2, 0.6);
    let f = [0.3, -1.0, 0.7];
    let x = [0.25, 0.5, 0.75];
    let c = case_at(
        vec![x],
        vec![x, add(x, [1e-7, -2e-7, 1e-7])],
        Strengths::RandomSign,
        1.0,
        0,
    );
    let c = Case { qv: vec![f], ..c };
    let u = output::<Stokeslet, f64>(&[eps, mu], &c, "u");
    assert_eq!(&u[..3], &[0.0; 3]);
    let blob = mul(1.0 / (4.0 * PI * mu * eps), f);
    let near = [u[3], u[4], u[5]];
    assert!(rel3(near, blob) < 1e-9, "{near:?} vs {blob:?}");
    // And the singular ones give nothing on the spot either.
    let u = output::<StokesletSingular, f64>(&[], &c, "u");
    assert_eq!(&u[..3], &[0.0; 3]);
    let u = output::<Stokeslet, f32>(&[0.0, 1.0], &c, "u");
    assert_eq!(&u[..3], &[0.0; 3]);
}

// ---------------------------------------------------------------------------
// Yukawa.

#[test]
fn yukawa_against_the_naive_loop() {
    let mut failures = vec![];
    for (label, c) in shapes() {
        for lambda in [0.0, 2.0, 10.0] {
            let want = ref_yukawa(lambda, &c);
            for name in ["phi", "e"] {
                let w = naive_output(want.clone(), name);
                compare::<Yukawa>(&[lambda], &c, name, &w, label, &mut failures);
            }
        }
    }
    assert!(failures.is_empty(), "Yukawa:\n{}", failures.join("\n"));
}

/// The naive potential of the Yukawa kernel at points `x`: `sum_j q_j
/// exp(-lambda r) / r` with `r` from `hypot`, compensated.
fn yukawa_phi_at(lambda: f64, c: &Case, x: &[V3]) -> Vec<f64> {
    x.iter()
        .map(|&xi| {
            let mut p = Acc::default();
            for (&xj, &qj) in c.spos.iter().zip(&c.q) {
                let r = norm(sub(xi, xj));
                p.add(qj * (-lambda * r).exp() / r);
            }
            p.get()
        })
        .collect()
}

/// `e = -grad phi`: the kernel's field against central differences (step
/// h, O(h^2)) of the naive potential, at targets at least 0.05 from every
/// source.
#[test]
fn yukawa_field_is_minus_gradient_of_the_naive_potential() {
    let mut c = cube(51, Some(400), 200);
    c.tpos
        .retain(|&p| c.spos.iter().all(|&s| norm(sub(p, s)) >= 0.05));
    assert!(c.tpos.len() >= 20, "{} targets", c.tpos.len());
    let h = 1e-5;
    for lambda in [0.0, 3.0] {
        let mut fd = vec![];
        for &x in &c.tpos {
            let mut g = [0.0; 3];
            for (k, gk) in g.iter_mut().enumerate() {
                let mut e = [0.0; 3];
                e[k] = h;
                let v = yukawa_phi_at(lambda, &c, &[add(x, e), sub(x, e)]);
                *gk = -(v[0] - v[1]) / (2.0 * h);
            }
            fd.extend(g);
        }
        let e = output::<Yukawa, f64>(&[lambda], &c, "e");
        let err = rel_l2(&e, &fd);
        println!("Yukawa lambda {lambda}: e vs -grad phi by differences {err:.2e}");
        assert!(err < 1e-7, "lambda {lambda}: {err:e}");
    }
}

#[test]
fn yukawa_at_lambda_zero_is_coulomb_and_matches_the_user_kernel() {
    let c = cube(61, None, 300);
    for name in ["phi", "e"] {
        let y = output::<Yukawa, f64>(&[0.0], &c, name);
        let q = output::<Coulomb, f64>(&[], &c, name);
        let e = rel_l2(&y, &q);
        assert!(e < 1e-15, "`{name}`: {e:e} off Coulomb");
        // The user kernel of the tests (screening `kappa`) is the same sum.
        let b = output::<Yukawa, f64>(&[2.5], &c, name);
        let u = output::<user::Yukawa, f64>(&[2.5], &c, name);
        let e = rel_l2(&b, &u);
        assert!(e < 1e-14, "`{name}`: {e:e} off the user kernel");
    }
}

// ---------------------------------------------------------------------------
// Invalid parameters.

fn param_error<K: Kernel>(params: &[f64]) -> Error {
    let c = cube(71, None, 5);
    let (t, s) = build::<K, f64>(&c);
    direct_cpu::<K, f64>(params, &t, &s).unwrap_err()
}

#[test]
fn invalid_parameters_are_errors_naming_the_requirement() {
    let cases: [(Error, &str); 6] = [
        (
            param_error::<Stokeslet>(&[-0.1, 1.0]),
            "kernel Stokeslet requires `eps >= 0.0`, but the parameters are eps = -0.1, mu = 1",
        ),
        (
            param_error::<Stokeslet>(&[0.1, 0.0]),
            "kernel Stokeslet requires `mu > 0.0`, but the parameters are eps = 0.1, mu = 0",
        ),
        (
            param_error::<Stokeslet>(&[0.1, -2.0]),
            "kernel Stokeslet requires `mu > 0.0`, but the parameters are eps = 0.1, mu = -2",
        ),
        (
            param_error::<Yukawa>(&[-1.0]),
            "kernel Yukawa requires `lambda >= 0.0`, but the parameters are lambda = -1",
        ),
        (
            param_error::<Stokeslet>(&[0.1]),
            "kernel Stokeslet takes 2 parameter value(s) (eps, mu), but 1 were given",
        ),
        (
            param_error::<StokesletSingular>(&[1.0]),
            "kernel StokesletSingular takes 0 parameter value(s) (), but 1 were given",
        ),
    ];
    for (e, want) in cases {
        assert!(
            matches!(e, Error::Requirement { .. } | Error::Params { .. }),
            "{e:?}"
        );
        assert_eq!(e.to_string(), want);
    }
    // The edges are allowed: eps = 0 (singular), lambda = 0 (Coulomb).
    let c = cube(71, None, 5);
    let (t, s) = build::<Stokeslet, f64>(&c);
    assert!(direct_cpu::<Stokeslet, f64>(&[0.0, 1e-3], &t, &s).is_ok());
    let (t, s) = build::<Yukawa, f64>(&c);
    assert!(direct_cpu::<Yukawa, f64>(&[0.0], &t, &s).is_ok());
}
