//! Direct all-pairs summation on the CPU: every source to every target,
//! parallel over targets with rayon.

use rayon::prelude::*;

use crate::error::Error;
use crate::kernel::{Kernel, MAX_SLOTS};
use crate::particles::{check_finite, Particles, Role};
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

    fn field(&self, name: &str, shape: Shape) -> Result<&Field, Error> {
        let f =
            self.layout
                .iter()
                .find(|f| f.name == name)
                .ok_or_else(|| Error::UnknownOutput {
                    kernel: self.kernel.to_string(),
                    name: name.to_string(),
                    known: self
                        .layout
                        .iter()
                        .map(|f| f.name.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
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

/// The checks every evaluation starts with: parameters (converted to `R`),
/// particles made for `K` in the right roles, and the declaration's
/// `require` conditions.
pub(crate) fn check_inputs<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Vec<R>, Error> {
    let p = check_params::<K, R>(params)?;
    targets.check_for::<K>(Role::Targets)?;
    sources.check_for::<K>(Role::Sources)?;
    crate::require::check_requirements::<K, R>(params, targets, sources)?;
    Ok(p)
}

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

/// Direct summation of kernel `K` on the backend `backend` (see
/// [`crate::resolve`]): the GPU when asked for or when `Auto` finds one,
/// else the CPU. Same contract as [`direct_cpu`].
pub fn direct<K: Kernel, R: Real>(
    backend: crate::Backend,
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Outputs<R>, Error> {
    match crate::backend::resolve(backend)? {
        crate::backend::Resolved::Cpu => direct_cpu::<K, R>(params, targets, sources),
        crate::backend::Resolved::Cuda(gpu) => crate::cuda::direct::direct_cuda::<K, R>(
            gpu,
            params,
            targets,
            sources,
            &Default::default(),
        ),
    }
}

/// Direct summation of kernel `K` on the CPU: every source to every target.
///
/// `params` are the kernel's parameters in declaration order (a vec3 takes
/// three values). Zero sources give zero outputs, zero targets give empty
/// outputs; a source on a target adds nothing (every kernel vanishes at
/// r = 0, which the macro checks).
pub fn direct_cpu<K: Kernel, R: Real>(
    params: &[f64],
    targets: &Particles<R>,
    sources: &Particles<R>,
) -> Result<Outputs<R>, Error> {
    let def = K::def();
    let p = check_inputs::<K, R>(params, targets, sources)?;
    let no = def.n_outputs();
    let src = sources.source_slices();
    let mut aos = vec![R::zero(); targets.len() * no];
    if no > 0 {
        aos.par_chunks_mut(no).enumerate().for_each(|(i, out)| {
            let mut t = [R::zero(); MAX_SLOTS];
            targets.target_slots(i, &mut t);
            K::p2p_target(&p, targets.position(i), &t, &src, 0..src.len(), out);
        });
    }
    let slots = (0..no)
        .map(|k| aos.iter().skip(k).step_by(no).copied().collect())
        .collect();
    Ok(Outputs::new(def.name.as_str(), &def.outputs, slots))
}
