//! The node far fields' operators on the GPU (`nodes.cu`): P2M, M2M, L2L
//! and L2P of [`super::nodes`] with the weights of [`super::chebyshev`] and
//! [`super::pseudo`], and the kernels around an M2L that is the kernel's
//! own P2P-list entry between node sets. The FMM that runs them is
//! `methods::fmm::cuda::nodes`.
//!
//! One module for every order and both far fields: the basis is passed as
//! arguments (`DeviceBasis`: its kind, order, node count and the table its
//! weights read, the CPU's own numbers), so no order compiles a module of
//! its own and the NVRTC test covers every order by compiling once.

use cudarc::driver::CudaSlice;

use super::nodes::{child_weights, Basis};
use super::{chebyshev, pseudo, Chebyshev, FarField, PseudoParticles};
use crate::cuda::device::upload;
use crate::cuda::module::{entry_points, with_defines};
use crate::cuda::Gpu;
use crate::error::Error;
use crate::kernel::MAX_SLOTS;
use crate::real::Real;

/// The module name the kernels are compiled and cached under.
pub const MODULE: &str = "fmm_far_nodes";

/// The basis kinds `nodes.cu` knows.
const KIND_CHEBYSHEV: i32 = 0;
const KIND_PPM: i32 = 1;

/// The source, with the constants it takes from here.
pub fn source() -> String {
    with_defines(
        &[
            ("KIND_CHEBYSHEV", KIND_CHEBYSHEV as i64),
            ("KIND_PPM", KIND_PPM as i64),
            ("MAX_SIDE", chebyshev::MAX_ORDER as i64 + 1),
            ("MAX_SLOTS", MAX_SLOTS as i64),
        ],
        include_str!("nodes.cu"),
    )
}

entry_points! {
    /// The entry points of `nodes.cu`.
    pub struct NodeOps {
        radius = "far_nodes_radius",
        positions = "far_nodes_positions" per_precision,
        p2m = "far_nodes_p2m" per_precision,
        m2m = "far_nodes_m2m",
        sources = "far_nodes_sources" per_precision,
        fill = "far_nodes_fill" per_precision,
        channels = "far_nodes_channels" per_precision,
        l2l = "far_nodes_l2l",
        l2p = "far_nodes_l2p" per_precision,
    }
}

impl NodeOps {
    pub(crate) fn get<R: Real>(gpu: &Gpu) -> Result<Self, Error> {
        let (module, _) = gpu.module(MODULE, &source())?;
        Self::load::<R>(gpu, &module)
    }
}

/// The most bytes the child weights (`nodes::child_weights`: 8 matrices of
/// `k^2` doubles, read by M2M and L2L) may take on the device: 256 MiB,
/// which Chebyshev nodes pass at order 12 (2197 nodes a cell, 309 MB).
pub const MAX_CHILD_WEIGHT_BYTES: usize = 256 << 20;

/// Nodes a cell of far field `far_field` at order `p`.
fn nodes_at(far_field: FarField, p: usize) -> usize {
    match far_field {
        FarField::Ppm => pseudo::points_for(p),
        _ => (p + 1).pow(3),
    }
}

/// The bytes of the child weights for `k` nodes a cell.
fn child_weight_bytes(k: usize) -> usize {
    8 * k * k * std::mem::size_of::<f64>()
}

/// The highest order of a node far field the GPU takes: that of the CPU
/// ([`FarField::max_order`]) where its child weights fit in
/// [`MAX_CHILD_WEIGHT_BYTES`].
pub fn max_gpu_order(far_field: FarField) -> usize {
    (1..=far_field.max_order())
        .filter(|&p| child_weight_bytes(nodes_at(far_field, p)) <= MAX_CHILD_WEIGHT_BYTES)
        .max()
        .unwrap_or(0)
}

/// A node basis on the device, as `nodes.cu` takes it.
pub(crate) struct DeviceBasis {
    /// `KIND_CHEBYSHEV` or `KIND_PPM`.
    pub(crate) kind: i32,
    /// The order.
    pub(crate) p: i32,
    /// Nodes a cell.
    pub(crate) k: usize,
    /// The sphere about a cell's centre holding its nodes, in half sides:
    /// the MAC's radius, and the pseudo-particles' sphere.
    pub(crate) radius: f64,
    /// What the weights read: Chebyshev, `T_j` at the roots (`[m (p + 1) +
    /// j]`); pseudo-particles, the design's unit vectors (3 a node).
    pub(crate) table: CudaSlice<f64>,
    /// The nodes in the unit frame, 3 a node.
    pub(crate) nodes: CudaSlice<f64>,
    /// The child weights, `[o k k + c k + n]` ([`child_weights`]).
    pub(crate) child: CudaSlice<f64>,
}

impl DeviceBasis {
    /// The basis of `far_field` (a node far field) at order `p` (checked
    /// against the far field's range), on the device; refused where its
    /// child weights would pass [`MAX_CHILD_WEIGHT_BYTES`].
    pub(crate) fn upload(gpu: &Gpu, far_field: FarField, p: usize) -> Result<Self, Error> {
        far_field.check_order(p)?;
        let k = nodes_at(far_field, p);
        let bytes = child_weight_bytes(k);
        if bytes > MAX_CHILD_WEIGHT_BYTES {
            return Err(Error::BadOption(format!(
                "the {} far field on the GPU takes orders up to {}, not {p}: {k} nodes a cell \
                 need {} MB of child weights on the device (at most {} MB); use a lower order \
                 or Backend::Cpu",
                far_field.name(),
                max_gpu_order(far_field),
                bytes >> 20,
                MAX_CHILD_WEIGHT_BYTES >> 20
            )));
        }
        // The same choice as `nodes::basis`.
        let (kind, table, basis): (i32, Vec<f64>, Box<dyn Basis>) = match far_field {
            FarField::Ppm => {
                let b = PseudoParticles::new(p);
                let units = b.units().iter().flatten().copied().collect();
                (KIND_PPM, units, Box::new(b))
            }
            _ => {
                let b = Chebyshev::new(p);
                (KIND_CHEBYSHEV, b.t_roots().to_vec(), Box::new(b))
            }
        };
        debug_assert_eq!(basis.len(), k);
        let nodes: Vec<f64> = basis.nodes().iter().flatten().copied().collect();
        let child: Vec<f64> = child_weights(basis.as_ref()).concat();
        let s = gpu.stream();
        Ok(DeviceBasis {
            kind,
            p: p as i32,
            k,
            radius: basis.radius(),
            table: upload(s, &table)?,
            nodes: upload(s, &nodes)?,
            child: upload(s, &child)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_takes_every_pseudo_particle_order_and_chebyshev_to_11() {
        assert_eq!(max_gpu_order(FarField::Ppm), pseudo::MAX_ORDER);
        assert_eq!(max_gpu_order(FarField::KernelIndependent), 11);
        assert_eq!(
            nodes_at(FarField::Ppm, 6),
            PseudoParticles::new(6).len(),
            "t-design points"
        );
        assert_eq!(nodes_at(FarField::KernelIndependent, 4), 125);
    }
}
