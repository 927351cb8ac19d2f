//! The vortex particle method (yokota2009 section 2, yokota2012 section 2,
//! hu2011) on the kernel compiler's front door: a set of vortex particles
//! (positions, strength vectors `alpha`, Gaussian core radii `sigma`,
//! volumes), their velocity and vortex stretching by one evaluation of the
//! fused `VelocityStretching` kernel at a method the caller picks (a
//! tolerance by default, on any backend), time integration (second-order
//! Adams-Bashforth, the papers' choice; Runge-Kutta 2, a low-storage RK3,
//! RK4), viscous diffusion by core spreading, a ground plane by mirror
//! images (`ground_plane`), made no-slip by the vorticity flux
//! (`no_slip`), the invariants an inviscid run keeps (total circulation,
//! linear and angular impulse), checkpoints a run resumes
//! from bit for bit, the thin vortex ring: its particles and the
//! classical speed it moves at, a hovering rotor's trailed wake with dust
//! picked up from the ground, the velocity on a grid with its energy
//! spectrum, a pseudo-spectral Navier-Stokes solver to check the
//! periodic cases against, and an axisymmetric one with a no-slip wall to
//! check the ring against the ground.
//!
//! A crate of its own rather than a module of `fmm-core`: an application
//! above the front door (`shared/STYLE.md`), which the core never imports,
//! with its own errors and, as it grows, its own dependencies (output
//! files, checkpoints) that the core's users need not build.

pub mod axisymmetric;
pub mod checkpoint;
pub mod device_dust;
pub mod diagnostics;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod error;
pub mod grid;
pub mod integrals;
pub mod integrate;
pub mod no_slip;
pub mod output;
pub mod particles;
pub mod passive;
pub mod rates;
pub mod reinit;
pub mod remesh;
mod remesh_gpu;
pub mod remesh_parts;
pub mod resident;
pub mod ring;
pub mod rotor;
#[cfg(feature = "mpi")]
pub mod slab_fft;
pub mod solenoidal;
pub mod spectral;
pub mod viscous;
pub mod vtk;

pub use axisymmetric::{AxisymmetricNs, MeridionalNode};
pub use checkpoint::{Checkpoint, WakeCheckpoint};
pub use device_dust::DeviceDust;
pub use diagnostics::Invariants;
pub use error::VortexError;
pub use integrals::FieldIntegrals;
pub use integrate::{Scheme, Stepper};
pub use no_slip::{FluxReport, NoSlipWall};
pub use particles::VortexParticles;
pub use passive::{Motion, Passive, Pickup};
pub use rates::{
    ground_plane, Precision, Rates, Solver, StretchingScheme, Velocities,
    VelocityStretchingTranspose,
};
pub use resident::{DeviceVortex, StepReport};
pub use ring::{
    filament_velocity, impulse_centre, impulse_centre_speed, line_ring_over_ground,
    line_ring_speed, ring_radius, thin_ring_speed, Ring,
};
pub use rotor::{Dust, Rotor, Trailer, Wake, WakeStep};
pub use viscous::spread_cores;
pub use vtk::write_vtp;
