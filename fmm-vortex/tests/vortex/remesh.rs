//! M4' remeshing: particles on the lattice stay as they are; the
//! circulation and the linear and angular impulse are kept; a Taylor-Green
//! field carried onto a shifted lattice in the periodic box keeps its
//! velocity to the kernel's third order; bad settings are named.

use std::f64::consts::TAU;

use fmm_core::{Backend, Domain, Method, PeriodicBox};
use fmm_vortex::grid::Grid;
use fmm_vortex::remesh::{
    filter_lattice, interpolate_on_lattice, lattice_energy, project_divergence_free, remesh,
    Lattice, LatticeFilter,
};
use fmm_vortex::*;
use rand::{Rng, SeedableRng};

fn rel(a: [f64; 3], b: [f64; 3]) -> f64 {
    let d = diagnostics::norm([a[0] - b[0], a[1] - b[1], a[2] - b[2]]);
    d / diagnostics::norm(b)
}

/// The `n^3` cell centres of `[0, 2 pi)^3` and the Taylor-Green vorticity
/// there.
fn taylor_green_lattice(n: usize) -> (Vec<[f64; 3]>, Vec<[f64; 3]>) {
    let h = TAU / n as f64;
    (0..n * n * n)
        .map(|i| {
            let c = [i % n, (i / n) % n, i / (n * n)].map(|j| (j as f64 + 0.5) * h);
            let ([sx, sy, sz], [cx, cy, cz]) = (c.map(f64::sin), c.map(f64::cos));
            (c, [-cx * sy * sz, -sx * cy * sz, 2.0 * sx * sy * cz])
        })
        .unzip()
}

#[test]
fn particles_on_the_lattice_stay_and_the_moments_are_kept() {
    let h = 0.1;
    let open = Lattice::Open {
        origin: [0.0; 3],
        h,
    };
    // On the lattice: unchanged.
    let on: Vec<[f64; 3]> = (0..20)
        .map(|i| [(i as f64 + 0.5) * h, 0.35, (i % 3) as f64 * h + 0.05])
        .collect();
    let m = on.len();
    let alpha: Vec<[f64; 3]> = (0..m).map(|i| [1.0, -0.5 * i as f64, 0.25]).collect();
    let p = VortexParticles::new(on, alpha, vec![h; m], vec![h * h * h; m]).unwrap();
    let q = remesh(&p, &open, 0.0).unwrap();
    assert_eq!(q.len(), m);
    let mut pairs: Vec<_> = q.x.iter().zip(&q.alpha).collect();
    pairs.sort_by(|a, b| a.0.partial_cmp(b.0).unwrap());
    let mut want: Vec<_> = p.x.iter().zip(&p.alpha).collect();
    want.sort_by(|a, b| a.0.partial_cmp(b.0).unwrap());
    for ((x, a), (y, b)) in pairs.iter().zip(&want) {
        assert!(
            rel(**x, **y) < 1e-14 && rel(**a, **b) < 1e-14,
            "{x:?} {y:?}"
        );
    }
    // A jittered ring: the moments through the second kept.
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut p = Ring::resolved(1.0, 1.0, 0.15, 2, 1.0).particles().unwrap();
    for x in &mut p.x {
        for c in x.iter_mut() {
            *c += 0.02 * rng.gen_range(-1.0..1.0);
        }
    }
    let q = remesh(&p, &open, 0.0).unwrap();
    let (a, b) = (Invariants::of(&p), Invariants::of(&q));
    let (c, i, l) = (
        diagnostics::norm([
            a.circulation[0] - b.circulation[0],
            a.circulation[1] - b.circulation[1],
            a.circulation[2] - b.circulation[2],
        ]),
        rel(b.linear_impulse, a.linear_impulse),
        rel(b.angular_impulse, a.angular_impulse),
    );
    println!(
        "{} particles onto {}: circulation {c:.1e}, linear impulse {i:.1e}, angular impulse {l:.1e}",
        p.len(),
        q.len()
    );
    assert!(c < 1e-12 && i < 1e-12 && l < 1e-12, "{c} {i} {l}");
}

#[test]
fn a_taylor_green_field_moved_onto_a_shifted_lattice_keeps_its_velocity() {
    // Particles at the cell centres shifted by a fraction of a spacing,
    // carrying the vorticity there, remeshed onto the cell centres: the
    // velocity on a grid changes at least at second order in the spacing
    // (measured 6.9e-3 and 1.25e-3 at 8^3 and 16^3: 5.5-fold).
    let pbox = PeriodicBox::cube([0.0; 3], TAU);
    let solver = Solver {
        backend: Backend::Cpu,
        method: Method::tolerance(1e-4),
        precision: Precision::F64,
        domain: Domain::Periodic(pbox),
        stretching: Default::default(),
    };
    let change = |n: usize| {
        let h = TAU / n as f64;
        let shift = [0.31, -0.17, 0.43].map(|s| s * h);
        let (mut x, mut alpha) = (vec![], vec![]);
        for i in 0..n * n * n {
            let c = [i % n, (i / n) % n, i / (n * n)].map(|j| (j as f64 + 0.5) * h);
            let c = [c[0] + shift[0], c[1] + shift[1], c[2] + shift[2]];
            let ([sx, sy, sz], [cx, cy, cz]) = (c.map(f64::sin), c.map(f64::cos));
            x.push(c);
            alpha.push([-cx * sy * sz, -sx * cy * sz, 2.0 * sx * sy * cz].map(|w| w * h * h * h));
        }
        let m = x.len();
        let p = VortexParticles::new(x, alpha, vec![h; m], vec![h * h * h; m]).unwrap();
        let q = remesh(&p, &Lattice::Periodic { pbox, n }, 0.0).unwrap();
        assert_eq!(q.len(), n * n * n);
        let g = Grid {
            origin: [0.0; 3],
            side: TAU,
            n,
        };
        let (u, v) = (
            solver.velocity_on(&p, &g).unwrap(),
            solver.velocity_on(&q, &g).unwrap(),
        );
        let d = (0..3)
            .flat_map(|c| (0..u[c].len()).map(move |i| (c, i)))
            .map(|(c, i)| (u[c][i] - v[c][i]).abs())
            .fold(0.0, f64::max);
        println!("{n}^3: the velocity changed by at most {d:.2e}");
        d
    };
    let (coarse, fine) = (change(8), change(16));
    assert!(coarse < 2e-2 && fine < coarse / 4.0, "{coarse} {fine}");
}

#[test]
fn bad_remeshing_settings_are_named() {
    let p = Ring::line(1.0, 1.0, 0.1, 40).particles().unwrap();
    let e = remesh(
        &p,
        &Lattice::Open {
            origin: [0.0; 3],
            h: 0.0,
        },
        0.0,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("spacing"), "{e}");
    let e = remesh(
        &p,
        &Lattice::Open {
            origin: [0.0; 3],
            h: 0.1,
        },
        1.5,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cull"), "{e}");
    let slab = PeriodicBox::cube([0.0; 3], 1.0).with_axes([true, true, false]);
    let e = remesh(&p, &Lattice::Periodic { pbox: slab, n: 8 }, 0.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("periodic along all three"), "{e}");
}

#[test]
fn the_projection_takes_out_a_gradient_and_keeps_a_solenoidal_field() {
    // Taylor-Green vorticity (divergence-free) plus a gradient and a
    // constant on the cell centres: the projection gives back the first.
    let (n, pbox) = (8, PeriodicBox::cube([0.0; 3], TAU));
    let h = TAU / n as f64;
    let (x, w) = taylor_green_lattice(n);
    let (mut alpha, mut want) = (vec![], vec![]);
    for (c, w) in x.iter().zip(&w) {
        // grad of cos(x + 2y) sin z.
        let (a, b) = ((c[0] + 2.0 * c[1]).sin(), (c[0] + 2.0 * c[1]).cos());
        let g = [-a * c[2].sin(), -2.0 * a * c[2].sin(), b * c[2].cos()];
        // And a mean, which a periodic velocity's curl has not.
        let mean = [0.2, -0.1, 0.05];
        alpha.push([0, 1, 2].map(|d| (w[d] + 0.3 * g[d] + mean[d]) * h * h * h));
        want.push(w.map(|v| v * h * h * h));
    }
    let m = x.len();
    let mut p = VortexParticles::new(x, alpha, vec![h; m], vec![h * h * h; m]).unwrap();
    let removed = project_divergence_free(&mut p, &pbox, n).unwrap();
    let worst = p
        .alpha
        .iter()
        .zip(&want)
        .map(|(a, b)| (0..3).map(|d| (a[d] - b[d]).abs()).fold(0.0, f64::max))
        .fold(0.0, f64::max);
    println!("took out {removed:.3} of the field; off the solenoidal part by {worst:.1e}");
    assert!(worst < 1e-14 && removed > 0.1, "{worst} {removed}");
    // Particles that do not fill the lattice are refused.
    let e = project_divergence_free(&mut p.range(0..10), &pbox, n).unwrap_err();
    assert!(e.to_string().contains("lattice"), "{e}");
}

#[test]
fn diffusion_on_the_lattice_is_the_heat_equation_exactly() {
    // w_z = sin(kx) cos(ky) in a box of side 3 (not 2 pi: the wavenumbers'
    // units checked), one mode of |k|^2 = 2 (2 pi / 3)^2: diffused over
    // nu t it is itself times exp(-nu t |k|^2), the projection leaving it
    // (divergence-free) as it is.
    let (n, side) = (12, 3.0);
    let pbox = PeriodicBox::cube([-1.0, 0.0, 2.0], side);
    let (h, k) = (side / n as f64, TAU / side);
    let (mut x, mut alpha) = (vec![], vec![]);
    for i in 0..n * n * n {
        let c = [i % n, (i / n) % n, i / (n * n)].map(|j| (j as f64 + 0.5) * h);
        x.push([c[0] - 1.0, c[1], c[2] + 2.0]);
        alpha.push([0.0, 0.0, (k * c[0]).sin() * (k * c[1]).cos() * h * h * h]);
    }
    let m = x.len();
    let mut p = VortexParticles::new(x, alpha.clone(), vec![h; m], vec![h * h * h; m]).unwrap();
    let nu_t = 0.013;
    let filter = LatticeFilter {
        project: true,
        diffuse: nu_t,
    };
    let removed = filter_lattice(&mut p, &pbox, n, filter).unwrap();
    let decay = (-nu_t * 2.0 * k * k).exp();
    let worst = p
        .alpha
        .iter()
        .zip(&alpha)
        .map(|(a, b)| {
            (0..3)
                .map(|d| (a[d] - decay * b[d]).abs())
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max);
    println!("decayed by {decay:.6}, off by {worst:.1e}, projection took {removed:.1e}");
    assert!(worst < 1e-15 && removed < 1e-14, "{worst} {removed}");
    let bad = LatticeFilter {
        project: false,
        diffuse: -1.0,
    };
    let e = filter_lattice(&mut p, &pbox, n, bad).unwrap_err();
    assert!(e.to_string().contains("diffusion"), "{e}");
}

#[test]
fn interpolated_blobs_give_the_lattice_vorticity_at_its_points() {
    // Taylor-Green vorticity on the 12^3 cell centres, cores of 1.3
    // spacings: the blobs' vorticity summed naively (periodic images)
    // at the points is the vorticity itself after the interpolation, and
    // smoothed before it.
    let (n, pbox) = (12, PeriodicBox::cube([0.0; 3], TAU));
    let h = TAU / n as f64;
    let sigma = 1.3 * h;
    let (x, want) = taylor_green_lattice(n);
    let alpha = want.iter().map(|w| w.map(|v| v * h * h * h)).collect();
    let m = x.len();
    let mut p = VortexParticles::new(x, alpha, vec![sigma; m], vec![h * h * h; m]).unwrap();
    let blobs = |p: &VortexParticles, at: [f64; 3]| -> [f64; 3] {
        let norm = 1.0 / (TAU.powf(1.5) * sigma * sigma * sigma);
        let mut w = [0.0; 3];
        for (xj, aj) in p.x.iter().zip(&p.alpha) {
            for img in 0..27 {
                let s = [img % 3, (img / 3) % 3, img / 9].map(|k| (k as f64 - 1.0) * TAU);
                let r2: f64 = (0..3).map(|a| (at[a] - xj[a] - s[a]).powi(2)).sum();
                let g = norm * (-0.5 * r2 / (sigma * sigma)).exp();
                for d in 0..3 {
                    w[d] += aj[d] * g;
                }
            }
        }
        w
    };
    let worst = |p: &VortexParticles| {
        (0..m)
            .step_by(37)
            .map(|i| rel(blobs(p, p.x[i]), want[i]))
            .fold(0.0, f64::max)
    };
    let before = worst(&p);
    let factor = interpolate_on_lattice(&mut p, &pbox, n).unwrap();
    let after = worst(&p);
    println!("blobs off the lattice's vorticity by {before:.2e} before, {after:.1e} after (modes multiplied by up to {factor:.1})");
    assert!(before > 0.1 && after < 1e-12, "{before} {after}");
    // Cores of several sizes are refused.
    p.sigma[5] *= 1.1;
    let e = interpolate_on_lattice(&mut p, &pbox, n).unwrap_err();
    assert!(e.to_string().contains("core"), "{e}");
}

#[test]
fn the_lattice_carries_the_taylor_green_energy() {
    // The Taylor-Green vorticity on the cell centres is one mode: the
    // velocity it is the curl of has K = 1/8 (at any lattice size).
    let pbox = PeriodicBox::cube([0.0; 3], TAU);
    for n in [8, 12] {
        let h = TAU / n as f64;
        let (x, w) = taylor_green_lattice(n);
        let alpha = w.iter().map(|w| w.map(|v| v * h * h * h)).collect();
        let m = x.len();
        let p = VortexParticles::new(x, alpha, vec![h; m], vec![h * h * h; m]).unwrap();
        let k = lattice_energy(&p, &pbox, n).unwrap();
        println!("{n}^3: K {k:.15}");
        assert!((k - 0.125).abs() < 1e-14, "{k}");
    }
}
