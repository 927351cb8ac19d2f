//! Every built-in function of the DSL (a row of
//! `fmm_codegen::builtins::BUILTINS`) through the CPU evaluators the
//! `kernel!` macro emits for it, against the row's own f64 evaluation.
//!
//! The emitters spell a call as the row says: `R::<real>(..)` on
//! [`Real`] in the portable evaluator, `V::<lanes>(..)` on
//! `simd::Lanes` in the AVX2 one. The kernel below calls every row, so a
//! row naming a method that does not exist does not compile, and a method
//! that computes something else than the row's `eval` fails here, in f32
//! and f64, on the row's `test_range`.

use fmm_core::fmm_codegen::builtins::Func;
use fmm_core::fmm_codegen::ir::Node;
use fmm_core::{kernel, Kernel, Real, SourceSlices, MAX_SLOTS};

kernel! {
    /// Every built-in function once, each of source fields of its own (so
    /// that nothing folds and each is sampled on its own range), one output
    /// per function: `o_<name> += <name>(<name>_x[, <name>_y])`.
    pub kernel EveryBuiltin {
        source sqrt_x;
        source rsqrt_x;
        source exp_x;
        source erf_x;
        source log_x;
        source abs_x;
        source min_x;
        source min_y;
        source max_x;
        source max_y;
        output o_sqrt;
        output o_rsqrt;
        output o_exp;
        output o_erf;
        output o_log;
        output o_abs;
        output o_min;
        output o_max;
        let near = r2 > 0.0;
        o_sqrt += select(near, sqrt(sqrt_x), 0.0);
        o_rsqrt += select(near, rsqrt(rsqrt_x), 0.0);
        o_exp += select(near, exp(exp_x), 0.0);
        o_erf += select(near, erf(erf_x), 0.0);
        o_log += select(near, log(log_x), 0.0);
        o_abs += select(near, abs(abs_x), 0.0);
        o_min += select(near, min(min_x, min_y), 0.0);
        o_max += select(near, max(max_x, max_y), 0.0);
    }
}

/// The source fields of a row's arguments: `<name>_x`, `<name>_y`.
fn argument_fields(f: Func) -> Vec<String> {
    ["x", "y"][..f.row().arity]
        .iter()
        .map(|v| format!("{}_{v}", f.name()))
        .collect()
}

#[test]
fn the_kernel_calls_every_row() {
    let def = EveryBuiltin::def();
    for f in Func::all() {
        let called = def
            .graph
            .nodes
            .iter()
            .any(|n| matches!(n, Node::Call1(g, _) | Node::Call2(g, _, _) if *g == f));
        let fields = argument_fields(f);
        let declared = fields
            .iter()
            .all(|a| def.sources.iter().any(|s| &s.name == a))
            && def
                .outputs
                .iter()
                .any(|o| o.name == format!("o_{}", f.name()));
        assert!(
            called && declared,
            "the built-in `{}` is not tested: add `source {};` and `output o_{0};` and \
             `o_{0} += select(near, {0}({}), 0.0);` to EveryBuiltin (fmm-core/tests/builtins.rs)",
            f.name(),
            fields.join("; source "),
            fields.join(", ")
        );
    }
}

/// Which generated evaluator to run.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// `R::<real>`: the methods of `Real`.
    Portable,
    /// `V::<lanes>`: the methods of `simd::Lanes`.
    #[cfg(target_arch = "x86_64")]
    Wide,
}

fn paths() -> Vec<Path> {
    #[allow(unused_mut)]
    let mut v = vec![Path::Portable];
    #[cfg(target_arch = "x86_64")]
    if fmm_core::simd::avx2_fma() {
        v.push(Path::Wide);
    }
    v
}

/// Each row's sum over `n` sources of its function of samples spread over
/// its test range, by one path in precision `R`, against the f64
/// evaluation of the same (rounded) arguments; `tol` is relative to the
/// sum of the terms' sizes.
fn check<R: Real>(path: Path, tol: f64) {
    let def = EveryBuiltin::def();
    // Two full vectors of f32 and a partial one (four and a part of f64).
    let n = 19;
    let sample = |f: Func, arg: usize, j: usize| {
        let (lo, hi) = f.row().test_range;
        // Interleaved so that two arguments of one call differ.
        let t = ((j * (7 + 4 * arg) + 3 * arg) % n) as f64 / (n - 1) as f64;
        R::c(lo + (hi - lo) * t)
    };
    let mut slots: Vec<Vec<R>> = vec![Vec::new(); def.n_sources()];
    for f in Func::all() {
        for (arg, name) in argument_fields(f).iter().enumerate() {
            let field = def.sources.iter().find(|s| &s.name == name).unwrap();
            slots[field.offset] = (0..n).map(|j| sample(f, arg, j)).collect();
        }
    }
    let cols: [Vec<R>; 3] = [0, 1, 2].map(|a| (0..n).map(|j| R::c(1.0 + (j + a) as f64)).collect());
    let mut fields: [&[R]; MAX_SLOTS] = [&[]; MAX_SLOTS];
    for (f, s) in fields.iter_mut().zip(&slots) {
        *f = s;
    }
    let src = SourceSlices {
        pos: [&cols[0], &cols[1], &cols[2]],
        fields,
        n_fields: slots.len(),
    };
    let mut out = vec![R::zero(); def.n_outputs()];
    let xi = [R::zero(); 3];
    match path {
        Path::Portable => EveryBuiltin::p2p_target_portable(&[], xi, &[], &src, 0..n, &mut out),
        // SAFETY: `paths` lists this path only where the CPU has AVX2 and FMA.
        #[cfg(target_arch = "x86_64")]
        Path::Wide => unsafe { EveryBuiltin::p2p_target_wide(&[], xi, &[], &src, 0..n, &mut out) },
    }
    for f in Func::all() {
        let row = f.row();
        let terms: Vec<f64> = (0..n)
            .map(|j| {
                let args: Vec<f64> = (0..row.arity).map(|a| sample(f, a, j).to_f64()).collect();
                (row.eval)(&args)
            })
            .collect();
        let want: f64 = terms.iter().sum();
        let size: f64 = terms.iter().map(|t| t.abs()).sum();
        let k = def
            .outputs
            .iter()
            .find(|o| o.name == format!("o_{}", row.name))
            .unwrap()
            .offset;
        let got = out[k].to_f64();
        assert!(
            (got - want).abs() <= tol * size,
            "`{}` by {path:?} in {} (`{}`): {got} against {want}",
            row.name,
            R::NAME,
            match path {
                Path::Portable => format!("Real::{}", row.real),
                #[cfg(target_arch = "x86_64")]
                Path::Wide => format!("Lanes::{}", row.lanes),
            }
        );
    }
}

#[test]
fn every_row_through_real_and_lanes_matches_its_f64_evaluation() {
    for path in paths() {
        check::<f64>(path, 1e-14);
        // f32: the functions' own error (the hardware `rsqrt` estimate
        // refined by one Newton step is about 2 ulp) and the sum's rounding.
        check::<f32>(path, 2e-6);
    }
}
