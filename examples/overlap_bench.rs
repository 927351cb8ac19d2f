//! One GPU plays process 0 of a weak-scaling job, to time its step's
//! parts without MPI and without other processes on the GPU (several
//! processes sharing one GPU take turns on it, which says nothing of a
//! job with a GPU each): `overlap_bench [n] [parts] [kernel] [p] [theta]`
//! (defaults 2^24, 4, `gravity`, and the FMM's order and MAC that the
//! tolerance 1e-4 met by at 2^24 on an H200: p 6, theta 0.7 for gravity,
//! p 9, theta 0.56 for `velocity-stretching`; in f32). The parts are unit cubes
//! side by side as `fmm_bench --distributed` lays them out (2 x 2 x 1 for
//! 4), `n` uniform particles each, part 0 at a corner. Or `parts` is the
//! cube of a power of two (64, 512, 4096): a `k x k x k` lattice, part 0
//! at its centre with a neighbour on every side, what an interior process
//! of a job of that many gets and sends (every part holds part 0's draw,
//! moved; see `lattice_layout`). The other parts' local essential trees
//! for part 0 are built first (what would arrive); then, each the median
//! of three:
//!
//! - alone: part 0's own sources, one process's step (copies, FMM, the
//!   outputs back);
//! - joined: its local essential trees for the others, then every source
//!   joined, one evaluation (what `fmm_bench --distributed` runs);
//! - in two lots: the own sources' FMM up to its M2L and P2P while the
//!   trees are cut from its source tree on a second stream, then the
//!   arrivals' cells into the same locals and one downward pass
//!   ([`fmm_core::evaluate_resident_sharing_the_tree`], as
//!   `fmm_core::distributed::Overlap::Gpu`, the default, and
//!   `fmm_bench --distributed` run it).
//!
//! The targets sit at the own sources' points (one tree for both) alone
//! and in two lots, as one process's evaluation finds them. Neither counts the boxes, the MPI exchange nor the error estimate
//! (the FMM at fixed `p` and `theta`); the trees are sent at the
//! tolerance 1e-4's nodes. The efficiency printed is alone over each.
//! Needs a GPU.

use std::cell::{Cell, RefCell};
use std::sync::mpsc;
use std::time::Instant;

use fmm_core::cuda::Gpu;
use fmm_core::distributions::uniform_cube;
use fmm_core::essential::{essential_sources_from, essential_sources_from_tree, Essential, Region};
use fmm_core::fmm_codegen::ast::Shape;
use fmm_core::kernels::{Gravity, VelocityStretching};
use fmm_core::tree::{Bounds, TreeOrdered};
use fmm_core::{
    evaluate_resident, evaluate_resident_sharing_the_tree, Device, DeviceParticles, Domain, Kernel,
    Method, Particles, Problem,
};

type R = f32;

fn arg<T: std::str::FromStr>(i: usize, default: T) -> Result<T, String> {
    match std::env::args().nth(i) {
        Some(v) => v.parse().map_err(|_| format!("argument {i}: not {v:?}")),
        None => Ok(default),
    }
}

/// Part `q`'s targets and sources of kernel `K`: `n` uniform points in the
/// unit cube from `at`; gravity's masses summing to about 1 over `parts`
/// parts, the vortex particles' strengths of either sign and their cores
/// the spacing.
fn part<K: Kernel>(
    q: usize,
    at: [f64; 3],
    n: usize,
    parts: usize,
    vortex: bool,
) -> Result<(Particles<R>, Particles<R>), fmm_core::Error> {
    let x: Vec<[R; 3]> = uniform_cube(n, 1000 + q as u64)
        .into_iter()
        .map(|p| [0, 1, 2].map(|a| (p[a] + at[a]) as R))
        .collect();
    let q = |i: usize| ((1 + i % 7) as f64 / (4.0 * (n * parts) as f64)) as R;
    let mut t = Particles::targets::<K>(&x)?;
    let mut s = Particles::sources::<K>(&x)?;
    if !vortex {
        s.set("m", &(0..n).map(q).collect::<Vec<_>>())?;
    } else {
        let sign = |i: usize| if i.is_multiple_of(3) { -1.0 } else { 1.0 };
        let a: Vec<[R; 3]> = (0..n)
            .map(|i| [q(i), sign(i) * q(i + 1), -q(i + 2)])
            .collect();
        s.set_vec3("alpha", &a)?;
        s.set("sigma", &vec![(n as f64).cbrt().recip() as R; n])?;
        t.set_vec3("alpha_i", &a)?;
    }
    Ok((t, s))
}

/// The median of three runs of `f`, in seconds.
fn median(mut f: impl FnMut() -> Result<(), fmm_core::Error>) -> Result<f64, fmm_core::Error> {
    let mut t = Vec::new();
    for _ in 0..3 {
        let clock = Instant::now();
        f()?;
        t.push(clock.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    Ok(t[1])
}

/// Part `q`'s place in the corner layout: x, y, z by the bits of `q`.
fn corner(q: usize) -> [f64; 3] {
    [q & 1, (q >> 1) & 1, (q >> 2) & 1].map(|b| b as f64)
}

/// `p` moved by `by`, every field kept.
fn moved<K: Kernel>(p: &Particles<R>, by: [f64; 3]) -> Result<Particles<R>, fmm_core::Error> {
    let x: Vec<[R; 3]> = (0..p.len())
        .map(|i| {
            let at = p.position(i);
            [0, 1, 2].map(|a| (at[a] as f64 + by[a]) as R)
        })
        .collect();
    let mut out = Particles::sources::<K>(&x)?;
    let slots = p.slots();
    for f in &K::def().sources {
        match f.shape {
            Shape::Scalar => {
                out.set(&f.name, &slots[f.offset])?;
            }
            Shape::Vec3 => {
                let v: Vec<[R; 3]> = (0..p.len())
                    .map(|i| [0, 1, 2].map(|c| slots[f.offset + c][i]))
                    .collect();
                out.set_vec3(&f.name, &v)?;
            }
        }
    }
    Ok(out)
}

/// `r` moved by `by`.
fn shifted(r: &Region, by: [f64; 3]) -> Region {
    Region {
        lo: [0, 1, 2].map(|a| r.lo[a] + by[a]),
        hi: [0, 1, 2].map(|a| r.hi[a] + by[a]),
    }
}

/// Where part 0 stands among the others, and what it gets from them.
struct Layout {
    /// The box around each part's targets (part 0's first).
    regions: Vec<Region>,
    /// What the others' local essential trees send part 0, as one set.
    arrivals: Particles<R>,
    /// The root cube every process's trees share.
    cube: Bounds,
}

/// The corner layout: `sets` (part 0's first) at their corners, each of
/// the others' trees built for part 0 on `gpu`.
fn corner_layout<K: Kernel>(
    gpu: &'static Gpu,
    sets: &[(Particles<R>, Particles<R>)],
    how: &Essential,
) -> Result<Layout, fmm_core::Error> {
    let regions: Vec<Region> = sets
        .iter()
        .map(|(t, _)| Region::around(t.positions()))
        .collect();
    let all = regions.iter().fold(Region::EMPTY, |a, r| a.join(r));
    let cube = Bounds::around(&all);
    let mut arrivals = Particles::sources::<K>(&[])?;
    for (q, (_, sources)) in sets.iter().enumerate().skip(1) {
        let (sends, _) = essential_sources_from::<K, R>(
            Device::Cuda(gpu),
            sources,
            None,
            &regions,
            q,
            how,
            &Domain::FreeSpace,
            Some(cube),
        )?;
        arrivals.append(&sends[0])?;
    }
    Ok(Layout {
        regions,
        arrivals,
        cube,
    })
}

/// The lattice layout: `k^3` unit parts filling the cube `[0, k)^3`, part
/// 0 (`sources`, `targets`) the one from `(k/2, k/2, k/2)`, an interior
/// part, as in a job of `k^3` processes; every part holds part 0's draw
/// moved to its place. So what the part at offset `v` sends part 0 is what
/// part 0 sends a box at `-v`, moved by `v`: one walk of part 0's tree
/// against the `k^3` boxes at the opposite offsets gives every arrival
/// (the sender's tree in its own unit cube, whose cells are those of the
/// shared cube's from a part's size down).
fn lattice_layout<K: Kernel>(
    gpu: &'static Gpu,
    k: usize,
    (targets, sources): (&Particles<R>, &Particles<R>),
    how: &Essential,
) -> Result<Layout, fmm_core::Error> {
    let c = (k / 2) as f64;
    let own = Region::around(targets.positions());
    let mut offsets = vec![[0.0; 3]];
    for z in 0..k {
        for y in 0..k {
            for x in 0..k {
                let v = [x, y, z].map(|i| i as f64 - c);
                if v != [0.0; 3] {
                    offsets.push(v);
                }
            }
        }
    }
    let regions: Vec<Region> = offsets.iter().map(|&v| shifted(&own, v)).collect();
    let opposite: Vec<Region> = offsets
        .iter()
        .map(|&v| shifted(&own, v.map(|x| -x)))
        .collect();
    let own_cube = Bounds {
        center: [c + 0.5; 3],
        half: 0.5,
    };
    let (sends, _) = essential_sources_from::<K, R>(
        Device::Cuda(gpu),
        sources,
        None,
        &opposite,
        0,
        how,
        &Domain::FreeSpace,
        Some(own_cube),
    )?;
    let mut arrivals = Particles::sources::<K>(&[])?;
    for (send, &v) in sends.iter().zip(&offsets).skip(1) {
        arrivals.append(&moved::<K>(send, v)?)?;
    }
    let half = 0.5 * k as f64;
    Ok(Layout {
        regions,
        arrivals,
        cube: Bounds {
            center: [half; 3],
            half,
        },
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = arg(1, 1 << 24)?;
    let parts: usize = arg(2, 4)?;
    let k = (parts as f64).cbrt().round() as usize;
    let lattice = k * k * k == parts && k.is_power_of_two();
    if !((2..=8).contains(&parts) || lattice) {
        return Err("parts: 2 to 8, or a cube of a power of two (64, 512, 4096)".into());
    }
    match arg(3, "gravity".to_string())?.as_str() {
        "gravity" => bench::<Gravity>(n, parts, (arg(4, 6)?, arg(5, 0.7)?), &[0.0], false),
        "velocity-stretching" => {
            bench::<VelocityStretching>(n, parts, (arg(4, 9)?, arg(5, 0.56)?), &[], true)
        }
        k => Err(format!("kernel: gravity or velocity-stretching, not {k:?}").into()),
    }
}

/// The three ways timed for kernel `K`, the FMM at `(p, theta)`.
fn bench<K: Kernel>(
    n: usize,
    parts: usize,
    (p, theta): (usize, f64),
    params: &[f64],
    vortex: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let gpu = Gpu::shared()?;
    let beside = Gpu::shared_beside()?;
    let how = Essential::for_method::<K>(&Method::Tolerance(1e-4)).ok_or("no nodes")?;
    let k = (parts as f64).cbrt().round() as usize;
    let built = Instant::now();
    let (own, layout) = if parts <= 8 {
        let sets = (0..parts)
            .map(|q| part::<K>(q, corner(q), n, parts, vortex))
            .collect::<Result<Vec<_>, _>>()?;
        let layout = corner_layout::<K>(gpu, &sets, &how)?;
        (sets.into_iter().next().expect("part 0"), layout)
    } else {
        let own = part::<K>(0, [(k / 2) as f64; 3], n, parts, vortex)?;
        let layout = lattice_layout::<K>(gpu, k, (&own.0, &own.1), &how)?;
        (own, layout)
    };
    let built = built.elapsed().as_secs_f64();
    let Layout {
        regions,
        arrivals,
        cube,
    } = layout;
    let problem = Problem::new(params).in_cube(cube);
    let method = Method::fmm(p, theta);
    let free = Domain::FreeSpace;
    let (targets, sources) = (&own.0, &own.1);
    let trees = |device: Device<'_>, own: Option<&DeviceParticles<R>>| {
        essential_sources_from::<K, R>(device, sources, own, &regions, 0, &how, &free, Some(cube))
    };
    let place = if parts <= 8 {
        "a corner".to_string()
    } else {
        format!("the centre of a {k} x {k} x {k} lattice")
    };
    println!(
        "{}, part 0 of {parts} ({place}): {n} particles, {} arrive, {:.1} MB \
         (nodes of order {}, theta {}; made in {built:.1} s); FMM p {p}, theta {theta}",
        K::def().name,
        arrivals.len(),
        (arrivals.len() * (3 + arrivals.slots().len()) * std::mem::size_of::<R>()) as f64 / 1e6,
        how.p,
        how.theta
    );
    let sync = |g: &Gpu| {
        g.stream()
            .synchronize()
            .map_err(|e| fmm_core::Error::BadOption(format!("{e:?}")))
    };
    let alone_stages = RefCell::new(String::new());
    let alone = || -> Result<(), fmm_core::Error> {
        let own = DeviceParticles::upload(gpu, sources)?;
        let tgt = DeviceParticles::targets_at_sources(gpu, targets)?;
        let ev = evaluate_resident::<K, R>(gpu, &method, problem, &tgt, &own)?;
        ev.outputs.download(gpu)?;
        *alone_stages.borrow_mut() = stages(&ev.stats);
        Ok(())
    };
    let joined_out = RefCell::new(None);
    let joined = || -> Result<(), fmm_core::Error> {
        let own = DeviceParticles::upload(gpu, sources)?;
        trees(Device::Cuda(gpu), Some(&own))?;
        let every = own.joined_with(gpu, &arrivals)?;
        drop(own);
        let tgt = DeviceParticles::upload(gpu, targets)?;
        let ev = evaluate_resident::<K, R>(gpu, &method, problem, &tgt, &every)?;
        *joined_out.borrow_mut() = Some(ev.outputs.download(gpu)?);
        Ok(())
    };
    let laps = Cell::new([0.0; 2]);
    let parts_out = RefCell::new(None);
    let arrivals_stages = RefCell::new(String::new());
    let split = || -> Result<(), fmm_core::Error> {
        let clock = Instant::now();
        let own = DeviceParticles::upload(gpu, sources)?;
        sync(gpu)?;
        let (done, word) = mpsc::channel::<()>();
        // The own lot's source tree, for the local essential trees.
        let (tree, shared) = mpsc::channel::<Option<TreeOrdered<R>>>();
        let (evaluated, built) = std::thread::scope(|s| {
            let done = done;
            let (own, arrivals, method) = (&own, &arrivals, &method);
            let first = s.spawn(move || -> Result<_, fmm_core::Error> {
                let tgt = DeviceParticles::targets_at_sources(gpu, targets)?;
                let waited = std::sync::Mutex::new(0.0);
                let at = &waited;
                // Copied on the second stream, as a distributed evaluation
                // copies what the others sent.
                let later = move || {
                    *at.lock().unwrap() = clock.elapsed().as_secs_f64();
                    let _ = word.recv();
                    DeviceParticles::upload(beside, arrivals).map(Some)
                };
                let share = |t| {
                    let _ = tree.send(t);
                };
                let (ev, _) = evaluate_resident_sharing_the_tree::<K, R>(
                    gpu,
                    method,
                    problem,
                    (&tgt, own),
                    share,
                    later,
                )?;
                let out = ev.outputs.download(gpu)?;
                let waited = *waited.lock().unwrap();
                Ok((out, waited, stages(&ev.stats)))
            });
            let built = match shared.recv().ok().flatten() {
                Some(t) => {
                    essential_sources_from_tree::<K, R>(beside, sources, &t, &regions, 0, &how)
                }
                None => trees(Device::Cuda(beside), Some(own)),
            }
            .map(|_| clock.elapsed().as_secs_f64());
            let _ = done.send(());
            (first.join().expect("the own part"), built)
        });
        let (out, waited, st) = evaluated?;
        *parts_out.borrow_mut() = Some(out);
        *arrivals_stages.borrow_mut() = st;
        laps.set([waited, built?]);
        Ok(())
    };
    // Once each first: the modules loaded, the memory pools grown.
    alone()?;
    joined()?;
    split()?;
    // The two ways' outputs alike (the same settings, the sum in another
    // order): the relative l2 difference of each output.
    let (a, b) = (
        joined_out.take().expect("joined"),
        parts_out.take().expect("parts"),
    );
    let apart: Vec<String> = a
        .slots()
        .iter()
        .zip(b.slots())
        .map(|(x, y)| {
            let d: f64 = x
                .iter()
                .zip(y)
                .map(|(&u, &v)| ((u - v) as f64).powi(2))
                .sum();
            let r: f64 = x.iter().map(|&u| (u as f64).powi(2)).sum();
            format!("{:.1e}", (d / r).sqrt())
        })
        .collect();
    println!(
        "in two lots against joined, each output's relative l2 difference: {}",
        apart.join(", ")
    );
    let t_trees = median(|| {
        let own = DeviceParticles::upload(gpu, sources)?;
        trees(Device::Cuda(gpu), Some(&own)).map(|_| ())
    })?;
    let t_alone = median(alone)?;
    let t_joined = median(joined)?;
    let t_split = median(split)?;
    let [own_done, trees_done] = laps.get();
    println!("trees alone  {t_trees:.4} s (the own sources' copy, the local essential trees for the others)");
    println!("alone        {t_alone:.4} s");
    println!(
        "joined       {t_joined:.4} s  efficiency {:.2}",
        t_alone / t_joined
    );
    println!(
        "in two lots {t_split:.4} s  efficiency {:.2} (last run: the own lot waited from \
         {own_done:.4} s, the trees done at {trees_done:.4} s)",
        t_alone / t_split
    );
    println!("alone's stages: {}", alone_stages.borrow());
    println!("in two lots' stages: {}", arrivals_stages.borrow());
    Ok(())
}

/// An evaluation's seconds by stage, in the order they ran.
fn stages(s: &fmm_core::Stats) -> String {
    let each: Vec<String> = s
        .stages
        .iter()
        .map(|(stage, t)| format!("{} {t:.4}", stage.name()))
        .collect();
    each.join(", ")
}
