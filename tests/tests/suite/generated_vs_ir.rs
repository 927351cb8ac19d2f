//! The generated CPU evaluators (portable and, on x86-64 with AVX2, the
//! vector one) against the IR's own meaning (the f64 interpreter of
//! `fmm_codegen::eval`), in f64 and f32, for every built-in kernel and for a
//! kernel that uses every function of the DSL; and the IR text form read
//! back exactly.

use fmm_core::fmm_codegen::ast::Shape;
use fmm_core::fmm_codegen::eval::{eval_pair, PairInputs};
use fmm_core::fmm_codegen::{text, KernelDef};
use fmm_core::kernels::*;
use fmm_core::{kernel, Kernel, Particles, Real, SourceSlices, MAX_SLOTS};
use fmm_tests::direct_cpu;
use fmm_tests::rel_l2;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

kernel! {
    /// Every function and construct of the DSL, in one kernel that means
    /// nothing physical.
    pub kernel Everything {
        param a;
        param w: vec3;
        source s;
        source v: vec3;
        target t;
        target u: vec3;
        output o1;
        output o2: vec3;
        let inv = select(r2 > 0.0, 1.0 / r, 0.0);
        let m = max(min(abs(s), 2.0), 0.1) * log(1.5 + t * t) * powi(inv, 2) * powi(r, -1);
        let near = if r < a && !(r2 == 0.0) || r2 > 100.0 { exp(-r) * erf(r) } else { sqrt(r2) * rsqrt(1.0 + r2) };
        let e = vec3(d.x, d.y * 2.0, d.z - d.x);
        let k = select(r2 > 0.0, m * near / (1.0 + norm(e)), 0.0);
        o1 += k * dot(v, u) - k * w.y;
        o2 += k * cross(v, d) + (k / 2.0) * (u - w) - d * (k * 0.25);
    }
}

fn random_set<K: Kernel>(
    rng: &mut StdRng,
    n: usize,
    sources: bool,
) -> (Particles<f64>, Vec<[f64; 3]>, Vec<Vec<f64>>) {
    let def = K::def();
    let pos: Vec<[f64; 3]> = (0..n)
        .map(|_| [0, 1, 2].map(|_| rng.gen_range(-1.0..1.0)))
        .collect();
    let fields = if sources { &def.sources } else { &def.targets };
    let mut p = if sources {
        Particles::sources::<K>(&pos).unwrap()
    } else {
        Particles::targets::<K>(&pos).unwrap()
    };
    for f in fields {
        // Core radii must be positive; everything else takes either sign.
        let lo = if f.name == "sigma" { 0.05 } else { -1.0 };
        match f.shape {
            Shape::Scalar => {
                let v: Vec<f64> = (0..n).map(|_| rng.gen_range(lo..1.0)).collect();
                p.set(&f.name, &v).unwrap();
            }
            Shape::Vec3 => {
                let v: Vec<[f64; 3]> = (0..n)
                    .map(|_| [0, 1, 2].map(|_| rng.gen_range(lo..1.0)))
                    .collect();
                p.set_vec3(&f.name, &v).unwrap();
            }
        }
    }
    let slots = p.slots().to_vec();
    (p, pos, slots)
}

/// Sums the IR interpreter over all pairs, in f64.
fn interpret(
    def: &KernelDef,
    params: &[f64],
    tpos: &[[f64; 3]],
    tslots: &[Vec<f64>],
    spos: &[[f64; 3]],
    sslots: &[Vec<f64>],
) -> Vec<Vec<f64>> {
    let mut out = vec![vec![0.0; tpos.len()]; def.n_outputs()];
    for i in 0..tpos.len() {
        let t: Vec<f64> = tslots.iter().map(|s| s[i]).collect();
        for j in 0..spos.len() {
            let s: Vec<f64> = sslots.iter().map(|x| x[j]).collect();
            let c = eval_pair(
                def,
                &PairInputs {
                    params,
                    target_pos: tpos[i],
                    target: &t,
                    source_pos: spos[j],
                    source: &s,
                },
            );
            for (k, v) in c.iter().enumerate() {
                out[k][i] += v;
            }
        }
    }
    out
}

/// Which generated evaluator to run.
#[derive(Clone, Copy, Debug)]
enum Path {
    Portable,
    /// `p2p_each_portable`, its per-source contributions summed here.
    Each,
    /// The AVX2 body of `p2p_target_wide` (AVX-512 turned off around it).
    #[cfg(target_arch = "x86_64")]
    Wide,
    /// Its AVX-512 body, where the CPU has AVX-512.
    #[cfg(target_arch = "x86_64")]
    Wide512,
    /// The AVX2 body of `p2p_each_wide`, summed here.
    #[cfg(target_arch = "x86_64")]
    EachWide,
    /// Its AVX-512 body.
    #[cfg(target_arch = "x86_64")]
    EachWide512,
}

/// Held while a wide path runs: `Path::Wide` turns the process-wide
/// AVX-512 switch off, and `Path::Wide512` must not run meanwhile.
#[cfg(target_arch = "x86_64")]
static WIDTH_SWITCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The paths this machine can run.
fn paths() -> Vec<Path> {
    #[allow(unused_mut)]
    let mut v = vec![Path::Portable, Path::Each];
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        v.extend([Path::Wide, Path::EachWide]);
    }
    #[cfg(target_arch = "x86_64")]
    if fmm_core::simd::avx512() {
        v.extend([Path::Wide512, Path::EachWide512]);
    }
    v
}

/// The sum over the sources `skip..` for every target, by one path, in
/// precision `R`, returned in f64 slot-major order.
fn evaluate<K: Kernel, R: Real>(
    path: Path,
    params: &[f64],
    tpos: &[[f64; 3]],
    tslots: &[Vec<f64>],
    spos: &[[f64; 3]],
    sslots: &[Vec<f64>],
    skip: usize,
) -> Vec<Vec<f64>> {
    let r = |x: f64| R::c(x);
    let p: Vec<R> = params.iter().map(|&x| r(x)).collect();
    let cols: [Vec<R>; 3] = [0, 1, 2].map(|a| spos.iter().map(|q| r(q[a])).collect());
    let fields: Vec<Vec<R>> = sslots
        .iter()
        .map(|s| s.iter().map(|&x| r(x)).collect())
        .collect();
    let mut f: [&[R]; MAX_SLOTS] = [&[]; MAX_SLOTS];
    for (slot, v) in f.iter_mut().zip(&fields) {
        *slot = v;
    }
    let src = SourceSlices {
        pos: [&cols[0], &cols[1], &cols[2]],
        fields: f,
        n_fields: fields.len(),
    };
    let no = K::def().n_outputs();
    let mut out = vec![vec![0.0; tpos.len()]; no];
    for (i, x) in tpos.iter().enumerate() {
        let t: Vec<R> = tslots.iter().map(|s| r(s[i])).collect();
        let xi = x.map(r);
        let mut o = vec![R::zero(); no];
        let range = skip..spos.len();
        // `p2p_each`'s contributions, output by output, summed into `o`.
        let n = range.len();
        let mut each = vec![R::zero(); n * no];
        let sum_each = |each: &[R], o: &mut [R]| {
            for k in 0..no {
                for &v in &each[k * n..(k + 1) * n] {
                    o[k] += v;
                }
            }
        };
        match path {
            Path::Portable => K::p2p_target_portable(&p, xi, &t, &src, range, &mut o),
            Path::Each => {
                K::p2p_each_portable(&p, xi, &t, &src, range, &mut each);
                sum_each(&each, &mut o);
            }
            // SAFETY: `paths` lists the wide paths only where the CPU has
            // AVX2 and FMA, the 512 ones only where it has AVX-512.
            #[cfg(target_arch = "x86_64")]
            Path::Wide | Path::EachWide => {
                let _held = WIDTH_SWITCH.lock().unwrap_or_else(|e| e.into_inner());
                fmm_core::simd::set_wide_vectors(false);
                if matches!(path, Path::Wide) {
                    unsafe { K::p2p_target_wide(&p, xi, &t, &src, range, &mut o) };
                } else {
                    unsafe { K::p2p_each_wide(&p, xi, &t, &src, range, &mut each) };
                    sum_each(&each, &mut o);
                }
                fmm_core::simd::set_wide_vectors(true);
            }
            #[cfg(target_arch = "x86_64")]
            Path::Wide512 | Path::EachWide512 => {
                let _held = WIDTH_SWITCH.lock().unwrap_or_else(|e| e.into_inner());
                assert!(fmm_core::simd::avx512());
                if matches!(path, Path::Wide512) {
                    unsafe { K::p2p_target_wide(&p, xi, &t, &src, range, &mut o) };
                } else {
                    unsafe { K::p2p_each_wide(&p, xi, &t, &src, range, &mut each) };
                    sum_each(&each, &mut o);
                }
            }
        }
        for k in 0..no {
            out[k][i] = o[k].to_f64();
        }
    }
    out
}

/// Every path in f64 and f32 against the interpreter, over runs of sources
/// that start past the first (the tree codes' ranges) and end in a partial
/// vector, with a source on a target and coincident sources.
fn check_paths<K: Kernel>(params: &[f64], seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for (m, n, skip) in [(1, 1, 0), (5, 8, 0), (7, 19, 3), (9, 530, 5)] {
        let (_, tpos, tslots) = random_set::<K>(&mut rng, m, false);
        let (_, mut spos, sslots) = random_set::<K>(&mut rng, n, true);
        spos[n - 1] = tpos[0];
        if n > 2 {
            spos[n - 2] = spos[n - 3];
        }
        let tail: Vec<Vec<f64>> = sslots.iter().map(|s| s[skip..].to_vec()).collect();
        let want = interpret(K::def(), params, &tpos, &tslots, &spos[skip..], &tail);
        for path in paths() {
            let got64 = evaluate::<K, f64>(path, params, &tpos, &tslots, &spos, &sslots, skip);
            let got32 = evaluate::<K, f32>(path, params, &tpos, &tslots, &spos, &sslots, skip);
            for (k, w) in want.iter().enumerate() {
                let e64 = rel_l2(&got64[k], w);
                let e32 = rel_l2(&got32[k], w);
                let name = K::name();
                assert!(
                    e64 < 1e-13,
                    "{name} {path:?} f64 slot {k}, M = {m}, N = {n}: {e64:e}"
                );
                assert!(
                    e32 < 2e-5,
                    "{name} {path:?} f32 slot {k}, M = {m}, N = {n}: {e32:e}"
                );
            }
        }
    }
}

fn check<K: Kernel>(params: &[f64], seed: u64) {
    check_paths::<K>(params, seed + 100);
    let mut rng = StdRng::seed_from_u64(seed);
    for (m, n) in [(1, 1), (13, 300), (41, 7)] {
        let (tgt, tpos, tslots) = random_set::<K>(&mut rng, m, false);
        let (src, spos, sslots) = random_set::<K>(&mut rng, n, true);
        let got = direct_cpu::<K, f64>(params, &tgt, &src).unwrap();
        let want = interpret(K::def(), params, &tpos, &tslots, &spos, &sslots);
        for (k, (g, w)) in got.slots().iter().zip(&want).enumerate() {
            let e = rel_l2(g, w);
            assert!(
                e < 1e-13,
                "{} slot {k}, M = {m}, N = {n}: relative error {e:e}",
                K::name()
            );
        }
    }
}

#[test]
fn generated_cpu_evaluator_matches_the_ir_for_every_builtin() {
    check::<Gravity>(&[0.05], 1);
    check::<Coulomb>(&[], 2);
    check::<BiotSavart>(&[], 3);
    check::<Stretching>(&[], 4);
    check::<VelocityStretching>(&[], 5);
    check::<HuBiotSavart>(&[0.3], 6);
    check::<Stokeslet>(&[0.1, 0.7], 8);
    check::<StokesletSingular>(&[], 9);
    check::<Yukawa>(&[2.0], 10);
}

#[test]
fn generated_cpu_evaluator_matches_the_ir_for_every_dsl_construct() {
    check::<Everything>(&[0.7, 0.1, -0.4, 0.9], 7);
}

#[test]
fn ir_text_reads_back_exactly() {
    for def in [
        Gravity::def(),
        Coulomb::def(),
        BiotSavart::def(),
        Stretching::def(),
        VelocityStretching::def(),
        HuBiotSavart::def(),
        Stokeslet::def(),
        StokesletSingular::def(),
        Yukawa::def(),
        Everything::def(),
    ] {
        let t = text::write(def);
        let back = text::read(&t).unwrap();
        assert_eq!(&back, def, "{}", def.name);
        assert_eq!(text::write(&back), t);
    }
}

#[test]
fn ir_text_errors_name_the_line() {
    let t = text::write(Gravity::def());
    let broken = t.replacen("node ", "node frobnicate ", 1);
    let e = text::read(&broken).unwrap_err();
    assert!(e.contains("line") && e.contains("frobnicate"), "{e}");
    let forward = t.replace("contrib", "node add 9999 0\ncontrib");
    let e = text::read(&forward).unwrap_err();
    assert!(e.contains("later node"), "{e}");
}
