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
        let n = pos[0].len();
        if n == 0 {
            return Bounds {
                center: [0.0; 3],
                half: 1.0,
            };
        }
        let (lo, hi) = {
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
            ([a.0, b.0, c.0], [a.1, b.1, c.1])
        };
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

    /// This cube where it holds `other`, else the smallest cube holding
    /// both ([`Bounds::union`]): a cube given to an evaluation (a lattice
    /// shared with other processes' trees) kept exactly where it holds
    /// the points, so that the lattices agree bit for bit.
    pub fn holding(&self, other: &Bounds) -> Bounds {
        let inside =
            (0..3).all(|a| (other.center[a] - self.center[a]).abs() + other.half <= self.half);
        if inside {
            *self
        } else {
            self.union(other)
        }
    }

    /// The corner with the smallest coordinates.
    pub fn low(&self) -> [f64; 3] {
        self.center.map(|c| c - self.half)
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
