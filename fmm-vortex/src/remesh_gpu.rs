//! The M4' spreading of a part's particles onto the lattice on the GPU
//! ([`crate::remesh_parts::PartRemesh::spread_on`]): a thread a particle
//! adds its 64 points' five sums with atomic adds into the part's box,
//! copied back for the rest of the remeshing (the shared points, the
//! particles made), which the host does as before. On the host the
//! spreading was most of the remeshing: 1.8 s of 2.1 s at 256^3 on 16
//! cores (docs/VORTEX.md).

use fmm_core::cuda::Gpu;
use fmm_core::cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use crate::error::VortexError;
use crate::particles::VortexParticles;
use crate::remesh_parts::{BoxFrame, PartRemesh};
use crate::resident::cuda;

/// The kernel: `remesh::stencil` and `PartRemesh::local` as the host has
/// them, the weights below 1e-12 skipped as there.
const SOURCE: &str = r#"
__device__ double m4p(double x) {
    x = fabs(x);
    if (x < 1.0) return 1.0 - 2.5 * x * x + 1.5 * x * x * x;
    if (x < 2.0) return 0.5 * (2.0 - x) * (2.0 - x) * (1.0 - x);
    return 0.0;
}

__device__ long long wrapped(long long j, long long n) {
    long long r = j % n;
    return r < 0 ? r + n : r;
}

extern "C" __global__ void remesh_spread(
    long long n, const double* x, const double* alpha, const double* sigma,
    double ox, double oy, double oz, double h,
    long long lox, long long loy, long long loz,
    long long sx, long long sy, long long sz,
    long long nl, int wx, int wy, int wz, double* acc) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double o[3] = {ox, oy, oz};
    const long long lo[3] = {lox, loy, loz};
    const int wr[3] = {wx, wy, wz};
    double w[3][4];
    long long at[3][4];
    for (int a = 0; a < 3; ++a) {
        const double s = (x[3 * i + a] - o[a]) / h - 0.5;
        const long long c = (long long)floor(s);
        for (int k = 0; k < 4; ++k) {
            const long long j = c - 1 + k;
            w[a][k] = m4p(s - (double)j);
            at[a][k] = wr[a] ? wrapped(j, nl) : (nl > 0 ? wrapped(j - lo[a], nl) : j - lo[a]);
        }
    }
    const double s2 = sigma[i] * sigma[i];
    const double ax = alpha[3 * i], ay = alpha[3 * i + 1], az = alpha[3 * i + 2];
    for (int kz = 0; kz < 4; ++kz) {
        for (int ky = 0; ky < 4; ++ky) {
            for (int kx = 0; kx < 4; ++kx) {
                const double wt = w[0][kx] * w[1][ky] * w[2][kz];
                if (fabs(wt) < 1e-12) continue;
                double* c = acc + 5 * ((at[2][kz] * sy + at[1][ky]) * sx + at[0][kx]);
                atomicAdd(c, wt * ax);
                atomicAdd(c + 1, wt * ay);
                atomicAdd(c + 2, wt * az);
                atomicAdd(c + 3, wt * s2);
                atomicAdd(c + 4, wt);
            }
        }
    }
}
"#;

/// Fills `part`'s sums (its box framed by the host from `p`) from `p`'s
/// particles on `gpu`.
pub(crate) fn spread(
    gpu: &Gpu,
    p: &VortexParticles,
    part: &mut PartRemesh,
) -> Result<(), VortexError> {
    let BoxFrame {
        h,
        origin,
        n: nl,
        lo,
        size,
        wraps,
    } = part.frame();
    let (module, _) = gpu.module("vortex_remesh_spread", SOURCE)?;
    let f = gpu.function(&module, "remesh_spread")?;
    let s = gpu.stream();
    // Through the staging buffers (`Gpu::upload_many`): at 256^3 the
    // copies from and into pageable memory were most of the 1.17 s.
    let [x, alpha, sigma]: [CudaSlice<f64>; 3] = gpu
        .upload_many(&[p.x.as_flattened(), p.alpha.as_flattened(), &p.sigma])?
        .try_into()
        .unwrap_or_else(|_| unreachable!("three arrays"));
    let sums = part.sums_mut();
    let mut acc = s
        .alloc_zeros::<f64>(5 * sums.len())
        .map_err(cuda("the lattice's sums on the device"))?;
    let n = p.len() as i64;
    let flags = wraps.map(i32::from);
    let nl = nl.unwrap_or(-1);
    let mut b = s.launch_builder(&f);
    b.arg(&n).arg(&x).arg(&alpha).arg(&sigma);
    b.arg(&origin[0]).arg(&origin[1]).arg(&origin[2]).arg(&h);
    b.arg(&lo[0]).arg(&lo[1]).arg(&lo[2]);
    b.arg(&size[0]).arg(&size[1]).arg(&size[2]);
    b.arg(&nl).arg(&flags[0]).arg(&flags[1]).arg(&flags[2]);
    b.arg(&mut acc);
    let threads = 256u32;
    let cfg = LaunchConfig {
        grid_dim: ((p.len() as u32).div_ceil(threads).max(1), 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `remesh_spread` as SOURCE declares it: `x` and `alpha` 3 n
    // long, `sigma` n, `acc` five a point of the box; every point a
    // stencil reaches is in the box (the host framed it from the same
    // stencils: `PartRemesh::spread_on`).
    unsafe { b.launch(cfg) }.map_err(cuda("launching remesh_spread"))?;
    gpu.download_into(&acc, sums.as_flattened_mut())?;
    Ok(())
}
