// The GPU FMM's periodic box (methods/fmm/cuda/periodic.rs): the points
// wrapped into the box, the cell's moments about the box's centre, a
// neutralising background's quadratic part at the targets, and a sum.
// The host defines MOMENTS (7 sums a strength component, and one).

// x wrapped into [o, o + l) as domain::wrap1 does, in double.
__device__ __forceinline__ double wrap1(const double x, const double o, const double l)
{
    double y = x - floor((x - o) / l) * l;
    if (y >= o + l) y -= l;
    if (y < o) y = o;
    return y;
}

// The points (x, y, z) copied to (wx, wy, wz), wrapped along the periodic
// axes (bit a of `periodic`); a point outside [o, o + l] along an open axis
// leaves its index in outside[a] (the least, by atomicMin from n).
template <typename T>
__device__ void wrap(const int n, const T* __restrict__ x, const T* __restrict__ y,
                     const T* __restrict__ z, const double ox, const double oy, const double oz,
                     const double l, const int periodic, T* __restrict__ wx, T* __restrict__ wy,
                     T* __restrict__ wz, int* __restrict__ outside)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const T* in[3] = {x, y, z};
    T* out[3] = {wx, wy, wz};
    const double o[3] = {ox, oy, oz};
    for (int a = 0; a < 3; ++a) {
        const double v = (double)in[a][i];
        if (periodic >> a & 1) {
            T w = (T)wrap1(v, o[a], l);
            // Rounded to T, a point just below o + l may reach it: the
            // same point as o, by the period.
            if ((double)w >= o[a] + l) w = (T)o[a];
            out[a][i] = w;
        } else {
            if (!(v >= o[a] && v <= o[a] + l)) atomicMin(outside + a, i);
            out[a][i] = in[a][i];
        }
    }
}

// Sums over the points of what domain::Moments holds, about the box's
// centre (cx, cy, cz) in units of its side (`inv_side` its inverse), for
// each of the nq strength components q0..q2: 7 a component (the total,
// the dipole, the second moment by axis) at out[7 k], then the sum of the
// strengths' sizes at out[7 nq]. `out` starts at zero; each warp adds its
// sums by atomicAdd.
template <typename T>
__device__ void moments(const int n, const T* __restrict__ x, const T* __restrict__ y,
                        const T* __restrict__ z, const int nq, const T* __restrict__ q0,
                        const T* __restrict__ q1, const T* __restrict__ q2, const double cx,
                        const double cy, const double cz, const double inv_side,
                        double* __restrict__ out)
{
    double acc[MOMENTS];
    for (int v = 0; v < MOMENTS; ++v) acc[v] = 0.0;
    const T* q[3] = {q0, q1, q2};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double r[3] = {((double)x[i] - cx) * inv_side, ((double)y[i] - cy) * inv_side,
                             ((double)z[i] - cz) * inv_side};
        for (int k = 0; k < nq; ++k) {
            const double s = (double)q[k][i];
            acc[7 * k] += s;
            for (int a = 0; a < 3; ++a) {
                acc[7 * k + 1 + a] += s * r[a];
                acc[7 * k + 4 + a] += s * r[a] * r[a];
            }
            acc[7 * nq] += fabs(s);
        }
    }
    const int lane = threadIdx.x & 31;
    for (int v = 0; v <= 7 * nq; ++v) {
        double s = acc[v];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) atomicAdd(out + v, s);
    }
}

// A neutralising background's quadratic part at the n targets (x, y, z)
// added to one output: a |d|^2 + b . d, d the target less the box's
// centre (cx, cy, cz); the host makes (a, b) of the net strength and the
// output's far terms (far/laplace/background.rs).
template <typename T>
__device__ void background(const int n, const T* __restrict__ x, const T* __restrict__ y,
                           const T* __restrict__ z, const double cx, const double cy,
                           const double cz, const double a, const double bx, const double by,
                           const double bz, T* __restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double d[3] = {(double)x[i] - cx, (double)y[i] - cy, (double)z[i] - cz};
    const double v = a * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) + bx * d[0] + by * d[1] +
                     bz * d[2];
    out[i] += (T)v;
}

// out[i] += a[i] for the n entries.
template <typename T>
__device__ void add(const int n, const T* __restrict__ a, T* __restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += a[i];
}

// out[i] = x[i] + d: a lattice shift of the points x (one axis).
template <typename T>
__device__ void shifted(const int n, const T* __restrict__ x, const double d, T* __restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (T)((double)x[i] + d);
}

#define PRECISION(T, SUFFIX)                                                                      \
    extern "C" __global__ void fmm_wrap_##SUFFIX(                                                \
        const int n, const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ z,   \
        const double ox, const double oy, const double oz, const double l, const int periodic,    \
        T* __restrict__ wx, T* __restrict__ wy, T* __restrict__ wz, int* __restrict__ outside)     \
    {                                                                                             \
        wrap<T>(n, x, y, z, ox, oy, oz, l, periodic, wx, wy, wz, outside);                        \
    }                                                                                             \
    extern "C" __global__ void fmm_moments_##SUFFIX(                                             \
        const int n, const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ z,   \
        const int nq, const T* __restrict__ q0, const T* __restrict__ q1,                         \
        const T* __restrict__ q2, const double cx, const double cy, const double cz,              \
        const double inv_side, double* __restrict__ out)                                          \
    {                                                                                             \
        moments<T>(n, x, y, z, nq, q0, q1, q2, cx, cy, cz, inv_side, out);                        \
    }                                                                                             \
    extern "C" __global__ void fmm_background_##SUFFIX(                                          \
        const int n, const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ z,   \
        const double cx, const double cy, const double cz, const double a, const double bx,       \
        const double by, const double bz, T* __restrict__ out)                                    \
    {                                                                                             \
        background<T>(n, x, y, z, cx, cy, cz, a, bx, by, bz, out);                                \
    }                                                                                             \
    extern "C" __global__ void fmm_add_##SUFFIX(const int n, const T* __restrict__ a,            \
                                                T* __restrict__ out)                              \
    {                                                                                             \
        add<T>(n, a, out);                                                                        \
    }                                                                                             \
    extern "C" __global__ void fmm_shifted_##SUFFIX(const int n, const T* __restrict__ x,        \
                                                    const double d, T* __restrict__ out)          \
    {                                                                                             \
        shifted<T>(n, x, d, out);                                                                 \
    }

PRECISION(float, f32)
PRECISION(double, f64)
