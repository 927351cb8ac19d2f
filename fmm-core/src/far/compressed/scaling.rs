//! Homogeneous kernels: one set of compressed operators for every level.
//!
//! Why: a kernel with no length of its own (Coulomb, gravity without
//! softening, the singular Stokeslet, Biot-Savart without a core) is
//! homogeneous: doubling every length multiplies each output by a fixed
//! factor (1/2 for `1/r`, 1/4 for its gradient). Its M2L operator between
//! two cells then depends on their levels only through that factor: the
//! operator of a pair at level `l` is the operator of the same shape at a
//! reference level with each output's rows scaled. So one set of
//! operators, fitted and compressed at the reference level, serves every
//! level, where otherwise each level has its own bases and operators: the
//! first evaluation's precomputation shrinks by the number of levels.
//!
//! Nothing is declared: homogeneity is measured. For each level the pairs
//! use (and the reference level), one operator is evaluated at that
//! level and one with every length doubled; the rows of each output
//! channel must be one multiple of the other to rounding, with the same
//! multiple at every level. A parameter with a length (a softening, a
//! screening length) or a core radius among the source fields breaks it,
//! and the levels keep their own operators.
//!
//! With `U_ref`, `V_ref` the reference level's bases and `D_l` the
//! channels' factors from the reference level to level `l`, a level's
//! bases are `U_l = D_l U_ref` and `V_l = V_ref`, and a pair's operator is
//! that of its shape moved to the reference level: `A ~ D_l U_ref C V_ref^T`.

use super::{Key, Setup};
use crate::kernel::Kernel;
use crate::tree::morton::MAX_LEVEL;

/// The level the operators of a homogeneous kernel are computed at: their
/// keys have this target level.
pub(super) const REFERENCE_LEVEL: u8 = 4;

/// Relative difference between the scaled and the measured operator
/// tolerated (rounding is about 1e-15 of the largest entry).
const TOLERANCE: f64 = 1e-11;

/// A homogeneous kernel's factor per output channel when every length
/// doubles (`channels = outputs * (1 + target_slots)`, in the operators'
/// row order).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Scaling {
    pub(super) doubled: Vec<f64>,
}

impl Scaling {
    /// The factor of channel `c` from the reference level to `level`.
    pub(super) fn factor(&self, c: usize, level: u8) -> f64 {
        // Lengths at `level` are 2^(REFERENCE_LEVEL - level) those at the
        // reference level.
        self.doubled[c].powi(REFERENCE_LEVEL as i32 - level as i32)
    }

    /// `key` moved to the reference level (lengths scaled by a power of
    /// two), `None` where the levels or offset leave the lattice.
    pub(super) fn canonical(&self, key: &Key) -> Option<Key> {
        shifted(key, REFERENCE_LEVEL as i32 - key.target_level as i32)
    }
}

/// `key` with both levels moved by `by` (cells `2^-by` times the size),
/// its offset scaled to match exactly, or `None`.
fn shifted(key: &Key, by: i32) -> Option<Key> {
    let level = |l: u8| {
        let l = l as i32 + by;
        (0..=MAX_LEVEL as i32).contains(&l).then_some(l as u8)
    };
    let (target_level, source_level) = (level(key.target_level)?, level(key.source_level)?);
    let mut offset = [0i32; 3];
    for (o, &x) in offset.iter_mut().zip(&key.offset) {
        *o = if by <= 0 {
            x.checked_mul(1i32.checked_shl((-by) as u32)?)?
        } else {
            let d = 1i32.checked_shl(by as u32)?;
            if x % d != 0 {
                return None;
            }
            x / d
        };
    }
    Some(Key {
        target_level,
        source_level,
        offset,
    })
}

/// The factor of each channel between `a` and `b` (`b ~ f a`), if `b` is
/// `a` scaled channel by channel to [`TOLERANCE`].
fn channel_factors(a: &[f64], b: &[f64], channels: usize, cols: usize) -> Option<Vec<f64>> {
    let rows = a.len() / cols;
    let mut factors = Vec::with_capacity(channels);
    for c in 0..channels {
        let entries = || {
            (c..rows)
                .step_by(channels)
                .flat_map(|r| r * cols..(r + 1) * cols)
        };
        let (mut ab, mut aa, mut big) = (0.0, 0.0, 0.0f64);
        for i in entries() {
            ab += a[i] * b[i];
            aa += a[i] * a[i];
            big = big.max(b[i].abs());
        }
        if aa == 0.0 {
            // A channel that is zero (a target field's difference for a
            // kernel that ignores it) must stay zero.
            if big != 0.0 {
                return None;
            }
            factors.push(1.0);
            continue;
        }
        let f = ab / aa;
        let off = entries()
            .map(|i| (b[i] - f * a[i]).abs())
            .fold(0.0f64, f64::max);
        if !(f.is_finite() && f != 0.0 && off <= TOLERANCE * big) {
            return None;
        }
        factors.push(f);
    }
    Some(factors)
}

/// The kernel's [`Scaling`] where it is homogeneous over the levels of
/// `keys` and the reference level, `None` otherwise (or where a key cannot
/// be moved to the reference level).
pub(super) fn measure<K: Kernel>(setup: &Setup<'_>, keys: &[Key]) -> Option<Scaling> {
    let channels = setup.channels();
    let cols = setup.cols();
    // One probe a target level: a key of that level, and the reference
    // level's shape of the first key.
    let mut probes: Vec<Key> = Vec::new();
    for key in keys {
        if !probes.iter().any(|p| p.target_level == key.target_level) {
            probes.push(*key);
        }
    }
    let first = *keys.first()?;
    probes.push(shifted(
        &first,
        REFERENCE_LEVEL as i32 - first.target_level as i32,
    )?);
    let mut doubled: Option<Vec<f64>> = None;
    for probe in &probes {
        // Every length doubled, or halved where the levels do not allow.
        let (other, up) = match shifted(probe, -1) {
            Some(k) => (k, true),
            None => (shifted(probe, 1)?, false),
        };
        let (a, b) = (setup.operator::<K>(probe), setup.operator::<K>(&other));
        let f = if up {
            channel_factors(&a, &b, channels, cols)?
        } else {
            channel_factors(&b, &a, channels, cols)?
        };
        match &doubled {
            None => doubled = Some(f),
            Some(d) => {
                let same = d
                    .iter()
                    .zip(&f)
                    .all(|(x, y)| (x - y).abs() <= TOLERANCE * 1e2 * x.abs());
                if !same {
                    return None;
                }
            }
        }
    }
    let scaling = Scaling { doubled: doubled? };
    keys.iter()
        .all(|k| scaling.canonical(k).is_some())
        .then_some(scaling)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::far::chebyshev::Chebyshev;
    use crate::kernels::{Gravity, StokesletSingular, Yukawa};

    /// Homogeneity is measured from the kernel's values: gravity without
    /// softening and the singular Stokeslet are homogeneous (the
    /// potential halves and the field quarters when lengths double), a
    /// softening or a screening length is not; the factors scale the
    /// reference level's operators to each level's.
    #[test]
    fn homogeneity_is_measured_from_the_kernel() {
        let basis = Chebyshev::new(3);
        let keys = [
            Key {
                target_level: 3,
                source_level: 3,
                offset: [6 << 18, 0, 2 << 18],
            },
            Key {
                target_level: 5,
                source_level: 5,
                offset: [0, 3 << 17, -(2 << 17)],
            },
            Key {
                target_level: 4,
                source_level: 5,
                offset: [7 << 16, 1 << 16, -(1 << 16)],
            },
        ];
        let setup = |params: &[f64], fields: usize, strength: &'static [usize], n_outputs| {
            Setup::for_test(&basis, params, &vec![0.0; fields], strength, n_outputs)
        };
        let close = |got: &Scaling, want: &[f64]| {
            got.doubled.len() == want.len()
                && got
                    .doubled
                    .iter()
                    .zip(want)
                    .all(|(g, w)| (g - w).abs() < 1e-12)
        };
        let g = measure::<Gravity>(&setup(&[0.0], 1, &[0], 4), &keys).expect("homogeneous");
        assert!(close(&g, &[0.5, 0.25, 0.25, 0.25]), "{g:?}");
        let st = measure::<StokesletSingular>(&setup(&[], 3, &[0, 1, 2], 3), &keys)
            .expect("homogeneous");
        assert!(close(&st, &[0.5; 3]), "{st:?}");
        assert_eq!(measure::<Gravity>(&setup(&[1e-3], 1, &[0], 4), &keys), None);
        assert_eq!(measure::<Yukawa>(&setup(&[4.0], 1, &[0], 4), &keys), None);

        // A key's operator is the reference level's of its shape, its rows
        // scaled by the factors.
        let s = setup(&[0.0], 1, &[0], 4);
        for key in &keys {
            let a = s.operator::<Gravity>(key);
            let b = s.operator::<Gravity>(&g.canonical(key).unwrap());
            let cols = s.cols();
            let big = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                let f = g.factor((i / cols) % 4, key.target_level);
                assert!((x - f * y).abs() <= 1e-12 * big, "{key:?} entry {i}");
            }
        }
    }

    #[test]
    fn shifting_keeps_the_shape_on_the_lattice() {
        let key = Key {
            target_level: 5,
            source_level: 6,
            offset: [3 << 15, -(1 << 15), 0],
        };
        let up = shifted(&key, -1).unwrap();
        assert_eq!((up.target_level, up.source_level), (4, 5));
        assert_eq!(up.offset, [3 << 16, -(1 << 16), 0]);
        assert_eq!(shifted(&up, 1), Some(key));
        // Past the finest level, or an offset no longer a whole number of
        // the deepest half sides.
        assert_eq!(shifted(&key, MAX_LEVEL as i32), None);
        let odd = Key {
            offset: [3, 0, 0],
            ..key
        };
        assert_eq!(shifted(&odd, 1), None);
    }
}
