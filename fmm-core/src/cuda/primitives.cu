// Primitives every GPU method uses: an exclusive prefix scan (hu2011's
// "bookmarks") of 32- or 64-bit counts, the moves between input order and
// tree order, and the conversion to f64.
//
// Plain CUDA C for NVRTC: no includes, no CUB. The host prepends the
// #defines of BLOCK and SCAN_ITEMS from its own constants
// (cuda/primitives.rs).

typedef unsigned long long u64;
typedef unsigned int u32;

#define WARPS (BLOCK / 32)
#define SCAN_TILE (BLOCK * SCAN_ITEMS)

// ---------------------------------------------------------------------------
// Block-wide exclusive scan (all BLOCK threads must call it): each thread's
// value replaced by the sum of the values of the threads before it;
// `total` gets the block's sum.

template <typename T>
__device__ T block_scan(T v, T* total) {
    __shared__ T sums[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) sums[warp] = x;
    __syncthreads();
    T before = 0, all = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        T s = sums[w];
        if (w < warp) before += s;
        all += s;
    }
    __syncthreads();
    *total = all;
    return before + x - v;
}

// ---------------------------------------------------------------------------
// Exclusive prefix scan in place: each block scans its tile of SCAN_TILE
// and leaves the tile's sum; the host scans the sums the same way and
// scan_add adds them back. Counts are 64-bit so that lists past 2^31
// entries are addressed.

template <typename T>
__device__ void scan_tiles(long long n, T* data, T* sums) {
    const long long base = (long long)blockIdx.x * SCAN_TILE + threadIdx.x * SCAN_ITEMS;
    T v[SCAN_ITEMS];
    T s = 0;
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS; ++j) {
        v[j] = base + j < n ? data[base + j] : (T)0;
        s += v[j];
    }
    T total;
    T ex = block_scan<T>(s, &total);
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS; ++j) {
        if (base + j < n) data[base + j] = ex;
        ex += v[j];
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

template <typename T>
__device__ void scan_add(long long n, T* data, const T* sums) {
    const long long base = (long long)blockIdx.x * SCAN_TILE + threadIdx.x * SCAN_ITEMS;
    const T add = sums[blockIdx.x];
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS; ++j)
        if (base + j < n) data[base + j] += add;
}

#define SCAN(T)                                                                                \
    extern "C" __global__ void scan_tiles_##T(long long n, T* data, T* sums) {                \
        scan_tiles<T>(n, data, sums);                                                          \
    }                                                                                          \
    extern "C" __global__ void scan_add_##T(long long n, T* data, const T* sums) {            \
        scan_add<T>(n, data, sums);                                                            \
    }

SCAN(u32)
SCAN(u64)

// ---------------------------------------------------------------------------
// Into tree order, out[k] = in[order[k]], and back, out[order[k]] = in[k].

template <typename T>
__device__ void gather(long long n, const u32* order, const T* in, T* out) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = in[order[i]];
}

template <typename T>
__device__ void scatter(long long n, const u32* order, const T* in, T* out) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[order[i]] = in[i];
}

// Into f64: out[k] = in[k] (the reference sums of error estimates).
template <typename T>
__device__ void widen(long long n, const T* in, double* out) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = (double)in[i];
}

// Sums: out[k] += in[k] (outputs from two sets of sources added).
template <typename T>
__device__ void add_into(long long n, const T* in, T* out) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] += in[i];
}

#define MOVES(T, S)                                                                            \
    extern "C" __global__ void gather_##S(long long n, const u32* order, const T* in,         \
                                          T* out) {                                            \
        gather<T>(n, order, in, out);                                                          \
    }                                                                                          \
    extern "C" __global__ void scatter_##S(long long n, const u32* order, const T* in,        \
                                           T* out) {                                           \
        scatter<T>(n, order, in, out);                                                         \
    }                                                                                          \
    extern "C" __global__ void widen_##S(long long n, const T* in, double* out) {             \
        widen<T>(n, in, out);                                                                  \
    }                                                                                          \
    extern "C" __global__ void add_into_##S(long long n, const T* in, T* out) {               \
        add_into<T>(n, in, out);                                                               \
    }

// A wall's images (domain/wall.rs): the n values of `in` followed by
// `scale * in + shift` (a reflected coordinate, or a field times its
// parity), 2n in all.
template <typename T>
__device__ void mirror(long long n, const T* in, T scale, T shift, T* out) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        const T v = in[i];
        out[i] = v;
        out[n + i] = scale * v + shift;
    }
}

// The least index whose value is below `at` (or not a number) into
// `first` (set to n before): a point below a wall.
template <typename T>
__device__ void first_below(long long n, const T* x, double at, long long* first) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n && !((double)x[i] >= at)) atomicMin((unsigned long long*)first, (unsigned long long)i);
}

#define WALLS(T, S)                                                                            \
    extern "C" __global__ void mirror_##S(long long n, const T* in, T scale, T shift, T* out) { \
        mirror<T>(n, in, scale, shift, out);                                                   \
    }                                                                                          \
    extern "C" __global__ void first_below_##S(long long n, const T* x, double at,            \
                                               long long* first) {                             \
        first_below<T>(n, x, at, first);                                                       \
    }

MOVES(float, f32)
MOVES(double, f64)
WALLS(float, f32)
WALLS(double, f64)

// Indices picked from an index array (the error estimate's samples from
// a Morton order).
extern "C" __global__ void gather_u32(long long n, const u32* order, const u32* in, u32* out) {
    gather<u32>(n, order, in, out);
}

// A tree's cell fields picked for some of its cells (the periodic
// reference's walked cells).
extern "C" __global__ void gather_i32(long long n, const u32* order, const int* in, int* out) {
    gather<int>(n, order, in, out);
}
