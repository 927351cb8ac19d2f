//! Bad input gets a clear error naming the problem; edge cases (no
//! particles, one particle, coincident particles) give well-defined results.

use fmm_core::kernels::*;
use fmm_core::{Error, Particles};
use fmm_tests::direct_cpu;

fn gravity_sources(pos: &[[f64; 3]]) -> Particles<f64> {
    let mut s = Particles::sources::<Gravity>(pos).unwrap();
    s.set("m", &vec![1.0; pos.len()]).unwrap();
    s
}

#[test]
fn non_finite_inputs_are_named() {
    let e = Particles::<f64>::sources::<Gravity>(&[[0.0; 3], [0.0, f64::NAN, 1.0]]).unwrap_err();
    assert!(
        matches!(&e, Error::NonFinite { what, index: 1, value } if what == "source position" && value.is_nan()),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("source position 1 is not finite"),
        "{e}"
    );

    let mut s = Particles::<f32>::sources::<Gravity>(&[[0.0; 3]; 3]).unwrap();
    let e = s.set("m", &[1.0, f32::INFINITY, 0.0]).unwrap_err();
    assert_eq!(e.to_string(), "source field `m` 1 is not finite (inf)");

    let t = Particles::targets::<Gravity>(&[[0.0; 3]]).unwrap();
    let e = direct_cpu::<Gravity, f64>(&[f64::NAN], &t, &gravity_sources(&[[1.0; 3]])).unwrap_err();
    assert!(e.to_string().contains("parameter 0 is not finite"), "{e}");
}

#[test]
fn mismatched_inputs_are_named() {
    let mut s = Particles::<f64>::sources::<Gravity>(&[[0.0; 3]; 4]).unwrap();
    let e = s.set("m", &[1.0; 3]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "source field `m`: 3 values given, 4 expected"
    );
    let e = s.set("mass", &[1.0; 4]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel Gravity has no source field `mass`; its source fields are: m"
    );
    let e = s.set_vec3("m", &[[1.0; 3]; 4]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "field `m` is declared as a scalar, but a vec3 was given"
    );

    let t = Particles::<f64>::targets::<Gravity>(&[[0.0; 3]]).unwrap();
    let e = direct_cpu::<Gravity, f64>(&[], &t, &s).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel Gravity takes 1 parameter value(s) (eps), but 0 were given"
    );

    // Particles made for another kernel, or in the other role.
    let bs = Particles::<f64>::sources::<BiotSavart>(&[[0.0; 3]]).unwrap();
    let e = direct_cpu::<Gravity, f64>(&[0.1], &t, &bs).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel Gravity needs its own sources, but these particles were made as BiotSavart sources"
    );
    let e = direct_cpu::<Gravity, f64>(&[0.1], &t, &t).unwrap_err();
    assert!(e.to_string().contains("needs its own sources"), "{e}");

    let out = direct_cpu::<Gravity, f64>(&[0.1], &t, &s).unwrap();
    let e = out.scalar("potential").unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel Gravity has no output `potential`; its outputs are: phi, acc"
    );
    assert!(out.vec3("phi").is_err());
}

#[test]
fn zero_and_one_particle() {
    // No targets: empty outputs. No sources: zero outputs.
    let none = Particles::<f64>::targets::<Gravity>(&[]).unwrap();
    let out = direct_cpu::<Gravity, f64>(&[0.1], &none, &gravity_sources(&[[1.0; 3]])).unwrap();
    assert_eq!(out.len(), 0);
    let t = Particles::<f64>::targets::<Gravity>(&[[0.5; 3], [1.0; 3]]).unwrap();
    let out = direct_cpu::<Gravity, f64>(&[0.1], &t, &gravity_sources(&[])).unwrap();
    assert_eq!(out.scalar("phi").unwrap(), &[0.0, 0.0]);
    // One particle, its own source: the self-interaction is excluded.
    let one = [[0.3, 0.2, 0.1]];
    let t = Particles::<f64>::targets::<Gravity>(&one).unwrap();
    let out = direct_cpu::<Gravity, f64>(&[0.1], &t, &gravity_sources(&one)).unwrap();
    assert!(out.slots().iter().all(|s| s == &[0.0]), "{:?}", out.slots());
}

#[test]
fn coincident_particles_give_finite_results_without_singular_softening() {
    // Coulomb has no softening: two sources on top of each other and a
    // target on both must still give finite values, and only the third
    // source contributes.
    let pos = [[0.0; 3], [0.0; 3], [2.0, 0.0, 0.0]];
    let mut s = Particles::<f64>::sources::<Coulomb>(&pos).unwrap();
    s.set("q", &[1.0, 1.0, 4.0]).unwrap();
    let t = Particles::<f64>::targets::<Coulomb>(&pos[..1]).unwrap();
    let out = direct_cpu::<Coulomb, f64>(&[], &t, &s).unwrap();
    assert_eq!(out.scalar("phi").unwrap(), &[2.0]);
    let [ex, ey, ez] = out.vec3("e").unwrap();
    assert_eq!((ex[0], ey[0], ez[0]), (-1.0, 0.0, 0.0));
}

#[test]
fn requirements_of_the_declaration_are_checked_and_name_the_particle() {
    // A negative core radius would flip the sign of the velocity silently.
    let pos = [[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
    let mut s = Particles::<f64>::sources::<BiotSavart>(&pos).unwrap();
    s.set_vec3("alpha", &[[0.0, 0.0, 1.0]; 3]).unwrap();
    s.set("sigma", &[0.1, -0.2, 0.1]).unwrap();
    let t = Particles::<f64>::targets::<BiotSavart>(&pos).unwrap();
    let e = direct_cpu::<BiotSavart, f64>(&[], &t, &s).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel BiotSavart requires `sigma > 0.0`, but source 1 has sigma = -0.2"
    );
    // Zero core radii are refused too (0 / 0 at the core).
    s.set("sigma", &[0.1, 0.0, 0.1]).unwrap();
    assert!(direct_cpu::<BiotSavart, f64>(&[], &t, &s).is_err());
    s.set("sigma", &[0.1, 0.3, 0.1]).unwrap();
    assert!(direct_cpu::<BiotSavart, f64>(&[], &t, &s).is_ok());

    // A parameter requirement.
    let t = Particles::<f64>::targets::<Gravity>(&pos).unwrap();
    let e = direct_cpu::<Gravity, f64>(&[-0.1], &t, &gravity_sources(&pos)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel Gravity requires `eps >= 0.0`, but the parameters are eps = -0.1"
    );
}
