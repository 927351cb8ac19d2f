//! Moving particles between processes (an all-to-all of each array, its
//! counts exchanged first) and bringing values computed for them back to
//! the processes that sent them, in those processes' order: what puts a
//! partition's particles where it says, and returns their outputs.

use mpi::collective::SystemOperation;
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::traits::{Communicator, CommunicatorCollectives};
use mpi::Count;
use std::time::Instant;

use rayon::prelude::*;

use crate::error::Error;
use crate::memory::touched;
use crate::particles::Particles;
use crate::real::Real;

/// Where each of this process's particles goes, and what comes here.
#[derive(Clone, Debug)]
pub struct Migration {
    /// This process's particles in the order they are sent (by process).
    order: Vec<usize>,
    /// Each particle's place in `order`.
    place: Vec<usize>,
    send: Vec<Count>,
    send_at: Vec<Count>,
    receive: Vec<Count>,
    receive_at: Vec<Count>,
    /// The most particles any process sends or gets: how many values a
    /// particle one all-to-all can carry within MPI's counts.
    most: usize,
}

/// Offsets of blocks of `counts`.
fn offsets(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect()
}

/// Counts or offsets of particles as counts or offsets of values, `width`
/// a particle.
fn wide(counts: &[Count], width: usize) -> Vec<Count> {
    counts.iter().map(|&c| c * width as Count).collect()
}

/// The rows `at[k]` of `values` (`width` a row), in the order of `at`.
fn rows_at<T: Copy + Default + Send + Sync>(values: &[T], at: &[usize], width: usize) -> Vec<T> {
    if width == 1 {
        return at.par_iter().map(|&i| values[i]).collect();
    }
    let mut out = vec![T::default(); at.len() * width];
    out.par_chunks_mut(width)
        .zip(at.par_iter())
        .for_each(|(o, &i)| o.copy_from_slice(&values[i * width..(i + 1) * width]));
    out
}

/// Rows of `width` values (`width` 0: none) moved a column at a time
/// by `move_column`, and interleaved again: where the rows' counts
/// would pass MPI's.
fn by_columns<T: Copy + Default + Send + Sync>(
    values: &[T],
    width: usize,
    move_column: impl Fn(&[T]) -> Vec<T>,
) -> Vec<T> {
    let rows = values.len().checked_div(width).unwrap_or(0);
    let columns: Vec<Vec<T>> = (0..width)
        .map(|k| {
            let column: Vec<T> = (0..rows).map(|i| values[i * width + k]).collect();
            move_column(&column)
        })
        .collect();
    let moved = columns.first().map_or(0, Vec::len);
    let mut out = vec![T::default(); moved * width];
    out.par_chunks_mut(width.max(1))
        .enumerate()
        .for_each(|(i, row)| {
            for (k, v) in row.iter_mut().enumerate() {
                *v = columns[k][i];
            }
        });
    out
}

/// Particles a task of [`by_process`] takes.
const RUN: usize = 1 << 16;

/// The particles going to processes `dest` (each below `size`) in the
/// order they are sent, by process and each process's in this process's
/// order: each particle's place in that order and the count each process
/// gets. A counting sort on every core, a run of particles a task, each
/// run's places starting where the runs before it leave each process's
/// (one thread took 0.08 s of the lattice filter's 1.0 s for 4 x 10^6
/// particles on the H200 host).
fn by_process(dest: &[i32], size: usize) -> (Vec<usize>, Vec<usize>, Vec<Count>) {
    let counts: Vec<Vec<usize>> = dest
        .par_chunks(RUN)
        .map(|run| {
            let mut n = vec![0; size];
            for &d in run {
                n[d as usize] += 1;
            }
            n
        })
        .collect();
    let send: Vec<Count> = (0..size)
        .map(|q| counts.iter().map(|n| n[q]).sum::<usize>() as Count)
        .collect();
    // Each run's first place for each process.
    let mut next: Vec<usize> = offsets(&send).iter().map(|&c| c as usize).collect();
    let starts: Vec<Vec<usize>> = counts
        .iter()
        .map(|n| {
            let here = next.clone();
            next.iter_mut().zip(n).for_each(|(a, b)| *a += b);
            here
        })
        .collect();
    let mut place = vec![0; dest.len()];
    place
        .par_chunks_mut(RUN)
        .zip(dest.par_chunks(RUN))
        .zip(starts)
        .for_each(|((place, run), mut next)| {
            for (p, &d) in place.iter_mut().zip(run) {
                *p = next[d as usize];
                next[d as usize] += 1;
            }
        });
    // SAFETY: a counting sort's places: each of 0..n given once.
    let order = unsafe { inverse(&place) };
    (order, place, send)
}

/// The inverse of the permutation `place` (`order[place[i]] = i`), on
/// every core.
///
/// # Safety
/// `place` is a permutation of `0..place.len()`: each task writes the
/// element its place names, and no two write the same.
unsafe fn inverse(place: &[usize]) -> Vec<usize> {
    /// The array the tasks write into, each to places no other writes.
    struct Into(*mut usize, usize);
    // SAFETY: shared only for `put`, whose callers write disjoint elements.
    unsafe impl Sync for Into {}
    impl Into {
        /// Element `k` set to `v`.
        ///
        /// # Safety
        /// No other task writes element `k`, and nothing reads the array
        /// until the writes are done.
        unsafe fn put(&self, k: usize, v: usize) {
            assert!(k < self.1, "a place past the particles");
            // SAFETY: in bounds (checked); the caller's contract.
            unsafe { *self.0.add(k) = v };
        }
    }
    let mut order = vec![0; place.len()];
    let into = Into(order.as_mut_ptr(), place.len());
    // SAFETY: `place` is a permutation of 0..n (a counting sort's places,
    // each given once), so each element is written by exactly one task;
    // `order` is read after `for_each` returns.
    place
        .par_iter()
        .enumerate()
        .for_each(|(i, &k)| unsafe { into.put(k, i) });
    order
}

/// The particles of `counts` (one count a process) other than `me`'s.
fn away(counts: &[Count], me: usize) -> usize {
    counts
        .iter()
        .enumerate()
        .filter(|&(q, _)| q != me)
        .map(|(_, &n)| n as usize)
        .sum()
}

impl Migration {
    /// The particles of this process go to the processes `dest` (one a
    /// particle, each of `comm`'s ranks); a collective call.
    pub fn new<C: Communicator>(comm: &C, dest: &[i32]) -> Result<Self, Error> {
        let size = comm.size();
        let bad = dest.iter().position(|&d| d < 0 || d >= size);
        super::agree(
            comm,
            match bad {
                Some(i) => Err(Error::BadOption(format!(
                    "particle {i} is sent to process {}, not one of the {size}",
                    dest[i]
                ))),
                None => Ok(()),
            },
        )?;
        let (order, place, send) = by_process(dest, size as usize);
        let mut receive = vec![0 as Count; size as usize];
        comm.all_to_all_into(&send[..], &mut receive[..]);
        let here = dest.len().max(receive.iter().map(|&c| c as usize).sum()) as u64;
        let mut most = 0u64;
        comm.all_reduce_into(&here, &mut most, SystemOperation::max());
        Ok(Migration {
            order,
            place,
            send_at: offsets(&send),
            receive_at: offsets(&receive),
            send,
            receive,
            most: most as usize,
        })
    }

    /// How many particles come to this process.
    pub fn arrivals(&self) -> usize {
        self.receive.iter().map(|&c| c as usize).sum()
    }

    /// One value a particle sent with them: the values of the arrivals, by
    /// sending process, each process's in its order.
    pub fn forward<T: Equivalence + Copy + Default + Send + Sync, C: Communicator>(
        &self,
        comm: &C,
        values: &[T],
    ) -> Vec<T> {
        self.forward_rows(comm, values, 1)
    }

    /// [`Self::forward`] of `width` values a particle (particle `i`'s at
    /// `values[i width..(i + 1) width]`): one all-to-all for a row of
    /// values a particle, the arrivals' rows laid out alike.
    pub fn forward_rows<T: Equivalence + Copy + Default + Send + Sync, C: Communicator>(
        &self,
        comm: &C,
        values: &[T],
        width: usize,
    ) -> Vec<T> {
        if width != 1 && !self.fits(width) {
            return by_columns(values, width, |column| self.forward(comm, column));
        }
        let clock = Instant::now();
        let sent = rows_at(values, &self.order, width);
        self.sent_forward(comm, &sent, width, clock)
    }

    /// [`Self::forward_rows`] of rows that `row(i, r)` writes (particle
    /// `i`'s into `r`, `width` values), straight in the order they are
    /// sent: no rows in this process's order made first and gathered.
    pub fn forward_rows_with<T, C>(
        &self,
        comm: &C,
        width: usize,
        row: impl Fn(usize, &mut [T]) + Sync,
    ) -> Vec<T>
    where
        T: Equivalence + Copy + Default + Send + Sync,
        C: Communicator,
    {
        if width == 0 || (width != 1 && !self.fits(width)) {
            let mut rows = vec![T::default(); self.order.len() * width];
            rows.par_chunks_mut(width.max(1))
                .enumerate()
                .for_each(|(i, r)| row(i, r));
            return self.forward_rows(comm, &rows, width);
        }
        let clock = Instant::now();
        let mut sent = touched(self.order.len() * width);
        sent.par_chunks_mut(width)
            .zip(self.order.par_iter())
            .for_each(|(r, &i)| row(i, r));
        self.sent_forward(comm, &sent, width, clock)
    }

    /// The rows `sent` (in the order they are sent, packed since `clock`)
    /// moved forward: the arrivals' rows.
    fn sent_forward<T, C>(&self, comm: &C, sent: &[T], width: usize, clock: Instant) -> Vec<T>
    where
        T: Equivalence + Copy + Default + Send + Sync,
        C: Communicator,
    {
        // Its pages first written on every core: MPI's copy into fresh
        // memory faults them in one by one ([`crate::memory`]).
        let mut got = touched(self.arrivals() * width);
        let packed = clock.elapsed().as_secs_f64();
        self.all_to_all(comm, sent, &mut got, width, true);
        let moved = clock.elapsed().as_secs_f64() - packed;
        self.say("forward", packed, moved, comm);
        got
    }

    /// [`Self::back_rows`] put straight where they go: `put(out[i], r)`
    /// for this process's particle `i` and its row `r` (`width` values),
    /// `out` one element a particle of this process.
    pub fn back_rows_into<T, U, C>(
        &self,
        comm: &C,
        values: &[T],
        width: usize,
        out: &mut [U],
        put: impl Fn(&mut U, &[T]) + Sync,
    ) where
        T: Equivalence + Copy + Default + Send + Sync,
        U: Send,
        C: Communicator,
    {
        assert_eq!(out.len(), self.order.len(), "one place a particle");
        if width == 0 {
            out.par_iter_mut().for_each(|o| put(o, &[]));
            return;
        }
        if width != 1 && !self.fits(width) {
            let rows = self.back_rows(comm, values, width);
            out.par_iter_mut()
                .zip(rows.par_chunks(width))
                .for_each(|(o, r)| put(o, r));
            return;
        }
        let clock = Instant::now();
        let mut got = touched(self.order.len() * width);
        let made = clock.elapsed().as_secs_f64();
        self.all_to_all(comm, values, &mut got, width, false);
        let moved = clock.elapsed().as_secs_f64() - made;
        out.par_iter_mut()
            .zip(self.place.par_iter())
            .for_each(|(o, &k)| put(o, &got[k * width..(k + 1) * width]));
        self.say("back", clock.elapsed().as_secs_f64() - moved, moved, comm);
    }

    /// One value an arrival (in [`Self::forward`]'s order) sent back to
    /// the process it came from: the values of this process's particles,
    /// in its order.
    pub fn back<T: Equivalence + Copy + Default + Send + Sync, C: Communicator>(
        &self,
        comm: &C,
        values: &[T],
    ) -> Vec<T> {
        self.back_rows(comm, values, 1)
    }

    /// [`Self::back`] of `width` values an arrival, laid out as
    /// [`Self::forward_rows`] lays them.
    pub fn back_rows<T: Equivalence + Copy + Default + Send + Sync, C: Communicator>(
        &self,
        comm: &C,
        values: &[T],
        width: usize,
    ) -> Vec<T> {
        if width != 1 && !self.fits(width) {
            return by_columns(values, width, |column| self.back(comm, column));
        }
        let clock = Instant::now();
        let mut got = touched(self.order.len() * width);
        let made = clock.elapsed().as_secs_f64();
        self.all_to_all(comm, values, &mut got, width, false);
        let moved = clock.elapsed().as_secs_f64() - made;
        let rows = rows_at(&got, &self.place, width);
        let unpacked = clock.elapsed().as_secs_f64() - moved;
        self.say("back", unpacked, moved, comm);
        rows
    }

    /// Says on stderr (`FMM_TRACE`) a move's seconds copying here and in
    /// MPI's all-to-all.
    fn say<C: Communicator>(&self, way: &str, copies: f64, all_to_all: f64, comm: &C) {
        if crate::stats::trace() {
            eprintln!(
                "[fmm] process {}: a move {way} of {} particles: copies {copies:.4} s, \
                 all-to-all {all_to_all:.4} s",
                comm.rank(),
                self.order.len()
            );
        }
    }

    /// One all-to-all of `sent` into `got`, `width` values a particle:
    /// from this process's particles to the arrivals (`forward`), or back.
    fn all_to_all<T: Equivalence, C: Communicator>(
        &self,
        comm: &C,
        sent: &[T],
        got: &mut [T],
        width: usize,
        forward: bool,
    ) {
        let mine = (wide(&self.send, width), wide(&self.send_at, width));
        let theirs = (wide(&self.receive, width), wide(&self.receive_at, width));
        let ((from, from_at), (to, to_at)) = if forward {
            (mine, theirs)
        } else {
            (theirs, mine)
        };
        let out = Partition::new(sent, &from[..], &from_at[..]);
        let mut into = PartitionMut::new(got, &to[..], &to_at[..]);
        comm.all_to_all_varcount_into(&out, &mut into);
    }

    /// Whether rows of `width` values keep every process's counts of
    /// values within MPI's (`i32`); the same answer on every process. (A
    /// value a particle is [`Migration::new`]'s own limit.)
    fn fits(&self, width: usize) -> bool {
        width > 0 && self.most.saturating_mul(width) <= Count::MAX as usize
    }

    /// Particles this process sends to others and gets from them (not
    /// counting those that stay).
    pub fn traffic(&self, me: usize) -> (usize, usize) {
        (away(&self.send, me), away(&self.receive, me))
    }

    /// The particles `p` moved: positions and every field.
    pub fn particles<R: Real + Equivalence + Default, C: Communicator>(
        &self,
        comm: &C,
        p: &Particles<R>,
    ) -> Particles<R> {
        Particles {
            kernel: p.kernel,
            role: p.role,
            layout: p.layout.clone(),
            pos: [0, 1, 2].map(|c| self.forward(comm, &p.pos[c])),
            slots: p.slots.iter().map(|s| self.forward(comm, s)).collect(),
        }
    }
}

/// What the other processes sent here (each of `parts`, one per process
/// in rank order, goes to its process), by sending process, made like
/// `like`; `None` where nothing came. Also the particles sent away and
/// received. A collective call.
///
/// The arrays are made at their full length and first written on every
/// core ([`crate::memory`]); the caller joins them to its own sources
/// where they are evaluated (on the GPU as they are copied there: a join
/// in host memory took 0.03 s at 2^24 sources on the GPU hosts).
pub(crate) fn arrivals<R: Real + Equivalence + Default, C: Communicator>(
    comm: &C,
    parts: &[Particles<R>],
    like: &Particles<R>,
) -> Result<(Option<Particles<R>>, usize, usize), Error> {
    let me = comm.rank() as usize;
    let mut send = Vec::with_capacity(parts.len());
    for p in parts {
        send.push(Count::try_from(p.len()).map_err(|_| {
            Error::BadOption(format!(
                "{} particles for one process: more than MPI's counts hold",
                p.len()
            ))
        })?);
    }
    let mut receive = vec![0 as Count; parts.len()];
    let clock = Instant::now();
    comm.all_to_all_into(&send[..], &mut receive[..]);
    let mut laps = [clock.elapsed().as_secs_f64(), 0.0, 0.0];
    let (sent, received) = (away(&send, me), away(&receive, me));
    let mut swap =
        |get: &dyn Fn(&Particles<R>) -> &[R]| swap(comm, parts, &send, &receive, get, &mut laps);
    let pos = [0, 1, 2].map(|c| swap(&|p| &p.pos[c]));
    let slots = (0..like.slots.len())
        .map(|s| swap(&|p| &p.slots[s]))
        .collect();
    if crate::stats::trace() {
        eprintln!(
            "[fmm] process {me}: exchange: counts {:.4} s, sends packed {:.4} s, all-to-all {:.4} s",
            laps[0], laps[1], laps[2]
        );
    }
    if received == 0 {
        return Ok((None, sent, received));
    }
    let got = Particles {
        kernel: like.kernel,
        role: like.role,
        layout: like.layout.clone(),
        pos,
        slots,
    };
    Ok((Some(got), sent, received))
}

/// One array sent: the arrivals of `get(part)` from every process; the
/// seconds of packing the sends and of the all-to-all added to
/// `laps[1..3]`.
fn swap<R: Real + Equivalence + Default, C: Communicator>(
    comm: &C,
    parts: &[Particles<R>],
    send: &[Count],
    receive: &[Count],
    get: &dyn Fn(&Particles<R>) -> &[R],
    laps: &mut [f64; 3],
) -> Vec<R> {
    let clock = Instant::now();
    let arrivals: usize = receive.iter().map(|&c| c as usize).sum();
    let mut out = touched(send.iter().map(|&c| c as usize).sum());
    let mut at = 0;
    for p in parts {
        let v = get(p);
        out[at..at + v.len()]
            .par_chunks_mut(1 << 16)
            .zip(v.par_chunks(1 << 16))
            .for_each(|(a, b)| a.copy_from_slice(b));
        at += v.len();
    }
    let mut all = touched(arrivals);
    laps[1] += clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let (send_at, receive_at) = (offsets(send), offsets(receive));
    let from = Partition::new(&out[..], send, &send_at[..]);
    let mut into = PartitionMut::new(&mut all[..], receive, &receive_at[..]);
    comm.all_to_all_varcount_into(&from, &mut into);
    laps[2] += clock.elapsed().as_secs_f64();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counting sort on every core is the serial one: by process,
    /// each's particles in their order, `order` and `place` inverse.
    #[test]
    fn particles_by_process_are_a_stable_counting_sort() {
        for (n, size) in [
            (0, 1),
            (5, 3),
            (3 * RUN + 17, 4),
            (2 * RUN, 1),
            (RUN + 1, 70),
        ] {
            let dest: Vec<i32> = (0..n).map(|i| ((i * 7919 + i / 3) % size) as i32).collect();
            let (order, place, send) = by_process(&dest, size);
            let mut want: Vec<usize> = (0..n).collect();
            want.sort_by_key(|&i| dest[i]);
            assert_eq!(order, want, "n {n}, size {size}");
            for (i, &k) in place.iter().enumerate() {
                assert_eq!(order[k], i);
            }
            for (q, &c) in send.iter().enumerate() {
                let got = dest.iter().filter(|&&d| d == q as i32).count();
                assert_eq!(c as usize, got);
            }
        }
    }

    /// Rows moved a column at a time come back as rows, in the order the
    /// columns' move gives them.
    #[test]
    fn rows_moved_by_columns_are_rows_again() {
        let rows: Vec<u32> = (0..12).collect();
        assert_eq!(by_columns(&rows, 3, |c| c.to_vec()), rows);
        let reversed = by_columns(&rows, 3, |c| c.iter().rev().copied().collect());
        assert_eq!(reversed, vec![9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2]);
        assert!(by_columns(&rows, 0, |c| c.to_vec()).is_empty());
    }
}
