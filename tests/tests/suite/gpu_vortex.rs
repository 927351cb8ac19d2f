//! GPU tests of the vortex layer's resident particles
//! (`fmm_vortex::DeviceVortex`): steps on the device give what steps
//! through the host give, for every scheme, with the cores spreading; f32
//! sums at a tolerance stay near the f64 ones; a run carried over to the
//! host's stepper (a checkpoint) and back resumes bit for bit; a state
//! that stops being finite is an error naming the particle.
//!
//! Run on the GPU host: `.gpu/suite --ignored gpu_vortex::`.

use fmm_core::cuda::Gpu;
use fmm_core::{Backend, Method};
use fmm_vortex::*;
use rand::{Rng, SeedableRng};

fn gpu() -> &'static Gpu {
    Gpu::shared().expect("these tests need a CUDA GPU")
}

/// A ring with its core resolved, moved and turned at random a little
/// (fresh inputs each run: the seed is printed).
fn jittered_ring() -> VortexParticles {
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut p = Ring::resolved(1.0, 1.0, 0.15, 2, 1.0).particles().unwrap();
    for i in 0..p.len() {
        for c in 0..3 {
            p.x[i][c] += 0.01 * rng.gen_range(-1.0..1.0);
            p.alpha[i][c] *= 1.0 + 0.05 * rng.gen_range(-1.0..1.0);
        }
        p.sigma[i] *= 1.0 + 0.1 * rng.gen_range(0.0..1.0);
    }
    p
}

fn solver(backend: Backend, method: Method, precision: Precision) -> Solver {
    Solver {
        backend,
        method,
        precision,
        ..Solver::default()
    }
}

/// The largest difference of positions, strengths and cores, relative to
/// the largest value of each.
fn worst(a: &VortexParticles, b: &VortexParticles) -> f64 {
    let rel = |x: &[f64], y: &[f64]| {
        let scale = y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        x.iter()
            .zip(y)
            .fold(0.0f64, |m, (u, v)| m.max((u - v).abs() / scale))
    };
    let flat = |v: &[[f64; 3]]| v.iter().flatten().copied().collect::<Vec<_>>();
    rel(&flat(&a.x), &flat(&b.x))
        .max(rel(&flat(&a.alpha), &flat(&b.alpha)))
        .max(rel(&a.sigma, &b.sigma))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn resident_steps_give_the_host_steps_for_every_scheme() {
    let p = jittered_ring();
    let (dt, nu, steps) = (0.05, 0.002, 3);
    let host = solver(Backend::Cpu, Method::direct(), Precision::F64);
    let device = solver(Backend::Cuda, Method::direct(), Precision::F64);
    for scheme in [Scheme::Ab2, Scheme::Rk2, Scheme::Rk3, Scheme::Rk4] {
        let mut q = p.clone();
        let mut hs = Stepper::new(scheme);
        let mut first_host = None;
        for _ in 0..steps {
            first_host = Some(hs.step_particles(&mut q, dt, |s| host.rates(s)).unwrap());
            spread_cores(&mut q, nu, dt).unwrap();
        }
        let mut d = DeviceVortex::<f64>::upload(gpu(), &p).unwrap();
        let mut ds = d.stepper_from(&Stepper::new(scheme)).unwrap();
        for step in 0..steps {
            let r = d.step(&mut ds, &device, dt).unwrap();
            // Adams-Bashforth starts by Heun.
            let want = if scheme == Scheme::Ab2 && step == 0 {
                2
            } else {
                scheme.stages()
            };
            assert_eq!(r.evaluations, want, "{scheme:?} step {step}");
            d.spread_cores(nu, dt).unwrap();
        }
        let got = d.download().unwrap();
        let e = worst(&got, &q);
        println!(
            "{scheme:?}: {} particles, {steps} steps: worst relative difference {e:.2e}",
            p.len()
        );
        assert!(e < 1e-11, "{scheme:?}: {e}");
        // The rates at the last step's start, as the host's.
        let (rd, rh) = (
            d.rates_at_step_start().unwrap().unwrap(),
            first_host.unwrap(),
        );
        let ue =
            rd.u.iter()
                .zip(&rh.u)
                .flat_map(|(a, b)| (0..3).map(move |c| (a[c] - b[c]).abs()))
                .fold(0.0f64, f64::max);
        assert!(
            ue < 1e-11,
            "{scheme:?}: rates at the step's start differ by {ue}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_resident_steps_at_a_tolerance_stay_near_the_f64_steps() {
    let p = Ring::resolved(1.0, 1.0, 0.1, 3, 1.0).particles().unwrap();
    let dt = 0.02;
    let exact = solver(Backend::Cuda, Method::direct(), Precision::F64);
    let fast = solver(Backend::Cuda, Method::tolerance(1e-4), Precision::F32);
    let mut q = p.clone();
    let mut hs = Stepper::new(Scheme::Ab2);
    let mut d = DeviceVortex::<f32>::upload(gpu(), &p).unwrap();
    let mut ds = d.stepper_from(&hs).unwrap();
    for _ in 0..5 {
        hs.step_particles(&mut q, dt, |s| exact.rates(s)).unwrap();
        let r = d.step(&mut ds, &fast, dt).unwrap();
        let a = r.achieved.expect("a tolerance says what it met");
        assert!(a.estimated_error <= 1e-4, "{a:?}");
    }
    let got = d.download().unwrap();
    // The displacement's error, relative to the displacement.
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..p.len() {
        for c in 0..3 {
            let (a, b) = (got.x[i][c] - p.x[i][c], q.x[i][c] - p.x[i][c]);
            num += (a - b) * (a - b);
            den += b * b;
        }
    }
    let e = (num / den).sqrt();
    println!(
        "{} particles, 5 AB2 steps, f32 at 1e-4 against f64 direct: displacement off by {e:.2e}",
        p.len()
    );
    assert!(e < 1e-3, "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_resident_run_resumes_from_the_hosts_copy_bit_for_bit() {
    let p = jittered_ring();
    let s = solver(Backend::Cuda, Method::direct(), Precision::F64);
    let dt = 0.05;
    let mut whole = DeviceVortex::<f64>::upload(gpu(), &p).unwrap();
    let mut ws = whole.stepper_from(&Stepper::new(Scheme::Ab2)).unwrap();
    for _ in 0..4 {
        whole.step(&mut ws, &s, dt).unwrap();
    }
    let mut a = DeviceVortex::<f64>::upload(gpu(), &p).unwrap();
    let mut sa = a.stepper_from(&Stepper::new(Scheme::Ab2)).unwrap();
    for _ in 0..2 {
        a.step(&mut sa, &s, dt).unwrap();
    }
    // What a checkpoint holds, written and read back.
    let dir = std::env::temp_dir().join(format!("gpu_vortex_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.ckpt");
    Checkpoint {
        step: 2,
        time: 2.0 * dt,
        particles: a.download().unwrap(),
        stepper: a.stepper_to_host(&sa).unwrap(),
    }
    .save(&path)
    .unwrap();
    let c = Checkpoint::load(&path).unwrap();
    let mut b = DeviceVortex::<f64>::upload(gpu(), &c.particles).unwrap();
    let mut sb = b.stepper_from(&c.stepper).unwrap();
    for _ in 0..2 {
        b.step(&mut sb, &s, dt).unwrap();
    }
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(b.download().unwrap(), whole.download().unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_state_that_overflows_is_an_error_naming_the_particle() {
    // Strengths near f32's largest: the stretching overflows the f32 sums
    // and the state stops being finite.
    let mut p = Ring::line(1.0, 1.0, 0.1, 64).particles().unwrap();
    for a in &mut p.alpha {
        *a = a.map(|c| c * 1e37);
    }
    let mut d = DeviceVortex::<f32>::upload(gpu(), &p).unwrap();
    let mut st = d.stepper_from(&Stepper::new(Scheme::Rk2)).unwrap();
    let s = solver(Backend::Cuda, Method::direct(), Precision::F32);
    let e = d.step(&mut st, &s, 1.0).unwrap_err();
    assert!(e.to_string().contains("not finite after a step"), "{e}");
    let e = d.step(&mut st, &s, 0.0).unwrap_err();
    assert!(e.to_string().contains("time step"), "{e}");
}

/// The jittered ring lifted to sit `h` above the ground `z = 0`.
fn ring_over_ground(h: f64) -> VortexParticles {
    let mut p = jittered_ring();
    for x in &mut p.x {
        x[2] += h;
    }
    p
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn over_the_ground_resident_steps_give_the_host_steps() {
    // The images made on the device (a mirror kernel), the targets given
    // positions of their own, the side checked by a reduction.
    let p = ring_over_ground(0.5);
    let (dt, steps) = (0.05, 3);
    let ground = ground_plane(0.0);
    let host = solver(Backend::Cpu, Method::direct(), Precision::F64).in_domain(ground);
    let device = solver(Backend::Cuda, Method::direct(), Precision::F64).in_domain(ground);
    let fast = solver(Backend::Cuda, Method::tolerance(1e-6), Precision::F64).in_domain(ground);
    let mut q = p.clone();
    let mut hs = Stepper::new(Scheme::Rk2);
    for _ in 0..steps {
        hs.step_particles(&mut q, dt, |s| host.rates(s)).unwrap();
    }
    for (name, s, tol) in [("direct", &device, 1e-11), ("tolerance 1e-6", &fast, 1e-5)] {
        let mut d = DeviceVortex::<f64>::upload(gpu(), &p).unwrap();
        let mut ds = d.stepper_from(&Stepper::new(Scheme::Rk2)).unwrap();
        for _ in 0..steps {
            d.step(&mut ds, s, dt).unwrap();
        }
        let e = worst(&d.download().unwrap(), &q);
        println!("over the ground, {name}: worst relative difference {e:.2e}");
        assert!(e < tol, "{name}: {e}");
    }
    // The GPU through the host path, and no flow through the ground.
    let at: Vec<[f64; 3]> = (0..200)
        .map(|k| [0.01 * k as f64 - 1.0, 0.3, 0.0])
        .collect();
    let (_, u) = device.rates_with(&p, &at).unwrap();
    let (_, want) = host.rates_with(&p, &at).unwrap();
    let (mut normal, mut along, mut diff) = (0.0f64, 0.0f64, 0.0f64);
    for (v, w) in u.iter().zip(&want) {
        normal = normal.max(v[2].abs());
        along = along.max(v[0].hypot(v[1]));
        diff = diff.max((0..3).map(|c| (v[c] - w[c]).abs()).fold(0.0, f64::max));
    }
    println!("on the ground: |u_z| <= {normal:.1e} of |u_t| {along:.3}; GPU vs CPU {diff:.1e}");
    assert!(normal < 1e-13 * along && diff < 1e-12 * along);
    // A particle pushed below the ground is named on the device too.
    let mut below = p.clone();
    below.x[5][2] = -0.1;
    let mut d = DeviceVortex::<f64>::upload(gpu(), &below).unwrap();
    let mut ds = d.stepper_from(&Stepper::new(Scheme::Rk2)).unwrap();
    let e = d.step(&mut ds, &device, dt).unwrap_err().to_string();
    assert!(e.contains("source 5 lies below the wall z = 0"), "{e}");
}

/// A rotor's wake a revolution old and dust over the ground, some of it
/// resting on the bed below the rotor, some airborne (fresh each run).
fn wake_and_dust(n: usize) -> (Wake, Passive) {
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // The hub low, so that a revolution's wake blows over the bed.
    let rotor = Rotor::hover(
        4,
        1.0,
        std::f64::consts::TAU,
        0.008,
        [0.0, 0.0, 0.5],
        0.1,
        2,
    )
    .unwrap();
    let mut wake = Wake::new(rotor).unwrap();
    let cpu = solver(Backend::Cpu, Method::direct(), Precision::F64).in_domain(ground_plane(0.0));
    let mut none = Passive::inertial(vec![], vec![], 0.088, [0.0, 0.0, -0.065])
        .unwrap()
        .over_ground(0.0)
        .unwrap();
    for _ in 0..36 {
        wake.step_with_dust(&mut none, 1.0 / 36.0, &cpu).unwrap();
    }
    let x: Vec<[f64; 3]> = (0..n)
        .map(|i| {
            let z = if i % 2 == 0 {
                0.0
            } else {
                rng.gen_range(0.01..1.5)
            };
            [rng.gen_range(-2.5..2.5), rng.gen_range(-2.5..2.5), z]
        })
        .collect();
    let v = (0..n)
        .map(|i| match x[i][2] > 0.0 {
            true => [0, 1, 2].map(|_| rng.gen_range(-0.3..0.3)),
            false => [0.0; 3],
        })
        .collect();
    let dust = Passive::inertial(x, v, 0.088, [0.0, 0.0, -0.065])
        .unwrap()
        .over_ground(0.0)
        .unwrap()
        .with_pickup(Pickup {
            reference_height: 0.01,
            roughness: 1.25e-5,
            threshold: 0.003,
            launch: 1.0,
        })
        .unwrap();
    (wake, dust)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn resident_dust_steps_give_the_host_dust_steps() {
    let (wake, dust) = wake_and_dust(20_000);
    let dt = 1.0 / 36.0;
    for (precision, method, tol) in [
        (Precision::F64, Method::direct(), 1e-11),
        (Precision::F32, Method::tolerance(1e-4), 1e-4),
    ] {
        // The host's dust evaluated on the GPU through host copies.
        let s = solver(Backend::Cuda, method.clone(), precision).in_domain(ground_plane(0.0));
        let (mut host_wake, mut host) = (wake.clone(), dust.clone());
        let mut dev_wake = wake.clone();
        let dev = match precision {
            Precision::F64 => {
                let mut d = DeviceDust::<f64>::upload(gpu(), &dust).unwrap();
                for _ in 0..5 {
                    host_wake.step_with_dust(&mut host, dt, &s).unwrap();
                    dev_wake.step_with_dust(&mut d, dt, &s).unwrap();
                }
                d.download().unwrap()
            }
            Precision::F32 => {
                let mut d = DeviceDust::<f32>::upload(gpu(), &dust).unwrap();
                for _ in 0..5 {
                    host_wake.step_with_dust(&mut host, dt, &s).unwrap();
                    dev_wake.step_with_dust(&mut d, dt, &s).unwrap();
                }
                d.download().unwrap()
            }
        };
        // Positions against the distance each particle moved.
        let moved = host
            .x
            .iter()
            .zip(&dust.x)
            .map(|(a, b)| (0..3).map(|c| (a[c] - b[c]).abs()).fold(0.0, f64::max))
            .fold(0.0, f64::max);
        let diff = host
            .x
            .iter()
            .zip(&dev.x)
            .map(|(a, b)| (0..3).map(|c| (a[c] - b[c]).abs()).fold(0.0, f64::max))
            .fold(0.0, f64::max);
        println!(
            "{precision:?}: dust moved up to {moved:.3}, device against host {diff:.1e}; lifts {} and {}",
            host.lifted, dev.lifted
        );
        assert!(host.lifted > 0, "the wake lifts some of the bed");
        assert!(moved > 1e-3, "the dust moves");
        assert!(diff <= tol * moved, "{precision:?}: {diff:e} of {moved:e}");
        if precision == Precision::F64 {
            assert_eq!(host.lifted, dev.lifted);
            assert_eq!(host.deposited(), dev.deposited());
        }
    }
}

/// In a box periodic along all three axes the resident particles' sums
/// take the strengths less their mean, as the host's do (the periodic sums
/// refuse a net strength): particles with a net strength step resident
/// as through the host (the GPU's FMM at the same settings in f64 for
/// both; the CPU's periodic FMM differs from it by 2e-6 here, its far
/// images summed another way).
#[test]
#[ignore = "needs a CUDA GPU"]
fn resident_steps_in_a_periodic_box_take_the_mean_strength_out() {
    use fmm_core::{Domain, PeriodicBox};
    use std::f64::consts::TAU;
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n = 12;
    let h = TAU / n as f64;
    let mut x = Vec::new();
    for i in 0..n * n * n {
        let (a, b, c) = (i % n, (i / n) % n, i / (n * n));
        x.push([a, b, c].map(|k| (k as f64 + 0.5 + 0.2 * rng.gen_range(-1.0..1.0)) * h));
    }
    let alpha: Vec<[f64; 3]> = (0..x.len())
        .map(|_| [0.3, -0.2, 0.1].map(|m| h * h * h * (m + rng.gen_range(-1.0..1.0))))
        .collect();
    let k = x.len();
    let p = VortexParticles::new(x, alpha, vec![h; k], vec![h * h * h; k]).unwrap();
    let domain = Domain::Periodic(PeriodicBox::cube([0.0; 3], TAU));
    let at = |backend| Solver {
        backend,
        method: Method::fmm(10, 0.5),
        precision: Precision::F64,
        domain,
        stretching: Default::default(),
    };
    let solver = at(Backend::Cuda);
    let (dt, steps) = (0.02, 3);
    let mut q = p.clone();
    let mut hs = Stepper::new(Scheme::Ab2);
    for _ in 0..steps {
        hs.step_particles(&mut q, dt, |s| solver.rates(s)).unwrap();
    }
    let mut d = DeviceVortex::<f64>::upload(gpu(), &p).unwrap();
    let mut ds = d.stepper_from(&Stepper::new(Scheme::Ab2)).unwrap();
    for _ in 0..steps {
        d.step(&mut ds, &solver, dt).unwrap();
    }
    let e = worst(&d.download().unwrap(), &q);
    println!("{k} particles, net strength, {steps} AB2 steps in a periodic box: {e:.2e}");
    assert!(e < 1e-11, "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_transpose_scheme_on_the_gpu_gives_the_cpus_and_resident_particles_refuse_it() {
    // The jittered ring's strengths no longer follow its vorticity: the
    // schemes differ, and the GPU's transposed rates must be the CPU's.
    let p = jittered_ring();
    let transpose = |backend| {
        solver(backend, Method::direct(), Precision::F64)
            .with_stretching(StretchingScheme::Transpose)
    };
    let host = transpose(Backend::Cpu).rates(&p).unwrap();
    let device = transpose(Backend::Cuda).rates(&p).unwrap();
    let classical = solver(Backend::Cpu, Method::direct(), Precision::F64)
        .rates(&p)
        .unwrap();
    let gap = |a: &[[f64; 3]], b: &[[f64; 3]]| {
        let top = b.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
        a.iter()
            .flatten()
            .zip(b.iter().flatten())
            .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
            / top
    };
    let (du, ds, schemes) = (
        gap(&device.u, &host.u),
        gap(&device.dalpha, &host.dalpha),
        gap(&classical.dalpha, &host.dalpha),
    );
    println!(
        "{} particles, f64 direct: GPU against CPU u {du:.2e}, transposed stretching {ds:.2e}; the schemes {schemes:.2e} apart",
        p.len()
    );
    assert!(du < 1e-11 && ds < 1e-11, "{du} {ds}");
    assert!(schemes > 1e-4, "{schemes}");
    // f32 at a tolerance (a tree method with a far field of its own: the
    // kernel declares none).
    let f32 = solver(Backend::Cuda, Method::tolerance(1e-4), Precision::F32)
        .with_stretching(StretchingScheme::Transpose)
        .rates(&p)
        .unwrap();
    let e = gap(&f32.dalpha, &host.dalpha);
    println!("f32 at 1e-4 on the GPU: transposed stretching {e:.2e} from the f64 direct sum");
    assert!(e < 1e-3, "{e}");
    let mut d = DeviceVortex::<f64>::upload(gpu(), &p).unwrap();
    let err = d.rates(&transpose(Backend::Cuda)).unwrap_err().to_string();
    assert!(err.contains("transpose scheme"), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU: `suite --ignored gpu_vortex::` on the GPU host (docs/GPU.md; scripts/gpu_mpi_scaling.sh weak runs it)"]
fn the_gpus_remeshing_spread_is_the_hosts() {
    use fmm_core::PeriodicBox;
    use fmm_vortex::remesh::Lattice;
    use fmm_vortex::remesh_parts::{floor, PartRemesh};
    // Open space: a jittered ring onto a lattice of its core's fifth.
    let ring = jittered_ring();
    let open = Lattice::Open {
        origin: [-1.3, -1.3, -0.4],
        h: 0.03,
    };
    // A periodic box: a lattice's points each moved up to 0.15 spacings
    // (every point covered, as a remeshed flow's are), all of them (the
    // part's axes wrap whole) and a slab of four layers (a part's box
    // across the box's face, its z axis not whole).
    let seed: u64 = rand::thread_rng().gen();
    println!("box seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (side, n) = (2.0, 24);
    let h = side / n as f64;
    let jittered = |layers: std::ops::Range<usize>, rng: &mut rand::rngs::StdRng| {
        let mut p = VortexParticles {
            x: Vec::new(),
            alpha: Vec::new(),
            sigma: Vec::new(),
            volume: Vec::new(),
        };
        for k in layers {
            for j in 0..n {
                for i in 0..n {
                    let at = |g: usize, rng: &mut rand::rngs::StdRng| {
                        ((g as f64 + 0.5 + rng.gen_range(-0.15..0.15)) * h).rem_euclid(side)
                    };
                    p.x.push([at(i, rng), at(j, rng), at(k, rng)]);
                    p.alpha.push([0, 1, 2].map(|_| rng.gen_range(-1.0..1.0)));
                    p.sigma.push(h * rng.gen_range(1.0..1.5));
                    p.volume.push(h * h * h);
                }
            }
        }
        p
    };
    let periodic = Lattice::Periodic {
        pbox: PeriodicBox::cube([0.0; 3], side),
        n,
    };
    let whole = jittered(0..n, &mut rng);
    let slab = jittered(n - 2..n + 2, &mut rng);
    for (what, p, lattice) in [
        ("a ring in open space", &ring, &open),
        ("a periodic box, every axis whole", &whole, &periodic),
        ("a slab across a periodic box's face", &slab, &periodic),
    ] {
        let made = |gpu: Option<&Gpu>| {
            let part = PartRemesh::spread_on(gpu, p, lattice).unwrap();
            let f = floor(0.0, part.largest()).unwrap();
            (part.reach(), part.particles(f, h).unwrap())
        };
        let (host_reach, host) = made(None);
        let (gpu_reach, on_gpu) = made(Some(gpu()));
        assert_eq!(gpu_reach, host_reach, "{what}");
        assert_eq!(on_gpu.len(), host.len(), "{what}");
        let w = worst(&on_gpu, &host);
        println!("{what}: {} particles, {w:.2e} from the host's", host.len());
        assert!(w < 1e-12, "{what}: {w:e}");
    }
}
