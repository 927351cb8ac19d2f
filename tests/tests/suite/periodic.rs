//! Periodic boxes: the Ewald sum against crystal lattices whose Madelung
//! constants are known to many digits and against itself at another
//! splitting; the FMM's images against the Ewald sum (potential and field,
//! tin foil and vacuum, scalar and vortex strengths); invariance under
//! moving the box or a particle by a lattice vector; bad boxes and
//! methods that do not run in one named.

use fmm_core::kernels::{Coulomb, VelocityStretching};
use fmm_core::reference::ewald::{ewald_with, Ewald};
use fmm_core::{
    evaluate, Backend, Boundary, Domain, Error, Kernel, Method, Particles, PeriodicBox, Problem,
    TreeOptions,
};
use fmm_tests::{fmm_options, rel_l2};

pub(crate) fn coulomb(pos: &[[f64; 3]], q: &[f64]) -> (Particles<f64>, Particles<f64>) {
    let mut s = Particles::sources::<Coulomb>(pos).unwrap();
    s.set("q", q).unwrap();
    (Particles::targets::<Coulomb>(pos).unwrap(), s)
}

/// Kernel `K` by `method` on the CPU in `pbox`: every output slot.
fn run<K: Kernel>(
    method: &Method,
    params: &[f64],
    pbox: PeriodicBox,
    t: &Particles<f64>,
    s: &Particles<f64>,
) -> Result<Vec<Vec<f64>>, Error> {
    let problem = Problem::new(params).in_domain(Domain::Periodic(pbox));
    let ev = evaluate::<K, f64>(Backend::Cpu, method, problem, t, s)?;
    Ok(ev.outputs.slots().to_vec())
}

/// The potential and the field of Coulomb charges.
fn phi_e(out: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
    (out[0].clone(), out[1..4].concat())
}

/// `n` points uniform in the box at `origin` of `side`.
pub(crate) fn points(n: usize, seed: u64, origin: [f64; 3], side: f64) -> Vec<[f64; 3]> {
    fmm_core::distributions::uniform_cube(n, seed)
        .into_iter()
        .map(|p| [0, 1, 2].map(|a| origin[a] + side * p[a]))
        .collect()
}

/// `n` values in `[-1, 1)` summing to zero (to rounding).
pub(crate) fn zero_mean(n: usize, seed: u64) -> Vec<f64> {
    let mut q: Vec<f64> = (0..n)
        .map(|i| ((i as u64 * 2_654_435_761 + seed * 97) % 1000) as f64 / 500.0 - 1.0)
        .collect();
    let mean = q.iter().sum::<f64>() / n as f64;
    q.iter_mut().for_each(|x| *x -= mean);
    q
}

const FMM_TIGHT: (usize, f64) = (20, 0.4);

fn fmm_tight() -> Method {
    Method::Fmm(fmm_options(FMM_TIGHT.0, FMM_TIGHT.1, 32))
}

/// Rock salt (Na and Cl on alternate sites of a simple cubic lattice of
/// spacing 1/2 in a cube of side 1) and caesium chloride (Cs at the corner,
/// Cl at the centre): the potential at every ion is `-M / r0` times its
/// sign, `M` the Madelung constant (1.747564594633182 and
/// 1.762674773070990, Zucker 1975 / OEIS A085469 and A181152), `r0` the
/// nearest distance. By the Ewald sum and by the FMM, with the box's origin
/// off the lattice so that the ions are wrapped.
#[test]
fn madelung_constants_of_rock_salt_and_caesium_chloride() {
    let nacl_sites: Vec<([f64; 3], f64)> = (0..8)
        .map(|i| {
            let x = [i & 1, (i >> 1) & 1, (i >> 2) & 1].map(|b| 0.5 * b as f64);
            let sign = if (i & 1) ^ ((i >> 1) & 1) ^ ((i >> 2) & 1) == 0 {
                1.0
            } else {
                -1.0
            };
            (x, sign)
        })
        .collect();
    let cscl_sites = vec![([0.0; 3], 1.0), ([0.5; 3], -1.0)];
    let sqrt3_2 = 3f64.sqrt() / 2.0;
    for (name, sites, m, r0) in [
        ("NaCl", nacl_sites, 1.747_564_594_633_182, 0.5),
        ("CsCl", cscl_sites, 1.762_674_773_070_99, sqrt3_2),
    ] {
        let pos: Vec<[f64; 3]> = sites.iter().map(|s| s.0).collect();
        let q: Vec<f64> = sites.iter().map(|s| s.1).collect();
        let (t, s) = coulomb(&pos, &q);
        let pbox = PeriodicBox::cube([-0.3, -0.1, -0.45], 1.0);
        for (method, tol) in [(Method::direct(), 1e-12), (fmm_tight(), 1e-9)] {
            let (phi, _) = phi_e(&run::<Coulomb>(&method, &[], pbox, &t, &s).unwrap());
            for (i, (&p, &qi)) in phi.iter().zip(&q).enumerate() {
                let want = -qi * m / r0;
                assert!(
                    (p - want).abs() < tol * want.abs(),
                    "{name} {method:?} ion {i}: {p} against {want}"
                );
            }
        }
    }
}

/// The Ewald sum does not depend on its splitting: two splitting
/// parameters a factor 1.6 apart give the same potentials, fields and
/// stretching to 1e-12 (each part alone changes by orders more).
#[test]
fn the_ewald_sum_is_the_same_at_another_splitting() {
    let n = 300;
    let pos = points(n, 5, [0.0; 3], 2.0);
    let pbox = PeriodicBox::cube([0.0; 3], 2.0);
    let (t, s) = coulomb(&pos, &zero_mean(n, 5));
    let idx: Vec<usize> = (0..n).collect();
    let at = |a: f64| {
        let e = Ewald::with_alpha(a / 2.0, 2.0);
        ewald_with::<Coulomb, f64>(&[], &pbox, e, &t, &idx, &s)
            .unwrap()
            .concat()
    };
    let (a, b) = (at(4.0), at(6.4));
    assert!(rel_l2(&a, &b) < 1e-12, "{:e}", rel_l2(&a, &b));
    // Vortex strengths and the stretching's second derivatives.
    let (vt, vs) = vortices(n, 6, 0.02, &pbox);
    let at = |a: f64| {
        let e = Ewald::with_alpha(a / 2.0, 2.0);
        ewald_with::<VelocityStretching, f64>(&[], &pbox, e, &vt, &idx, &vs)
            .unwrap()
            .concat()
    };
    let (a, b) = (at(5.0), at(8.0));
    assert!(rel_l2(&a, &b) < 1e-11, "{:e}", rel_l2(&a, &b));
}

/// Vortex particles of core `sigma` in `pbox` with zero-mean strengths
/// (the lattice sum of a vorticity with a mean diverges).
pub(crate) fn vortices(
    n: usize,
    seed: u64,
    sigma: f64,
    pbox: &PeriodicBox,
) -> (Particles<f64>, Particles<f64>) {
    let pos = points(n, seed, pbox.origin, pbox.side);
    let comps: Vec<Vec<f64>> = (0..3).map(|c| zero_mean(n, seed * 7 + c)).collect();
    let alpha: Vec<[f64; 3]> = (0..n)
        .map(|i| [comps[0][i], comps[1][i], comps[2][i]])
        .collect();
    let mut s = Particles::sources::<VelocityStretching>(&pos).unwrap();
    s.set_vec3("alpha", &alpha).unwrap();
    s.set("sigma", &vec![sigma; n]).unwrap();
    let mut t = Particles::targets::<VelocityStretching>(&pos).unwrap();
    t.set_vec3("alpha_i", &alpha).unwrap();
    (t, s)
}

/// The FMM's images against the Ewald sum, 1e-8 relative in f64 at order
/// 20: Coulomb potential and field with tin foil and vacuum at infinity
/// (the vacuum's surface term is `(4 pi / 3V) D . x` in the potential), and
/// velocity + stretching of zero-mean vortex strengths with Gaussian cores.
#[test]
fn the_fmm_matches_the_ewald_sum_to_1e_8() {
    let n = 1500;
    let pbox = PeriodicBox::cube([0.0; 3], 1.0);
    let (t, s) = coulomb(&points(n, 3, [0.0; 3], 1.0), &zero_mean(n, 3));
    for boundary in [Boundary::TinFoil, Boundary::Vacuum] {
        let b = pbox.with_boundary(boundary);
        let (phi0, e0) = phi_e(&run::<Coulomb>(&Method::direct(), &[], b, &t, &s).unwrap());
        let (phi, e) = phi_e(&run::<Coulomb>(&fmm_tight(), &[], b, &t, &s).unwrap());
        let (ep, ee) = (rel_l2(&phi, &phi0), rel_l2(&e, &e0));
        println!("Coulomb {boundary:?}: phi {ep:.2e}, e {ee:.2e}");
        assert!(ep < 1e-8 && ee < 1e-8, "{boundary:?}: phi {ep:e}, e {ee:e}");
    }
    let b = PeriodicBox::cube([-1.0, 0.0, 0.5], 2.0);
    let (vt, vs) = vortices(n, 4, 0.02, &b);
    let want = run::<VelocityStretching>(&Method::direct(), &[], b, &vt, &vs).unwrap();
    let got = run::<VelocityStretching>(&fmm_tight(), &[], b, &vt, &vs).unwrap();
    let (eu, es) = (
        rel_l2(&got[0..3].concat(), &want[0..3].concat()),
        rel_l2(&got[3..6].concat(), &want[3..6].concat()),
    );
    println!("velocity + stretching: u {eu:.2e}, s {es:.2e}");
    assert!(eu < 1e-8 && es < 1e-8, "u {eu:e}, s {es:e}");
}

/// A cell with a net charge and a neutralising background (Ewald's
/// convention: the potential's mean over the box is zero): the FMM and
/// the treecode against the Ewald sum, which takes the background as its
/// constant `-pi Q / (alpha^2 V)` where the tree methods take it as a
/// uniform cube's closed form and multipoles; gravity's masses too (the
/// cosmologists' box); a tolerance met against it. A vector strength with
/// a background is an error.
#[test]
fn a_neutralising_background_matches_the_ewald_sum() {
    let n = 1200;
    let pbox = PeriodicBox::cube([-0.3, 0.2, 0.0], 1.3).with_background();
    let pos = points(n, 17, [-0.3, 0.2, 0.0], 1.3);
    let q: Vec<f64> = zero_mean(n, 17).iter().map(|x| x + 0.4).collect();
    let (t, s) = coulomb(&pos, &q);
    let want = run::<Coulomb>(&Method::direct(), &[], pbox, &t, &s).unwrap();
    let (phi0, e0) = phi_e(&want);
    let (phi, e) = phi_e(&run::<Coulomb>(&fmm_tight(), &[], pbox, &t, &s).unwrap());
    let (ep, ee) = (rel_l2(&phi, &phi0), rel_l2(&e, &e0));
    println!(
        "Coulomb, net charge {:.1}: FMM phi {ep:.2e}, e {ee:.2e}",
        q.iter().sum::<f64>()
    );
    assert!(ep < 1e-8 && ee < 1e-8, "FMM: phi {ep:e}, e {ee:e}");
    let every_cell = Method::Treecode(TreeOptions {
        theta: 0.0,
        ..TreeOptions::default()
    });
    let got = run::<Coulomb>(&every_cell, &[], pbox, &t, &s).unwrap();
    let (phi, e) = phi_e(&got);
    let (tp, te) = (rel_l2(&phi, &phi0), rel_l2(&e, &e0));
    println!("treecode at theta 0: phi {tp:.2e}, e {te:.2e}");
    assert!(tp < 1e-6 && te < 1e-6, "treecode: phi {tp:e}, e {te:e}");
    // A tolerance: the FMM's error estimated against the periodic sums
    // with the background, and met against the Ewald sum.
    let tol = 1e-5;
    let problem = Problem::new(&[]).in_domain(Domain::Periodic(pbox));
    let ev = evaluate::<Coulomb, f64>(Backend::Cpu, &Method::fmm_tolerance(tol), problem, &t, &s)
        .unwrap();
    let a = ev.achieved.expect("a tolerance says what it met");
    let err = rel_l2(&ev.outputs.slots().concat(), &want.concat());
    println!(
        "tolerance {tol:e}: estimated {:.1e}, whole {err:.1e}",
        a.estimated_error
    );
    assert!(err <= tol && a.estimated_error <= tol, "{err:e} {a:?}");

    let mut gs = Particles::sources::<fmm_core::kernels::Gravity>(&pos).unwrap();
    gs.set("m", &vec![1.0 / n as f64; n]).unwrap();
    let gt = Particles::targets::<fmm_core::kernels::Gravity>(&pos).unwrap();
    let want = run::<fmm_core::kernels::Gravity>(&Method::direct(), &[0.0], pbox, &gt, &gs)
        .unwrap()
        .concat();
    let got = run::<fmm_core::kernels::Gravity>(&fmm_tight(), &[0.0], pbox, &gt, &gs)
        .unwrap()
        .concat();
    let eg = rel_l2(&got, &want);
    println!("gravity: FMM {eg:.2e}");
    assert!(eg < 1e-8, "gravity: {eg:e}");

    let b = PeriodicBox::cube([0.0; 3], 1.0);
    let (vt, vs) = vortices(200, 5, 0.05, &b);
    for m in [Method::direct(), fmm_tight()] {
        let e = run::<VelocityStretching>(&m, &[], b.with_background(), &vt, &vs)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("balances scalar strengths") && e.contains("VelocityStretching"),
            "{e}"
        );
    }
}

/// The error falls with the image levels about 25-fold a level (the
/// remainder of the lattice past a cube of `5^levels` boxes), to the
/// FMM's own floor.
#[test]
fn the_error_falls_with_the_image_levels() {
    let n = 600;
    let pbox = PeriodicBox::cube([0.0; 3], 1.0);
    let (t, s) = coulomb(&points(n, 8, [0.0; 3], 1.0), &zero_mean(n, 8));
    let want = run::<Coulomb>(&Method::direct(), &[], pbox, &t, &s)
        .unwrap()
        .concat();
    let errs: Vec<f64> = (1..=4)
        .map(|l| {
            let got = run::<Coulomb>(&fmm_tight(), &[], pbox.with_image_levels(l), &t, &s)
                .unwrap()
                .concat();
            rel_l2(&got, &want)
        })
        .collect();
    println!("levels 1..4: {errs:?}");
    for w in errs.windows(2) {
        assert!(w[1] < w[0] / 10.0, "{errs:?}");
    }
}

/// Moving the box's origin, or any particle by a lattice vector, leaves
/// the periodic sum as it was (the FMM to its error, the Ewald sum to
/// rounding).
#[test]
fn moving_the_box_or_a_particle_by_a_lattice_vector_changes_nothing() {
    let n = 800;
    let side = 1.5;
    let pos = points(n, 11, [0.0; 3], side);
    let q = zero_mean(n, 11);
    let pbox = PeriodicBox::cube([0.0; 3], side);
    let (t, s) = coulomb(&pos, &q);
    let base_fmm = run::<Coulomb>(&fmm_tight(), &[], pbox, &t, &s)
        .unwrap()
        .concat();
    let base_ewald = run::<Coulomb>(&Method::direct(), &[], pbox, &t, &s)
        .unwrap()
        .concat();
    // Every particle moved by its own lattice vector.
    let moved: Vec<[f64; 3]> = pos
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let k = [
                (i % 3) as f64 - 1.0,
                (i % 5) as f64 - 2.0,
                (i % 7) as f64 * 3.0,
            ];
            [0, 1, 2].map(|a| p[a] + k[a] * side)
        })
        .collect();
    // The box moved off the particles.
    let shifted = PeriodicBox::cube([0.37, -0.81, 0.05], side);
    let (mt, ms) = coulomb(&moved, &q);
    for (what, b, t, s) in [
        ("particles moved", pbox, &mt, &ms),
        ("box moved", shifted, &t, &s),
    ] {
        let f = run::<Coulomb>(&fmm_tight(), &[], b, t, s).unwrap().concat();
        let e = run::<Coulomb>(&Method::direct(), &[], b, t, s)
            .unwrap()
            .concat();
        let (df, de) = (rel_l2(&f, &base_fmm), rel_l2(&e, &base_ewald));
        println!("{what}: FMM {df:.1e}, Ewald {de:.1e}");
        assert!(df < 1e-8, "{what}: FMM changed by {df:e}");
        assert!(de < 1e-12, "{what}: Ewald changed by {de:e}");
    }
}

/// Bad boxes, a cell with a net charge (unless a background is asked
/// for), a point outside a slab, and the
/// methods that do not run in a periodic box yet: each a clear error.
#[test]
fn bad_boxes_and_unsupported_methods_are_named() {
    let pos = points(50, 2, [0.0; 3], 1.0);
    let (t, s) = coulomb(&pos, &zero_mean(50, 2));
    let pbox = PeriodicBox::cube([0.0; 3], 1.0);
    let msg = |m: &Method, b: PeriodicBox, s: &Particles<f64>| {
        run::<Coulomb>(m, &[], b, &t, s).unwrap_err().to_string()
    };
    for (b, want) in [
        (
            PeriodicBox::cube([0.0; 3], 0.0),
            "side must be finite and positive",
        ),
        (
            PeriodicBox::cube([0.0; 3], f64::INFINITY),
            "side must be finite",
        ),
        (
            PeriodicBox::cube([f64::NAN; 3], 1.0),
            "origin is not finite",
        ),
        (pbox.with_axes([false; 3]), "at least one periodic axis"),
        (pbox.with_image_levels(0), "image levels"),
    ] {
        for m in [Method::direct(), fmm_tight()] {
            let e = msg(&m, b, &s);
            assert!(e.contains(want), "{e}");
        }
    }
    // A net charge: an error, unless the background is asked for; a
    // background only with three periodic axes.
    let (_, charged) = coulomb(&pos, &vec![1.0; 50]);
    for m in [Method::direct(), fmm_tight()] {
        let e = msg(&m, pbox, &charged);
        assert!(e.contains("sum to") && e.contains("background"), "{e}");
        assert!(run::<Coulomb>(&m, &[], pbox.with_background(), &t, &charged).is_ok());
        let slab = pbox.with_axes([true, true, false]).with_background();
        let e = msg(&m, slab, &charged);
        assert!(e.contains("background is a choice for three"), "{e}");
    }
    // A point outside a slab's open axis.
    let slab = pbox.with_axes([true, true, false]);
    let mut out = pos.clone();
    out[7][2] = 1.5;
    let (ot, os) = coulomb(&out, &zero_mean(50, 2));
    let e = run::<Coulomb>(&fmm_tight(), &[], slab, &ot, &os)
        .unwrap_err()
        .to_string();
    assert!(e.contains("point 7") && e.contains("open axis 2"), "{e}");
    // A kernel without a Laplace far field: its node far fields have no
    // expansions for the farther images.
    let ki =
        fmm_core::FmmOptions::fixed(4, 0.5).with_far_field(fmm_core::FarField::KernelIndependent);
    let mut ys = Particles::sources::<fmm_core::kernels::Yukawa>(&pos).unwrap();
    ys.set("q", &zero_mean(50, 2)).unwrap();
    let yt = Particles::targets::<fmm_core::kernels::Yukawa>(&pos).unwrap();
    let e = run::<fmm_core::kernels::Yukawa>(&Method::Fmm(ki), &[2.0], pbox, &yt, &ys)
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not run in a periodic box"), "{e}");
}

/// The FMM with node far fields in a periodic box (the nearest images by
/// the nodes, compressed M2L or by the kernel, the farther by Laplace
/// expansions): Coulomb against the Ewald sum, within 3 times the same
/// settings' error in free space over the box and its 26 nearest images
/// (targets in the box: the sum the traversal meets; with targets at the
/// sources' edge alone, free space reads 10 to 20 times lower); velocity
/// + stretching against the Ewald sum; a net charge with a background.
#[test]
fn the_node_far_fields_run_in_a_periodic_box() {
    use fmm_core::{FarField, FmmOptions, NodeM2l};
    let n = 1200;
    let pbox = PeriodicBox::cube([0.1, -0.2, 0.0], 1.0);
    let pos = points(n, 51, [0.1, -0.2, 0.0], 1.0);
    let q = zero_mean(n, 51);
    let (t, s) = coulomb(&pos, &q);
    let want = run::<Coulomb>(&Method::direct(), &[], pbox, &t, &s)
        .unwrap()
        .concat();
    // The box and its 26 nearest images in free space.
    let mut near = Vec::new();
    for v in 0..27 {
        let k = [v % 3, v / 3 % 3, v / 9].map(|x| x as f64 - 1.0);
        near.extend(pos.iter().map(|p| [0, 1, 2].map(|a| p[a] + k[a])));
    }
    let (_, ns) = coulomb(&near, &q.repeat(27));
    let free = fmm_tests::direct_cpu::<Coulomb, f64>(&[], &t, &ns)
        .unwrap()
        .slots()
        .concat();
    for (far_field, p, m2l) in [
        (FarField::Ppm, 8, NodeM2l::Compressed),
        (FarField::Ppm, 8, NodeM2l::Kernel),
        (FarField::KernelIndependent, 6, NodeM2l::Compressed),
    ] {
        let o = FmmOptions {
            node_m2l: m2l,
            ..fmm_options(p, 0.5, 64).with_far_field(far_field)
        };
        let got = run::<Coulomb>(&Method::Fmm(o.clone()), &[], pbox, &t, &s)
            .unwrap()
            .concat();
        let problem = Problem::new(&[]);
        let ev = evaluate::<Coulomb, f64>(Backend::Cpu, &Method::Fmm(o), problem, &t, &ns);
        let got_free = ev.unwrap().outputs.slots().concat();
        let (e, e_free) = (rel_l2(&got, &want), rel_l2(&got_free, &free));
        println!("{far_field:?} p {p} {m2l:?}: {e:.2e} (free space, 27 boxes: {e_free:.2e})");
        assert!(
            e < 3.0 * e_free,
            "{far_field:?} {m2l:?}: {e:e} against {e_free:e}"
        );
    }
    let (vt, vs) = vortices(n, 52, 0.03, &pbox);
    let vwant = run::<VelocityStretching>(&Method::direct(), &[], pbox, &vt, &vs)
        .unwrap()
        .concat();
    // p 4: its operators stay compressed (at p 8, 3456 x 432 went to the
    // M2L by the kernel, 30 s of this test for 4.0e-8); 9.2e-6 measured.
    let o = fmm_options(4, 0.4, 64).with_far_field(FarField::Ppm);
    let vgot = run::<VelocityStretching>(&Method::Fmm(o), &[], pbox, &vt, &vs)
        .unwrap()
        .concat();
    let ev = rel_l2(&vgot, &vwant);
    println!("Ppm p 4, velocity + stretching: {ev:.2e}");
    assert!(ev < 2e-5, "velocity + stretching: {ev:e}");
    // A net charge with a background (the error relative to the
    // fluctuation): within 3 times the Laplace FMM's at p 10.
    let q: Vec<f64> = zero_mean(n, 53).iter().map(|x| x + 0.5).collect();
    let (t, s) = coulomb(&pos, &q);
    let b = pbox.with_background();
    let want = run::<Coulomb>(&Method::direct(), &[], b, &t, &s)
        .unwrap()
        .concat();
    let err = |o: FmmOptions| {
        rel_l2(
            &run::<Coulomb>(&Method::Fmm(o), &[], b, &t, &s)
                .unwrap()
                .concat(),
            &want,
        )
    };
    let e = err(fmm_options(10, 0.4, 64).with_far_field(FarField::Ppm));
    let e_ki = err(fmm_options(6, 0.4, 64).with_far_field(FarField::KernelIndependent));
    let e_laplace = err(fmm_options(10, 0.4, 64));
    println!(
        "background: Ppm p 10 {e:.2e}, KernelIndependent p 6 {e_ki:.2e} (Laplace p 10: \
         {e_laplace:.2e})"
    );
    assert!(
        e_ki < 3.0 * e_laplace,
        "background: {e_ki:e} against {e_laplace:e}"
    );
    assert!(
        e < 3.0 * e_laplace,
        "background: {e:e} against {e_laplace:e}"
    );
}

/// The Coulomb potential and field at `pos` of charges `q` and their
/// images `n` (integers, `|n_a| <= k` along the periodic `axes`, 0 along
/// the others) in a box of side 1: the plain lattice sum over a square (a
/// slab) or a segment (a wire) of `2k + 1` boxes a side.
fn image_sum(pos: &[[f64; 3]], q: &[f64], axes: [bool; 3], k: i64) -> Vec<f64> {
    let r = |a: usize| if axes[a] { -k..=k } else { 0..=0 };
    let n = pos.len();
    let mut phi = vec![0.0; n];
    let mut e = vec![[0.0; 3]; n];
    for i0 in r(0) {
        for i1 in r(1) {
            for i2 in r(2) {
                let shift = [i0 as f64, i1 as f64, i2 as f64];
                for (i, x) in pos.iter().enumerate() {
                    for (y, &qj) in pos.iter().zip(q) {
                        let d = [0, 1, 2].map(|a| x[a] - y[a] - shift[a]);
                        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                        if r2 > 0.0 {
                            let inv = 1.0 / r2.sqrt();
                            phi[i] += qj * inv;
                            for a in 0..3 {
                                e[i][a] += qj * inv * inv * inv * d[a];
                            }
                        }
                    }
                }
            }
        }
    }
    let mut out = phi;
    for a in 0..3 {
        out.extend(e.iter().map(|v| v[a]));
    }
    out
}

/// The limit of sums `s[i]` at half-sides `r[i]` whose remainders run in
/// the powers `pow` of `1/r` (Richardson's extrapolation, three sums).
fn extrapolated(s: [&[f64]; 3], r: [f64; 3], pow: [i32; 2]) -> Vec<f64> {
    // s_i = S - C r_i^-p0 - D r_i^-p1: solve the 3x3 system by Cramer.
    let m = |i: usize| [1.0, -r[i].powi(-pow[0]), -r[i].powi(-pow[1])];
    let rows = [m(0), m(1), m(2)];
    let det3 = |a: [[f64; 3]; 3]| {
        a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
            - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0])
    };
    let det = det3(rows);
    (0..s[0].len())
        .map(|j| {
            let mut a = rows;
            for i in 0..3 {
                a[i][0] = s[i][j];
            }
            det3(a) / det
        })
        .collect()
}

/// Slabs and wires: the FMM against the plain image sum over growing
/// squares (segments) extrapolated to the infinite lattice (its remainder
/// runs in odd powers of 1/R for a slab, even for a wire), for random
/// neutral charges spread through the box; and against the two- and
/// one-dimensional Madelung constants (a square checkerboard of spacing
/// 1/2: 1.6155426267128247, Borwein et al., "Lattice Sums Then and Now",
/// 2013; an alternating line: 2 ln 2).
#[test]
fn slabs_and_wires_match_their_lattice_sums() {
    let n = 100;
    let pos = points(n, 21, [0.0; 3], 1.0);
    let q = zero_mean(n, 21);
    let (t, s) = coulomb(&pos, &q);
    let pbox = PeriodicBox::cube([0.0; 3], 1.0);
    let method = Method::Fmm(fmm_options(20, 0.4, 8));
    for (name, axes, ks, pow) in [
        ("slab", [true, true, false], [20i64, 40, 80], [1, 3]),
        ("wire", [false, true, false], [500, 1000, 2000], [2, 4]),
    ] {
        let sums: Vec<Vec<f64>> = ks.iter().map(|&k| image_sum(&pos, &q, axes, k)).collect();
        let r = ks.map(|k| k as f64 + 0.5);
        let want = extrapolated([&sums[0], &sums[1], &sums[2]], r, pow);
        let got = run::<Coulomb>(&method, &[], pbox.with_axes(axes), &t, &s)
            .unwrap()
            .concat();
        let err = rel_l2(&got, &want);
        let plain = rel_l2(&sums[2], &want);
        println!(
            "{name}: FMM {err:.1e} (the plain sum at k {}: {plain:.1e})",
            ks[2]
        );
        assert!(err < 1e-7, "{name}: {err:e}");
    }
    // Madelung: the checkerboard in the plane z = 0.4 of a slab, the line
    // y = 0.3, z = 0.6 of a wire along x.
    let board: Vec<([f64; 3], f64)> = (0..4)
        .map(|i| {
            let (a, b) = (i & 1, i >> 1);
            let x = [0.25 + 0.5 * a as f64, 0.25 + 0.5 * b as f64, 0.4];
            (x, if (a + b) % 2 == 0 { 1.0 } else { -1.0 })
        })
        .collect();
    let line = vec![([0.1, 0.3, 0.6], 1.0), ([0.6, 0.3, 0.6], -1.0)];
    for (name, axes, sites, m) in [
        (
            "checkerboard",
            [true, true, false],
            board,
            1.615_542_626_712_824_7,
        ),
        ("line", [true, false, false], line, 2.0 * 2f64.ln()),
    ] {
        let pos: Vec<[f64; 3]> = sites.iter().map(|s| s.0).collect();
        let q: Vec<f64> = sites.iter().map(|s| s.1).collect();
        let (t, s) = coulomb(&pos, &q);
        let out = run::<Coulomb>(&fmm_tight(), &[], pbox.with_axes(axes), &t, &s).unwrap();
        for (i, (&p, &qi)) in out[0].iter().zip(&q).enumerate() {
            let want = -qi * m / 0.5;
            assert!(
                (p - want).abs() < 1e-9 * want.abs(),
                "{name} site {i}: {p} against {want}"
            );
        }
    }
}

/// Periodic Biot-Savart of a Taylor-Green vortex, `u = (sin x cos y cos z,
/// -cos x sin y cos z, 0)` in the box `[0, 2 pi)^3`: its vorticity on a
/// lattice of `n^3` particles with Gaussian cores of `sigma = 1.5 h`. The
/// lattice sum of the cores is the vorticity smoothed by the Gaussian, so
/// its velocity is the Taylor-Green velocity times `exp(-|k|^2 sigma^2 / 2)`,
/// `|k|^2 = 3`, to the lattice's aliasing, `exp(-(n sigma)^2 / 2) = 1e-19`:
/// a closed form for the spectral (tin foil) velocity and its gradient. The
/// FMM's and the Ewald sum's velocity and stretching against it.
#[test]
fn taylor_green_velocity_and_stretching_match_the_closed_form() {
    use std::f64::consts::PI;
    let n = 16;
    let h = 2.0 * PI / n as f64;
    let sigma = 1.5 * h;
    let mut pos = Vec::new();
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                pos.push([i, j, k].map(|a| (a as f64 + 0.5) * h));
            }
        }
    }
    let vorticity = |p: &[f64; 3]| {
        let ([sx, sy, sz], [cx, cy, cz]) = (p.map(f64::sin), p.map(f64::cos));
        [-cx * sy * sz, -sx * cy * sz, 2.0 * sx * sy * cz]
    };
    let damp = (-1.5 * sigma * sigma).exp();
    // The velocity and its gradient (rows: components of u; columns: d/dx_b).
    let velocity = |p: &[f64; 3]| {
        let ([sx, sy, sz], [cx, cy, cz]) = (p.map(f64::sin), p.map(f64::cos));
        let u = [sx * cy * cz, -cx * sy * cz, 0.0];
        let g = [
            [cx * cy * cz, -sx * sy * cz, -sx * cy * sz],
            [sx * sy * cz, -cx * cy * cz, cx * sy * sz],
            [0.0; 3],
        ];
        (u.map(|x| damp * x), g.map(|r| r.map(|x| damp * x)))
    };
    let vol = h * h * h;
    let alpha: Vec<[f64; 3]> = pos.iter().map(|p| vorticity(p).map(|w| w * vol)).collect();
    let mut s = Particles::sources::<VelocityStretching>(&pos).unwrap();
    s.set_vec3("alpha", &alpha).unwrap();
    s.set("sigma", &vec![sigma; pos.len()]).unwrap();
    let mut t = Particles::targets::<VelocityStretching>(&pos).unwrap();
    t.set_vec3("alpha_i", &alpha).unwrap();
    let (mut u0, mut s0) = (vec![Vec::new(); 3], vec![Vec::new(); 3]);
    for (p, a) in pos.iter().zip(&alpha) {
        let (u, g) = velocity(p);
        for c in 0..3 {
            u0[c].push(u[c]);
            s0[c].push((0..3).map(|b| a[b] * g[c][b]).sum::<f64>());
        }
    }
    let pbox = PeriodicBox::cube([0.0; 3], 2.0 * PI);
    for (name, method, tol) in [
        // Leaves of 4^3 particles: the far field drops the cores (as in
        // free space), so cells meet by M2L only some 9 sigma apart.
        ("FMM", Method::Fmm(fmm_options(20, 0.4, 64)), 1e-8),
        ("Ewald", Method::direct(), 1e-10),
    ] {
        let out = run::<VelocityStretching>(&method, &[], pbox, &t, &s).unwrap();
        let eu = rel_l2(&out[0..3].concat(), &u0.concat());
        let es = rel_l2(&out[3..6].concat(), &s0.concat());
        println!("{name}: u {eu:.1e}, stretching {es:.1e}");
        assert!(eu < tol && es < tol, "{name}: u {eu:e}, s {es:e}");
    }
}

/// A tolerance in a periodic box: the FMM's error is estimated against the
/// Ewald sum at the sampled targets, so what it reports and meets is the
/// error against the periodic sum (checked here at every target); and
/// `Method::tolerance` runs that FMM.
#[test]
fn a_tolerance_is_met_against_the_periodic_sum() {
    let n = 3000;
    let pbox = PeriodicBox::cube([0.0; 3], 1.0);
    let (t, s) = coulomb(&points(n, 31, [0.0; 3], 1.0), &zero_mean(n, 31));
    let want = run::<Coulomb>(&Method::direct(), &[], pbox, &t, &s)
        .unwrap()
        .concat();
    for tol in [1e-4, 1e-7] {
        for method in [Method::fmm_tolerance(tol), Method::tolerance(tol)] {
            let problem = Problem::new(&[]).in_domain(Domain::Periodic(pbox));
            let ev = evaluate::<Coulomb, f64>(Backend::Cpu, &method, problem, &t, &s).unwrap();
            let a = ev.achieved.expect("a tolerance says what it met");
            let err = rel_l2(&ev.outputs.slots().concat(), &want);
            println!(
                "{tol:e} ({}): p {} theta {} estimated {:.1e}, whole {err:.1e}",
                a.method, a.settings.p, a.settings.theta, a.estimated_error
            );
            assert!(err <= tol, "{method:?}: {err:e}");
            assert!(a.estimated_error <= tol);
        }
    }
}

/// The treecode in a periodic box (the walk over the nearest images, the
/// rest by the images' expansions): opening every cell (theta 0) it is the
/// Ewald sum to the far images' order; at a working theta its error
/// against the Ewald sum is that of the free-space treecode against the
/// direct sum times at most 8, for the monopole and the pseudo-particles
/// (measured 5.5 and 5.2: the errors of the cells of some 27 boxes add
/// where free space has one box, sqrt 27 = 5.2).
#[test]
fn the_treecode_runs_in_a_periodic_box() {
    let n = 4000;
    let pbox = PeriodicBox::cube([0.0; 3], 1.0);
    let (t, s) = coulomb(&points(n, 41, [0.0; 3], 1.0), &zero_mean(n, 41));
    let periodic = run::<Coulomb>(&Method::direct(), &[], pbox, &t, &s)
        .unwrap()
        .concat();
    let free = fmm_tests::direct_cpu::<Coulomb, f64>(&[], &t, &s)
        .unwrap()
        .slots()
        .concat();
    for (far_field, order, theta) in [
        (fmm_core::FarField::Monopole, 1, 0.3),
        (fmm_core::FarField::Ppm, 6, 0.5),
    ] {
        let method = Method::Treecode(TreeOptions {
            theta,
            far_field,
            order,
            ..TreeOptions::default()
        });
        let got = run::<Coulomb>(&method, &[], pbox, &t, &s).unwrap().concat();
        let e_periodic = rel_l2(&got, &periodic);
        let (got_free, _) = fmm_tests::treecode_cpu::<Coulomb, f64>(
            &[],
            &t,
            &s,
            &TreeOptions {
                theta,
                far_field,
                order,
                ..TreeOptions::default()
            },
        )
        .unwrap();
        let e_free = rel_l2(&got_free.slots().concat(), &free);
        println!("{far_field:?}: periodic {e_periodic:.2e}, free space {e_free:.2e}");
        assert!(
            e_periodic < 8.0 * e_free,
            "{far_field:?}: {e_periodic:e} against {e_free:e}"
        );
    }
    let n = 1000;
    let (t, s) = coulomb(&points(n, 42, [0.0; 3], 1.0), &zero_mean(n, 42));
    let want = run::<Coulomb>(&Method::direct(), &[], pbox, &t, &s)
        .unwrap()
        .concat();
    let every_cell = Method::Treecode(TreeOptions {
        theta: 0.0,
        ..TreeOptions::default()
    });
    let got = run::<Coulomb>(&every_cell, &[], pbox, &t, &s)
        .unwrap()
        .concat();
    let e = rel_l2(&got, &want);
    println!("theta 0: {e:.2e}");
    assert!(e < 1e-6, "theta 0: {e:e}");
}
