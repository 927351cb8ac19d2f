//! Fresh host memory for large arrays, first written on every core.
//!
//! The first write to a fresh page costs a fault; on the GPU hosts a
//! fault costs some microseconds, and an array of 10^7 values filled by
//! one thread (a copy back from the device, a concatenation, an MPI
//! receive) spent most of its time there: 0.2 s to join 2 x 10^7 sources
//! to what a process received, 0.05 s to copy 4 x 10^6 back from the GPU
//! (2026-11-28). Written on every core the faults run side by side.

use rayon::prelude::*;

/// Below this many values one thread fills an array sooner.
const PARALLEL_FROM: usize = 1 << 18;

/// `n` default values, the pages first written on every core.
pub(crate) fn touched<T: Copy + Default + Send + Sync>(n: usize) -> Vec<T> {
    if n < PARALLEL_FROM {
        return vec![T::default(); n];
    }
    let mut v = Vec::with_capacity(n);
    v.par_extend(rayon::iter::repeat_n(T::default(), n));
    v
}

/// The particles `a` followed by `b` (made alike), each array made once
/// at its full length by [`touched`] and copied into on every core.
#[cfg(feature = "mpi")]
pub(crate) fn joined<R: crate::real::Real>(
    a: &crate::particles::Particles<R>,
    b: &crate::particles::Particles<R>,
) -> crate::particles::Particles<R> {
    let join = |x: &[R], y: &[R]| {
        let mut v: Vec<R> = touched(x.len() + y.len());
        let (head, tail) = v.split_at_mut(x.len());
        for (to, from) in [(head, x), (tail, y)] {
            to.par_chunks_mut(1 << 16)
                .zip(from.par_chunks(1 << 16))
                .for_each(|(t, f)| t.copy_from_slice(f));
        }
        v
    };
    crate::particles::Particles {
        kernel: a.kernel,
        role: a.role,
        layout: a.layout.clone(),
        pos: [0, 1, 2].map(|c| join(&a.pos[c], &b.pos[c])),
        slots: a
            .slots
            .iter()
            .zip(&b.slots)
            .map(|(x, y)| join(x, y))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_arrays_are_default_at_every_length() {
        for n in [
            0,
            1,
            PARALLEL_FROM - 1,
            PARALLEL_FROM,
            3 * PARALLEL_FROM + 7,
        ] {
            let v: Vec<f32> = touched(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&x| x == 0.0));
        }
    }
}
