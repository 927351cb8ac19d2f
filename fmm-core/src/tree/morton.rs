//! Bounding cube and Morton keys.
//!
//! A Morton key interleaves the bits of a particle's integer coordinates in
//! the bounding cube, 21 bits per axis, so sorting by key puts every octree
//! cell's particles in one contiguous run (hu2011 section 3, yokota2012
//! section 3.2).

use rayon::prelude::*;

/// Levels of the octree a 63-bit key resolves: the depth bound.
pub const MAX_LEVEL: u32 = 21;

/// A cube holding every particle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub center: [f64; 3],
    /// Half the side length.
    pub half: f64,
}

impl Bounds {
    /// The cube of side 1 about the origin (the frame [`to_unit_cube`]
    /// moves points into).
    ///
    /// [`to_unit_cube`]: super::soa::to_unit_cube
    pub const UNIT: Bounds = Bounds {
        center: [0.0; 3],
        half: 0.5,
    };

    /// The smallest cube around the points, enlarged by a hair so that the
    /// points on its faces map inside it. Empty input gives a unit cube.
    pub fn of(pos: [&[f64]; 3]) -> Bounds {
        if pos[0].is_empty() {
            return Bounds {
                center: [0.0; 3],
                half: 1.0,
            };
        }
        Bounds::around(&Span::of(pos))
    }

    /// The smallest cube around the box `span` (not empty), enlarged by a
    /// hair as [`Bounds::of`]'s.
    pub fn around(span: &Span) -> Bounds {
        let (lo, hi) = (span.lo, span.hi);
        let center = [0, 1, 2].map(|c| 0.5 * (lo[c] + hi[c]));
        let mut half = (0..3).map(|c| 0.5 * (hi[c] - lo[c])).fold(0.0, f64::max);
        // Coincident points still get a cube of finite size.
        let scale = center
            .iter()
            .map(|c| c.abs())
            .fold(half, f64::max)
            .max(1e-300);
        half = (half * (1.0 + 1e-12)).max(scale * 1e-12);
        Bounds { center, half }
    }

    /// The smallest cube holding both cubes (the one cube a source tree
    /// and a target tree are built in, so that their cells lie on one
    /// lattice).
    pub fn union(&self, other: &Bounds) -> Bounds {
        if self == other {
            return *self;
        }
        let lo = [0, 1, 2].map(|a| (self.center[a] - self.half).min(other.center[a] - other.half));
        let hi = [0, 1, 2].map(|a| (self.center[a] + self.half).max(other.center[a] + other.half));
        let center = [0, 1, 2].map(|a| 0.5 * (lo[a] + hi[a]));
        let half = (0..3)
            .map(|a| (0.5 * (hi[a] - lo[a])) * (1.0 + 1e-15))
            .fold(self.half.max(other.half), f64::max);
        Bounds { center, half }
    }

    /// This cube where the points' box `span` lies inside it, else the
    /// smallest cube holding both ([`Bounds::union`]): a cube given to an
    /// evaluation (a lattice shared with other processes' trees) kept
    /// exactly where it holds the points, so that the lattices agree bit
    /// for bit. (The box, not the points' own cube: a process's part of a
    /// cube is rarely a cube, and the cube around it reaches past the
    /// shared one.)
    pub fn holding(&self, span: &Span) -> Bounds {
        let inside = (0..3).all(|a| {
            span.lo[a] >= self.center[a] - self.half && span.hi[a] < self.center[a] + self.half
        });
        match (span.is_empty(), inside) {
            (true, _) | (_, true) => *self,
            _ => self.union(&Bounds::around(span)),
        }
    }

    /// The corner with the smallest coordinates.
    pub fn low(&self) -> [f64; 3] {
        self.center.map(|c| c - self.half)
    }
}

/// The box around some points: the least and greatest coordinate along
/// each axis (`lo > hi` where there are none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub lo: [f64; 3],
    pub hi: [f64; 3],
}

impl Span {
    /// No points.
    pub const EMPTY: Span = Span {
        lo: [f64::INFINITY; 3],
        hi: [f64::NEG_INFINITY; 3],
    };

    /// The box around the points `pos` (one array an axis), on every core.
    pub fn of(pos: [&[f64]; 3]) -> Span {
        let mm = |c: usize| {
            pos[c]
                .par_iter()
                .fold(
                    || (f64::INFINITY, f64::NEG_INFINITY),
                    |(a, b), &x| (a.min(x), b.max(x)),
                )
                .reduce(
                    || (f64::INFINITY, f64::NEG_INFINITY),
                    |(a, b), (c, d)| (a.min(c), b.max(d)),
                )
        };
        let (a, b, c) = (mm(0), mm(1), mm(2));
        Span {
            lo: [a.0, b.0, c.0],
            hi: [a.1, b.1, c.1],
        }
    }

    /// The box around both.
    pub fn join(&self, other: &Span) -> Span {
        Span {
            lo: [0, 1, 2].map(|a| self.lo[a].min(other.lo[a])),
            hi: [0, 1, 2].map(|a| self.hi[a].max(other.hi[a])),
        }
    }

    pub fn is_empty(&self) -> bool {
        (0..3).any(|a| self.lo[a] > self.hi[a])
    }
}

/// Spreads the low 21 bits of `x` so that two zero bits follow each.
fn spread(x: u64) -> u64 {
    let mut x = x & 0x1f_ffff;
    x = (x | (x << 32)) & 0x001f_0000_0000_ffff;
    x = (x | (x << 16)) & 0x001f_0000_ff00_00ff;
    x = (x | (x << 8)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x << 4)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x << 2)) & 0x1249_2492_4924_9249;
    x
}

/// [`spread`] undone: every third bit of `x` from the lowest, packed.
fn compact(x: u64) -> u64 {
    let mut x = x & 0x1249_2492_4924_9249;
    x = (x ^ (x >> 2)) & 0x10c3_0c30_c30c_30c3;
    x = (x ^ (x >> 4)) & 0x100f_00f0_0f00_f00f;
    x = (x ^ (x >> 8)) & 0x001f_0000_ff00_00ff;
    x = (x ^ (x >> 16)) & 0x001f_0000_0000_ffff;
    (x ^ (x >> 32)) & 0x1f_ffff
}

/// The key prefixes of the cells beside the cell of prefix `prefix` at
/// `level` (its faces', edges' and corners' neighbours at that level,
/// those inside the root cube), in no particular order.
pub fn neighbours(prefix: u64, level: u32) -> impl Iterator<Item = u64> {
    let at = [0, 1, 2].map(|a| compact(prefix >> a) as i64);
    let side = 1i64 << level;
    (0..27)
        .map(move |i| [i % 3 - 1, (i / 3) % 3 - 1, i / 9 - 1].map(|d: i64| d))
        .filter(|d| *d != [0; 3])
        .map(move |d| [0, 1, 2].map(|a| at[a] + d[a]))
        .filter(move |c| c.iter().all(|&x| (0..side).contains(&x)))
        .map(|c| spread(c[0] as u64) | (spread(c[1] as u64) << 1) | (spread(c[2] as u64) << 2))
}

/// The integer coordinate of `x` along one axis: 0 .. 2^21 - 1.
fn cell_index(x: f64, low: f64, side: f64) -> u64 {
    let n = (1u64 << MAX_LEVEL) as f64;
    let t = ((x - low) / side * n).floor();
    t.clamp(0.0, n - 1.0) as u64
}

/// The Morton key of a point in the bounds: x in the lowest bit of each
/// triple, so the octant of level `l` is bits `3 (21 - l) .. 3 (21 - l) + 3`.
pub fn key(p: [f64; 3], b: &Bounds) -> u64 {
    let low = b.low();
    let side = 2.0 * b.half;
    let [x, y, z] = [0, 1, 2].map(|c| cell_index(p[c], low[c], side));
    spread(x) | (spread(y) << 1) | (spread(z) << 2)
}

/// The octant (0..8) of a key at `level` (1 = the root's children).
pub fn octant(key: u64, level: u32) -> u64 {
    (key >> (3 * (MAX_LEVEL - level))) & 7
}

/// Keys of all points and the order that sorts them (stable: equal keys
/// keep their input order).
pub fn sorted_keys(pos: [&[f64]; 3], b: &Bounds) -> (Vec<u64>, Vec<u32>) {
    let n = pos[0].len();
    let mut pairs: Vec<(u64, u32)> = (0..n)
        .into_par_iter()
        .map(|i| (key([pos[0][i], pos[1][i], pos[2][i]], b), i as u32))
        .collect();
    pairs.par_sort_unstable();
    pairs.into_iter().unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A given cube is kept where the points' box lies inside it, even
    /// where the cube around the points would not (a process's part of a
    /// shared cube, a slab of it); else it grows to hold both.
    #[test]
    fn a_cube_is_kept_where_it_holds_the_points() {
        let cube = Bounds::around(&Span {
            lo: [0.0; 3],
            hi: [1.0; 3],
        });
        let slab = Span {
            lo: [0.0, 0.0, 0.0],
            hi: [0.5, 1.0, 1.0],
        };
        assert_eq!(cube.holding(&slab), cube, "a slab of the cube");
        assert_eq!(cube.holding(&Span::EMPTY), cube, "no points");
        let out = Span {
            lo: [0.2, -0.5, 0.3],
            hi: [0.4, 0.6, 0.9],
        };
        let grown = cube.holding(&out);
        for a in 0..3 {
            for span in [&slab, &out] {
                assert!(span.lo[a] >= grown.center[a] - grown.half);
                assert!(span.hi[a] <= grown.center[a] + grown.half);
            }
        }
        assert!(grown.half > cube.half);
    }

    #[test]
    fn neighbours_are_the_cells_beside() {
        for x in [0u64, 1, 5, 0x1f_ffff, 123_456] {
            assert_eq!(compact(spread(x)), x);
        }
        // A corner cell of level 2 has 7 neighbours, an inner one 26;
        // each one step away along every axis at most.
        let prefix = |c: [u64; 3]| spread(c[0]) | (spread(c[1]) << 1) | (spread(c[2]) << 2);
        assert_eq!(neighbours(prefix([0, 0, 0]), 2).count(), 7);
        let inner: Vec<u64> = neighbours(prefix([1, 2, 1]), 2).collect();
        assert_eq!(inner.len(), 26);
        for n in inner {
            let c = [0, 1, 2].map(|a| compact(n >> a) as i64);
            let d = [c[0] - 1, c[1] - 2, c[2] - 1];
            assert!(d.iter().all(|d| d.abs() <= 1) && d != [0; 3], "{c:?}");
        }
        assert_eq!(neighbours(0, 0).count(), 0, "the root has none");
    }

    #[test]
    fn spread_interleaves() {
        assert_eq!(spread(0b1), 0b1);
        assert_eq!(spread(0b11), 0b1001);
        assert_eq!(spread(0x1f_ffff).count_ones(), 21);
    }

    #[test]
    fn octants_follow_the_coordinates() {
        let b = Bounds {
            center: [0.0; 3],
            half: 1.0,
        };
        // x high, y low, z high: octant 0b101.
        assert_eq!(octant(key([0.5, -0.5, 0.5], &b), 1), 0b101);
        assert_eq!(octant(key([-0.9, -0.9, -0.9], &b), 1), 0);
        assert_eq!(octant(key([0.9, 0.9, 0.9], &b), 1), 7);
        // Level 2 inside the (+,+,+) octant.
        assert_eq!(octant(key([0.25, 0.75, 0.25], &b), 2), 0b010);
    }

    #[test]
    fn bounds_hold_every_point_even_coincident_ones() {
        let xs = [1.0, 1.0];
        let b = Bounds::of([&xs, &xs, &xs]);
        assert!(b.half > 0.0);
        let b = Bounds::of([&[0.0, 2.0], &[-1.0, 1.0], &[5.0, 5.0]]);
        assert_eq!(b.center, [1.0, 0.0, 5.0]);
        assert!(b.half >= 1.0);
    }
}
