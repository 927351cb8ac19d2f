//! `fmm_bench --distributed` (the `mpi` feature; under `mpirun`): every
//! process draws its share of one problem (gravity or the vortex kernel's
//! velocity and stretching, a uniform cube or a Plummer sphere), takes its
//! GPU from its rank on the node (`node_device`; several processes may
//! share one), and evaluates by the benchmark's method through
//! `evaluate_distributed` (partition, moves, local essential trees,
//! outputs back), then `--repeat` times through `evaluate_partitioned` on
//! the particles in their parts (a time step's cost). Rank 0 prints the
//! slowest process's seconds per stage, the bytes exchanged and the error
//! over every process's samples against an f64 direct sum that every
//! process adds its sources to.

use std::time::Instant;

use fmm_core::distributed::{
    evaluate_distributed, evaluate_partitioned, node_device, orb_partition, sampled_error,
    set_overlap, Migration, Overlap,
};
use fmm_core::distributions::{plummer, uniform_cube};
use fmm_core::kernels::{Gravity, VelocityStretching};
use fmm_core::{Evaluation, Kernel, Method, Particles, Real, Stage};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::{Dist, KernelName, Precision};

/// What a distributed run is asked: `fmm_bench`'s flags that apply.
pub struct Bench {
    /// Particles a process (weak scaling), or in all (`strong`).
    pub n: usize,
    pub strong: bool,
    /// Weak scaling in the unit cube whatever the processes (the density
    /// grows with them), not in a box that grows with them.
    pub fixed_box: bool,
    pub kernel: KernelName,
    pub dist: Dist,
    pub precision: Precision,
    pub backend: fmm_core::Backend,
    pub method: Method,
    /// The kernel's parameters (default: gravity unsoftened, as FMM3D).
    pub params: Option<Vec<f64>>,
    /// Evaluations on the particles in their parts, after the first.
    pub repeat: usize,
    /// Targets a process checked against the f64 direct sum (0: none).
    pub samples: usize,
    pub seed: u64,
    /// The own sources evaluated while the local essential trees are
    /// exchanged, the others' after, where this says
    /// (`distributed::Overlap`; `None`: the library's default,
    /// `Overlap::Gpu`).
    pub overlap: Option<Overlap>,
    /// The process-wide switches, applied once the process has its GPU.
    pub switches: super::Switches,
}

/// A process's particles: positions and the kernel's fields, in f64.
struct Drawn {
    x: Vec<[f64; 3]>,
    /// Gravity: the mass; the vortex kernel: alpha (three a particle).
    strength: Vec<[f64; 3]>,
    sigma: f64,
}

/// The sides of the box `size` processes share in weak scaling: the unit
/// cube's sides doubled in turn (x, y, z) for each factor 2 of `size`, the
/// rest along x; so each process's part, its density and its trees are one
/// process's in the unit cube (in a fixed cube the density doubles with the
/// processes and every leaf of the FMM's tree changes size: at 2^24 a
/// process the level-6 cells of one process hold 64 particles, ncrit,
/// those of two 128, and the velocity + stretching's step went from 1.49 s
/// to 0.84 s at the same p and theta for that alone).
fn weak_box(size: usize) -> [f64; 3] {
    let (mut sides, mut rest, mut axis) = ([1.0; 3], size.max(1), 0);
    while rest % 2 == 0 {
        sides[axis] *= 2.0;
        (rest, axis) = (rest / 2, (axis + 1) % 3);
    }
    sides[0] *= rest as f64;
    sides
}

fn draw(b: &Bench, total: usize, mine: usize, rank: usize, size: usize) -> Drawn {
    let seed = 1000 * b.seed + rank as u64;
    let sides = match (b.dist, b.strong || b.fixed_box) {
        (Dist::Uniform, false) => weak_box(size),
        _ => [1.0; 3],
    };
    let x = match b.dist {
        Dist::Uniform => uniform_cube(mine, seed)
            .into_iter()
            .map(|p| [p[0] * sides[0], p[1] * sides[1], p[2] * sides[2]])
            .collect(),
        Dist::Plummer => plummer(mine, seed).0,
    };
    let volume = sides[0] * sides[1] * sides[2];
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let q = 1.0 / total as f64;
    let strength = (0..mine)
        .map(|_| [q * next(), q * next(), q * next()])
        .collect();
    Drawn {
        x,
        strength,
        sigma: (total as f64 / volume).cbrt().recip(),
    }
}

/// Targets and sources of kernel `K` in precision `R`.
fn sets<K: Kernel, R: Real>(vortex: bool, d: &Drawn) -> (Particles<R>, Particles<R>) {
    let c = |v: f64| R::c(v);
    let x: Vec<[R; 3]> = d.x.iter().map(|p| p.map(c)).collect();
    let mut t = Particles::targets::<K>(&x).unwrap();
    let mut s = Particles::sources::<K>(&x).unwrap();
    if vortex {
        let a: Vec<[R; 3]> = d.strength.iter().map(|a| a.map(c)).collect();
        s.set_vec3("alpha", &a).unwrap();
        s.set("sigma", &vec![c(d.sigma); a.len()]).unwrap();
        t.set_vec3("alpha_i", &a).unwrap();
    } else {
        let m: Vec<R> = d.strength.iter().map(|a| c(a[0].abs())).collect();
        s.set("m", &m).unwrap();
    }
    (t, s)
}

/// The largest of `x` over the processes (`max`) or their sum.
fn reduce(comm: &SimpleCommunicator, x: f64, max: bool) -> f64 {
    let mut y = 0.0;
    let op = if max {
        SystemOperation::max()
    } else {
        SystemOperation::sum()
    };
    comm.all_reduce_into(&x, &mut y, op);
    y
}

/// One line: the slowest process's seconds per stage (the rest of an
/// evaluation counted as local work), the wall time, the bytes.
fn line<R>(comm: &SimpleCommunicator, what: &str, ev: &Evaluation<R>, wall: f64) -> String {
    let apart = [Stage::Partition, Stage::Essential, Stage::Exchange];
    let local = ev.stats.total_seconds() - apart.iter().map(|&s| ev.stats.seconds(s)).sum::<f64>();
    let [p, e, x] = apart.map(|s| reduce(comm, ev.stats.seconds(s), true));
    let local = reduce(comm, local, true);
    let sent = reduce(comm, ev.stats.sent_bytes as f64, false);
    let wall = reduce(comm, wall, true);
    let runs = reduce(comm, ev.stats.runs as f64, true);
    let parts = if reduce(comm, ev.stats.split as u8 as f64, false) > 0.0 {
        "; local in two parts, the own beside the exchange"
    } else {
        ""
    };
    format!(
        "{what:<22} wall {wall:8.4} s | partition {p:7.4}  essential {e:7.4}  exchange {x:7.4}  \
         local {local:7.4} (slowest process; {runs} runs{parts}) | sent {:.1} MB in all",
        sent / 1e6
    )
}

/// Rank 0 prints each process's last evaluation: its targets, its trees'
/// cells, the P2P and M2L it ran and the seconds of each stage; the
/// processes' evaluations at equal settings should cost alike on parts of
/// equal size, and where one is slow this says in which stage and what it
/// had more of.
fn each_process<R>(comm: &SimpleCommunicator, targets: usize, ev: &Evaluation<R>) {
    let s = &ev.stats;
    let mut row = vec![
        targets as f64,
        s.source_cells as f64,
        s.target_cells as f64,
        s.p2p as f64,
        s.m2l as f64,
    ];
    row.extend(Stage::ALL.map(|st| s.seconds(st)));
    let mut all = vec![0.0; row.len() * comm.size() as usize];
    comm.all_gather_into(&row[..], &mut all[..]);
    if comm.rank() != 0 {
        return;
    }
    for (q, r) in all.chunks_exact(row.len()).enumerate() {
        let stages: Vec<String> = Stage::ALL
            .iter()
            .zip(&r[5..])
            .filter(|(_, &t)| t > 0.0)
            .map(|(st, t)| format!("{} {t:.4}", st.name()))
            .collect();
        println!(
            "process {q}: {:.0} targets; cells {:.0} source, {:.0} target; P2P {:.3e}, M2L \
             {:.3e}; seconds: {}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            stages.join(", ")
        );
    }
}

fn run_with<K: Kernel, R: Real + Equivalence + Default>(
    comm: &SimpleCommunicator,
    b: &Bench,
    drawn: &Drawn,
) -> Result<(), fmm_core::Error> {
    let (rank, size) = (comm.rank(), comm.size());
    let say = |s: &str| {
        if rank == 0 {
            println!("{s}");
        }
    };
    let vortex = b.kernel == KernelName::VelocityStretching;
    let params = b
        .params
        .clone()
        .unwrap_or(if vortex { vec![] } else { vec![0.0] });
    let (t, s) = sets::<K, R>(vortex, drawn);
    // The first evaluation: particles anywhere, partitioned and moved.
    comm.barrier();
    let clock = Instant::now();
    let first = evaluate_distributed::<K, R, _>(comm, b.backend, &b.method, &params[..], &t, &s)?;
    say(&line(
        comm,
        "first (partition)",
        &first,
        clock.elapsed().as_secs_f64(),
    ));
    // In their parts, as a simulation keeps them.
    let points = drawn.x.clone();
    let dest = orb_partition(comm, &points, &vec![1.0; points.len()])?;
    let moved = Migration::new(comm, &dest)?;
    let (t, s) = (moved.particles(comm, &t), moved.particles(comm, &s));
    let mut walls = Vec::new();
    let mut last = None;
    for k in 0..b.repeat {
        comm.barrier();
        let clock = Instant::now();
        let ev = evaluate_partitioned::<K, R, _>(comm, b.backend, &b.method, &params[..], &t, &s)?;
        let wall = clock.elapsed().as_secs_f64();
        walls.push(reduce(comm, wall, true));
        say(&line(comm, &format!("in parts, run {}", k + 1), &ev, wall));
        last = Some(ev);
    }
    let Some(ev) = last else { return Ok(()) };
    each_process(comm, t.len(), &ev);
    let n_here = reduce(comm, t.len() as f64, true);
    walls.sort_by(f64::total_cmp);
    let median = walls[walls.len() / 2];
    let error = if b.samples > 0 {
        sampled_error::<K, R, _>(comm, b.backend, &params[..], &t, &s, &ev.outputs, b.samples)?
    } else {
        f64::NAN
    };
    let sent = reduce(comm, ev.stats.sent_bytes as f64, false);
    say(&format!(
        "{size} process(es): median {median:.4} s a step; the largest part {n_here:.0}; \
         error {error:.2e} on {} samples a process; {:.1} MB exchanged a step",
        b.samples,
        sent / 1e6
    ));
    say(&format!(
        "{{\"processes\": {size}, \"kernel\": \"{:?}\", \"dist\": \"{:?}\", \"n_total\": {}, \
         \"step_seconds\": {median}, \"error\": {error}, \"sent_bytes\": {sent}, \
         \"essential_seconds\": {}, \"exchange_seconds\": {}}}",
        b.kernel,
        b.dist,
        reduce(comm, t.len() as f64, false),
        reduce(comm, ev.stats.seconds(Stage::Essential), true),
        reduce(comm, ev.stats.seconds(Stage::Exchange), true),
    ));
    Ok(())
}

/// Runs `b` over the processes of `mpirun`.
pub fn run(b: &Bench) -> Result<(), Box<dyn std::error::Error>> {
    let vortex = match b.kernel {
        KernelName::Gravity => false,
        KernelName::VelocityStretching => true,
        k => {
            return Err(
                format!("--distributed runs gravity and velocity-stretching, not {k:?}").into(),
            )
        }
    };
    let universe = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .map(|(universe, _)| universe)
        .ok_or("MPI initialises once")?;
    let comm = universe.world();
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    if let Some(o) = b.overlap {
        set_overlap(o);
    }
    let device = node_device(&comm)?;
    b.switches.apply(fmm_core::backend::resolve(b.backend)?);
    let total = if b.strong { b.n } else { b.n * size };
    let mine = total / size + usize::from(rank < total % size);
    println!(
        "process {rank} of {size}: {mine} particles, {}",
        match device {
            Some(d) => format!("GPU {d} of the node (by its rank there)"),
            None => "no GPU: the CPU".into(),
        }
    );
    let drawn = draw(b, total, mine, rank, size);
    if rank == 0 {
        println!(
            "{:?} {:?} {:?}, {total} particles over {size} process(es), {:?}{}",
            b.kernel,
            b.dist,
            b.precision,
            b.method,
            match (b.dist, b.strong || b.fixed_box) {
                (Dist::Uniform, false) => format!(", in a box of sides {:?}", weak_box(size)),
                _ => String::new(),
            }
        );
    }
    match (vortex, b.precision) {
        (false, Precision::F32) => run_with::<Gravity, f32>(&comm, b, &drawn)?,
        (false, Precision::F64) => run_with::<Gravity, f64>(&comm, b, &drawn)?,
        (true, Precision::F32) => run_with::<VelocityStretching, f32>(&comm, b, &drawn)?,
        (true, Precision::F64) => run_with::<VelocityStretching, f64>(&comm, b, &drawn)?,
    }
    Ok(())
}
