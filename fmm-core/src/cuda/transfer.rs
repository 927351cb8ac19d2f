//! Copies of large particle arrays between the host and the GPU.
//!
//! Long arrays go through two page-locked staging buffers that the [`Gpu`]
//! keeps from one call to the next: the host copies a piece into one
//! buffer (on every core) while the device copies the other's piece by
//! DMA. A plain copy from pageable memory makes the driver stage it
//! through its own small buffers on one thread (about 4 GB/s on the H100
//! test host); page-locking the arrays themselves, or fresh staging
//! buffers per call, cost more than they saved (31 to 97 ms at 10^7
//! particles, measured 2026-11-22). Kept buffers cost their allocation
//! once. [`Gpu::set_staging`] turns them off, to compare.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use cudarc::driver::{result, CudaEvent, CudaSlice, DevicePtr, DevicePtrMut, PinnedHostSlice};
use rayon::prelude::*;

use super::device::cuda_err;
use super::Gpu;
use crate::error::Error;
use crate::real::Real;

/// Arrays from this many bytes go through the staging buffers (and, when
/// staging is off, have their pages touched in parallel on download).
const STAGED_BYTES: usize = 1 << 20;

/// Bytes of each of the two staging buffers.
const PIECE: usize = 8 << 20;

/// Host arrays for an evaluation's outputs ([`Gpu::host_outputs_ahead`]).
pub(crate) enum HostOutputs<R> {
    /// Being made on a thread of their own.
    Making(std::thread::JoinHandle<Vec<Vec<R>>>),
    /// Small: made when taken (`slots` arrays of `n`).
    Later(usize, usize),
}

impl<R: Real> HostOutputs<R> {
    /// The arrays, their thread joined (a panic there passed on).
    pub(crate) fn take(self) -> Vec<Vec<R>> {
        match self {
            HostOutputs::Making(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            HostOutputs::Later(slots, n) => vec![vec![R::zero(); n]; slots],
        }
    }
}

/// `n` zeros, their pages faulted in on every core where they are as
/// many as a staged copy's (a copy from the device into fresh pages
/// faults them in one by one). Plain scoped threads, not rayon's: a
/// caller may be on a rayon worker waiting for a thread that makes them
/// ([`Gpu::host_outputs_ahead`]).
fn faulted_in<R: Real>(n: usize) -> Vec<R> {
    let mut v = vec![R::zero(); n];
    if std::mem::size_of_val(v.as_slice()) >= STAGED_BYTES {
        let threads = std::thread::available_parallelism().map_or(4, |t| t.get().min(16));
        std::thread::scope(|s| {
            for c in v.chunks_mut(n.div_ceil(threads)) {
                s.spawn(move || c.fill(R::zero()));
            }
        });
    }
    v
}

/// Bytes per rayon task of the host-side copies.
const TASK: usize = 256 << 10;

/// The two page-locked buffers, and for each the event after the last
/// device copy that used it.
pub(crate) struct Staging {
    buffers: [PinnedHostSlice<u8>; 2],
    done: [Option<CudaEvent>; 2],
}

impl Drop for Staging {
    /// The buffers are page-locked host memory the device may still be
    /// copying from: wait for the last copies before they are freed.
    fn drop(&mut self) {
        for e in self.done.iter().flatten() {
            // Nothing to do about a failure here but free the memory.
            let _ = e.synchronize();
        }
    }
}

/// The staging buffers of one GPU, made on first use.
pub(crate) type StagingSlot = Mutex<Option<Staging>>;

fn bytes_of<R: Real>(a: &[R]) -> &[u8] {
    // SAFETY: R is f32 or f64, plain bytes with no padding.
    unsafe { std::slice::from_raw_parts(a.as_ptr().cast(), std::mem::size_of_val(a)) }
}

fn bytes_of_mut<R: Real>(a: &mut [R]) -> &mut [u8] {
    // SAFETY: as bytes_of; every byte pattern is a valid f32 or f64.
    unsafe { std::slice::from_raw_parts_mut(a.as_mut_ptr().cast(), std::mem::size_of_val(a)) }
}

/// `dst.copy_from_slice(src)` on every core, and whether `src` holds the
/// bytes of `like` (where given: compared piece by piece as each is
/// copied, while it is in the cache, so that `src` is read once).
fn par_copy(dst: &mut [u8], src: &[u8], like: Option<&[u8]>) -> bool {
    // Of another length: not alike, and copied whole all the same.
    let Some(like) = like.filter(|l| l.len() == src.len()) else {
        dst.par_chunks_mut(TASK)
            .zip(src.par_chunks(TASK))
            .for_each(|(d, s)| d.copy_from_slice(s));
        return like.is_none();
    };
    let differs = AtomicBool::new(false);
    dst.par_chunks_mut(TASK)
        .zip(src.par_chunks(TASK).zip(like.par_chunks(TASK)))
        .for_each(|(d, (s, l))| {
            d.copy_from_slice(s);
            if !differs.load(Ordering::Relaxed) && s != l {
                differs.store(true, Ordering::Relaxed);
            }
        });
    !differs.load(Ordering::Relaxed)
}

/// Whether `a` and `b` hold the same bytes (compared on every core).
fn par_equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && a.par_chunks(TASK)
            .zip(b.par_chunks(TASK))
            .all(|(x, y)| x == y)
}

impl Gpu {
    /// Long copies through the two kept page-locked buffers (the default)
    /// or plain copies from pageable memory (to compare).
    pub fn set_staging(&self, on: bool) {
        self.staging_off
            .store(!on, std::sync::atomic::Ordering::Relaxed);
    }

    fn staging_on(&self) -> bool {
        !self.staging_off.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The staging buffers, made if this is the first staged copy.
    fn staging(&self) -> Result<std::sync::MutexGuard<'_, Option<Staging>>, Error> {
        let mut slot = self
            .staging
            .lock()
            .map_err(|_| Error::Cuda("the staging buffers' lock is poisoned".into()))?;
        if slot.is_none() {
            // Not write-combined: the host reads them back on download.
            let make = || {
                // SAFETY: the buffers are written before they are read.
                unsafe { self.ctx.alloc_pinned_with_flags::<u8>(PIECE, 0) }
                    .map_err(cuda_err("allocating page-locked staging buffers"))
            };
            *slot = Some(Staging {
                buffers: [make()?, make()?],
                done: [None, None],
            });
        }
        Ok(slot)
    }

    /// Copies host arrays to new device arrays.
    pub fn upload_many<R: Real>(&self, arrays: &[&[R]]) -> Result<Vec<CudaSlice<R>>, Error> {
        self.upload_many_like(arrays, &[]).map(|(d, _)| d)
    }

    /// Copies host arrays to new device arrays, and says whether all of
    /// them that `like` pairs with a host array (`like[k]` with
    /// `arrays[k]`, where `Some`) hold its values, compared as the staged
    /// copy reads them (short arrays, or staging off: in a pass of its
    /// own): whether targets sit at the sources' points, found in the
    /// sources' copy instead of a pass over both sets of its own (0.005
    /// to 0.007 s at 2^24 on an H200's host, 0.008 to 0.012 s where two
    /// processes of the host did it at once, measured 2026-11-29). Values
    /// alike bit for bit count as the same; once one differs, the rest
    /// are only copied.
    pub fn upload_many_like<R: Real>(
        &self,
        arrays: &[&[R]],
        like: &[Option<&[R]>],
    ) -> Result<(Vec<CudaSlice<R>>, bool), Error> {
        debug_assert!(
            like.len() <= arrays.len(),
            "more arrays to compare than copied"
        );
        let s = self.stream();
        let mut same = true;
        let copies = arrays
            .iter()
            .enumerate()
            .map(|(k, a)| {
                let like = like.get(k).copied().flatten().filter(|_| same);
                let like = like.map(bytes_of);
                if !self.staging_on() || std::mem::size_of_val(*a) < STAGED_BYTES {
                    if let Some(l) = like {
                        same &= par_equal(bytes_of(a), l);
                    }
                    return s.clone_htod(*a).map_err(cuda_err("copy to the device"));
                }
                // SAFETY: every element is written by the copies below.
                let mut d =
                    unsafe { s.alloc::<R>(a.len()) }.map_err(cuda_err("device allocation"))?;
                same &= self.staged_htod_at(bytes_of(a), &mut d, 0, like)?;
                Ok(d)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok((copies, same))
    }

    /// Copies the host arrays `parts` one after another into one new
    /// device array (a process's own sources and those the others sent,
    /// joined on the device rather than in a fresh host array: 0.03 s of
    /// page faults and copies at 2^24 sources on the GPU hosts).
    pub fn upload_joined<R: Real>(&self, parts: &[&[R]]) -> Result<CudaSlice<R>, Error> {
        let s = self.stream();
        let n = parts.iter().map(|p| p.len()).sum();
        // SAFETY: every element is written by the copies below.
        let mut d = unsafe { s.alloc::<R>(n) }.map_err(cuda_err("device allocation"))?;
        let mut at = 0;
        for p in parts {
            if self.staging_on() && std::mem::size_of_val(*p) >= STAGED_BYTES {
                self.staged_htod_at(bytes_of(p), &mut d, at, None)?;
            } else if !p.is_empty() {
                s.memcpy_htod(*p, &mut d.slice_mut(at..at + p.len()))
                    .map_err(cuda_err("copy to the device"))?;
            }
            at += p.len();
        }
        Ok(d)
    }

    /// A new device array of `first` (on the device already) followed by
    /// the host array `rest`: a process's own sources, uploaded once for
    /// its local essential tree, joined with those the others sent.
    pub fn joined_after<R: Real>(
        &self,
        first: &CudaSlice<R>,
        rest: &[R],
    ) -> Result<CudaSlice<R>, Error> {
        let s = self.stream();
        let n = first.len();
        // SAFETY: every element is written by the copies below.
        let mut d =
            unsafe { s.alloc::<R>(n + rest.len()) }.map_err(cuda_err("device allocation"))?;
        if n > 0 {
            s.memcpy_dtod(first, &mut d.slice_mut(0..n))
                .map_err(cuda_err("copy on the device"))?;
        }
        if self.staging_on() && std::mem::size_of_val(rest) >= STAGED_BYTES {
            self.staged_htod_at(bytes_of(rest), &mut d, n, None)?;
        } else if !rest.is_empty() {
            s.memcpy_htod(rest, &mut d.slice_mut(n..n + rest.len()))
                .map_err(cuda_err("copy to the device"))?;
        }
        Ok(d)
    }

    /// The bytes `src` copied into `dst` from its element `at` on, and
    /// whether they are `like`'s (where given; [`par_copy`]).
    fn staged_htod_at<R: Real>(
        &self,
        src: &[u8],
        dst: &mut CudaSlice<R>,
        at: usize,
        like: Option<&[u8]>,
    ) -> Result<bool, Error> {
        let mut same = like.is_none_or(|l| l.len() == src.len());
        let mut like = like.filter(|_| same).map(|l| l.chunks(PIECE));
        let s = self.stream();
        let mut guard = self.staging()?;
        let st = guard.as_mut().expect("made above");
        let (base, _write) = dst.device_ptr_mut(s);
        let base = base + (at * std::mem::size_of::<R>()) as u64;
        for (k, piece) in src.chunks(PIECE).enumerate() {
            let b = k % 2;
            if let Some(e) = st.done[b].take() {
                e.synchronize()
                    .map_err(cuda_err("waiting for a staged copy"))?;
            }
            let buf = &mut st.buffers[b]
                .as_mut_slice()
                .map_err(cuda_err("staging buffer"))?[..piece.len()];
            let l = like.as_mut().and_then(|l| l.next());
            same &= par_copy(buf, piece, l.filter(|_| same));
            // SAFETY: the destination holds `src.len()` bytes from `base`
            // (the caller's `at` leaves room for them);
            // the buffer is page-locked and not written again before the
            // event recorded after this copy has completed.
            unsafe { result::memcpy_htod_async(base + (k * PIECE) as u64, &*buf, s.cu_stream()) }
                .map_err(cuda_err("copy to the device"))?;
            st.done[b] = Some(
                s.record_event(None)
                    .map_err(cuda_err("recording an event"))?,
            );
        }
        Ok(same)
    }

    /// Host arrays for `slots` outputs of `n` values each, made on a
    /// thread of their own (to be joined once the GPU is done), their
    /// pages faulted in on every core: a copy from the device into fresh
    /// pageable memory faults its pages in as it goes, which took about
    /// 0.015 s of the 0.024 s that 2^24 gravity targets' outputs (268 MB)
    /// took to come back from an H200, and more where two processes of
    /// one host did it at once (0.026 to 0.049 s). Made while the GPU
    /// evaluates, the copy into them is the link's alone
    /// ([`DeviceOutputs::download_to`](super::resident::DeviceOutputs::download_to)).
    /// Arrays smaller than a staged copy are made when asked for.
    pub(crate) fn host_outputs_ahead<R: Real>(slots: usize, n: usize) -> HostOutputs<R> {
        if n * std::mem::size_of::<R>() < STAGED_BYTES {
            return HostOutputs::Later(slots, n);
        }
        // Threads of its own, not rayon's: a caller on a rayon worker
        // waiting for these arrays could otherwise hold the very workers
        // their faulting needs.
        HostOutputs::Making(std::thread::spawn(move || {
            (0..slots).map(|_| faulted_in::<R>(n)).collect()
        }))
    }

    /// Copies the first `len` elements of each device array to new host
    /// vectors.
    pub fn download_many<R: Real>(
        &self,
        arrays: &[&CudaSlice<R>],
        len: usize,
    ) -> Result<Vec<Vec<R>>, Error> {
        let s = self.stream();
        if let Some(a) = arrays.iter().find(|a| a.len() < len) {
            return Err(Error::Cuda(format!(
                "copy from the device: {len} elements asked of an array of {}",
                a.len()
            )));
        }
        let staged = self.staging_on() && len * std::mem::size_of::<R>() >= STAGED_BYTES;
        arrays
            .iter()
            .map(|a| {
                if staged {
                    let mut v = vec![R::zero(); len];
                    self.staged_dtoh(a, bytes_of_mut(&mut v))?;
                    return Ok(v);
                }
                // A copy into fresh pageable memory faults its pages in
                // one by one inside the driver (about 1.3 GB/s on the H100
                // test host): they are touched on every core first.
                let mut v = faulted_in::<R>(len);
                s.memcpy_dtoh(&a.slice(0..len), &mut v)
                    .map_err(cuda_err("copy from the device"))?;
                Ok(v)
            })
            .collect()
    }

    /// Copies the first `dst.len()` elements of the device array `src`
    /// into `dst` (through the staging buffers where it is large: a copy
    /// into pageable memory runs at the driver's pace, a page at a time).
    pub fn download_into<R: Real>(&self, src: &CudaSlice<R>, dst: &mut [R]) -> Result<(), Error> {
        let len = dst.len();
        if src.len() < len {
            return Err(Error::Cuda(format!(
                "copy from the device: {len} elements asked of an array of {}",
                src.len()
            )));
        }
        if self.staging_on() && std::mem::size_of_val(dst) >= STAGED_BYTES {
            return self.staged_dtoh(src, bytes_of_mut(dst));
        }
        if len > 0 {
            self.stream()
                .memcpy_dtoh(&src.slice(0..len), dst)
                .map_err(cuda_err("copy from the device"))?;
        }
        Ok(())
    }

    /// The device copies run one piece ahead of the host's: piece k + 1
    /// comes over while the host copies piece k out of the other buffer
    /// (its fresh pages faulted in on every core, as a side effect).
    fn staged_dtoh<R: Real>(&self, src: &CudaSlice<R>, dst: &mut [u8]) -> Result<(), Error> {
        let s = self.stream();
        let mut guard = self.staging()?;
        let st = guard.as_mut().expect("made above");
        let (base, _read) = src.device_ptr(s);
        let pieces: Vec<&mut [u8]> = dst.chunks_mut(PIECE).collect();
        let lens: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
        let fetch = |st: &mut Staging, k: usize| -> Result<(), Error> {
            let b = k % 2;
            let buf = &mut st.buffers[b]
                .as_mut_slice()
                .map_err(cuda_err("staging buffer"))?[..lens[k]];
            // SAFETY: the source holds the bytes from `base`; the buffer is
            // page-locked and read only after the event below.
            unsafe { result::memcpy_dtoh_async(buf, base + (k * PIECE) as u64, s.cu_stream()) }
                .map_err(cuda_err("copy from the device"))?;
            st.done[b] = Some(
                s.record_event(None)
                    .map_err(cuda_err("recording an event"))?,
            );
            Ok(())
        };
        if !pieces.is_empty() {
            fetch(st, 0)?;
        }
        let n = pieces.len();
        for (k, piece) in pieces.into_iter().enumerate() {
            if k + 1 < n {
                // Buffer (k + 1) % 2 was last read by the host at piece
                // k - 1, already done: no wait for it.
                fetch(st, k + 1)?;
            }
            let b = k % 2;
            if let Some(e) = st.done[b].take() {
                e.synchronize()
                    .map_err(cuda_err("waiting for a staged copy"))?;
            }
            let buf = &st.buffers[b]
                .as_slice()
                .map_err(cuda_err("staging buffer"))?[..piece.len()];
            par_copy(piece, buf, None);
        }
        Ok(())
    }
}
