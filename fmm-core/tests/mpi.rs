//! Distributed evaluation under MPI (the `mpi` feature): every process
//! holds an uneven share of the particles (process `r` a share growing as
//! `(r + 1)^2`, process 1 none when there are three or more), evaluates
//! them through [`evaluate_distributed`], and checks its own outputs
//! against one process's evaluation of everything, which each process
//! makes itself. Bad input is said on every process.
//!
//! `cargo test -p fmm-core --features mpi --test mpi` runs it as one
//! process; CI runs the same binary under `mpirun -n 2, 3, 4
//! --oversubscribe`. A failed check panics, and the process's non-zero
//! exit fails the run.

use fmm_core::distributed::checkpoint::{
    arrays_bytes, read_arrays, read_parts, write_parts, write_whole,
};
use fmm_core::distributed::{
    agreed, evaluate_distributed, evaluate_partitioned, orb_partition, sampled_error, set_overlap,
    Balance, Migration, Overlap,
};
use fmm_core::distributions::{plummer, uniform_cube};
use fmm_core::kernels::{Coulomb, Gravity, VelocityStretching};
use fmm_core::*;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

const N: usize = 3000;

/// This process's share `[lo, hi)` of `n` particles.
fn share(n: usize, rank: usize, size: usize) -> (usize, usize) {
    let w = |r: usize| {
        if size >= 3 && r == 1 {
            0
        } else {
            (r + 1) * (r + 1)
        }
    };
    let total: usize = (0..size).map(w).sum();
    let end = |r: usize| (0..r).map(w).sum::<usize>() * n / total;
    (end(rank), end(rank + 1))
}

struct World {
    comm: SimpleCommunicator,
    rank: usize,
    size: usize,
}

impl World {
    fn say(&self, s: &str) {
        if self.rank == 0 {
            println!("{s}");
        }
    }

    /// The sum over the processes.
    fn sum(&self, x: f64) -> f64 {
        let mut s = 0.0;
        self.comm
            .all_reduce_into(&x, &mut s, SystemOperation::sum());
        s
    }
}

fn gravity_sets(x: &[[f64; 3]], m: &[f64]) -> (Particles<f64>, Particles<f64>) {
    let mut s = Particles::sources::<Gravity>(x).unwrap();
    s.set("m", m).unwrap();
    (Particles::targets::<Gravity>(x).unwrap(), s)
}

/// The relative L2 difference over every process of `got` (this
/// process's outputs) from `want` (everything, one process), this
/// process's share `lo..hi`.
fn l2(w: &World, got: &Outputs<f64>, want: &Outputs<f64>, lo: usize) -> f64 {
    let (mut d, mut r) = (0.0, 0.0);
    for (g, s) in got.slots().iter().zip(want.slots()) {
        for (i, v) in g.iter().enumerate() {
            d += (v - s[lo + i]).powi(2);
            r += s[lo + i].powi(2);
        }
    }
    (w.sum(d) / w.sum(r)).sqrt()
}

/// Gravity from the points `x` (masses 1/N, no softening: a softened
/// kernel's far field is the unsoftened one's, an error of its own) by
/// `method` in `domain`: the distributed outputs against one process's,
/// as a relative L2 difference over every process, and this process's
/// evaluation.
fn gravity_case(
    w: &World,
    x: &[[f64; 3]],
    method: &Method,
    domain: Domain,
) -> (f64, Evaluation<f64>) {
    let params = [0.0];
    let problem = Problem::new(&params).in_domain(domain);
    let m = vec![1.0 / x.len() as f64; x.len()];
    let (t_all, s_all) = gravity_sets(x, &m);
    let whole = evaluate::<Gravity, f64>(Backend::Cpu, method, problem, &t_all, &s_all).unwrap();
    let (lo, hi) = share(x.len(), w.rank, w.size);
    let (t, s) = gravity_sets(&x[lo..hi], &m[lo..hi]);
    let mine =
        evaluate_distributed::<Gravity, f64, _>(&w.comm, Backend::Cpu, method, problem, &t, &s)
            .unwrap();
    assert_eq!(mine.outputs.len(), hi - lo);
    (l2(w, &mine.outputs, &whole.outputs, lo), mine)
}

/// The points `x` (this process's share of them) partitioned by
/// orthogonal recursive bisection with weights `weight`: the largest
/// departure of a process's load from the mean, relative to it; panics
/// unless every point has a process and the parts' boxes are disjoint.
fn partition_case(w: &World, x: &[[f64; 3]], weight: impl Fn(&[f64; 3]) -> f64) -> f64 {
    let (lo, hi) = share(x.len(), w.rank, w.size);
    let mine = &x[lo..hi];
    let wt: Vec<f64> = mine.iter().map(&weight).collect();
    let dest = orb_partition(&w.comm, mine, &wt).unwrap();
    assert_eq!(dest.len(), mine.len());
    let p = w.size;
    let (mut load, mut lows) = (vec![0.0; p], vec![f64::INFINITY; 6 * p]);
    for ((x, v), &d) in mine.iter().zip(&wt).zip(&dest) {
        let d = d as usize;
        assert!(d < p, "process {d}");
        load[d] += v;
        for c in 0..3 {
            lows[6 * d + c] = lows[6 * d + c].min(x[c]);
            lows[6 * d + 3 + c] = lows[6 * d + 3 + c].min(-x[c]);
        }
    }
    let (mut all, mut boxes) = (vec![0.0f64; p], vec![0.0f64; 6 * p]);
    w.comm
        .all_reduce_into(&load[..], &mut all[..], SystemOperation::sum());
    w.comm
        .all_reduce_into(&lows[..], &mut boxes[..], SystemOperation::min());
    for a in 0..p {
        for b in a + 1..p {
            let overlap: f64 = (0..3)
                .map(|c| {
                    let top = (-boxes[6 * a + 3 + c]).min(-boxes[6 * b + 3 + c]);
                    let bottom = boxes[6 * a + c].max(boxes[6 * b + c]);
                    (top - bottom).max(0.0)
                })
                .product();
            assert!(overlap == 0.0, "parts {a} and {b} overlap by {overlap}");
        }
    }
    let mean = all.iter().sum::<f64>() / p as f64;
    all.iter()
        .fold(0.0f64, |m, l| m.max((l - mean).abs() / mean))
}

/// A vortex ring (radius 1, core 0.1, circulation 1) of `n` particles on
/// a torus, its strengths along the ring.
fn ring(n: usize) -> (Vec<[f64; 3]>, Vec<[f64; 3]>) {
    let (around, across) = (n / 8, 8);
    let (mut x, mut a) = (Vec::new(), Vec::new());
    for i in 0..around {
        let phi = 2.0 * std::f64::consts::PI * i as f64 / around as f64;
        for j in 0..across {
            let psi = 2.0 * std::f64::consts::PI * j as f64 / across as f64;
            let r = 1.0 + 0.05 * psi.cos();
            x.push([r * phi.cos(), r * phi.sin(), 0.05 * psi.sin()]);
            let ds = 2.0 * std::f64::consts::PI * r / around as f64 / across as f64;
            a.push([-phi.sin() * ds, phi.cos() * ds, 0.0]);
        }
    }
    (x, a)
}

/// The relative L2 difference of positions and strengths `got` from
/// `want` (each process's share) over every process.
fn relative_change(
    w: &World,
    got: (&[[f64; 3]], &[[f64; 3]]),
    want: (&[[f64; 3]], &[[f64; 3]]),
) -> f64 {
    let (mut d, mut r) = (0.0, 0.0);
    for i in 0..got.0.len() {
        for c in 0..3 {
            d += (got.0[i][c] - want.0[i][c]).powi(2) + (got.1[i][c] - want.1[i][c]).powi(2);
            r += want.0[i][c].powi(2) + want.1[i][c].powi(2);
        }
    }
    (w.sum(d) / w.sum(r)).sqrt()
}

/// Forward Euler steps of the vortex particles `x`, `a` (this process's
/// particles) by the rates of the fused kernel through `rates`.
fn vortex_steps(
    x: &mut [[f64; 3]],
    a: &mut [[f64; 3]],
    steps: usize,
    mut rates: impl FnMut(&Particles<f64>, &Particles<f64>) -> Outputs<f64>,
) {
    let dt = 0.05;
    for _ in 0..steps {
        let mut s = Particles::sources::<VelocityStretching>(x).unwrap();
        s.set_vec3("alpha", a).unwrap();
        s.set("sigma", &vec![0.1; x.len()]).unwrap();
        let mut t = Particles::targets::<VelocityStretching>(x).unwrap();
        t.set_vec3("alpha_i", a).unwrap();
        let out = rates(&t, &s);
        let (u, st) = (out.vec3("u").unwrap(), out.vec3("s").unwrap());
        for i in 0..x.len() {
            for c in 0..3 {
                x[i][c] += dt * u[c][i];
                a[i][c] += dt * st[c][i];
            }
        }
    }
}

fn main() {
    let universe = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .map(|(universe, _)| universe)
        .expect("MPI initialises");
    let comm = universe.world();
    let w = World {
        rank: comm.rank() as usize,
        size: comm.size() as usize,
        comm,
    };
    if std::env::args().any(|a| a == "--stall") {
        return stall(&w);
    }
    let (lo, hi) = share(N, w.rank, w.size);
    println!("process {} of {}: {} particles", w.rank, w.size, hi - lo);
    let cube = uniform_cube(N, 7);

    // The direct sum: the same sums, to round-off.
    let (e, _) = gravity_case(&w, &cube, &Method::direct(), Domain::FreeSpace);
    w.say(&format!("direct, uniform cube: {e:.2e} from one process"));
    assert!(e < 1e-13, "{e}");

    // The FMM at a high order: round-off again.
    let (e, _) = gravity_case(&w, &cube, &Method::fmm(12, 0.4), Domain::FreeSpace);
    w.say(&format!("FMM p 12, uniform cube: {e:.2e}"));
    assert!(e < 1e-8, "{e}");

    // Targets at the sources' points on even processes, apart on odd ones,
    // and none on process 0 (of more than one): the processes agree on
    // how they cut and move them.
    let part = |r: usize| match (w.size, r) {
        (1, _) => (0, N),
        (_, 0) => (0, 0),
        _ => share(N, r - 1, w.size - 1),
    };
    let targets_of = |r: usize| -> Vec<[f64; 3]> {
        let (a, b) = part(r);
        let apart = if r % 2 == 1 { 1e-3 } else { 0.0 };
        cube[a..b]
            .iter()
            .map(|x| [x[0] + apart, x[1], x[2]])
            .collect()
    };
    let all_t: Vec<[f64; 3]> = (0..w.size).flat_map(targets_of).collect();
    let m = vec![1.0 / N as f64; N];
    let (_, s_all) = gravity_sets(&cube, &m);
    let t_all = Particles::targets::<Gravity>(&all_t).unwrap();
    let fmm = Method::fmm(12, 0.4);
    let problem = Problem::new(&[0.0]);
    let whole = evaluate::<Gravity, f64>(Backend::Cpu, &fmm, problem, &t_all, &s_all).unwrap();
    let (a, b) = part(w.rank);
    let (_, s) = gravity_sets(&cube[a..b], &m[a..b]);
    let t = Particles::targets::<Gravity>(&targets_of(w.rank)).unwrap();
    let mine =
        evaluate_distributed::<Gravity, f64, _>(&w.comm, Backend::Cpu, &fmm, problem, &t, &s)
            .unwrap();
    let e = l2(&w, &mine.outputs, &whole.outputs, a);
    w.say(&format!(
        "FMM p 12, targets at the sources on some processes, apart on others: {e:.2e}"
    ));
    assert!(e < 1e-8, "{e}");

    // A tolerance on a Plummer sphere: each process's targets meet it, so
    // all of them do; both within 1e-6 of the truth.
    let (plum, _) = plummer(N, 3);
    let (e, _) = gravity_case(&w, &plum, &Method::tolerance(1e-6), Domain::FreeSpace);
    w.say(&format!("tolerance 1e-6, Plummer sphere: {e:.2e}"));
    assert!(e < 2e-6, "{e}");

    // The treecode over a ground plane.
    let wall = Domain::Wall(Wall::new(2, 0.0));
    let (e, _) = gravity_case(&w, &cube, &Method::treecode(0.3), wall);
    w.say(&format!("treecode theta 0.3 over a ground plane: {e:.2e}"));
    assert!(e < 1e-3, "{e}");

    // A periodic box: charges +1 and -1 (neutral over all processes, not
    // on each), a tolerance of 1e-6.
    let q: Vec<f64> = (0..N)
        .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    let periodic = Problem::new(&[]).in_domain(Domain::Periodic(PeriodicBox::cube([0.0; 3], 1.0)));
    let sets = |a: usize, b: usize| {
        let mut s = Particles::sources::<Coulomb>(&cube[a..b]).unwrap();
        s.set("q", &q[a..b]).unwrap();
        (Particles::targets::<Coulomb>(&cube[a..b]).unwrap(), s)
    };
    let method = Method::tolerance(1e-6);
    let (t_all, s_all) = sets(0, N);
    let whole = evaluate::<Coulomb, f64>(Backend::Cpu, &method, periodic, &t_all, &s_all).unwrap();
    let (t, s) = sets(lo, hi);
    let mine =
        evaluate_distributed::<Coulomb, f64, _>(&w.comm, Backend::Cpu, &method, periodic, &t, &s)
            .unwrap();
    let e = l2(&w, &mine.outputs, &whole.outputs, lo);
    w.say(&format!("periodic box, tolerance 1e-6: {e:.2e}"));
    assert!(e < 2e-6, "{e}");

    // The own sources evaluated while the trees are exchanged and the
    // others' after (asked: on a GPU of its own, or here anywhere): the
    // same outputs; a tolerance split at the way the joined evaluation
    // before met it, its error estimated over the sum.
    set_overlap(Overlap::Always);
    let parts = w.size > 1;
    let (e, ev) = gravity_case(&w, &cube, &Method::fmm(12, 0.4), Domain::FreeSpace);
    w.say(&format!("in two parts, FMM p 12, uniform cube: {e:.2e}"));
    assert!(e < 1e-8, "{e}");
    assert_eq!(ev.stats.split, parts);
    // The FMM alone (at N 3000 a tolerance takes the direct sum, split
    // too but exact).
    let tolerance = Method::fmm_tolerance(1e-6);
    let (_, joined) = gravity_case(&w, &plum, &tolerance, Domain::FreeSpace);
    assert!(!joined.stats.split, "no way kept yet: joined");
    let (e, ev) = gravity_case(&w, &plum, &tolerance, Domain::FreeSpace);
    w.say(&format!(
        "in two parts, tolerance 1e-6, Plummer sphere: {e:.2e}"
    ));
    assert!(e < 2e-6, "{e}");
    assert_eq!(ev.stats.split, parts);
    let a = ev.achieved.expect("a tolerance says what it met");
    assert!(a.estimated_error <= 1e-6, "{a:?}");
    assert_eq!(a.method, "fmm");
    for round in 0..2 {
        let mine = evaluate_distributed::<Coulomb, f64, _>(
            &w.comm,
            Backend::Cpu,
            &method,
            periodic,
            &t,
            &s,
        )
        .unwrap();
        let e = l2(&w, &mine.outputs, &whole.outputs, lo);
        w.say(&format!(
            "periodic box, tolerance 1e-6, parts asked for (round {round}): {e:.2e}"
        ));
        assert!(e < 2e-6, "{e}");
        assert!(
            !mine.stats.split,
            "a part of a neutral cell is not neutral: joined"
        );
    }
    // The treecode over a ground plane in parts (fixed settings: split).
    let (e, ev) = gravity_case(&w, &cube, &Method::treecode(0.3), wall);
    w.say(&format!(
        "in two parts, treecode theta 0.3 over a ground plane: {e:.2e}"
    ));
    assert!(e < 1e-3, "{e}");
    assert_eq!(ev.stats.split, parts);
    // A vortex ring by the FMM alone, stepped: the parts at the order,
    // MAC and near field the first step's tolerance met (the near field
    // widened where the cores reach past the cells the MAC accepts: the
    // velocity + stretching on the GPU at 2^24 a process, `fmm_bench`).
    let (rx, ra) = ring(2000);
    let fmm = Method::fmm_tolerance(1e-5);
    let one = |t: &Particles<f64>, s: &Particles<f64>| {
        evaluate::<VelocityStretching, f64>(Backend::Cpu, &fmm, &[], t, s)
            .unwrap()
            .outputs
    };
    let (mut x1, mut a1) = (rx.clone(), ra.clone());
    vortex_steps(&mut x1, &mut a1, 3, one);
    let (rlo, rhi) = share(rx.len(), w.rank, w.size);
    let (mut xp, mut ap) = (rx[rlo..rhi].to_vec(), ra[rlo..rhi].to_vec());
    let mut splits = Vec::new();
    vortex_steps(&mut xp, &mut ap, 3, |t, s| {
        let ev = evaluate_distributed::<VelocityStretching, f64, _>(
            &w.comm,
            Backend::Cpu,
            &fmm,
            &[],
            t,
            s,
        )
        .unwrap();
        splits.push(ev.stats.split);
        if ev.stats.split {
            let a = ev.achieved.expect("a tolerance says what it met");
            assert!(a.estimated_error <= 1e-5, "{a:?}");
        }
        ev.outputs
    });
    let e = relative_change(&w, (&xp, &ap), (&x1[rlo..rhi], &a1[rlo..rhi]));
    w.say(&format!(
        "in two parts, a vortex ring, 3 steps by the FMM at 1e-5: {e:.2e} from one process's"
    ));
    assert!(e < 1e-5, "{e}");
    assert_eq!(
        splits,
        [false, parts, parts],
        "the first joined, then in parts"
    );
    set_overlap(Overlap::Never);

    // A vortex ring's few steps, each process stepping its own particles
    // (positions and strengths moved by rates from every process's).
    let (rx, ra) = ring(2000);
    let method = Method::tolerance(1e-6);
    let (mut x1, mut a1) = (rx.clone(), ra.clone());
    vortex_steps(&mut x1, &mut a1, 3, |t, s| {
        evaluate::<VelocityStretching, f64>(Backend::Cpu, &method, &[], t, s)
            .unwrap()
            .outputs
    });
    let (rlo, rhi) = share(rx.len(), w.rank, w.size);
    let (mut xp, mut ap) = (rx[rlo..rhi].to_vec(), ra[rlo..rhi].to_vec());
    vortex_steps(&mut xp, &mut ap, 3, |t, s| {
        evaluate_distributed::<VelocityStretching, f64, _>(
            &w.comm,
            Backend::Cpu,
            &method,
            &[],
            t,
            s,
        )
        .unwrap()
        .outputs
    });
    let e = relative_change(&w, (&xp, &ap), (&x1[rlo..rhi], &a1[rlo..rhi]));
    w.say(&format!(
        "a vortex ring, 3 steps at tolerance 1e-6: positions and strengths {e:.2e} from one process's"
    ));
    assert!(e < 1e-6, "{e}");

    // The local essential trees against all remote data: particles in
    // their ORB parts, each process's targets evaluated with what the
    // others sent and with every source; fewer sources come than there
    // are elsewhere.
    let n = 20_000;
    // Two Plummer spheres 20 of their scale radii apart (a merger): at
    // this size the nodes pay only for what is far (a cell goes as nodes
    // where it holds more particles than nodes).
    let (mut big, _) = plummer(n, 5);
    for (i, x) in big.iter_mut().enumerate() {
        x[0] += if i % 2 == 0 { 10.0 } else { -10.0 };
    }
    let (blo, bhi) = share(n, w.rank, w.size);
    let dest = orb_partition(&w.comm, &big[blo..bhi], &vec![1.0; bhi - blo]).unwrap();
    let moved = Migration::new(&w.comm, &dest).unwrap();
    // Rows of values move as their columns do and come back in order.
    let rows = big[blo..bhi].as_flattened();
    let got = moved.forward_rows(&w.comm, rows, 3);
    let columns: Vec<Vec<f64>> = (0..3)
        .map(|a| {
            let column: Vec<f64> = big[blo..bhi].iter().map(|x| x[a]).collect();
            moved.forward(&w.comm, &column)
        })
        .collect();
    assert!(got
        .chunks_exact(3)
        .enumerate()
        .all(|(i, r)| (0..3).all(|a| r[a] == columns[a][i])));
    assert_eq!(moved.back_rows(&w.comm, &got, 3), rows);
    // Rows written in the order they are sent, and put back where they
    // go, are the same rows.
    let mine = &big[blo..bhi];
    let written = moved.forward_rows_with(&w.comm, 3, |i, r| r.copy_from_slice(&mine[i]));
    assert_eq!(written, got);
    let mut put = vec![[0.0; 3]; bhi - blo];
    moved.back_rows_into(&w.comm, &got, 3, &mut put, |x, r| x.copy_from_slice(r));
    assert_eq!(put, mine);
    let m = vec![1.0 / n as f64; bhi - blo];
    let (t, s) = gravity_sets(&big[blo..bhi], &m);
    let (t, s) = (moved.particles(&w.comm, &t), moved.particles(&w.comm, &s));
    let method = Method::fmm(4, 0.5);
    let with_trees =
        evaluate_partitioned::<Gravity, f64, _>(&w.comm, Backend::Cpu, &method, &[0.0], &t, &s)
            .unwrap();
    let (_, s_all) = gravity_sets(&big, &vec![1.0 / n as f64; n]);
    let direct = |s: &Particles<f64>| {
        evaluate::<Gravity, f64>(Backend::Cpu, &Method::direct(), &[0.0], &t, s)
            .unwrap()
            .outputs
    };
    let all = direct(&s_all);
    let (mut d, mut r) = (0.0, 0.0);
    for (g, x) in with_trees.outputs.slots().iter().zip(all.slots()) {
        for (a, b) in g.iter().zip(x) {
            d += (a - b).powi(2);
            r += b * b;
        }
    }
    let e = (w.sum(d) / w.sum(r)).sqrt();
    let got = w.sum(with_trees.stats.received_bytes as f64) / 32.0;
    let elsewhere = ((w.size - 1) * n) as f64;
    w.say(&format!(
        "the FMM p 4 with the local essential trees, two Plummer spheres of {n}: {e:.2e} from the direct sum; \
         {got:.0} sources received of {elsewhere:.0} held elsewhere"
    ));
    assert!(e < 1e-3, "{e}");
    // The same error estimated on 300 samples a process, against an f64
    // direct sum each process adds its sources to.
    let est = sampled_error::<Gravity, f64, _>(
        &w.comm,
        Backend::Cpu,
        &[0.0],
        &t,
        &s,
        &with_trees.outputs,
        300,
    )
    .unwrap();
    w.say(&format!("  sampled over the processes: {est:.2e}"));
    assert!(est > 0.5 * e && est < 2.0 * e, "{est} against {e}");
    // Fewer than all; on two processes, one sphere each, the other's
    // nearly all as nodes.
    assert!(w.size == 1 || got < elsewhere, "{got} of {elsewhere}");
    assert!(w.size != 2 || got < 0.2 * elsewhere, "{got} of {elsewhere}");

    // The partition: equal loads in disjoint parts of space.
    // A lattice: its layers share coordinates, and ties split too.
    let lattice: Vec<[f64; 3]> = (0..N)
        .map(|i| {
            [
                (i % 10) as f64,
                ((i / 10) % 10) as f64,
                (i / 100) as f64 / 3.0,
            ]
        })
        .collect();
    for (what, x, skew) in [
        ("lattice 10 x 10 x 30", &lattice, 0.0),
        ("uniform cube", &cube, 0.0),
        ("Plummer sphere", &plum, 0.0),
        ("uniform cube, weights 1 + 10 x", &cube, 10.0),
    ] {
        let e = partition_case(&w, x, |p| 1.0 + skew * p[0]);
        w.say(&format!(
            "ORB, {what}: the loads within {e:.1e} of their mean; the parts disjoint"
        ));
        assert!(e < 0.01, "{e}");
    }

    // Rebalancing by measured work: processes whose particles cost
    // 1, 2, .. seconds-per-particle units (a cluster's deeper tree), cut
    // again with weights from those seconds: the loads come out even.
    let mine = &cube[lo..hi];
    let seconds = (hi - lo) as f64 * (1 + w.rank) as f64 * 1e-6;
    let imbalance = Balance::imbalance(&w.comm, seconds);
    let weights = Balance::weights(seconds, hi - lo);
    let dest = orb_partition(&w.comm, mine, &weights).unwrap();
    let mut load = vec![0.0; w.size];
    for (d, v) in dest.iter().zip(&weights) {
        load[*d as usize] += v;
    }
    let loads: Vec<f64> = load.iter().map(|&l| w.sum(l)).collect();
    let mean = loads.iter().sum::<f64>() / w.size as f64;
    let after = loads.iter().fold(0.0f64, |m, &l| m.max(l / mean));
    w.say(&format!(
        "rebalanced by measured work: the slowest process {imbalance:.2} of the mean before, \
         {after:.4} after"
    ));
    assert!(w.size < 3 || Balance::default().due(&w.comm, seconds));
    assert!(after < 1.01, "{after}");

    // The particles moved to their parts, evaluated there, and their
    // outputs brought back to their owners in their order.
    let mine = &plum[lo..hi];
    let dest = orb_partition(&w.comm, mine, &vec![1.0; hi - lo]).unwrap();
    let moved = Migration::new(&w.comm, &dest).unwrap();
    assert_eq!(moved.arrivals(), N / w.size);
    let ids: Vec<f64> = (lo..hi).map(|i| i as f64).collect();
    let arrived = moved.forward(&w.comm, &ids);
    let m = vec![1.0 / N as f64; hi - lo];
    let (t, s) = gravity_sets(mine, &m);
    let here = moved.particles(&w.comm, &t);
    for (k, &g) in arrived.iter().enumerate() {
        assert_eq!(here.position(k), plum[g as usize], "arrival {k}");
    }
    assert_eq!(moved.back(&w.comm, &arrived), ids);
    let ev = evaluate_distributed::<Gravity, f64, _>(
        &w.comm,
        Backend::Cpu,
        &Method::direct(),
        &[0.0],
        &here,
        &s,
    )
    .unwrap();
    let (t_all, s_all) = gravity_sets(&plum, &vec![1.0 / N as f64; N]);
    let whole =
        evaluate::<Gravity, f64>(Backend::Cpu, &Method::direct(), &[0.0], &t_all, &s_all).unwrap();
    let mut worst = 0.0f64;
    for (got, want) in ev.outputs.slots().iter().zip(whole.outputs.slots()) {
        let back = moved.back(&w.comm, got);
        let top = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        for (i, v) in back.iter().enumerate() {
            worst = worst.max((v - want[lo + i]).abs() / top);
        }
    }
    let mut all = 0.0;
    w.comm
        .all_reduce_into(&worst, &mut all, SystemOperation::max());
    w.say(&format!(
        "moved to the ORB's parts ({} a process), evaluated there, brought back: {all:.2e} from one process",
        N / w.size
    ));
    assert!(all < 1e-13, "{all}");

    // A negative weight on the last process, said on every process.
    let last = w.size - 1;
    let mut wt = vec![1.0; hi - lo];
    if w.rank == last {
        wt[0] = -1.0;
    }
    let err = orb_partition(&w.comm, &cube[lo..hi], &wt)
        .unwrap_err()
        .to_string();
    w.say(&format!("a negative weight on process {last}: {err}"));
    assert!(err.starts_with(&format!("process {last}: ")), "{err}");

    // Bad input, said on every process. A target below the ground plane
    // on the last process:
    let mut x = cube[lo..hi].to_vec();
    if w.rank == last {
        x[0][2] = -0.5;
    }
    let m = vec![1.0; x.len()];
    let (t, s) = gravity_sets(&x, &m);
    let err = evaluate_distributed::<Gravity, f64, _>(
        &w.comm,
        Backend::Cpu,
        &Method::direct(),
        Problem::new(&[0.01]).in_domain(wall),
        &t,
        &s,
    )
    .unwrap_err()
    .to_string();
    w.say(&format!(
        "a target below the plane on process {last}: {err}"
    ));
    assert!(err.starts_with(&format!("process {last}: ")), "{err}");
    // Sets made for another kernel on the last process:
    let (t, s) = gravity_sets(&cube[lo..hi], &vec![1.0; hi - lo]);
    let wrong = Particles::targets::<Coulomb>(&cube[lo..hi]).unwrap();
    let err = evaluate_distributed::<Gravity, f64, _>(
        &w.comm,
        Backend::Cpu,
        &Method::direct(),
        &[0.01],
        if w.rank == last { &wrong } else { &t },
        &s,
    )
    .unwrap_err()
    .to_string();
    w.say(&format!("Coulomb targets on process {last}: {err}"));
    assert!(err.contains(&format!("process {last}")), "{err}");
    // Different methods on different processes:
    if w.size > 1 {
        let method = if w.rank == 0 {
            Method::direct()
        } else {
            Method::fmm(4, 0.5)
        };
        let err = evaluate_distributed::<Gravity, f64, _>(
            &w.comm,
            Backend::Cpu,
            &method,
            &[0.01],
            &t,
            &s,
        )
        .unwrap_err();
        w.say(&format!("different methods: {err}"));
        assert!(matches!(err, Error::Mismatch(_)), "{err}");
    }
    // A process that could not make its particles (a mass that is not
    // finite): agreed on, so that every process says so and none waits.
    let mass = if w.rank == last { f64::NAN } else { 1.0 };
    let made = (|| -> Result<Particles<f64>, Error> {
        let mut s = Particles::sources::<Gravity>(&cube[lo..hi])?;
        s.set("m", &vec![mass; hi - lo])?;
        Ok(s)
    })();
    let err = agreed(&w.comm, made).map(|_| ()).unwrap_err().to_string();
    w.say(&format!(
        "a mass that is not finite on process {last}: {err}"
    ));
    if hi > lo || w.rank != last {
        assert!(err.starts_with(&format!("process {last}: ")), "{err}");
    }
    // A point off a slab's open axis on the last process.
    let slab = PeriodicBox {
        axes: [true, true, false],
        ..PeriodicBox::cube([0.0; 3], 1.0)
    };
    let mut x = cube[lo..hi].to_vec();
    if w.rank == last {
        x[0][2] = 1.5;
    }
    let (t, s) = gravity_sets(&x, &m_unit(x.len()));
    let err = evaluate_distributed::<Gravity, f64, _>(
        &w.comm,
        Backend::Cpu,
        &Method::fmm(4, 0.5),
        Problem::new(&[0.0]).in_domain(Domain::Periodic(slab)),
        &t,
        &s,
    )
    .unwrap_err()
    .to_string();
    w.say(&format!("a point off the slab on process {last}: {err}"));
    assert!(err.starts_with(&format!("process {last}: ")), "{err}");
    checkpoints(&w);
    w.say(&format!(
        "every distributed check passed on {} process(es)",
        w.size
    ));
}

/// Checkpoints written by every process and read back on as many, on
/// one and on the rest (a restart on another number of processes): every
/// particle once, in the order of the parts; a later step replaces the
/// earlier; a part cut short, or a write that fails on one process, is an
/// error on every process, and leaves no checkpoint looking complete.
fn checkpoints(w: &World) {
    let mut pid = std::process::id();
    w.comm.process_at_rank(0).broadcast_into(&mut pid);
    let dir = std::env::temp_dir().join(format!("fmm-mpi-checkpoint-{pid}"));
    let (lo, hi) = share(N, w.rank, w.size);
    let ids: Vec<f64> = (lo..hi).map(|i| i as f64).collect();
    let squares: Vec<f64> = ids.iter().map(|i| i * i).collect();
    let write = |step| {
        write_parts(&w.comm, &dir, step, |path| {
            write_whole(path, &arrays_bytes(&[&ids, &squares]))
        })
    };
    write(5).unwrap();
    write(7).unwrap();
    // Read by every process: each particle once.
    let read = |comm: &SimpleCommunicator| read_parts(comm, &dir, |path| read_arrays(path, 2));
    let back = read(&w.comm).unwrap();
    assert_eq!((back.step, back.processes), (7, w.size));
    let mine: Vec<f64> = back.parts.iter().flat_map(|a| a[0].clone()).collect();
    let count = w.sum(mine.len() as f64);
    let sum = w.sum(mine.iter().sum());
    assert_eq!((count, sum), (N as f64, (N * (N - 1) / 2) as f64));
    for a in &back.parts {
        assert!(a[0].iter().zip(&a[1]).all(|(i, q)| i * i == *q));
    }
    // Read by rank 0 alone (and by the others together): every particle
    // in order.
    let color = mpi::topology::Color::with_value(i32::from(w.rank > 0));
    let group = w.comm.split_by_color(color).unwrap();
    let back = read(&group).unwrap();
    if w.rank == 0 {
        let all: Vec<f64> = back.parts.iter().flat_map(|a| a[0].clone()).collect();
        assert_eq!(all, (0..N).map(|i| i as f64).collect::<Vec<_>>());
    }
    let parts = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(parts, w.size + 1, "the parts of step 5 removed");
    w.comm.barrier();
    // The last process's part of step 7 cut short.
    let last = w.size - 1;
    if w.rank == last {
        let path = dir.join(format!("part-7-{last}"));
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    }
    w.comm.barrier();
    let err = read(&w.comm).unwrap_err().to_string();
    w.say(&format!("a part cut short: {err}"));
    assert!(err.contains(&format!("part-7-{last}")), "{err}");
    // A write that fails on the last process: an error everywhere, and
    // the checkpoint of step 7 still the one the manifest names.
    let err = write_parts(&w.comm, &dir, 9, |path| {
        if w.rank == last {
            Err("the disk is full".to_string())
        } else {
            write_whole(path, &arrays_bytes(&[&ids, &squares])).map_err(|e| e.to_string())
        }
    })
    .unwrap_err()
    .to_string();
    w.say(&format!("a write that failed: {err}"));
    assert!(err.contains("the disk is full"), "{err}");
    let text = std::fs::read_to_string(dir.join("manifest")).unwrap();
    assert!(text.contains("step 7"), "{text}");
    w.comm.barrier();
    if w.rank == 0 {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    w.say("checkpoints: written, read on as many, one and the rest; errors on every process");
}

/// Unit masses.
fn m_unit(n: usize) -> Vec<f64> {
    vec![1.0; n]
}

/// The last process never calls; the others wait `FMM_MPI_TIMEOUT`
/// seconds at the start of the evaluation, say so and abort the job (CI
/// runs this with a short timeout and expects the message and a failed
/// run).
fn stall(w: &World) {
    if w.rank + 1 == w.size && w.size > 1 {
        std::thread::sleep(std::time::Duration::from_secs(600));
        return;
    }
    let x = uniform_cube(100, 1);
    let (t, s) = gravity_sets(&x, &m_unit(100));
    let _ = evaluate_distributed::<Gravity, f64, _>(
        &w.comm,
        Backend::Cpu,
        &Method::direct(),
        &[0.0],
        &t,
        &s,
    );
    println!("process {}: the stalled evaluation returned", w.rank);
}
