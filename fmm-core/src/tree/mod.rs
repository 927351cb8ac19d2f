//! Octree and the Barnes-Hut treecode (nakasato2009; hu2011 for the tree
//! construction): Morton keys and the bounding cube ([`morton`]), the
//! adaptive octree with `next`/`more` links ([`octree`]), and the treecode
//! that runs any kernel with a declared strength ([`treecode`]).

pub mod device_build;
pub mod gpu;
pub mod morton;
pub mod octree;
pub mod treecode;

pub use gpu::treecode_cuda;
pub use octree::{Cell, Octree};
pub use treecode::{treecode_cpu, TreeOptions, TreeStats, DEFAULT_GROUP};
