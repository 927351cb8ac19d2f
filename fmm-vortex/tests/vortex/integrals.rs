//! The field's energy, enstrophy and helicity (`Solver::integrals`)
//! against a single blob's closed forms and naive f64 double sums of the
//! blob-pair formulas written here; a mirror image keeps the energy and
//! enstrophy and flips the helicity; a flat ring has none.

use std::f64::consts::PI;

use fmm_core::Backend;
use fmm_vortex::*;

fn direct() -> Solver {
    Solver::direct_f64(Backend::Cpu)
}

/// A deterministic scatter of `n` blobs of unequal cores (splitmix64).
fn blobs(n: usize, seed: u64) -> VortexParticles {
    let mut s = seed;
    let mut next = || {
        s = s.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut p = VortexParticles {
        x: vec![],
        alpha: vec![],
        sigma: vec![],
        volume: vec![],
    };
    for _ in 0..n {
        p.x.push([next(), next(), next()]);
        p.alpha.push([next() - 0.5, next() - 0.5, next() - 0.5]);
        p.sigma.push(0.05 + 0.1 * next());
        p.volume.push(1e-3);
    }
    p
}

/// The double sums, pair by pair, in f64.
fn naive(p: &VortexParticles) -> FieldIntegrals {
    let mut out = FieldIntegrals {
        energy: 0.0,
        enstrophy: 0.0,
        helicity: 0.0,
    };
    for i in 0..p.len() {
        for j in 0..p.len() {
            let s = (p.sigma[i].powi(2) + p.sigma[j].powi(2)).sqrt();
            let d: Vec<f64> = (0..3).map(|c| p.x[i][c] - p.x[j][c]).collect();
            let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
            let (a, b) = (p.alpha[i], p.alpha[j]);
            let ab = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
            let zeta = (-0.5 * r * r / (s * s)).exp() / ((2.0 * PI).powf(1.5) * s.powi(3));
            out.enstrophy += ab * zeta;
            if r == 0.0 {
                out.energy += 0.5 * ab * (2.0 / PI).sqrt() / (4.0 * PI * s);
                continue;
            }
            let rho = r / s;
            let erf = libm::erf(rho / 2f64.sqrt());
            out.energy += 0.5 * ab * erf / (4.0 * PI * r);
            // u_j(x_i) = g(rho) / (4 pi r^3) b x (x_i - x_j).
            let g = erf - (2.0 / PI).sqrt() * rho * (-0.5 * rho * rho).exp();
            let bxd = [
                b[1] * d[2] - b[2] * d[1],
                b[2] * d[0] - b[0] * d[2],
                b[0] * d[1] - b[1] * d[0],
            ];
            let k = g / (4.0 * PI * r.powi(3));
            out.helicity += k * (a[0] * bxd[0] + a[1] * bxd[1] + a[2] * bxd[2]);
        }
    }
    out
}

fn close(got: f64, want: f64, scale: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * scale,
        "{what}: {got} against {want}"
    );
}

#[test]
fn one_blob_has_its_closed_forms() {
    let (a, sigma) = ([0.3, -0.4, 1.2], 0.2);
    let p = VortexParticles::new(vec![[0.5; 3]], vec![a], vec![sigma], vec![1.0]).unwrap();
    let got = direct().integrals(&p).unwrap();
    let a2 = a[0] * a[0] + a[1] * a[1] + a[2] * a[2];
    // E = |a|^2 / (8 pi^(3/2) sigma), Z = |a|^2 / (8 pi^(3/2) sigma^3).
    let e = a2 / (8.0 * PI.powf(1.5) * sigma);
    let z = a2 / (8.0 * PI.powf(1.5) * sigma.powi(3));
    close(got.energy, e, e, 1e-14, "energy");
    close(got.enstrophy, z, z, 1e-14, "enstrophy");
    assert_eq!(got.helicity, 0.0);
}

#[test]
fn blobs_of_unequal_cores_give_the_pair_sums() {
    let mut p = blobs(300, 7);
    // Two on one point: their zero-separation terms too.
    p.x[1] = p.x[0];
    let (got, want) = (direct().integrals(&p).unwrap(), naive(&p));
    println!("{got:?}\n{want:?}");
    close(got.energy, want.energy, want.energy.abs(), 1e-12, "energy");
    close(
        got.enstrophy,
        want.enstrophy,
        want.enstrophy.abs(),
        1e-12,
        "enstrophy",
    );
    close(
        got.helicity,
        want.helicity,
        want.energy.abs(),
        1e-12,
        "helicity",
    );
    assert!(
        want.helicity.abs() > 1e-3 * want.energy.abs(),
        "a test with helicity"
    );
}

#[test]
fn a_mirror_image_keeps_energy_and_enstrophy_and_flips_helicity() {
    let p = blobs(200, 11);
    // Reflection through z = 0: vorticity is a pseudovector.
    let m = VortexParticles {
        x: p.x.iter().map(|x| [x[0], x[1], -x[2]]).collect(),
        alpha: p.alpha.iter().map(|a| [-a[0], -a[1], a[2]]).collect(),
        ..p.clone()
    };
    let (a, b) = (
        direct().integrals(&p).unwrap(),
        direct().integrals(&m).unwrap(),
    );
    close(b.energy, a.energy, a.energy, 1e-12, "energy");
    close(b.enstrophy, a.enstrophy, a.enstrophy, 1e-12, "enstrophy");
    close(b.helicity, -a.helicity, a.energy, 1e-12, "helicity");
}

#[test]
fn a_flat_ring_has_no_helicity() {
    let p = Ring::resolved(1.0, 1.0, 0.2, 1, 1.0).particles().unwrap();
    let got = direct().integrals(&p).unwrap();
    println!("{got:?}");
    assert!(got.energy > 0.0 && got.enstrophy > 0.0);
    assert!(got.helicity.abs() < 1e-12 * got.energy, "{got:?}");
}
