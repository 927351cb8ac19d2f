//! The octree, a floor every tree method stands on (nakasato2009; hu2011
//! for the construction on the GPU): Morton keys and the bounding cube
//! ([`morton`]), the adaptive octree with `next`/`more` links on the CPU
//! ([`octree`]) and cell for cell the same tree built on the GPU
//! ([`device`]), particles in tree order ([`soa`] on the CPU,
//! [`device::TreeOrdered`] on the GPU), and the dual tree traversal's
//! interaction lists ([`traversal`]: the FMM's, and what the compressed
//! M2L of the node far fields counts).

pub mod device;
pub mod morton;
pub mod octree;
pub mod soa;
pub mod traversal;

pub use device::{DeviceGroups, DeviceOctree, TreeOrdered};
pub use morton::{Bounds, Span};
pub use octree::{Cell, Octree};
pub(crate) use soa::{positions_f64, sorted, to_unit_box, to_unit_cube, SoA};
