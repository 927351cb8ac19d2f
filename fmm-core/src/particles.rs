//! Particle sets as structure of arrays, laid out for one kernel.

use crate::error::Error;
use crate::kernel::{Kernel, SourceSlices, MAX_SLOTS};
use crate::real::Real;
use fmm_codegen::ast::Shape;
use fmm_codegen::Field;

/// Whether a particle set holds sources or targets of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Sources,
    Targets,
}

impl Role {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Role::Sources => "source",
            Role::Targets => "target",
        }
    }
}

/// Positions and per-particle fields, one array per scalar slot.
///
/// Made for one kernel's source or target layout, so that fields are set
/// by name and every mistake (an unknown field, a wrong length, a value
/// that is not finite) is reported when it is made.
#[derive(Clone, Debug)]
pub struct Particles<R> {
    pub(crate) kernel: &'static str,
    pub(crate) role: Role,
    pub(crate) layout: Vec<Field>,
    pub(crate) pos: [Vec<R>; 3],
    pub(crate) slots: Vec<Vec<R>>,
}

impl<R: Real> Particles<R> {
    /// Sources of kernel `K` at `positions`, every field zero.
    pub fn sources<K: Kernel>(positions: &[[R; 3]]) -> Result<Self, Error> {
        Self::new(
            K::def().name.as_str(),
            Role::Sources,
            &K::def().sources,
            positions,
        )
    }

    /// Targets of kernel `K` at `positions`, every field zero.
    pub fn targets<K: Kernel>(positions: &[[R; 3]]) -> Result<Self, Error> {
        Self::new(
            K::def().name.as_str(),
            Role::Targets,
            &K::def().targets,
            positions,
        )
    }

    fn new(
        kernel: &'static str,
        role: Role,
        layout: &[Field],
        positions: &[[R; 3]],
    ) -> Result<Self, Error> {
        if let Some(i) = positions
            .iter()
            .position(|p| p.iter().any(|c| !c.is_finite()))
        {
            return Err(Error::NonFinite {
                what: format!("{} position", role.name()),
                index: i,
                value: positions[i]
                    .iter()
                    .find(|c| !c.is_finite())
                    .map_or(f64::NAN, |c| c.to_f64()),
            });
        }
        let n = positions.len();
        let pos = [0, 1, 2].map(|c| positions.iter().map(|p| p[c]).collect());
        let slots = vec![vec![R::zero(); n]; fmm_codegen::kernel::slot_count(layout)];
        Ok(Particles {
            kernel,
            role,
            layout: layout.to_vec(),
            pos,
            slots,
        })
    }

    /// The particles `idx` (all if `None`) in f64, for reference sums.
    pub(crate) fn to_f64(&self, idx: Option<&[usize]>) -> Particles<f64> {
        let pick = |v: &Vec<R>| -> Vec<f64> {
            match idx {
                Some(idx) => idx.iter().map(|&i| v[i].to_f64()).collect(),
                None => v.iter().map(|x| x.to_f64()).collect(),
            }
        };
        Particles {
            kernel: self.kernel,
            role: self.role,
            layout: self.layout.clone(),
            pos: [pick(&self.pos[0]), pick(&self.pos[1]), pick(&self.pos[2])],
            slots: self.slots.iter().map(pick).collect(),
        }
    }

    /// `other`'s particles put after these (made alike: one kernel, role
    /// and fields), as the sources that came from other processes join a
    /// process's own.
    pub fn append(&mut self, other: &Particles<R>) -> Result<(), Error> {
        other.made_as((self.kernel, self.role, &self.layout), "appended")?;
        for (a, b) in self.pos.iter_mut().zip(&other.pos) {
            a.extend_from_slice(b);
        }
        for (a, b) in self.slots.iter_mut().zip(&other.slots) {
            a.extend_from_slice(b);
        }
        Ok(())
    }

    /// Whether these particles are made as `(kernel, role, layout)` are,
    /// to be `how` (joined, appended) with them: an error naming both
    /// where not.
    pub(crate) fn made_as(
        &self,
        (kernel, role, layout): (&str, Role, &[Field]),
        how: &str,
    ) -> Result<(), Error> {
        if self.kernel != kernel || self.role != role || self.layout != layout {
            return Err(Error::BadOption(format!(
                "particles {how} must be made alike: {}s of {kernel} and {}s of {}",
                role.name(),
                self.role.name(),
                self.kernel
            )));
        }
        Ok(())
    }

    /// No particles, made as these are (kernel, role, fields).
    pub(crate) fn none_like(&self) -> Self {
        Particles {
            kernel: self.kernel,
            role: self.role,
            layout: self.layout.clone(),
            pos: Default::default(),
            slots: vec![Vec::new(); self.slots.len()],
        }
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.pos[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of particle `i`.
    pub fn position(&self, i: usize) -> [R; 3] {
        [self.pos[0][i], self.pos[1][i], self.pos[2][i]]
    }

    /// The positions, one array per coordinate.
    pub fn positions(&self) -> [&[R]; 3] {
        [&self.pos[0], &self.pos[1], &self.pos[2]]
    }

    fn field(&self, name: &str, shape: Shape) -> Result<&Field, Error> {
        find_field(&self.layout, name, shape, |known| Error::UnknownField {
            kernel: self.kernel.to_string(),
            role: self.role.name(),
            name: name.to_string(),
            known,
        })
    }

    fn check_len(&self, name: &str, len: usize) -> Result<(), Error> {
        if len != self.len() {
            return Err(Error::LengthMismatch {
                what: format!("{} field `{name}`", self.role.name()),
                got: len,
                expected: self.len(),
            });
        }
        Ok(())
    }

    /// Sets a scalar field.
    pub fn set(&mut self, name: &str, values: &[R]) -> Result<&mut Self, Error> {
        let off = self.field(name, Shape::Scalar)?.offset;
        self.check_len(name, values.len())?;
        check_finite(
            &format!("{} field `{name}`", self.role.name()),
            values.iter(),
        )?;
        self.slots[off].copy_from_slice(values);
        Ok(self)
    }

    /// Sets a vec3 field.
    pub fn set_vec3(&mut self, name: &str, values: &[[R; 3]]) -> Result<&mut Self, Error> {
        let off = self.field(name, Shape::Vec3)?.offset;
        self.check_len(name, values.len())?;
        if let Some(i) = values.iter().position(|v| v.iter().any(|c| !c.is_finite())) {
            return Err(Error::NonFinite {
                what: format!("{} field `{name}`", self.role.name()),
                index: i,
                value: values[i]
                    .iter()
                    .find(|c| !c.is_finite())
                    .map_or(f64::NAN, |c| c.to_f64()),
            });
        }
        for c in 0..3 {
            for (dst, v) in self.slots[off + c].iter_mut().zip(values) {
                *dst = v[c];
            }
        }
        Ok(self)
    }

    /// The scalar slots of the fields, in layout order.
    pub fn slots(&self) -> &[Vec<R>] {
        &self.slots
    }

    /// The whole set as a source view.
    pub fn source_slices(&self) -> SourceSlices<'_, R> {
        let mut fields: [&[R]; MAX_SLOTS] = [&[]; MAX_SLOTS];
        for (f, s) in fields.iter_mut().zip(&self.slots) {
            *f = s;
        }
        SourceSlices {
            pos: self.positions(),
            fields,
            n_fields: self.slots.len(),
        }
    }

    /// The target slots of particle `i`, into `buf`.
    pub(crate) fn target_slots(&self, i: usize, buf: &mut [R; MAX_SLOTS]) {
        for (b, s) in buf.iter_mut().zip(&self.slots) {
            *b = s[i];
        }
    }

    /// Checks that this set was made for kernel `K` in the given role.
    pub(crate) fn check_for<K: Kernel>(&self, role: Role) -> Result<(), Error> {
        check_layout::<K>(self.kernel, self.role, &self.layout, role)
    }
}

/// The field `name` of `layout`, which must have `shape`; an unknown name
/// is `unknown(the known names)`. (Particles' fields and outputs alike.)
pub(crate) fn find_field<'a>(
    layout: &'a [Field],
    name: &str,
    shape: Shape,
    unknown: impl FnOnce(String) -> Error,
) -> Result<&'a Field, Error> {
    let f = layout.iter().find(|f| f.name == name).ok_or_else(|| {
        unknown(
            layout
                .iter()
                .map(|f| f.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        )
    })?;
    if f.shape != shape {
        return Err(Error::FieldShape {
            name: name.to_string(),
            declared: f.shape.name(),
            given: shape.name(),
        });
    }
    Ok(f)
}

/// Checks that a set made for `kernel` in `made_as` with `layout` is one of
/// kernel `K`'s sets in `role`.
pub(crate) fn check_layout<K: Kernel>(
    kernel: &str,
    made_as: Role,
    layout: &[Field],
    role: Role,
) -> Result<(), Error> {
    let def = K::def();
    let want = match role {
        Role::Sources => &def.sources,
        Role::Targets => &def.targets,
    };
    if made_as != role || kernel != def.name || layout != want.as_slice() {
        return Err(Error::WrongParticles {
            kernel: def.name.clone(),
            expected: role.name(),
            made_for: format!("{kernel} {}s", made_as.name()),
        });
    }
    Ok(())
}

/// Fails on the first value that is not finite, naming it.
pub(crate) fn check_finite<'a, R: Real>(
    what: &str,
    values: impl Iterator<Item = &'a R>,
) -> Result<(), Error> {
    for (i, v) in values.enumerate() {
        if !v.is_finite() {
            return Err(Error::NonFinite {
                what: what.to_string(),
                index: i,
                value: v.to_f64(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{Coulomb, Gravity};

    #[test]
    fn appended_particles_follow_and_unlike_ones_are_refused() {
        let mut a = Particles::<f64>::sources::<Gravity>(&[[0.0, 1.0, 2.0]]).unwrap();
        a.set("m", &[3.0]).unwrap();
        let mut b =
            Particles::<f64>::sources::<Gravity>(&[[4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]).unwrap();
        b.set("m", &[10.0, 11.0]).unwrap();
        a.append(&b).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a.position(2), [7.0, 8.0, 9.0]);
        assert_eq!(a.slots()[0], vec![3.0, 10.0, 11.0]);
        let t = Particles::<f64>::targets::<Gravity>(&[[0.0; 3]]).unwrap();
        assert!(a.append(&t).is_err(), "targets after sources");
        let c = Particles::<f64>::sources::<Coulomb>(&[[0.0; 3]]).unwrap();
        let e = a.append(&c).unwrap_err().to_string();
        assert!(e.contains("made alike"), "{e}");
        assert_eq!(a.len(), 3, "nothing appended on an error");
    }
}
