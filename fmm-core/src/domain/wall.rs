//! A plane wall by mirror images: the half-space `x[axis] >= at`, its
//! boundary condition made by adding, for every source, its reflection in
//! the plane (hu2011's ground plane; the method of images).
//!
//! What an image carries decides the boundary condition, and it is the
//! physics', not the kernel's: a Laplace charge with an image of the same
//! sign gives no normal field at the wall (an insulating wall), with the
//! opposite sign zero potential (a grounded conductor); a vortex strength
//! reflected as an axial vector gives no flow through the wall. So the
//! wall names its *odd* source fields and the rest are even:
//! - even: a scalar is copied, a vector reflected (its normal component
//!   negated): a polar vector's image;
//! - odd: a scalar negated, a vector reflected and negated (its tangential
//!   components negated): an axial vector's image, such as vorticity.
//!
//! The front door evaluates the sources and their images in free space at
//! the targets; every method and backend runs it, at twice the sources.
//! Every particle must lie on the wall's side: a point below it is an
//! error naming it, as a particle outside an open axis of a periodic box.

use crate::error::Error;
use crate::kernel::Kernel;
use crate::particles::Particles;
use crate::real::Real;
use fmm_codegen::ast::Shape;
use fmm_codegen::Field;
use rayon::prelude::*;

/// A plane wall at `x[axis] = at`, the particles at `x[axis] >= at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wall {
    /// The axis normal to the wall: 0, 1 or 2.
    pub axis: usize,
    /// The wall's coordinate along `axis`.
    pub at: f64,
    /// The source fields whose images are odd (the module's doc says
    /// what that means for a scalar and for a vector); the others are
    /// even.
    pub odd: &'static [&'static str],
}

const AXES: [&str; 3] = ["x", "y", "z"];

impl Wall {
    /// The wall `x[axis] = at`, every source field's image even.
    pub fn new(axis: usize, at: f64) -> Self {
        Wall { axis, at, odd: &[] }
    }

    /// The same wall with the source fields `odd` odd.
    pub fn with_odd(self, odd: &'static [&'static str]) -> Self {
        Wall { odd, ..self }
    }

    /// A short name for errors and logs: `wall z = 0`.
    pub fn name(&self) -> String {
        format!("wall {} = {}", AXES.get(self.axis).unwrap_or(&"?"), self.at)
    }

    /// Checks the wall's own values: an axis of three, a finite place.
    pub fn check(&self) -> Result<(), Error> {
        if self.axis > 2 {
            return Err(Error::BadDomain(format!(
                "a wall's axis is 0, 1 or 2 (x, y, z), not {}",
                self.axis
            )));
        }
        if !self.at.is_finite() {
            return Err(Error::BadDomain(format!(
                "the wall's place along {} is not finite ({})",
                AXES[self.axis], self.at
            )));
        }
        Ok(())
    }

    /// Checks that every field named odd is a source field of `K`.
    pub fn check_kernel<K: Kernel>(&self) -> Result<(), Error> {
        let def = K::def();
        for name in self.odd {
            if !def.sources.iter().any(|f| f.name == *name) {
                let have: Vec<&str> = def.sources.iter().map(|f| f.name.as_str()).collect();
                return Err(Error::BadDomain(format!(
                    "the {} names `{name}` odd, but kernel {} has no source field `{name}` (its \
                     source fields: {})",
                    self.name(),
                    def.name,
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                )));
            }
        }
        Ok(())
    }

    /// The error of point `i` of a `what` set lying at `x` below the wall.
    pub fn below(&self, what: &str, i: usize, x: f64) -> Error {
        let a = AXES[self.axis];
        Error::BadDomain(format!(
            "{what} {i} lies below the {} ({a} = {x}); the particles live at {a} >= {}",
            self.name(),
            self.at
        ))
    }

    /// Checks that the coordinates `x` along the wall's axis (of a `what`
    /// set) lie on the wall's side.
    pub fn check_side<R: Real>(&self, what: &str, x: &[R]) -> Result<(), Error> {
        let at = self.at;
        let below = |v: &R| {
            let v = v.to_f64();
            v < at || v.is_nan()
        };
        match x.par_iter().position_first(below) {
            Some(i) => Err(self.below(what, i, x[i].to_f64())),
            None => Ok(()),
        }
    }

    /// The factor each scalar slot of `layout` is multiplied by in an
    /// image (the position's normal component aside: it is reflected).
    pub fn slot_signs(&self, layout: &[Field]) -> Vec<f64> {
        let mut signs = Vec::new();
        for f in layout {
            let odd = if self.odd.contains(&f.name.as_str()) {
                -1.0
            } else {
                1.0
            };
            match f.shape {
                Shape::Scalar => signs.push(odd),
                Shape::Vec3 => {
                    for c in 0..3 {
                        signs.push(if c == self.axis { -odd } else { odd })
                    }
                }
            }
        }
        signs
    }

    /// The reflection of a coordinate along the wall's axis.
    pub fn reflect(&self, x: f64) -> f64 {
        2.0 * self.at - x
    }

    /// The sources `s` followed by their images: `2n` sources in free
    /// space whose sum at a point on the wall's side is the wall's.
    pub fn with_images<R: Real>(&self, s: &Particles<R>) -> Particles<R> {
        let signs = self.slot_signs(&s.layout);
        let twice = |v: &[R], f: &dyn Fn(R) -> R| -> Vec<R> {
            let mut out = Vec::with_capacity(2 * v.len());
            out.extend_from_slice(v);
            out.extend(v.iter().map(|&x| f(x)));
            out
        };
        let at = R::c(2.0 * self.at);
        let pos = [0, 1, 2].map(|a| {
            if a == self.axis {
                twice(&s.pos[a], &|x| at - x)
            } else {
                twice(&s.pos[a], &|x| x)
            }
        });
        let slots = s
            .slots
            .iter()
            .zip(&signs)
            .map(|(v, &c)| {
                let c = R::c(c);
                twice(v, &|x| c * x)
            })
            .collect();
        Particles {
            kernel: s.kernel,
            role: s.role,
            layout: s.layout.clone(),
            pos,
            slots,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{Coulomb, VelocityStretching};

    #[test]
    fn images_reflect_positions_and_carry_each_fields_parity() {
        let w = Wall::new(2, 1.0).with_odd(&["alpha"]);
        let def = VelocityStretching::def();
        // alpha (axial): tangential negated, normal kept; sigma even.
        assert_eq!(w.slot_signs(&def.sources), vec![-1.0, -1.0, 1.0, 1.0]);
        let even = Wall::new(0, 0.0);
        assert_eq!(even.slot_signs(&def.sources), vec![-1.0, 1.0, 1.0, 1.0]);
        let mut s = Particles::<f64>::sources::<VelocityStretching>(&[[0.5, 0.25, 3.0]]).unwrap();
        s.set_vec3("alpha", &[[1.0, 2.0, 3.0]])
            .unwrap()
            .set("sigma", &[0.1])
            .unwrap();
        let m = w.with_images(&s);
        assert_eq!(m.len(), 2);
        let p = m.positions();
        assert_eq!([p[0][1], p[1][1], p[2][1]], [0.5, 0.25, -1.0]);
        let a = m.slots();
        assert_eq!([a[0][1], a[1][1], a[2][1], a[3][1]], [-1.0, -2.0, 3.0, 0.1]);
    }

    #[test]
    fn bad_walls_and_points_below_are_named() {
        assert!(Wall::new(3, 0.0)
            .check()
            .unwrap_err()
            .to_string()
            .contains("axis"));
        assert!(Wall::new(1, f64::NAN).check().is_err());
        let e = Wall::new(2, 0.0)
            .with_odd(&["charge"])
            .check_kernel::<Coulomb>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("`charge`") && e.contains("q"), "{e}");
        let e = Wall::new(2, 0.0)
            .check_side("source", &[0.0, 1.0, -1e-9])
            .unwrap_err()
            .to_string();
        assert!(e.contains("source 2") && e.contains("z >= 0"), "{e}");
    }
}
