//! The dual tree traversal (yokota2012 Algorithms 1 and 2): a target cell
//! and a source cell interact by M2L when they are well separated by the
//! multipole acceptance criterion (MAC) `R_t + R_s < theta * |z_t - z_s|`;
//! two leaves that are not interact by P2P; otherwise the larger cell (by
//! radius; a leaf is never split) is split and its children are visited.

use rayon::prelude::*;

use super::octree::Cell;
use super::Octree;

/// The interaction lists of one traversal.
///
/// An entry names a source cell and, in a periodic box, which image of it
/// ([`entry`], [`split`]): the image index in the top [`IMAGE_BITS`] bits,
/// 0 (the cell itself) in free space, so there an entry is the cell.
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

/// The bits of a list entry that say which image of the source cell it is
/// (the 125 nearest images of a periodic box need 7; the cell index keeps
/// 25 bits, 3.3 x 10^7 cells): the GPU kernels read entries so, the P2P
/// lists' generated ones among them, hence the one constant there.
pub use fmm_codegen::emit::p2p_list::IMAGE_BITS;
const CELL_BITS: u32 = 32 - IMAGE_BITS;

/// The most source cells a periodic traversal's entries can name.
pub const MAX_IMAGED_CELLS: usize = CELL_MASK as usize + 1;
const CELL_MASK: u32 = (1 << CELL_BITS) - 1;

/// The list entry of source cell `cell`'s image `image`.
#[inline]
pub fn entry(cell: usize, image: usize) -> u32 {
    debug_assert!(image == 0 || cell <= CELL_MASK as usize);
    cell as u32 | ((image as u32) << CELL_BITS)
}

/// The source cell and the image of a list entry.
#[inline]
pub fn split(e: u32) -> (usize, usize) {
    ((e & CELL_MASK) as usize, (e >> CELL_BITS) as usize)
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

/// The spheres of cells whose radii were measured elsewhere (on the GPU).
pub fn spheres_from(cells: &[Cell], radius: &[f64]) -> Vec<Sphere> {
    cells
        .iter()
        .zip(radius)
        .map(|(c, &radius)| Sphere {
            center: c.center,
            radius,
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

/// What one target cell's visit at its level produced: its lists and the
/// source cells it hands down to its children.
struct CellLists {
    cell: usize,
    m2l: Vec<u32>,
    p2p: Vec<u32>,
    deferred: Vec<u32>,
}

/// The same traversal, level by level over the target tree and parallel
/// over the cells of a level: a target cell works through the source cells
/// its parent handed down (its frontier), takes the well-separated ones by
/// M2L, splits a source cell larger than itself at once, and hands the
/// rest to its children (or, as a leaf, takes source leaves by P2P and
/// splits the rest). Each (target, source) pair meets the same decision as
/// in [`traverse`], so the lists are the same up to order; this form needs
/// no shared stack, which is what a GPU traversal needs too.
pub fn traverse_levels(
    tt: &Octree,
    ts: &[Sphere],
    st: &Octree,
    ss: &[Sphere],
    theta: f64,
) -> Lists {
    traverse_images(tt, ts, st, ss, theta, 0.0, &[[0.0; 3]])
}

/// The MAC of the dual traversals: two cells (spheres whose radii sum to
/// `r`, their centres `d2` apart squared) interact by M2L when
/// `r < theta d` and, for `near > 0`, when their spheres are more than
/// `near` apart. A smoothed kernel (a Gaussian core, a softening) differs
/// from the singular one its expansions are of by an amount that falls
/// with distance: `near` is where that difference is within the
/// tolerance (`accuracy::floor::smoothing_radius`), so nearer pairs are
/// summed directly instead of narrowing theta for every pair. With
/// `near = 0` this is the plain MAC to the bit.
#[inline]
pub fn well_separated(r: f64, d2: f64, theta2: f64, near: f64) -> bool {
    r * r < theta2 * d2 && (near == 0.0 || (r + near) * (r + near) < d2)
}

/// [`traverse_levels`] against the source tree and its images: the source
/// tree moved by each of `images` (lattice vectors in the trees' units,
/// the first `[0, 0, 0]`), every entry naming its image; cells nearer
/// than `near` (trees' units) are not well separated ([`well_separated`]). A periodic box's
/// targets meet their own box and its neighbours this way; the farther
/// images come by the expansions (`methods::fmm::images`).
pub fn traverse_images(
    tt: &Octree,
    ts: &[Sphere],
    st: &Octree,
    ss: &[Sphere],
    theta: f64,
    near: f64,
    images: &[[f64; 3]],
) -> Lists {
    assert!(images.len() <= 1 << IMAGE_BITS, "at most 128 images");
    assert!(
        images.len() == 1 || st.cells.len() <= CELL_MASK as usize,
        "a periodic traversal takes at most 2^25 source cells"
    );
    let n = tt.cells.len();
    let mut lists = Lists {
        m2l: vec![Vec::new(); n],
        p2p: vec![Vec::new(); n],
    };
    if n == 0 || st.cells.is_empty() {
        return lists;
    }
    let by_level = tt.cells_by_level();
    let theta2 = theta * theta;
    let mut frontier: Vec<Vec<u32>> = vec![Vec::new(); n];
    frontier[0].extend((0..images.len()).map(|i| entry(0, i)));
    for level in &by_level {
        let done: Vec<CellLists> = level
            .par_iter()
            .map(|&a| {
                let sa = ts[a];
                let leaf_a = tt.cells[a].is_leaf();
                let (mut m2l, mut p2p, mut deferred) = (Vec::new(), Vec::new(), Vec::new());
                let mut stack: Vec<u32> = frontier[a].clone();
                while let Some(e) = stack.pop() {
                    let (b, image) = split(e);
                    let sb = ss[b];
                    let shift = images[image];
                    let center = [0, 1, 2].map(|k| sb.center[k] + shift[k]);
                    let r = sa.radius + sb.radius;
                    let leaf_b = st.cells[b].is_leaf();
                    if well_separated(r, dist2(sa.center, center), theta2, near) {
                        m2l.push(e);
                    } else if leaf_a && leaf_b {
                        p2p.push(e);
                    } else if leaf_a || (!leaf_b && sb.radius > sa.radius) {
                        stack.extend(children(st, b).map(|c| entry(c, image)));
                    } else {
                        deferred.push(e);
                    }
                }
                CellLists {
                    cell: a,
                    m2l,
                    p2p,
                    deferred,
                }
            })
            .collect();
        for d in done {
            lists.m2l[d.cell] = d.m2l;
            lists.p2p[d.cell] = d.p2p;
            frontier[d.cell] = Vec::new();
            for c in children(tt, d.cell) {
                frontier[c] = d.deferred.clone();
            }
        }
    }
    lists
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributions::{plummer, uniform_cube};

    fn tree(pos: &[[f64; 3]], ncrit: usize) -> (Octree, Vec<Sphere>) {
        let xs: [Vec<f64>; 3] = [0, 1, 2].map(|a| pos.iter().map(|p| p[a]).collect());
        let t = Octree::build([&xs[0], &xs[1], &xs[2]], ncrit);
        let sorted: Vec<[f64; 3]> = t.order.iter().map(|&i| pos[i as usize]).collect();
        let s = spheres(&t, &sorted);
        (t, s)
    }

    /// Every source particle reaches every target particle exactly once:
    /// by M2L to a cell on the target's path from the root, or by P2P to
    /// its leaf.
    fn check_coverage(tt: &Octree, st: &Octree, lists: &Lists) {
        let mut parent = vec![usize::MAX; tt.cells.len()];
        for c in 0..tt.cells.len() {
            for ch in children(tt, c) {
                parent[ch] = c;
            }
        }
        let ns = st.order.len();
        for (leaf, cell) in tt.cells.iter().enumerate().filter(|(_, c)| c.is_leaf()) {
            let mut count = vec![0u32; ns];
            for &b in &lists.p2p[leaf] {
                let b = &st.cells[b as usize];
                count[b.begin..b.end].iter_mut().for_each(|c| *c += 1);
            }
            let mut a = leaf;
            while a != usize::MAX {
                for &b in &lists.m2l[a] {
                    let b = &st.cells[b as usize];
                    count[b.begin..b.end].iter_mut().for_each(|c| *c += 1);
                }
                a = parent[a];
            }
            if !cell.is_empty() {
                assert!(count.iter().all(|&c| c == 1), "leaf {leaf}: {count:?}");
            }
        }
    }

    fn sorted(lists: &Lists) -> Lists {
        let sort = |v: &Vec<Vec<u32>>| {
            v.iter()
                .map(|l| {
                    let mut l = l.clone();
                    l.sort_unstable();
                    l
                })
                .collect()
        };
        Lists {
            m2l: sort(&lists.m2l),
            p2p: sort(&lists.p2p),
        }
    }

    #[test]
    fn both_traversals_cover_every_pair_once_and_agree() {
        let cube = uniform_cube(3000, 1);
        let sphere = plummer(3000, 2).0;
        let targets = uniform_cube(500, 3);
        for (src, tgt, ncrit, theta) in [
            (&cube, &cube, 16, 0.5),
            (&sphere, &sphere, 32, 0.6),
            (&sphere, &targets, 8, 0.4),
            (&cube, &sphere, 64, 0.9),
        ] {
            let (st, ss) = tree(src, ncrit);
            let (tt, ts) = tree(tgt, ncrit);
            let a = traverse(&tt, &ts, &st, &ss, theta);
            let b = traverse_levels(&tt, &ts, &st, &ss, theta);
            check_coverage(&tt, &st, &a);
            check_coverage(&tt, &st, &b);
            let (a, b) = (sorted(&a), sorted(&b));
            assert_eq!(a.m2l, b.m2l);
            assert_eq!(a.p2p, b.p2p);
        }
    }

    /// With a near radius every pair is still reached once, no M2L pair's
    /// spheres lie nearer than it, and some pairs the plain MAC took by
    /// M2L are summed directly instead.
    #[test]
    fn a_near_radius_keeps_near_cells_off_the_m2l() {
        let cube = uniform_cube(3000, 1);
        let (st, ss) = tree(&cube, 16);
        let (tt, ts) = tree(&cube, 16);
        let plain = traverse_images(&tt, &ts, &st, &ss, 0.7, 0.0, &[[0.0; 3]]);
        let near = 0.15;
        let lists = traverse_images(&tt, &ts, &st, &ss, 0.7, near, &[[0.0; 3]]);
        check_coverage(&tt, &st, &lists);
        for (a, m2l) in lists.m2l.iter().enumerate() {
            for &b in m2l {
                let gap = dist2(ts[a].center, ss[b as usize].center).sqrt()
                    - ts[a].radius
                    - ss[b as usize].radius;
                assert!(gap > near, "cells {a} and {b}: {gap}");
            }
        }
        assert!(lists.m2l_count() < plain.m2l_count());
        let p2p = |l: &Lists| l.p2p.iter().map(Vec::len).sum::<usize>();
        assert!(p2p(&lists) > p2p(&plain));
    }
}
