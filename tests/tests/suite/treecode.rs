//! The treecode's error falls with theta (for gravity, and for a kernel
//! with a strength and no far field), a kernel without a strength and a
//! bad theta are refused, and the octree's invariants hold (property
//! tests). Its accuracy for every kernel, in f32 and f64, against the f64
//! direct sum (theta 0 included), and degenerate and clustered inputs, are
//! rows of the conformance matrix (`conformance.rs`).

use fmm_core::kernels::*;
use fmm_core::tree::Octree;
use fmm_core::{kernel, Error, Particles, TreeOptions};
use fmm_tests::rel_l2;
use fmm_tests::sets::{set, Dist, Spec, Strengths};
use fmm_tests::{direct_cpu, treecode_cpu};
use proptest::prelude::*;

/// Relative L2 error of the acceleration, treecode against direct, on
/// masses of one sign at `dist`.
fn gravity_error(dist: Dist, n: usize, seed: u64, theta: f64, eps: f64) -> f64 {
    let (t, s) = set::<Gravity, f64>(&Spec::new(dist, n, Strengths::Coherent, seed));
    let exact = direct_cpu::<Gravity, f64>(&[eps], &t, &s).unwrap();
    let (tree, _) = treecode_cpu::<Gravity, f64>(
        &[eps],
        &t,
        &s,
        &TreeOptions {
            theta,
            ncrit: 16,
            group: 0,
            ..TreeOptions::default()
        },
    )
    .unwrap();
    let flat = |o: &fmm_core::Outputs<f64>| o.vec3("acc").unwrap().concat();
    rel_l2(&flat(&tree), &flat(&exact))
}

#[test]
fn error_falls_with_theta_on_a_cube_and_a_plummer_sphere() {
    for (name, dist, seed) in [("cube", Dist::Cube, 2), ("plummer", Dist::Plummer, 3)] {
        let errs: Vec<f64> = [0.9, 0.7, 0.5, 0.3]
            .iter()
            .map(|&th| gravity_error(dist, 4000, seed, th, 0.001))
            .collect();
        println!("{name}: theta 0.9 0.7 0.5 0.3 -> {errs:?}");
        for w in errs.windows(2) {
            assert!(w[1] < w[0], "{name}: error must fall with theta: {errs:?}");
        }
        assert!(errs[2] < 5e-3, "{name}: theta 0.5 gives {:e}", errs[2]);
    }
}

kernel! {
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
    let pos = fmm_tests::sets::positions(Dist::Cube, 10, 5);
    let s = Particles::<f64>::sources::<Screened>(&pos).unwrap();
    let t = Particles::<f64>::targets::<Screened>(&pos).unwrap();
    let e = treecode_cpu::<Screened, f64>(&[1.0], &t, &s, &TreeOptions::default()).unwrap_err();
    assert!(matches!(e, Error::NoStrength { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("kernel Screened declares no strength"),
        "{e}"
    );
    let (t, s) = set::<Gravity, f64>(&Spec::new(Dist::Cube, 10, Strengths::Coherent, 5));
    let e = treecode_cpu::<Gravity, f64>(
        &[0.1],
        &t,
        &s,
        &TreeOptions {
            theta: f64::NAN,
            ncrit: 8,
            group: 0,
            ..TreeOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("theta"), "{e}");
}

fn points() -> impl Strategy<Value = Vec<[f64; 3]>> {
    let p = [0.0..1.0f64, 0.0..1.0f64, 0.0..1.0f64];
    // Some duplicates and some tight clusters too.
    prop::collection::vec(
        prop_oneof![4 => p.clone(), 1 => Just([0.5, 0.5, 0.5]), 1 => p.prop_map(|x| x.map(|c| 0.5 + 1e-9 * c))],
        1..600,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn octree_invariants(pts in points(), ncrit in 1usize..40) {
        let cols: [Vec<f64>; 3] = [0, 1, 2].map(|c| pts.iter().map(|p| p[c]).collect());
        let t = Octree::build([&cols[0], &cols[1], &cols[2]], ncrit);
        let n = pts.len();
        // The order is a permutation.
        let mut seen = vec![false; n];
        for &i in &t.order { prop_assert!(!seen[i as usize]); seen[i as usize] = true; }
        // Leaves partition the particles: every particle in exactly one leaf.
        let mut next = 0;
        for (_, leaf) in t.leaves() {
            prop_assert_eq!(leaf.begin, next);
            prop_assert!(leaf.len() <= ncrit || leaf.level == fmm_core::tree::morton::MAX_LEVEL);
            next = leaf.end;
        }
        prop_assert_eq!(next, n);
        for (ci, c) in t.cells.iter().enumerate() {
            // Cells contain their particles (up to rounding of the box).
            for k in c.begin..c.end {
                let p = pts[t.order[k] as usize];
                for a in 0..3 {
                    prop_assert!((p[a] - c.center[a]).abs() <= c.half * (1.0 + 1e-9) + 1e-12, "cell {} particle {:?}", ci, p);
                }
            }
            // Children split the parent's range in order.
            if !c.is_leaf() {
                let kids = t.children(ci);
                prop_assert_eq!(kids.len(), c.n_children as usize);
                prop_assert_eq!(t.cells[kids[0]].begin, c.begin);
                prop_assert_eq!(t.cells[*kids.last().unwrap()].end, c.end);
                for w in kids.windows(2) { prop_assert_eq!(t.cells[w[0]].end, t.cells[w[1]].begin); }
            }
        }
        // Following `more` everywhere visits every cell once, in order;
        // following `next` from the root ends the walk at once.
        let mut visited = Vec::new();
        let mut c = 0;
        while c < t.cells.len() { visited.push(c); c = t.cells[c].more; }
        prop_assert_eq!(visited, (0..t.cells.len()).collect::<Vec<_>>());
        prop_assert_eq!(t.cells[0].next, t.cells.len());
    }
}

use fmm_tests::user::Yukawa;

/// The treecode needs only a strength that adds up, not a far field: a
/// kernel with `strength q;` and none runs, is the direct sum at theta 0,
/// and approaches it as theta falls.
#[test]
fn a_kernel_with_a_strength_and_no_far_field_runs_through_the_tree() {
    let (t, s) = set::<Yukawa, f64>(&Spec::new(Dist::Cube, 3000, Strengths::Coherent, 7));
    let kappa = [2.0];
    let exact = direct_cpu::<Yukawa, f64>(&kappa, &t, &s).unwrap();
    let flat = |o: &fmm_core::Outputs<f64>| {
        let mut v = o.scalar("phi").unwrap().to_vec();
        v.extend(o.vec3("e").unwrap().concat());
        v
    };
    let errs: Vec<f64> = [0.9, 0.7, 0.5, 0.3, 0.0]
        .iter()
        .map(|&theta| {
            let opts = TreeOptions {
                theta,
                ncrit: 16,
                ..TreeOptions::default()
            };
            let (tree, _) = treecode_cpu::<Yukawa, f64>(&kappa, &t, &s, &opts).unwrap();
            rel_l2(&flat(&tree), &flat(&exact))
        })
        .collect();
    println!("Yukawa: theta 0.9 0.7 0.5 0.3 0 -> {errs:?}");
    for w in errs.windows(2) {
        assert!(w[1] < w[0], "the error must fall with theta: {errs:?}");
    }
    assert!(errs[3] < 1e-3, "theta 0.3 gives {:e}", errs[3]);
    assert!(errs[4] < 1e-13, "theta 0 gives {:e}", errs[4]);
}
