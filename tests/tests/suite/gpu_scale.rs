//! GPU tests of particles kept on the device between calls
//! (`evaluate_resident`) and of problems at scale: every method on
//! device-resident particles gives what the host path gives, and the FMM's
//! lists past 2^31 entries stay correct (issue 13, defect 4).
//!
//! Run on the GPU host: `cargo test --release -p fmm-tests --test suite -- --ignored --nocapture gpu_scale::`.

use fmm_core::cuda::Gpu;
use fmm_core::distributions::{plummer, uniform_cube};
use fmm_core::kernels::*;
use fmm_core::tree::Bounds;
use fmm_core::{
    evaluate, evaluate_resident, evaluate_resident_in_two_lots, Backend, DeviceParticles, Error,
    Method, Particles, Problem, Real,
};
use fmm_tests::{fmm_options, rel_l2};

fn gpu() -> &'static Gpu {
    Gpu::shared().expect("these tests need a CUDA GPU")
}

/// Gravity sources at `pos` with masses of one sign, and targets at `tpos`.
fn gravity<R: Real>(pos: &[[f64; 3]], tpos: &[[f64; 3]]) -> (Particles<R>, Particles<R>) {
    let conv = |v: &[[f64; 3]]| -> Vec<[R; 3]> { v.iter().map(|p| p.map(R::c)).collect() };
    let mut s = Particles::sources::<Gravity>(&conv(pos)).unwrap();
    let m: Vec<R> = (0..pos.len())
        .map(|i| R::c((1.0 + (i % 5) as f64) / pos.len() as f64))
        .collect();
    s.set("m", &m).unwrap();
    (Particles::targets::<Gravity>(&conv(tpos)).unwrap(), s)
}

/// The GPU's staging switch, held by a test that turns it (tests run in
/// parallel and the switch is the GPU's): turned back on when dropped,
/// the test passed or not.
struct StagingSwitch(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl StagingSwitch {
    fn hold() -> Self {
        static SWITCH: std::sync::Mutex<()> = std::sync::Mutex::new(());
        StagingSwitch(SWITCH.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn set(&self, on: bool) {
        gpu().set_staging(on);
    }
}

impl Drop for StagingSwitch {
    fn drop(&mut self) {
        gpu().set_staging(true);
    }
}

/// Whether targets sit at the sources' points, found as the sources are
/// copied (`DeviceParticles::upload_noting_targets`), is a plain host
/// comparison's answer: through the staging buffers (several pieces, a
/// ragged end) and without, short sets, f32 and f64, one point moved on
/// one axis at either end or in the middle, sets of other lengths; and
/// the copy is the sources still.
#[test]
#[ignore = "needs a CUDA GPU"]
fn targets_at_the_sources_points_are_found_in_the_copy() {
    let switch = StagingSwitch::hold();
    for staging in [true, false] {
        switch.set(staging);
        targets_found_in_the_copy::<f32>(2_300_001, 3, staging);
        targets_found_in_the_copy::<f32>(1_000, 4, staging);
        targets_found_in_the_copy::<f64>(1_200_001, 5, staging);
    }
}

/// One length, seed and precision of
/// [`targets_at_the_sources_points_are_found_in_the_copy`].
fn targets_found_in_the_copy<R: Real>(n: usize, seed: u64, staging: bool) {
    let pos = uniform_cube(n, seed);
    let mut cases: Vec<(String, Vec<[f64; 3]>)> = vec![("the same".into(), pos.clone())];
    for (at, axis) in [(0, 0), (n / 2, 1), (n - 1, 2)] {
        let mut moved = pos.clone();
        moved[at][axis] += 1e-3;
        cases.push((format!("point {at} moved along axis {axis}"), moved));
    }
    cases.push(("one fewer".into(), pos[..n - 1].to_vec()));
    for (what, tpos) in &cases {
        let (t, s) = gravity::<R>(&pos, tpos);
        let plain = t.len() == s.len() && (0..3).all(|a| t.positions()[a] == s.positions()[a]);
        let (d, same) = DeviceParticles::upload_noting_targets(gpu(), &s, &t).unwrap();
        let case = format!("{what}, n {n}, {}, staging {staging}", R::NAME);
        assert_eq!(same, plain, "{case}");
        assert_eq!(same, what == "the same", "{case}: the case itself");
        let mut all: Vec<_> = d.positions().unwrap().iter().collect();
        all.push(&d.slots()[0]);
        let back = gpu().download_many(&all, n).unwrap();
        for (a, got) in back[..3].iter().enumerate() {
            assert_eq!(got, s.positions()[a], "{case}: axis {a} copied");
        }
        assert_eq!(back[3], s.slots()[0], "{case}: masses copied");
    }
}

/// Sets joined on the device as they are copied over (a distributed
/// evaluation's own sources and those it received) are the sets joined on
/// the host: through the staging buffers and without, with an empty part,
/// a first part on the device already (`joined_with`), and a set of
/// another kernel refused by name.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sets_joined_on_the_device_are_the_sets_joined_on_the_host() {
    let a_pos = uniform_cube(300_000, 8);
    let b_pos = plummer(70_001, 9).0;
    let switch = StagingSwitch::hold();
    for staging in [true, false] {
        switch.set(staging);
        let (_, a) = gravity::<f32>(&a_pos, &[]);
        let (_, b) = gravity::<f32>(&b_pos, &[]);
        let (_, none) = gravity::<f32>(&[], &[]);
        for parts in [
            vec![&a, &b],
            vec![&b, &none, &a],
            vec![&none, &b],
            vec![&a, &none],
        ] {
            let d = DeviceParticles::upload_joined(gpu(), &parts).unwrap();
            let n: usize = parts.iter().map(|p| p.len()).sum();
            assert_eq!(d.len(), n);
            // The first part on the device already, the rest joined to it
            // (a process's own sources and those the others sent).
            if let ([first, rest], false) = (&parts[..], parts[0].is_empty()) {
                let on = DeviceParticles::upload(gpu(), first).unwrap();
                let j = on.joined_with(gpu(), rest).unwrap();
                assert_eq!(j.len(), n);
                let arrays = |d: &DeviceParticles<f32>| {
                    let mut all: Vec<_> = d.positions().unwrap().iter().collect();
                    all.push(&d.slots()[0]);
                    gpu().download_many(&all, n).unwrap()
                };
                assert_eq!(arrays(&j), arrays(&d), "joined with, staging {staging}");
            }
            let got = gpu()
                .download_many(&d.positions().unwrap().iter().collect::<Vec<_>>(), n)
                .unwrap();
            for (axis, got) in got.iter().enumerate() {
                let want: Vec<f32> = parts
                    .iter()
                    .flat_map(|p| p.positions()[axis].iter().copied())
                    .collect();
                assert_eq!(*got, want, "axis {axis}, staging {staging}");
            }
            let m = gpu().download_many(&[&d.slots()[0]], n).unwrap();
            let want: Vec<f32> = parts.iter().flat_map(|p| p.slots()[0].clone()).collect();
            assert_eq!(m[0], want, "masses, staging {staging}");
        }
    }
    drop(switch);
    let (_, a) = gravity::<f32>(&a_pos[..10], &[]);
    let c = Particles::<f32>::sources::<Coulomb>(&[[0.0f32; 3]]).unwrap();
    let e = DeviceParticles::upload_joined(gpu(), &[&a, &c])
        .err()
        .unwrap();
    assert!(e.to_string().contains("made alike"), "{e}");
    let on = DeviceParticles::upload(gpu(), &a).unwrap();
    let e = on.joined_with(gpu(), &c).err().unwrap();
    assert!(e.to_string().contains("made alike"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn resident_particles_give_what_the_host_path_gives() {
    let pos = plummer(30_000, 4).0;
    let other = uniform_cube(5_000, 5);
    let methods = [
        Method::direct(),
        Method::treecode(0.5),
        Method::fmm(6, 0.5),
        Method::fmm_tolerance(1e-5),
    ];
    for (what, tpos) in [("at the sources", &pos), ("apart", &other)] {
        let (t, s) = gravity::<f64>(&pos, tpos);
        let d_src = DeviceParticles::upload(gpu(), &s).unwrap();
        let d_tgt = if std::ptr::eq(tpos, &pos) {
            DeviceParticles::targets_at_sources(gpu(), &t).unwrap()
        } else {
            DeviceParticles::upload(gpu(), &t).unwrap()
        };
        for method in &methods {
            // No softening: a tolerance of 1e-5 is out of the Laplace far
            // field's reach with one (the driver says so).
            let host = evaluate::<Gravity, f64>(Backend::Cuda, method, &[0.0], &t, &s).unwrap();
            let res =
                evaluate_resident::<Gravity, f64>(gpu(), method, &[0.0], &d_tgt, &d_src).unwrap();
            let got = res.outputs.download(gpu()).unwrap();
            let e = rel_l2(&got.slots().concat(), &host.outputs.slots().concat());
            println!(
                "{what:15} {:9}: resident against host {e:.1e}, {} run(s)",
                method.name(),
                res.stats.runs
            );
            assert_eq!(res.achieved.is_some(), host.achieved.is_some());
            // A tolerance's way is learned process-wide: a test running
            // beside may teach one call a way the other did not take.
            // Then each meets the tolerance, not the other's sums.
            let ways = |a: &Option<fmm_core::Achieved>| {
                a.as_ref().map(|a| (a.method, a.settings, a.far_field))
            };
            let bound = match (ways(&res.achieved), ways(&host.achieved)) {
                (Some(r), Some(h)) if r != h => 2.0 * res.achieved.as_ref().unwrap().tolerance,
                _ => 1e-14,
            };
            assert!(
                e < bound,
                "{what}, {}: {e:e} (bound {bound:e})",
                method.name()
            );
        }
    }
    // Targets at the sources' points must be as many as the sources.
    let (t, s) = gravity::<f64>(&pos, &pos);
    let d_src = DeviceParticles::upload(gpu(), &s).unwrap();
    let few = Particles::<f64>::targets::<Gravity>(&pos[..10]).unwrap();
    let d_few = DeviceParticles::targets_at_sources(gpu(), &few).unwrap();
    let e = evaluate_resident::<Gravity, f64>(gpu(), &Method::direct(), &[0.01], &d_few, &d_src)
        .err()
        .unwrap();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e}");
    // Particles of another kernel are refused by name.
    let d_t = DeviceParticles::targets_at_sources(gpu(), &t).unwrap();
    let e = evaluate_resident::<Coulomb, f64>(gpu(), &Method::direct(), &[], &d_t, &d_src)
        .err()
        .unwrap();
    assert!(matches!(e, Error::WrongParticles { .. }), "{e}");
}

/// Sources in two lots (a process's own, and what the others' local
/// essential trees bring later) evaluated as one FMM on the device
/// (`evaluate_resident_in_two_lots`) meet the CPU's direct sum of both
/// joined as the FMM of both joined does (within three times its error
/// and a hundredth of the method's: a second lot past the cube has a
/// tree of its own): a second lot beside the first
/// in the cube given (its cells grafted into the first's tree; copied to
/// the device on the GPU's first stream, and on its second as a
/// distributed evaluation copies the arrivals, where the FMM builds the
/// second lot's tree beside the first lot's near field), one
/// reaching past the cube (evaluated apart and added), none; targets at
/// the first lot's points and apart; the Laplace expansions, the
/// kernel-independent nodes, and the treecode (two evaluations one after
/// the other); and a second lot of another kernel refused.
#[test]
#[ignore = "needs a CUDA GPU: `suite --ignored gpu_scale::sources_in_two_lots` on the GPU host (scripts/gpu_mpi_scaling.sh weak runs it)"]
fn sources_in_two_lots_are_one_evaluation_of_both() {
    let cube = Bounds {
        center: [1.0; 3],
        half: 1.0,
    };
    let first = uniform_cube(40_000, 11);
    let shifted = |pos: Vec<[f64; 3]>, by: [f64; 3]| -> Vec<[f64; 3]> {
        pos.into_iter()
            .map(|p| [0, 1, 2].map(|a| p[a] + by[a]))
            .collect()
    };
    // A neighbour's part beside the first, and one reaching past the cube.
    let beside = shifted(uniform_cube(15_000, 12), [1.0, 0.0, 0.3]);
    let past = shifted(uniform_cube(5_000, 13), [0.5, 1.6, 0.0]);
    let apart = shifted(uniform_cube(3_000, 14), [0.2, 0.4, 0.1]);
    let laplace = Method::Fmm(fmm_options(12, 0.5, 64));
    let nodes =
        Method::Fmm(fmm_options(8, 0.5, 64).with_far_field(fmm_core::FarField::KernelIndependent));
    // The treecode runs the two lots one after the other.
    let treecode = Method::treecode(0.4);
    let methods = [
        ("laplace", &laplace, 1e-6),
        ("nodes", &nodes, 1e-8),
        ("treecode", &treecode, 1e-3),
    ];
    for (far, method, within) in methods {
        for (lot, second, on) in [
            ("beside", &beside, gpu()),
            ("beside, stream 2", &beside, Gpu::shared_beside().unwrap()),
            ("past the cube", &past, gpu()),
            ("none", &vec![], gpu()),
        ] {
            for (at, tpos) in [("at the first lot", &first), ("apart", &apart)] {
                let (t, s1) = gravity::<f64>(&first, tpos);
                let (_, s2) = gravity::<f64>(second, &[]);
                let mut both = s1.clone();
                both.append(&s2).unwrap();
                let want =
                    evaluate::<Gravity, f64>(Backend::Cpu, &Method::direct(), &[0.0], &t, &both)
                        .unwrap();
                let want = want.outputs.slots().concat();
                let d1 = DeviceParticles::upload(gpu(), &s1).unwrap();
                let d_tgt = if std::ptr::eq(tpos, &first) {
                    DeviceParticles::targets_at_sources(gpu(), &t).unwrap()
                } else {
                    DeviceParticles::upload(gpu(), &t).unwrap()
                };
                let problem = Problem::new(&[0.0]).in_cube(cube);
                let later = || {
                    if second.is_empty() {
                        Ok(None)
                    } else {
                        DeviceParticles::upload(on, &s2).map(Some)
                    }
                };
                let (ev, back) = evaluate_resident_in_two_lots::<Gravity, f64>(
                    gpu(),
                    method,
                    problem,
                    &d_tgt,
                    &d1,
                    later,
                )
                .unwrap();
                assert_eq!(back.map_or(0, |b| b.len()), second.len());
                let got = ev.outputs.download(gpu()).unwrap().slots().concat();
                let joined = DeviceParticles::upload(gpu(), &both).unwrap();
                let d_t = DeviceParticles::upload(gpu(), &t).unwrap();
                let one = evaluate_resident::<Gravity, f64>(gpu(), method, problem, &d_t, &joined)
                    .unwrap();
                let one = one.outputs.download(gpu()).unwrap().slots().concat();
                let (e_lots, e_one) = (rel_l2(&got, &want), rel_l2(&one, &want));
                println!(
                    "{far:7} second lot {lot:16} targets {at:16}: in two lots {e_lots:.1e}, \
                     joined {e_one:.1e} against the direct sum"
                );
                assert!(
                    e_lots < within && e_lots < 3.0 * e_one + within / 100.0,
                    "{far}, {lot}, {at}: {e_lots:e} (joined {e_one:e})"
                );
            }
        }
    }
    // A second lot of another kernel is refused by name.
    let (t, s) = gravity::<f64>(&first, &first);
    let d_t = DeviceParticles::targets_at_sources(gpu(), &t).unwrap();
    let d_s = DeviceParticles::upload(gpu(), &s).unwrap();
    let coulomb = Particles::<f64>::sources::<Coulomb>(&[[0.5; 3]]).unwrap();
    let e = evaluate_resident_in_two_lots::<Gravity, f64>(
        gpu(),
        &laplace,
        Problem::new(&[0.0]).in_cube(cube),
        &d_t,
        &d_s,
        || DeviceParticles::upload(gpu(), &coulomb).map(Some),
    )
    .err()
    .unwrap();
    assert!(matches!(e, Error::WrongParticles { .. }), "{e}");
}

/// Issue 13, defect 4: the GPU FMM's list offsets were 32-bit, and at 2e8
/// particles (gravity, p 6, theta 0.7, ncrit 64) the M2L list passed 2^31
/// entries and the M2L read out of bounds. Leaves of at most two particles
/// and theta 0.4 reach that at 10^7 (theta 0.5 gave 1.49e9): the lists
/// pass 2^31 entries and the result still meets the direct sum.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_lists_pass_two_to_the_31_entries_and_stay_correct() {
    let n = 10_000_000;
    let pos = uniform_cube(n, 17);
    let (t, s) = gravity::<f32>(&pos, &pos);
    drop(pos);
    let method = Method::Fmm(fmm_options(3, 0.4, 2));
    let t0 = std::time::Instant::now();
    let ev = evaluate::<Gravity, f32>(Backend::Cuda, &method, &[0.0], &t, &s).unwrap();
    let seconds = t0.elapsed().as_secs_f64();
    let e = fmm_core::reference::sampled_error::<Gravity, f32>(&[0.0], &t, &s, &ev.outputs, 64);
    println!(
        "N = 1e7, p 3, theta 0.4, ncrit 2: {:.3e} M2L, {:.3e} P2P, {} target cells, {seconds:.2} s, error {e:.2e} on 64 targets",
        ev.stats.m2l as f64, ev.stats.p2p as f64, ev.stats.target_cells
    );
    assert!(
        ev.stats.m2l > 1 << 31,
        "the M2L list must pass 2^31 entries for this test to mean anything: {}",
        ev.stats.m2l
    );
    assert!(ev.outputs.slots().iter().flatten().all(|x| x.is_finite()));
    assert!(e < 1e-2, "{e:e}");
}
