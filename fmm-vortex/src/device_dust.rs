//! Dust kept on the GPU between steps ([`DeviceDust`]): the brown-out's
//! 10^6 particles, moved by a rotor wake ([`crate::rotor::Wake`]) whose
//! few thousand segments are uploaded each step while the dust never
//! crosses the bus. The same step as [`Passive`]'s on the host (the flow
//! at the step's middle, held over it: `Passive::midpoints`,
//! `Passive::advance_by`), in two element-wise kernels around one resident
//! evaluation of the front door.
//!
//! On the host at 10^6 particles a step spent about 0.4 s converting,
//! copying and packing the dust around 0.02 s of sums (one H100,
//! docs/VORTEX.md).

use fmm_core::cuda::Gpu;
use fmm_core::cudarc::driver::{CudaSlice, PushKernelArg};
use fmm_core::kernels::VelocityStretching;
use fmm_core::{evaluate_resident, Achieved, DeviceParticles, Particles, Real};

use crate::error::VortexError;
use crate::integrate::check_dt;
use crate::particles::VortexParticles;
use crate::passive::{Motion, Passive, Pickup};
use crate::rates::{sources_of, Solver};
use crate::resident::{cuda, from_blocks, items, to_blocks, DeviceRegisters, Slots};
use crate::rotor::Dust;

/// Inertial particles on the GPU between steps, their flow summed in
/// precision `R`.
pub struct DeviceDust<'g, R: Real> {
    regs: DeviceRegisters<'g>,
    n: usize,
    /// Positions and velocities, six blocks of `n`, in f64.
    y: CudaSlice<f64>,
    /// Where the flow is evaluated, in `R`: the front door's targets.
    targets: DeviceParticles<R>,
    /// Lifts counted on the device (added to the host's count).
    lifted: CudaSlice<u32>,
    /// What stays on the host: the model and the lifts before upload.
    model: Passive,
    slots: Slots,
}

impl<'g, R: Real> DeviceDust<'g, R> {
    /// Copies the inertial particles `q` (checked) to `gpu`.
    pub fn upload(gpu: &'g Gpu, q: &Passive) -> Result<Self, VortexError> {
        q.check()?;
        if !matches!(q.motion, Motion::Inertial { .. }) {
            return Err(VortexError::BadSetting {
                what: "tracers on the device",
                value: f64::NAN,
                why: "need inertial particles (a short response time makes them tracers)",
            });
        }
        let regs = DeviceRegisters::new::<R>(gpu)?;
        let n = q.len();
        let at: Vec<[R; 3]> = q.x.iter().map(|x| x.map(|c| R::c(c))).collect();
        let targets = Particles::targets::<VelocityStretching>(&at)?;
        Ok(DeviceDust {
            n,
            y: regs.upload(&to_blocks(&q.x, &q.v))?,
            targets: DeviceParticles::upload(gpu, &targets)?,
            lifted: regs
                .stream()
                .clone_htod(&[0u32])
                .map_err(cuda("copy to the device"))?,
            model: Passive {
                x: Vec::new(),
                v: Vec::new(),
                ..q.clone()
            },
            slots: Slots::of_kernel(),
            regs,
        })
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The particles copied back to the host (their lifts counted).
    pub fn download(&self) -> Result<Passive, VortexError> {
        let y = self.regs.download(&self.y, 6 * self.n)?;
        let (x, v) = from_blocks(&y, self.n);
        let lifted = self
            .regs
            .stream()
            .clone_dtoh(&self.lifted)
            .map_err(cuda("copy from the device"))?[0];
        Ok(Passive {
            x,
            v,
            lifted: self.model.lifted + lifted as usize,
            ..self.model.clone()
        })
    }

    /// The response time, gravity, ground and pickup the kernels take.
    fn model(&self) -> (f64, [f64; 3], f64, Option<Pickup>) {
        let Motion::Inertial {
            response_time,
            gravity,
        } = self.model.motion
        else {
            unreachable!("uploaded dust is inertial")
        };
        let z0 = self.model.ground.unwrap_or(f64::NEG_INFINITY);
        (response_time, gravity, z0, self.model.pickup)
    }
}

impl<R: Real> Dust for DeviceDust<'_, R> {
    fn advance(
        &mut self,
        sources: &VortexParticles,
        dt: f64,
        solver: &Solver,
    ) -> Result<(Option<Achieved>, String), VortexError> {
        check_dt(dt)?;
        let gpu = self.regs.gpu;
        let device = format!("CUDA on {}", gpu.info());
        if self.n == 0 {
            return Ok((None, device));
        }
        let (tau, g, z0, pickup) = self.model();
        let lift = pickup.map_or(0.0, |k| k.reference_height);
        let n = self.n as u32;
        let s = self.regs.stream().clone();
        {
            let mut b = s.launch_builder(&self.regs.dust_points);
            let half = 0.5 * dt;
            b.arg(&n).arg(&self.y).arg(&half).arg(&z0).arg(&lift);
            let pos = self
                .targets
                .positions_mut()
                .unwrap_or_else(|| unreachable!("the dust's targets carry their positions"));
            for x in pos.iter_mut() {
                b.arg(x);
            }
            // SAFETY: `dust_points`' signature: `y` 6 n long, the points n.
            unsafe { b.launch(items(self.n)) }.map_err(cuda("launching dust_points"))?;
        }
        let host = sources_of::<VelocityStretching, R>(sources, &solver.strengths(sources))?;
        let on_device = DeviceParticles::upload(gpu, &host)?;
        let ev = evaluate_resident::<VelocityStretching, R>(
            gpu,
            &solver.method,
            solver.problem(),
            &self.targets,
            &on_device,
        )?;
        let (on, per_speed, threshold, launch) = match pickup {
            Some(k) => (1i32, k.friction_velocity(1.0), k.threshold, k.launch),
            None => (0, 0.0, 0.0, 0.0),
        };
        let e = (-dt / tau).exp();
        let o = ev.outputs.slots();
        let u = self.slots.u;
        let mut b = s.launch_builder(&self.regs.dust_advance);
        b.arg(&n).arg(&mut self.y);
        b.arg(&o[u]).arg(&o[u + 1]).arg(&o[u + 2]);
        b.arg(&dt)
            .arg(&tau)
            .arg(&e)
            .arg(&g[0])
            .arg(&g[1])
            .arg(&g[2]);
        b.arg(&z0)
            .arg(&on)
            .arg(&lift)
            .arg(&per_speed)
            .arg(&threshold);
        b.arg(&launch).arg(&mut self.lifted);
        // SAFETY: `dust_advance`'s signature: `y` 6 n long, `u` n each,
        // `lifted` one.
        unsafe { b.launch(items(self.n)) }.map_err(cuda("launching dust_advance"))?;
        self.regs
            .check_blocks(&self.y, self.n, ["a dust position", "a dust velocity"])?;
        Ok((ev.achieved, device))
    }
}
