//! GPU tests of the octree built on the device (hu2011's construction,
//! `fmm_core::tree::device` and the treecode's `cells`): the device tree is the CPU's
//! `Octree::build`, exactly (bounds, keys, order, every cell), on uniform,
//! Plummer, collinear, heavily duplicated and tiny inputs, in f32 and f64,
//! for several `ncrit`; the device pseudo-sources are the CPU's to f64
//! rounding; and the build time for 10^6 and 10^7 Plummer particles.
//!
//! Run on the GPU host: `cargo test --release -p fmm-tests --test suite -- --ignored --nocapture gpu_tree::`.

use std::time::Instant;

use fmm_core::cuda::Gpu;
use fmm_core::distributions::{plummer, uniform_cube};
use fmm_core::far::monopole::cuda::device_pseudo_sources;
use fmm_core::tree::device::{CudaSlice, DeviceOctree};
use fmm_core::tree::Octree;
use fmm_core::Real;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn gpu() -> &'static Gpu {
    Gpu::shared().expect("these tests need a CUDA GPU")
}

fn upload<R: Real>(v: &[R]) -> CudaSlice<R> {
    gpu().stream().clone_htod(v).expect("copy to the device")
}

/// Positions per axis in `R`, and the same widened to f64: what the CPU
/// treecode builds its tree from.
fn axes<R: Real>(pts: &[[f64; 3]]) -> ([Vec<R>; 3], [Vec<f64>; 3]) {
    let r = [0, 1, 2].map(|a| pts.iter().map(|p| R::c(p[a])).collect::<Vec<R>>());
    let f = [0, 1, 2].map(|a| r[a].iter().map(|x| x.to_f64()).collect());
    (r, f)
}

fn first_difference<T: PartialEq>(a: &[T], b: &[T]) -> Option<usize> {
    (0..a.len().min(b.len()))
        .find(|&i| a[i] != b[i])
        .or((a.len() != b.len()).then_some(a.len().min(b.len())))
}

fn assert_same_tree(got: &Octree, want: &Octree, what: &str) {
    assert_eq!(got.bounds, want.bounds, "{what}: bounds");
    assert_eq!(got.ncrit, want.ncrit, "{what}: ncrit");
    if let Some(i) = first_difference(&got.keys, &want.keys) {
        panic!(
            "{what}: keys differ first at {i}: {:?} vs {:?}",
            got.keys.get(i),
            want.keys.get(i)
        );
    }
    if let Some(i) = first_difference(&got.order, &want.order) {
        panic!(
            "{what}: order differs first at {i}: {:?} vs {:?}",
            got.order.get(i),
            want.order.get(i)
        );
    }
    if let Some(i) = first_difference(&got.cells, &want.cells) {
        panic!(
            "{what}: {} cells vs {}, first difference at {i}:\n  gpu {:?}\n  cpu {:?}",
            got.cells.len(),
            want.cells.len(),
            got.cells.get(i),
            want.cells.get(i)
        );
    }
}

/// The device tree of `pts` in `R` against the CPU's, for each `ncrit`.
fn check<R: Real>(what: &str, pts: &[[f64; 3]], ncrits: &[usize]) {
    let (r, f) = axes::<R>(pts);
    let d = [upload(&r[0]), upload(&r[1]), upload(&r[2])];
    for &ncrit in ncrits {
        let want = Octree::build([&f[0], &f[1], &f[2]], ncrit);
        let tree = DeviceOctree::<R>::build(gpu(), [&d[0], &d[1], &d[2]], ncrit)
            .unwrap_or_else(|e| panic!("{what} {} ncrit {ncrit}: {e}", R::NAME));
        let got = tree.to_host(gpu()).unwrap();
        let what = format!("{what} N = {} {} ncrit {ncrit}", pts.len(), R::NAME);
        assert_same_tree(&got, &want, &what);
        let depth = want.cells.iter().map(|c| c.level).max().unwrap_or(0);
        println!(
            "{what:50} {:7} cells, depth {depth}: same",
            want.cells.len()
        );
    }
}

fn both(what: &str, pts: &[[f64; 3]], ncrits: &[usize]) {
    check::<f64>(what, pts, ncrits);
    check::<f32>(what, pts, ncrits);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_tree_is_the_cpu_tree_uniform_and_plummer() {
    for n in [1000, 2049, 100_003] {
        both("uniform", &uniform_cube(n, n as u64), &[1, 8, 64]);
        both("plummer", &plummer(n, 7 + n as u64).0, &[1, 8, 64, 1000]);
    }
    // Off-centre and negative coordinates, spanning several magnitudes.
    let shifted: Vec<[f64; 3]> = plummer(50_000, 3)
        .0
        .iter()
        .map(|p| [p[0] * 1e3 - 250.0, p[1] * 1e3 + 1e4, p[2] * 1e3])
        .collect();
    both("shifted plummer", &shifted, &[16]);
    // A part below a plane of the lattice and a sliver of it past the
    // plane: the sliver's cells beside the part's crowd are split
    // (`NEIGHBOUR_SLACK`).
    let sliver: Vec<[f64; 3]> = uniform_cube(100_003, 11)
        .into_iter()
        .filter(|p| p[0] < 0.5 || (p[0] < 0.501 && p[1] < 0.5))
        .collect();
    both("a part and its sliver past a plane", &sliver, &[8, 64]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_tree_is_the_cpu_tree_degenerate_inputs() {
    // All on a line, along one axis and along the diagonal.
    let n = 20_000;
    let axis: Vec<[f64; 3]> = (0..n)
        .map(|i| [i as f64 / (n - 1) as f64 * 3.7 - 1.0, 0.25, -0.5])
        .collect();
    both("line along x", &axis, &[1, 8, 64]);
    let diag: Vec<[f64; 3]> = (0..n)
        .map(|i| [i as f64 * 1e-3, i as f64 * 1e-3, i as f64 * 1e-3])
        .collect();
    both("diagonal", &diag, &[1, 32]);
    // Many duplicates: 13 distinct points, shuffled; leaves at the depth
    // bound hold hundreds.
    let mut rng = StdRng::seed_from_u64(5);
    let distinct = uniform_cube(13, 9);
    let dup: Vec<[f64; 3]> = (0..5000).map(|_| distinct[rng.gen_range(0..13)]).collect();
    both("13 distinct points", &dup, &[1, 8, 64, 10_000]);
    // All coincident.
    both("coincident", &vec![[0.3, -0.2, 7.0]; 3000], &[1, 64]);
    // Pairs closer than the depth bound resolves, among others.
    let mut close = uniform_cube(2000, 4);
    for i in 0..1000 {
        close[2 * i + 1] = close[2 * i].map(|x| x + 1e-9);
    }
    both("close pairs", &close, &[1, 4]);
}

/// A target tree guided by a source tree's keys (`build_guided`: split
/// where the sources hold more than `ncrit`) is the CPU's guided tree,
/// exactly: the targets a part of the sources and a sliver past a plane
/// of the lattice, as a process's targets after an ORB cut, in one root
/// cube (f64 and f32).
fn check_guided<R: Real>(sources: &[[f64; 3]], targets: &[[f64; 3]], ncrit: usize) {
    use fmm_core::tree::{Bounds, TreeOrdered};
    let root = Bounds {
        center: [0.5; 3],
        half: 0.5,
    };
    let (sr, sf) = axes::<R>(sources);
    let (tr, tf) = axes::<R>(targets);
    let ds = [upload(&sr[0]), upload(&sr[1]), upload(&sr[2])];
    let dt = [upload(&tr[0]), upload(&tr[1]), upload(&tr[2])];
    let built = |d: &[CudaSlice<R>; 3], guide: Option<&CudaSlice<u64>>| {
        TreeOrdered::build_guided(
            gpu(),
            [&d[0], &d[1], &d[2]],
            &[],
            ncrit,
            Some(root),
            guide,
            true,
        )
        .unwrap_or_else(|e| panic!("guided tree {}: {e}", R::NAME))
    };
    let s = built(&ds, None);
    let t = built(&dt, s.tree.keys.as_ref());
    let want_s = Octree::build_in([&sf[0], &sf[1], &sf[2]], ncrit, root);
    let want = Octree::build_guided([&tf[0], &tf[1], &tf[2]], ncrit, root, &want_s.keys);
    let what = format!("guided target tree {} ncrit {ncrit}", R::NAME);
    assert_same_tree(&t.tree.to_host(gpu()).unwrap(), &want, &what);
    let alone = Octree::build_in([&tf[0], &tf[1], &tf[2]], ncrit, root);
    assert!(
        want.cells.len() > alone.cells.len(),
        "{what}: the guide split more"
    );
    println!(
        "{what}: {} cells ({} alone): same",
        want.cells.len(),
        alone.cells.len()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_guided_device_tree_is_the_cpu_guided_tree() {
    let sources = uniform_cube(100_000, 11);
    let targets: Vec<[f64; 3]> = sources
        .iter()
        .filter(|p| p[0] < 0.5 || (p[0] < 0.5005 && p[1] < 0.5))
        .copied()
        .collect();
    for ncrit in [16, 64] {
        check_guided::<f64>(&sources, &targets, ncrit);
        check_guided::<f32>(&sources, &targets, ncrit);
    }
}

/// A device slice of `R` with no elements, if this driver gives one.
fn empty<R: Real>() -> Option<CudaSlice<R>> {
    match gpu().stream().clone_htod::<R, [R]>(&[]) {
        Ok(s) => Some(s),
        Err(e) => {
            println!("(the driver refuses an empty allocation: {e}; N = 0 not checked)");
            None
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_tree_is_the_cpu_tree_tiny_inputs() {
    both("one", &[[0.5, 0.25, -1.0]], &[1, 8]);
    both("two", &[[0.5, 0.25, -1.0], [0.1, 0.2, 0.3]], &[1, 8]);
    both("two coincident", &[[0.5, 0.25, -1.0]; 2], &[1, 8]);
    both(
        "three",
        &[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.9, 0.9, 0.9]],
        &[1, 2],
    );
    // N = 0: one empty root, as on the CPU.
    if let Some(e) = empty::<f64>() {
        let tree = DeviceOctree::<f64>::build(gpu(), [&e, &e, &e], 8).unwrap();
        let want = Octree::build([&[], &[], &[]], 8);
        assert_same_tree(&tree.to_host(gpu()).unwrap(), &want, "N = 0");
        let pseudo = device_pseudo_sources(gpu(), &tree, [&e, &e, &e], &[&e], &[0], 0.5)
            .unwrap()
            .to_host(gpu())
            .unwrap();
        assert_eq!(pseudo.com, vec![want.cells[0].center]);
        assert_eq!(pseudo.slots, vec![vec![0.0]]);
        println!("N = 0: one empty root cell, as on the CPU");
    }
}

/// Largest relative difference (exact equality counts as 0, infinities
/// must match) and how many values are bit-identical.
fn rel_diff(got: &[f64], want: &[f64]) -> (f64, usize) {
    assert_eq!(got.len(), want.len());
    let mut worst = 0.0f64;
    let mut same = 0;
    for (&g, &w) in got.iter().zip(want) {
        if g == w || (g.is_nan() && w.is_nan()) {
            same += 1;
        } else {
            worst = worst.max((g - w).abs() / w.abs().max(f64::MIN_POSITIVE));
        }
    }
    (worst, same)
}

/// Device pseudo-sources against the CPU's, on the same (CPU) tree.
fn check_pseudo<R: Real>(
    what: &str,
    pts: &[[f64; 3]],
    slots: &[Vec<f64>],
    strength: &[usize],
    tol: f64,
) {
    let (r, f) = axes::<R>(pts);
    let slots_r: Vec<Vec<R>> = slots
        .iter()
        .map(|s| s.iter().map(|&v| R::c(v)).collect())
        .collect();
    let d = [upload(&r[0]), upload(&r[1]), upload(&r[2])];
    let d_slots: Vec<CudaSlice<R>> = slots_r.iter().map(|s| upload(s)).collect();
    for theta in [0.5, 0.0] {
        let ncrit = 16;
        let cpu_tree = Octree::build([&f[0], &f[1], &f[2]], ncrit);
        let tree = DeviceOctree::<R>::build(gpu(), [&d[0], &d[1], &d[2]], ncrit).unwrap();
        assert_same_tree(&tree.to_host(gpu()).unwrap(), &cpu_tree, what);
        // Tree order, on the device and on the host.
        let g = |x: &CudaSlice<R>| tree.gather(gpu(), x).unwrap();
        let sp = [g(&d[0]), g(&d[1]), g(&d[2])];
        let ss: Vec<CudaSlice<R>> = d_slots.iter().map(g).collect();
        let host_sorted = |v: &[R]| {
            cpu_tree
                .order
                .iter()
                .map(|&i| v[i as usize])
                .collect::<Vec<R>>()
        };
        let hp = [0, 1, 2].map(|a| host_sorted(&r[a]));
        let hs: Vec<Vec<R>> = slots_r.iter().map(|s| host_sorted(s)).collect();
        let back = |x: &CudaSlice<R>| gpu().stream().clone_dtoh(x).unwrap();
        assert_eq!(back(&sp[0]), hp[0], "{what}: gathered x");
        assert_eq!(back(&ss[0]), hs[0], "{what}: gathered slot 0");

        let t0 = Instant::now();
        let got = device_pseudo_sources(
            gpu(),
            &tree,
            [&sp[0], &sp[1], &sp[2]],
            &ss.iter().collect::<Vec<_>>(),
            strength,
            theta,
        )
        .unwrap()
        .to_host(gpu())
        .unwrap();
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let want =
            fmm_core::far::monopole::pseudo_sources_on_host(&cpu_tree, &hp, &hs, strength, theta);

        let flat = |v: &[[f64; 3]]| v.iter().flatten().copied().collect::<Vec<f64>>();
        let wide = |v: &[R]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
        let (e_com, s_com) = rel_diff(&flat(&got.com), &flat(&want.com));
        let (e_acc, s_acc) = rel_diff(&got.accept2, &want.accept2);
        let mut e_r = 0.0f64;
        let mut s_r = 0;
        let mut n_r = 0;
        for (g, w) in got
            .pos
            .iter()
            .chain(&got.slots)
            .zip(want.pos.iter().chain(&want.slots))
        {
            let (e, s) = rel_diff(&wide(g), &wide(w));
            e_r = e_r.max(e);
            s_r += s;
            n_r += g.len();
        }
        let nc = cpu_tree.cells.len();
        println!(
            "{what:28} {} theta {theta}: {nc} cells ({ms:.1} ms); worst relative difference: \
             com {e_com:.1e} ({s_com}/{} identical), accept2 {e_acc:.1e} ({s_acc}/{nc}), \
             pos+slots {e_r:.1e} ({s_r}/{n_r})",
            R::NAME,
            3 * nc
        );
        assert!(e_com <= 1e-12, "{what} {}: com {e_com:e}", R::NAME);
        assert!(e_acc <= 1e-12, "{what} {}: accept2 {e_acc:e}", R::NAME);
        assert!(e_r <= tol, "{what} {}: pos/slots {e_r:e}", R::NAME);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_pseudo_sources_match_the_cpu() {
    let mut rng = StdRng::seed_from_u64(21);
    let pts = plummer(30_011, 17).0;
    let n = pts.len();
    // Gravity-like: one scalar strength (mass), positive.
    let mass: Vec<f64> = (0..n).map(|_| rng.gen_range(0.5..1.5)).collect();
    check_pseudo::<f64>(
        "scalar strength",
        &pts,
        std::slice::from_ref(&mass),
        &[0],
        1e-12,
    );
    check_pseudo::<f32>("scalar strength", &pts, &[mass], &[0], 1e-6);
    // Vortex-like: a vec3 strength of both signs, zero for every particle
    // with x > 0.2 (cells without strength take the plain mean), and a
    // core size that is not a strength.
    let mut slots: Vec<Vec<f64>> = (0..3)
        .map(|_| (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect())
        .collect();
    for (j, p) in pts.iter().enumerate() {
        if p[0] > 0.2 {
            for s in slots.iter_mut() {
                s[j] = 0.0;
            }
        }
    }
    slots.push((0..n).map(|_| rng.gen_range(0.01..0.03)).collect());
    check_pseudo::<f64>("vec3 strength + sigma", &pts, &slots, &[0, 1, 2], 1e-12);
    check_pseudo::<f32>("vec3 strength + sigma", &pts, &slots, &[0, 1, 2], 1e-6);
    // Duplicates: leaves at the depth bound.
    let distinct = uniform_cube(5, 2);
    let dup: Vec<[f64; 3]> = (0..3000).map(|i| distinct[i % 5]).collect();
    let q: Vec<f64> = (0..3000).map(|_| rng.gen_range(-1.0..1.0)).collect();
    check_pseudo::<f64>("duplicates, signed charge", &dup, &[q], &[0], 1e-12);
}

fn time_build<R: Real>(n: usize, pts: &[[f64; 3]], ncrit: usize) {
    let (r, f) = axes::<R>(pts);
    let d = [upload(&r[0]), upload(&r[1]), upload(&r[2])];
    let s = gpu().stream();
    // Warm: the module compiled (or loaded from the cache).
    let tree = DeviceOctree::<R>::build(gpu(), [&d[0], &d[1], &d[2]], ncrit).unwrap();
    drop(tree);
    let mut times = Vec::new();
    let mut tree = None;
    for _ in 0..5 {
        s.synchronize().unwrap();
        let t0 = Instant::now();
        let t = DeviceOctree::<R>::build(gpu(), [&d[0], &d[1], &d[2]], ncrit).unwrap();
        s.synchronize().unwrap();
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        tree = Some(t);
    }
    let tree = tree.unwrap();
    times.sort_by(f64::total_cmp);
    let (_, stages) =
        DeviceOctree::<R>::build_profiled(gpu(), [&d[0], &d[1], &d[2]], ncrit).unwrap();
    let stages: Vec<String> = stages
        .iter()
        .map(|(name, ms)| format!("{name} {ms:.2}"))
        .collect();

    // Pseudo-sources of a unit mass per particle.
    let ones = upload(&vec![R::c(1.0); n]);
    let g = |x: &CudaSlice<R>| tree.gather(gpu(), x).unwrap();
    s.synchronize().unwrap();
    let t0 = Instant::now();
    let sp = [g(&d[0]), g(&d[1]), g(&d[2])];
    let sm = g(&ones);
    let pseudo =
        device_pseudo_sources(gpu(), &tree, [&sp[0], &sp[1], &sp[2]], &[&sm], &[0], 0.5).unwrap();
    s.synchronize().unwrap();
    let pseudo_ms = t0.elapsed().as_secs_f64() * 1e3;
    drop(pseudo);

    let t0 = Instant::now();
    let want = Octree::build([&f[0], &f[1], &f[2]], ncrit);
    let cpu_ms = t0.elapsed().as_secs_f64() * 1e3;
    assert_same_tree(
        &tree.to_host(gpu()).unwrap(),
        &want,
        &format!("timing N = {n}"),
    );
    println!(
        "N = {n:>8} {} ncrit {ncrit}: GPU build {:.2} ms (median of 5, best {:.2}; stages: {}), \
         {} cells; gather + pseudo-sources {pseudo_ms:.2} ms; CPU build {cpu_ms:.0} ms; same tree",
        R::NAME,
        times[2],
        times[0],
        stages.join(", "),
        tree.n_cells
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_build_timing_plummer_1e6_1e7() {
    println!("{}", gpu().info());
    for n in [1_000_000, 10_000_000] {
        let pts = plummer(n, 1).0;
        time_build::<f32>(n, &pts, 64);
        time_build::<f64>(n, &pts, 64);
    }
}
