//! Particles and outputs that stay on the GPU between evaluations.
//!
//! A simulation that evaluates every step copies its particles to the
//! device and the outputs back each time: at 10^7 particles that is about
//! a third of an FMM evaluation on an H200. [`DeviceParticles`] are
//! uploaded once (checked as [`Particles`] are, once, when they are
//! uploaded) and [`crate::evaluate_resident`] leaves its outputs on the
//! device as [`DeviceOutputs`]; an integrator that runs on the device
//! (a kernel of the user's own, through cudarc) updates the positions in
//! place, and only what the user downloads crosses the bus.
//!
//! Targets at the sources' points (forces on the particles themselves, the
//! usual case) share the sources' positions: [`DeviceParticles::targets_at_sources`]
//! uploads only their fields, and the methods build one tree.

use cudarc::driver::CudaSlice;

use super::primitives::add_into;
use super::Gpu;
use crate::domain::Wall;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::outputs::Outputs;
use crate::particles::{Particles, Role};
use crate::real::Real;
use fmm_codegen::Field;

/// A particle set of one kernel on the GPU, in the order it was uploaded:
/// positions (unless they are the sources') and field slots, one device
/// array each.
pub struct DeviceParticles<R> {
    kernel: &'static str,
    role: Role,
    layout: Vec<Field>,
    n: usize,
    /// `None`: the positions of the sources this set is evaluated with.
    pos: Option<[CudaSlice<R>; 3]>,
    slots: Vec<CudaSlice<R>>,
}

impl<R: Real> DeviceParticles<R> {
    /// Copies `p` to `gpu` (positions and fields).
    pub fn upload(gpu: &Gpu, p: &Particles<R>) -> Result<Self, Error> {
        Self::upload_noting(gpu, p, None).map(|(d, _)| d)
    }

    /// Copies the sources `p` to `gpu`, and says whether `targets` sit at
    /// their points (bit for bit), found as the copy reads the positions
    /// where they go through the staging buffers, else in a pass of its
    /// own ([`Gpu::upload_many_like`]): where they do, the targets need
    /// no copy of their own ([`DeviceParticles::targets_at_sources`]).
    pub fn upload_noting_targets(
        gpu: &Gpu,
        p: &Particles<R>,
        targets: &Particles<R>,
    ) -> Result<(Self, bool), Error> {
        Self::upload_noting(gpu, p, Some(targets))
    }

    fn upload_noting(
        gpu: &Gpu,
        p: &Particles<R>,
        targets: Option<&Particles<R>>,
    ) -> Result<(Self, bool), Error> {
        let mut host: Vec<&[R]> = p.positions().to_vec();
        host.extend(p.slots().iter().map(|v| v.as_slice()));
        // Each axis compared unless it is the very same array.
        let like: Vec<Option<&[R]>> = match targets {
            Some(t) if t.len() == p.len() => (0..3)
                .map(|a| {
                    let (x, y) = (t.positions()[a], p.positions()[a]);
                    (!std::ptr::eq(x, y)).then_some(x)
                })
                .collect(),
            _ => Vec::new(),
        };
        let at = targets.is_some_and(|t| t.len() == p.len());
        let (mut d, same) = gpu.upload_many_like(&host, &like)?;
        let slots = d.split_off(3);
        let pos: [CudaSlice<R>; 3] = d.try_into().unwrap_or_else(|_| unreachable!("three axes"));
        let d = DeviceParticles {
            kernel: p.kernel,
            role: p.role,
            layout: p.layout.clone(),
            n: p.len(),
            pos: Some(pos),
            slots,
        };
        Ok((d, at && same))
    }

    /// Copies the particles `parts` (made alike: one kernel, role and
    /// layout) to `gpu` as one set, each array joined on the device.
    pub fn upload_joined(gpu: &Gpu, parts: &[&Particles<R>]) -> Result<Self, Error> {
        let first = parts
            .first()
            .ok_or_else(|| Error::BadOption("no particles to join".into()))?;
        for p in parts {
            p.made_as((first.kernel, first.role, &first.layout), "joined")?;
        }
        let array = |get: &dyn Fn(&Particles<R>) -> &[R]| {
            let host: Vec<&[R]> = parts.iter().map(|p| get(p)).collect();
            gpu.upload_joined(&host)
        };
        let pos = [
            array(&|p| p.positions()[0])?,
            array(&|p| p.positions()[1])?,
            array(&|p| p.positions()[2])?,
        ];
        let slots = (0..first.slots().len())
            .map(|k| array(&|p| &p.slots()[k][..]))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(DeviceParticles {
            kernel: first.kernel,
            role: first.role,
            layout: first.layout.clone(),
            n: parts.iter().map(|p| p.len()).sum(),
            pos: Some(pos),
            slots,
        })
    }

    /// This set (on `gpu` already, with positions of its own) followed by
    /// `more` (made alike), as one new set: a process's own sources,
    /// uploaded once for its local essential tree, joined with the sources
    /// the others sent; only `more` crosses the bus.
    pub fn joined_with(&self, gpu: &Gpu, more: &Particles<R>) -> Result<Self, Error> {
        more.made_as((self.kernel, self.role, &self.layout), "joined")?;
        let own = self.pos.as_ref().ok_or_else(|| {
            Error::BadOption("particles joined on the device need positions of their own".into())
        })?;
        let pos = [
            gpu.joined_after(&own[0], more.positions()[0])?,
            gpu.joined_after(&own[1], more.positions()[1])?,
            gpu.joined_after(&own[2], more.positions()[2])?,
        ];
        let slots = self
            .slots
            .iter()
            .zip(more.slots())
            .map(|(d, h)| gpu.joined_after(d, h))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(DeviceParticles {
            kernel: self.kernel,
            role: self.role,
            layout: self.layout.clone(),
            n: self.n + more.len(),
            pos: Some(pos),
            slots,
        })
    }

    /// Copies the fields of the targets `p` to `gpu`, but not their
    /// positions: they are the sources' positions, whichever sources this
    /// set is evaluated with (which must be as many). One tree is built
    /// for both.
    pub fn targets_at_sources(gpu: &Gpu, p: &Particles<R>) -> Result<Self, Error> {
        if p.role != Role::Targets {
            return Err(Error::BadOption(format!(
                "targets at the sources' points must be targets, not {}s of {}",
                p.role.name(),
                p.kernel
            )));
        }
        let host: Vec<&[R]> = p.slots().iter().map(|v| v.as_slice()).collect();
        Ok(DeviceParticles {
            kernel: p.kernel,
            role: p.role,
            layout: p.layout.clone(),
            n: p.len(),
            pos: None,
            slots: gpu.upload_many(&host)?,
        })
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The positions, one device array per axis, unless they are the
    /// sources'.
    pub fn positions(&self) -> Option<&[CudaSlice<R>; 3]> {
        self.pos.as_ref()
    }

    /// The positions, for an integrator on the device to move.
    pub fn positions_mut(&mut self) -> Option<&mut [CudaSlice<R>; 3]> {
        self.pos.as_mut()
    }

    /// The field slots in layout order.
    pub fn slots(&self) -> &[CudaSlice<R>] {
        &self.slots
    }

    /// The field slots, for a kernel on the device to change.
    pub fn slots_mut(&mut self) -> &mut [CudaSlice<R>] {
        &mut self.slots
    }

    /// The positions (unless they are the sources') and the field slots
    /// together, for a kernel on the device that writes both.
    pub fn parts_mut(&mut self) -> (Option<&mut [CudaSlice<R>; 3]>, &mut [CudaSlice<R>]) {
        (self.pos.as_mut(), &mut self.slots)
    }

    /// Whether these are targets at their sources' points.
    pub fn at_sources(&self) -> bool {
        self.pos.is_none()
    }

    /// The particles `idx` copied back to the host (`at` their positions
    /// where these are targets at the sources' points: the sources'), for
    /// what looks at a few of them before a run (the floor predicted
    /// from the declaration, `accuracy::floor`).
    pub(crate) fn pick(
        &self,
        gpu: &Gpu,
        idx: &[usize],
        at: Option<&[CudaSlice<R>; 3]>,
    ) -> Result<Particles<R>, Error> {
        let s = gpu.stream();
        let n = idx.len();
        let order: Vec<u32> = idx.iter().map(|&i| i as u32).collect();
        let order = super::device::upload(s, &order)?;
        let take = |x: &CudaSlice<R>| -> Result<Vec<R>, Error> {
            if n == 0 {
                return Ok(Vec::new());
            }
            let g = super::primitives::gather(gpu, &order, x, n)?;
            super::device::download(s, &g, n)
        };
        let pos =
            self.pos.as_ref().or(at).ok_or_else(|| {
                Error::BadOption("targets at the sources' points need them".into())
            })?;
        Ok(Particles {
            kernel: self.kernel,
            role: self.role,
            layout: self.layout.clone(),
            pos: [take(&pos[0])?, take(&pos[1])?, take(&pos[2])?],
            slots: self.slots.iter().map(take).collect::<Result<_, _>>()?,
        })
    }

    /// These sources followed by their mirror images in `wall`: `2n`
    /// sources in free space (`Wall::with_images` on the device).
    pub(crate) fn with_images(&self, gpu: &Gpu, wall: &Wall) -> Result<Self, Error> {
        let n = self.n;
        let pos = self.placed_positions()?;
        let mirror = |x: &CudaSlice<R>, scale: f64, shift: f64| {
            super::primitives::mirror(gpu, x, n, scale, shift)
        };
        let mut images = Vec::with_capacity(3);
        for (a, x) in pos.iter().enumerate() {
            images.push(if a == wall.axis {
                mirror(x, -1.0, 2.0 * wall.at)?
            } else {
                mirror(x, 1.0, 0.0)?
            });
        }
        let signs = wall.slot_signs(&self.layout);
        let slots = self
            .slots
            .iter()
            .zip(signs)
            .map(|(x, c)| mirror(x, c, 0.0))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DeviceParticles {
            kernel: self.kernel,
            role: self.role,
            layout: self.layout.clone(),
            n: 2 * n,
            pos: Some(
                images
                    .try_into()
                    .unwrap_or_else(|_| unreachable!("three axes")),
            ),
            slots,
        })
    }

    /// These targets with positions of their own: where they sit at the
    /// sources' points, a copy of `sources`' positions (and of the
    /// fields), for an evaluation whose sources are not those points.
    pub(crate) fn placed_at(&self, gpu: &Gpu, sources: &DeviceParticles<R>) -> Result<Self, Error> {
        let s = gpu.stream();
        let copy = |x: &CudaSlice<R>| {
            s.clone_dtod(x)
                .map_err(super::device::cuda_err("copy on the device"))
        };
        let pos = match &self.pos {
            Some(p) => p,
            None => sources.placed_positions()?,
        };
        Ok(DeviceParticles {
            kernel: self.kernel,
            role: self.role,
            layout: self.layout.clone(),
            n: self.n,
            pos: Some([copy(&pos[0])?, copy(&pos[1])?, copy(&pos[2])?]),
            slots: self.slots.iter().map(copy).collect::<Result<_, _>>()?,
        })
    }

    /// [`Self::placed_at`] where these targets sit at the sources'
    /// points (`None`: they have positions of their own already).
    pub(crate) fn placed_if_at(
        &self,
        gpu: &Gpu,
        sources: &DeviceParticles<R>,
    ) -> Result<Option<Self>, Error> {
        match self.pos {
            None => self.placed_at(gpu, sources).map(Some),
            Some(_) => Ok(None),
        }
    }

    /// Checks that these particles (a `what` set) lie on `wall`'s side;
    /// targets at the sources' points have no positions of their own to
    /// check.
    pub(crate) fn check_side(&self, gpu: &Gpu, wall: &Wall, what: &str) -> Result<(), Error> {
        let Some(pos) = self.pos.as_ref() else {
            return Ok(());
        };
        let x = &pos[wall.axis];
        match super::primitives::first_below(gpu, x, self.n, wall.at)? {
            None => Ok(()),
            Some(i) => {
                let v = gpu
                    .stream()
                    .clone_dtoh(&x.slice(i..i + 1))
                    .map_err(super::device::cuda_err("copy from the device"))?[0];
                Err(wall.below(what, i, v.to_f64()))
            }
        }
    }

    /// The positions, which a set at the sources' points does not have.
    fn placed_positions(&self) -> Result<&[CudaSlice<R>; 3], Error> {
        self.pos.as_ref().ok_or_else(|| {
            Error::BadOption(format!(
                "{}s of {} at the sources' points have no positions of their own",
                self.role.name(),
                self.kernel
            ))
        })
    }

    /// Checks that this set was made for kernel `K` in the given role.
    pub(crate) fn check_for<K: Kernel>(&self, role: Role) -> Result<(), Error> {
        crate::particles::check_layout::<K>(self.kernel, self.role, &self.layout, role)
    }
}

/// The outputs of an evaluation on the GPU, in the targets' order, one
/// device array per scalar slot of the kernel's outputs.
pub struct DeviceOutputs<R> {
    kernel: &'static str,
    layout: Vec<Field>,
    n: usize,
    slots: Vec<CudaSlice<R>>,
}

impl<R: Real> DeviceOutputs<R> {
    pub(crate) fn new<K: Kernel>(n: usize, slots: Vec<CudaSlice<R>>) -> Self {
        let def = K::def();
        DeviceOutputs {
            kernel: def.name.as_str(),
            layout: def.outputs.clone(),
            n,
            slots,
        }
    }

    /// Number of targets.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The scalar slots in layout order (`phi`, `acc_x`, `acc_y`, `acc_z`),
    /// each holding at least [`DeviceOutputs::len`] values.
    pub fn slots(&self) -> &[CudaSlice<R>] {
        &self.slots
    }

    /// `other`'s outputs added to these, on the device: the outputs of
    /// two sets of sources at the same targets, the evaluation of both
    /// (it is linear in the sources).
    pub fn add(&mut self, gpu: &Gpu, other: &DeviceOutputs<R>) -> Result<(), Error> {
        if other.kernel != self.kernel || other.n != self.n {
            return Err(Error::BadOption(format!(
                "outputs added must be of one kernel at the same targets: {} of {} and {} of {}",
                self.n, self.kernel, other.n, other.kernel
            )));
        }
        for (a, b) in self.slots.iter_mut().zip(&other.slots) {
            add_into(gpu, b, a, self.n)?;
        }
        Ok(())
    }

    /// Copies the outputs to the host arrays `host` (one a slot, each of
    /// [`DeviceOutputs::len`] values: [`Gpu::host_outputs_ahead`]'s).
    pub(crate) fn download_to(
        &self,
        gpu: &Gpu,
        mut host: Vec<Vec<R>>,
    ) -> Result<Outputs<R>, Error> {
        if host.len() != self.slots.len() || host.iter().any(|h| h.len() != self.n) {
            let bad = host.iter().find(|h| h.len() != self.n);
            return Err(match bad {
                Some(h) => Error::LengthMismatch {
                    what: "a host array for the outputs".into(),
                    got: h.len(),
                    expected: self.n,
                },
                None => Error::LengthMismatch {
                    what: "the host arrays for the outputs' slots".into(),
                    got: host.len(),
                    expected: self.slots.len(),
                },
            });
        }
        for (d, h) in self.slots.iter().zip(host.iter_mut()) {
            gpu.download_into(d, h)?;
        }
        Ok(Outputs::new(self.kernel, &self.layout, host))
    }

    /// Copies the outputs to the host.
    pub fn download(&self, gpu: &Gpu) -> Result<Outputs<R>, Error> {
        let slots = if self.n == 0 {
            vec![Vec::new(); self.slots.len()]
        } else {
            gpu.download_many(&self.slots.iter().collect::<Vec<_>>(), self.n)?
        };
        Ok(Outputs::new(self.kernel, &self.layout, slots))
    }
}
