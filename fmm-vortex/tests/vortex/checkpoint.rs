//! A run stopped at a checkpoint and resumed ends where the run that went
//! on ends, to the bit; a bad checkpoint is refused by name.

use fmm_core::Backend;
use fmm_vortex::*;

fn solver() -> Solver {
    Solver::direct_f64(Backend::Cpu)
}

fn steps(c: &mut Checkpoint, k: usize, dt: f64) {
    let s = solver();
    for _ in 0..k {
        c.stepper
            .step_particles(&mut c.particles, dt, |p| s.rates(p))
            .unwrap();
        spread_cores(&mut c.particles, 1e-3, dt).unwrap();
        c.step += 1;
        c.time += dt;
    }
}

#[test]
fn a_resumed_run_is_the_run_that_went_on_to_the_bit() {
    let dir = std::env::temp_dir().join(format!("fmm-vortex-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ring.ckpt");
    let start = Checkpoint {
        step: 0,
        time: 0.0,
        particles: Ring::line(1.0, 1.0, 0.2, 48).particles().unwrap(),
        stepper: Stepper::new(Scheme::Ab2),
    };
    let dt = 0.05;
    let mut straight = start.clone();
    steps(&mut straight, 6, dt);

    let mut first = start.clone();
    steps(&mut first, 3, dt);
    first.save(&path).unwrap();
    assert!(!dir.join("ring.ckpt.part").exists());
    let mut resumed = Checkpoint::load(&path).unwrap();
    assert_eq!(resumed.step, 3);
    steps(&mut resumed, 3, dt);
    assert_eq!(
        resumed.particles, straight.particles,
        "positions, strengths, cores to the bit"
    );
    assert_eq!(resumed.time.to_bits(), straight.time.to_bits());

    // Cut short, changed, or not a checkpoint: refused, naming why.
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.join("cut.ckpt");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = Checkpoint::load(&cut).unwrap_err().to_string();
    assert!(
        e.contains("cut short or changed") && e.contains("cut.ckpt"),
        "{e}"
    );
    let mut changed = bytes.clone();
    changed[100] ^= 1;
    std::fs::write(&cut, &changed).unwrap();
    assert!(Checkpoint::load(&cut)
        .unwrap_err()
        .to_string()
        .contains("changed"));
    std::fs::write(&cut, b"not a checkpoint at all").unwrap();
    assert!(Checkpoint::load(&cut)
        .unwrap_err()
        .to_string()
        .contains("not a vortex checkpoint"));
    let e = Checkpoint::load(&dir.join("missing.ckpt"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.ckpt"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
