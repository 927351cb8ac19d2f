//! GPU test of the local essential tree (`fmm_core::essential`): built on
//! the GPU (the device tree and the node far field's upward pass there),
//! it sends the same cells as the CPU's (the device tree is the CPU's
//! exactly), its nodes' strengths equal to round-off, and the direct sum
//! over it equals the sum over every source to the nodes' error (cut from
//! an FMM's own source tree too); for
//! gravity and for the vortex kernel (a vector strength and a core
//! radius), in f64 and f32.
//!
//! Run on the GPU host: `cargo test --release -p fmm-tests --test suite -- --ignored --nocapture gpu_essential::`.

use fmm_core::cuda::Gpu;
use fmm_core::distributions::uniform_cube;
use fmm_core::essential::{essential_sources_from_tree, essential_sources_on, Essential, Region};
use fmm_core::kernels::{Gravity, VelocityStretching};
use fmm_core::reference::{at, relative_l2};
use fmm_core::tree::Bounds;
use fmm_core::{
    evaluate, evaluate_resident_sharing_the_tree, resolve, Backend, Device, DeviceParticles,
    Domain, Kernel, Method, Particles, PeriodicBox, Problem, Real,
};

/// The sources sent by the CPU and by the GPU for a box beside the cube
/// (receiver 1), for one below it (3) and none for an empty box (2) nor
/// for the sender itself (0), compared; the direct sums over receiver 1's
/// against the sum over all, in `domain`.
fn case<K: Kernel, R: Real>(
    src: &Particles<R>,
    tg: &Particles<R>,
    params: &[f64],
    tol: f64,
    domain: &Domain,
) {
    let how = Essential::for_method::<K>(&Method::Tolerance(tol)).unwrap();
    let around = |p: [&[R]; 3]| {
        let f = |a: usize| p[a].iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
        let (x, y, z) = (f(0), f(1), f(2));
        Region::around([&x, &y, &z])
    };
    let below = Region {
        lo: [0.1, 0.2, -0.6],
        hi: [0.7, 0.9, -0.2],
    };
    let regions = [
        around(src.positions()),
        around(tg.positions()),
        Region::around::<f64>([&[], &[], &[]]),
        below,
    ];
    let gpu = resolve(Backend::Cuda).expect("these tests need a CUDA GPU");
    // The tree in the sources' own cube, and in a cube given (a
    // distributed run's lattice): the GPU's cells the CPU's in both.
    let given = Bounds {
        center: [0.8, 0.45, 0.55],
        half: 0.9,
    };
    let run = |device: Device<'static>, cube: Option<Bounds>| {
        essential_sources_on::<K, R>(device, src, &regions, 0, &how, domain, cube).unwrap()
    };
    let lens = |s: &[Particles<R>]| s.iter().map(|p| p.len()).collect::<Vec<_>>();
    let (cpu_given, sel_given) = run(Device::Cpu, Some(given));
    let (dev_given, dev_sel_given) = run(gpu, Some(given));
    assert_eq!(sel_given, dev_sel_given, "the same cells in the given cube");
    assert_eq!(lens(&cpu_given), lens(&dev_given));
    let (cpu, cpu_sel) = run(Device::Cpu, None);
    let (dev, dev_sel) = run(gpu, None);
    assert_eq!(cpu_sel, dev_sel, "the same cells");
    assert_eq!(lens(&cpu), lens(&dev));
    assert_eq!(
        (dev[0].len(), dev[2].len()),
        (0, 0),
        "none for the sender, none for no box"
    );
    assert!(!dev[3].is_empty() && dev[3].len() < src.len());
    let problem = Problem::new(params).in_domain(*domain);
    let direct = |s: &Particles<R>| {
        evaluate::<K, R>(Backend::Cpu, &Method::direct(), problem, tg, s)
            .unwrap()
            .outputs
    };
    let idx: Vec<usize> = (0..tg.len()).collect();
    let (all, c, g) = (direct(src), direct(&cpu[1]), direct(&dev[1]));
    let (all, c, g) = (at(&all, &idx), at(&c, &idx), at(&g, &idx));
    let (cpu_err, gpu_err, apart) = (
        relative_l2(&c, &all),
        relative_l2(&g, &all),
        relative_l2(&g, &c),
    );
    println!(
        "{} {} {domain:?}: {} of {} sources sent ({} cells as nodes); CPU {cpu_err:.2e}, GPU {gpu_err:.2e} from every source; GPU from CPU {apart:.2e}",
        K::name(),
        std::any::type_name::<R>(),
        dev[1].len(),
        src.len(),
        dev_sel[1].nodes.len()
    );
    assert!(!dev_sel[1].nodes.is_empty());
    let round = if std::mem::size_of::<R>() == 8 {
        1e-12
    } else {
        1e-5
    };
    assert!(apart < round, "{apart}");
    assert!(gpu_err < tol / 4.0 + round, "{gpu_err}");
    if domain.periodic().is_some() {
        return;
    }
    // Cut from an FMM's own source tree (a distributed evaluation's own
    // sources evaluated in two lots, the trees cut from that lot's tree),
    // whose leaves are the FMM's: what it sends meets the same bound.
    let g = Gpu::shared().unwrap();
    let (d_src, d_tg) = (
        DeviceParticles::upload(g, src).unwrap(),
        DeviceParticles::upload(g, tg).unwrap(),
    );
    let mut shared = None;
    evaluate_resident_sharing_the_tree::<K, R>(
        g,
        &Method::fmm(4, 0.5),
        Problem::new(params).in_cube(given),
        (&d_tg, &d_src),
        |t| shared = t,
        || Ok(None),
    )
    .unwrap();
    let tree = shared.expect("the FMM's source tree");
    let (cut, cut_sel) =
        essential_sources_from_tree::<K, R>(g, src, &tree, &regions, 0, &how).unwrap();
    assert_eq!((cut[0].len(), cut[2].len()), (0, 0));
    assert!(!cut[3].is_empty() && !cut_sel[1].nodes.is_empty());
    let cut_err = relative_l2(&at(&direct(&cut[1]), &idx), &all);
    println!(
        "  cut from the FMM's tree: {} sources sent ({} cells as nodes), {cut_err:.2e} from every source",
        cut[1].len(),
        cut_sel[1].nodes.len()
    );
    assert!(cut_err < tol / 4.0 + round, "{cut_err}");
}

#[test]
#[ignore = "needs a CUDA GPU: `suite --ignored gpu_essential::` on the GPU host (scripts/gpu_mpi_scaling.sh weak runs it)"]
fn gpu_essential_tree_is_the_cpus() {
    let n = 400_000;
    let x = uniform_cube(n, 21);
    let beside: Vec<[f64; 3]> = uniform_cube(2000, 22)
        .iter()
        .map(|p| [1.2 + 0.5 * p[0], p[1], p[2]])
        .collect();
    fn gravity<R: Real>(x: &[[f64; 3]], t: &[[f64; 3]]) {
        let xr: Vec<[R; 3]> = x.iter().map(|p| p.map(R::c)).collect();
        let mut s = Particles::sources::<Gravity>(&xr).unwrap();
        let m: Vec<R> = (0..x.len()).map(|i| R::c(1.0 + (i % 7) as f64)).collect();
        s.set("m", &m).unwrap();
        let tr: Vec<[R; 3]> = t.iter().map(|p| p.map(R::c)).collect();
        let tg = Particles::targets::<Gravity>(&tr).unwrap();
        case::<Gravity, R>(&s, &tg, &[0.0], 1e-6, &Domain::FreeSpace);
    }
    gravity::<f64>(&x, &beside);
    gravity::<f32>(&x, &beside);
    let xr = x.clone();
    let mut s = Particles::sources::<VelocityStretching>(&xr).unwrap();
    let alpha: Vec<[f64; 3]> = (0..n)
        .map(|i| [(i % 5) as f64 - 2.0, (i % 3) as f64 - 1.0, 1.0])
        .collect();
    s.set_vec3("alpha", &alpha).unwrap();
    s.set("sigma", &vec![0.02; n]).unwrap();
    let mut tg = Particles::targets::<VelocityStretching>(&beside).unwrap();
    tg.set_vec3("alpha_i", &alpha[..2000]).unwrap();
    case::<VelocityStretching, f64>(&s, &tg, &[], 1e-5, &Domain::FreeSpace);
}

/// In a periodic box (the distance the nearest image's): targets across
/// the box's face from the sources, neutral charges.
#[test]
#[ignore = "needs a CUDA GPU: `suite --ignored gpu_essential::` on the GPU host (scripts/gpu_mpi_scaling.sh weak runs it)"]
fn gpu_essential_tree_in_a_periodic_box_is_the_cpus() {
    let n = 20_000;
    let x = uniform_cube(n, 23);
    let across: Vec<[f64; 3]> = uniform_cube(500, 24)
        .iter()
        .map(|p| [2.05 + 0.3 * p[0], p[1], p[2]])
        .collect();
    let mut s = Particles::sources::<Gravity>(&x).unwrap();
    let m: Vec<f64> = (0..n)
        .map(|i| if i % 2 == 0 { 1.5 } else { -1.5 })
        .collect();
    s.set("m", &m).unwrap();
    let tg = Particles::targets::<Gravity>(&across).unwrap();
    let periodic = Domain::Periodic(PeriodicBox::cube([-0.2; 3], 2.6));
    case::<Gravity, f64>(&s, &tg, &[0.0], 1e-4, &periodic);
}

/// Many receivers (an interior part of a 5 x 5 x 5 lattice of unit
/// parts, and parts farther out along one axis): the GPU's walk, launched
/// over the receivers still walking and its verdicts appended as made,
/// and its small sends gathered together, send what the CPU's walk sends,
/// receiver by receiver, cell for cell.
#[test]
#[ignore = "needs a CUDA GPU: `suite --ignored gpu_essential::` on the GPU host (scripts/gpu_mpi_scaling.sh weak runs it)"]
fn many_receivers_get_from_the_gpu_what_the_cpu_sends() {
    let n = 200_000;
    let x: Vec<[f64; 3]> = uniform_cube(n, 25)
        .iter()
        .map(|p| p.map(|c| c + 2.0))
        .collect();
    let mut s = Particles::sources::<Gravity>(&x).unwrap();
    let m: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
    s.set("m", &m).unwrap();
    let mut regions = Vec::new();
    for z in 0..5 {
        for y in 0..5 {
            for xx in 0..5 {
                let lo = [xx, y, z].map(|i| i as f64);
                regions.push(Region {
                    lo,
                    hi: lo.map(|c| c + 1.0),
                });
            }
        }
    }
    for far in [8.0, 20.0, 60.0] {
        regions.push(Region {
            lo: [2.0 + far, 2.0, 2.0],
            hi: [3.0 + far, 3.0, 3.0],
        });
    }
    // Part (2, 2, 2) is the sender.
    let me = (2 * 5 + 2) * 5 + 2;
    let how = Essential::for_method::<Gravity>(&Method::Tolerance(1e-4)).unwrap();
    let gpu = resolve(Backend::Cuda).expect("these tests need a CUDA GPU");
    let run = |device| {
        essential_sources_on::<Gravity, f64>(
            device,
            &s,
            &regions,
            me,
            &how,
            &Domain::FreeSpace,
            None,
        )
        .unwrap()
    };
    let (cpu, cpu_sel) = run(Device::Cpu);
    let (dev, dev_sel) = run(gpu);
    assert_eq!(cpu_sel, dev_sel, "the same cells for every receiver");
    let lens = |s: &[Particles<f64>]| s.iter().map(|p| p.len()).collect::<Vec<_>>();
    assert_eq!(lens(&cpu), lens(&dev));
    let sent: usize = dev.iter().map(|p| p.len()).sum();
    assert_eq!(dev[me].len(), 0, "none to itself");
    for (q, (c, g)) in cpu.iter().zip(&dev).enumerate() {
        for (a, b) in c.positions().iter().zip(g.positions()) {
            let worst = a
                .iter()
                .zip(b)
                .map(|(u, v)| (u - v).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-12, "receiver {q}: positions {worst:e} apart");
        }
        let (cm, gm) = (&c.slots()[0], &g.slots()[0]);
        let worst = cm
            .iter()
            .zip(gm)
            .map(|(u, v)| (u - v).abs())
            .fold(0.0, f64::max);
        let largest = cm.iter().map(|u| u.abs()).fold(0.0, f64::max);
        assert!(
            worst <= 1e-12 * largest,
            "receiver {q}: strengths {worst:e} apart (the largest {largest:e})"
        );
    }
    println!(
        "{} receivers: {sent} sources sent in all, {} to a face's neighbour, {} to the farthest",
        regions.len(),
        dev[me + 1].len(),
        dev[regions.len() - 1].len()
    );
}
