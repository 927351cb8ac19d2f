//! Copies of large particle arrays between the host and the GPU.

use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use super::Gpu;
use crate::error::Error;
use crate::real::Real;

/// Arrays from this long have their pages touched in parallel.
const PREFAULT: usize = 1 << 18;

/// Elements per rayon task.
const CHUNK: usize = 1 << 16;

fn err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda(format!("{what}: {e}"))
}

impl Gpu {
    /// Copies host arrays to new device arrays. (Plain copies: staging
    /// them measured slower, 85 against 56 ms for both trees of 10^7
    /// particles, the page-locked allocations costing more than they save.)
    pub fn upload_many<R: Real>(&self, arrays: &[&[R]]) -> Result<Vec<CudaSlice<R>>, Error> {
        let s = self.stream();
        arrays
            .iter()
            .map(|a| s.clone_htod(*a).map_err(err("copy to the device")))
            .collect()
    }

    /// Copies the first `len` elements of each device array to new host
    /// vectors. The vectors' pages are touched on every core first: a copy
    /// into fresh pageable memory otherwise faults its pages in one by one
    /// inside the driver (about 1.3 GB/s on the H100 test host).
    pub fn download_many<R: Real>(
        &self,
        arrays: &[&CudaSlice<R>],
        len: usize,
    ) -> Result<Vec<Vec<R>>, Error> {
        let s = self.stream();
        arrays
            .iter()
            .map(|a| {
                let mut v = vec![R::zero(); len];
                if len >= PREFAULT {
                    v.par_chunks_mut(CHUNK).for_each(|c| c.fill(R::zero()));
                }
                s.memcpy_dtoh(&a.slice(0..len), &mut v)
                    .map_err(err("copy from the device"))?;
                Ok(v)
            })
            .collect()
    }
}
