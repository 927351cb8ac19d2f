//! GPU tests: every built-in kernel and a user kernel on the GPU agree
//! with the CPU evaluator in f64 on fresh random inputs, in f32 and f64,
//! for target counts 1, 31, 4097 and 100003 against other source counts,
//! with the outputs poisoned (NaN) before each run so that an element the
//! GPU does not write cannot pass. Also: every launch shape, chunking when
//! memory is short, empty inputs, and the module cache.
//!
//! Run on the GPU host: `cargo test --release -p fmm-tests --test suite -- --ignored gpu::`.

use fmm_core::cuda::{CacheOutcome, Gpu, ModuleCache};
use fmm_core::fmm_codegen::ast::Shape;
use fmm_core::fmm_codegen::emit::cuda::CudaOptions;
use fmm_core::fmm_codegen::emit::Module;
use fmm_core::kernels::*;
use fmm_core::{kernel, DirectOptions, Kernel, Particles, Real, TreeOptions};
use fmm_tests::{direct_cpu, direct_gpu, rel_l2, treecode_cpu, treecode_gpu};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

kernel! {
    /// Screened Coulomb (Yukawa): the user kernel of examples/custom_kernel.rs.
    pub kernel Yukawa {
        param kappa;
        source q;
        output phi;
        output e: vec3;
        let inv_r = select(r2 > 0.0, rsqrt(r2), 0.0);
        let screened = q * exp(-kappa * r) * inv_r;
        phi += screened;
        e += screened * (1.0 + kappa * r) * inv_r * inv_r * d;
    }
}

fn gpu() -> &'static Gpu {
    Gpu::shared().expect("these tests need a CUDA GPU")
}

/// Random positions in the unit cube and fields for kernel `K`, in f64.
struct Set {
    pos: Vec<[f64; 3]>,
    fields: Vec<(String, Shape, Vec<[f64; 3]>)>,
}

fn random_set<K: Kernel>(rng: &mut StdRng, n: usize, sources: bool) -> Set {
    let def = K::def();
    let layout = if sources { &def.sources } else { &def.targets };
    let pos = (0..n)
        .map(|_| [0, 1, 2].map(|_| rng.gen::<f64>()))
        .collect();
    let fields = layout
        .iter()
        .map(|f| {
            let v = (0..n)
                .map(|_| {
                    if f.name == "sigma" {
                        [rng.gen_range(0.01..0.03); 3]
                    } else {
                        [0, 1, 2].map(|_| rng.gen_range(-1.0..1.0))
                    }
                })
                .collect();
            (f.name.clone(), f.shape, v)
        })
        .collect();
    Set { pos, fields }
}

fn particles<K: Kernel, R: Real>(s: &Set, sources: bool) -> Particles<R> {
    let pos: Vec<[R; 3]> = s.pos.iter().map(|p| p.map(R::c)).collect();
    let mut p = if sources {
        Particles::sources::<K>(&pos).unwrap()
    } else {
        Particles::targets::<K>(&pos).unwrap()
    };
    for (name, shape, v) in &s.fields {
        match shape {
            Shape::Scalar => p
                .set(name, &v.iter().map(|x| R::c(x[0])).collect::<Vec<_>>())
                .unwrap(),
            Shape::Vec3 => p
                .set_vec3(name, &v.iter().map(|x| x.map(R::c)).collect::<Vec<_>>())
                .unwrap(),
        };
    }
    p
}

/// Worst relative L2 error over the output slots.
fn worst(got: &[Vec<f64>], want: &[Vec<f64>]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| rel_l2(g, w))
        .fold(0.0, f64::max)
}

fn to_f64<R: Real>(slots: &[Vec<R>]) -> Vec<Vec<f64>> {
    slots
        .iter()
        .map(|s| s.iter().map(|v| v.to_f64()).collect())
        .collect()
}

fn poisoned() -> DirectOptions {
    DirectOptions {
        poison: true,
        ..Default::default()
    }
}

/// GPU (f32 and f64) against the CPU in f64 for several sizes.
fn agrees_with_cpu<K: Kernel>(params: &[f64], tol_f32: f64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for (m, n) in [(1, 1000), (31, 3), (4097, 5000), (100_003, 777)] {
        let t = random_set::<K>(&mut rng, m, false);
        let s = random_set::<K>(&mut rng, n, true);
        let want = direct_cpu::<K, f64>(
            params,
            &particles::<K, f64>(&t, false),
            &particles::<K, f64>(&s, true),
        )
        .unwrap();
        let want = want.slots().to_vec();

        let got64 = direct_gpu::<K, f64>(
            params,
            &particles::<K, f64>(&t, false),
            &particles::<K, f64>(&s, true),
            &poisoned(),
        )
        .unwrap();
        let e64 = worst(got64.slots(), &want);
        let got32 = direct_gpu::<K, f32>(
            params,
            &particles::<K, f32>(&t, false),
            &particles::<K, f32>(&s, true),
            &poisoned(),
        )
        .unwrap();
        let e32 = worst(&to_f64(got32.slots()), &want);
        println!(
            "{:20} M = {m:6} N = {n:5}: f64 {e64:.2e}  f32 {e32:.2e}",
            K::name()
        );
        assert!(e64 < 1e-12, "{} f64 M = {m} N = {n}: {e64:e}", K::name());
        assert!(e32 < tol_f32, "{} f32 M = {m} N = {n}: {e32:e}", K::name());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_builtin_and_a_user_kernel_agree_with_the_cpu() {
    agrees_with_cpu::<Gravity>(&[0.01], 1e-5, 1);
    agrees_with_cpu::<Coulomb>(&[], 1e-4, 2);
    agrees_with_cpu::<BiotSavart>(&[], 1e-4, 3);
    agrees_with_cpu::<Stretching>(&[], 1e-4, 4);
    agrees_with_cpu::<VelocityStretching>(&[], 1e-4, 5);
    agrees_with_cpu::<HuBiotSavart>(&[0.02], 1e-4, 6);
    agrees_with_cpu::<Yukawa>(&[2.0], 1e-4, 7);
    agrees_with_cpu::<Stokeslet>(&[0.02, 0.7], 1e-4, 8);
    agrees_with_cpu::<StokesletSingular>(&[], 1e-4, 9);
    agrees_with_cpu::<fmm_core::kernels::Yukawa>(&[2.0], 1e-4, 10);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_launch_shape_gives_the_same_sums() {
    let mut rng = StdRng::seed_from_u64(11);
    let (t, s) = (
        random_set::<VelocityStretching>(&mut rng, 1031, false),
        random_set::<VelocityStretching>(&mut rng, 2049, true),
    );
    let (tp, sp) = (
        particles::<VelocityStretching, f64>(&t, false),
        particles::<VelocityStretching, f64>(&s, true),
    );
    let want = direct_cpu::<VelocityStretching, f64>(&[], &tp, &sp).unwrap();
    for shape in CudaOptions::default().shapes {
        let opts = DirectOptions {
            shape: Some(shape),
            poison: true,
            ..Default::default()
        };
        let got = direct_gpu::<VelocityStretching, f64>(&[], &tp, &sp, &opts).unwrap();
        let e = worst(got.slots(), want.slots());
        assert!(e < 1e-12, "shape {shape:?}: {e:e}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn chunks_add_up_to_the_whole() {
    let mut rng = StdRng::seed_from_u64(12);
    let (t, s) = (
        random_set::<Gravity>(&mut rng, 20_000, false),
        random_set::<Gravity>(&mut rng, 30_000, true),
    );
    let (tp, sp) = (
        particles::<Gravity, f64>(&t, false),
        particles::<Gravity, f64>(&s, true),
    );
    let whole = direct_gpu::<Gravity, f64>(&[0.01], &tp, &sp, &poisoned()).unwrap();
    // 7 slots of 8 bytes per target, 4 per source: about 4000 targets and
    // 5000 sources per chunk, so 5 x 6 chunks.
    let opts = DirectOptions {
        max_device_bytes: Some(400_000),
        poison: true,
        ..Default::default()
    };
    let chunked = direct_gpu::<Gravity, f64>(&[0.01], &tp, &sp, &opts).unwrap();
    let e = worst(chunked.slots(), whole.slots());
    assert!(e < 1e-13, "{e:e}");
    let e = direct_gpu::<Gravity, f64>(
        &[0.01],
        &tp,
        &sp,
        &DirectOptions {
            max_device_bytes: Some(1000),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("needs"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn empty_inputs_on_the_gpu() {
    let none = Particles::<f32>::targets::<Gravity>(&[]).unwrap();
    let mut one = Particles::<f32>::sources::<Gravity>(&[[0.5; 3]]).unwrap();
    one.set("m", &[2.0]).unwrap();
    let out = direct_gpu::<Gravity, f32>(&[0.1], &none, &one, &poisoned()).unwrap();
    assert_eq!(out.len(), 0);
    let t = Particles::<f32>::targets::<Gravity>(&[[0.5; 3], [1.5, 0.5, 0.5]]).unwrap();
    let zero = Particles::<f32>::sources::<Gravity>(&[]).unwrap();
    let out = direct_gpu::<Gravity, f32>(&[0.1], &t, &zero, &poisoned()).unwrap();
    assert_eq!(out.scalar("phi").unwrap(), &[0.0, 0.0]);
    // One source on the first target: nothing there, -m / sqrt(1 + eps^2) at the second.
    let out = direct_gpu::<Gravity, f32>(&[0.1], &t, &one, &poisoned()).unwrap();
    let phi = out.scalar("phi").unwrap();
    assert_eq!(phi[0], 0.0);
    assert!((phi[1] + 2.0 / (1.01f32).sqrt()).abs() < 1e-6, "{phi:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn compiled_modules_come_back_from_the_disk_cache() {
    let dir = std::env::temp_dir().join(format!("fmm-gpu-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut first = Gpu::new(0).unwrap();
    first.set_cache(ModuleCache::at(&dir));
    let (_, r) = first
        .module("coulomb", Coulomb::cuda_source(Module::Direct))
        .unwrap();
    assert_eq!(r.outcome, CacheOutcome::Miss);
    let mut second = Gpu::new(0).unwrap();
    second.set_cache(ModuleCache::at(&dir));
    let (_, r2) = second
        .module("coulomb", Coulomb::cuda_source(Module::Direct))
        .unwrap();
    assert_eq!(r2.outcome, CacheOutcome::Hit);
    println!("compile {:.3} s, cache hit {:.3} s", r.seconds, r2.seconds);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_gpu_walk_agrees_with_the_cpu_treecode() {
    use fmm_core::distributions::plummer;
    let pos = plummer(20_000, 21).0;
    let mut s = Particles::<f64>::sources::<Gravity>(&pos).unwrap();
    s.set("m", &vec![1.0 / 20_000.0; 20_000]).unwrap();
    let t = Particles::<f64>::targets::<Gravity>(&pos).unwrap();
    // With the same groups (128 targets, the GPU's default) the two walks
    // make the same interactions.
    for theta in [0.0, 0.5, 0.8] {
        let opts = TreeOptions {
            theta,
            ncrit: 64,
            group: 128,
            ..TreeOptions::default()
        };
        let (cpu, _) = treecode_cpu::<Gravity, f64>(&[0.01], &t, &s, &opts).unwrap();
        let (gpu_out, stats) = treecode_gpu::<Gravity, f64>(&[0.01], &t, &s, &opts).unwrap();
        let e = worst(gpu_out.slots(), cpu.slots());
        println!(
            "gravity walk theta {theta}: GPU vs CPU treecode {e:.2e}, walk {:.4} s",
            stats.seconds(fmm_core::Stage::Walk)
        );
        assert!(e < 1e-12, "theta {theta}: {e:e}");
    }
    // Targets elsewhere than the sources (fewer, another sphere).
    let other = plummer(7_000, 23).0;
    let t2 = Particles::<f64>::targets::<Gravity>(&other).unwrap();
    let opts = TreeOptions {
        theta: 0.5,
        ncrit: 32,
        group: 128,
        ..TreeOptions::default()
    };
    let (cpu, _) = treecode_cpu::<Gravity, f64>(&[0.01], &t2, &s, &opts).unwrap();
    let (g, _) = treecode_gpu::<Gravity, f64>(&[0.01], &t2, &s, &opts).unwrap();
    let e = worst(g.slots(), cpu.slots());
    println!("targets elsewhere: GPU vs CPU treecode {e:.2e}");
    assert!(e < 1e-12, "{e:e}");
    // Stacks too small for the walk: it runs again with deeper ones and
    // gets the same sums.
    let opts = TreeOptions {
        theta: 0.0,
        ncrit: 4,
        group: 128,
        ..TreeOptions::default()
    };
    let (cpu, _) = treecode_cpu::<Gravity, f64>(&[0.01], &t, &s, &opts).unwrap();
    let small = TreeOptions {
        walk_stack: 16,
        ..opts
    };
    let deep = treecode_gpu::<Gravity, f64>(&[0.01], &t, &s, &small);
    let e = worst(deep.unwrap().0.slots(), cpu.slots());
    println!("theta 0, ncrit 4, stacks of 16 cells to start: GPU vs CPU {e:.2e}");
    assert!(e < 1e-12, "{e:e}");
    // Coincident particles: one leaf at the depth bound, split into several
    // groups of at most one block.
    let same = vec![[0.25; 3]; 700];
    let mut s = Particles::<f32>::sources::<Gravity>(&same).unwrap();
    s.set("m", &vec![1.0; 700]).unwrap();
    let t = Particles::<f32>::targets::<Gravity>(&same).unwrap();
    let (out, stats) =
        treecode_gpu::<Gravity, f32>(&[0.1], &t, &s, &TreeOptions::default()).unwrap();
    assert!(stats.target_groups >= 6, "{stats:?}");
    assert!(
        out.slots().iter().all(|v| v.iter().all(|x| *x == 0.0)),
        "coincident particles add exactly 0"
    );
    // The vortex kernels through the walk, f32 against the f64 CPU treecode.
    let mut rng = StdRng::seed_from_u64(22);
    let set = random_set::<VelocityStretching>(&mut rng, 5000, true);
    let tset = Set {
        pos: set.pos.clone(),
        fields: random_set::<VelocityStretching>(&mut rng, 5000, false).fields,
    };
    let opts = TreeOptions {
        theta: 0.5,
        ncrit: 32,
        group: 128,
        ..TreeOptions::default()
    };
    let (cpu, _) = treecode_cpu::<VelocityStretching, f64>(
        &[],
        &particles::<VelocityStretching, f64>(&tset, false),
        &particles::<VelocityStretching, f64>(&set, true),
        &opts,
    )
    .unwrap();
    let (g32, _) = treecode_gpu::<VelocityStretching, f32>(
        &[],
        &particles::<VelocityStretching, f32>(&tset, false),
        &particles::<VelocityStretching, f32>(&set, true),
        &opts,
    )
    .unwrap();
    let e = worst(&to_f64(g32.slots()), cpu.slots());
    println!("velocity+stretching walk f32 vs CPU f64 treecode: {e:.2e}");
    assert!(e < 1e-4, "{e:e}");
}

/// The walk with node far fields (Chebyshev nodes, pseudo-particles): an
/// accepted cell's far field is the kernel from its nodes, which carry its
/// node strengths (the GPU FMM's upward pass). In f64 the CPU treecode's
/// sums to rounding with the same interactions, for a scalar strength,
/// vector strengths, a core radius among the source fields (the cells'
/// means), softened gravity through pseudo-particles, targets apart and
/// stacks that overflow; in f32 the f64 direct sum to the method's
/// accuracy.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_gpu_walk_with_node_far_fields_is_the_cpus() {
    use fmm_core::kernels::Yukawa as BuiltinYukawa;
    use fmm_core::FarField;
    use fmm_tests::sets::{mean_spacing, set, Dist, Spec, Strengths, Targets};
    fn check<K: Kernel>(
        params: &[f64],
        spec: &Spec,
        far_field: FarField,
        order: usize,
        theta: f64,
        walk_stack: usize,
    ) {
        let opts = TreeOptions {
            theta,
            ncrit: 32,
            group: 128,
            far_field,
            order,
            walk_stack,
        };
        let (t, s) = set::<K, f64>(spec);
        let (c, cs) = treecode_cpu::<K, f64>(params, &t, &s, &opts).unwrap();
        let (g, gs) = treecode_gpu::<K, f64>(params, &t, &s, &opts).unwrap();
        let e = worst(g.slots(), c.slots());
        let exact = direct_cpu::<K, f64>(params, &t, &s).unwrap();
        let ec = rel_l2(&c.slots().concat(), &exact.slots().concat());
        let (t32, s32) = set::<K, f32>(spec);
        let (g32, _) = treecode_gpu::<K, f32>(params, &t32, &s32, &opts).unwrap();
        let e32 = rel_l2(&to_f64(g32.slots()).concat(), &exact.slots().concat());
        println!(
            "{} {} p {order} theta {theta}: GPU against CPU {e:.2e}; against direct: CPU f64 \
             {ec:.2e}, GPU f32 {e32:.2e}; {} P2P, {} from nodes; walk {:.4} s",
            K::name(),
            far_field.name(),
            gs.p2p,
            gs.p2c,
            gs.seconds(fmm_core::Stage::Walk)
        );
        assert!(gs.p2c > 0, "{gs:?}");
        assert_eq!((gs.p2p, gs.p2c), (cs.p2p, cs.p2c));
        assert!(e < 1e-12, "{}: {e:e}", K::name());
        assert!(e32 < 1.5 * ec + 2e-5, "{}: f32 {e32:e}", K::name());
    }
    let cube = Spec::new(Dist::Cube, 20_000, Strengths::Coherent, 31);
    let plummer = Spec::new(Dist::Plummer, 20_000, Strengths::Coherent, 32);
    check::<BuiltinYukawa>(&[4.0], &cube, FarField::KernelIndependent, 4, 0.5, 0);
    let h = mean_spacing(Dist::Plummer, 20_000);
    check::<Stokeslet>(&[h, 1.0], &plummer, FarField::KernelIndependent, 3, 0.6, 0);
    check::<Gravity>(&[0.01], &plummer, FarField::Ppm, 4, 0.5, 0);
    let cores = Spec {
        sigma: 2.0 * mean_spacing(Dist::Cube, 20_000),
        ..cube
    };
    check::<VelocityStretching>(&[], &cores, FarField::KernelIndependent, 3, 0.5, 0);
    let apart = Spec {
        targets: Targets::Apart(7_000),
        ..cube
    };
    check::<BuiltinYukawa>(&[4.0], &apart, FarField::KernelIndependent, 3, 0.5, 0);
    // Stacks of 16 cells to start: the walk runs again with deeper ones.
    check::<BuiltinYukawa>(&[4.0], &cube, FarField::KernelIndependent, 2, 0.3, 16);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn staged_copies_round_trip() {
    // Staged (long, equal lengths; several staging pieces with a ragged
    // end), plain (short) and mixed lengths.
    for lens in [
        vec![1 << 20, 1 << 20, 1 << 20],
        vec![(5 << 20) + 3, (5 << 20) + 3],
        vec![1000, 1000],
        vec![(1 << 19) + 7, 5],
    ] {
        let host: Vec<Vec<f32>> = lens
            .iter()
            .enumerate()
            .map(|(k, &n)| (0..n).map(|i| (i as f32) * 0.5 + k as f32).collect())
            .collect();
        let refs: Vec<&[f32]> = host.iter().map(|v| v.as_slice()).collect();
        let dev = gpu().upload_many(&refs).unwrap();
        for (d, h) in dev.iter().zip(&host) {
            let back = gpu().download_many(&[d], h.len()).unwrap();
            assert_eq!(&back[0], h);
        }
        let n = lens.iter().copied().min().unwrap();
        let all = gpu()
            .download_many(&dev.iter().collect::<Vec<_>>(), n)
            .unwrap();
        for (a, h) in all.iter().zip(&host) {
            assert_eq!(a.as_slice(), &h[..n]);
        }
    }
    let host: Vec<f64> = (0..(3 << 20) + 11).map(|i| i as f64 / 3.0).collect();
    let dev = gpu().upload_many(&[host.as_slice()]).unwrap();
    assert_eq!(
        gpu().download_many(&[&dev[0]], host.len()).unwrap()[0],
        host
    );
}
