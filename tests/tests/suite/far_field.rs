//! The far fields of the tree methods (issue 14): the kernel-independent
//! one (Chebyshev nodes) and pseudo-particles converge with their order
//! against the f64 direct sum, softened gravity reaches a tolerance the
//! Laplace expansions cannot, the treecode's nodes beat its monopole, and
//! a far field a kernel cannot use, or an order past the largest shipped,
//! is refused by name. Every method x kernel x precision row is in the
//! conformance matrix (`conformance.rs`); the operators' own tests (against
//! direct evaluation of what they represent) are unit tests of
//! `fmm_core::far`.

use fmm_core::kernels::*;
use fmm_core::{Error, FarField, FmmOptions, Kernel, Method, NodeM2l, Particles, TreeOptions};
use fmm_tests::sets::{set, Dist, Spec, Strengths};
use fmm_tests::user::Yukawa;
use fmm_tests::{direct_cpu, fmm_cpu, rel_l2, sets, treecode_cpu};

fn error_of<K: Kernel>(
    params: &[f64],
    t: &Particles<f64>,
    s: &Particles<f64>,
    got: &fmm_core::Outputs<f64>,
) -> f64 {
    let exact = direct_cpu::<K, f64>(params, t, s).unwrap();
    rel_l2(&got.slots().concat(), &exact.slots().concat())
}

fn fmm_error<K: Kernel>(
    params: &[f64],
    t: &Particles<f64>,
    s: &Particles<f64>,
    far_field: FarField,
    p: usize,
    theta: f64,
) -> f64 {
    let opts = FmmOptions {
        ncrit: 64,
        ..FmmOptions::fixed(p, theta).with_far_field(far_field)
    };
    let (got, stats) = fmm_cpu::<K, f64>(params, t, s, &opts).unwrap();
    assert!(stats.m2l > 0, "the far field was used");
    error_of::<K>(params, t, s, &got)
}

/// The error falls with the order for both node far fields, for a kernel
/// of each kind: softened gravity (softening a whole mean spacing, which
/// Laplace expansions cannot follow) and Yukawa by Chebyshev nodes,
/// Biot-Savart by pseudo-particles.
#[test]
fn node_far_fields_converge_with_the_order() {
    let spec = Spec::new(Dist::Cube, 3000, Strengths::RandomSign, 5);
    let eps = sets::mean_spacing(Dist::Cube, 3000);
    type Case<'a> = (&'a str, Box<dyn Fn(usize) -> f64 + 'a>, &'a [usize], f64);
    let cases: [Case; 3] = [
        (
            "softened gravity, ki",
            Box::new(|p| {
                let (t, s) = set::<Gravity, f64>(&spec);
                fmm_error::<Gravity>(&[eps], &t, &s, FarField::KernelIndependent, p, 0.7)
            }),
            &[1, 2, 4, 6],
            1e-6,
        ),
        (
            "yukawa, ki",
            Box::new(|p| {
                let (t, s) = set::<Yukawa, f64>(&spec);
                fmm_error::<Yukawa>(&[4.0], &t, &s, FarField::KernelIndependent, p, 0.7)
            }),
            &[1, 2, 4, 6],
            1e-6,
        ),
        (
            "biot-savart, ppm",
            Box::new(|p| {
                let (t, s) = set::<BiotSavart, f64>(&Spec {
                    sigma: 0.05 * eps,
                    ..spec
                });
                fmm_error::<BiotSavart>(&[], &t, &s, FarField::Ppm, p, 0.6)
            }),
            &[2, 4, 6, 8],
            1e-6,
        ),
    ];
    for (name, run, orders, floor) in cases {
        let errs: Vec<f64> = orders.iter().map(|&p| run(p)).collect();
        println!("{name}: orders {orders:?} -> {errs:?}");
        for w in errs.windows(2) {
            assert!(w[1] < 0.5 * w[0], "{name}: {errs:?} does not fall");
        }
        assert!(errs[errs.len() - 1] < floor, "{name}: {errs:?}");
    }
}

/// Softened gravity at eps = half the mean spacing (the benchmarks'
/// default): the Laplace expansions drop the softening and are said to
/// stall; the declaration's Laplace far field asked for explicitly is
/// refused quickly at 1e-6, and the kernel-independent one meets it.
#[test]
fn softened_gravity_meets_1e_6_with_the_kernel_independent_far_field() {
    let n = 4000;
    let (t, s) = set::<Gravity, f64>(&Spec::new(Dist::Cube, n, Strengths::Coherent, 7));
    let eps = 0.5 * sets::mean_spacing(Dist::Cube, n);
    let laplace = FmmOptions::tolerance(1e-6).with_far_field(FarField::Laplace);
    match fmm_cpu::<Gravity, f64>(&[eps], &t, &s, &laplace) {
        Err(Error::ToleranceNotMet { tried, .. }) => assert!(tried.len() <= 4, "{tried:?}"),
        other => panic!("the Laplace far field must stall: {:?}", other.map(|x| x.1)),
    }
    let ki = FmmOptions::tolerance(1e-6).with_far_field(FarField::KernelIndependent);
    let ev = fmm_core::evaluate::<Gravity, f64>(
        fmm_core::Backend::Cpu,
        &Method::Fmm(ki),
        &[eps][..],
        &t,
        &s,
    )
    .unwrap();
    let a = ev.achieved.expect("a tolerance run says what it achieved");
    let e = error_of::<Gravity>(&[eps], &t, &s, &ev.outputs);
    println!("ki at 1e-6: {a:?}, whole error {e:.2e}");
    assert!(a.estimated_error <= 1e-6 && e < 3e-6, "{a:?}, {e:e}");
}

/// The treecode's Chebyshev nodes against its monopole, for a kernel
/// outside the Laplace family: far more accurate at the same theta.
#[test]
fn the_treecode_with_nodes_beats_its_monopole() {
    let (t, s) = set::<Yukawa, f64>(&Spec::new(Dist::Plummer, 3000, Strengths::Coherent, 9));
    let err = |far_field, order| {
        let opts = TreeOptions {
            theta: 0.5,
            far_field,
            order,
            ..TreeOptions::default()
        };
        let (got, stats) = treecode_cpu::<Yukawa, f64>(&[4.0], &t, &s, &opts).unwrap();
        assert!(stats.p2c > 0);
        error_of::<Yukawa>(&[4.0], &t, &s, &got)
    };
    let mono = err(FarField::Monopole, 1);
    let nodes: Vec<f64> = [2, 4]
        .iter()
        .map(|&p| err(FarField::KernelIndependent, p))
        .collect();
    println!("monopole {mono:.2e}, ki order 2 and 4 {nodes:?}");
    assert!(nodes[0] < mono / 10.0 && nodes[1] < nodes[0] / 10.0);
}

/// A far field a kernel cannot use, and orders past the shipped ones, are
/// refused before any work, naming why and what to use.
#[test]
fn unusable_far_fields_are_refused_by_name() {
    let (t, s) = set::<Yukawa, f64>(&Spec::new(Dist::Cube, 200, Strengths::Coherent, 3));
    let fmm = |far_field, p| {
        fmm_cpu::<Yukawa, f64>(
            &[4.0],
            &t,
            &s,
            &FmmOptions::fixed(p, 0.5).with_far_field(far_field),
        )
        .map(|_| ())
    };
    for (far_field, word) in [
        (FarField::Ppm, "harmonic"),
        (FarField::Laplace, "far_field laplace"),
        (FarField::Monopole, "treecode"),
    ] {
        match fmm(far_field, 4) {
            Err(Error::FarFieldUnusable { kernel, why, .. }) => {
                assert_eq!(kernel, "Yukawa");
                assert!(why.contains(word), "{why}");
                assert!(
                    why.contains("ki") || far_field == FarField::Monopole,
                    "{why}"
                );
            }
            other => panic!("{far_field:?}: {other:?}"),
        }
    }
    let (gt, gs) = set::<Gravity, f64>(&Spec::new(Dist::Cube, 200, Strengths::Coherent, 3));
    let gravity = |far_field, p| {
        fmm_cpu::<Gravity, f64>(
            &[0.0],
            &gt,
            &gs,
            &FmmOptions::fixed(p, 0.5).with_far_field(far_field),
        )
        .map(|_| ())
    };
    match gravity(FarField::Ppm, 11) {
        Err(Error::BadOption(m)) => assert!(m.contains("216") && m.contains("10"), "{m}"),
        other => panic!("{other:?}"),
    }
    match gravity(FarField::KernelIndependent, 13) {
        Err(Error::BadOption(m)) => assert!(m.contains("12"), "{m}"),
        other => panic!("{other:?}"),
    }
    let laplace_tree = TreeOptions {
        far_field: FarField::Laplace,
        ..TreeOptions::default()
    };
    match treecode_cpu::<Gravity, f64>(&[0.0], &gt, &gs, &laplace_tree) {
        Err(Error::FarFieldUnusable { why, .. }) => assert!(why.contains("monopole"), "{why}"),
        other => panic!("{:?}", other.map(|x| x.1)),
    }
}

/// M2L by compressed operators (the CPU's default for the node far fields)
/// against M2L by the kernel between node sets: at the sources (one tree,
/// the same lists) the same sums to well within the far field's own error,
/// for a scalar kernel, vector strengths, outputs that depend on the
/// target's own fields, and pseudo-particles; with targets apart (the
/// compressed M2L builds both trees in one root cube, M2L by the kernel
/// each in its own, so the lists differ) an error as small. A core radius
/// that varies between cells keeps M2L by the kernel (an operator per
/// offset would not be one). Homogeneous kernels (Coulomb, the singular
/// Stokeslet) take one set of operators scaled to every level. Biot-Savart
/// at uniform cores and the Stokeslet with targets apart run in
/// [`compressed_m2l_matches_m2l_for_every_kernel`] (`--ignored`): the
/// Stokeslet's rows here take the symmetric kernels' way.
#[test]
fn compressed_m2l_matches_m2l_by_the_kernel() {
    compressed_against_kernel(false);
}

/// [`compressed_m2l_matches_m2l_by_the_kernel`] with every row:
/// `cargo test --release -p fmm-tests --test suite
/// compressed_m2l_matches_m2l_for_every_kernel -- --ignored --nocapture`.
#[test]
#[ignore = "the full matrix: `cargo test --release -p fmm-tests --test suite -- --ignored far_field::compressed_m2l_matches_m2l_for_every_kernel` (docs/TESTS.md); CI runs a representative part"]
fn compressed_m2l_matches_m2l_for_every_kernel() {
    compressed_against_kernel(true);
}

/// The rows of [`compressed_m2l_matches_m2l_by_the_kernel`]; `every`
/// adds those whose way another row takes.
fn compressed_against_kernel(every: bool) {
    /// Both runs: their difference, their errors, the pairs by operators
    /// and whether the lists were the same.
    fn both<K: Kernel>(
        params: &[f64],
        t: &Particles<f64>,
        s: &Particles<f64>,
        far_field: FarField,
        p: usize,
    ) -> (f64, f64, f64, u64, bool) {
        let opts = |node_m2l| FmmOptions {
            ncrit: 64,
            node_m2l,
            ..FmmOptions::fixed(p, 0.7).with_far_field(far_field)
        };
        let (a, sa) = fmm_cpu::<K, f64>(params, t, s, &opts(NodeM2l::Compressed)).unwrap();
        let (b, sb) = fmm_cpu::<K, f64>(params, t, s, &opts(NodeM2l::Kernel)).unwrap();
        assert_eq!(sb.m2l_compressed, 0);
        let diff = rel_l2(&a.slots().concat(), &b.slots().concat());
        // One direct sum for both errors.
        let exact = direct_cpu::<K, f64>(params, t, s).unwrap().slots().concat();
        (
            diff,
            rel_l2(&b.slots().concat(), &exact),
            rel_l2(&a.slots().concat(), &exact),
            sa.m2l_compressed,
            (sa.m2l, sa.p2p) == (sb.m2l, sb.p2p),
        )
    }
    let n = 6000;
    let spec = Spec::new(Dist::Cube, n, Strengths::RandomSign, 11);
    let h = sets::mean_spacing(Dist::Cube, n);
    let (t, s) = set::<Yukawa, f64>(&spec);
    let yukawa = both::<Yukawa>(&[4.0], &t, &s, FarField::KernelIndependent, 4);
    let (t, s) = set::<Stokeslet, f64>(&spec);
    let stokeslet = both::<Stokeslet>(&[h, 1.0], &t, &s, FarField::KernelIndependent, 3);
    let (t, s) = set::<Stretching, f64>(&Spec {
        sigma: 2.0 * h,
        ..spec
    });
    let stretching = both::<Stretching>(&[], &t, &s, FarField::KernelIndependent, 2);
    let (t, s) = set::<Coulomb, f64>(&spec);
    let ppm = both::<Coulomb>(&[], &t, &s, FarField::Ppm, 4);
    // Homogeneous kernels: one set of operators scaled to every level.
    let coulomb = both::<Coulomb>(&[], &t, &s, FarField::KernelIndependent, 4);
    let (t, s) = set::<StokesletSingular, f64>(&spec);
    let singular = both::<StokesletSingular>(&[], &t, &s, FarField::KernelIndependent, 3);
    // Symmetric with a uniform core radius: one basis for both sides.
    let (t, s) = set::<BiotSavart, f64>(&Spec {
        sigma: 2.0 * h,
        ..spec
    });
    let biot_savart =
        every.then(|| both::<BiotSavart>(&[], &t, &s, FarField::KernelIndependent, 3));
    let rows = [
        ("yukawa ki 4", Some(yukawa)),
        ("stokeslet ki 3 (symmetric)", Some(stokeslet)),
        ("biot-savart ki 3 (symmetric)", biot_savart),
        ("stretching ki 2", Some(stretching)),
        ("coulomb ppm 4", Some(ppm)),
        ("coulomb ki 4 (homogeneous)", Some(coulomb)),
        (
            "singular stokeslet ki 3 (homogeneous, symmetric)",
            Some(singular),
        ),
    ];
    for (name, (diff, err, err_c, compressed, same)) in rows
        .into_iter()
        .filter_map(|(name, row)| Some((name, row?)))
    {
        println!(
            "{name}: compressed vs kernel {diff:.2e}, errors {err:.2e} and {err_c:.2e}, \
             {compressed} by operators"
        );
        assert!(same, "{name}: the same lists");
        assert!(compressed > 0, "{name}: the compressed M2L ran");
        assert!(
            diff < 0.2 * err,
            "{name}: {diff:e} against an error of {err:e}"
        );
    }

    // Targets apart from the sources: more of them, so that offsets recur;
    // the union cube makes other trees (errors within 2x either way).
    let apart = Spec {
        targets: sets::Targets::Apart(12000),
        ..Spec::new(Dist::Cube, 12000, Strengths::RandomSign, 12)
    };
    let (t, s) = set::<Yukawa, f64>(&apart);
    let (_, err, err_c, compressed, _) =
        both::<Yukawa>(&[4.0], &t, &s, FarField::KernelIndependent, 2);
    println!(
        "yukawa ki 2, targets apart: errors {err:.2e} and {err_c:.2e}, {compressed} by operators"
    );
    assert!(
        compressed > 0 && err_c < 1.5 * err,
        "{err_c:e} against {err:e}"
    );
    // A symmetric kernel's keys are not each other's partners there.
    if every {
        let (t, s) = set::<Stokeslet, f64>(&apart);
        let h = sets::mean_spacing(Dist::Cube, 12000);
        let (_, err, err_c, compressed, _) =
            both::<Stokeslet>(&[h, 1.0], &t, &s, FarField::KernelIndependent, 3);
        println!(
            "stokeslet ki 3, targets apart: errors {err:.2e} and {err_c:.2e}, {compressed} by operators"
        );
        assert!(
            compressed > 0 && err_c < 1.5 * err,
            "{err_c:e} against {err:e}"
        );
    }

    // Core radii that differ between cells: M2L by the kernel throughout
    // (p 2: uniform cores take the operators there, the stretching's row).
    let (t, mut s) = set::<BiotSavart, f64>(&Spec {
        sigma: 2.0 * h,
        ..spec
    });
    let radii: Vec<f64> = (0..s.len())
        .map(|i| h * (1.5 + (i % 7) as f64 / 7.0))
        .collect();
    s.set("sigma", &radii).unwrap();
    let (diff, _, _, compressed, _) =
        both::<BiotSavart>(&[], &t, &s, FarField::KernelIndependent, 2);
    assert_eq!((diff, compressed), (0.0, 0));
}
