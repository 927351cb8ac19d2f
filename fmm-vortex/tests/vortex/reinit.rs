//! Reinitialisation against the vorticity it reproduces: the field of the
//! new particles equals the old one at the lattice points (to the solve's
//! tolerance) and near it between them, better than naive remeshing; the
//! invariants carry over; bad lattices are refused by name. The fields are
//! compared by naive f64 loops written here; the sums are the CPU's f64
//! direct sum.

use fmm_core::Backend;
use fmm_vortex::reinit::{blob_at_centre, reinitialise, Lattice};
use fmm_vortex::*;

fn direct() -> Solver {
    Solver::direct_f64(Backend::Cpu)
}

/// The vorticity of `p` at `y`, blob by blob (its own blob included).
fn naive(p: &VortexParticles, y: [f64; 3]) -> [f64; 3] {
    let mut w = [0.0; 3];
    for i in 0..p.len() {
        let r2: f64 = (0..3).map(|c| (y[c] - p.x[i][c]).powi(2)).sum();
        let s = p.sigma[i];
        let g = blob_at_centre(s) * (-0.5 * r2 / (s * s)).exp();
        for (wc, ac) in w.iter_mut().zip(p.alpha[i]) {
            *wc += g * ac;
        }
    }
    w
}

/// The relative l2 distance between the fields of `a` and `b` at `at`.
fn apart(a: &VortexParticles, b: &VortexParticles, at: &[[f64; 3]]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for &y in at {
        let (u, v) = (naive(a, y), naive(b, y));
        for c in 0..3 {
            num += (u[c] - v[c]).powi(2);
            den += v[c] * v[c];
        }
    }
    (num / den).sqrt()
}

#[test]
fn a_reinitialised_ring_keeps_its_vorticity() {
    let old = Ring::resolved(1.0, 1.0, 0.2, 1, 1.0).particles().unwrap();
    let h = 0.2;
    let got = reinitialise(&old, &Lattice::new(h), &direct()).unwrap();
    let new = &got.particles;
    println!(
        "{} particles onto {} lattice points ({} sampled): {} iterations, residual {:.1e} (naive remeshing {:.1e})",
        old.len(),
        new.len(),
        got.sampled,
        got.iterations,
        got.residual,
        got.naive_residual
    );
    assert!(got.residual <= 1e-4);
    // At the lattice points, the old field to the solve's tolerance.
    let at_lattice = apart(new, &old, &new.x);
    // Between them (the cells' centres), near it, and nearer than the
    // naive remeshing's `w h^3`.
    let between: Vec<[f64; 3]> = new.x.iter().map(|x| x.map(|c| c + 0.5 * h)).collect();
    let naive_remesh = VortexParticles {
        alpha: new
            .x
            .iter()
            .map(|&x| naive(&old, x).map(|w| w * h * h * h))
            .collect(),
        ..new.clone()
    };
    let rbf_between = apart(new, &old, &between);
    let naive_between = apart(&naive_remesh, &old, &between);
    println!(
        "field off by {at_lattice:.1e} at the lattice points, {rbf_between:.1e} between them (naive remeshing {naive_between:.1e})"
    );
    assert!(at_lattice < 1.5 * got.residual, "{at_lattice}");
    assert!(rbf_between < 1e-3, "{rbf_between}");
    assert!(
        rbf_between < 0.1 * naive_between,
        "{rbf_between} against {naive_between}"
    );
    // The invariants carry over.
    let (a, b) = (Invariants::of(&old), Invariants::of(new));
    let drift = diagnostics::norm([
        a.linear_impulse[0] - b.linear_impulse[0],
        a.linear_impulse[1] - b.linear_impulse[1],
        a.linear_impulse[2] - b.linear_impulse[2],
    ]) / diagnostics::norm(a.linear_impulse);
    let circulation = diagnostics::norm(b.circulation) / diagnostics::norm(a.linear_impulse);
    println!("impulse drift {drift:.1e}, circulation {circulation:.1e}");
    assert!(drift < 1e-3, "{drift}");
    assert!(circulation < 1e-6, "{circulation}");
}

#[test]
fn a_lattice_coarser_than_the_cores_is_refused() {
    let p = Ring::resolved(1.0, 1.0, 0.2, 1, 1.0).particles().unwrap();
    let e = reinitialise(&p, &Lattice::new(0.3), &direct()).unwrap_err();
    assert!(
        e.to_string().contains("coarser than the smallest core"),
        "{e}"
    );
    for h in [0.0, -0.1, f64::NAN] {
        let e = reinitialise(&p, &Lattice::new(h), &direct()).unwrap_err();
        assert!(e.to_string().contains("lattice spacing"), "{e}");
    }
    let e = reinitialise(
        &p,
        &Lattice {
            overlap: 0.0,
            ..Lattice::new(0.2)
        },
        &direct(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("overlap"), "{e}");
}

#[test]
fn a_solve_that_cannot_converge_says_so() {
    let p = Ring::resolved(1.0, 1.0, 0.2, 1, 1.0).particles().unwrap();
    let e = reinitialise(
        &p,
        &Lattice {
            max_iterations: 1,
            tolerance: 1e-12,
            ..Lattice::new(0.2)
        },
        &direct(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("did not reach"), "{e}");
}
