//! The walk of the sender's tree against each receiver's box (the
//! local essential tree's MAC, [`super`]): which cells go as nodes and
//! which as their particles. The GPU's walk (`walk.cu`, [`super::gpu`])
//! is this one, operation for operation.

use crate::domain::{wrap1, Domain};
use crate::real::Real;
use crate::tree::{Octree, Span};
use rayon::prelude::*;

/// The box around a process's targets: `lo > hi` where it has none (the
/// tree floor's box, with what the walk asks of it here).
pub type Region = Span;

impl Span {
    /// The box around points `pos` (one vector per axis).
    pub fn around<R: Real>(pos: [&[R]; 3]) -> Region {
        Self::around_in(pos, None)
    }

    /// The box around points `pos` wrapped into `domain`'s periodic box
    /// (where it has one), on every core.
    pub fn around_in<R: Real>(pos: [&[R]; 3], domain: Option<&Domain>) -> Region {
        let periodic = domain.and_then(Domain::periodic);
        let mut r = Region {
            lo: [f64::INFINITY; 3],
            hi: [f64::NEG_INFINITY; 3],
        };
        for (a, axis) in pos.iter().enumerate() {
            let at = |x: &R| match periodic {
                Some(b) if b.axes[a] => wrap1(x.to_f64(), b.origin[a], b.side),
                _ => x.to_f64(),
            };
            (r.lo[a], r.hi[a]) = axis.par_iter().map(|x| (at(x), at(x))).reduce(
                || (f64::INFINITY, f64::NEG_INFINITY),
                |p, q| (p.0.min(q.0), p.1.max(q.1)),
            );
        }
        r
    }

    /// The distance from `x` to the box, the nearest periodic image's
    /// along the axes `periodic` (side `side`) where there are any.
    pub(super) fn distance(&self, x: [f64; 3], periodic: Option<([bool; 3], f64)>) -> f64 {
        let mut d2 = 0.0;
        for a in 0..3 {
            let gap = |v: f64| (self.lo[a] - v).max(v - self.hi[a]).max(0.0);
            let v = x[a];
            let g = match periodic {
                Some((axes, l)) if axes[a] => gap(v).min(gap(v - l)).min(gap(v + l)),
                _ => gap(v),
            };
            d2 += g * g;
        }
        d2.sqrt()
    }
}

/// What one receiver gets of the sender's tree: the cells sent as nodes
/// and the cells sent as their particles (tree order, each source in
/// exactly one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    pub nodes: Vec<usize>,
    pub particles: Vec<usize>,
}

/// Where nodes may go: the domain's limits on a source's position.
pub(super) struct Limits {
    pub(super) periodic: Option<([bool; 3], f64)>,
    /// Per axis, the interval a source must lie in.
    pub(super) lo: [f64; 3],
    pub(super) hi: [f64; 3],
}

impl Limits {
    pub(super) fn of(domain: &Domain) -> Limits {
        let mut l = Limits {
            periodic: None,
            lo: [f64::NEG_INFINITY; 3],
            hi: [f64::INFINITY; 3],
        };
        if let Some(b) = domain.periodic() {
            l.periodic = Some((b.axes, b.side));
            for a in 0..3 {
                if !b.axes[a] {
                    (l.lo[a], l.hi[a]) = (b.origin[a], b.origin[a] + b.side);
                }
            }
        }
        if let Some(w) = domain.wall() {
            l.lo[w.axis] = w.at;
        }
        l
    }

    /// Whether a sphere of radius `r` about `c` stays within the limits.
    fn holds(&self, c: [f64; 3], r: f64) -> bool {
        (0..3).all(|a| c[a] - r >= self.lo[a] && c[a] + r <= self.hi[a])
    }
}

/// The walk of `tree` against `region`: a cell goes as nodes (`k` of them,
/// sphere radius `radius` in the unit frame) where it satisfies the MAC
/// and has more particles than nodes; a leaf that does not goes as its
/// particles.
pub(super) fn select(
    tree: &Octree,
    k: usize,
    radius: f64,
    theta: f64,
    region: &Region,
    limits: &Limits,
) -> Selection {
    let mut s = Selection::default();
    if region.is_empty() {
        return s;
    }
    let mut i = 0;
    while i < tree.cells.len() {
        let c = &tree.cells[i];
        let r = radius * c.half;
        let far = r < theta * region.distance(c.center, limits.periodic);
        if far && c.len() > k && limits.holds(c.center, r) {
            s.nodes.push(i);
            i = c.next;
        } else if far || c.is_leaf() {
            // A far cell of few particles, or a near leaf: its particles.
            s.particles.push(i);
            i = c.next;
        } else {
            i = c.more;
        }
    }
    s
}

/// The walks of one sender's tree, one a receiver: `regions[q]` the box
/// around receiver `q`'s targets; none for the sender itself (`me`) nor
/// for an empty box.
pub(super) struct Walk<'a> {
    pub(super) regions: &'a [Region],
    pub(super) me: usize,
    pub(super) theta: f64,
    pub(super) limits: Limits,
    /// No strength to put on nodes: every source goes as it is.
    pub(super) as_they_are: bool,
}

impl Walk<'_> {
    /// Whether receiver `q` gets anything.
    pub(super) fn live(&self, q: usize) -> bool {
        q != self.me && !self.regions[q].is_empty()
    }

    /// The MAC's settings `(k, radius, theta)` for cells of `k` nodes in
    /// spheres of radius `radius` (the unit frame's): where the sources
    /// go as they are, no cell is far.
    pub(super) fn mac(&self, k: usize, radius: f64) -> (usize, f64, f64) {
        if self.as_they_are {
            (usize::MAX, 0.0, 0.0)
        } else {
            (k, radius, self.theta)
        }
    }

    /// Every receiver's selection of `tree` on the CPU.
    pub(super) fn select(&self, tree: &Octree, k: usize, radius: f64) -> Vec<Selection> {
        let (k, radius, theta) = self.mac(k, radius);
        (0..self.regions.len())
            .map(|q| match self.live(q) {
                true => select(tree, k, radius, theta, &self.regions[q], &self.limits),
                false => Selection::default(),
            })
            .collect()
    }
}
