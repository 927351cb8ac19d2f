//! The compressed M2L's operators kept between evaluations: by
//! geometry (kernel, parameters, fields, nodes, root cube, tolerance), the
//! last [`CACHE_GEOMETRIES`] of them, up to [`CACHE_BYTES`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::*;

/// What the operators depend on besides the offsets: two evaluations with
/// the same `Geometry` share their bases and operators.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Geometry {
    pub(super) kernel: &'static str,
    /// Bit patterns of the f64 values (parameters, fields, nodes, root,
    /// tolerance): equal means the same operators.
    pub(super) params: Vec<u64>,
    pub(super) fields: Vec<u64>,
    pub(super) strength: Vec<usize>,
    pub(super) target_slots: usize,
    pub(super) n_outputs: usize,
    pub(super) nodes: Vec<[u64; 3]>,
    pub(super) root_half: u64,
    pub(super) tol: u64,
    /// A homogeneous kernel's factors ([`Scaling`]): its operators are
    /// kept by their shape at the reference level.
    pub(super) scaling: Option<Vec<u64>>,
    /// A symmetric kernel's ([`symmetry`]): one basis for both sides.
    pub(super) symmetric: bool,
    /// Bases fitted to whole orbits of the cube's symmetries ([`cubic`]).
    pub(super) cubic: bool,
}

/// The operators of one geometry.
pub(super) struct Cached {
    pub(super) geometry: Geometry,
    pub(super) bases: Arc<Vec<Bases>>,
    /// A homogeneous kernel's bases at the reference level, which `bases`
    /// are scaled from (and the operators projected on).
    pub(super) reference: Option<Arc<Bases>>,
    pub(super) ops: HashMap<Key, Dense>,
    pub(super) bytes: usize,
}

/// The geometries kept, the most recently used last.
pub(super) static CACHE: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

/// Drops the compressed M2L operators kept from the last evaluations.
pub fn clear_operator_cache() {
    if let Ok(mut c) = CACHE.lock() {
        c.clear();
    }
}
