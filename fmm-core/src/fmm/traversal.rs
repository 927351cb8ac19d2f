//! The dual tree traversal (yokota2012 Algorithms 1 and 2): a target cell
//! and a source cell interact by M2L when they are well separated by the
//! multipole acceptance criterion (MAC) `R_t + R_s < theta * |z_t - z_s|`;
//! two leaves that are not interact by P2P; otherwise the larger cell (by
//! radius; a leaf is never split) is split and its children are visited.

use crate::tree::Octree;

/// The interaction lists of one traversal.
#[derive(Clone, Debug, Default)]
pub struct Lists {
    /// For every target cell, the source cells whose multipole expansions
    /// it takes by M2L.
    pub m2l: Vec<Vec<u32>>,
    /// For every target cell (leaves only), the source leaves it takes by
    /// P2P.
    pub p2p: Vec<Vec<u32>>,
}

impl Lists {
    pub fn m2l_count(&self) -> usize {
        self.m2l.iter().map(Vec::len).sum()
    }

    pub fn p2p_count(&self) -> usize {
        self.p2p.iter().map(Vec::len).sum()
    }
}

/// A cell's expansion centre and the radius of the sphere about it that
/// holds its particles.
#[derive(Clone, Copy, Debug)]
pub struct Sphere {
    pub center: [f64; 3],
    pub radius: f64,
}

/// The spheres of a tree's cells: the cell centres, and the farthest
/// particle from each (tighter than the cell's corner for sparse cells).
pub fn spheres(tree: &Octree, pos: &[[f64; 3]]) -> Vec<Sphere> {
    tree.cells
        .iter()
        .map(|c| {
            let r2 = pos[c.begin..c.end]
                .iter()
                .map(|x| dist2(*x, c.center))
                .fold(0.0, f64::max);
            Sphere {
                center: c.center,
                radius: r2.sqrt(),
            }
        })
        .collect()
}

#[inline]
fn dist2(a: [f64; 3], b: [f64; 3]) -> f64 {
    (0..3).map(|k| (a[k] - b[k]).powi(2)).sum()
}

/// The children of cell `c` of `tree`.
pub fn children(tree: &Octree, c: usize) -> impl Iterator<Item = usize> + '_ {
    let cell = &tree.cells[c];
    let mut at = cell.more;
    (0..cell.n_children).map(move |_| {
        let here = at;
        at = tree.cells[at].next;
        here
    })
}

/// Traverses target tree `tt` against source tree `st`.
pub fn traverse(tt: &Octree, ts: &[Sphere], st: &Octree, ss: &[Sphere], theta: f64) -> Lists {
    let mut lists = Lists {
        m2l: vec![Vec::new(); tt.cells.len()],
        p2p: vec![Vec::new(); tt.cells.len()],
    };
    if tt.cells.is_empty() || st.cells.is_empty() {
        return lists;
    }
    // An explicit stack of pairs: the depth of an adaptive tree is bounded
    // (by the Morton key length) but recursion over pairs is not cheap.
    let mut stack = vec![(0usize, 0usize)];
    while let Some((a, b)) = stack.pop() {
        let (sa, sb) = (ts[a], ss[b]);
        let d2 = dist2(sa.center, sb.center);
        let r = sa.radius + sb.radius;
        if r * r < theta * theta * d2 {
            lists.m2l[a].push(b as u32);
            continue;
        }
        let (la, lb) = (tt.cells[a].is_leaf(), st.cells[b].is_leaf());
        if la && lb {
            lists.p2p[a].push(b as u32);
        } else if lb || (!la && sa.radius >= sb.radius) {
            stack.extend(children(tt, a).map(|c| (c, b)));
        } else {
            stack.extend(children(st, b).map(|c| (a, c)));
        }
    }
    lists
}
