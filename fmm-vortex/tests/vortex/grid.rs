//! The flow on a grid: the velocity of Taylor-Green particles in a
//! periodic box at the grid's points against the closed form, the energy
//! spectrum of a known field, a few steps of the particles against the
//! spectral solver from the same field (Taylor-Green, and isotropic
//! turbulence remeshed), and the VTK ImageData file.

use std::f64::consts::TAU;

use fmm_core::{Backend, Domain, Method, PeriodicBox};
use fmm_vortex::grid::{write_vti, Grid};
use fmm_vortex::spectral::{spectrum_of, SpectralNs};
use fmm_vortex::*;

fn velocity(x: [f64; 3]) -> [f64; 3] {
    let ([sx, sy, _], [cx, cy, cz]) = (x.map(f64::sin), x.map(f64::cos));
    [sx * cy * cz, -cx * sy * cz, 0.0]
}

/// Taylor-Green particles on the `n^3` cell centres of `[0, 2 pi)^3`,
/// cores one spacing, strengths the vorticity times the cell's volume.
fn taylor_green(n: usize) -> VortexParticles {
    let h = TAU / n as f64;
    let (mut x, mut alpha) = (vec![], vec![]);
    for i in 0..n * n * n {
        let c = [i % n, (i / n) % n, i / (n * n)].map(|j| (j as f64 + 0.5) * h);
        let ([sx, sy, sz], [cx, cy, cz]) = (c.map(f64::sin), c.map(f64::cos));
        let w = [-cx * sy * sz, -sx * cy * sz, 2.0 * sx * sy * cz];
        x.push(c);
        alpha.push(w.map(|v| v * h * h * h));
    }
    let m = x.len();
    VortexParticles::new(x, alpha, vec![h; m], vec![h * h * h; m]).unwrap()
}

/// The papers' tolerance, 1e-4: these few particles' cores are wide
/// against the box (a spacing of 0.79), and the periodic sums' error
/// stops near 1e-5 (3.5e-6 to 3.2e-5 here, with either far field).
fn periodic() -> Solver {
    Solver {
        backend: Backend::Cpu,
        method: Method::tolerance(1e-4),
        precision: Precision::F64,
        domain: Domain::Periodic(PeriodicBox::cube([0.0; 3], TAU)),
        stretching: Default::default(),
    }
}

fn grid(n: usize) -> Grid {
    Grid {
        origin: [0.0; 3],
        side: TAU,
        n,
    }
}

#[test]
fn the_particles_velocity_on_the_grid_is_the_taylor_green_velocity() {
    let n = 8;
    let (g, h) = (grid(n), TAU / n as f64);
    let u = periodic().velocity_on(&taylor_green(n), &g).unwrap();
    let worst = g
        .points()
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let w = velocity(x).map(|v| v * (-1.5 * h * h).exp());
            (0..3).map(|c| (u[c][i] - w[c]).abs()).fold(0.0, f64::max)
        })
        .fold(0.0, f64::max);
    println!("{n}^3 particles: the grid's velocity within {worst:.1e} of the closed form");
    // The blobs' sum at the cell centres is exponentially accurate in
    // sigma / h (about exp(-2 pi^2) at one spacing): the velocity is the
    // field smoothed by the cores, exp(-3 sigma^2 / 2) of it, to the
    // sums' tolerance.
    assert!(worst < 3e-4, "{worst}");
    // All its energy in the shell |k| = sqrt 3.
    let e = spectrum_of(&u, n).unwrap();
    let rest = e.iter().sum::<f64>() - e[2];
    let want = 0.125 * (-3.0 * h * h).exp();
    println!(
        "E(sqrt 3) = {:.8} against {want:.8}, the other shells {rest:.1e}",
        e[2]
    );
    assert!((e[2] - want).abs() < 1e-4 && rest < 1e-7, "{e:?}");
}

#[test]
fn a_few_steps_of_the_taylor_green_particles_converge_to_the_spectral_solver() {
    // Against the spectral field smoothed by the particles' cores (what
    // the blobs represent of it), at t = 0.2 on 8^3 and 16^3: the blob
    // method's error, first order in the spacing with cores of one.
    let (nu, dt, steps) = (1.0 / 1600.0, 0.2, 1);
    let difference = |n: usize| {
        let (solver, g) = (periodic(), grid(n));
        let mut p = taylor_green(n);
        let mut spectral = SpectralNs::from_fn(n, TAU, nu, velocity).unwrap();
        let mut stepper = Stepper::new(Scheme::Rk4);
        for _ in 0..steps {
            stepper
                .step_particles(&mut p, dt, |s| solver.rates(s))
                .unwrap();
            spread_cores(&mut p, nu, dt).unwrap();
            spectral.step(dt).unwrap();
        }
        let u = solver.velocity_on(&p, &g).unwrap();
        let k = u.iter().flatten().map(|v| v * v).sum::<f64>() * 0.5 / (n * n * n) as f64;
        let want = spectral.smoothed_energy(p.sigma[0]);
        println!("{n}^3, t = 0.2: K {k:.8} against the smoothed spectral field's {want:.8}");
        (k / want - 1.0).abs()
    };
    let (coarse, fine) = (difference(8), difference(16));
    println!("relative differences {coarse:.1e} and {fine:.1e}");
    assert!(coarse < 5e-3 && fine < 0.7 * coarse, "{coarse} {fine}");
}

#[test]
fn the_grids_velocity_is_written_as_image_data() {
    let n = 4;
    let g = grid(n);
    let u = [vec![1.0; 64], vec![2.0; 64], vec![3.0; 64]];
    let dir = std::env::temp_dir().join(format!("fmm-vti-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("u.vti");
    write_vti(&path, &g, &[("velocity", &u)]).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("WholeExtent=\"0 3 0 3 0 3\"") && text.contains("Name=\"velocity\""));
    let start = text.find("\n_").unwrap() + 2;
    let len = u64::from_le_bytes(bytes[start..start + 8].try_into().unwrap());
    assert_eq!(len, 64 * 3 * 8);
    let first = f64::from_le_bytes(bytes[start + 8 + 16..start + 8 + 24].try_into().unwrap());
    assert_eq!(first, 3.0);
    let short = [vec![0.0; 3], vec![0.0; 64], vec![0.0; 64]];
    assert!(write_vti(&dir.join("bad.vti"), &g, &[("u", &short)]).is_err());
    assert!(!dir.join("bad.vti").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_few_remeshed_steps_of_isotropic_turbulence_follow_the_spectral_solver() {
    // The turbulence case's scheme on 16^3 (its example at 64^3 and 128^3
    // on a GPU): a random isotropic field, the particles' strengths
    // interpolated so that their blobs give its vorticity at the grid
    // points, three steps each remeshed onto the grid, the lattice's
    // vorticity projected and diffused there; the kinetic energy against
    // the spectral solver's from the same field.
    let (n, nu) = (16, 0.02);
    let h = TAU / n as f64;
    let mut spectral =
        SpectralNs::isotropic(n, TAU, nu, |k| spectral::passot_pouquet(k, 2.0), 5).unwrap();
    let pbox = PeriodicBox::cube([-0.5 * h; 3], TAU);
    let solver = Solver {
        domain: Domain::Periodic(pbox),
        ..periodic()
    };
    let g = grid(n);
    let w = spectral.vorticity();
    let alpha = (0..n * n * n)
        .map(|i| [w[0][i], w[1][i], w[2][i]].map(|v| v * h * h * h))
        .collect();
    let m = n * n * n;
    let mut p = VortexParticles::new(g.points(), alpha, vec![h; m], vec![h * h * h; m]).unwrap();
    remesh::interpolate_on_lattice(&mut p, &pbox, n).unwrap();
    let energy = |p: &VortexParticles| {
        let u = solver.velocity_on(p, &g).unwrap();
        u.iter().flatten().map(|v| v * v).sum::<f64>() * 0.5 / m as f64
    };
    let start = energy(&p) / spectral.energy() - 1.0;
    let dt = spectral.stable_dt(0.5);
    let mut stepper = Stepper::new(Scheme::Rk2);
    let filter = remesh::LatticeFilter {
        project: true,
        diffuse: nu * dt,
    };
    for _ in 0..3 {
        stepper
            .step_particles(&mut p, dt, |s| solver.rates(s))
            .unwrap();
        p = remesh::remesh(&p, &remesh::Lattice::Periodic { pbox, n }, 0.0).unwrap();
        remesh::filter_lattice(&mut p, &pbox, n, filter).unwrap();
        spectral.step(dt).unwrap();
    }
    let end = energy(&p) / spectral.energy() - 1.0;
    println!("K off the spectral solver's by {start:.1e} at the start, {end:.1e} after 3 steps of {dt:.3}");
    assert!(start.abs() < 1e-4 && end.abs() < 1e-2, "{start} {end}");
}

#[test]
fn in_a_periodic_box_the_sums_take_the_strengths_less_their_mean() {
    // A net strength (here 1e-3 of the strengths) is what the stretching
    // lets the strengths drift to; the periodic sums refuse one, so the
    // solver takes the mean out: the rates are those of the particles
    // with it taken out by hand.
    let n = 8;
    let mut p = taylor_green(n);
    let mut q = p.clone();
    let scale = p.alpha.iter().map(|a| diagnostics::norm(*a)).sum::<f64>() / p.len() as f64;
    for a in &mut p.alpha {
        a[0] += 1e-3 * scale;
    }
    let mean = p.alpha.iter().map(|a| a[0]).sum::<f64>() / p.len() as f64;
    for (a, b) in q.alpha.iter_mut().zip(&p.alpha) {
        a[0] = b[0] - mean;
    }
    let solver = periodic();
    let (got, want) = (solver.rates(&p).unwrap(), solver.rates(&q).unwrap());
    let worst = got
        .u
        .iter()
        .zip(&want.u)
        .chain(got.dalpha.iter().zip(&want.dalpha))
        .map(|(a, b)| diagnostics::norm([a[0] - b[0], a[1] - b[1], a[2] - b[2]]))
        .fold(0.0, f64::max);
    let top = want
        .u
        .iter()
        .map(|a| diagnostics::norm(*a))
        .fold(0.0, f64::max);
    println!(
        "with a net strength of 1e-3: the rates off those without by {:.1e} of the velocity",
        worst / top
    );
    assert!(worst < 1e-12 * top, "{worst} {top}");
}
