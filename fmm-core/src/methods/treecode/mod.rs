//! The Barnes-Hut treecode (nakasato2009; hu2011 for the tree
//! construction), for every kernel that declares its strength: the far
//! field of a cell is the kernel itself applied to a pseudo-source at the
//! cell's centre of strength carrying its summed strength ([`pseudo`]).
//! On the CPU ([`cpu`]) and entirely on the GPU ([`cuda`]); the two walk
//! the same trees with the same criterion.

pub mod cpu;
pub mod cuda;

use crate::error::Error;
use crate::far::FarField;

/// The order of the treecode's far images: their nearest boxes are three
/// boxes out, where order 14 leaves about 1e-3 of their part (itself a
/// percent or less of the sum).
pub(crate) const IMAGE_ORDER: usize = 14;

/// Targets per group when the options leave it at 0: one block of the GPU
/// walk, and on the CPU the fastest of 16 to 128 (1e6 Plummer, 2 cores).
pub const DEFAULT_GROUP: usize = 128;

/// Settings of the treecode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TreeOptions {
    /// Opening angle: smaller is more accurate; 0 opens every cell (a
    /// direct sum through the tree).
    pub theta: f64,
    /// Most particles in a source leaf.
    pub ncrit: usize,
    /// Most targets in a group that walks the tree together (0:
    /// [`DEFAULT_GROUP`]). Smaller groups accept cells sooner, larger ones
    /// share the walk.
    pub group: usize,
    /// Cells of stack per block the GPU walk starts with (0: 8192). A walk
    /// that needs more (small theta on a deep tree) runs again with four
    /// times as many; tests set it small to make that happen.
    pub walk_stack: usize,
    /// How an accepted cell's sources are represented ([`FarField`]):
    /// `Monopole` is the classic one (the summed strength at the
    /// centre of strength); the node far fields put `order`'s nodes on
    /// every cell (beyond a monopole, for kernels outside the Laplace
    /// family). From the declaration by default.
    pub far_field: FarField,
    /// The node far fields' order (pseudo-particles: yokota2009 Table 1;
    /// Chebyshev: `order + 1` nodes a side). The monopole ignores it.
    pub order: usize,
}

impl TreeOptions {
    /// The group size these options ask for.
    pub fn group_size(&self) -> usize {
        if self.group == 0 {
            DEFAULT_GROUP
        } else {
            self.group
        }
    }
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            theta: 0.5,
            ncrit: 32,
            group: 0,
            walk_stack: 0,
            far_field: FarField::Auto,
            order: 4,
        }
    }
}

impl TreeOptions {
    /// Checks the options: a finite opening angle of at least 0, at least
    /// one particle a leaf.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if !(self.theta >= 0.0 && self.theta.is_finite()) {
            return Err(Error::BadOption(format!(
                "theta must be a finite number >= 0, not {}",
                self.theta
            )));
        }
        if self.ncrit == 0 {
            return Err(Error::BadOption("ncrit must be at least 1".into()));
        }
        Ok(())
    }
}
