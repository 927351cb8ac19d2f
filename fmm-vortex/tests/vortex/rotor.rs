//! The rotor's wake and the dust it lifts: the wake blows down through
//! the disk at momentum theory's speed scale; the filaments' strengths
//! are their segments (the circulation kept along each trailer);
//! Stokes-drag dust under a uniform flow against the closed form; the
//! pickup's threshold; bad settings named.

use std::f64::consts::TAU;

use fmm_core::{Backend, Method};
use fmm_vortex::*;

fn direct() -> Solver {
    Solver {
        backend: Backend::Cpu,
        method: Method::direct(),
        precision: Precision::F64,
        domain: fmm_core::Domain::FreeSpace,
        stretching: Default::default(),
    }
}

/// `n` dust particles resting in a disk of `radius` (a sunflower spiral)
/// over the ground, lifted past the threshold friction velocity
/// `threshold`.
fn bed(n: usize, radius: f64, threshold: f64) -> Passive {
    let x: Vec<[f64; 3]> = (0..n)
        .map(|i| {
            let (r, phi) = (
                radius * ((i as f64 + 0.5) / n as f64).sqrt(),
                2.4 * i as f64,
            );
            [r * phi.cos(), r * phi.sin(), 0.0]
        })
        .collect();
    Passive::inertial(x, vec![[0.0; 3]; n], 0.088, [0.0, 0.0, -0.065])
        .unwrap()
        .over_ground(0.0)
        .unwrap()
        .with_pickup(Pickup {
            reference_height: 0.01,
            roughness: 1.25e-5,
            threshold,
            launch: 1.0,
        })
        .unwrap()
}

fn rotor() -> Rotor {
    Rotor::hover(4, 1.0, TAU, 0.008, [0.0, 0.0, 0.0], 0.1, 2).unwrap()
}

#[test]
fn the_thrust_sets_the_circulation_and_the_inflow() {
    let r = rotor();
    // Gamma = 2 pi C_T Omega R^2 / (blades (1 - 0.2^2)); v_h = Omega R
    // sqrt(C_T / 2).
    assert_eq!(r.circulation.len(), 1);
    assert!((r.circulation[0] - TAU * 0.008 * TAU / (4.0 * 0.96)).abs() < 1e-15);
    assert!((r.thrust_coefficient() - 0.008).abs() < 1e-15);
    assert!((r.hover_inflow() - TAU * 0.004f64.sqrt()).abs() < 1e-15);
    assert!((r.period() - 1.0).abs() < 1e-15);
    assert_eq!(
        r.trailed(),
        vec![(1.0, r.circulation[0]), (0.2, -r.circulation[0])]
    );
}

#[test]
fn a_tapered_loading_keeps_the_thrust_and_trails_its_steps() {
    // Four panels of 0.2 R from 0.2 R, Gamma_k = c r_k at their middles
    // (0.3, 0.5, 0.7, 0.9): the thrust per rho Omega a blade is
    // sum c r_k (b^2 - a^2) / 2 = c 0.2 sum r_k^2 = 0.328 c, so
    // C_T = 4 0.328 c / (pi (2 pi)) and c = 0.008 2 pi^2 / 1.312.
    let r = rotor().tapered(4).unwrap();
    let c = 0.008 * 2.0 * std::f64::consts::PI.powi(2) / 1.312;
    for (k, mid) in [0.3, 0.5, 0.7, 0.9].into_iter().enumerate() {
        assert!((r.circulation[k] - c * mid).abs() < 1e-15, "panel {k}");
    }
    assert!((r.thrust_coefficient() - 0.008).abs() < 1e-15);
    // The tip trails 0.9 c; each inner edge and the root the steps
    // (-0.2 c, and -0.3 c at the root); a blade's trailers sum to zero.
    let t = r.trailed();
    let want = [
        (1.0, 0.9),
        (0.8, -0.2),
        (0.6, -0.2),
        (0.4, -0.2),
        (0.2, -0.3),
    ];
    assert_eq!(t.len(), want.len());
    for ((radius, g), (wr, wg)) in t.iter().zip(want) {
        assert!(
            (radius - wr).abs() < 1e-15 && (g - wg * c).abs() < 1e-15,
            "{radius} {g}"
        );
    }
    assert!(t.iter().map(|x| x.1).sum::<f64>().abs() < 1e-15);
    let wake = Wake::new(r.clone()).unwrap();
    assert_eq!(wake.trailers.len(), 4 * 5);
    assert_eq!(wake.trailers[0].circulation, r.circulation[3]);
    let e = rotor().tapered(0).unwrap_err();
    assert!(e.to_string().contains("panels"), "{e}");
}

#[test]
fn the_wake_blows_down_through_the_disk() {
    // Four revolutions of wake in free space, no dust: the flow through
    // the disk's centre region is downward, of the order of v_h.
    let mut wake = Wake::new(rotor()).unwrap();
    let mut none = Passive::inertial(vec![], vec![], 0.1, [0.0; 3]).unwrap();
    for _ in 0..4 * 24 {
        wake.step_with_dust(&mut none, 1.0 / 24.0, &direct())
            .unwrap();
    }
    let p = wake.particles(wake.time).unwrap();
    let at: Vec<[f64; 3]> = (0..8)
        .map(|k| {
            let phi = TAU * k as f64 / 8.0;
            [0.5 * phi.cos(), 0.5 * phi.sin(), -0.05]
        })
        .collect();
    let u = direct().velocity_at(&p, &at).unwrap().u;
    let mean = u.iter().map(|u| u[2]).sum::<f64>() / u.len() as f64;
    let vh = wake.rotor.hover_inflow();
    println!("mean w at r = 0.5 below the disk: {mean:.4} (v_h {vh:.4})");
    assert!(
        mean < -0.5 * vh && mean > -2.5 * vh,
        "{mean} against v_h {vh}"
    );
    // Each trailer's segments carry its circulation: alpha = Gamma times
    // the segment, from the blade into the wake.
    let tip = &wake.trailers[0];
    let k = tip.nodes.len() - 1;
    let (a, b) = (tip.nodes[k - 1], tip.nodes[k]);
    let alpha = p.alpha[k - 1];
    for c in 0..3 {
        assert!((alpha[c] - tip.circulation * (a[c] - b[c])).abs() < 1e-15);
    }
}

#[test]
fn dust_in_a_uniform_flow_follows_the_drag_solution() {
    // No vortices near: u = 0; dust thrown at v0 slows as exp(-t/tau)
    // and falls at g tau, to round-off for any step.
    let (tau, g, v0) = (0.1, [0.0, 0.0, -2.0], [1.0, 0.5, 3.0]);
    let mut wake = Wake::new(Rotor {
        circulation: vec![0.0],
        ..rotor()
    })
    .unwrap();
    let mut q = Passive::inertial(vec![[0.0, 0.0, 10.0]], vec![v0], tau, g).unwrap();
    let (dt, steps) = (0.3, 5);
    for _ in 0..steps {
        wake.step_with_dust(&mut q, dt, &direct()).unwrap();
    }
    let t = dt * steps as f64;
    let e = (-t / tau).exp();
    for c in 0..3 {
        let w = g[c] * tau;
        let x = [0.0, 0.0, 10.0][c] + w * t + (v0[c] - w) * tau * (1.0 - e);
        let v = w + (v0[c] - w) * e;
        assert!(
            (q.x[0][c] - x).abs() < 1e-12,
            "x {c}: {} against {x}",
            q.x[0][c]
        );
        assert!(
            (q.v[0][c] - v).abs() < 1e-12,
            "v {c}: {} against {v}",
            q.v[0][c]
        );
    }
}

#[test]
fn the_flow_lifts_resting_dust_only_past_the_threshold() {
    let k = Pickup {
        reference_height: 0.01,
        roughness: 1e-5,
        threshold: 0.01,
        launch: 1.0,
    };
    // u* = 0.41 u / ln(1000): the threshold speed is 0.01 ln(1000) / 0.41.
    let speed = 0.01 * 1000f64.ln() / 0.41;
    assert!((k.friction_velocity(speed) - 0.01).abs() < 1e-15);
    // A line vortex's flow over the ground (a tube along y at height
    // 0.3 and its image): the speed along the ground peaks below it.
    let n = 400;
    let x: Vec<[f64; 3]> = (0..n).map(|i| [0.0, 0.1 * i as f64 - 20.0, 0.3]).collect();
    let alpha = vec![[0.0, 0.1 * 0.5, 0.0]; n];
    let tube = VortexParticles::new(x, alpha, vec![0.1; n], vec![1e-3; n]).unwrap();
    let s = direct().in_domain(ground_plane(0.0));
    let bed: Vec<[f64; 3]> = (0..21).map(|i| [0.1 * i as f64 - 1.0, 0.0, 0.0]).collect();
    let over: Vec<[f64; 3]> = bed.iter().map(|x| [x[0], x[1], 0.01]).collect();
    let u = s.velocity_at(&tube, &over).unwrap().u;
    let mut q = Passive::inertial(bed.clone(), vec![[0.0; 3]; 21], 0.05, [0.0, 0.0, -1.0])
        .unwrap()
        .over_ground(0.0)
        .unwrap()
        .with_pickup(k)
        .unwrap();
    Dust::advance(&mut q, &tube, 1e-3, &s).unwrap();
    for (i, (u, x)) in u.iter().zip(&q.x).enumerate() {
        let ustar = k.friction_velocity(u[0].hypot(u[1]));
        let lifted = x[2] > 0.0;
        assert_eq!(lifted, ustar > k.threshold, "particle {i}: u* {ustar}");
    }
    assert!(q.lifted > 0 && q.lifted < 21, "{} lifted", q.lifted);
}

#[test]
fn bad_rotors_and_pickups_are_named() {
    let e = Rotor::hover(0, 1.0, TAU, 0.008, [0.0; 3], 0.1, 2).unwrap_err();
    assert!(e.to_string().contains("blades"), "{e}");
    let e = Rotor::hover(4, -1.0, TAU, 0.008, [0.0; 3], 0.1, 2).unwrap_err();
    assert!(e.to_string().contains("radius"), "{e}");
    let e = Rotor::hover(4, 1.0, TAU, 0.008, [0.0; 3], 0.0, 2).unwrap_err();
    assert!(e.to_string().contains("core"), "{e}");
    let q = Passive::inertial(vec![[0.0; 3]], vec![[0.0; 3]], 0.1, [0.0; 3]).unwrap();
    let k = Pickup {
        reference_height: 0.01,
        roughness: 1e-5,
        threshold: 0.01,
        launch: 1.0,
    };
    // Not over a ground plane; then a roughness above the reference.
    let e = q.clone().with_pickup(k).unwrap_err();
    assert!(e.to_string().contains("ground"), "{e}");
    let rough = Pickup {
        roughness: 0.1,
        ..k
    };
    let e = q.over_ground(0.0).unwrap().with_pickup(rough).unwrap_err();
    assert!(e.to_string().contains("reference height"), "{e}");
    let tracers = Passive::tracers(vec![[0.0, 0.0, 1.0]]).unwrap();
    let mut wake = Wake::new(rotor()).unwrap();
    let e = wake
        .step_with_dust(&mut tracers.clone(), 0.01, &direct())
        .unwrap_err();
    assert!(e.to_string().contains("inertial"), "{e}");
}

#[test]
fn a_few_steps_of_the_brown_out_lift_dust_and_keep_everything_above_the_ground() {
    // The hub half a radius up: within a revolution and a half the wake
    // blows over the bed, lifts some of it, and nothing goes below.
    let rotor = Rotor::hover(4, 1.0, TAU, 0.008, [0.0, 0.0, 0.5], 0.1, 2).unwrap();
    let mut wake = Wake::new(rotor).unwrap();
    let mut dust = bed(400, 2.0, 0.0072);
    let s = direct().in_domain(ground_plane(0.0));
    for _ in 0..36 {
        wake.cull(5.0, 20.0);
        wake.step_with_dust(&mut dust, 1.0 / 24.0, &s).unwrap();
    }
    let aloft = dust.x.iter().filter(|x| x[2] > 0.0).count();
    let lowest = wake
        .trailers
        .iter()
        .flat_map(|t| t.nodes.iter())
        .fold(f64::INFINITY, |m, x| m.min(x[2]));
    println!(
        "{} lifts, {aloft} aloft, lowest node {lowest:.3}",
        dust.lifted
    );
    assert!(dust.lifted > 0 && aloft > 0);
    assert!(dust.x.iter().all(|x| x[2] >= 0.0) && lowest >= 0.0);
    // Eight trailers of one node, two more laid at the start of every
    // step but the first; none culled yet.
    assert_eq!(wake.nodes(), 8 * (1 + 2 * 35));
}

#[test]
fn a_resumed_brown_out_is_the_run_that_went_on_to_the_bit() {
    let rotor = Rotor::hover(2, 1.0, TAU, 0.008, [0.0, 0.0, 0.5], 0.1, 1)
        .and_then(|r| r.tapered(2))
        .unwrap();
    let dust = bed(200, 1.5, 0.003);
    let s = direct().in_domain(ground_plane(0.0));
    let steps = |wake: &mut Wake, dust: &mut Passive, k: usize| {
        for _ in 0..k {
            wake.cull(5.0, 0.5);
            wake.step_with_dust(dust, 1.0 / 16.0, &s).unwrap();
        }
    };
    let (mut wake, mut q) = (Wake::new(rotor).unwrap(), dust);
    steps(&mut wake, &mut q, 12);
    let dir = std::env::temp_dir().join(format!("fmm-wake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wake.ckpt");
    WakeCheckpoint {
        step: 12,
        wake: wake.clone(),
        dust: q.clone(),
    }
    .save(&path)
    .unwrap();
    steps(&mut wake, &mut q, 12);
    let c = WakeCheckpoint::load(&path).unwrap();
    assert_eq!(c.step, 12);
    let (mut w2, mut q2) = (c.wake, c.dust);
    steps(&mut w2, &mut q2, 12);
    assert!(q.lifted > 0, "the run lifts dust");
    assert_eq!(w2, wake, "the wake");
    assert_eq!(q2, q, "the dust");
    // A vortex checkpoint is not a wake's, and a changed file is refused.
    let bytes = std::fs::read(&path).unwrap();
    let mut changed = bytes.clone();
    changed[40] ^= 1;
    std::fs::write(&path, &changed).unwrap();
    let e = WakeCheckpoint::load(&path).unwrap_err().to_string();
    assert!(e.contains("changed"), "{e}");
    std::fs::write(&path, b"FMMVORTX and more bytes than that").unwrap();
    let e = WakeCheckpoint::load(&path).unwrap_err().to_string();
    assert!(e.contains("not a rotor wake checkpoint"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
