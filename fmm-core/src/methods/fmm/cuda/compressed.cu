// The compressed M2L of the node far fields on the GPU
// (methods/fmm/cuda/compressed.rs; the CPU's: far/compressed/): the
// operator of a pair of cells depends only on their levels and offset, and
// is `U C V^T` with bases `U`, `V` per level and a small `C` per offset,
// computed on the host (and kept there between evaluations).
//
//   compressed_keys    every M2L pair's key (levels and offset), found or
//                      added in a hash table of the distinct keys, counted;
//   compressed_bucket  the pairs of each operator together (the host gave
//                      each key its operator, or -1: a rare key, whose
//                      pairs are counted per target cell for the kernel);
//   compressed_rest    the rare keys' pairs as M2L lists for the kernel;
//   compressed_project V^T times each source cell's node strengths,
//   compressed_m2l     C times the projected strengths of each operator's
//                      pairs, added to their targets' compressed values,
//   compressed_expand  U times each target cell's compressed values, added
//                      to its node values:
// all three one gathered matrix product (`gathered`), over a table of
// jobs (a matrix and the columns it multiplies);
//   compressed_uniform whether a node source field other than the strength
//                      (a core radius) is the same in every cell.
//
// A list entry names a source cell and, in a periodic box, its image in
// the top bits (tree/traversal.rs): the key's offset is from the image's
// centre (`shift`: 3 a image), the pairs gather the cell itself, and the
// rare pairs keep the entry for the kernel.
//
// Plain CUDA C for NVRTC; the host prepends OFFSET_BITS and CELL_BITS.

typedef unsigned long long u64;

#define EMPTY 0xFFFFFFFFFFFFFFFFull
#define OFFSET_BIAS (1ll << (OFFSET_BITS - 1))
#define CELL_MASK ((1u << CELL_BITS) - 1u)

__device__ __forceinline__ long long item() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }

// The key of a pair: the two levels (5 bits each) and the offset of the
// target's centre from the source's in half sides of the finer of the two
// cells (an integer: cells lie on the root's lattice), OFFSET_BITS a
// component, biased. EMPTY where an offset does not fit.
__device__ u64 pair_key(int lt, int ls, double tx, double ty, double tz, double sx, double sy,
                        double sz, double root_half)
{
    const int fine = lt > ls ? lt : ls;
    const double h = ldexp(root_half, -fine);
    const double d[3] = {tx - sx, ty - sy, tz - sz};
    u64 key = ((u64)lt << 59) | ((u64)ls << 54);
    for (int a = 0; a < 3; ++a) {
        const long long v = llrint(d[a] / h);
        if (v <= -OFFSET_BIAS || v >= OFFSET_BIAS) return EMPTY;
        key |= (u64)(v + OFFSET_BIAS) << (OFFSET_BITS * (2 - a));
    }
    return key;
}

// The slot of `key` in the table of 2^bits slots, added if new; -1 where
// the table is full.
__device__ int find_or_add(u64* table, int bits, u64 key)
{
    const unsigned mask = (1u << bits) - 1u;
    unsigned slot = (unsigned)((key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
    for (unsigned probe = 0; probe <= mask; ++probe) {
        // Keys never change once written: a stale EMPTY is settled by the
        // compare-and-swap.
        const u64 cur = table[slot];
        if (cur == key) return (int)slot;
        if (cur == EMPTY) {
            const u64 prev = atomicCAS(&table[slot], EMPTY, key);
            if (prev == EMPTY || prev == key) return (int)slot;
        }
        slot = (slot + 1) & mask;
    }
    return -1;
}

// One thread per target cell: the slot of each of its M2L pairs' keys
// (`slot[i]` for list entry i), each slot's count of pairs; `failed` set
// where an offset or the table overflowed.
extern "C" __global__ void compressed_keys(
    const int n_cells, const long long* __restrict__ begin, const long long* __restrict__ end,
    const int* __restrict__ list, const int* __restrict__ tlevel, const double* __restrict__ tx,
    const double* __restrict__ ty, const double* __restrict__ tz, const int* __restrict__ slevel,
    const double* __restrict__ sx, const double* __restrict__ sy, const double* __restrict__ sz,
    const double* __restrict__ shift, const double root_half, const int bits, u64* table,
    unsigned* counts, int* __restrict__ slot, int* failed)
{
    const long long t = item();
    if (t >= n_cells) return;
    const int lt = tlevel[t];
    const double x = tx[t], y = ty[t], z = tz[t];
    for (long long i = begin[t]; i < end[t]; ++i) {
        const unsigned e = (unsigned)list[i];
        const int s = (int)(e & CELL_MASK);
        const double* v = shift + 3 * (e >> CELL_BITS);
        const u64 key =
            pair_key(lt, slevel[s], x, y, z, sx[s] + v[0], sy[s] + v[1], sz[s] + v[2], root_half);
        const int at = key == EMPTY ? -1 : find_or_add(table, bits, key);
        slot[i] = at;
        if (at < 0) {
            atomicOr(failed, 1);
            continue;
        }
        atomicAdd(&counts[at], 1u);
    }
}

// One thread per target cell: each pair whose key has an operator
// (`op_of[slot]` >= 0) appended to its operator's pairs (`cursor[op]`, from
// the operator's first place) as (target, source); the others counted in
// `rare[t]`.
extern "C" __global__ void compressed_bucket(
    const int n_cells, const long long* __restrict__ begin, const long long* __restrict__ end,
    const int* __restrict__ list, const int* __restrict__ slot, const int* __restrict__ op_of,
    u64* cursor, int* __restrict__ pair_t, int* __restrict__ pair_s, u64* __restrict__ rare)
{
    const long long t = item();
    if (t >= n_cells) return;
    u64 n = 0;
    for (long long i = begin[t]; i < end[t]; ++i) {
        const int op = op_of[slot[i]];
        if (op < 0) {
            ++n;
            continue;
        }
        const u64 at = atomicAdd(&cursor[op], 1ull);
        pair_t[at] = (int)t;
        pair_s[at] = (int)((unsigned)list[i] & CELL_MASK);
    }
    rare[t] = n;
}

// One thread per target cell: its rare pairs' sources as an M2L list from
// `first[t]` (the scanned counts), in list order.
extern "C" __global__ void compressed_rest(
    const int n_cells, const long long* __restrict__ begin, const long long* __restrict__ end,
    const int* __restrict__ list, const int* __restrict__ slot, const int* __restrict__ op_of,
    const u64* __restrict__ first, long long* __restrict__ rest_begin,
    long long* __restrict__ rest_end, int* __restrict__ rest)
{
    const long long t = item();
    if (t >= n_cells) return;
    long long at = (long long)first[t];
    rest_begin[t] = at;
    for (long long i = begin[t]; i < end[t]; ++i)
        if (op_of[slot[i]] < 0) rest[at++] = list[i];
    rest_end[t] = at;
}

// ---------------------------------------------------------------------------
// The gathered matrix product. A job (8 integers): the matrix's offset in
// `a`, the addresses of its column indices into X and into Y (int arrays),
// its rows m, its columns kk (X's rows), its leading dimension, the columns
// of X it multiplies (nc), and its first block. Column j of the job reads
// X + xi[j] x_ld (kk values) and writes Y + yi[j] y_ld (m values):
//   MODE_STORE   Y = A X;
//   MODE_ATOMIC  Y += A X by atomic adds (several jobs meet a column; y_ld
//                a multiple of 4);
//   MODE_ADD     Y += A X (each column of Y one job's).
// Blocks of 256 threads (16 x 16), a tile of TM x TN outputs, TK of the
// inner dimension at a time through shared memory; a thread computes 4
// consecutive rows of 8 consecutive columns, reading them from shared
// memory as vectors (3 vector loads for 32 multiply-adds).

#define TM 64
#define TN 128
#define TK 16
#define MODE_STORE 0
#define MODE_ATOMIC 1
#define MODE_ADD 2

// Four consecutive values from shared memory (16-byte aligned).
__device__ __forceinline__ void load4(const float* p, float* o)
{
    const float4 v = *(const float4*)p;
    o[0] = v.x;
    o[1] = v.y;
    o[2] = v.z;
    o[3] = v.w;
}
__device__ __forceinline__ void load4(const double* p, double* o)
{
    const double2 a = *(const double2*)p, b = *(const double2*)(p + 2);
    o[0] = a.x;
    o[1] = a.y;
    o[2] = b.x;
    o[3] = b.y;
}

// y[0..n] += v[0..n] by atomic adds, n <= 4, y 16-byte aligned where n is
// 4: one vector atomic for floats on sm_90 (the M2L's adds were bound by
// the atomics' count: 150 a pair of cells at order 4).
__device__ __forceinline__ void atomic_add4(float* y, const float* v, int n)
{
#if __CUDA_ARCH__ >= 900
    if (n == 4) {
        atomicAdd((float4*)y, make_float4(v[0], v[1], v[2], v[3]));
        return;
    }
#endif
    for (int i = 0; i < n; ++i) atomicAdd(y + i, v[i]);
}
__device__ __forceinline__ void atomic_add4(double* y, const double* v, int n)
{
    for (int i = 0; i < n; ++i) atomicAdd(y + i, v[i]);
}

template <typename TA, typename TX, typename TY, int MODE>
__device__ void gathered(const int n_jobs, const long long* __restrict__ jobs,
                         const TA* __restrict__ a, const TX* __restrict__ x, const long long x_ld,
                         TY* y, const long long y_ld)
{
    __shared__ __align__(16) TA a_tile[TK][TM];
    __shared__ __align__(16) TA x_tile[TK][TN + 4];
    // The job of this block: the last whose first block is at most it.
    const long long b = blockIdx.x;
    int lo = 0, hi = n_jobs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (jobs[8 * mid + 7] <= b) lo = mid;
        else hi = mid - 1;
    }
    const long long* job = jobs + 8 * lo;
    const TA* am = a + job[0];
    const int* xi = (const int*)job[1];
    const int* yi = (const int*)job[2];
    const int m = (int)job[3], kk = (int)job[4], lda = (int)job[5], nc = (int)job[6];
    const int row_tiles = (m + TM - 1) / TM;
    const long long tile = b - job[7];
    const int row0 = (int)(tile % row_tiles) * TM, col0 = (int)(tile / row_tiles) * TN;
    const int tid = threadIdx.x, tr = tid % 16, tc = tid / 16;

    // The X columns this thread loads: (tid / 16) + 16 q, at row tid % 16.
    const TX* xcol[TN / 16];
    for (int q = 0; q < TN / 16; ++q) {
        const int c = col0 + tc + 16 * q;
        xcol[q] = c < nc ? x + (long long)xi[c] * x_ld : nullptr;
    }
    TA acc[4][8];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 8; ++j) acc[i][j] = 0;
    for (int k0 = 0; k0 < kk; k0 += TK) {
        for (int q = 0; q < TM * TK / 256; ++q) {
            const int e = tid + 256 * q, r = e % TM, kq = e / TM;
            const int row = row0 + r, k = k0 + kq;
            a_tile[kq][r] = row < m && k < kk ? am[row + (long long)k * lda] : (TA)0;
        }
        for (int q = 0; q < TN / 16; ++q) {
            const int kq = tr, k = k0 + kq;
            x_tile[kq][tc + 16 * q] = xcol[q] != nullptr && k < kk ? (TA)xcol[q][k] : (TA)0;
        }
        __syncthreads();
#pragma unroll
        for (int kq = 0; kq < TK; ++kq) {
            TA av[4], xv[8];
            load4(&a_tile[kq][4 * tr], av);
            load4(&x_tile[kq][8 * tc], xv);
            load4(&x_tile[kq][8 * tc + 4], xv + 4);
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 8; ++j) acc[i][j] += av[i] * xv[j];
        }
        __syncthreads();
    }
    const int row = row0 + 4 * tr;
    const int n = row >= m ? 0 : (m - row < 4 ? m - row : 4);
    for (int j = 0; j < 8 && n > 0; ++j) {
        const int c = col0 + 8 * tc + j;
        if (c >= nc) break;
        TY* yc = y + (long long)yi[c] * y_ld + row;
        TY v[4];
        for (int i = 0; i < 4; ++i) v[i] = (TY)acc[i][j];
        if (MODE == MODE_ATOMIC) atomic_add4(yc, v, n);
        else
            for (int i = 0; i < n; ++i) yc[i] = MODE == MODE_STORE ? v[i] : yc[i] + v[i];
    }
}

// Whether each of the `n` values `v[i stride]` equals `v[0]` to `tol`
// relatively: `differs` set where one does not (or is not finite). A node
// source field other than the strength (a core radius, every node of a
// cell at its cell's mean): the operators are one per offset only where it
// is the same in every cell.
template <typename T>
__device__ void uniform(const long long n, const int stride, const T* __restrict__ v,
                        const double tol, int* differs)
{
    const long long i = item();
    if (i >= n) return;
    const double a = (double)v[i * stride], b = (double)v[0];
    if (!(fabs(a - b) <= tol * fmax(fabs(b), 1e-300))) *differs = 1;
}

// The entry points, per precision T of the bases, operators and
// compressed values (S its suffix): the node strengths (X of the
// projection) and node values (Y of the expansion) stay double.
#define GATHERED(NAME, T, TX, TY, MODE)                                                            \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        NAME(const int n_jobs, const long long* __restrict__ jobs, const T* __restrict__ a,        \
             const TX* __restrict__ x, const long long x_ld, TY* y, const long long y_ld)          \
    {                                                                                              \
        gathered<T, TX, TY, MODE>(n_jobs, jobs, a, x, x_ld, y, y_ld);                              \
    }
#define PRECISION(T, S)                                                                            \
    GATHERED(compressed_project_##S, T, double, T, MODE_STORE)                                     \
    GATHERED(compressed_m2l_##S, T, T, T, MODE_ATOMIC)                                             \
    GATHERED(compressed_expand_##S, T, T, double, MODE_ADD)                                       \
    extern "C" __global__ void compressed_uniform_##S(const long long n, const int stride,         \
                                                      const T* __restrict__ v, const double tol,  \
                                                      int* differs)                               \
    {                                                                                              \
        uniform<T>(n, stride, v, tol, differs);                                                    \
    }

PRECISION(float, f32)
PRECISION(double, f64)
