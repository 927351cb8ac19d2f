//! The octree, a floor every tree method stands on (nakasato2009; hu2011
//! for the construction on the GPU): Morton keys and the bounding cube
//! ([`morton`]), the adaptive octree with `next`/`more` links on the CPU
//! ([`octree`]) and cell for cell the same tree built on the GPU
//! ([`device`]), and particles in tree order ([`soa`] on the CPU,
//! [`device::TreeOrdered`] on the GPU).

pub mod device;
pub mod morton;
pub mod octree;
pub mod soa;

pub use device::{DeviceGroups, DeviceOctree, TreeOrdered};
pub use octree::{Cell, Octree};
pub(crate) use soa::{positions_f64, sorted, to_unit_box, SoA};
