//! Kernels that declare a cutoff (`cutoff RC;`): the direct sum truncated
//! at RC in free space, and by the minimum image in a periodic box (three
//! axes and a slab, points given outside the box), against naive f64 loops
//! over the sources and their images written here from the closed form;
//! on the GPU the generated truncation against the CPU's (ignored without
//! a GPU; on the GPU host `bash scripts/gpu_periodic_check.sh tests` runs
//! it, `.gpu/suite --ignored short_range::gpu_`); what a cutoff refuses (a
//! far field, a cutoff past half the side), named.

use fmm_core::{
    evaluate, kernel, Backend, Domain, Error, Method, Particles, PeriodicBox, Problem, TreeOptions,
};
use fmm_tests::{fmm_options, rel_l2};

kernel! {
    /// A screened Coulomb (Yukawa) interaction truncated at `rc`, as a
    /// molecular-dynamics pair style sums it.
    pub kernel TruncatedYukawa {
        param kappa;
        param rc;
        source q;
        output phi;
        output e: vec3;
        strength q;
        cutoff rc;
        let inv_r = select(r2 > 0.0, rsqrt(r2), 0.0);
        let screened = q * exp(-kappa * r) * inv_r;
        phi += screened;
        e += screened * (1.0 + kappa * r) * inv_r * inv_r * d;
    }
}

/// The truncated sums at every target by the closed form, over every
/// source and its images `-1..=1` along the axes `axes` of the box at
/// `origin` of side `l`, the points first taken into it (none: free
/// space): potential, then the field's three components.
fn naive(
    (kappa, rc): (f64, f64),
    pos: &[[f64; 3]],
    q: &[f64],
    periodic: Option<([f64; 3], f64, [bool; 3])>,
) -> Vec<Vec<f64>> {
    let (origin, l, axes) = periodic.unwrap_or(([0.0; 3], 0.0, [false; 3]));
    let into = |x: &[f64; 3]| {
        [0, 1, 2].map(|a| match axes[a] {
            true => origin[a] + (x[a] - origin[a]).rem_euclid(l),
            false => x[a],
        })
    };
    let pos: Vec<[f64; 3]> = pos.iter().map(into).collect();
    let range = |a: usize| if axes[a] { -1..=1 } else { 0..=0 };
    let mut out = vec![vec![0.0; pos.len()]; 4];
    for (i, x) in pos.iter().enumerate() {
        for (y, qj) in pos.iter().zip(q) {
            for a in range(0) {
                for b in range(1) {
                    for c in range(2) {
                        let shift = [a, b, c].map(|k| k as f64 * l);
                        let d = [0, 1, 2].map(|k| x[k] - y[k] - shift[k]);
                        let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                        if r == 0.0 || r >= rc {
                            continue;
                        }
                        let s = qj * (-kappa * r).exp() / r;
                        out[0][i] += s;
                        for k in 0..3 {
                            out[1 + k][i] += s * (1.0 + kappa * r) / (r * r) * d[k];
                        }
                    }
                }
            }
        }
    }
    out
}

/// Uniform points in the cube at `origin` of `side`, every seventh moved
/// a side or two along a periodic axis of `axes`; charges in [-1, 1].
fn charges(
    n: usize,
    seed: u64,
    origin: [f64; 3],
    side: f64,
    axes: [bool; 3],
) -> (Vec<[f64; 3]>, Vec<f64>) {
    let mut pos: Vec<[f64; 3]> = fmm_core::distributions::uniform_cube(n, seed)
        .into_iter()
        .map(|p| [0, 1, 2].map(|a| origin[a] + side * p[a]))
        .collect();
    for (i, p) in pos.iter_mut().enumerate().step_by(7) {
        let a = (0..3).filter(|&a| axes[a]).nth(i % 2).unwrap_or(0);
        if axes[a] {
            p[a] += side * if i % 14 == 0 { 2.0 } else { -1.0 };
        }
    }
    let q = fmm_core::distributions::uniform_cube(n, seed + 1)
        .iter()
        .map(|p| 2.0 * p[0] - 1.0)
        .collect();
    (pos, q)
}

fn particles(pos: &[[f64; 3]], q: &[f64]) -> (Particles<f64>, Particles<f64>) {
    let mut s = Particles::sources::<TruncatedYukawa>(pos).unwrap();
    s.set("q", q).unwrap();
    (Particles::targets::<TruncatedYukawa>(pos).unwrap(), s)
}

fn direct(
    domain: Domain,
    params: &[f64],
    t: &Particles<f64>,
    s: &Particles<f64>,
) -> Result<Vec<Vec<f64>>, Error> {
    let problem = Problem::new(params).in_domain(domain);
    let ev = evaluate::<TruncatedYukawa, f64>(Backend::Cpu, &Method::direct(), problem, t, s)?;
    Ok(ev.outputs.slots().to_vec())
}

/// Free space: the direct sum drops the pairs past the cutoff; in a box
/// of three periodic axes and in a slab, the minimum image, with points
/// given a side or two outside, equals the naive sum over the images.
#[test]
fn the_minimum_image_sums_each_pair_within_the_cutoff_once() {
    let (kappa, rc) = (1.5, 0.3);
    let (origin, side) = ([0.2, -0.4, 0.1], 0.8);
    let (pos, q) = charges(1500, 3, origin, side, [false; 3]);
    let (t, s) = particles(&pos, &q);
    let got = direct(Domain::FreeSpace, &[kappa, rc], &t, &s).unwrap();
    let want = naive((kappa, rc), &pos, &q, None);
    let e = rel_l2(&got.concat(), &want.concat());
    println!("free space, truncated: {e:.1e}");
    assert!(e < 1e-13, "{e:e}");
    let mut sums = Vec::new();
    for axes in [[true; 3], [true, true, false]] {
        let b = PeriodicBox::cube(origin, side).with_axes(axes);
        let (pos, q) = charges(1500, 5, origin, side, axes);
        let (t, s) = particles(&pos, &q);
        let got = direct(Domain::Periodic(b), &[kappa, rc], &t, &s).unwrap();
        let want = naive((kappa, rc), &pos, &q, Some((origin, side, axes)));
        let e = rel_l2(&got.concat(), &want.concat());
        println!(
            "{}: minimum image {e:.1e} against the images' naive sum",
            b.name()
        );
        assert!(e < 1e-13, "{}: {e:e}", b.name());
        sums.push(got.concat());
    }
    // The pairs across the slab's open faces are not summed.
    assert!(rel_l2(&sums[1], &sums[0]) > 1e-2);
}

/// A cutoff past half the side is refused (a pair would meet twice); a
/// far field, which would sum what the cutoff drops, is refused in free
/// space and in a box, naming the cutoff and the direct sum; a tolerance
/// runs the direct sum.
#[test]
fn a_cutoff_refuses_far_fields_and_a_box_too_small() {
    let (pos, q) = charges(200, 7, [0.0; 3], 1.0, [false; 3]);
    let (t, s) = particles(&pos, &q);
    let b = PeriodicBox::cube([0.0; 3], 1.0);
    let e = direct(Domain::Periodic(b), &[1.0, 0.6], &t, &s).unwrap_err();
    assert!(matches!(e, Error::BadDomain(_)), "{e:?}");
    assert!(e.to_string().contains("half the side"), "{e}");
    let tree = Method::Treecode(TreeOptions::default());
    for (m, domain) in [
        (Method::Fmm(fmm_options(6, 0.5, 32)), Domain::FreeSpace),
        (tree, Domain::FreeSpace),
        (Method::Fmm(fmm_options(6, 0.5, 32)), Domain::Periodic(b)),
    ] {
        let problem = Problem::new(&[1.0, 0.3]).in_domain(domain);
        let e = evaluate::<TruncatedYukawa, f64>(Backend::Cpu, &m, problem, &t, &s)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cutoff rc") && e.contains("direct"), "{e}");
    }
    let problem = Problem::new(&[1.0, 0.3]);
    let ev =
        evaluate::<TruncatedYukawa, f64>(Backend::Cpu, &Method::tolerance(1e-6), problem, &t, &s)
            .unwrap();
    let want = direct(Domain::FreeSpace, &[1.0, 0.3], &t, &s).unwrap();
    assert_eq!(ev.outputs.slots().to_vec(), want);
    assert_eq!(
        ev.achieved.expect("a tolerance says what it met").method,
        "direct"
    );
}

/// The GPU's direct sum truncates as the CPU's (the generated CUDA's
/// select), f64 and f32.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_truncates_as_the_cpu() {
    let (pos, q) = charges(3000, 11, [0.0; 3], 1.0, [false; 3]);
    let (t, s) = particles(&pos, &q);
    let params = [2.0, 0.25];
    let want = direct(Domain::FreeSpace, &params, &t, &s).unwrap();
    let ev =
        evaluate::<TruncatedYukawa, f64>(Backend::Cuda, &Method::direct(), &params[..], &t, &s)
            .unwrap();
    let e = rel_l2(&ev.outputs.slots().concat(), &want.concat());
    println!("GPU f64 truncated: {e:.1e} from the CPU");
    assert!(e < 1e-12, "{e:e}");
}
