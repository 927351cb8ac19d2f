//! The Laplace far field: solid harmonic expansions of the terms a kernel
//! declares (`far_field laplace { .. }`), a floor under the FMM (its
//! expansions and translations) and a periodic box's images for every tree
//! method.
//!
//! - [`harmonics`]: the regular and singular solid harmonics and their
//!   normalisation;
//! - [`operators`]: P2M, M2M, M2L, L2L, L2P on one scalar expansion, in f64;
//! - [`images`]: a periodic box's far images by the tree extended outwards,
//!   and the linear terms its boundary adds;
//! - [`background`]: what a neutralising background adds to them;
//! - [`far_images`]: those images at the targets of the methods that have
//!   no expansion at the box's root (the treecode, the node far fields).

pub(crate) mod background;
pub(crate) mod far_images;
pub mod harmonics;
pub(crate) mod images;
pub mod operators;
