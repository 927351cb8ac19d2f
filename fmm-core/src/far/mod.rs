//! How a cell's distant sources are represented: a floor under the tree
//! methods (the treecode and the FMM take the same far fields).
//!
//! - [`FarField::Laplace`]: solid harmonic expansions of the Laplace terms
//!   a kernel declares (`far_field laplace { .. }`); the FMM's own
//!   operators. Exact math, only for the Laplace family, and the smoothing
//!   (Plummer, Gaussian core) is dropped.
//! - [`FarField::Ppm`]: the pseudo-particle method (yokota2009 section 3.3,
//!   Makino 1999): strengths at the points of a spherical t-design around
//!   each cell ([`pseudo`]). Any kernel whose field is harmonic away from
//!   its sources (the Laplace family) works with no expansion math; M2L is
//!   the kernel itself between pseudo-particles.
//! - [`FarField::KernelIndependent`]: Chebyshev interpolation (the
//!   black-box FMM of Fong and Darve 2009, [`chebyshev`]): strengths at the
//!   tensor Chebyshev nodes of each cell. Needs only that the kernel be
//!   smooth away from its sources: softened gravity, Gaussian cores,
//!   Stokeslets, Yukawa.
//!
//! The two node far fields share everything but their weights
//! ([`Basis`]); [`nodes`] holds the operators both run (P2M, M2M, M2L by
//! the kernel, L2L, L2P) and [`Representation`] what they need to know
//! of a kernel (its strength and target slots, its outputs' form); [`cuda`]
//! the same operators on the GPU.

pub mod chebyshev;
pub(crate) mod compressed;
pub mod cuda;
pub mod laplace;
pub(crate) mod linalg;
pub mod monopole;
pub mod nodes;
pub mod pseudo;
pub mod tensor;
pub(crate) mod terms;

use crate::error::Error;
use crate::kernel::Kernel;
use fmm_codegen::kernel::FarTerm;
use fmm_codegen::FarField as Declared;

pub use chebyshev::Chebyshev;
pub use compressed::{clear_operator_cache, CACHE_BYTES, MIN_RANK_TOLERANCE};
pub use pseudo::PseudoParticles;

/// The highest order of the Laplace far field's solid harmonic
/// expansions (the FMM's operators take up to it).
pub const LAPLACE_MAX_ORDER: usize = 30;

/// Which far field a tree method runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FarField {
    /// From the declaration: where the kernel declares a Laplace far field,
    /// Laplace expansions (the FMM) or the monopole (the treecode); else the
    /// kernel-independent one. And from the tolerance: the FMM driven by
    /// one whose Laplace expansions stop short of it (a smoothing they
    /// drop, or their highest order) runs the kernel-independent far field
    /// instead, and remembers that for the same problem
    /// (`methods::fmm::tolerance`).
    #[default]
    Auto,
    /// The treecode's classic far field: a cell's summed strength at its
    /// centre of strength, through the kernel itself. Any kernel with a
    /// strength; first order (exact to the dipole for one-signed strengths
    /// of the Laplace family).
    Monopole,
    /// Solid harmonic expansions (the kernel declares
    /// `far_field laplace { .. }`).
    Laplace,
    /// Pseudo-particles on spherical t-designs (the Laplace family).
    Ppm,
    /// Chebyshev interpolation (any kernel smooth away from its sources).
    KernelIndependent,
}

impl FarField {
    /// The name the benchmarks' `--far-field` takes.
    pub fn name(self) -> &'static str {
        match self {
            FarField::Auto => "auto",
            FarField::Monopole => "monopole",
            FarField::Laplace => "laplace",
            FarField::Ppm => "ppm",
            FarField::KernelIndependent => "ki",
        }
    }

    /// The far field `Auto` stands for with kernel `K` in the FMM
    /// (`treecode`: false) or the treecode.
    pub fn resolve<K: Kernel>(self, treecode: bool) -> FarField {
        match (self, &K::def().far_field, treecode) {
            (FarField::Auto, Declared::Laplace { .. }, false) => FarField::Laplace,
            (FarField::Auto, Declared::Laplace { .. }, true) => FarField::Monopole,
            (FarField::Auto, _, _) => FarField::KernelIndependent,
            (f, _, _) => f,
        }
    }

    /// The names the benchmarks' `--far-field` takes, with their far fields.
    pub const NAMES: [(&'static str, FarField); 5] = [
        ("auto", FarField::Auto),
        ("monopole", FarField::Monopole),
        ("laplace", FarField::Laplace),
        ("ppm", FarField::Ppm),
        ("ki", FarField::KernelIndependent),
    ];

    /// The largest order this far field takes.
    pub fn max_order(self) -> usize {
        match self {
            FarField::Ppm => pseudo::MAX_ORDER,
            FarField::KernelIndependent => chebyshev::MAX_ORDER,
            FarField::Auto | FarField::Laplace | FarField::Monopole => LAPLACE_MAX_ORDER,
        }
    }

    /// Checks that an order is one this far field has.
    pub(crate) fn check_order(self, p: usize) -> Result<(), Error> {
        let most = self.max_order();
        if p == 0 || p > most {
            let why = match self {
                FarField::Ppm => format!(
                    "the largest spherical t-design shipped has {} points (t = {}), order {most}",
                    pseudo::points_for(most),
                    2 * most
                ),
                FarField::KernelIndependent => {
                    format!(
                        "{} Chebyshev nodes a cell at order {most}",
                        (most + 1).pow(3)
                    )
                }
                _ => format!("the expansions go to order {most}"),
            };
            return Err(Error::BadOption(format!(
                "the {} far field takes orders 1 to {most}, not {p}: {why}",
                self.name()
            )));
        }
        Ok(())
    }
}

/// The tree method a far field is planned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tree {
    Treecode,
    Fmm,
}

impl Tree {
    /// The name errors give.
    fn name(self) -> &'static str {
        match self {
            Tree::Treecode => "the treecode",
            Tree::Fmm => "the FMM",
        }
    }
}

/// What a tree method's far field needs of kernel `K`, checked once.
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    /// The treecode's monopole, over the strength's slots.
    Monopole { strength: Vec<usize> },
    /// The declared Laplace terms, over the strength's slots.
    Laplace {
        strength: Vec<usize>,
        terms: Vec<FarTerm>,
    },
    /// Strengths at nodes ([`FarField::Ppm`] or
    /// [`FarField::KernelIndependent`]).
    Nodes(Representation),
}

impl Plan {
    /// The far field planned.
    pub(crate) fn far_field(&self) -> FarField {
        match self {
            Plan::Monopole { .. } => FarField::Monopole,
            Plan::Laplace { .. } => FarField::Laplace,
            Plan::Nodes(rep) => rep.far_field,
        }
    }
}

/// What the node far fields need to know of a kernel: where its strength
/// sits among the source slots, and how its outputs depend on the
/// target's own fields (affinely, so that a cell's local values can be
/// kept per target field: see [`nodes`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Representation {
    pub(crate) far_field: FarField,
    /// Source slots carrying the strength (summed onto nodes); the other
    /// source slots (a core radius) take the cell's strength-weighted mean.
    pub(crate) strength: Vec<usize>,
    /// Target slots the outputs depend on (each one a channel of the
    /// local values beside the part that depends on none).
    pub(crate) target_slots: usize,
}

impl Representation {
    /// Local values kept per node: every output, once for the part that
    /// depends on no target field and once per target slot.
    pub(crate) fn channels(&self, n_outputs: usize) -> usize {
        n_outputs * (1 + self.target_slots)
    }
}

/// Checks that kernel `K` can use the far field `choice` (resolved from
/// `Auto`), for the tree method `tree`.
pub(crate) fn plan<K: Kernel>(choice: FarField, tree: Tree) -> Result<Plan, Error> {
    let def = K::def();
    let method = tree.name();
    let treecode = tree == Tree::Treecode;
    let far_field = choice.resolve::<K>(treecode);
    let strength = crate::problem::strength_slots::<K>(method)?;
    let unusable = |why: String| Error::FarFieldUnusable {
        kernel: def.name.clone(),
        far_field: far_field.name(),
        why,
    };
    // A far field sums what a cutoff drops.
    if let Some(c) = &def.cutoff {
        return Err(unusable(format!(
            "the kernel declares `cutoff {};`: pairs farther apart do not interact, and a far \
             field would sum them; a short-range kernel runs by the direct sum \
             (`Method::direct()`; in a periodic box, the minimum image)",
            c.text
        )));
    }
    match (far_field, &def.far_field) {
        (FarField::Monopole, _) if treecode => Ok(Plan::Monopole { strength }),
        (FarField::Monopole, _) => Err(unusable(
            "the monopole is the treecode's far field; the FMM's are `laplace`, `ppm` and `ki`"
                .into(),
        )),
        (FarField::Laplace, _) if treecode => Err(unusable(
            "the treecode's far fields are `monopole`, `ppm` and `ki`".into(),
        )),
        (FarField::Laplace, Declared::Laplace { terms }) => Ok(Plan::Laplace {
            strength,
            terms: terms.clone(),
        }),
        (FarField::Laplace, _) => Err(unusable(
            "it declares no `far_field laplace { .. }` (it is not a derivative of 1/r); use the \
             kernel-independent far field (`FarField::KernelIndependent`, `--far-field ki`)"
                .into(),
        )),
        (FarField::Ppm, Declared::Laplace { .. }) | (FarField::KernelIndependent, _) => {
            nodes::check_affine_in_targets::<K>().map_err(unusable)?;
            Ok(Plan::Nodes(Representation {
                far_field,
                strength,
                target_slots: def.n_targets(),
            }))
        }
        (FarField::Ppm, _) => Err(unusable(
            "pseudo-particles on a sphere reproduce a field that is harmonic outside the sphere \
             (the Laplace family, declared by `far_field laplace { .. }`), which this kernel's \
             is not; use the kernel-independent far field (`FarField::KernelIndependent`, \
             `--far-field ki`)"
                .into(),
        )),
        (FarField::Auto, _) => unreachable!("resolved above"),
    }
}
