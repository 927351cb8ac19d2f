//! What the benchmark examples share: kernel names, random problems for
//! any kernel's layout, and the error against an f64 direct sum on sampled
//! targets; and the Plummer example's PNG (`plot`).
//!
//! Each example compiles this module and uses a part of it.
#![allow(dead_code)]

#[cfg(feature = "mpi")]
pub mod mpi_bench;
pub mod periodic_flow;
pub mod plot;

use clap::ValueEnum;
use fmm_core::distributions::plummer;
use fmm_core::{evaluate, Kernel, Method, Outputs, Particles, Real, Stage, Stats};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The MPI examples' checkpoints (`fmm_core::distributed::checkpoint`: a
/// part a process, then a manifest; a restart on any number of processes).
#[derive(clap::Args, Debug)]
pub struct Checkpoints {
    /// The directory to write checkpoints to.
    #[arg(long)]
    pub checkpoint: Option<std::path::PathBuf>,
    /// Steps between checkpoints (0: only at the last step).
    #[arg(long, default_value_t = 0)]
    pub every: usize,
    /// A checkpoint to go on from (to `--steps` in all), written by any
    /// number of processes.
    #[arg(long)]
    pub restart: Option<std::path::PathBuf>,
}

impl Checkpoints {
    /// Where to write the checkpoint of `step` (of `last`), if one is due.
    pub fn due(&self, step: usize, last: usize) -> Option<&std::path::Path> {
        let dir = self.checkpoint.as_deref()?;
        (step == last || (self.every > 0 && step.is_multiple_of(self.every))).then_some(dir)
    }

    /// Writes the vortex particles `p` and `stepper` as the checkpoint of
    /// `step` (of `last`, at `time`) where one is due, a part a process
    /// (`fmm_vortex::distributed::save_partitioned`); rank 0 says so.
    #[cfg(feature = "mpi")]
    pub fn save_vortex<C: mpi::traits::Communicator>(
        &self,
        comm: &C,
        (step, last, time): (usize, usize, f64),
        p: &fmm_vortex::VortexParticles,
        stepper: &fmm_vortex::Stepper,
    ) -> Result<(), fmm_vortex::VortexError> {
        let Some(dir) = self.due(step, last) else {
            return Ok(());
        };
        let c = fmm_vortex::Checkpoint {
            step: step as u64,
            time,
            particles: p.clone(),
            stepper: stepper.clone(),
        };
        fmm_vortex::distributed::save_partitioned(comm, dir, &c)?;
        if comm.rank() == 0 {
            println!("checkpoint at step {step}: {}", dir.display());
        }
        Ok(())
    }
}

/// The far fields, by name on the command line (`--far-field`).
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum FarFieldName {
    /// From the kernel's declaration.
    #[default]
    Auto,
    /// The treecode's summed strength at the centre of strength.
    Monopole,
    /// Solid harmonic expansions (kernels with a Laplace far field).
    Laplace,
    /// Pseudo-particles on spherical t-designs.
    Ppm,
    /// Kernel-independent: Chebyshev nodes.
    Ki,
}

impl FarFieldName {
    pub fn far_field(self) -> fmm_core::FarField {
        use fmm_core::FarField;
        match self {
            FarFieldName::Auto => FarField::Auto,
            FarFieldName::Monopole => FarField::Monopole,
            FarFieldName::Laplace => FarField::Laplace,
            FarFieldName::Ppm => FarField::Ppm,
            FarFieldName::Ki => FarField::KernelIndependent,
        }
    }
}

/// The built-in kernels, by name on the command line.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum KernelName {
    Gravity,
    Coulomb,
    BiotSavart,
    Stretching,
    VelocityStretching,
    HuBiotSavart,
    Stokeslet,
    StokesletSingular,
    Yukawa,
    /// A Gaussian radial basis function sum, declared in this module
    /// ([`GaussianRbf`]): a user's kernel with no far field of its own.
    GaussianRbf,
}

fmm_core::kernel! {
    /// A Gaussian radial basis function sum of width `w`:
    /// `phi_i = sum_{j != i} q_j exp(-r^2 / w^2)` (the DSL has every
    /// kernel add 0 at r = 0: add `q_i` for the self term). Declared here
    /// as a user declares a kernel:
    /// no Laplace far field, so the tree methods take the
    /// kernel-independent one.
    pub kernel GaussianRbf {
        param w;
        source q;
        output phi;
        require w > 0.0;
        strength q;
        phi += select(r2 > 0.0, q * exp(-r2 / (w * w)), 0.0);
    }
}

/// Calls `$run::<K, ...>(...)` with `K` the kernel named by `$name`.
#[macro_export]
macro_rules! with_kernel {
    ($name:expr, |$k:ident| $body:expr) => {{
        use fmm_core::kernels::*;
        use $crate::common::KernelName;
        match $name {
            KernelName::Gravity => {
                type $k = Gravity;
                $body
            }
            KernelName::Coulomb => {
                type $k = Coulomb;
                $body
            }
            KernelName::BiotSavart => {
                type $k = BiotSavart;
                $body
            }
            KernelName::Stretching => {
                type $k = Stretching;
                $body
            }
            KernelName::VelocityStretching => {
                type $k = VelocityStretching;
                $body
            }
            KernelName::HuBiotSavart => {
                type $k = HuBiotSavart;
                $body
            }
            KernelName::Stokeslet => {
                type $k = Stokeslet;
                $body
            }
            KernelName::StokesletSingular => {
                type $k = StokesletSingular;
                $body
            }
            KernelName::Yukawa => {
                type $k = Yukawa;
                $body
            }
            KernelName::GaussianRbf => {
                type $k = $crate::common::GaussianRbf;
                $body
            }
        }
    }};
}

/// Where a benchmark runs.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum Backend {
    /// The GPU if one can be used, else the CPU (one log line says which).
    Auto,
    Cpu,
    Cuda,
}

impl Backend {
    pub fn core(self) -> fmm_core::Backend {
        match self {
            Backend::Auto => fmm_core::Backend::Auto,
            Backend::Cpu => fmm_core::Backend::Cpu,
            Backend::Cuda => fmm_core::Backend::Cuda,
        }
    }
}

/// On or off, for the tuning switches.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// Which vectors the CPU evaluators use.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum Simd {
    On,
    Avx2,
    Off,
}

/// The boundary at infinity of a box periodic along three axes.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum BoundaryName {
    TinFoil,
    Vacuum,
}

/// A periodic box, as the benchmarks take it.
#[derive(clap::Args, Clone, Debug)]
pub struct Periodic {
    /// Run in the periodic box `[0, L)^3` of side L (the drawn points are
    /// in the unit cube: 1 holds them; points outside are wrapped). The
    /// sources' strengths are made zero-mean, as a periodic sum needs,
    /// unless `--background` is given.
    #[arg(long, value_name = "L")]
    pub periodic: Option<f64>,
    /// The periodic axes: xyz, a slab (two of them, e.g. xy) or a wire (one).
    #[arg(long, default_value = "xyz")]
    pub periodic_axes: String,
    /// The boundary at infinity (three periodic axes).
    #[arg(long, value_enum, default_value = "tin-foil")]
    pub boundary: BoundaryName,
    /// Levels of images (the sum covers 5^levels boxes a side; default:
    /// from the accuracy).
    #[arg(long)]
    pub image_levels: Option<u32>,
    /// A uniform neutralising background (three periodic axes, scalar
    /// strengths): the strengths are kept as drawn, net charge and all
    /// (`--strengths coherent`: positive masses, gravity's cosmological box).
    #[arg(long)]
    pub background: bool,
}

impl Periodic {
    /// What a benchmark's error is measured against: the direct sum, or in
    /// a box the periodic sum (`periodic_reference::periodic_at`).
    pub fn reference_name(&self) -> &'static str {
        match self.periodic {
            Some(_) => "periodic sum",
            None => "direct sum",
        }
    }

    /// The domain these flags ask for.
    pub fn domain(&self) -> Result<fmm_core::Domain, String> {
        let Some(side) = self.periodic else {
            return Ok(fmm_core::Domain::FreeSpace);
        };
        let axes = [0, 1, 2].map(|a| self.periodic_axes.contains(['x', 'y', 'z'][a]));
        if self.periodic_axes.chars().any(|c| !"xyz".contains(c)) {
            return Err(format!(
                "--periodic-axes takes the letters x, y and z, not `{}`",
                self.periodic_axes
            ));
        }
        let mut b = fmm_core::PeriodicBox::cube([0.0; 3], side).with_axes(axes);
        if self.boundary == BoundaryName::Vacuum {
            b = b.with_boundary(fmm_core::Boundary::Vacuum);
        }
        if let Some(l) = self.image_levels {
            b = b.with_image_levels(l);
        }
        if self.background {
            b = b.with_background();
        }
        Ok(fmm_core::Domain::Periodic(b))
    }
}

/// Process-wide switches every benchmark takes, to compare a path with the
/// one it replaced on the same machine.
#[derive(clap::Args, Clone, Debug)]
pub struct Switches {
    /// The CPU evaluators' vector path: on (AVX-512 where the CPU has it,
    /// else AVX2), avx2 (never AVX-512), off (the portable one).
    #[arg(long, value_enum, default_value = "on")]
    pub simd: Simd,
    /// Long host-device copies through page-locked staging buffers (off:
    /// plain copies).
    #[arg(long, value_enum, default_value = "on")]
    pub staging: Switch,
}

impl Switches {
    /// Applies the switches (the staging one to the GPU `device`, if the
    /// evaluation runs on one).
    pub fn apply(&self, device: fmm_core::Device<'_>) {
        #[cfg(target_arch = "x86_64")]
        {
            fmm_core::simd::set_vectors(self.simd != Simd::Off);
            fmm_core::simd::set_wide_vectors(self.simd == Simd::On);
        }
        if let fmm_core::Device::Cuda(gpu) = device {
            gpu.set_staging(self.staging == Switch::On);
        }
    }
}

/// The stages an evaluation ran, one line each, and what it did.
pub fn print_stats(s: &Stats) {
    for &(stage, t) in &s.stages {
        let name = match stage {
            Stage::Setup => "setup",
            Stage::Upload => "uploads",
            Stage::Tree => "trees",
            Stage::Traversal => "traversal",
            Stage::Upward => "P2M and M2M",
            Stage::M2l => "M2L",
            Stage::Downward => "L2L and L2P",
            Stage::P2p => "P2P",
            Stage::Walk => "walk",
            Stage::Download => "downloads",
            Stage::ErrorEstimate => "error estimate",
            Stage::Partition => "partition (MPI)",
            Stage::Essential => "essential tree",
            Stage::Exchange => "exchange (MPI)",
        };
        match (stage, s.m2l_kind) {
            (Stage::M2l, Some(k)) => println!("  {name:<20}{t:.4} s ({})", k.name()),
            _ => println!("  {name:<20}{t:.4} s"),
        }
    }
    if s.target_cells > 0 {
        println!(
            "cells                 {} source, {} target",
            s.source_cells, s.target_cells
        );
    } else if s.target_groups > 0 {
        println!(
            "cells                 {} source cells, {} target groups",
            s.source_cells, s.target_groups
        );
    }
    if s.m2l > 0 {
        println!(
            "work                  {:.3e} M2L, {:.3e} P2P interactions",
            s.m2l as f64, s.p2p as f64
        );
        if s.m2l_compressed > 0 {
            println!(
                "compressed M2L        {:.3e} translations by {} operators ({} kept from \
                 an earlier evaluation)",
                s.m2l_compressed as f64, s.m2l_operators, s.m2l_operators_reused
            );
        }
    } else if s.p2c > 0 {
        println!(
            "work                  {:.3e} P2P, {:.3e} P2C interactions",
            s.p2p as f64, s.p2c as f64
        );
    }
}

/// The stages as JSON fields (`"m2l_seconds": 0.01, ...`).
pub fn stats_json(s: &Stats) -> String {
    let mut parts: Vec<String> = Stage::ALL
        .iter()
        .map(|&st| format!("\"{}_seconds\": {}", st.name(), s.seconds(st)))
        .collect();
    parts.push(format!(
        "\"m2l\": {}, \"p2p\": {}, \"p2c\": {}, \"m2l_kind\": \"{}\", \"source_cells\": {}, \"target_cells\": {}, \"target_groups\": {}, \"runs\": {}",
        s.m2l,
        s.p2p,
        s.p2c,
        s.m2l_kind.map_or("", |k| k.name()),
        s.source_cells,
        s.target_cells,
        s.target_groups,
        s.runs
    ));
    parts.join(", ")
}

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum Precision {
    F32,
    F64,
}

/// What the source strengths are.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum Strengths {
    /// Uniform in [-1, 1], every component: sums over a cell cancel.
    Random,
    /// Positive masses 1 / N; vector strengths swirling about the z axis
    /// through the centre, times a random factor in [0.5, 1.5]; other
    /// scalar strengths in [0.5, 1.5]. What a treecode's monopoles are for.
    Coherent,
}

/// Where the particles are.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
pub enum Dist {
    /// Uniform in the unit cube; strengths uniform in [-1, 1].
    Uniform,
    /// A Plummer sphere in Henon units; masses (field `m`) equal, 1 / N.
    Plummer,
}

/// Per field: name, values (a scalar repeated three times), whether vec3.
pub type FieldValues = Vec<(String, Vec<[f64; 3]>, bool)>;

/// Random inputs for kernel `K`: particles in the unit cube, strengths in
/// [-1, 1], core radii (fields named `sigma`) equal to the mean spacing
/// `N^(-1/3)` (overlap 1, as yokota2009 sets them), and the parameters
/// given.
pub struct Problem {
    pub params: Vec<f64>,
    /// Free space, or the periodic box of `--periodic`.
    pub domain: fmm_core::Domain,
    src_pos: Vec<[f64; 3]>,
    src_fields: FieldValues,
    tgt_pos: Vec<[f64; 3]>,
    tgt_fields: FieldValues,
}

fn random_fields(
    rng: &mut StdRng,
    fields: &[fmm_core::fmm_codegen::Field],
    n: usize,
    sigma: f64,
) -> FieldValues {
    use fmm_core::fmm_codegen::ast::Shape;
    fields
        .iter()
        .map(|f| {
            let values = (0..n)
                .map(|_| {
                    if f.name == "sigma" {
                        [sigma; 3]
                    } else {
                        [0, 1, 2].map(|_| rng.gen_range(-1.0..1.0))
                    }
                })
                .collect();
            (f.name.clone(), values, f.shape == Shape::Vec3)
        })
        .collect()
}

impl Problem {
    /// Sources and targets from a particle file (`.npy` or CSV, see
    /// `fmm_core::io`): the same particles are the targets, so the file
    /// also holds the target fields, if the kernel has any. Parameters as
    /// for random problems.
    pub fn from_file<K: Kernel>(path: &std::path::Path) -> Result<Problem, fmm_core::Error> {
        Self::from_files::<K>(path, None)
    }

    /// Sources from `sources` and, with `targets`, the targets from that
    /// file (columns x, y, z and the kernel's target fields); without it
    /// as [`Problem::from_file`].
    pub fn from_files<K: Kernel>(
        sources: &std::path::Path,
        targets: Option<&std::path::Path>,
    ) -> Result<Problem, fmm_core::Error> {
        let def = K::def();
        let mut names = fmm_core::io::column_names::<K>(true);
        if targets.is_none() {
            names.extend(fmm_core::io::column_names::<K>(false).into_iter().skip(3));
        }
        let (src_pos, src_fields, src_tgt_fields) = read_table(sources, &names, def)?;
        let (tgt_pos, tgt_fields) = match targets {
            None => (src_pos.clone(), src_tgt_fields),
            Some(t) => {
                let names = fmm_core::io::column_names::<K>(false);
                let (pos, _, fields) = read_table(t, &names, def)?;
                (pos, fields)
            }
        };
        let n = src_pos.len();
        Ok(Problem {
            params: vec![0.5 / (n.max(1) as f64).cbrt(); def.n_params()],
            domain: fmm_core::Domain::FreeSpace,
            src_pos,
            src_fields,
            tgt_pos,
            tgt_fields,
        })
    }

    /// The problem in `domain`; in a periodic box without a background the
    /// sources' fields other than core radii made zero-mean (a lattice sum
    /// needs a neutral cell).
    pub fn in_domain(&mut self, domain: fmm_core::Domain) {
        self.domain = domain;
        if domain.periodic().is_none_or(|b| b.background) {
            return;
        }
        for (name, values, _) in &mut self.src_fields {
            if name == "sigma" {
                continue;
            }
            let n = values.len().max(1) as f64;
            let mean = [0, 1, 2].map(|a| values.iter().map(|v| v[a]).sum::<f64>() / n);
            values
                .iter_mut()
                .for_each(|v| *v = [0, 1, 2].map(|a| v[a] - mean[a]));
        }
    }

    /// The kernel's parameters in the problem's domain, as the front door
    /// takes them.
    pub fn problem(&self) -> fmm_core::Problem<'_> {
        fmm_core::Problem::new(&self.params).in_domain(self.domain)
    }

    /// Core radii (fields named `sigma`) `factor` times what they are: an
    /// overlap other than 1.
    pub fn scale_cores(&mut self, factor: f64) {
        for (name, values, _) in &mut self.src_fields {
            if name == "sigma" {
                values.iter_mut().for_each(|v| *v = v.map(|x| x * factor));
            }
        }
    }

    pub fn new<K: Kernel>(
        n: usize,
        m: Option<usize>,
        seed: u64,
        dist: Dist,
        strengths: Strengths,
    ) -> Problem {
        let def = K::def();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut draw = |k: usize| -> Vec<[f64; 3]> {
            match dist {
                Dist::Uniform => (0..k)
                    .map(|_| [0, 1, 2].map(|_| rng.gen::<f64>()))
                    .collect(),
                Dist::Plummer => plummer(k, rng.gen()).0,
            }
        };
        let src_pos = draw(n);
        let tgt_pos = match m {
            Some(m) => draw(m),
            None => src_pos.clone(),
        };
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        // Core radii of overlap 1: the mean spacing of the sources.
        let sigma = 1.0 / (n.max(1) as f64).cbrt();
        let mut src_fields = random_fields(&mut rng, &def.sources, src_pos.len(), sigma);
        if strengths == Strengths::Coherent {
            let c = [0, 1, 2].map(|a| src_pos.iter().map(|p| p[a]).sum::<f64>() / n.max(1) as f64);
            for (name, values, vec3) in &mut src_fields {
                for (v, p) in values.iter_mut().zip(&src_pos) {
                    let f = rng.gen_range(0.5..1.5);
                    *v = match (name.as_str(), *vec3) {
                        ("m", _) => [1.0 / n as f64; 3],
                        ("sigma", _) => *v,
                        (_, true) => [-(p[1] - c[1]) * f, (p[0] - c[0]) * f, 0.3 * f],
                        (_, false) => [f; 3],
                    };
                }
            }
        }
        let tgt_fields = random_fields(&mut rng, &def.targets, tgt_pos.len(), sigma);
        // Softening (gravity) or smoothing radius (hu2011): about the mean
        // spacing of the particles.
        let params = vec![0.5 / (n.max(1) as f64).cbrt(); def.n_params()];
        Problem {
            params,
            domain: fmm_core::Domain::FreeSpace,
            src_pos,
            src_fields,
            tgt_pos,
            tgt_fields,
        }
    }

    pub fn particles<K: Kernel, R: Real>(
        &self,
        targets_subset: Option<&[usize]>,
    ) -> Result<(Particles<R>, Particles<R>), fmm_core::Error> {
        let conv = |v: &[[f64; 3]]| -> Vec<[R; 3]> { v.iter().map(|p| p.map(R::c)).collect() };
        let mut src = Particles::<R>::sources::<K>(&conv(&self.src_pos))?;
        for (name, values, vec3) in &self.src_fields {
            set_field(&mut src, name, values, *vec3)?;
        }
        let pick = |v: &[[f64; 3]]| -> Vec<[f64; 3]> {
            match targets_subset {
                Some(idx) => idx.iter().map(|&i| v[i]).collect(),
                None => v.to_vec(),
            }
        };
        let mut tgt = Particles::<R>::targets::<K>(&conv(&pick(&self.tgt_pos)))?;
        for (name, values, vec3) in &self.tgt_fields {
            set_field(&mut tgt, name, &pick(values), *vec3)?;
        }
        Ok((tgt, src))
    }
}

/// Positions, source fields and target fields from a particle file whose
/// `.npy` columns are named `names`; fields without columns in the file
/// are left out when `names` leaves them out (targets read as sources).
fn read_table(
    path: &std::path::Path,
    names: &[String],
    def: &fmm_core::fmm_codegen::KernelDef,
) -> Result<(Vec<[f64; 3]>, FieldValues, FieldValues), fmm_core::Error> {
    let table = fmm_core::io::Table::read(path, names)?;
    let column = |name: &str| -> Result<Vec<f64>, fmm_core::Error> {
        let k = table.names.iter().position(|n| n == name).ok_or_else(|| {
            fmm_core::Error::Io(format!(
                "{}: no column `{name}` (the columns are: {})",
                path.display(),
                table.names.join(", ")
            ))
        })?;
        Ok(table.columns[k].clone())
    };
    let (x, y, z) = (column("x")?, column("y")?, column("z")?);
    let pos: Vec<[f64; 3]> = (0..table.rows()).map(|i| [x[i], y[i], z[i]]).collect();
    let fields = |layout: &[fmm_core::fmm_codegen::Field]| -> Result<FieldValues, fmm_core::Error> {
        layout
            .iter()
            .filter(|f| f.slot_names().iter().all(|n| names.contains(n)))
            .map(|f| {
                let cols = f
                    .slot_names()
                    .iter()
                    .map(|n| column(n))
                    .collect::<Result<Vec<_>, _>>()?;
                let values = (0..table.rows())
                    .map(|i| [0, 1, 2].map(|c| cols[c.min(cols.len() - 1)][i]))
                    .collect();
                Ok((f.name.clone(), values, cols.len() == 3))
            })
            .collect()
    };
    Ok((pos, fields(&def.sources)?, fields(&def.targets)?))
}

fn set_field<R: Real>(
    p: &mut Particles<R>,
    name: &str,
    values: &[[f64; 3]],
    vec3: bool,
) -> Result<(), fmm_core::Error> {
    if vec3 {
        let v: Vec<[R; 3]> = values.iter().map(|x| x.map(R::c)).collect();
        p.set_vec3(name, &v)?;
    } else {
        let v: Vec<R> = values.iter().map(|x| R::c(x[0])).collect();
        p.set(name, &v)?;
    }
    Ok(())
}

/// Writes kernel `K`'s outputs to `path` (`.npy` or CSV), one column per
/// output slot named as declared, in the targets' order.
pub fn write_outputs<K: Kernel, R: Real>(
    path: &std::path::Path,
    out: &Outputs<R>,
) -> Result<(), fmm_core::Error> {
    let names: Vec<String> = K::def()
        .outputs
        .iter()
        .flat_map(|f| f.slot_names())
        .collect();
    fmm_core::io::write_outputs(path, out, &names)
}

/// Relative L2 error of `out` (all targets) against an f64 direct sum on
/// `samples` targets drawn at random.
pub fn sampled_error<K: Kernel, R: Real>(
    prob: &Problem,
    out: &Outputs<R>,
    samples: usize,
    seed: u64,
) -> Result<f64, fmm_core::Error> {
    let m = out.len();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc0ffee);
    let idx: Vec<usize> = (0..samples.min(m)).map(|_| rng.gen_range(0..m)).collect();
    let reference = reference::<K>(prob, &idx)?;
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (k, want) in reference.iter().enumerate() {
        for (s, &i) in idx.iter().enumerate() {
            let got = out.slots()[k][i].to_f64();
            num += (got - want[s]) * (got - want[s]);
            den += want[s] * want[s];
        }
    }
    Ok((num / den).sqrt())
}

/// Percentiles (50, 90, 99) of the per-target relative error of the first
/// vec3 output (the force or the velocity), `|got - want| / |want|`, on
/// `samples` targets drawn at random.
pub fn sampled_percentiles<K: Kernel, R: Real>(
    prob: &Problem,
    out: &Outputs<R>,
    samples: usize,
    seed: u64,
) -> Result<Option<[f64; 3]>, fmm_core::Error> {
    let def = K::def();
    let Some(f) = def
        .outputs
        .iter()
        .find(|f| f.shape == fmm_core::fmm_codegen::ast::Shape::Vec3)
    else {
        return Ok(None);
    };
    let m = out.len();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc0ffee);
    let idx: Vec<usize> = (0..samples.min(m)).map(|_| rng.gen_range(0..m)).collect();
    let reference = reference::<K>(prob, &idx)?;
    let mut rel: Vec<f64> = idx
        .iter()
        .enumerate()
        .map(|(s, &i)| {
            let (mut num, mut den) = (0.0f64, 0.0f64);
            for c in 0..3 {
                let want = reference[f.offset + c][s];
                let got = out.slots()[f.offset + c][i].to_f64();
                num += (got - want) * (got - want);
                den += want * want;
            }
            (num / den.max(f64::MIN_POSITIVE)).sqrt()
        })
        .collect();
    rel.sort_by(f64::total_cmp);
    let at = |q: f64| rel[((rel.len() as f64 * q) as usize).min(rel.len() - 1)];
    Ok(Some([at(0.5), at(0.9), at(0.99)]))
}

/// The f64 sums at the targets `idx` of `prob` on the CPU, one vector an
/// output slot: the direct sum, in a periodic box the periodic reference.
fn reference<K: Kernel>(prob: &Problem, idx: &[usize]) -> Result<Vec<Vec<f64>>, fmm_core::Error> {
    let (tgt64, src64) = prob.particles::<K, f64>(Some(idx))?;
    if let Some(b) = prob.domain.periodic() {
        // Not the Ewald sum: its reciprocal part costs every source at
        // every vector (minutes at 10^7 sources); the periodic reference
        // the tolerance uses, to 3e-9 here.
        let all: Vec<usize> = (0..idx.len()).collect();
        return fmm_core::methods::fmm::periodic_reference::periodic_at::<K, f64>(
            &prob.params,
            b,
            &tgt64,
            &all,
            &src64,
            1e-7,
        );
    }
    Ok(evaluate::<K, f64>(
        fmm_core::Backend::Cpu,
        &Method::direct(),
        prob.problem(),
        &tgt64,
        &src64,
    )?
    .outputs
    .slots()
    .to_vec())
}

/// The median of some timings.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Particles of kernel `K` for runs too large to keep an f64 copy of the
/// problem (10^8 to 10^9): `n` points uniform in the unit cube drawn
/// straight into `R` on every core (a generator per chunk, seeded from
/// `seed`), the targets at the sources; masses (`m`) 1 / n, core radii
/// (`sigma`) the mean spacing, other fields uniform in [0.5, 1.5]; the
/// parameters half the mean spacing (or `params`).
pub fn lean_particles<K: Kernel, R: Real>(
    n: usize,
    seed: u64,
) -> Result<(Particles<R>, Particles<R>), fmm_core::Error> {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 20;
    let spacing = 1.0 / (n.max(1) as f64).cbrt();
    let draw = |salt: u64, k: usize| -> Vec<[R; 3]> {
        let mut v = vec![[R::zero(); 3]; k];
        v.par_chunks_mut(CHUNK).enumerate().for_each(|(c, part)| {
            let mut rng = StdRng::seed_from_u64(seed ^ salt ^ (c as u64).wrapping_mul(0x9e37_79b9));
            for p in part {
                *p = [0, 1, 2].map(|_| R::c(rng.gen::<f64>()));
            }
        });
        v
    };
    let pos = draw(0, n);
    let mut src = Particles::<R>::sources::<K>(&pos)?;
    let fill = |p: &mut Particles<R>, fields: &[fmm_core::fmm_codegen::Field], salt: u64| {
        for f in fields {
            let v: Vec<[R; 3]> = match f.name.as_str() {
                "m" => vec![[R::c(1.0 / n as f64); 3]; n],
                "sigma" => vec![[R::c(spacing); 3]; n],
                _ => draw(salt, n)
                    .into_iter()
                    .map(|x| x.map(|c| R::c(0.5 + c.to_f64())))
                    .collect(),
            };
            set_field_r(
                p,
                &f.name,
                &v,
                f.shape == fmm_core::fmm_codegen::ast::Shape::Vec3,
            )?;
        }
        Ok::<_, fmm_core::Error>(())
    };
    fill(&mut src, &K::def().sources, 1)?;
    let mut tgt = Particles::<R>::targets::<K>(&pos)?;
    fill(&mut tgt, &K::def().targets, 2)?;
    Ok((tgt, src))
}

fn set_field_r<R: Real>(
    p: &mut Particles<R>,
    name: &str,
    values: &[[R; 3]],
    vec3: bool,
) -> Result<(), fmm_core::Error> {
    if vec3 {
        p.set_vec3(name, values)?;
    } else {
        let v: Vec<R> = values.iter().map(|x| x[0]).collect();
        p.set(name, &v)?;
    }
    Ok(())
}
