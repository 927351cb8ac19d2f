//! The transpose scheme (`StretchingScheme::Transpose`, the
//! `VelocityStretchingTranspose` kernel): its stretching against a
//! finite difference of `u . alpha_i` (the velocity alone, evaluated
//! elsewhere), the total vorticity it keeps where the classical scheme
//! does not, and the two schemes the same where the strengths follow
//! the vorticity (a ring).

use fmm_core::Backend;
use fmm_vortex::*;
use rand::{Rng, SeedableRng};

/// Particles at random in a unit cube, strengths at random (a field that
/// is not divergence-free), cores `sigma` or, with `spread`, up to 1.5
/// times it (fresh each run: the seed is printed).
fn random_particles(n: usize, sigma: f64, spread: bool) -> VortexParticles {
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v = || [0; 3].map(|_| rng.gen_range(-0.5..0.5));
    let x: Vec<[f64; 3]> = (0..n).map(|_| v()).collect();
    let alpha: Vec<[f64; 3]> = (0..n).map(|_| v()).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 1);
    let sigma = (0..n)
        .map(|_| {
            if spread {
                sigma * rng.gen_range(1.0..1.5)
            } else {
                sigma
            }
        })
        .collect();
    VortexParticles::new(x, alpha, sigma, vec![1e-3; n]).unwrap()
}

fn transpose() -> Solver {
    Solver::direct_f64(Backend::Cpu).with_stretching(StretchingScheme::Transpose)
}

#[test]
fn the_transpose_stretching_is_the_gradient_of_u_dot_alpha() {
    let p = random_particles(80, 0.2, true);
    let rates = transpose().rates(&p).unwrap();
    let classical = Solver::direct_f64(Backend::Cpu).rates(&p).unwrap();
    let (mut worst, mut top, mut same_u) = (0.0f64, 0.0f64, 0.0f64);
    let eps = 1e-4;
    for i in (0..p.len()).step_by(8) {
        // grad (u . alpha_i) at x_i by central differences of the
        // velocity at points beside it (the particle's own blob adds
        // nothing to u . alpha_i: alpha_i x d . alpha_i = 0).
        let mut at = vec![];
        for c in 0..3 {
            for s in [1.0, -1.0] {
                let mut y = p.x[i];
                y[c] += s * eps;
                at.push(y);
            }
        }
        let u = Solver::direct_f64(Backend::Cpu)
            .velocity_at(&p, &at)
            .unwrap()
            .u;
        let dot = |v: [f64; 3]| v[0] * p.alpha[i][0] + v[1] * p.alpha[i][1] + v[2] * p.alpha[i][2];
        for c in 0..3 {
            let fd = (dot(u[2 * c]) - dot(u[2 * c + 1])) / (2.0 * eps);
            worst = worst.max((rates.dalpha[i][c] - fd).abs());
            top = top.max(fd.abs());
            same_u = same_u.max((rates.u[i][c] - classical.u[i][c]).abs());
        }
    }
    println!(
        "transpose stretching against differences: {:.2e} of {top:.3e}",
        worst / top
    );
    assert!(worst < 1e-6 * top, "{worst} of {top}");
    assert!(same_u < 1e-14, "{same_u}");
}

#[test]
fn the_transpose_scheme_keeps_the_total_vorticity() {
    let p = random_particles(200, 0.15, false);
    let total = |r: &Rates| {
        let (mut s, mut m) = ([0.0f64; 3], 0.0f64);
        for d in &r.dalpha {
            for c in 0..3 {
                s[c] += d[c];
                m = m.max(d[c].abs());
            }
        }
        s.iter().fold(0.0f64, |a, v| a.max(v.abs())) / m
    };
    let transposed = total(&transpose().rates(&p).unwrap());
    let classical = total(&Solver::direct_f64(Backend::Cpu).rates(&p).unwrap());
    println!("d/dt sum alpha over the largest rate: transpose {transposed:.2e}, classical {classical:.2e}");
    assert!(transposed < 1e-12, "{transposed}");
    assert!(classical > 1e-3, "{classical}");
}

#[test]
fn the_schemes_agree_where_the_strengths_follow_the_vorticity() {
    // A ring's strengths are azimuthal, as its vorticity is at every
    // particle: the schemes differ by the vorticity there crossed with
    // the strength (for a divergence-free field), which is zero.
    let p = Ring::resolved(1.0, 1.0, 0.15, 2, 1.0).particles().unwrap();
    let a = Solver::direct_f64(Backend::Cpu).rates(&p).unwrap();
    let b = transpose().rates(&p).unwrap();
    let (mut diff, mut top) = (0.0f64, 0.0f64);
    for (x, y) in a.dalpha.iter().zip(&b.dalpha) {
        for c in 0..3 {
            diff = diff.max((x[c] - y[c]).abs());
            top = top.max(x[c].abs());
        }
    }
    println!(
        "a resolved ring ({} particles): the schemes' stretching {:.2e} apart of {top:.3e}",
        p.len(),
        diff / top
    );
    assert!(diff < 1e-10 * top, "{diff} of {top}");
}

#[test]
fn the_transpose_scheme_runs_at_a_tolerance() {
    // f32 sums at 1e-4 through the front door (the kernel declares no far
    // field: a tree method takes a generic one) against the f64 direct sum.
    let p = random_particles(4000, 0.05, true);
    let exact = transpose().rates(&p).unwrap();
    let fast = Solver::f32_at(Backend::Cpu, 1e-4)
        .with_stretching(StretchingScheme::Transpose)
        .rates(&p)
        .unwrap();
    let l2 = |a: &[[f64; 3]], b: &[[f64; 3]]| {
        let (mut d, mut n) = (0.0, 0.0);
        for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
            d += (x - y) * (x - y);
            n += y * y;
        }
        (d / n).sqrt()
    };
    let (eu, es) = (l2(&fast.u, &exact.u), l2(&fast.dalpha, &exact.dalpha));
    let how = fast.achieved.as_ref().map_or("-".into(), |a| {
        format!(
            "{} p {} theta {}, estimated {:.1e}",
            a.method, a.settings.p, a.settings.theta, a.estimated_error
        )
    });
    println!("4000 particles at 1e-4 ({how}): relative L2 error u {eu:.2e}, stretching {es:.2e}");
    assert!(eu < 3e-4 && es < 3e-4, "{eu} {es}");
}
