//! Vortex particles kept on the GPU between steps: the state in f64 on the
//! device, the front door's particle sets ([`DeviceParticles`]) in the
//! sums' precision beside it, and the schemes of [`crate::integrate`] run
//! on device registers, so a step copies nothing across the bus.
//!
//! At 10^6 particles the host path spends about 0.17 s a step converting
//! and copying (docs/VORTEX.md) against 0.03 to 0.05 s of sums; here a
//! step is the sums, a few element-wise kernels and one 4-byte read (the
//! check that the state stayed finite).
//!
//! The state is one register of `6 n` values, six blocks of `n` (the
//! three axes of the positions, then of the strengths); a stage publishes
//! its register into the sets the front door reads (positions, `alpha`,
//! `sigma`, the targets' `alpha_i`) and gathers the outputs (`u`, `s`)
//! back into a register of rates. In a box periodic along all three axes
//! the strengths are published less their mean, as the host's
//! [`Solver::strengths`] sums them (a periodic velocity's curl has no
//! mean; the periodic sums refuse a net strength).

use std::sync::Arc;
use std::time::Instant;

use fmm_core::cuda::Gpu;
use fmm_core::cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use fmm_core::kernels::VelocityStretching;
use fmm_core::{evaluate_resident, Achieved, DeviceParticles, Kernel, Real};

use crate::error::VortexError;
use crate::integrate::{check_dt, Registers, Stepper};
use crate::particles::VortexParticles;
use crate::rates::{front_door_sets, Rates, Solver, StretchingScheme};
use crate::viscous::core_growth;

/// The element-wise kernels of a resident run (`real` the sums'
/// precision).
const SOURCE: &str = r#"
extern "C" __global__ void vortex_combine(unsigned n, double* y, double a, unsigned m,
    double c0, const double* v0, double c1, const double* v1,
    double c2, const double* v2, double c3, const double* v3) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double s = a * y[i];
    if (m > 0) s += c0 * v0[i];
    if (m > 1) s += c1 * v1[i];
    if (m > 2) s += c2 * v2[i];
    if (m > 3) s += c3 * v3[i];
    y[i] = s;
}

extern "C" __global__ void vortex_publish(unsigned n, const double* y, const double* sigma,
    const double* mean, real* x0, real* x1, real* x2, real* a0, real* a1, real* a2, real* s,
    real* t0, real* t1, real* t2) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    x0[i] = (real)y[i];
    x1[i] = (real)y[n + i];
    x2[i] = (real)y[2 * n + i];
    real ax = (real)(y[3 * n + i] - mean[0]), ay = (real)(y[4 * n + i] - mean[1]),
        az = (real)(y[5 * n + i] - mean[2]);
    a0[i] = ax; a1[i] = ay; a2[i] = az;
    t0[i] = ax; t1[i] = ay; t2[i] = az;
    s[i] = (real)sigma[i];
}

// The mean of the strengths (blocks 3 to 5 of y) into mean[0..3]: one
// block of MEAN_THREADS, each thread a strided sum, then a tree in shared
// memory: the same order every run, so a run resumes bit for bit.
#define MEAN_THREADS 256
extern "C" __global__ void vortex_mean(unsigned n, const double* y, double* mean) {
    __shared__ double part[MEAN_THREADS];
    for (unsigned c = 0; c < 3; ++c) {
        double sum = 0.0;
        for (unsigned i = threadIdx.x; i < n; i += MEAN_THREADS) sum += y[(3 + c) * n + i];
        part[threadIdx.x] = sum;
        __syncthreads();
        for (unsigned w = MEAN_THREADS / 2; w > 0; w /= 2) {
            if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) mean[c] = n > 0 ? part[0] / (double)n : 0.0;
        __syncthreads();
    }
}

extern "C" __global__ void vortex_rates(unsigned n, const real* u0, const real* u1,
    const real* u2, const real* s0, const real* s1, const real* s2, double* k) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    k[i] = u0[i]; k[n + i] = u1[i]; k[2 * n + i] = u2[i];
    k[3 * n + i] = s0[i]; k[4 * n + i] = s1[i]; k[5 * n + i] = s2[i];
}

extern "C" __global__ void vortex_spread(unsigned n, double* sigma, double grow) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sigma[i] = sqrt(sigma[i] * sigma[i] + grow);
}

extern "C" __global__ void vortex_first_bad(unsigned n, const double* y, unsigned* first) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (!isfinite(y[i])) atomicMin(first, i);
}

// Dust (`crate::device_dust`): state y = positions then velocities, six
// blocks of n. Where a step by the flow at its middle evaluates it: see
// `Passive::midpoints`.
extern "C" __global__ void dust_points(unsigned n, const double* y, double half_dt, double z0,
    double lift, real* p0, real* p1, real* p2) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = y[i], yy = y[n + i], z = y[2 * n + i];
    if (z <= z0) {
        p0[i] = (real)x; p1[i] = (real)yy; p2[i] = (real)(z0 + lift);
        return;
    }
    double zm = z + half_dt * y[5 * n + i];
    p0[i] = (real)(x + half_dt * y[3 * n + i]);
    p1[i] = (real)(yy + half_dt * y[4 * n + i]);
    p2[i] = (real)(zm > z0 ? zm : z0);
}

// One step of the drag's exact solution under the flow u held over it,
// deposits and lifts: see `Passive::advance_by`.
extern "C" __global__ void dust_advance(unsigned n, double* y, const real* u0, const real* u1,
    const real* u2, double dt, double tau, double e, double g0, double g1, double g2,
    double z0, int pickup, double lift, double friction_per_speed, double threshold,
    double launch, unsigned* lifted) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double u[3] = {(double)u0[i], (double)u1[i], (double)u2[i]};
    if (y[2 * n + i] <= z0) {
        if (!pickup) return;
        double friction = friction_per_speed * hypot(u[0], u[1]);
        if (friction > threshold) {
            y[2 * n + i] = z0 + lift;
            y[3 * n + i] = u[0]; y[4 * n + i] = u[1]; y[5 * n + i] = launch * friction;
            atomicAdd(lifted, 1u);
        }
        return;
    }
    double g[3] = {g0, g1, g2};
    for (int c = 0; c < 3; ++c) {
        double w = u[c] + g[c] * tau;
        double dv = y[(3 + c) * n + i] - w;
        y[c * n + i] += w * dt + dv * tau * (1.0 - e);
        y[(3 + c) * n + i] = w + dv * e;
    }
    if (y[2 * n + i] <= z0) {
        y[2 * n + i] = z0;
        y[3 * n + i] = 0.0; y[4 * n + i] = 0.0; y[5 * n + i] = 0.0;
    }
}
"#;

/// The entry points of [`cuda_source`].
pub const ENTRY_POINTS: [&str; 8] = [
    "dust_advance",
    "dust_points",
    "vortex_combine",
    "vortex_first_bad",
    "vortex_mean",
    "vortex_publish",
    "vortex_rates",
    "vortex_spread",
];

/// The CUDA source of a resident run whose sums are in `R`.
pub fn cuda_source<R: Real>() -> String {
    let real = if R::NAME == "f32" { "float" } else { "double" };
    format!("typedef {real} real;\n{SOURCE}")
}

const THREADS: u32 = 256;

/// The threads of `vortex_mean`'s one block (its `MEAN_THREADS`).
const MEAN_THREADS: u32 = 256;

pub(crate) fn cuda(
    what: &'static str,
) -> impl Fn(fmm_core::cudarc::driver::DriverError) -> VortexError {
    move |e| VortexError::Fmm(fmm_core::Error::Cuda(format!("{what}: {e}")))
}

pub(crate) fn items(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(THREADS as usize).max(1) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The device's registers: arrays of `f64` on `gpu`'s stream.
pub struct DeviceRegisters<'g> {
    pub(crate) gpu: &'g Gpu,
    combine: CudaFunction,
    mean: CudaFunction,
    publish: CudaFunction,
    rates: CudaFunction,
    spread: CudaFunction,
    first_bad: CudaFunction,
    pub(crate) dust_points: CudaFunction,
    pub(crate) dust_advance: CudaFunction,
}

impl<'g> DeviceRegisters<'g> {
    pub(crate) fn new<R: Real>(gpu: &'g Gpu) -> Result<Self, VortexError> {
        let name = format!("vortex_state_{}", R::NAME);
        let (module, _) = gpu.module(&name, &cuda_source::<R>())?;
        let f = |entry| gpu.function(&module, entry);
        Ok(DeviceRegisters {
            gpu,
            combine: f("vortex_combine")?,
            mean: f("vortex_mean")?,
            publish: f("vortex_publish")?,
            rates: f("vortex_rates")?,
            spread: f("vortex_spread")?,
            first_bad: f("vortex_first_bad")?,
            dust_points: f("dust_points")?,
            dust_advance: f("dust_advance")?,
        })
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        self.gpu.stream()
    }

    pub(crate) fn upload(&self, v: &[f64]) -> Result<CudaSlice<f64>, VortexError> {
        let one = [0.0];
        let v = if v.is_empty() { &one[..] } else { v };
        self.stream()
            .clone_htod(v)
            .map_err(cuda("copy to the device"))
    }

    pub(crate) fn download(&self, v: &CudaSlice<f64>, n: usize) -> Result<Vec<f64>, VortexError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        self.stream()
            .clone_dtoh(&v.slice(0..n))
            .map_err(cuda("copy from the device"))
    }
}

impl DeviceRegisters<'_> {
    /// An error naming the first particle of the six blocks of `n` in `y`
    /// with a value no longer finite (a step too long for the flow): its
    /// position or its `what[1]` (strength, velocity).
    pub(crate) fn check_blocks(
        &self,
        y: &CudaSlice<f64>,
        n: usize,
        what: [&'static str; 2],
    ) -> Result<(), VortexError> {
        if n == 0 {
            return Ok(());
        }
        let s = self.stream();
        let mut first = s
            .clone_htod(&[u32::MAX])
            .map_err(cuda("copy to the device"))?;
        let m = 6 * n as u32;
        let mut b = s.launch_builder(&self.first_bad);
        b.arg(&m).arg(y).arg(&mut first);
        // SAFETY: `vortex_first_bad(n, y, first)`, `y` 6 n long, `first` one.
        unsafe { b.launch(items(6 * n)) }.map_err(cuda("launching vortex_first_bad"))?;
        let got = s.clone_dtoh(&first).map_err(cuda("copy from the device"))?[0];
        if got == u32::MAX {
            return Ok(());
        }
        let (block, at) = (got as usize / n, got as usize);
        let value = s
            .clone_dtoh(&y.slice(at..at + 1))
            .map_or(f64::NAN, |v| v[0]);
        Err(VortexError::BadParticle {
            index: at % n,
            what: what[usize::from(block >= 3)],
            value,
            why: "not finite after a step (shorten the step)",
        })
    }
}

impl Registers for DeviceRegisters<'_> {
    type V = CudaSlice<f64>;

    fn zeros(&self, like: &CudaSlice<f64>) -> Result<CudaSlice<f64>, VortexError> {
        self.stream()
            .alloc_zeros::<f64>(like.len())
            .map_err(cuda("a register on the device"))
    }

    fn copy(&self, y: &CudaSlice<f64>) -> Result<CudaSlice<f64>, VortexError> {
        self.stream()
            .clone_dtod(y)
            .map_err(cuda("a register on the device"))
    }

    fn combine(
        &self,
        y: &mut CudaSlice<f64>,
        a: f64,
        terms: &[(f64, &CudaSlice<f64>)],
    ) -> Result<(), VortexError> {
        assert!((1..=4).contains(&terms.len()), "one to four terms");
        let n = y.len() as u32;
        let m = terms.len() as u32;
        // Unused terms repeat the first: the kernel reads only `m` of them.
        let pick = |j: usize| terms.get(j).copied().unwrap_or((0.0, terms[0].1));
        let [(c0, v0), (c1, v1), (c2, v2), (c3, v3)] = [pick(0), pick(1), pick(2), pick(3)];
        let mut b = self.stream().launch_builder(&self.combine);
        b.arg(&n).arg(y).arg(&a).arg(&m);
        b.arg(&c0)
            .arg(v0)
            .arg(&c1)
            .arg(v1)
            .arg(&c2)
            .arg(v2)
            .arg(&c3)
            .arg(v3);
        // SAFETY: the arguments follow `vortex_combine`'s signature and
        // every register is `n` long.
        unsafe { b.launch(items(n as usize)) }.map_err(cuda("launching vortex_combine"))?;
        Ok(())
    }
}

/// The slots of `alpha`, `sigma`, `alpha_i`, `u` and `s` in the fused
/// kernel's layouts.
pub(crate) struct Slots {
    alpha: usize,
    sigma: usize,
    alpha_i: usize,
    pub(crate) u: usize,
    s: usize,
}

impl Slots {
    pub(crate) fn of_kernel() -> Self {
        let def = VelocityStretching::def();
        let at = |fields: &[fmm_core::fmm_codegen::Field], name: &str| {
            fields
                .iter()
                .find(|f| f.name == name)
                .map(|f| f.offset)
                .unwrap_or_else(|| unreachable!("the fused kernel declares `{name}`"))
        };
        Slots {
            alpha: at(&def.sources, "alpha"),
            sigma: at(&def.sources, "sigma"),
            alpha_i: at(&def.targets, "alpha_i"),
            u: at(&def.outputs, "u"),
            s: at(&def.outputs, "s"),
        }
    }
}

/// What one resident step took.
#[derive(Clone, Debug, Default)]
pub struct StepReport {
    /// Wall-clock seconds of the step (its evaluations and updates, the
    /// device synchronised at its end).
    pub seconds: f64,
    /// Evaluations of the rates in the step.
    pub evaluations: usize,
    /// What the tolerance achieved in the step's evaluations: the largest
    /// estimated error, and the last evaluation's settings.
    pub achieved: Option<Achieved>,
}

/// Vortex particles on the GPU between steps, their sums in precision `R`.
pub struct DeviceVortex<'g, R: Real> {
    regs: DeviceRegisters<'g>,
    n: usize,
    /// Positions and strengths, six blocks of `n`.
    y: CudaSlice<f64>,
    sigma: CudaSlice<f64>,
    /// The volumes, which no step changes.
    volume: Vec<f64>,
    sources: DeviceParticles<R>,
    targets: DeviceParticles<R>,
    slots: Slots,
    /// The rates at the start of the last step (its first evaluation).
    first: Option<CudaSlice<f64>>,
    /// The strengths' mean a stage published them less (zero but in a
    /// box periodic along all three axes).
    mean: CudaSlice<f64>,
}

impl<'g, R: Real> DeviceVortex<'g, R> {
    /// Copies the particles `p` (checked) to `gpu`.
    pub fn upload(gpu: &'g Gpu, p: &VortexParticles) -> Result<Self, VortexError> {
        p.check()?;
        let regs = DeviceRegisters::new::<R>(gpu)?;
        let n = p.len();
        let (targets, sources) = front_door_sets::<VelocityStretching, R>(p, &p.alpha, &[])?;
        let y = regs.upload(&to_blocks(&p.x, &p.alpha))?;
        let sigma = regs.upload(&p.sigma)?;
        let mean = regs.upload(&[0.0; 3])?;
        Ok(DeviceVortex {
            n,
            y,
            sigma,
            volume: p.volume.clone(),
            sources: DeviceParticles::upload(gpu, &sources)?,
            targets: DeviceParticles::targets_at_sources(gpu, &targets)?,
            slots: Slots::of_kernel(),
            first: None,
            mean,
            regs,
        })
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The particles copied back to the host.
    pub fn download(&self) -> Result<VortexParticles, VortexError> {
        let y = self.regs.download(&self.y, 6 * self.n)?;
        let (x, alpha) = from_blocks(&y, self.n);
        Ok(VortexParticles {
            x,
            alpha,
            sigma: self.regs.download(&self.sigma, self.n)?,
            volume: self.volume.clone(),
        })
    }

    /// One step of `dt` by `stepper`'s scheme, the rates by `solver`'s
    /// method (its backend and precision are this set's: the GPU, `R`).
    pub fn step(
        &mut self,
        stepper: &mut Stepper<CudaSlice<f64>>,
        solver: &Solver,
        dt: f64,
    ) -> Result<StepReport, VortexError> {
        check_dt(dt)?;
        let t = Instant::now();
        let mut report = StepReport::default();
        let mut first = None;
        let DeviceVortex {
            regs,
            n,
            y,
            sigma,
            sources,
            targets,
            slots,
            mean,
            ..
        } = self;
        stepper.step_in(&*regs, y, dt, |stage| {
            let (k, achieved) = evaluate(
                regs, *n, slots, stage, sigma, mean, sources, targets, solver,
            )?;
            report.evaluations += 1;
            merge(&mut report.achieved, achieved);
            if first.is_none() {
                first = Some(regs.copy(&k)?);
            }
            Ok(k)
        })?;
        self.first = first;
        self.check_finite()?;
        report.seconds = t.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The rates of the particles as they are now (one evaluation, copied
    /// to the host).
    pub fn rates(&mut self, solver: &Solver) -> Result<Rates, VortexError> {
        let t = Instant::now();
        let (k, achieved) = evaluate(
            &self.regs,
            self.n,
            &self.slots,
            &self.y,
            &self.sigma,
            &mut self.mean,
            &mut self.sources,
            &mut self.targets,
            solver,
        )?;
        let mut r = self.host_rates(&k)?;
        r.achieved = achieved;
        r.seconds = t.elapsed().as_secs_f64();
        Ok(r)
    }

    /// The rates at the start of the last step (its first evaluation),
    /// copied to the host: what diagnostics and the time-step check read.
    pub fn rates_at_step_start(&self) -> Result<Option<Rates>, VortexError> {
        self.first.as_ref().map(|k| self.host_rates(k)).transpose()
    }

    fn host_rates(&self, k: &CudaSlice<f64>) -> Result<Rates, VortexError> {
        let k = self.regs.download(k, 6 * self.n)?;
        let (u, dalpha) = from_blocks(&k, self.n);
        Ok(Rates {
            u,
            dalpha,
            seconds: 0.0,
            achieved: None,
            device: format!("CUDA on {}", self.regs.gpu.info()),
        })
    }

    /// Spreads every core over `dt` at viscosity `nu` (as
    /// [`crate::spread_cores`] does on the host).
    pub fn spread_cores(&mut self, nu: f64, dt: f64) -> Result<(), VortexError> {
        let grow = core_growth(nu, dt)?;
        if self.n == 0 {
            return Ok(());
        }
        let n = self.n as u32;
        let mut b = self.regs.stream().launch_builder(&self.regs.spread);
        b.arg(&n).arg(&mut self.sigma).arg(&grow);
        // SAFETY: `vortex_spread(n, sigma, grow)`, `sigma` n long.
        unsafe { b.launch(items(self.n)) }.map_err(cuda("launching vortex_spread"))?;
        Ok(())
    }

    /// A stepper of `scheme` whose registers live on this GPU, carrying
    /// what `host` carries (Adams-Bashforth's last rates, in the host's
    /// layout: a checkpoint's).
    pub fn stepper_from(&self, host: &Stepper) -> Result<Stepper<CudaSlice<f64>>, VortexError> {
        let mut s = Stepper::new(host.scheme);
        if let Some((k, dt)) = &host.last {
            let n = self.n;
            let blocks: Vec<f64> = (0..6)
                .flat_map(|c| (0..n).map(move |i| k[6 * i + c]))
                .collect();
            s.last = Some((self.regs.upload(&blocks)?, *dt));
        }
        Ok(s)
    }

    /// The host's copy of `stepper` (a checkpoint's).
    pub fn stepper_to_host(
        &self,
        stepper: &Stepper<CudaSlice<f64>>,
    ) -> Result<Stepper, VortexError> {
        let mut s = Stepper::new(stepper.scheme);
        if let Some((k, dt)) = &stepper.last {
            let k = self.regs.download(k, 6 * self.n)?;
            let n = self.n;
            s.last = Some(((0..6 * n).map(|j| k[(j % 6) * n + j / 6]).collect(), *dt));
        }
        Ok(s)
    }

    /// An error naming the first particle whose position or strength is no
    /// longer finite (a step too long for the flow).
    fn check_finite(&self) -> Result<(), VortexError> {
        self.regs
            .check_blocks(&self.y, self.n, ["a position", "alpha"])
    }
}

/// The rates of the state `y` (a register): published into the front
/// door's sets, evaluated, gathered back into a register.
#[allow(clippy::too_many_arguments)]
fn evaluate<R: Real>(
    regs: &DeviceRegisters<'_>,
    n: usize,
    slots: &Slots,
    y: &CudaSlice<f64>,
    sigma: &CudaSlice<f64>,
    mean: &mut CudaSlice<f64>,
    sources: &mut DeviceParticles<R>,
    targets: &mut DeviceParticles<R>,
    solver: &Solver,
) -> Result<(CudaSlice<f64>, Option<Achieved>), VortexError> {
    if solver.stretching != StretchingScheme::Classical {
        return Err(VortexError::Unsupported {
            what: "the transpose scheme on particles resident on the GPU",
            instead: "step the particles on the host (Stepper::step_particles with Backend::Cuda evaluates on the GPU) or take StretchingScheme::Classical",
        });
    }
    let s = regs.stream();
    if n > 0 {
        let m = n as u32;
        if solver.takes_mean_out() {
            let mut b = s.launch_builder(&regs.mean);
            b.arg(&m).arg(y).arg(&mut *mean);
            let one = LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (MEAN_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: `vortex_mean`'s signature: `y` 6 n long, `mean` 3;
            // one block of MEAN_THREADS, as its shared array is sized.
            unsafe { b.launch(one) }.map_err(cuda("launching vortex_mean"))?;
        } else {
            s.memset_zeros(mean)
                .map_err(cuda("zeroing the strengths' mean"))?;
        }
        let mut b = s.launch_builder(&regs.publish);
        b.arg(&m).arg(y).arg(sigma).arg(&*mean);
        let (pos, fields) = sources.parts_mut();
        let pos = pos.unwrap_or_else(|| unreachable!("sources carry their positions"));
        for x in pos.iter_mut() {
            b.arg(x);
        }
        let (a, rest) = fields.split_at_mut(slots.alpha + 3);
        debug_assert!(slots.sigma >= slots.alpha + 3, "sigma follows alpha");
        for x in &mut a[slots.alpha..] {
            b.arg(x);
        }
        b.arg(&mut rest[slots.sigma - slots.alpha - 3]);
        for x in &mut targets.slots_mut()[slots.alpha_i..slots.alpha_i + 3] {
            b.arg(x);
        }
        // SAFETY: `vortex_publish`'s signature: `y` 6 n long, `mean` 3,
        // the rest n.
        unsafe { b.launch(items(n)) }.map_err(cuda("launching vortex_publish"))?;
    }
    let ev = evaluate_resident::<VelocityStretching, R>(
        regs.gpu,
        &solver.method,
        solver.problem(),
        targets,
        sources,
    )?;
    let mut k = s
        .alloc_zeros::<f64>(6 * n.max(1))
        .map_err(cuda("a register on the device"))?;
    if n > 0 {
        let m = n as u32;
        let o = ev.outputs.slots();
        let mut b = s.launch_builder(&regs.rates);
        b.arg(&m);
        for x in o[slots.u..slots.u + 3]
            .iter()
            .chain(&o[slots.s..slots.s + 3])
        {
            b.arg(x);
        }
        b.arg(&mut k);
        // SAFETY: `vortex_rates`'s signature: the outputs n long, `k` 6 n.
        unsafe { b.launch(items(n)) }.map_err(cuda("launching vortex_rates"))?;
    }
    Ok((k, ev.achieved))
}

/// Keeps the largest estimated error of a step's evaluations, with the
/// last one's settings.
fn merge(into: &mut Option<Achieved>, got: Option<Achieved>) {
    if let Some(mut a) = got {
        if let Some(prev) = into {
            a.estimated_error = a.estimated_error.max(prev.estimated_error);
        }
        *into = Some(a);
    }
}

/// Positions and strengths (or velocities) as six blocks of `n`.
pub(crate) fn to_blocks(x: &[[f64; 3]], alpha: &[[f64; 3]]) -> Vec<f64> {
    (0..3)
        .flat_map(|c| x.iter().map(move |v| v[c]))
        .chain((0..3).flat_map(|c| alpha.iter().map(move |v| v[c])))
        .collect()
}

/// The six blocks of `n` back as two arrays of triples.
pub(crate) fn from_blocks(y: &[f64], n: usize) -> (Vec<[f64; 3]>, Vec<[f64; 3]>) {
    let at = |b: usize, i: usize| y[b * n + i];
    (
        (0..n).map(|i| [at(0, i), at(1, i), at(2, i)]).collect(),
        (0..n).map(|i| [at(3, i), at(4, i), at(5, i)]).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip() {
        let x = vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let a = vec![[7.0, 8.0, 9.0], [10.0, 11.0, 12.0]];
        let y = to_blocks(&x, &a);
        assert_eq!(
            y,
            vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0, 7.0, 10.0, 8.0, 11.0, 9.0, 12.0]
        );
        assert_eq!(from_blocks(&y, 2), (x, a));
    }
}
