//! Every built-in kernel against an independent f64 reference.
//!
//! The references (`fmm_tests::naive`, shared with the conformance matrix
//! of `conformance.rs`) are written from the formulas of
//! `shared/KERNELS.md`, not from the `kernel!` declarations, and by a
//! different route where one exists:
//!
//! - gravity sums `m_j (x_j - x_i) (r^2 + eps^2)^(-3/2)` with `powf`;
//!   Coulomb and Hu's law take `r` from `hypot`;
//! - the Gaussian core of Biot-Savart and stretching never calls `erf`:
//!   `g(rho) / rho^3` and its derivative are summed from series of positive
//!   terms (no cancellation near `rho = 0`, where the closed form loses
//!   digits), and for `rho >= 6` from our own `erfc` continued fraction;
//! - every sum is compensated (Neumaier), so the reference is accurate to a
//!   few ulps whatever the order of the terms.
//!
//! The reference itself is checked against constants from mpmath (40
//! digits) and by finite differences. Then: the f64 and f32 direct sums
//! against the reference, finite differences tying outputs to each other
//! (`acc = -grad phi`, `e = -grad phi`, stretching = `(alpha_i . grad) u`),
//! the fused kernel against its parts, closed forms, momentum conservation,
//! and coincident particles.

use fmm_core::fmm_codegen::ast::Shape;
use fmm_core::kernels::*;
use fmm_core::{Kernel, Real};
use fmm_tests::direct_cpu;
use fmm_tests::naive::*;
use fmm_tests::rel_l2;
use fmm_tests::sets::{build, r32};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::f64::consts::PI;

// ---------------------------------------------------------------------------
// Random problems and the kernels' outputs.

// Values are rounded to f32 (`r32`), so that the f32 evaluation sees the
// very inputs of the f64 reference and only its arithmetic is measured.

fn points(rng: &mut StdRng, n: usize, lo: f64, hi: f64) -> Vec<V3> {
    (0..n)
        .map(|_| [(); 3].map(|_| r32(rng.gen_range(lo..hi))))
        .collect()
}

fn scalars(rng: &mut StdRng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| r32(rng.gen_range(lo..hi))).collect()
}

/// `m` targets and `n` sources in the unit cube, core radii 0.1 to 0.3 so
/// that many pairs are inside a core. With `same`, the targets are the
/// sources (`m` is ignored). `alpha_i` is drawn independently of `alpha`
/// even then, so that an r = 0 pair would show in stretching.
fn case(seed: u64, m: usize, n: usize, same: bool) -> Case {
    let mut rng = StdRng::seed_from_u64(seed);
    let spos = points(&mut rng, n, 0.0, 1.0);
    let tpos = if same {
        spos.clone()
    } else {
        points(&mut rng, m, 0.0, 1.0)
    };
    let m = tpos.len();
    Case {
        m: scalars(&mut rng, n, 0.1, 1.0),
        q: scalars(&mut rng, n, -1.0, 1.0),
        alpha: points(&mut rng, n, -1.0, 1.0),
        sigma: scalars(&mut rng, n, 0.1, 0.3),
        qv: points(&mut rng, n, -1.0, 1.0),
        alpha_i: points(&mut rng, m, -1.0, 1.0),
        tpos,
        spos,
    }
}

/// Every output of `direct_cpu::<K, R>`, in declaration order, as f64; a
/// vec3 output flattened target by target (`x0 y0 z0 x1 ...`).
fn direct<K: Kernel, R: Real>(params: &[f64], c: &Case) -> Vec<(String, Vec<f64>)> {
    let (tgt, src) = build::<K, R>(c);
    let out = direct_cpu::<K, R>(params, &tgt, &src).unwrap();
    assert_eq!(out.len(), c.tpos.len());
    K::def()
        .outputs
        .iter()
        .map(|f| {
            let v: Vec<f64> = match f.shape {
                Shape::Scalar => out
                    .scalar(&f.name)
                    .unwrap()
                    .iter()
                    .map(|x| x.to_f64())
                    .collect(),
                Shape::Vec3 => {
                    let v = out.vec3(&f.name).unwrap();
                    (0..out.len())
                        .flat_map(|i| [v[0][i], v[1][i], v[2][i]].map(R::to_f64))
                        .collect()
                }
            };
            (f.name.clone(), v)
        })
        .collect()
}

/// Output `name` of `direct_cpu::<K, f64>`.
fn output<K: Kernel>(params: &[f64], c: &Case, name: &str) -> Vec<f64> {
    direct::<K, f64>(params, c)
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{} has no output `{name}`", K::name()))
        .1
}

/// The problem shapes every kernel is checked on: `(label, seed, targets,
/// sources, same set)`.
const SHAPES: [(&str, u64, usize, usize, bool); 4] = [
    ("37 targets, 101 sources", 11, 37, 101, false),
    ("150 particles, own sources", 12, 0, 150, true),
    ("120 targets, 7 sources", 13, 120, 7, false),
    ("1 target, 300 sources", 14, 1, 300, false),
];

/// f64 to 1e-12 and f32 to `tol32` (relative L2 per output) against the
/// reference, on every shape of [`SHAPES`]. Returns the worst errors.
fn against_reference<K: Kernel>(
    params: &[f64],
    reference: impl Fn(&Case) -> Named,
    tol32: f64,
) -> (f64, f64) {
    let (mut worst64, mut worst32) = (0.0f64, 0.0f64);
    let mut failures = vec![];
    for (label, seed, m, n, same) in SHAPES {
        let c = case(seed, m, n, same);
        let want = reference(&c);
        let got64 = direct::<K, f64>(params, &c);
        let got32 = direct::<K, f32>(params, &c);
        let names = |v: &[(String, Vec<f64>)]| v.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        let want_names: Vec<String> = want.iter().map(|x| x.0.to_string()).collect();
        assert_eq!(names(&got64), want_names, "{}: outputs", K::name());
        for (((name, w), (_, g64)), (_, g32)) in want.iter().zip(&got64).zip(&got32) {
            assert!(
                w.iter().any(|x| *x != 0.0) && w.iter().all(|x| x.is_finite()),
                "{} {label}: reference `{name}` is zero or not finite",
                K::name()
            );
            let e64 = rel_l2(g64, w);
            let e32 = rel_l2(g32, w);
            println!(
                "{:<18} {label:<28} {name:<4} f64 {e64:.2e}  f32 {e32:.2e}",
                K::name()
            );
            worst64 = worst64.max(e64);
            worst32 = worst32.max(e32);
            // NaN fails both.
            if e64.is_nan() || e64 > 1e-12 {
                failures.push(format!("{label} `{name}` f64: {e64:e} > 1e-12"));
            }
            if e32.is_nan() || e32 > tol32 {
                failures.push(format!("{label} `{name}` f32: {e32:e} > {tol32:e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} against the reference:\n{}",
        K::name(),
        failures.join("\n")
    );
    (worst64, worst32)
}

// ---------------------------------------------------------------------------
// The reference itself.

#[test]
fn reference_erf_matches_mpmath() {
    // (x, erf x, erfc x), mpmath at 40 digits.
    let table = [
        (0.5, 0.520_499_877_813_046_5, 0.479_500_122_186_953_5),
        (1.0, 0.842_700_792_949_714_9, 0.157_299_207_050_285_13),
        (2.0, 0.995_322_265_018_952_7, 4.677_734_981_047_266e-3),
        (3.0, 0.999_977_909_503_001_4, 2.209_049_699_858_544e-5),
        (4.0, 0.999_999_984_582_742_1, 1.541_725_790_028_002e-8),
        (6.0, 1.0, 2.151_973_671_249_891_3e-17),
    ];
    for (x, erf, erfc) in table {
        let got = erf_ref(x);
        assert!(
            (got - erf).abs() <= 2e-16,
            "erf({x}) = {got:e}, want {erf:e}"
        );
        assert!((erf_ref(-x) + erf).abs() <= 2e-16, "erf(-{x})");
        if x >= 3.0 {
            let got = erfc_cf(x);
            assert!(
                (got - erfc).abs() <= 1e-14 * erfc,
                "erfc({x}) = {got:e}, want {erfc:e}"
            );
        }
    }
    // The two branches agree where they meet.
    let (a, b) = (erf_series(3.0), 1.0 - erfc_cf(3.0));
    assert!((a - b).abs() <= 2e-16, "series {a:e}, fraction {b:e}");
    assert_eq!(erf_ref(0.0), 0.0);
}

#[test]
fn reference_core_matches_mpmath_and_closed_form() {
    // (rho, h = g/rho^3, h'/rho), mpmath at 40 digits.
    let table = [
        (0.001, 0.265_961_440_479_179_95, -0.159_576_855_168_829_8),
        (0.05, 0.265_762_138_148_185_94, -0.159_434_502_011_922_6),
        (0.5, 0.246_876_766_269_813_84, -0.145_998_581_123_370_2),
        (1.0, 0.198_748_043_098_799_2, -0.112_302_680_258_110_9),
        (2.0, 0.092_316_983_756_361_17, -0.042_242_254_560_676_85),
        (5.0, 7.999_876_476_013_67e-3, -9.598_662_395_604_618e-4),
        (6.0, 4.629_629_282_945_511e-3, -3.858_021_026_964_121e-4),
        (8.0, 1.953_124_999_999_839_7e-3, -9.155_273_437_483_46e-5),
        (30.0, 3.703_703_703_703_703_7e-5, -1.234_567_901_234_568e-7),
    ];
    for (rho, h, dh) in table {
        let (gh, gdh) = core(rho);
        assert!(
            (gh - h).abs() <= 1e-15 * h.abs(),
            "h({rho}) = {gh:e}, want {h:e}"
        );
        assert!(
            (gdh - dh).abs() <= 1e-15 * dh.abs(),
            "h'/rho({rho}) = {gdh:e}, want {dh:e}"
        );
    }
    // Both branches, against the closed form through our erf where it does
    // not cancel, and continuity at rho = 6.
    for rho in [0.7, 1.3, 2.9, 4.4, 5.999_999, 6.0, 7.5, 12.0] {
        let g = erf_ref(rho / 2f64.sqrt()) - sqrt_2_pi() * rho * (-0.5 * rho * rho).exp();
        let h = core(rho).0;
        let want = g / rho.powi(3);
        assert!((h - want).abs() <= 4e-16 * want, "h({rho})");
    }
    // h'/rho by finite differences of h.
    for rho in [0.3, 1.0, 2.5, 5.9, 6.1, 9.0] {
        let dx = 1e-3;
        let f = |x: f64| core(x).0;
        let fd = (8.0 * (f(rho + dx) - f(rho - dx)) - (f(rho + 2.0 * dx) - f(rho - 2.0 * dx)))
            / (12.0 * dx);
        let want = core(rho).1 * rho;
        assert!(
            (fd - want).abs() <= 1e-9 * want.abs(),
            "h'({rho}): difference {fd:e}, series {want:e}"
        );
    }
}

// ---------------------------------------------------------------------------
// 1. The direct sums against the reference, in f64 and f32.

#[test]
fn gravity_against_reference() {
    let eps = 0.05;
    let (e64, e32) = against_reference::<Gravity>(&[eps], |c| ref_gravity(eps, c), 1e-5);
    println!("Gravity worst: f64 {e64:.2e}, f32 {e32:.2e}");
}

#[test]
fn coulomb_against_reference() {
    let (e64, e32) = against_reference::<Coulomb>(&[], ref_coulomb, 1e-5);
    println!("Coulomb worst: f64 {e64:.2e}, f32 {e32:.2e}");
}

#[test]
fn biot_savart_against_reference() {
    let (e64, e32) = against_reference::<BiotSavart>(&[], ref_biot_savart, 1e-5);
    println!("BiotSavart worst: f64 {e64:.2e}, f32 {e32:.2e}");
}

#[test]
fn stretching_against_reference() {
    let (e64, e32) = against_reference::<Stretching>(&[], ref_stretching, 1e-5);
    println!("Stretching worst: f64 {e64:.2e}, f32 {e32:.2e}");
}

#[test]
fn velocity_stretching_against_reference() {
    let (e64, e32) = against_reference::<VelocityStretching>(&[], ref_velocity_stretching, 1e-5);
    println!("VelocityStretching worst: f64 {e64:.2e}, f32 {e32:.2e}");
}

#[test]
fn hu_biot_savart_against_reference() {
    let eps = 0.2;
    let (e64, e32) = against_reference::<HuBiotSavart>(&[eps], |c| ref_hu(eps, c), 1e-5);
    println!("HuBiotSavart worst: f64 {e64:.2e}, f32 {e32:.2e}");
}

// ---------------------------------------------------------------------------
// 2. Finite differences.

/// Sources of `case(seed, ..)` and `m` targets at least `gap` from every
/// source, so that differences do not straddle a singularity.
fn separated_case(seed: u64, m: usize, n: usize, gap: f64) -> Case {
    let mut c = case(seed, 0, n, false);
    let mut rng = StdRng::seed_from_u64(seed + 1000);
    let mut tpos = vec![];
    while tpos.len() < m {
        let p = points(&mut rng, 1, 0.0, 1.0)[0];
        if c.spos.iter().all(|&s| norm(sub(p, s)) >= gap) {
            tpos.push(p);
        }
    }
    c.alpha_i = points(&mut rng, m, -1.0, 1.0);
    c.tpos = tpos;
    c
}

/// The derivative along unit vector `dir[i]` at every target of `c` of a
/// function of the target position (`f` maps target positions to values,
/// `width` values per target), by the five-point stencil, O(h^4).
fn directional_derivative(
    c: &Case,
    dir: &[V3],
    h: f64,
    width: usize,
    f: impl Fn(&Case) -> Vec<f64>,
) -> Vec<f64> {
    let steps = [2.0, 1.0, -1.0, -2.0];
    let mut moved = c.clone();
    moved.tpos = steps
        .iter()
        .flat_map(|&k| {
            c.tpos
                .iter()
                .zip(dir)
                .map(move |(&x, &e)| add(x, mul(k * h, e)))
        })
        .collect();
    moved.alpha_i = steps.iter().flat_map(|_| c.alpha_i.clone()).collect();
    let v = f(&moved);
    let m = c.tpos.len() * width;
    assert_eq!(v.len(), 4 * m);
    (0..m)
        .map(|k| (-v[k] + 8.0 * v[m + k] - 8.0 * v[2 * m + k] + v[3 * m + k]) / (12.0 * h))
        .collect()
}

/// `-grad phi` by finite differences, flattened like a vec3 output.
fn minus_gradient(c: &Case, h: f64, phi: impl Fn(&Case) -> Vec<f64>) -> Vec<f64> {
    let m = c.tpos.len();
    let axes: Vec<Vec<f64>> = (0..3)
        .map(|k| {
            let mut e = [0.0; 3];
            e[k] = 1.0;
            directional_derivative(c, &vec![e; m], h, 1, &phi)
        })
        .collect();
    (0..m)
        .flat_map(|i| [-axes[0][i], -axes[1][i], -axes[2][i]])
        .collect()
}

#[test]
fn gravity_acc_is_minus_gradient_of_phi() {
    let eps = 0.05;
    let c = separated_case(21, 16, 80, 0.05);
    let fd = minus_gradient(&c, 1e-4, |c| output::<Gravity>(&[eps], c, "phi"));
    let acc = output::<Gravity>(&[eps], &c, "acc");
    let err = rel_l2(&acc, &fd);
    println!("Gravity acc vs -grad phi: {err:.2e}");
    assert!(err <= 1e-9, "acc vs -grad phi: {err:e}");
    // The softening matters here: without it the field differs.
    let plain = minus_gradient(&c, 1e-4, |c| output::<Gravity>(&[0.0], c, "phi"));
    assert!(rel_l2(&plain, &fd) > 1e-4);
}

#[test]
fn coulomb_field_is_minus_gradient_of_phi() {
    let c = separated_case(22, 16, 80, 0.05);
    let fd = minus_gradient(&c, 1e-4, |c| output::<Coulomb>(&[], c, "phi"));
    let e = output::<Coulomb>(&[], &c, "e");
    let err = rel_l2(&e, &fd);
    println!("Coulomb e vs -grad phi: {err:.2e}");
    assert!(err <= 1e-9, "e vs -grad phi: {err:e}");
}

/// `(alpha_i . grad) u(x_i)` by finite differences of `u` along
/// `alpha_i / |alpha_i|`, times `|alpha_i|`.
fn stretching_by_differences(c: &Case, u: impl Fn(&Case) -> Vec<f64>) -> Vec<f64> {
    let dir: Vec<V3> = c.alpha_i.iter().map(|&a| mul(1.0 / norm(a), a)).collect();
    let du = directional_derivative(c, &dir, 1e-4, 3, u);
    unflat(&du)
        .iter()
        .zip(&c.alpha_i)
        .flat_map(|(&d, &a)| mul(norm(a), d))
        .collect()
}

#[test]
fn stretching_is_alpha_i_dot_grad_of_biot_savart_velocity() {
    // Sources with cores 0.1 to 0.3: most targets sit inside some core.
    let c = separated_case(23, 24, 60, 0.02);
    let fd = stretching_by_differences(&c, |c| output::<BiotSavart>(&[], c, "u"));
    let s = output::<Stretching>(&[], &c, "s");
    let err = rel_l2(&s, &fd);
    println!("Stretching s vs (alpha_i . grad) BiotSavart u: {err:.2e}");
    assert!(err <= 1e-9, "stretching vs differences of u: {err:e}");
    // The same tie inside the reference, which is written separately.
    let fd_ref = stretching_by_differences(&c, |c| flat(&ref_vortex(c).0));
    let err_ref = rel_l2(&flat(&ref_vortex(&c).1), &fd_ref);
    assert!(err_ref <= 1e-9, "reference: {err_ref:e}");
    // And the fused kernel's s against differences of its own u.
    let fd_fused = stretching_by_differences(&c, |c| output::<VelocityStretching>(&[], c, "u"));
    let s_fused = output::<VelocityStretching>(&[], &c, "s");
    let err_fused = rel_l2(&s_fused, &fd_fused);
    assert!(err_fused <= 1e-9, "fused: {err_fused:e}");
}

// ---------------------------------------------------------------------------
// 3. The fused kernel against its parts.

#[test]
fn velocity_stretching_is_biot_savart_and_stretching() {
    for (label, seed, m, n, same) in SHAPES {
        let c = case(seed, m, n, same);
        let u = output::<BiotSavart>(&[], &c, "u");
        let s = output::<Stretching>(&[], &c, "s");
        let fu = output::<VelocityStretching>(&[], &c, "u");
        let fs = output::<VelocityStretching>(&[], &c, "s");
        let (eu, es) = (rel_l2(&fu, &u), rel_l2(&fs, &s));
        println!("VelocityStretching vs parts, {label}: u {eu:.2e}, s {es:.2e}");
        assert!(eu <= 1e-14, "{label}: u {eu:e}");
        assert!(es <= 1e-14, "{label}: s {es:e}");
        // Also in f32, against the f32 parts.
        let u32 = &direct::<BiotSavart, f32>(&[], &c)[0].1;
        let s32 = &direct::<Stretching, f32>(&[], &c)[0].1;
        let f32s = direct::<VelocityStretching, f32>(&[], &c);
        assert!(rel_l2(&f32s[0].1, u32) <= 1e-6, "{label}: f32 u");
        assert!(rel_l2(&f32s[1].1, s32) <= 1e-6, "{label}: f32 s");
    }
}

// ---------------------------------------------------------------------------
// 4. Closed forms, limits and symmetry.

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want.abs().max(f64::MIN_POSITIVE)
}

fn assert_v3_close(got: V3, want: V3, tol: f64, what: &str) {
    let err = norm(sub(got, want)) / norm(want);
    assert!(
        err <= tol,
        "{what}: got {got:?}, want {want:?} (relative {err:e})"
    );
}

/// `Case` with explicit targets and sources, other fields filled in by
/// the caller.
fn manual(tpos: Vec<V3>, spos: Vec<V3>) -> Case {
    let (m, n) = (tpos.len(), spos.len());
    Case {
        tpos,
        spos,
        m: vec![0.0; n],
        q: vec![0.0; n],
        alpha: vec![[0.0; 3]; n],
        sigma: vec![1.0; n],
        qv: vec![[0.0; 3]; n],
        alpha_i: vec![[0.0; 3]; m],
    }
}

#[test]
fn gravity_two_bodies() {
    // Separation (1, 2, 2), r = 3, eps = 4: r^2 + eps^2 = 25.
    let x1 = [0.25, -0.5, 1.0];
    let x2 = [1.25, 1.5, 3.0];
    let mut c = manual(vec![x1, x2], vec![x1, x2]);
    c.m = vec![3.0, 5.0];
    let out = direct::<Gravity, f64>(&[4.0], &c);
    let (phi, acc) = (&out[0].1, unflat(&out[1].1));
    assert!(close(phi[0], -1.0, 1e-15), "phi_1 = {}", phi[0]);
    assert!(close(phi[1], -0.6, 1e-15), "phi_2 = {}", phi[1]);
    assert_v3_close(acc[0], [0.04, 0.08, 0.08], 1e-15, "acc_1");
    assert_v3_close(acc[1], [-0.024, -0.048, -0.048], 1e-15, "acc_2");
    // Without softening: -m/3 and m d / 27.
    let out = direct::<Gravity, f64>(&[0.0], &c);
    assert!(close(out[0].1[0], -5.0 / 3.0, 1e-15));
    assert_v3_close(
        unflat(&out[1].1)[0],
        mul(5.0 / 27.0, [1.0, 2.0, 2.0]),
        1e-15,
        "acc_1, eps = 0",
    );
    // f32 as well.
    let out = direct::<Gravity, f32>(&[4.0], &c);
    assert!(close(out[0].1[0], -1.0, 1e-6));
    assert_v3_close(unflat(&out[1].1)[0], [0.04, 0.08, 0.08], 1e-6, "f32 acc_1");
}

#[test]
fn coulomb_single_charge() {
    // d = (2, 3, 6), r = 7.
    let mut c = manual(vec![[3.0, 4.0, 7.0]], vec![[1.0, 1.0, 1.0]]);
    c.q = vec![2.0];
    let out = direct::<Coulomb, f64>(&[], &c);
    assert!(
        close(out[0].1[0], 2.0 / 7.0, 1e-15),
        "phi = {}",
        out[0].1[0]
    );
    assert_v3_close(
        unflat(&out[1].1)[0],
        mul(2.0 / 343.0, [2.0, 3.0, 6.0]),
        1e-15,
        "e",
    );
    // A negative charge pulls: the field points at it.
    c.q = vec![-1.0];
    let e = unflat(&output::<Coulomb>(&[], &c, "e"))[0];
    assert!(dot(e, [2.0, 3.0, 6.0]) < 0.0);
}

#[test]
fn hu_biot_savart_inside_and_outside_the_smoothing_radius() {
    let eps = 0.5;
    let x = [0.5, 0.25, -1.0];
    let q = [0.3, -0.2, 0.7];
    // (offset from the source, expected weight of q x d)
    let cases: [(V3, f64); 5] = [
        // Inside: r = 0.375, weight 1 / (eps^2 r).
        ([0.125, 0.25, 0.25], 1.0 / (0.25 * 0.375)),
        // Inside, r = 0.1.
        ([0.0, -0.1, 0.0], 1.0 / (0.25 * 0.1)),
        // On the radius: both forms give 1 / eps^3.
        ([0.0, 0.0, 0.5], 8.0),
        // Outside: r = 3, weight 1 / r^3.
        ([1.0, 2.0, 2.0], 1.0 / 27.0),
        // Just outside.
        ([-0.5, 0.0, 0.001], 1.0 / (0.25 + 1e-6f64).powf(1.5)),
    ];
    let tpos: Vec<V3> = cases.iter().map(|(d, _)| add(x, *d)).collect();
    let mut c = manual(tpos, vec![x]);
    c.qv = vec![q];
    let v = unflat(&output::<HuBiotSavart>(&[eps], &c, "v"));
    for ((d, w), got) in cases.iter().zip(&v) {
        // The offsets are recovered exactly only for the dyadic ones.
        let d_exact = sub(add(x, *d), x);
        assert_v3_close(
            *got,
            mul(*w, cross(q, d_exact)),
            1e-14,
            &format!("d = {d:?}"),
        );
    }
}

#[test]
fn hu_biot_savart_without_smoothing_is_the_singular_law() {
    // eps = 0: K = 1 for every r > 0, the plain law q x d / r^3.
    let c = case(51, 37, 101, false);
    let v = output::<HuBiotSavart>(&[0.0], &c, "v");
    let err = rel_l2(&v, &ref_hu(0.0, &c).remove(0).1);
    assert!(err <= 1e-12, "distinct sets: {err:e}");
    // A set that is its own sources: the self pairs must still add zero
    // (KERNELS.md: 0 at r = 0, without NaN).
    let c = case(52, 0, 60, true);
    for (label, v) in [
        ("f64", output::<HuBiotSavart>(&[0.0], &c, "v")),
        ("f32", direct::<HuBiotSavart, f32>(&[0.0], &c).remove(0).1),
    ] {
        let bad = v.iter().filter(|x| !x.is_finite()).count();
        assert!(
            bad == 0,
            "HuBiotSavart, eps = 0, own sources, {label}: {bad} of {} outputs not finite",
            v.len()
        );
        let err = rel_l2(&v, &ref_hu(0.0, &c).remove(0).1);
        assert!(err <= 1e-5, "own sources, {label}: {err:e}");
    }
    on_spot_is_zero::<HuBiotSavart>(&[0.0]);
}

#[test]
fn biot_savart_far_from_the_core_is_the_singular_law() {
    let sigma = 0.01;
    let x = [0.5, 0.5, 0.5];
    let a = [0.3, -0.2, 0.7];
    let offsets = [[0.5, 1.0, 1.0], [-1.0, 0.0, 0.0], [0.2, -0.3, 0.1]];
    let tpos: Vec<V3> = offsets.iter().map(|&d| add(x, d)).collect();
    let mut c = manual(tpos.clone(), vec![x]);
    c.alpha = vec![a];
    c.sigma = vec![sigma];
    let u = unflat(&output::<BiotSavart>(&[], &c, "u"));
    for (t, got) in tpos.iter().zip(&u) {
        let d = sub(*t, x);
        let r = norm(d);
        assert!(r / sigma > 30.0);
        let want = mul(1.0 / (4.0 * PI * r.powi(3)), cross(a, d));
        assert_v3_close(*got, want, 1e-14, &format!("r = {r}"));
    }
}

#[test]
fn biot_savart_and_stretching_at_known_core_values() {
    // (rho, h = g/rho^3, h'/rho), mpmath at 40 digits: not our series.
    let table = [
        (1.0, 0.198_748_043_098_799_2, -0.112_302_680_258_110_9),
        (2.0, 0.092_316_983_756_361_17, -0.042_242_254_560_676_85),
        (5.0, 7.999_876_476_013_67e-3, -9.598_662_395_604_618e-4),
    ];
    let sigma = 0.25;
    let x = [0.5, 0.25, -0.75];
    let a = [0.3, -0.2, 0.7];
    let ai = [-0.4, 0.9, 0.1];
    let dir = mul(1.0 / 3.0, [1.0, 2.0, 2.0]);
    let tpos: Vec<V3> = table
        .iter()
        .map(|&(rho, _, _)| add(x, mul(rho * sigma, dir)))
        .collect();
    let mut c = manual(tpos.clone(), vec![x]);
    c.alpha = vec![a];
    c.sigma = vec![sigma];
    c.alpha_i = vec![ai; tpos.len()];
    let u = unflat(&output::<BiotSavart>(&[], &c, "u"));
    let s = unflat(&output::<Stretching>(&[], &c, "s"));
    let s3 = sigma.powi(3);
    for (((rho, h, dh), t), (gu, gs)) in table.iter().zip(&tpos).zip(u.iter().zip(&s)) {
        let d = sub(*t, x);
        // Rounding of the positions moves r by ~1e-16: h'/h ~ 1 here.
        let r_rho = norm(d) / sigma;
        assert!((r_rho - rho).abs() < 1e-14);
        let k = h / (4.0 * PI * s3);
        let dk = dh / (4.0 * PI * s3 * sigma * sigma);
        assert_v3_close(*gu, mul(k, cross(a, d)), 1e-13, &format!("u, rho = {rho}"));
        let want_s = add(mul(k, cross(a, ai)), mul(dk * dot(ai, d), cross(a, d)));
        assert_v3_close(*gs, want_s, 1e-13, &format!("s, rho = {rho}"));
    }
}

#[test]
fn biot_savart_deep_in_the_core_is_solid_body_rotation() {
    // g(rho) / rho^3 -> sqrt(2/pi) / 3 as rho -> 0, correction -0.3 rho^2.
    let sigma = 0.2;
    let x = [0.5, 0.5, 0.5];
    let a = [0.3, -0.2, 0.7];
    let d = [2e-4 / 3.0, 4e-4 / 3.0, 4e-4 / 3.0]; // r = 2e-4, rho = 1e-3
    let mut c = manual(vec![add(x, d)], vec![x]);
    c.alpha = vec![a];
    c.sigma = vec![sigma];
    let u = unflat(&output::<BiotSavart>(&[], &c, "u"))[0];
    let d = sub(add(x, d), x);
    let want = mul(sqrt_2_pi() / 3.0 / (4.0 * PI * sigma.powi(3)), cross(a, d));
    assert_v3_close(u, want, 1e-6, "u at rho = 1e-3");
}

#[test]
fn gravity_and_coulomb_conserve_momentum() {
    for (seed, n) in [(31, 200), (32, 17)] {
        let c = case(seed, 0, n, true);
        for eps in [0.0, 0.05, 0.3] {
            let acc = unflat(&output::<Gravity>(&[eps], &c, "acc"));
            let (mut p, mut scale) = (Acc3::default(), 0.0);
            for (&m, &a) in c.m.iter().zip(&acc) {
                p.add(mul(m, a));
                scale += m * norm(a);
            }
            let p = norm(p.get());
            println!(
                "Gravity n = {n}, eps = {eps}: |sum m a| / sum |m a| = {:.2e}",
                p / scale
            );
            assert!(
                p <= 1e-14 * scale,
                "gravity n = {n}, eps = {eps}: {p:e} of {scale:e}"
            );
        }
        let e = unflat(&output::<Coulomb>(&[], &c, "e"));
        let (mut f, mut scale) = (Acc3::default(), 0.0);
        for (&q, &ei) in c.q.iter().zip(&e) {
            f.add(mul(q, ei));
            scale += (q * norm(ei)).abs();
        }
        let f = norm(f.get());
        assert!(f <= 1e-14 * scale, "coulomb n = {n}: {f:e} of {scale:e}");
    }
}

// ---------------------------------------------------------------------------
// 5. Coincident particles.

fn on_spot_is_zero<K: Kernel>(params: &[f64]) {
    let mut c = case(41, 1, 1, true);
    c.alpha_i = vec![[0.9, -0.4, 0.2]]; // not parallel to alpha
    for out in [direct::<K, f64>(params, &c), direct::<K, f32>(params, &c)] {
        for (name, v) in out {
            assert!(
                v.iter().all(|&x| x == 0.0),
                "{}: `{name}` of a source on the target is {v:?}",
                K::name()
            );
        }
    }
}

#[test]
fn a_source_on_the_target_adds_exactly_zero() {
    on_spot_is_zero::<Gravity>(&[0.05]);
    on_spot_is_zero::<Gravity>(&[0.0]);
    on_spot_is_zero::<Coulomb>(&[]);
    on_spot_is_zero::<BiotSavart>(&[]);
    on_spot_is_zero::<Stretching>(&[]);
    on_spot_is_zero::<VelocityStretching>(&[]);
    on_spot_is_zero::<HuBiotSavart>(&[0.2]);
}

/// Two distinct particles on one spot, in a set that is its own sources:
/// the outputs are finite, match the reference (which drops r = 0 pairs),
/// and at the shared spot equal those of a set without either copy.
fn coincident<K: Kernel>(params: &[f64], reference: impl Fn(&Case) -> Named) {
    let mut c = case(42, 0, 40, true);
    // Particle 40 sits on particle 0, with fields of its own.
    let mut rng = StdRng::seed_from_u64(43);
    let dup = case(44, 0, 1, true);
    c.spos.push(c.spos[0]);
    c.tpos.push(c.spos[0]);
    c.m.push(dup.m[0]);
    c.q.push(dup.q[0]);
    c.alpha.push(dup.alpha[0]);
    c.sigma.push(dup.sigma[0]);
    c.qv.push(dup.qv[0]);
    c.alpha_i.push(points(&mut rng, 1, -1.0, 1.0)[0]);

    let got = direct::<K, f64>(params, &c);
    let want = reference(&c);
    for ((name, g), (_, w)) in got.iter().zip(&want) {
        assert!(g.iter().all(|x| x.is_finite()), "{}: `{name}`", K::name());
        let err = rel_l2(g, w);
        assert!(err <= 1e-12, "{} `{name}`: {err:e}", K::name());
    }
    for (name, g) in direct::<K, f32>(params, &c) {
        assert!(
            g.iter().all(|x| x.is_finite()),
            "{} f32 `{name}`",
            K::name()
        );
    }

    // At the spot, both copies see only the other 39 particles.
    let mut rest = c.clone();
    rest.spos = c.spos[1..40].to_vec();
    rest.m = c.m[1..40].to_vec();
    rest.q = c.q[1..40].to_vec();
    rest.alpha = c.alpha[1..40].to_vec();
    rest.sigma = c.sigma[1..40].to_vec();
    rest.qv = c.qv[1..40].to_vec();
    for i in [0, 40] {
        rest.tpos = vec![c.tpos[i]];
        rest.alpha_i = vec![c.alpha_i[i]];
        let without = direct::<K, f64>(params, &rest);
        for ((name, g), (_, w)) in got.iter().zip(&without) {
            let width = w.len();
            let gi = &g[i * width..(i + 1) * width];
            let err = rel_l2(gi, w);
            assert!(err <= 1e-13, "{} `{name}` at copy {i}: {err:e}", K::name());
        }
    }
}

#[test]
fn coincident_particles_do_not_interact() {
    coincident::<Gravity>(&[0.05], |c| ref_gravity(0.05, c));
    coincident::<Coulomb>(&[], ref_coulomb);
    coincident::<BiotSavart>(&[], ref_biot_savart);
    coincident::<Stretching>(&[], ref_stretching);
    coincident::<VelocityStretching>(&[], ref_velocity_stretching);
    coincident::<HuBiotSavart>(&[0.2], |c| ref_hu(0.2, c));
}
