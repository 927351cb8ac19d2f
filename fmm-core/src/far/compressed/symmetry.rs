//! Symmetric kernels: one basis for both sides, and half the operators.
//!
//! Why: a kernel whose matrix satisfies `K(-r) = K(r)^T` (the Stokeslet,
//! singular or regularised with a uniform core; a potential alone, as
//! Coulomb or Yukawa without their gradient) gives two cells' operators
//! that are each other's transposes: with `key'` the key of the same two
//! cells seen from the other side (levels swapped, offset negated),
//! `A(key') = A(key)^T`, entry by entry (a target node `t` and a source
//! node `s` of `key` are the source node `t` and the target node `s` of
//! `key'`, and their offsets are opposite). So the target basis of a level
//! serves as its source basis, fitted once to both sides' operators, and of
//! two partner keys one operator is compressed and the other is its
//! transpose: the bases' Gram products, the eigenproblems and the
//! compressed operators of the first evaluation are halved (the order-6
//! Stokeslet's took most of it).
//!
//! As homogeneity ([`super::scaling`]), it is measured, not declared: the
//! operator and its partner's are evaluated for a probe key or two and
//! compared to rounding. It needs as many target channels as source
//! components (the operators square); with a homogeneous kernel, whose
//! operators are kept at the reference level, one factor for every
//! channel (the partner's shape moved there scales them all alike).

use super::scaling::{Scaling, REFERENCE_LEVEL};
use super::{Key, Setup};
use crate::kernel::Kernel;

/// Relative difference between an operator and its partner's transpose
/// tolerated (rounding is about 1e-15 of the largest entry).
const TOLERANCE: f64 = 1e-11;

/// The key whose operator is `key`'s transposed times a factor `phi`:
/// `A(partner) = phi A(key)^T`. Without `scaling`, the same two cells from
/// the other side (`phi = 1`); with it (`key` at the reference level), that
/// key's shape at the reference level, `phi` undoing its scaling there.
/// `None` where the shape leaves the lattice or the channels scale apart.
pub(super) fn partner(key: &Key, scaling: Option<&Scaling>) -> Option<(Key, f64)> {
    let other = Key {
        target_level: key.source_level,
        source_level: key.target_level,
        offset: key.offset.map(|x| -x),
    };
    let Some(s) = scaling else {
        return Some((other, 1.0));
    };
    let f = s.factor(0, other.target_level);
    let uniform = (0..s.doubled.len()).all(|c| s.doubled[c] == s.doubled[0]);
    // A(other) = f A(shape) for every channel alike.
    (uniform && f.is_finite() && f != 0.0).then_some((s.canonical(&other)?, 1.0 / f))
}

/// Whether the kernel's operators over `keys` (at the reference level
/// when `scaling` is given) are their partners' transposes: checked on the
/// first key and on the first whose levels differ.
pub(super) fn measure<K: Kernel>(
    setup: &Setup<'_>,
    keys: &[Key],
    scaling: Option<&Scaling>,
) -> bool {
    let (rows, cols) = (setup.rows(), setup.cols());
    if rows != cols || keys.is_empty() {
        return false;
    }
    let moved = |k: &Key| match scaling {
        Some(s) => s.canonical(k),
        None => Some(*k),
    };
    let mut probes: Vec<Key> = keys.first().and_then(moved).into_iter().collect();
    if let Some(k) = keys.iter().find(|k| k.target_level != k.source_level) {
        probes.extend(moved(k));
    }
    if let Some(s) = scaling {
        debug_assert!(probes.iter().all(|p| p.target_level == REFERENCE_LEVEL));
        if keys
            .iter()
            .any(|k| s.canonical(k).and_then(|c| partner(&c, Some(s))).is_none())
        {
            return false;
        }
    }
    probes.iter().all(|key| {
        let Some((other, phi)) = partner(key, scaling) else {
            return false;
        };
        let (a, b) = (setup.operator::<K>(key), setup.operator::<K>(&other));
        // Both row by row: a[i * cols + j] = A(key)[i][j].
        let big = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        big > 0.0
            && (0..rows).all(|i| {
                (0..cols)
                    .all(|j| (b[i * cols + j] - phi * a[j * cols + i]).abs() <= TOLERANCE * big)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::far::chebyshev::Chebyshev;
    use crate::kernels::{BiotSavart, Gravity, Stokeslet, StokesletSingular, Yukawa};

    /// The Stokeslets and Biot-Savart (its matrix skew: `K(-r) = -K(r) =
    /// K(r)^T`) are symmetric, a potential with its gradient is not (the
    /// operators are not square); with a homogeneous kernel the partner is
    /// its shape at the reference level.
    #[test]
    fn symmetry_is_measured_from_the_kernel() {
        let basis = Chebyshev::new(3);
        let keys = [
            Key {
                target_level: 4,
                source_level: 4,
                offset: [6 << 17, 0, 2 << 17],
            },
            Key {
                target_level: 4,
                source_level: 5,
                offset: [7 << 16, 1 << 16, -(1 << 16)],
            },
        ];
        let setup = |params: &[f64], fields: &[f64], strength: &'static [usize], n_outputs| {
            Setup::for_test(&basis, params, fields, strength, n_outputs)
        };
        let stokes = setup(&[], &[0.0; 3], &[0, 1, 2], 3);
        assert!(measure::<StokesletSingular>(&stokes, &keys, None));
        let sc = super::super::scaling::measure::<StokesletSingular>(&stokes, &keys).unwrap();
        assert!(measure::<StokesletSingular>(&stokes, &keys, Some(&sc)));
        let blob = setup(&[0.01, 1.0], &[0.0; 3], &[0, 1, 2], 3);
        assert!(measure::<Stokeslet>(&blob, &keys, None));
        let core = setup(&[], &[0.0, 0.0, 0.0, 0.02], &[0, 1, 2], 3);
        assert!(measure::<BiotSavart>(&core, &keys, None));
        assert!(!measure::<Gravity>(
            &setup(&[0.0], &[0.0], &[0], 4),
            &keys,
            None
        ));
        assert!(!measure::<Yukawa>(
            &setup(&[4.0], &[0.0], &[0], 4),
            &keys,
            None
        ));

        // The partner's operator is the transpose, scaled by phi, also
        // across levels with the homogeneous kernel's shapes.
        let (rows, cols) = (stokes.rows(), stokes.cols());
        for key in &keys {
            let (p, phi) = partner(key, Some(&sc)).unwrap();
            assert_eq!(p.target_level, REFERENCE_LEVEL);
            let (a, b) = (
                stokes.operator::<StokesletSingular>(key),
                stokes.operator::<StokesletSingular>(&p),
            );
            let big = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for i in 0..rows {
                for j in 0..cols {
                    let d = b[i * cols + j] - phi * a[j * cols + i];
                    assert!(d.abs() <= 1e-12 * big, "{key:?} ({i}, {j})");
                }
            }
            // And back.
            let (q, psi) = partner(&p, Some(&sc)).unwrap();
            assert_eq!(q, *key);
            assert!((phi * psi - 1.0).abs() < 1e-14);
        }
    }

    /// An operator taken from its partner is the partner's transposed and
    /// scaled, as a product's factor and as entries.
    #[test]
    fn a_partners_operator_is_its_transpose() {
        use super::super::Small;
        use crate::far::linalg::{gemm, View};
        // P = [[1, 3, 5], [2, 4, 6]] (2 x 3, column-major): C = 2 P^T.
        let p = Small {
            data: std::sync::Arc::new(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            transposed: Some(2.0),
        };
        let want = [2.0, 6.0, 10.0, 4.0, 8.0, 12.0];
        assert_eq!(&*p.column_major(3), &want);
        let (view, by) = p.view(3);
        let x = [1.0, -1.0];
        let mut y = [0.0; 3];
        gemm(3, 2, 1, by, view, View::new(&x, 2), 0.0, &mut y, 3);
        assert_eq!(y, [want[0] - want[3], want[1] - want[4], want[2] - want[5]]);
    }
}
