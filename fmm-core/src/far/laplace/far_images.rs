//! A periodic box's far images evaluated at the targets, for the methods
//! without an expansion at the box's root to carry them (the treecode, the
//! FMM with node far fields): the sources' multipole about the box's
//! centre, the images' local expansion ([`super::images::periodic_local`])
//! and the background's quadratic ([`super::background`]), made outputs by
//! the kernel's Laplace terms. The kernel must declare a Laplace far field.

use rayon::prelude::*;

use super::background;
use super::harmonics::{ncoef, C};
use super::images;
use super::operators::{l2p, l2p_hessian, p2m, Scratch};
use crate::domain::{Moments, PeriodicBox};
use crate::error::Error;
use crate::far::terms::{far_outputs, FarValues};
use crate::far::{self, FarField};
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;
use crate::tree::positions_f64;
use fmm_codegen::kernel::{FarTerm, Term};

/// A periodic box's images past the nearest (past [`crate::domain::NEAR`]
/// boxes) as one local expansion per strength component about the box's
/// centre (the unit box), with the boundary's linear terms and a
/// background's part, and the Laplace terms that make them outputs: the
/// same expansions as the Laplace FMM's ([`super::images`]).
pub(crate) struct FarImages {
    local: Vec<Vec<C>>,
    /// The cell's net strengths (what a neutralising background balances).
    total: Vec<f64>,
    terms: Vec<FarTerm>,
    hessians: bool,
}

/// The strengths and terms of kernel `K`'s Laplace far field, which a
/// box's far images are made of; an error naming `method` where the
/// kernel declares none.
pub(crate) fn image_terms<K: Kernel>(
    b: &PeriodicBox,
    method: &str,
) -> Result<(Vec<usize>, Vec<FarTerm>), Error> {
    match far::plan::<K>(FarField::Laplace, far::Tree::Fmm) {
        Ok(far::Plan::Laplace { strength, terms }) => Ok((strength, terms)),
        _ => Err(Error::DomainUnsupported {
            method: format!("{method} with kernel {}", K::name()),
            domain: b.name(),
            instead: "the images past the nearest come by Laplace expansions: declare the \
                      kernel's Laplace far field"
                .into(),
        }),
    }
}

/// The image levels of the far images at the targets: their sum's
/// remainder below 1e-6 of the images' part (itself a percent or less).
pub(crate) fn image_levels(b: &PeriodicBox) -> u32 {
    b.levels_for(1e-6)
}

impl FarImages {
    /// The far images of `sources` in `b` at order `order`; `method` names
    /// what asks (an error says it needs the kernel's Laplace far field).
    pub(crate) fn new<K: Kernel, R: Real>(
        b: &PeriodicBox,
        sources: &Particles<R>,
        order: usize,
        method: &str,
    ) -> Result<Self, Error> {
        let (strength, terms) = image_terms::<K>(b, method)?;
        let mut unit = positions_f64(sources);
        b.wrap(&mut unit)?;
        b.to_unit(&mut unit);
        let q: Vec<Vec<f64>> = strength
            .iter()
            .map(|&k| sources.slots()[k].iter().map(|x| x.to_f64()).collect())
            .collect();
        let qr: Vec<&[f64]> = q.iter().map(|v| &v[..]).collect();
        let moments = Moments::of(&unit, &qr, [0.0; 3]);
        background::check(b, &K::def().name, &terms, strength.len())?;
        moments.check(b)?;
        let levels = image_levels(b);
        let n = unit[0].len();
        let local = qr
            .iter()
            .enumerate()
            .map(|(k, qk)| {
                // P2M about the box's centre, in parallel chunks.
                let mult = (0..n.div_ceil(4096))
                    .into_par_iter()
                    .map(|c| {
                        let r = c * 4096..((c + 1) * 4096).min(n);
                        let x: Vec<[f64; 3]> = r
                            .clone()
                            .map(|j| [unit[0][j], unit[1][j], unit[2][j]])
                            .collect();
                        let mut m = vec![C::ZERO; ncoef(order)];
                        p2m([0.0; 3], &x, &qk[r], &mut Scratch::new(order), &mut m);
                        m
                    })
                    .reduce(
                        || vec![C::ZERO; ncoef(order)],
                        |mut a, b| {
                            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                            a
                        },
                    );
                images::periodic_local(&mult, order, b, &moments, k, levels)
            })
            .collect();
        let hessians = terms.iter().any(|t| matches!(t.term, Term::Stretching(_)));
        Ok(FarImages {
            local,
            total: moments.total.clone(),
            terms,
            hessians,
        })
    }

    /// Adds the far images' outputs at a target of the box `b` (at `x`,
    /// target slots `t`) to `out`.
    pub(crate) fn add<R: Real>(
        &self,
        def: &fmm_codegen::KernelDef,
        b: &PeriodicBox,
        x: [f64; 3],
        t: &[R],
        out: &mut [R],
        s: &mut Scratch,
    ) {
        let c = b.center();
        let u = [0, 1, 2].map(|a| (x[a] - c[a]) / b.side);
        let (l1, l2, l3) = (b.side, b.side * b.side, b.side * b.side * b.side);
        let mut v = FarValues::default();
        for (k, local) in self.local.iter().enumerate() {
            let (phi, grad) = l2p(local, u, s);
            v.phi[k] = phi / l1;
            v.grad[k] = grad.map(|g| g / l2);
            if self.hessians {
                v.hess[k] = l2p_hessian(local, u, s).map(|r| r.map(|h| h / l3));
            }
        }
        background::add_quadratic(b, &self.total, u, &mut v);
        let mut far = vec![0.0; out.len()];
        far_outputs(
            def,
            &self.terms,
            self.local.len(),
            &v,
            |slot| t[slot].to_f64(),
            &mut far,
        );
        for (o, f) in out.iter_mut().zip(far) {
            *o += R::c(f);
        }
    }
}
