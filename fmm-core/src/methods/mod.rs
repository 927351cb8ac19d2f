//! The methods, side by side: each in its own folder with its CPU and CUDA
//! parts, over the shared floors (the problem and its checks, the outputs,
//! the tree, the CUDA device helpers). A method never imports a sibling;
//! what two methods share moves down a floor. The front door
//! ([`crate::evaluate`]) is the only place that matches on (method,
//! backend).

pub mod direct;
pub mod fmm;
pub mod treecode;

use crate::error::Error;
use crate::kernel::Kernel;

pub use direct::DirectOptions;
pub use fmm::{Accuracy, FmmOptions};
pub use treecode::TreeOptions;

/// How to evaluate the sums.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    /// Every source to every target: exact, O(N M).
    Direct(DirectOptions),
    /// Barnes-Hut: cells far enough away act as one pseudo-source.
    Treecode(TreeOptions),
    /// The fast multipole method: expansions of order p, or chosen for a
    /// tolerance.
    Fmm(FmmOptions),
    /// Whichever method meets this relative L2 error sooner: the direct
    /// sum or the FMM with settings chosen for it, by predicted and
    /// measured cost (`crate::accuracy`'s `choose`); the error is measured
    /// on sampled targets either way.
    Tolerance(f64),
}

impl Default for Method {
    fn default() -> Self {
        Method::Direct(DirectOptions::default())
    }
}

impl Method {
    /// The direct sum with default options.
    pub fn direct() -> Self {
        Method::Direct(DirectOptions::default())
    }

    /// The treecode with opening angle `theta` (other options default).
    pub fn treecode(theta: f64) -> Self {
        Method::Treecode(TreeOptions {
            theta,
            ..TreeOptions::default()
        })
    }

    /// The FMM at order `p` and MAC `theta` (other options default).
    pub fn fmm(p: usize, theta: f64) -> Self {
        Method::Fmm(FmmOptions::fixed(p, theta))
    }

    /// The FMM with its settings chosen for the relative L2 error `tol`,
    /// measured on sampled targets.
    pub fn fmm_tolerance(tol: f64) -> Self {
        Method::Fmm(FmmOptions::tolerance(tol))
    }

    /// Whichever method meets the relative L2 error `tol` sooner (the
    /// direct sum or the FMM), the error measured on sampled targets.
    pub fn tolerance(tol: f64) -> Self {
        Method::Tolerance(tol)
    }

    /// A short name for logs and tables.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Direct(_) => "direct",
            Method::Treecode(_) => "treecode",
            Method::Fmm(_) => "fmm",
            Method::Tolerance(_) => "tolerance",
        }
    }

    /// Checks the options, and that kernel `K` declares what the method
    /// needs (a strength, and the form its far field takes: see
    /// [`crate::far`]), before any work is done.
    pub(crate) fn check<K: Kernel>(&self) -> Result<(), Error> {
        match self {
            Method::Direct(_) => Ok(()),
            Method::Tolerance(tol) => fmm::FmmOptions::tolerance(*tol).check(),
            Method::Treecode(o) => {
                o.check()?;
                crate::far::plan::<K>(o.far_field, crate::far::Tree::Treecode).map(|_| ())
            }
            Method::Fmm(o) => {
                o.check()?;
                crate::far::plan::<K>(o.far_field, crate::far::Tree::Fmm)?;
                if let fmm::Accuracy::Fixed { p, .. } = o.accuracy {
                    o.far_field.resolve::<K>(false).check_order(p)?;
                }
                Ok(())
            }
        }
    }
}
