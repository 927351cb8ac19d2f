//! The adaptive octree: cells split until they hold at most `ncrit`
//! particles, laid out in depth-first order with the `next`/`more` links of
//! nakasato2009, so that a walk needs no stack: from a cell, `more` goes
//! into it (its first child) and `next` goes past it (the cell after its
//! subtree).

use std::collections::HashSet;

use super::morton::{self, Bounds, MAX_LEVEL};

/// One cell. Its particles are `begin..end` in the tree's sorted order.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub center: [f64; 3],
    /// Half the side length.
    pub half: f64,
    pub level: u32,
    pub begin: usize,
    pub end: usize,
    /// The cell after this one's subtree (`cells.len()` at the end).
    pub next: usize,
    /// The first child (equal to `next` for a leaf).
    pub more: usize,
    pub n_children: u8,
}

impl Cell {
    pub fn is_leaf(&self) -> bool {
        self.n_children == 0
    }

    pub fn len(&self) -> usize {
        self.end - self.begin
    }

    pub fn is_empty(&self) -> bool {
        self.begin == self.end
    }
}

/// An octree over a set of points.
/// A guided tree's cell ([`Octree::build_guided`]) is split where its
/// guide holds more than this many times `ncrit`: a target leaf may be up
/// to about one level coarser than the source leaves (8 cells) before the
/// guide splits it. Only the leaves far larger than the sources' (an ORB
/// cut's sliver) are split; targets at their own density keep their
/// trees, whose larger leaves sum more of the near field exactly: split
/// wherever the sources held more than `ncrit`, 700 targets apart from
/// 2000 sources (the conformance's rows, p 8, theta 0.5) erred 3.1e-5 for
/// Coulomb and 1.7e-5 for the stretching, against 1.6e-5 and 5.2e-6 (as
/// unguided, with this slack).
pub const GUIDE_SLACK: usize = 8;

/// A cell of at most `ncrit` points is split all the same where a cell
/// beside it at its level (a face, an edge or a corner away) holds more
/// than this many times `ncrit` ([`crowded`]): a leaf is then at most
/// about two levels coarser than the leaves beside it. Without it a few
/// points across a plane of the lattice from many (a process's part in a
/// distributed job's shared cube, or a point at `x = 1` rounded there in
/// f32 from below, beside a part filling `[0, 1)`) make a leaf of the
/// size their count alone allows, up to half the root cube's side, whose
/// near field is every source near the plane: at 2^24 points in a unit
/// part of a cube of side 2, one such leaf of level 1 held 485,729 source
/// leaves in its P2P list, traversed by one GPU thread and summed by one
/// block (a step's traversal 0.39 s and P2P 0.44 s against 0.018 and
/// 0.037 s). Sixty-four, not [`GUIDE_SLACK`]: densities that change
/// smoothly (a Plummer sphere) keep their trees.
pub const NEIGHBOUR_SLACK: usize = 64;

/// The cells, as (level, key prefix), of at most `ncrit` of the sorted
/// `keys` beside a cell of more than [`NEIGHBOUR_SLACK`] `ncrit` at their
/// level. Found from the crowded cells' side: they are few (at 2^24
/// uniform points and ncrit 64, some 5,000), each looks up its 26
/// neighbours' counts by binary search. Every cell named exists in the
/// tree: its parent is beside or is the crowded cell's parent, itself
/// crowded, so the parent holds more than `ncrit` or is named too.
fn crowded(keys: &[u64], ncrit: usize) -> HashSet<(u32, u64)> {
    let crowd = NEIGHBOUR_SLACK.saturating_mul(ncrit);
    let mut named = HashSet::new();
    let mut stack = vec![(0u32, 0usize, keys.len())];
    while let Some((level, begin, end)) = stack.pop() {
        if end - begin <= crowd || level >= MAX_LEVEL {
            continue;
        }
        let shift = 3 * (MAX_LEVEL - level);
        for n in morton::neighbours(keys[begin] >> shift, level) {
            let lo = keys.partition_point(|&k| k >> shift < n);
            let count = keys[lo..].partition_point(|&k| k >> shift == n);
            if (1..=ncrit).contains(&count) {
                named.insert((level, n));
            }
        }
        let mut lo = begin;
        for oct in 0..8u64 {
            let in_octant = |&k: &u64| morton::octant(k, level + 1) <= oct;
            let hi = lo + keys[lo..end].partition_point(in_octant);
            stack.push((level + 1, lo, hi));
            lo = hi;
        }
    }
    named
}

#[derive(Clone, Debug)]
pub struct Octree {
    pub bounds: Bounds,
    /// `order[k]` is the input index of the `k`-th particle in tree order.
    pub order: Vec<u32>,
    /// Morton keys in tree order.
    pub keys: Vec<u64>,
    /// Cells in depth-first order; cell 0 is the root.
    pub cells: Vec<Cell>,
    pub ncrit: usize,
}

impl Octree {
    /// The cells' indices by level, the root's level first.
    pub fn cells_by_level(&self) -> Vec<Vec<usize>> {
        let mut by: Vec<Vec<usize>> = Vec::new();
        for (i, c) in self.cells.iter().enumerate() {
            let l = c.level as usize;
            if by.len() <= l {
                by.resize(l + 1, Vec::new());
            }
            by[l].push(i);
        }
        by
    }

    /// Builds the tree of the points `pos`, leaves of at most `ncrit`
    /// particles (except at the depth bound, where coincident points share
    /// a leaf whatever their number).
    pub fn build(pos: [&[f64]; 3], ncrit: usize) -> Octree {
        Self::build_in(pos, ncrit, Bounds::of(pos))
    }

    /// [`Octree::build`] with the root cube `bounds`, which holds every
    /// point (a cube shared with another tree: [`Bounds::union`]).
    pub fn build_in(pos: [&[f64]; 3], ncrit: usize, bounds: Bounds) -> Octree {
        Self::build_guided(pos, ncrit, bounds, &[])
    }

    /// [`Octree::build_in`], cells also split where `guide` (the sorted
    /// keys of another tree in the same root cube, a source tree's) holds
    /// more than [`GUIDE_SLACK`] `ncrit` in them: a target leaf is at most
    /// about one level coarser than the source leaves around it. A target
    /// cell of few targets amid many sources is otherwise a leaf of the
    /// size its targets alone allow, and every source leaf near it lands
    /// in its P2P list: a process's targets within 10^-4 across a level-1
    /// plane (an ORB cut off the lattice) made leaves of levels 1 to 4
    /// whose lists held up to 73,883 source leaves (on 4 H200s the
    /// process's P2P took 5 times the others').
    pub fn build_guided(pos: [&[f64]; 3], ncrit: usize, bounds: Bounds, guide: &[u64]) -> Octree {
        let ncrit = ncrit.max(1);
        let (keys, order) = morton::sorted_keys(pos, &bounds);
        let mut tree = Octree {
            bounds,
            order,
            keys,
            cells: Vec::new(),
            ncrit,
        };
        let crowded = crowded(&tree.keys, ncrit);
        let at = (0, tree.keys.len());
        tree.split(bounds.center, bounds.half, 0, at, guide, &crowded);
        tree
    }

    /// Appends the cell for `begin..end` at `level` and, depth first, its
    /// subtree; returns its index. `guide`: the guiding keys in the cell;
    /// `crowded`: the cells split for their neighbours ([`crowded`]).
    fn split(
        &mut self,
        center: [f64; 3],
        half: f64,
        level: u32,
        (begin, end): (usize, usize),
        guide: &[u64],
        crowded: &HashSet<(u32, u64)>,
    ) -> usize {
        let me = self.cells.len();
        self.cells.push(Cell {
            center,
            half,
            level,
            begin,
            end,
            next: 0,
            more: 0,
            n_children: 0,
        });
        let beside_a_crowd = || {
            let shift = 3 * (MAX_LEVEL - level);
            !crowded.is_empty() && crowded.contains(&(level, self.keys[begin] >> shift))
        };
        let open = end - begin > self.ncrit
            || guide.len() > GUIDE_SLACK * self.ncrit
            || (end > begin && beside_a_crowd());
        if open && level < MAX_LEVEL {
            let (mut lo, mut g) = (begin, guide);
            let mut n_children = 0;
            for oct in 0..8u64 {
                // Keys are sorted, so each octant is a contiguous run.
                let in_octant = |&k: &u64| morton::octant(k, level + 1) <= oct;
                let hi = lo + self.keys[lo..end].partition_point(in_octant);
                let (gin, gout) = g.split_at(g.partition_point(in_octant));
                if hi > lo {
                    let h = half / 2.0;
                    let c = [0, 1, 2].map(|a| center[a] + if (oct >> a) & 1 == 1 { h } else { -h });
                    self.split(c, h, level + 1, (lo, hi), gin, crowded);
                    n_children += 1;
                }
                (lo, g) = (hi, gout);
            }
            self.cells[me].n_children = n_children;
        }
        let next = self.cells.len();
        let cell = &mut self.cells[me];
        cell.next = next;
        cell.more = if cell.n_children > 0 { me + 1 } else { next };
        me
    }

    /// The leaves, in tree order.
    pub fn leaves(&self) -> impl Iterator<Item = (usize, &Cell)> {
        self.cells.iter().enumerate().filter(|(_, c)| c.is_leaf())
    }

    /// The children of a cell.
    pub fn children(&self, cell: usize) -> Vec<usize> {
        let c = &self.cells[cell];
        let mut out = Vec::with_capacity(c.n_children as usize);
        let mut k = c.more;
        while k < c.next {
            out.push(k);
            k = self.cells[k].next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(n: usize) -> [Vec<f64>; 3] {
        let f = |s: f64| {
            (0..n)
                .map(|i| ((i as f64 + 0.5) * s).fract())
                .collect::<Vec<_>>()
        };
        [f(0.618_033_988), f(0.414_213_562), f(0.732_050_807)]
    }

    #[test]
    fn leaves_hold_at_most_ncrit() {
        let p = points(5000);
        let t = Octree::build([&p[0], &p[1], &p[2]], 32);
        assert!(t.leaves().all(|(_, c)| c.len() <= 32));
        assert_eq!(t.cells[0].len(), 5000);
    }

    #[test]
    fn a_guided_tree_splits_as_far_as_its_guide() {
        // Sources fill the unit cube; the targets are one in 200 of
        // them, apart: too few anywhere for a crowd of their own.
        let p = points(20_000);
        let root = Bounds {
            center: [0.5; 3],
            half: 0.5,
        };
        let sources = Octree::build_in([&p[0], &p[1], &p[2]], 32, root);
        let t: Vec<usize> = (0..p[0].len()).step_by(200).collect();
        let tp = [0, 1, 2].map(|a| t.iter().map(|&i| p[a][i]).collect::<Vec<f64>>());
        let tpos = [&tp[0][..], &tp[1], &tp[2]];
        let alone = Octree::build_in(tpos, 32, root);
        let guided = Octree::build_guided(tpos, 32, root, &sources.keys);
        // Alone, the targets sit in leaves far larger than the sources';
        // guided, no target leaf is more than a level coarser than a
        // source leaf.
        let coarsest = |tree: &Octree| tree.leaves().map(|(_, c)| c.level).min().unwrap();
        let coarsest_source = sources.leaves().map(|(_, c)| c.level).min().unwrap();
        assert!(
            coarsest(&alone) + 1 < coarsest_source,
            "targets apart make large leaves alone"
        );
        assert!(coarsest(&guided) + 1 >= coarsest_source);
        for (_, c) in guided.leaves() {
            assert!(c.len() <= 32);
            let lo = |k: &u64| k >> (3 * (MAX_LEVEL - c.level));
            let prefix = lo(&guided.keys[c.begin]);
            let guide_in = sources.keys.iter().filter(|k| lo(k) == prefix).count();
            assert!(
                guide_in <= GUIDE_SLACK * 32,
                "a leaf holding {guide_in} of the guide's keys"
            );
        }
        // Every target is in exactly one leaf; a tree guided by its own
        // keys is the tree alone.
        assert_eq!(
            guided.leaves().map(|(_, c)| c.len()).sum::<usize>(),
            t.len()
        );
        let own = Octree::build_guided(tpos, 32, root, &alone.keys);
        assert_eq!(own.cells.len(), alone.cells.len());
        assert!(own
            .cells
            .iter()
            .zip(&alone.cells)
            .all(|(a, b)| (a.begin, a.end, a.level) == (b.begin, b.end, b.level)));
    }

    /// The points below x = 0.5 and a few in a sliver just past it (a
    /// part cut off the lattice's plane): no leaf sits beside a crowd of
    /// its level, so the sliver's leaves are near the others' size.
    #[test]
    fn a_leaf_beside_a_crowd_is_split() {
        let p = points(40_000);
        let root = Bounds {
            center: [0.5; 3],
            half: 0.5,
        };
        let t: Vec<usize> = (0..p[0].len())
            .filter(|&i| p[0][i] < 0.5 || (p[0][i] < 0.501 && p[1][i] < 0.5))
            .collect();
        let tp = [0, 1, 2].map(|a| t.iter().map(|&i| p[a][i]).collect::<Vec<f64>>());
        let ncrit = 8;
        let tree = Octree::build_in([&tp[0], &tp[1], &tp[2]], ncrit, root);
        let crowd = NEIGHBOUR_SLACK * ncrit;
        let mut sliver_levels = Vec::new();
        for (_, c) in tree.leaves() {
            assert!(c.len() <= ncrit);
            let shift = 3 * (MAX_LEVEL - c.level);
            let prefix = tree.keys[c.begin] >> shift;
            for n in morton::neighbours(prefix, c.level) {
                let beside = tree.keys.iter().filter(|&&k| k >> shift == n).count();
                assert!(
                    beside <= crowd,
                    "a leaf of level {} beside {beside} points",
                    c.level
                );
            }
            if c.center[0] > 0.5 {
                sliver_levels.push(c.level);
            }
        }
        // Without the rule the sliver's points fell in leaves of level 1
        // and 2 (a cell of half the cube holding them alone).
        let coarsest = sliver_levels.iter().min().unwrap();
        let bulk = tree.leaves().map(|(_, c)| c.level).max().unwrap();
        assert!(
            *coarsest >= 3 && coarsest + 3 >= bulk,
            "sliver leaves from level {coarsest}, the deepest {bulk}"
        );
        assert_eq!(tree.leaves().map(|(_, c)| c.len()).sum::<usize>(), t.len());
    }

    #[test]
    fn coincident_points_stop_at_the_depth_bound() {
        let x = vec![0.25; 100];
        let t = Octree::build([&x, &x, &x], 8);
        let deepest = t.cells.iter().map(|c| c.level).max().unwrap();
        assert!(deepest <= MAX_LEVEL);
        assert!(t.leaves().any(|(_, c)| c.len() == 100));
    }
}
