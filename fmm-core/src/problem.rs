//! The problem besides the particles, and the checks every evaluation
//! starts with: the kernel's parameter values, the domain, particles made
//! for the kernel in the right roles, the declaration's `require`
//! conditions, and which source slots are the additive strength.

pub use crate::domain::Domain;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::check_finite;
use crate::real::Real;
use crate::tree::Bounds;

/// Checks the parameter values against kernel `K` and converts them.
pub fn check_params<K: Kernel, R: Real>(params: &[f64]) -> Result<Vec<R>, Error> {
    let def = K::def();
    if params.len() != def.n_params() {
        return Err(Error::Params {
            kernel: def.name.clone(),
            expected: def.n_params(),
            names: def
                .params
                .iter()
                .flat_map(|f| f.slot_names())
                .collect::<Vec<_>>()
                .join(", "),
            got: params.len(),
        });
    }
    check_finite::<f64>("parameter", params.iter())?;
    Ok(params.iter().map(|&p| R::c(p)).collect())
}

/// Which source slots are the additive strength (`strength FIELD;` of the
/// declaration); `method` names who asks, for the error.
pub(crate) fn strength_slots<K: Kernel>(method: &'static str) -> Result<Vec<usize>, Error> {
    let def = K::def();
    match def.strength_slots() {
        Some(slots) => Ok(slots.collect()),
        None => Err(Error::NoStrength {
            kernel: def.name.clone(),
            method,
        }),
    }
}

/// The problem besides the particles: the kernel's parameter values (in
/// declaration order, a vec3 taking three), the domain, and where given
/// the root cube of the FMM's trees.
///
/// The front door takes `impl Into<Problem>`, so parameters alone (`&[0.01]`,
/// `&params`) mean free space.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Problem<'a> {
    pub params: &'a [f64],
    pub domain: Domain,
    /// The root cube of the FMM's trees outside a periodic box (`None`:
    /// the cube around the points). A distributed evaluation gives every
    /// process the cube around all of them, so that the cells of its trees
    /// lie on the lattice of the cells the others send it (in cubes of
    /// their own, the received nodes sat off its lattice and grew its root
    /// cube by a quarter: the M2L 1.9 times one process's on 4 H200s). A
    /// cube that does not hold every point is grown until it does.
    pub cube: Option<Bounds>,
}

impl<'a> Problem<'a> {
    /// The parameters `params` in free space.
    pub fn new(params: &'a [f64]) -> Self {
        Problem {
            params,
            domain: Domain::FreeSpace,
            cube: None,
        }
    }

    /// The same parameters in `domain`.
    pub fn in_domain(self, domain: Domain) -> Self {
        Problem { domain, ..self }
    }

    /// The same problem with its trees in the root cube `cube` (see
    /// [`Problem::cube`]).
    pub fn in_cube(self, cube: Bounds) -> Self {
        Problem {
            cube: Some(cube),
            ..self
        }
    }
}

impl<'a> From<&'a [f64]> for Problem<'a> {
    fn from(params: &'a [f64]) -> Self {
        Problem::new(params)
    }
}

impl<'a, const N: usize> From<&'a [f64; N]> for Problem<'a> {
    fn from(params: &'a [f64; N]) -> Self {
        Problem::new(params)
    }
}

impl<'a> From<&'a Vec<f64>> for Problem<'a> {
    fn from(params: &'a Vec<f64>) -> Self {
        Problem::new(params)
    }
}
