//! The outputs of an evaluation: one array per scalar slot of the
//! kernel's outputs, in the targets' order, read by name.

use crate::error::Error;
use crate::kernel::Kernel;
use crate::real::Real;
use fmm_codegen::ast::Shape;
use fmm_codegen::Field;

/// The outputs of an evaluation, one array per scalar slot, in the
/// targets' order.
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs<R> {
    kernel: &'static str,
    layout: Vec<Field>,
    slots: Vec<Vec<R>>,
}

impl<R: Real> Outputs<R> {
    /// Zero outputs of kernel `K` for `m` targets: the sums over no sources.
    pub(crate) fn zeros<K: Kernel>(m: usize) -> Self {
        let def = K::def();
        Self::new(
            def.name.as_str(),
            &def.outputs,
            vec![vec![R::zero(); m]; def.n_outputs()],
        )
    }

    pub(crate) fn new(kernel: &'static str, layout: &[Field], slots: Vec<Vec<R>>) -> Self {
        Outputs {
            kernel,
            layout: layout.to_vec(),
            slots,
        }
    }

    /// The same outputs with every slot mapped by `f` (outputs moved
    /// between processes).
    #[cfg(feature = "mpi")]
    pub(crate) fn map_slots(self, f: impl FnMut(Vec<R>) -> Vec<R>) -> Self {
        Outputs {
            slots: self.slots.into_iter().map(f).collect(),
            ..self
        }
    }

    fn field(&self, name: &str, shape: Shape) -> Result<&Field, Error> {
        crate::particles::find_field(&self.layout, name, shape, |known| Error::UnknownOutput {
            kernel: self.kernel.to_string(),
            name: name.to_string(),
            known,
        })
    }

    /// A scalar output.
    pub fn scalar(&self, name: &str) -> Result<&[R], Error> {
        let f = self.field(name, Shape::Scalar)?;
        Ok(&self.slots[f.offset])
    }

    /// A vec3 output, one array per component.
    pub fn vec3(&self, name: &str) -> Result<[&[R]; 3], Error> {
        let f = self.field(name, Shape::Vec3)?;
        let o = f.offset;
        Ok([&self.slots[o], &self.slots[o + 1], &self.slots[o + 2]])
    }

    /// All scalar slots in layout order (`phi`, `acc_x`, `acc_y`, `acc_z`).
    pub fn slots(&self) -> &[Vec<R>] {
        &self.slots
    }

    /// Number of targets.
    pub fn len(&self) -> usize {
        self.slots.first().map_or(0, |s| s.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
