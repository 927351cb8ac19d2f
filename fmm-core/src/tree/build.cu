// Octree construction on the GPU (hu2011 section "Parallel Data Structure
// Construction"), producing the same tree as the CPU's `Octree::build`:
//
//   1. bounding box: a min/max reduction (bbox_*, bbox_final);
//   2. Morton keys, in double exactly as `morton::key` (keys_*);
//   3. a stable LSD radix sort of (key, input index) pairs, 4 bits a pass:
//      each pass is one of hu2011's bin sorts, with the bins' "bookmarks"
//      (the prefix scan of the per-block bin counts, by the scan of
//      `cuda/primitives.cu`) giving every block its place in the output,
//      and ranks inside a block taken in input order rather than by
//      atomicAdd order, so equal keys keep their input order as the CPU's
//      sort of (key, index) pairs does (radix_hist, radix_scatter);
//   4. the cells level by level: an open cell's children are the octant
//      runs of its sorted keys, found by binary search, and the non-empty
//      ones are compacted into the next level with a prefix scan
//      (split_count, split_emit);
//   5. subtree sizes bottom-up and depth-first indices top-down, which give
//      the CPU's depth-first order and nakasato2009's next/more links
//      (subtree_size, place).
//
// And the target groups the treecode walks and the FMM's P2P runs on
// (group_count, group_emit).
//
// Arithmetic that must match the CPU bit for bit uses the explicitly rounded
// intrinsics (__dadd_rn, ...), so that --fmad=true cannot contract it into
// fused multiply-adds the CPU does not do.
//
// Plain CUDA C for NVRTC: no includes, no CUB. The host prepends the
// #defines of MAX_LEVEL, BLOCK, SORT_ITEMS and RADIX_BITS from its own
// constants (tree/device.rs).

typedef unsigned long long u64;
typedef unsigned int u32;

#define WARPS (BLOCK / 32)
#define SORT_TILE (BLOCK * SORT_ITEMS)
#define RADIX (1 << RADIX_BITS)
// A thread's per-digit counters, packed four 16-bit fields to a word: a
// block's tile of SORT_TILE = 2048 items never overflows a field.
#define WORDS (RADIX / 4)

#define INF_D __longlong_as_double(0x7ff0000000000000LL)

// ---------------------------------------------------------------------------
// Block-wide exclusive scan of packed counters (all BLOCK threads must call
// it).

// Replaces each thread's packed digit counts by the counts of the threads
// before it (per digit); `total` gets the block's counts.
__device__ void block_scan_packed(u64 (&c)[WORDS], u64 (&total)[WORDS]) {
    __shared__ u64 sums[WARPS][WORDS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u64 x[WORDS];
#pragma unroll
    for (int q = 0; q < WORDS; ++q) {
        x[q] = c[q];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            u64 y = __shfl_up_sync(0xffffffffu, x[q], o);
            if (lane >= o) x[q] += y;
        }
        if (lane == 31) sums[warp][q] = x[q];
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < WORDS; ++q) {
        u64 before = 0, all = 0;
        for (int w = 0; w < WARPS; ++w) {
            u64 s = sums[w][q];
            if (w < warp) before += s;
            all += s;
        }
        total[q] = all;
        c[q] = before + x[q] - c[q];
    }
    __syncthreads();
}

// Field `d` of packed counters, without dynamic indexing (which would put
// the counters in local memory).
__device__ __forceinline__ u32 field(const u64 (&p)[WORDS], u32 d) {
    u64 w = p[0];
#pragma unroll
    for (int q = 1; q < WORDS; ++q)
        if ((d >> 2) == (u32)q) w = p[q];
    return (u32)(w >> ((d & 3) * 16)) & 0xffffu;
}

__device__ __forceinline__ void bump(u64 (&p)[WORDS], u32 d) {
    const u64 inc = 1ull << ((d & 3) * 16);
#pragma unroll
    for (int q = 0; q < WORDS; ++q)
        if ((d >> 2) == (u32)q) p[q] += inc;
}

// ---------------------------------------------------------------------------
// Bounding box: per-block min/max of the positions (as doubles), then one
// block over the partial results. fmin/fmax skip NaNs as f64::min/max do.

__device__ void reduce_box(double (&lo)[3], double (&hi)[3], double* out) {
    __shared__ double s[6][BLOCK];
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        s[a][threadIdx.x] = lo[a];
        s[3 + a][threadIdx.x] = hi[a];
    }
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
#pragma unroll
            for (int a = 0; a < 3; ++a) {
                s[a][threadIdx.x] = fmin(s[a][threadIdx.x], s[a][threadIdx.x + stride]);
                s[3 + a][threadIdx.x] = fmax(s[3 + a][threadIdx.x], s[3 + a][threadIdx.x + stride]);
            }
        }
        __syncthreads();
    }
    if (threadIdx.x < 6) out[threadIdx.x] = s[threadIdx.x][0];
}

template <typename T>
__device__ void bbox(int n, const T* x, const T* y, const T* z, double* part) {
    double lo[3] = {INF_D, INF_D, INF_D}, hi[3] = {-INF_D, -INF_D, -INF_D};
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n;
         i += (long long)gridDim.x * BLOCK) {
        const double p[3] = {(double)x[i], (double)y[i], (double)z[i]};
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            lo[a] = fmin(lo[a], p[a]);
            hi[a] = fmax(hi[a], p[a]);
        }
    }
    reduce_box(lo, hi, part + 6 * blockIdx.x);
}

extern "C" __global__ void bbox_final(int n_parts, const double* part, double* out) {
    double lo[3] = {INF_D, INF_D, INF_D}, hi[3] = {-INF_D, -INF_D, -INF_D};
    for (int b = threadIdx.x; b < n_parts; b += BLOCK) {
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            lo[a] = fmin(lo[a], part[6 * b + a]);
            hi[a] = fmax(hi[a], part[6 * b + 3 + a]);
        }
    }
    reduce_box(lo, hi, out);
}

// ---------------------------------------------------------------------------
// Morton keys, as `morton::key`: x in the lowest bit of each triple.

__device__ __forceinline__ u64 spread(u64 x) {
    x &= 0x1fffffull;
    x = (x | (x << 32)) & 0x001f00000000ffffull;
    x = (x | (x << 16)) & 0x001f0000ff0000ffull;
    x = (x | (x << 8)) & 0x100f00f00f00f00full;
    x = (x | (x << 4)) & 0x10c30c30c30c30c3ull;
    x = (x | (x << 2)) & 0x1249249249249249ull;
    return x;
}

// `morton::cell_index`: floor((x - low) / side * 2^21) clamped to
// 0 .. 2^21 - 1; NaN gives 0, as Rust's saturating cast does.
__device__ __forceinline__ u64 cell_index(double x, double low, double side) {
    const double n = 2097152.0;
    double t = floor(__dmul_rn(__ddiv_rn(__dsub_rn(x, low), side), n));
    if (!(t >= 0.0)) t = 0.0;
    if (t > n - 1.0) t = n - 1.0;
    return (u64)t;
}

template <typename T>
__device__ void keys(int n, const T* x, const T* y, const T* z, double lx, double ly, double lz,
                     double side, u64* key, u32* idx) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n) return;
    key[i] = spread(cell_index((double)x[i], lx, side)) |
             (spread(cell_index((double)y[i], ly, side)) << 1) |
             (spread(cell_index((double)z[i], lz, side)) << 2);
    idx[i] = (u32)i;
}

// ---------------------------------------------------------------------------
// Stable LSD radix sort, one RADIX_BITS digit a pass. In the scatter,
// thread t of a block ranks the SORT_ITEMS consecutive items
// t * SORT_ITEMS ..; the block scan of the threads' digit counts ranks every
// item among the equal digits of its block in input order, which makes the
// pass stable.

__device__ __forceinline__ u32 digit(u64 k, int shift) {
    return (u32)(k >> shift) & (RADIX - 1);
}

// Per-block bin counts, digit-major (hist[d * blocks + b]) so that one
// exclusive scan over hist gives each (digit, block) its output offset.
// Counting needs no order, so the reads are striped (coalesced).
extern "C" __global__ void radix_hist(int n, const u64* __restrict__ key, int shift,
                                      u32* __restrict__ hist) {
    const long long tile = (long long)blockIdx.x * SORT_TILE;
    u64 c[WORDS];
#pragma unroll
    for (int q = 0; q < WORDS; ++q) c[q] = 0;
#pragma unroll
    for (int j = 0; j < SORT_ITEMS; ++j) {
        const long long i = tile + j * BLOCK + threadIdx.x;
        if (i < n) bump(c, digit(key[i], shift));
    }
    u64 total[WORDS];
    block_scan_packed(c, total);
    if (threadIdx.x < RADIX) hist[threadIdx.x * gridDim.x + blockIdx.x] = field(total, threadIdx.x);
}

// Scatter by the scanned counts (the bookmarks). The tile is staged in
// shared memory twice: read coalesced, then handed to the threads in
// blocked order for the stable ranking; sorted by digit within the tile,
// then written out coalesced, each digit's run to its place.
extern "C" __global__ void radix_scatter(int n, const u64* __restrict__ key_in,
                                         const u32* __restrict__ idx_in, int shift,
                                         const u32* __restrict__ bookmark,
                                         u64* __restrict__ key_out, u32* __restrict__ idx_out) {
    __shared__ u64 sk[SORT_TILE];
    __shared__ u32 sv[SORT_TILE];
    __shared__ u32 start[RADIX];
    __shared__ u32 local[RADIX];
    const long long tile = (long long)blockIdx.x * SORT_TILE;
    const int count = (int)(n - tile < SORT_TILE ? n - tile : SORT_TILE);
    for (int r = threadIdx.x; r < count; r += BLOCK) {
        sk[r] = key_in[tile + r];
        sv[r] = idx_in[tile + r];
    }
    if (threadIdx.x < RADIX) start[threadIdx.x] = bookmark[threadIdx.x * gridDim.x + blockIdx.x];
    __syncthreads();
    u64 k[SORT_ITEMS];
    u32 v[SORT_ITEMS];
    u64 c[WORDS];
#pragma unroll
    for (int q = 0; q < WORDS; ++q) c[q] = 0;
#pragma unroll
    for (int j = 0; j < SORT_ITEMS; ++j) {
        const int r = threadIdx.x * SORT_ITEMS + j;
        if (r < count) {
            k[j] = sk[r];
            v[j] = sv[r];
            bump(c, digit(k[j], shift));
        }
    }
    u64 total[WORDS];
    block_scan_packed(c, total);  // its __syncthreads also ends the reads of sk, sv
    if (threadIdx.x < RADIX) {
        u32 s = 0;
        for (u32 d = 0; d < threadIdx.x; ++d) s += field(total, d);
        local[threadIdx.x] = s;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < SORT_ITEMS; ++j) {
        if (threadIdx.x * SORT_ITEMS + j < count) {
            const u32 d = digit(k[j], shift);
            const u32 r = local[d] + field(c, d);
            bump(c, d);
            sk[r] = k[j];
            sv[r] = v[j];
        }
    }
    __syncthreads();
    for (int r = threadIdx.x; r < count; r += BLOCK) {
        const u64 kk = sk[r];
        const u32 d = digit(kk, shift);
        const u32 pos = start[d] + ((u32)r - local[d]);
        key_out[pos] = kk;
        idx_out[pos] = sv[r];
    }
}

// ---------------------------------------------------------------------------
// Cells, level by level. A level's cells are in key order (breadth first);
// `offset` (count, then scanned in place) places each cell's children in
// the next level.

// First index in lo..hi whose octant (bits shift..shift+3) exceeds `oct`:
// Rust's `partition_point(|k| octant(k) <= oct)` over the same run.
__device__ int octant_end(const u64* key, int lo, int hi, int shift, u32 oct) {
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (((u32)(key[mid] >> shift) & 7u) <= oct)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// How many of the sorted keys `guide[0..ng)` lie in the cell of prefix
// `prefix` (the keys shifted right by `shift`): two binary searches.
__device__ int guide_count(const u64* guide, int ng, u64 prefix, int shift) {
    int lo = 0, hi = ng;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if ((guide[mid] >> shift) < prefix) lo = mid + 1; else hi = mid;
    }
    const int first = lo;
    hi = ng;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if ((guide[mid] >> shift) <= prefix) lo = mid + 1; else hi = mid;
    }
    return lo - first;
}

// `spread` undone: every third bit of `x` from the lowest, packed.
__device__ __forceinline__ u64 compact(u64 x) {
    x &= 0x1249249249249249ull;
    x = (x ^ (x >> 2)) & 0x10c30c30c30c30c3ull;
    x = (x ^ (x >> 4)) & 0x100f00f00f00f00full;
    x = (x ^ (x >> 8)) & 0x001f0000ff0000ffull;
    x = (x ^ (x >> 16)) & 0x001f00000000ffffull;
    return (x ^ (x >> 32)) & 0x1fffffull;
}

// The cells beside a crowd (`octree::crowded`): each of the level's `m`
// cells holding more than `crowd` points looks up its 26 neighbours at
// the level (by binary search of the level's cells, in key order) and
// marks those of at most `ncrit` points in `beside`.
extern "C" __global__ void crowd_neighbours(int m, int level, int ncrit, int crowd,
                                            const int* begin, const int* end, const u64* key,
                                            unsigned char* beside) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= m || level < 1 || level >= MAX_LEVEL) return;
    if (end[i] - begin[i] <= crowd) return;
    const int shift = 3 * (MAX_LEVEL - level);
    const u64 prefix = key[begin[i]] >> shift;
    const long long at[3] = {(long long)compact(prefix), (long long)compact(prefix >> 1),
                             (long long)compact(prefix >> 2)};
    const long long side = 1ll << level;
    for (int d = 0; d < 27; ++d) {
        const long long c[3] = {at[0] + d % 3 - 1, at[1] + (d / 3) % 3 - 1, at[2] + d / 9 - 1};
        if (d == 13) continue;
        if (c[0] < 0 || c[1] < 0 || c[2] < 0 || c[0] >= side || c[1] >= side || c[2] >= side)
            continue;
        const u64 n = spread((u64)c[0]) | (spread((u64)c[1]) << 1) | (spread((u64)c[2]) << 2);
        int lo = 0, hi = m;
        while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if ((key[begin[mid]] >> shift) < n) lo = mid + 1; else hi = mid;
        }
        if (lo < m && (key[begin[lo]] >> shift) == n && end[lo] - begin[lo] <= ncrit)
            beside[lo] = 1;
    }
}

// Whether the cell `b..e` at `level` is split: it holds more than `ncrit`
// points, or it is beside a crowd (`beside`, Octree's NEIGHBOUR_SLACK), or
// the guide (another tree's sorted keys on the same lattice; ng = 0:
// none) holds more than `guide_ncrit` in the same cell (a target tree
// split near as far as the sources around its targets are: see
// Octree::build_guided).
__device__ __forceinline__ bool opens(int b, int e, int level, int ncrit, const u64* key,
                                      bool beside, const u64* guide, int ng, int guide_ncrit) {
    if (level >= MAX_LEVEL) return false;
    if (e - b > ncrit || (beside && e > b)) return true;
    if (ng == 0 || e <= b) return false;
    const int shift = 3 * (MAX_LEVEL - level);
    return guide_count(guide, ng, key[b] >> shift, shift) > guide_ncrit;
}

extern "C" __global__ void split_count(int m, int level, int ncrit, const int* begin,
                                       const int* end, const u64* key,
                                       const unsigned char* beside, const u64* guide, int ng,
                                       int guide_ncrit, u32* offset) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i == 0) offset[m] = 0;
    if (i >= m) return;
    const int b = begin[i], e = end[i];
    u32 nc = 0;
    if (opens(b, e, level, ncrit, key, beside[i], guide, ng, guide_ncrit)) {
        const int shift = 3 * (MAX_LEVEL - level - 1);
        int lo = b;
        for (u32 o = 0; o < 8; ++o) {
            const int hi = octant_end(key, lo, e, shift, o);
            nc += hi > lo;
            lo = hi;
        }
    }
    offset[i] = nc;
}

// Children's ranges and centres; `h` is the children's half side. The
// centre is the parent's plus or minus h, rounded as the CPU rounds it.
extern "C" __global__ void split_emit(int m, int level, int ncrit, const int* begin,
                                      const int* end, const double* cx, const double* cy,
                                      const double* cz, const u64* key,
                                      const unsigned char* beside, const u64* guide, int ng,
                                      int guide_ncrit, const u32* offset, double h, int* nbegin,
                                      int* nend, double* ncx, double* ncy, double* ncz) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= m) return;
    const int b = begin[i], e = end[i];
    if (!opens(b, e, level, ncrit, key, beside[i], guide, ng, guide_ncrit)) return;
    const int shift = 3 * (MAX_LEVEL - level - 1);
    const double c[3] = {cx[i], cy[i], cz[i]};
    u32 k = offset[i];
    int lo = b;
    for (u32 o = 0; o < 8; ++o) {
        const int hi = octant_end(key, lo, e, shift, o);
        if (hi > lo) {
            nbegin[k] = lo;
            nend[k] = hi;
            ncx[k] = __dadd_rn(c[0], (o & 1) ? h : -h);
            ncy[k] = __dadd_rn(c[1], (o & 2) ? h : -h);
            ncz[k] = __dadd_rn(c[2], (o & 4) ? h : -h);
            ++k;
        }
        lo = hi;
    }
}

// Cells in a subtree, from the children's (the next level's) counts.
extern "C" __global__ void subtree_size(int m, const u32* offset, const int* child_size,
                                        int* size) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= m) return;
    int s = 1;
    for (u32 k = offset[i]; k < offset[i + 1]; ++k) s += child_size[k];
    size[i] = s;
}

// Writes a level's cells at their depth-first index `dfs[start + i]` and
// gives the children theirs: the first child follows its parent, each next
// child follows its elder sibling's subtree.
extern "C" __global__ void place(int m, int level, double half, int start, int next_start,
                                 const u32* offset, const int* size, const int* child_size,
                                 const int* begin, const int* end, const double* cx,
                                 const double* cy, const double* cz, int* dfs, double* ocx,
                                 double* ocy, double* ocz, double* ohalf, int* olevel, int* obegin,
                                 int* oend, int* onext, int* omore, int* on_children) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= m) return;
    const int d = dfs[start + i];
    const int s = size[i];
    const u32 o0 = offset[i], o1 = offset[i + 1];
    ocx[d] = cx[i];
    ocy[d] = cy[i];
    ocz[d] = cz[i];
    ohalf[d] = half;
    olevel[d] = level;
    obegin[d] = begin[i];
    oend[d] = end[i];
    onext[d] = d + s;
    omore[d] = o1 > o0 ? d + 1 : d + s;
    on_children[d] = (int)(o1 - o0);
    int c = d + 1;
    for (u32 k = o0; k < o1; ++k) {
        dfs[next_start + k] = c;
        c += child_size[k];
    }
}

// The target groups an inner cell gives (the CPU's `target_groups`): runs
// of its consecutive leaf children with at most `cap` targets together
// (cap 0: every leaf a run of its own, as the FMM's P2P wants), each cut
// into pieces of at most `block` targets. Counts them, and writes each
// piece's range and the first leaf of its run from `gb`, `ge`, `gc` unless
// those are null. The one grouping of both the treecode and the FMM.
__device__ int group_runs(int c, int cap, int block, const int* begin, const int* end,
                          const int* more, const int* next, int* gb, int* ge, int* gc) {
    int count = 0;
    if (more[c] == next[c]) return 0;
    int rb = -1, re = -1, rc = -1;
    for (int ch = more[c];; ch = next[ch]) {
        const bool done = ch >= next[c];
        const bool leaf = !done && more[ch] == next[ch];
        if (!done && rb >= 0 && leaf && end[ch] - rb <= cap) {
            re = end[ch];
            continue;
        }
        if (rb >= 0) {
            for (int s = rb; s < re; s += block) {
                if (gb) {
                    gb[count] = s;
                    ge[count] = min(s + block, re);
                    gc[count] = rc;
                }
                ++count;
            }
        }
        if (done) break;
        rb = leaf ? begin[ch] : -1;
        re = leaf ? end[ch] : -1;
        rc = ch;
    }
    return count;
}

extern "C" __global__ void group_count(int nc, int cap, int block, const int* begin,
                                       const int* end, const int* more, const int* next,
                                       u32* count) {
    const int c = blockIdx.x * BLOCK + threadIdx.x;
    if (c < nc) count[c] = group_runs(c, cap, block, begin, end, more, next, 0, 0, 0);
}

extern "C" __global__ void group_emit(int nc, int cap, int block, const int* begin,
                                      const int* end, const int* more, const int* next,
                                      const u32* offset, int* gb, int* ge, int* gc) {
    const int c = blockIdx.x * BLOCK + threadIdx.x;
    if (c < nc)
        group_runs(c, cap, block, begin, end, more, next, gb + offset[c], ge + offset[c],
                   gc + offset[c]);
}

// ---------------------------------------------------------------------------
// Entry points per precision.

#define ENTRIES(T, S)                                                                          \
    extern "C" __global__ void bbox_##S(int n, const T* x, const T* y, const T* z,            \
                                        double* part) {                                        \
        bbox<T>(n, x, y, z, part);                                                             \
    }                                                                                          \
    extern "C" __global__ void keys_##S(int n, const T* x, const T* y, const T* z, double lx,  \
                                        double ly, double lz, double side, u64* key,           \
                                        u32* idx) {                                            \
        keys<T>(n, x, y, z, lx, ly, lz, side, key, idx);                                       \
    }

ENTRIES(float, f32)
ENTRIES(double, f64)
