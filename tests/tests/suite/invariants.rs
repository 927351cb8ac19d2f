//! Property tests of invariants every built-in kernel has: sums do not
//! change when everything is translated, outputs are linear in the
//! declared strength, and the order of the sources does not matter.

use fmm_core::fmm_codegen::ast::Shape;
use fmm_core::kernels::*;
use fmm_core::{Kernel, Particles};
use fmm_tests::direct_cpu;
use proptest::prelude::*;

/// A random problem: positions, and one value per scalar slot per particle.
#[derive(Clone, Debug)]
struct Case {
    tpos: Vec<[f64; 3]>,
    spos: Vec<[f64; 3]>,
    tvals: Vec<f64>,
    svals: Vec<f64>,
    shift: [f64; 3],
    scale: f64,
}

fn point() -> impl Strategy<Value = [f64; 3]> {
    [-1.0..1.0f64, -1.0..1.0f64, -1.0..1.0f64]
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..12, 1usize..24).prop_flat_map(|(m, n)| {
        (
            prop::collection::vec(point(), m),
            prop::collection::vec(point(), n),
            prop::collection::vec(0.05..1.0f64, m * 16),
            prop::collection::vec(-1.0..1.0f64, n * 16),
            point(),
            -3.0..3.0f64,
        )
            .prop_map(|(tpos, spos, tvals, svals, shift, scale)| Case {
                tpos,
                spos,
                tvals,
                svals,
                shift,
                scale,
            })
    })
}

/// Builds the particles; `strength_scale` multiplies the declared strength.
fn build<K: Kernel>(
    c: &Case,
    shift: [f64; 3],
    strength_scale: f64,
    reverse: bool,
) -> (Particles<f64>, Particles<f64>) {
    let def = K::def();
    let moved = |p: &[[f64; 3]]| -> Vec<[f64; 3]> {
        p.iter()
            .map(|x| [0, 1, 2].map(|k| x[k] + shift[k]))
            .collect()
    };
    let mut spos = moved(&c.spos);
    let n = spos.len();
    let mut order: Vec<usize> = (0..n).collect();
    if reverse {
        order.reverse();
        spos = order.iter().map(|&j| spos[j]).collect();
    }
    let strength = def.strength;
    let mut src = Particles::sources::<K>(&spos).unwrap();
    for (fi, f) in def.sources.iter().enumerate() {
        let scale = if Some(fi) == strength {
            strength_scale
        } else {
            1.0
        };
        // Core radii stay positive.
        let value = |j: usize, k: usize| {
            let v = c.svals[order[j] * 16 + f.offset + k];
            if f.name == "sigma" {
                0.1 + v.abs()
            } else {
                v * scale
            }
        };
        match f.shape {
            Shape::Scalar => src
                .set(&f.name, &(0..n).map(|j| value(j, 0)).collect::<Vec<_>>())
                .unwrap(),
            Shape::Vec3 => src
                .set_vec3(
                    &f.name,
                    &(0..n)
                        .map(|j| [0, 1, 2].map(|k| value(j, k)))
                        .collect::<Vec<_>>(),
                )
                .unwrap(),
        };
    }
    let m = c.tpos.len();
    let mut tgt = Particles::targets::<K>(&moved(&c.tpos)).unwrap();
    for f in &def.targets {
        match f.shape {
            Shape::Scalar => tgt
                .set(
                    &f.name,
                    &(0..m)
                        .map(|i| c.tvals[i * 16 + f.offset])
                        .collect::<Vec<_>>(),
                )
                .unwrap(),
            Shape::Vec3 => tgt
                .set_vec3(
                    &f.name,
                    &(0..m)
                        .map(|i| [0, 1, 2].map(|k| c.tvals[i * 16 + f.offset + k]))
                        .collect::<Vec<_>>(),
                )
                .unwrap(),
        };
    }
    (tgt, src)
}

fn eval<K: Kernel>(
    params: &[f64],
    c: &Case,
    shift: [f64; 3],
    scale: f64,
    reverse: bool,
) -> Vec<Vec<f64>> {
    let (t, s) = build::<K>(c, shift, scale, reverse);
    direct_cpu::<K, f64>(params, &t, &s)
        .unwrap()
        .slots()
        .to_vec()
}

/// Difference of two outputs, per slot, relative to the larger of the
/// slot's norm and a floor (an output can be zero by symmetry).
fn close(a: &[Vec<f64>], b: &[Vec<f64>], tol: f64) -> Result<(), TestCaseError> {
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    for (x, y) in a.iter().zip(b) {
        let diff: Vec<f64> = x.iter().zip(y).map(|(p, q)| p - q).collect();
        let rel = norm(&diff) / norm(y).max(1e-6);
        prop_assert!(rel < tol, "relative difference {rel:e}");
    }
    Ok(())
}

fn invariants<K: Kernel>(params: &[f64], c: &Case) -> Result<(), TestCaseError> {
    let base = eval::<K>(params, c, [0.0; 3], 1.0, false);
    // Translation: only d = x_i - x_j enters.
    close(&eval::<K>(params, c, c.shift, 1.0, false), &base, 1e-9)?;
    // The order of the sources does not change the sum, up to rounding: a
    // sum that cancels (the stretching of a few random sources) changes by
    // about eps * sum |terms| / |sum| when reordered, seen at 1.7e-12.
    close(&eval::<K>(params, c, [0.0; 3], 1.0, true), &base, 1e-10)?;
    // Linear in the declared strength.
    if K::def().strength.is_some() {
        let scaled: Vec<Vec<f64>> = base
            .iter()
            .map(|s| s.iter().map(|v| v * c.scale).collect())
            .collect();
        close(
            &eval::<K>(params, c, [0.0; 3], c.scale, false),
            &scaled,
            1e-10,
        )?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn gravity(c in case()) { invariants::<Gravity>(&[0.05], &c)?; }
    #[test]
    fn coulomb(c in case()) { invariants::<Coulomb>(&[], &c)?; }
    #[test]
    fn biot_savart(c in case()) { invariants::<BiotSavart>(&[], &c)?; }
    #[test]
    fn stretching(c in case()) { invariants::<Stretching>(&[], &c)?; }
    #[test]
    fn velocity_stretching(c in case()) { invariants::<VelocityStretching>(&[], &c)?; }
    #[test]
    fn hu_biot_savart(c in case()) { invariants::<HuBiotSavart>(&[0.2], &c)?; }
    #[test]
    fn stokeslet(c in case()) { invariants::<Stokeslet>(&[0.1, 0.7], &c)?; }
    #[test]
    fn stokeslet_singular(c in case()) { invariants::<StokesletSingular>(&[], &c)?; }
    #[test]
    fn yukawa(c in case()) { invariants::<Yukawa>(&[2.0], &c)?; }
}
