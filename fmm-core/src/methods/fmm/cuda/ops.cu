// The FMM operators on the GPU (see methods/fmm/cuda/mod.rs): P2M, M2M,
// M2L, L2L and L2P of scalar Laplace expansions, the same formulas as the
// CPU operators (operators.rs, harmonics.rs: Dehnen's scaling,
// R_n^m = r^n P_n^m e^{i m phi} / (n + m)!, I_n^m = (n - m)! P_n^m e^{i m phi} / r^{n+1},
// coefficients with m >= 0 stored, m < 0 by (-1)^m conj).
//
// The host compiles this file once per order, with FMM_P defined, so every
// loop bound is a constant; it also defines, from its own constants
// (methods/fmm/cuda/mod.rs), LANE_LD, the far-field term kinds
// TERM_POTENTIAL, TERM_GRADIENT, TERM_CURL and TERM_STRETCHING, MAX_TERMS,
// MAX_OUT and TRAVERSE_STACK. Particles are in T (float or double); the
// expansions are in double on the device whatever T is: the H100 runs
// double at half the float rate, and double needs no rescaling of the
// coefficients to stay in range (r^n / (n + m)! underflows float for small
// cells at high order).
//
// Expansions live in `double2` arrays, cell-major: expansion k of cell c at
// `(c * nq + k) * NC`.

#ifndef FMM_P
#error "FMM_P (the expansion order) must be defined"
#endif
#define P FMM_P
#define NC ((P + 1) * (P + 2) / 2)
#define NF ((P + 1) * (P + 1))

__device__ __forceinline__ int idx(int n, int m) { return n * (n + 1) / 2 + m; }
__device__ __forceinline__ int full(int n, int m) { return n * n + n + m; }

// 2^i as a double, for |i| < 1022.
__device__ __forceinline__ double pow2(int i) { return __longlong_as_double((long long)(1023 + i) << 52); }

// A list entry's source cell and which of its periodic images it is (the
// top bits; image 0, no shift, in free space), CELL_BITS from the host
// (tree::traversal::entry); the images' lattice shifts, x, y, z an image,
// come with the lists.
__device__ __forceinline__ int entry_cell(const int e)
{
    return (int)((unsigned)e & ((1u << CELL_BITS) - 1u));
}
__device__ __forceinline__ int entry_image(const int e) { return (int)((unsigned)e >> CELL_BITS); }

// The coefficient (n, m) of an expansion stored for m >= 0.
__device__ __forceinline__ double2 get(const double2* a, int n, int m)
{
    if (m >= 0) return a[idx(n, m)];
    const double2 v = a[idx(n, -m)];
    return (m & 1) ? make_double2(-v.x, v.y) : make_double2(v.x, -v.y);
}

__device__ __forceinline__ double2 cmul(double2 a, double2 b)
{
    return make_double2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// a * conj(b)
__device__ __forceinline__ double2 cmulc(double2 a, double2 b)
{
    return make_double2(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y);
}

// R_n^m(x, y, z) for 0 <= m <= n <= P.
__device__ void regular(double x, double y, double z, double2* out)
{
    const double r2 = x * x + y * y + z * z;
    out[0] = make_double2(1.0, 0.0);
    for (int m = 1; m <= P; ++m) {
        const double2 a = out[idx(m - 1, m - 1)];
        const double s = -1.0 / (2 * m);
        out[idx(m, m)] = make_double2((x * a.x - y * a.y) * s, (x * a.y + y * a.x) * s);
    }
    for (int m = 0; m <= P; ++m) {
        for (int n = m + 1; n <= P; ++n) {
            const double2 a = out[idx(n - 1, m)];
            const double c = (2 * n - 1) * z;
            const double2 b = n >= m + 2 ? out[idx(n - 2, m)] : make_double2(0.0, 0.0);
            const double s = 1.0 / ((n + m) * (n - m));
            out[idx(n, m)] = make_double2((a.x * c - b.x * r2) * s, (a.y * c - b.y * r2) * s);
        }
    }
}

// R_n^m(x, y, z) of one column m, n from m to P, into out[idx(n, m)]: the
// recurrences of regular(), in the same order (the same bits), so that the
// P + 1 columns can be computed by as many threads.
__device__ __forceinline__ void regular_column(double x, double y, double z, int m, double2* out)
{
    const double r2 = x * x + y * y + z * z;
    double2 cur = make_double2(1.0, 0.0);
    for (int j = 1; j <= m; ++j) {
        const double s = -1.0 / (2 * j);
        cur = make_double2((x * cur.x - y * cur.y) * s, (x * cur.y + y * cur.x) * s);
    }
    out[idx(m, m)] = cur;
    double2 prev = make_double2(0.0, 0.0);
    for (int n = m + 1; n <= P; ++n) {
        const double c = (2 * n - 1) * z;
        const double s = 1.0 / ((n + m) * (n - m));
        const double2 next = make_double2((cur.x * c - prev.x * r2) * s, (cur.y * c - prev.y * r2) * s);
        prev = cur;
        cur = next;
        out[idx(n, m)] = cur;
    }
}

// The coefficients a thread of a block of expansion operators holds: the
// block's threads take NC coefficients round-robin, blocks of at least 64.
#define PER_THREAD ((NC + 63) / 64)

// The degree n and order m of the coefficient idx(n, m) = i.
__device__ __forceinline__ void degree_order(int i, int& n, int& m)
{
    n = 0;
    while (idx(n + 1, 0) <= i) ++n;
    m = i - idx(n, 0);
}

// I_n^m(x, y, z) for 0 <= m <= n <= P (the point not at the origin).
__device__ void singular(double x, double y, double z, double2* out)
{
    const double inv_r2 = 1.0 / (x * x + y * y + z * z);
    out[0] = make_double2(sqrt(inv_r2), 0.0);
    for (int m = 1; m <= P; ++m) {
        const double2 a = out[idx(m - 1, m - 1)];
        const double s = -(2 * m - 1) * inv_r2;
        out[idx(m, m)] = make_double2((x * a.x - y * a.y) * s, (x * a.y + y * a.x) * s);
    }
    for (int m = 0; m <= P; ++m) {
        for (int n = m + 1; n <= P; ++n) {
            const double2 a = out[idx(n - 1, m)];
            const double c = (2 * n - 1) * z;
            const double2 b = n >= m + 2 ? out[idx(n - 2, m)] : make_double2(0.0, 0.0);
            const double e = (double)((n - 1) * (n - 1) - m * m);
            out[idx(n, m)] = make_double2((a.x * c - b.x * e) * inv_r2, (a.y * c - b.y * e) * inv_r2);
        }
    }
}

// Parent of every cell (-1 for the root), from the next/more links.
extern "C" __global__ void fmm_parents(const int n_cells, const int* __restrict__ more,
                                       const int* __restrict__ next,
                                       const int* __restrict__ n_children, int* __restrict__ parent)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cells) return;
    if (c == 0) parent[0] = -1;
    int ch = more[c];
    for (int i = 0; i < n_children[c]; ++i) {
        parent[ch] = c;
        ch = next[ch];
    }
}

// The leaf holding every particle (tree order).
extern "C" __global__ void fmm_leaf_of(const int n_cells, const int* __restrict__ n_children,
                                       const int* __restrict__ begin, const int* __restrict__ end,
                                       int* __restrict__ leaf)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cells || n_children[c] != 0) return;
    for (int i = begin[c]; i < end[c]; ++i) leaf[i] = c;
}

// The distance from each cell's centre to its farthest particle, squared,
// as the bits of a double (non-negative doubles order as their bits):
// one thread per particle (tree order) climbs from its leaf to the root.
// At each step the lanes of a warp that stand in the same cell take their
// maximum by a segmented scan (particles are in tree order, so a cell's
// lanes are neighbours) and the last of them writes it with one atomicMax.
// One block per cell, the first form, left the root's block reading every
// particle alone: about 20 ms at 10^7. `r2` starts at zero; fmm_sqrt_radius
// finishes.
template <typename T>
__device__ void cell_radius2(const int n, const int* __restrict__ leaf_of,
                             const int* __restrict__ parent, const double* __restrict__ cx,
                             const double* __restrict__ cy, const double* __restrict__ cz,
                             const T* __restrict__ x, const T* __restrict__ y,
                             const T* __restrict__ z, unsigned long long* __restrict__ r2)
{
    const unsigned all = 0xffffffffu;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    // Whole warps run the loop (the shuffles need every lane); lanes past
    // the particles stand nowhere (-1).
    int c = i < n ? leaf_of[i] : -1;
    const double px = i < n ? (double)x[i] : 0.0, py = i < n ? (double)y[i] : 0.0,
                 pz = i < n ? (double)z[i] : 0.0;
    while (__any_sync(all, c >= 0)) {
        double d2 = 0.0;
        if (c >= 0) {
            const double dx = px - cx[c], dy = py - cy[c], dz = pz - cz[c];
            d2 = dx * dx + dy * dy + dz * dz;
        }
        for (int d = 1; d < 32; d <<= 1) {
            const double o = __shfl_up_sync(all, d2, d);
            const int oc = __shfl_up_sync(all, c, d);
            if (lane >= d && oc == c) d2 = fmax(d2, o);
        }
        const int after = __shfl_down_sync(all, c, 1);
        if (c >= 0 && (lane == 31 || after != c))
            atomicMax(r2 + c, (unsigned long long)__double_as_longlong(d2));
        c = c >= 0 ? parent[c] : -1;
    }
}

// The radii from their squares' bits (fmm_cell_radius2), in place.
extern "C" __global__ void fmm_sqrt_radius(const int n_cells, double* __restrict__ radius)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n_cells) radius[c] = sqrt(radius[c]);
}

// The expansions are those of positions in the unit box: every offset is
// multiplied by u = 2^-ilogb(the source root's half side) (exact), so
// their harmonics stay in double's range whatever the length unit (cells
// of side 1e-31 gave 1e31^(p+1), past it from p 9); L2P takes the
// outputs back (fmm_l2p), the float M2L shifts its exponents by eu =
// log2 u (fmm_full_range_f32, fmm_m2l_lanes).

// P2M: one block per cell, for the leaves, all its nq (at most 3)
// expansions. The block takes the leaf's particles P2M_TILE at a time: a
// thread per particle computes its regular harmonics into shared memory
// (once for the nq strengths), then a thread per coefficient adds the
// tile's terms to its own sums, in registers. The first form, a thread per
// (leaf, expansion) with the harmonics and the sums in arrays of NC,
// spilled them to local memory: the f64 reference of a periodic box (10^7
// sources, leaves of about 300) took 7 ms at p 9, 41 ms at p 11, 57 ms
// at p 13 (H100).
#define P2M_TILE (NC * 16 * 32 <= 40000 ? 32 : (40000 / (NC * 16) > 0 ? 40000 / (NC * 16) : 1))
template <typename T>
__device__ void p2m(const int n_cells, const int* __restrict__ n_children,
                    const int* __restrict__ begin, const int* __restrict__ end,
                    const double* __restrict__ cx, const double* __restrict__ cy,
                    const double* __restrict__ cz, const T* __restrict__ x,
                    const T* __restrict__ y, const T* __restrict__ z, const int nq,
                    const T* __restrict__ q0, const T* __restrict__ q1,
                    const T* __restrict__ q2, const double u, double2* __restrict__ mult)
{
    __shared__ double2 rs[P2M_TILE][NC];
    __shared__ double qs[3][P2M_TILE];
    for (int c = blockIdx.x; c < n_cells; c += gridDim.x) {
        if (n_children[c] != 0) continue;
        const double ox = cx[c], oy = cy[c], oz = cz[c];
        const int j0 = begin[c], j1 = end[c];
        // Each thread's coefficients: i = threadIdx.x + r * blockDim.x.
        double2 m[3][PER_THREAD];
        for (int k = 0; k < 3; ++k)
            for (int r = 0; r < PER_THREAD; ++r) m[k][r] = make_double2(0.0, 0.0);
        for (int jt = j0; jt < j1; jt += P2M_TILE) {
            const int cnt = min(P2M_TILE, j1 - jt);
            if (threadIdx.x < cnt) {
                const int j = jt + threadIdx.x;
                regular(((double)x[j] - ox) * u, ((double)y[j] - oy) * u, ((double)z[j] - oz) * u,
                        rs[threadIdx.x]);
                qs[0][threadIdx.x] = (double)q0[j];
                if (nq > 1) qs[1][threadIdx.x] = (double)q1[j];
                if (nq > 2) qs[2][threadIdx.x] = (double)q2[j];
            }
            __syncthreads();
            for (int r = 0; r < PER_THREAD; ++r) {
                const int i = threadIdx.x + r * blockDim.x;
                if (i >= NC) break;
                for (int t = 0; t < cnt; ++t) {
                    const double2 h = rs[t][i];
                    for (int k = 0; k < 3; ++k) {
                        if (k >= nq) break;
                        m[k][r].x += qs[k][t] * h.x;
                        m[k][r].y -= qs[k][t] * h.y;
                    }
                }
            }
            __syncthreads();
        }
        for (int k = 0; k < nq; ++k) {
            double2* out = mult + ((size_t)c * nq + k) * NC;
            for (int r = 0; r < PER_THREAD; ++r) {
                const int i = threadIdx.x + r * blockDim.x;
                if (i < NC) out[i] = m[k][r];
            }
        }
    }
}

// M2M: one block per (cell of a level, expansion), its threads over the
// cell's coefficients (PER_THREAD each); for each child in turn, its
// multipole and the regular harmonics of its offset (a column a thread)
// in shared memory. The first form, a thread per cell with the harmonics
// and the sums in arrays of NC, spilled them to local memory.
extern "C" __global__ void fmm_m2m(const int n, const int* __restrict__ cells,
                                   const int* __restrict__ more, const int* __restrict__ next,
                                   const int* __restrict__ n_children,
                                   const double* __restrict__ cx, const double* __restrict__ cy,
                                   const double* __restrict__ cz, const int nq, const double u,
                                   double2* __restrict__ mult)
{
    __shared__ double2 rs[NC], ms[NC];
    for (int b = blockIdx.x; b < n * nq; b += gridDim.x) {
        const int c = cells[b / nq], k = b % nq;
        if (n_children[c] == 0) continue;
        double2 acc[PER_THREAD];
        for (int r = 0; r < PER_THREAD; ++r) acc[r] = make_double2(0.0, 0.0);
        int ch = more[c];
        for (int e = 0; e < n_children[c]; ++e) {
            for (int m = threadIdx.x; m <= P; m += blockDim.x)
                regular_column((cx[ch] - cx[c]) * u, (cy[ch] - cy[c]) * u, (cz[ch] - cz[c]) * u, m,
                               rs);
            const double2* child = mult + ((size_t)ch * nq + k) * NC;
            for (int i = threadIdx.x; i < NC; i += blockDim.x) ms[i] = child[i];
            __syncthreads();
            for (int r = 0; r < PER_THREAD; ++r) {
                const int i = threadIdx.x + r * blockDim.x;
                if (i >= NC) break;
                int nn, mm;
                degree_order(i, nn, mm);
                double2 s = make_double2(0.0, 0.0);
                for (int kk = 0; kk <= nn; ++kk) {
                    const int lo = max(-kk, mm - (nn - kk)), hi = min(kk, mm + (nn - kk));
                    for (int l = lo; l <= hi; ++l) {
                        const double2 v = cmulc(get(ms, nn - kk, mm - l), get(rs, kk, l));
                        s.x += v.x;
                        s.y += v.y;
                    }
                }
                acc[r].x += s.x;
                acc[r].y += s.y;
            }
            __syncthreads();
            ch = next[ch];
        }
        double2* out = mult + ((size_t)c * nq + k) * NC;
        for (int r = 0; r < PER_THREAD; ++r) {
            const int i = threadIdx.x + r * blockDim.x;
            if (i < NC) out[i] = acc[r];
        }
    }
}

// The degree n of the full-range index f = n * n + n + m.
__device__ __forceinline__ int degree(int f)
{
    int n = (int)sqrtf((float)f);
    while (n * n > f) --n;
    while ((n + 1) * (n + 1) <= f) ++n;
    return n;
}

// The singular harmonics I_n^m(x, y, z) of one column m >= 0, n from m to
// P, both signs of m (store(n, m, value) and store(n, -m, value)): I_m^m
// by its own product chain, then up the column in n, the recurrences of
// singular(). The M2L's threads each take one (source, m).
template <typename E, typename V, typename Store>
__device__ __forceinline__ void singular_column(const E x, const E y, const E z, const int m,
                                                Store store)
{
    const E inv_r2 = (E)1 / (x * x + y * y + z * z);
    V cur;
    cur.x = sqrt(inv_r2);
    cur.y = 0;
    for (int j = 1; j <= m; ++j) {
        const E f = -(E)(2 * j - 1) * inv_r2;
        const E cx = (x * cur.x - y * cur.y) * f, cy = (x * cur.y + y * cur.x) * f;
        cur.x = cx;
        cur.y = cy;
    }
    V prev;
    prev.x = prev.y = 0;
    for (int n = m; n <= P; ++n) {
        if (n > m) {
            const E cz = (E)(2 * n - 1) * z;
            const E d = (E)((n - 1) * (n - 1) - m * m);
            V next;
            next.x = (cur.x * cz - prev.x * d) * inv_r2;
            next.y = (cur.y * cz - prev.y * d) * inv_r2;
            prev = cur;
            cur = next;
        }
        store(n, m, cur);
        if (m > 0) {
            const E sg = (m & 1) ? (E)-1 : (E)1;
            V h;
            h.x = sg * cur.x;
            h.y = -sg * cur.y;
            store(n, -m, h);
        }
    }
}

// M2L in double: one block per target cell (yokota2012 Fig. 7). The block
// takes its list `sb` source cells at a time: one thread per (source, m)
// computes the singular harmonics of the translation, all threads copy
// the sources' multipoles, both in full range (m from -n to n), into
// shared memory. L_k^l = (-1)^k sum_{n <= P - k} sum_m M_n^m I_{n+k}^{m+l}
// is split into tasks of about equal work, `tasks[j] = (c, n_lo, n_hi)`:
// the rows n_lo to n_hi of the sum for coefficient c = idx(k, l). One
// thread per (task, expansion): one thread per coefficient would leave the
// threads of low k, with (P + 1)^2 products, the rest of their warp
// waiting. The partial sums of a coefficient meet by atomicAdd at the end
// of the cell. f32 particles take fmm_m2l_lanes (below) where it fits.
//
// Dynamic shared memory: sb * (1 + nq) * NF double2.
extern "C" __global__ void fmm_m2l(const int n_cells, const long long* __restrict__ list_begin,
                                   const long long* __restrict__ list_end,
                                   const int* __restrict__ list,
                                   const double* __restrict__ tx, const double* __restrict__ ty,
                                   const double* __restrict__ tz, const double* __restrict__ sx,
                                   const double* __restrict__ sy, const double* __restrict__ sz,
                                   const double* __restrict__ shift,
                                   const int nq, const int sb, const int n_tasks,
                                   const int4* __restrict__ tasks, const double u,
                                   const double2* __restrict__ mfull, double2* __restrict__ local)
{
    extern __shared__ __align__(16) unsigned char smem[];
    double2* ish = (double2*)smem;
    double2* msh = ish + sb * NF;
    const int t = threadIdx.x;
    const bool own = t < nq * n_tasks;
    const int q = own ? t / n_tasks : 0;
    const int4 task = tasks[own ? t % n_tasks : 0];
    const int c = task.x, n_lo = task.y, n_hi = task.z;
    int k = 0;
    while (idx(k + 1, 0) <= c) ++k;
    const int l = c - idx(k, 0);
    for (int a = blockIdx.x; a < n_cells; a += gridDim.x) {
        const long long ls = list_begin[a], le = list_end[a];
        if (ls == le) continue;
        double re = 0.0, im = 0.0;
        for (long long chunk = ls; chunk < le; chunk += sb) {
            const int cnt = (int)min((long long)sb, le - chunk);
            for (int e = t; e < cnt * (P + 1); e += blockDim.x) {
                const int s = e / (P + 1), m = e % (P + 1);
                const int b = entry_cell(list[chunk + s]);
                const double* v = shift + 3 * entry_image(list[chunk + s]);
                double2* hs = ish + s * NF;
                singular_column<double, double2>((tx[a] - (sx[b] + v[0])) * u,
                                                 (ty[a] - (sy[b] + v[1])) * u,
                                                 (tz[a] - (sz[b] + v[2])) * u, m,
                                                 [&](int n, int mm, double2 v) { hs[full(n, mm)] = v; });
            }
            // The multipoles, already in full range, source by source (no
            // division by nq).
            for (int s = 0; s < cnt; ++s) {
                const double2* src = mfull + (size_t)entry_cell(list[chunk + s]) * nq * NF;
                for (int r = t; r < nq * NF; r += blockDim.x) msh[s * nq * NF + r] = src[r];
            }
            __syncthreads();
            if (own) {
                for (int s = 0; s < cnt; ++s) {
                    const double2* mq = msh + (s * nq + q) * NF;
                    const double2* hs = ish + s * NF;
                    for (int n = n_hi; n >= n_lo; --n) {
                        const int ma = full(n, -n), ib = full(n + k, -n + l);
                        for (int j = 0; j <= 2 * n; ++j) {
                            const double2 mv = mq[ma + j], hv = hs[ib + j];
                            re += mv.x * hv.x - mv.y * hv.y;
                            im += mv.x * hv.y + mv.y * hv.x;
                        }
                    }
                }
            }
            __syncthreads();
        }
        if (own) {
            const double sign = (k & 1) ? -1.0 : 1.0;
            double2* out = local + ((size_t)a * nq + q) * NC + c;
            atomicAdd(&out->x, sign * re);
            atomicAdd(&out->y, sign * im);
        }
    }
}

// M2L of f32 particles in float, lanes over source cells (the GPU form of
// m2l_lanes.rs): one block per target cell takes its list 32 source cells
// at a time, lane s of every warp the chunk's source s. All lanes of a
// warp run the same loops (no divergence) and read consecutive shared
// words (no bank conflicts). The work, L_k^l for all (k, l) and the nq
// expansions, is cut into items (host: `lane_plan` in gpu/m2l.rs), each
// `(k, l0, W, n_lo, n_hi)`: the W coefficients L_k^{l0} .. L_k^{l0+W-1}
// of all nq expansions over the rows n_lo..n_hi of M. The harmonics
// I_{n+k}^{m+l} of neighbouring l are neighbours in memory, so a thread
// loads one harmonic and nq multipoles per m and does W * nq complex
// multiply-adds with them (4 loads for 12 at W = 4, nq = 3, where one
// thread per coefficient does 2 for 1 and is bound by its shared loads:
// the M2L of fmm_m2l's form in float ran at 6% of the float rate). Each warp runs its list of items (equal work, longest
// processing time first) for every chunk; a warp of one item keeps its
// sums in registers, the others keep theirs in shared memory between
// chunks, `slot` floats per lane. At the end of the list the lanes' sums
// are added across the warp and atomically to the local expansion.
//
// Normalised coefficients (yokota2012 section 4.2), as the CPU's and the
// double M2L's but scaled so float holds them: rho = 2^ilogb(half side)
// of a cell, exact. The multipoles arrive as M_n^m / rho_s^n
// (fmm_full_range_f32) and the harmonics are those of u = v / rho_s, so a
// source's sum S = sum M~ I(u) is of order one and L_k gets
// rho_s^{-(k+1)} S. The lanes' running sums are kept in the target's
// scale, L_k rho_t^{k+1}, so they add whatever their sources' sizes: an
// item takes them to its lane's source's scale (times 2^{-d(k+1)},
// d = e_t - e_s), adds the source's terms, and takes them back; the
// factor rho_t^{-(k+1)} is applied in double at the end. Both are powers
// of two, exact. In a dual tree traversal of one tree, |d| <= 3 (measured:
// uniform and Plummer, 10^6, theta 0.5 and 0.7) and |v| >= 2 rho; a pair
// with |d| > max_d (64 / P) would strain float's range, so it raises
// `flag` and the host runs the double M2L instead.
//
// Dynamic shared memory: one buffer of (1 + NQ) * NF * LANE_LD float2
// (harmonics, then multipoles), then 32 floats per slot of the items' sums.
// (A second buffer, staging the next chunk while one is summed, gained 1%
// for three expansions, cost 15% for gravity and did not fit from p 9:
// H100, 2026-11-23.)

template <int W, int NQ>
__device__ __forceinline__ void m2l_item(float* acc, float* sums, const float2* __restrict__ ish,
                                         const float2* __restrict__ msh, const int k, const int l0,
                                         const int n_lo, const int n_hi, const int d)
{
    // The sums to this source's scale and, below, back: 2^{-+d(k+1)},
    // exact (|d| (k + 1) is far inside float's exponent range).
    const float down = __int_as_float((127 - d * (k + 1)) << 23);
    const float up = __int_as_float((127 + d * (k + 1)) << 23);
#pragma unroll
    for (int v = 0; v < 2 * W * NQ; ++v) acc[v] = (sums ? sums[v * 32] : acc[v]) * down;
    // High rows first: their terms are the small ones.
    for (int n = n_hi; n >= n_lo; --n) {
        const float2* mp = msh + full(n, -n) * LANE_LD;
        const float2* hp = ish + full(n + k, -n + l0) * LANE_LD;
        float2 h[W];
#pragma unroll
        for (int w = 0; w + 1 < W; ++w) h[w] = hp[w * LANE_LD];
#pragma unroll 2
        for (int j = 0; j <= 2 * n; ++j) {
            h[W - 1] = hp[(j + W - 1) * LANE_LD];
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                const float2 mv = mp[(q * NF + j) * LANE_LD];
#pragma unroll
                for (int w = 0; w < W; ++w) {
                    float* a = acc + 2 * (w * NQ + q);
                    a[0] = fmaf(mv.x, h[w].x, a[0]);
                    a[0] = fmaf(-mv.y, h[w].y, a[0]);
                    a[1] = fmaf(mv.x, h[w].y, a[1]);
                    a[1] = fmaf(mv.y, h[w].x, a[1]);
                }
            }
#pragma unroll
            for (int w = 0; w + 1 < W; ++w) h[w] = h[w + 1];
        }
    }
#pragma unroll
    for (int v = 0; v < 2 * W * NQ; ++v) {
        acc[v] *= up;
        if (sums) sums[v * 32] = acc[v];
    }
}

// An item's sums (in acc, or in shared memory at sums) added across the
// warp, times f, to the local expansions at out (L_k^l0 of expansion 0). A
// sum that left float's range (huge strengths) raises `flag`: the host
// runs the double M2L instead.
template <int W, int NQ>
__device__ __forceinline__ void m2l_item_out(const float* acc, const float* sums, const int lane,
                                             const double f, double2* out, int* flag)
{
#pragma unroll
    for (int v = 0; v < 2 * W * NQ; ++v) {
        float x = sums ? sums[v * 32] : acc[v];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
        if (lane == 0) {
            if (!isfinite(x)) atomicOr(flag, 4);
            const int w = v / (2 * NQ), q = (v / 2) % NQ;
            atomicAdd((double*)(out + q * NC + w) + (v & 1), f * (double)x);
        }
    }
}

// An 8-byte copy from global to shared memory that does not hold up the
// thread (cp.async, sm_80 and later), zeros where `bytes` is 0; and the
// wait for all of a thread's copies.
__device__ __forceinline__ void copy_async8(float2* to, const float2* from, const int bytes)
{
#if __CUDA_ARCH__ >= 800
    const unsigned dst = (unsigned)__cvta_generic_to_shared(to);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(from), "r"(bytes)
                 : "memory");
#else
    *to = bytes ? *from : make_float2(0.0f, 0.0f);
#endif
}

__device__ __forceinline__ void copies_done()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Stages the sources list[chunk..chunk + 32) (those before `end`) of
// target cell a into the buffer: their levels against the target's in
// lev, their harmonics in ish (computed), their multipoles in msh (copied
// without waiting; copies_done() and a barrier before they are read). A
// pair float cannot take (cells more than max_d levels apart, or closer
// than twice the source's size: tight radii let two sparse cells of
// different sizes pass the MAC side by side) is left out here, zeros in
// its place, and written to `spill` (its count first, then target cell
// and list entry; past `spill_cap` pairs, `flag` is raised instead) for
// the double M2L to add.
template <int NQ>
__device__ __forceinline__ void m2l_stage(const int a, const int et, const double ax,
                                          const double ay, const double az,
                                          const long long chunk, const long long end,
                                          const int* __restrict__ list,
                                          const double* __restrict__ cx,
                                          const double* __restrict__ cy,
                                          const double* __restrict__ cz,
                                          const double* __restrict__ shift,
                                          const double* __restrict__ half,
                                          const float2* __restrict__ mfull, const int max_d,
                                          int* lev, float2* ish, float2* msh, int* flag,
                                          int* spill, const int spill_cap)
{
    const int lane = threadIdx.x & 31;
    // The multipoles: warp w copies sources w, w + warps, ..., its lanes
    // along the source's NQ * NF coefficients (coalesced). The chunk's
    // sources are read once per warp, a lane each, and passed round.
    const int mine = chunk + lane < end ? entry_cell(list[chunk + lane]) : -1;
    for (int s = threadIdx.x >> 5; s < 32; s += blockDim.x >> 5) {
        const int b = __shfl_sync(0xffffffffu, mine, s);
        const float2* from = mfull + (size_t)(b >= 0 ? b : 0) * NQ * NF;
        for (int r = lane; r < NQ * NF; r += 32)
            copy_async8(msh + r * LANE_LD + s, from + r, b >= 0 ? 8 : 0);
    }
    // Harmonics of u = v / rho_s, one thread per (source, m); zeros for
    // the lanes past the list's end.
    for (int e = threadIdx.x; e < 32 * (P + 1); e += blockDim.x) {
        const int s = e & 31, m = e >> 5;
        const int en = chunk + s < end ? list[chunk + s] : 0;
        const int b = chunk + s < end ? entry_cell(en) : -1;
        float2* hs = ish + s;
        bool apart = true;
        if (b >= 0) {
            const double* v = shift + 3 * entry_image(en);
            const int es = ilogb(half[b]);
            const double inv_rho = pow2(-es);
            const double ux = (ax - (cx[b] + v[0])) * inv_rho, uy = (ay - (cy[b] + v[1])) * inv_rho,
                         uz = (az - (cz[b] + v[2])) * inv_rho;
            // |u| >= 2 keeps the harmonics in float's range: so between
            // two cells of one octree of sizes a MAC on the cells'
            // geometry passes.
            const bool far_in_size = abs(et - es) > max_d;
            const bool close = ux * ux + uy * uy + uz * uz < 4.0;
            apart = far_in_size || close;
            if (m == 0) {
                lev[s] = apart ? 0 : et - es;
                if (apart) {
                    const int at = atomicAdd(spill, 1);
                    if (at < spill_cap) {
                        spill[1 + 2 * at] = a;
                        spill[2 + 2 * at] = en;
                    } else {
                        atomicOr(flag, far_in_size ? 1 : 2);
                    }
                }
            }
            if (!apart)
                singular_column<float, float2>((float)ux, (float)uy, (float)uz, m,
                    [&](int n, int mm, float2 v) { hs[full(n, mm) * LANE_LD] = v; });
        }
        if (apart) {
            if (m == 0) lev[s] = 0;
            for (int n = m; n <= P; ++n) {
                hs[full(n, m) * LANE_LD] = make_float2(0.0f, 0.0f);
                hs[full(n, -m) * LANE_LD] = make_float2(0.0f, 0.0f);
            }
        }
    }
}

// An item: x = k | l0 << 8 | W << 16, y = n_lo, z = n_hi, w = the first of
// its 2 W NQ slots (-1 for a warp of one item).
template <int NQ>
__device__ void m2l_lanes(const int n_cells, const long long* __restrict__ list_begin,
                          const long long* __restrict__ list_end, const int* __restrict__ list,
                          const double* __restrict__ cx, const double* __restrict__ cy,
                          const double* __restrict__ cz, const double* __restrict__ shift,
                          const double* __restrict__ half, const double* __restrict__ tcx,
                          const double* __restrict__ tcy, const double* __restrict__ tcz,
                          const double* __restrict__ thalf,
                          const int4* __restrict__ items, const int2* __restrict__ warp_items,
                          const int max_d, const int eu, const float2* __restrict__ mfull,
                          double2* __restrict__ local, int* __restrict__ flag,
                          int* __restrict__ spill, const int spill_cap)
{
    extern __shared__ __align__(16) unsigned char smem[];
    float2* ish = (float2*)smem;
    float2* msh = ish + NF * LANE_LD;
    float* ash = (float*)(ish + (1 + NQ) * NF * LANE_LD);
    __shared__ int lev[32];
    const int lane = threadIdx.x & 31;
    const int2 mine = warp_items[threadIdx.x >> 5];
    float acc[8 * NQ];
    for (int a = blockIdx.x; a < n_cells; a += gridDim.x) {
        const long long ls = list_begin[a], le = list_end[a];
        if (ls == le) continue;
        const int et = ilogb(thalf[a]);
#pragma unroll
        for (int v = 0; v < 8 * NQ; ++v) acc[v] = 0.0f;
        for (int i = mine.x; i < mine.y; ++i) {
            const int4 it = items[i];
            if (it.w >= 0)
                for (int v = 0; v < 2 * (it.x >> 16) * NQ; ++v) ash[(it.w + v) * 32 + lane] = 0.0f;
        }
        for (long long chunk = ls; chunk < le; chunk += 32) {
            // The previous chunk's sums are done with the buffer.
            __syncthreads();
            m2l_stage<NQ>(a, et, tcx[a], tcy[a], tcz[a], chunk, le, list, cx, cy, cz, shift, half,
                          mfull, max_d, lev, ish, msh, flag, spill, spill_cap);
            copies_done();
            __syncthreads();
            const float2* hs = ish + lane;
            const float2* ms = msh + lane;
            const int d = lev[lane];
            for (int i = mine.x; i < mine.y; ++i) {
                const int4 it = items[i];
                const int k = it.x & 255, l0 = (it.x >> 8) & 255;
                float* sums = it.w >= 0 ? ash + it.w * 32 + lane : nullptr;
                switch (it.x >> 16) {
                case 1: m2l_item<1, NQ>(acc, sums, hs, ms, k, l0, it.y, it.z, d); break;
                case 2: m2l_item<2, NQ>(acc, sums, hs, ms, k, l0, it.y, it.z, d); break;
                case 3: m2l_item<3, NQ>(acc, sums, hs, ms, k, l0, it.y, it.z, d); break;
                default: m2l_item<4, NQ>(acc, sums, hs, ms, k, l0, it.y, it.z, d); break;
                }
            }
        }
        // The lanes' sums across the warp, then to the local expansion.
        for (int i = mine.x; i < mine.y; ++i) {
            const int4 it = items[i];
            const int k = it.x & 255, l0 = (it.x >> 8) & 255;
            const float* sums = it.w >= 0 ? ash + it.w * 32 + lane : nullptr;
            const double f = ((k & 1) ? -1.0 : 1.0) * pow2(-(et + eu) * (k + 1));
            double2* out = local + (size_t)a * NQ * NC + idx(k, l0);
            switch (it.x >> 16) {
            case 1: m2l_item_out<1, NQ>(acc, sums, lane, f, out, flag); break;
            case 2: m2l_item_out<2, NQ>(acc, sums, lane, f, out, flag); break;
            case 3: m2l_item_out<3, NQ>(acc, sums, lane, f, out, flag); break;
            default: m2l_item_out<4, NQ>(acc, sums, lane, f, out, flag); break;
            }
        }
    }
}

#define M2L_LANES_ENTRY(NQ, THREADS)                                                              \
    extern "C" __global__ void __launch_bounds__(THREADS, 1) fmm_m2l_lanes_##NQ(                  \
        const int n_cells, const long long* __restrict__ list_begin,                             \
        const long long* __restrict__ list_end, const int* __restrict__ list,                     \
        const double* __restrict__ cx, const double* __restrict__ cy,                             \
        const double* __restrict__ cz, const double* __restrict__ shift,                          \
        const double* __restrict__ half, const double* __restrict__ tcx,                          \
        const double* __restrict__ tcy, const double* __restrict__ tcz,                           \
        const double* __restrict__ thalf, const int4* __restrict__ items,                         \
        const int2* __restrict__ warp_items, const int max_d, const int eu,                       \
        const float2* __restrict__ mfull, double2* __restrict__ local, int* __restrict__ flag,   \
        int* __restrict__ spill, const int spill_cap)                                             \
    {                                                                                             \
        m2l_lanes<NQ>(n_cells, list_begin, list_end, list, cx, cy, cz, shift, half, tcx, tcy,    \
                      tcz, thalf, items, warp_items, max_d, eu, mfull, local, flag, spill,        \
                      spill_cap);                                                                 \
    }
// At most 32 warps for one expansion, 16 for more (their sums take more
// registers than 64, the most a thread of 1024 may have, without spills).
M2L_LANES_ENTRY(1, 1024)
M2L_LANES_ENTRY(2, 512)
M2L_LANES_ENTRY(3, 512)

// Expansion k of nq, stored cell-major ((c * nq + k) * w floats), copied
// to an array of its own (c * w): the float M2L one expansion a pass, where
// the nq expansions' shared memory does not fit in a block.
extern "C" __global__ void fmm_take_expansion(const int n_cells, const int nq, const int k,
                                              const int w, const float* __restrict__ in,
                                              float* __restrict__ out)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)n_cells * w) return;
    const long long c = i / w, j = i % w;
    out[i] = in[(c * nq + k) * w + j];
}

// One pass's local expansions (c * w coefficients) added to expansion k of
// nq ((c * nq + k) * w).
extern "C" __global__ void fmm_add_expansion(const int n_cells, const int nq, const int k,
                                             const int w, const double2* __restrict__ in,
                                             double2* __restrict__ out)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)n_cells * w) return;
    const long long c = i / w, j = i % w;
    double2* o = out + (c * nq + k) * w + j;
    o->x += in[i].x;
    o->y += in[i].y;
}

// The multipole expansions in full range (m from -n to n, at n * n + n + m),
// the form M2L reads: one thread per coefficient.
extern "C" __global__ void fmm_full_range(const int n_exp, const double2* __restrict__ mult,
                                          double2* __restrict__ mfull)
{
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)n_exp * NF) return;
    const int f = (int)(e % NF), n = degree(f);
    mfull[e] = get(mult + (e / NF) * NC, n, f - n * n - n);
}

// The same in float, over rho^n with rho = 2^ilogb(half side) of the cell
// (see fmm_m2l_lanes): one thread per coefficient.
extern "C" __global__ void fmm_full_range_f32(const int n_exp, const int nq,
                                              const double* __restrict__ half, const int eu,
                                              const double2* __restrict__ mult,
                                              float2* __restrict__ mfull)
{
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)n_exp * NF) return;
    const int f = (int)(e % NF), n = degree(f);
    const double2 v = get(mult + (e / NF) * NC, n, f - n * n - n);
    const double s = pow2(-(ilogb(half[e / NF / nq]) + eu) * n);
    mfull[e] = make_float2((float)(v.x * s), (float)(v.y * s));
}

// L2L: one block per (cell of a level below the root, expansion), its
// threads over the cell's coefficients (PER_THREAD each); the parent's
// local expansion (a level up, done) shifted to the cell's centre and
// added, it and the offset's regular harmonics in shared memory, as M2M.
extern "C" __global__ void fmm_l2l(const int n, const int* __restrict__ cells,
                                   const int* __restrict__ parent, const double* __restrict__ cx,
                                   const double* __restrict__ cy, const double* __restrict__ cz,
                                   const int nq, const double u, double2* __restrict__ local)
{
    __shared__ double2 rs[NC], ls[NC];
    for (int b = blockIdx.x; b < n * nq; b += gridDim.x) {
        const int c = cells[b / nq], k = b % nq;
        const int pa = parent[c];
        if (pa < 0) continue;
        for (int m = threadIdx.x; m <= P; m += blockDim.x)
            regular_column((cx[c] - cx[pa]) * u, (cy[c] - cy[pa]) * u, (cz[c] - cz[pa]) * u, m, rs);
        const double2* lp = local + ((size_t)pa * nq + k) * NC;
        for (int i = threadIdx.x; i < NC; i += blockDim.x) ls[i] = lp[i];
        __syncthreads();
        double2* lc = local + ((size_t)c * nq + k) * NC;
        for (int r = 0; r < PER_THREAD; ++r) {
            const int i = threadIdx.x + r * blockDim.x;
            if (i >= NC) break;
            int nn, mm;
            degree_order(i, nn, mm);
            double2 s = make_double2(0.0, 0.0);
            for (int j = 0; j <= P - nn; ++j) {
                const int lo = max(-j, -(nn + j) - mm), hi = min(j, (nn + j) - mm);
                for (int sj = lo; sj <= hi; ++sj) {
                    const double2 v = cmulc(get(ls, nn + j, mm + sj), get(rs, j, sj));
                    s.x += v.x;
                    s.y += v.y;
                }
            }
            lc[i].x += s.x;
            lc[i].y += s.y;
        }
        __syncthreads();
    }
}

// The potential, gradient and (when `hess`) second derivatives at r (the
// regular harmonics of r in `h`) of the local expansion `lo`.
__device__ void evaluate(const double2* __restrict__ lo, const double2* h, const bool hess,
                         double& phi, double g[3], double H[3][3])
{
    phi = 0.0;
    double gz = 0.0;
    double2 gxy = make_double2(0.0, 0.0);
    for (int n = 0; n <= P; ++n) {
        phi += lo[idx(n, 0)].x * h[idx(n, 0)].x;
        for (int m = 1; m <= n; ++m) phi += 2.0 * cmulc(lo[idx(n, m)], h[idx(n, m)]).x;
        if (n == 0) continue;
        gz += lo[idx(n, 0)].x * h[idx(n - 1, 0)].x;
        for (int m = 1; m < n; ++m) gz += 2.0 * cmulc(lo[idx(n, m)], h[idx(n - 1, m)]).x;
        for (int m = -n + 2; m <= n; ++m) {
            const double2 v = cmulc(get(lo, n, m), get(h, n - 1, m - 1));
            gxy.x += v.x;
            gxy.y += v.y;
        }
    }
    g[0] = -gxy.x;
    g[1] = -gxy.y;
    g[2] = gz;
    if (!hess) return;
    double zz = 0.0;
    double2 pz = make_double2(0.0, 0.0), pp = make_double2(0.0, 0.0);
    for (int n = 2; n <= P; ++n) {
        const int kk = n - 2;
        for (int m = -n; m <= n; ++m) {
            const double2 l = get(lo, n, m);
            if (abs(m) <= kk) zz += cmulc(l, get(h, n - 2, m)).x;
            if (abs(m - 1) <= kk) {
                const double2 v = cmulc(l, get(h, n - 2, m - 1));
                pz.x += v.x;
                pz.y += v.y;
            }
            if (abs(m - 2) <= kk) {
                const double2 v = cmulc(l, get(h, n - 2, m - 2));
                pp.x += v.x;
                pp.y += v.y;
            }
        }
    }
    const double xz = -pz.x, yz = -pz.y;
    const double xx = 0.5 * (-zz + pp.x), yy = 0.5 * (-zz - pp.x), xy = 0.5 * pp.y;
    H[0][0] = xx; H[0][1] = xy; H[0][2] = xz;
    H[1][0] = xy; H[1][1] = yy; H[1][2] = yz;
    H[2][0] = xz; H[2][1] = yz; H[2][2] = zz;
}

// Far-field terms, as the kernel declares them (fmm_codegen::kernel::Term).

// L2P: one thread per target (tree order); the far field of the target's
// leaf's local expansions, combined into the outputs by the declared terms
// (`term[2 t]` the kind, `term[2 t + 1]` the first output slot; `coef[t]`
// the coefficient; a stretching term reads the target vector `a0, a1, a2`).
// Writes `out[o * n + i]` for every output slot o.
template <typename T>
__device__ void l2p(const int n, const int* __restrict__ leaf_of, const double* __restrict__ cx,
                    const double* __restrict__ cy, const double* __restrict__ cz,
                    const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ z,
                    const int nq, const double2* __restrict__ local, const int n_terms,
                    const int* __restrict__ term, const double* __restrict__ coef,
                    const T* __restrict__ a0, const T* __restrict__ a1,
                    const T* __restrict__ a2, const double u, const int n_out,
                    const unsigned long long* __restrict__ outs)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int a = leaf_of[i];
    bool hess = false;
    for (int t = 0; t < n_terms; ++t) hess |= term[2 * t] == TERM_STRETCHING;
    double2 h[NC];
    regular(((double)x[i] - cx[a]) * u, ((double)y[i] - cy[a]) * u, ((double)z[i] - cz[a]) * u, h);
    double phi[3], g[3][3], H[3][3][3];
    // Back from the unit box: 1/r scales as u, its gradient as u^2, its
    // second derivatives as u^3.
    const double u2 = u * u, u3 = u2 * u;
    for (int k = 0; k < nq; ++k) {
        evaluate(local + ((size_t)a * nq + k) * NC, h, hess, phi[k], g[k], H[k]);
        phi[k] *= u;
        for (int b = 0; b < 3; ++b) {
            g[k][b] *= u2;
            for (int e = 0; e < 3; ++e) H[k][b][e] *= u3;
        }
    }
    double o[MAX_OUT];
    for (int s = 0; s < MAX_OUT; ++s) o[s] = 0.0;
    for (int t = 0; t < n_terms; ++t) {
        const int kind = term[2 * t], s = term[2 * t + 1];
        const double c = coef[t];
        if (kind == TERM_POTENTIAL) {
            for (int k = 0; k < nq; ++k) o[s + k] += c * phi[k];
        } else if (kind == TERM_GRADIENT) {
            for (int e = 0; e < 3; ++e) o[s + e] += c * g[0][e];
        } else if (kind == TERM_CURL) {
            o[s] += c * (g[2][1] - g[1][2]);
            o[s + 1] += c * (g[0][2] - g[2][0]);
            o[s + 2] += c * (g[1][0] - g[0][1]);
        } else if (kind == TERM_STRETCHING) {
            const double al[3] = {(double)a0[i], (double)a1[i], (double)a2[i]};
            for (int b = 0; b < 3; ++b) {
                const double ab = c * al[b];
                o[s] += ab * (H[2][b][1] - H[1][b][2]);
                o[s + 1] += ab * (H[0][b][2] - H[2][b][0]);
                o[s + 2] += ab * (H[1][b][0] - H[0][b][1]);
            }
        }
    }
    // Each output slot is an array of its own (`outs` holds their
    // addresses), which the P2P lists then add to: no copy between them.
    for (int s = 0; s < n_out; ++s) ((T*)outs[s])[i] = (T)o[s];
}

#define PRECISION(T, SUFFIX)                                                                      \
    extern "C" __global__ void fmm_cell_radius2_##SUFFIX(                                        \
        const int n, const int* __restrict__ leaf_of, const int* __restrict__ parent,             \
        const double* __restrict__ cx, const double* __restrict__ cy,                             \
        const double* __restrict__ cz, const T* __restrict__ x, const T* __restrict__ y,          \
        const T* __restrict__ z, unsigned long long* __restrict__ r2)                             \
    {                                                                                             \
        cell_radius2<T>(n, leaf_of, parent, cx, cy, cz, x, y, z, r2);                             \
    }                                                                                             \
    extern "C" __global__ void fmm_p2m_##SUFFIX(                                                 \
        const int n_cells, const int* __restrict__ n_children, const int* __restrict__ begin,    \
        const int* __restrict__ end, const double* __restrict__ cx,                               \
        const double* __restrict__ cy, const double* __restrict__ cz, const T* __restrict__ x,    \
        const T* __restrict__ y, const T* __restrict__ z, const int nq,                           \
        const T* __restrict__ q0, const T* __restrict__ q1, const T* __restrict__ q2,             \
        const double u, double2* __restrict__ mult)                                               \
    {                                                                                             \
        p2m<T>(n_cells, n_children, begin, end, cx, cy, cz, x, y, z, nq, q0, q1, q2, u, mult);       \
    }                                                                                             \
    extern "C" __global__ void fmm_l2p_##SUFFIX(                                                 \
        const int n, const int* __restrict__ leaf_of, const double* __restrict__ cx,              \
        const double* __restrict__ cy, const double* __restrict__ cz, const T* __restrict__ x,    \
        const T* __restrict__ y, const T* __restrict__ z, const int nq,                           \
        const double2* __restrict__ local, const int n_terms, const int* __restrict__ term,       \
        const double* __restrict__ coef, const T* __restrict__ a0, const T* __restrict__ a1,      \
        const T* __restrict__ a2, const double u, const int n_out,                                \
        const unsigned long long* __restrict__ outs)                                              \
    {                                                                                             \
        l2p<T>(n, leaf_of, cx, cy, cz, x, y, z, nq, local, n_terms, term, coef, a0, a1, a2, u,    \
               n_out, outs);                                                                      \
    }

PRECISION(float, f32)
PRECISION(double, f64)

// ---------------------------------------------------------------------------
// The dual tree traversal on the device, level by level over the target
// tree (the form of traversal.rs's traverse_levels): one thread per target
// cell of the level works through the source cells its parent handed down
// (its frontier), with a small stack for the source cells it splits. It
// runs twice per level: first counting (M2L, P2P and handed-down cells per
// target cell), then, after a scan of the counts, writing them.

// A thread's stack holds TRAVERSE_STACK source cells while splitting: 7 per
// level of the source tree and one.
extern "C" __global__ void fmm_traverse(
    const int n, const int* __restrict__ cells, const int emit, const double theta2,
    // cells whose spheres are nearer than this are not well separated
    // (tree::traversal::well_separated; 0: the plain MAC)
    const double near,
    // target tree
    const double* __restrict__ tx, const double* __restrict__ ty, const double* __restrict__ tz,
    const double* __restrict__ tr, const int* __restrict__ t_nchild,
    const int* __restrict__ t_more, const int* __restrict__ t_next,
    // source tree
    const double* __restrict__ sx, const double* __restrict__ sy, const double* __restrict__ sz,
    const double* __restrict__ sr, const int* __restrict__ s_nchild,
    const int* __restrict__ s_more, const int* __restrict__ s_next,
    // the lattice shifts of the images entries name (x, y, z an image)
    const double* __restrict__ shift,
    // this level's frontiers (per target cell) in `frontier`
    const long long* __restrict__ f_begin, const long long* __restrict__ f_end,
    const int* __restrict__ frontier,
    // the level's items: with `split` 0 item t is cells[t] with its whole
    // frontier; else item t is the piece piece_lo[t]..piece_hi[t] of the
    // frontier of cells[piece_of[t]], a cell's pieces consecutive
    // (fmm_frontier_items)
    const int split, const int* __restrict__ piece_of, const long long* __restrict__ piece_lo,
    const long long* __restrict__ piece_hi,
    // counts (first pass) or their exclusive scans (second pass), n + 1
    // each; 64-bit, as are the offsets below: the lists pass 2^31 entries
    // from about 2e8 particles
    unsigned long long* __restrict__ n_m2l, unsigned long long* __restrict__ n_p2p,
    unsigned long long* __restrict__ n_def,
    // second pass: where this level's entries start in the pools
    const long long m2l_base, const long long p2p_base,
    int* __restrict__ m2l_pool, long long* __restrict__ m2l_begin, long long* __restrict__ m2l_end,
    int* __restrict__ p2p_pool, long long* __restrict__ p2p_begin, long long* __restrict__ p2p_end,
    int* __restrict__ deferred, long long* __restrict__ next_f_begin,
    long long* __restrict__ next_f_end, int* __restrict__ overflow)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const int slot = split ? piece_of[t] : t;
    const int a = cells[slot];
    const long long f0 = split ? piece_lo[t] : f_begin[a], f1 = split ? piece_hi[t] : f_end[a];
    // The cell's first and last items write where its lists begin and end.
    const bool first = !split || t == 0 || piece_of[t - 1] != slot;
    const bool last = !split || t == n - 1 || piece_of[t + 1] != slot;
    const double ax = tx[a], ay = ty[a], az = tz[a], ra = tr[a];
    const bool leaf_a = t_nchild[a] == 0;
    int c_m2l = 0, c_p2p = 0, c_def = 0;
    long long o_m2l = 0, o_p2p = 0, o_def = 0;
    if (emit) {
        o_m2l = m2l_base + (long long)n_m2l[t];
        o_p2p = p2p_base + (long long)n_p2p[t];
        o_def = (long long)n_def[t];
    }
    int stack[TRAVERSE_STACK];
    for (long long f = f0; f < f1; ++f) {
        int top = 0;
        stack[top++] = frontier[f];
        while (top > 0) {
            const int e = stack[--top];
            const int b = entry_cell(e);
            const double* v = shift + 3 * entry_image(e);
            const double dx = ax - (sx[b] + v[0]), dy = ay - (sy[b] + v[1]),
                         dz = az - (sz[b] + v[2]);
            const double r = ra + sr[b];
            const bool leaf_b = s_nchild[b] == 0;
            // The CPU's MAC to the bit (no fused multiply-adds): the node
            // far fields' radii are the cells' half sides times sqrt 3, so
            // cells on the lattice meet the MAC's bound within a rounding.
            const double d2 = __dadd_rn(__dadd_rn(__dmul_rn(dx, dx), __dmul_rn(dy, dy)),
                                        __dmul_rn(dz, dz));
            const double rn = __dadd_rn(r, near);
            if (__dmul_rn(r, r) < __dmul_rn(theta2, d2)
                && (near == 0.0 || __dmul_rn(rn, rn) < d2)) {
                if (emit) m2l_pool[o_m2l + c_m2l] = e;
                ++c_m2l;
            } else if (leaf_a && leaf_b) {
                if (emit) p2p_pool[o_p2p + c_p2p] = e;
                ++c_p2p;
            } else if (leaf_a || (!leaf_b && sr[b] > ra)) {
                if (top + 8 > TRAVERSE_STACK) {
                    atomicExch(overflow, 1);
                    return;
                }
                // The children, of the same image.
                const int image = e & ~((1 << CELL_BITS) - 1);
                int ch = s_more[b];
                for (int i = 0; i < s_nchild[b]; ++i) {
                    stack[top++] = ch | image;
                    ch = s_next[ch];
                }
            } else {
                if (emit) deferred[o_def + c_def] = e;
                ++c_def;
            }
        }
    }
    if (!emit) {
        n_m2l[t] = c_m2l;
        n_p2p[t] = c_p2p;
        n_def[t] = c_def;
        return;
    }
    if (first) {
        m2l_begin[a] = o_m2l;
        if (leaf_a) p2p_begin[a] = o_p2p;
    }
    if (last) {
        m2l_end[a] = o_m2l + c_m2l;
        if (leaf_a) p2p_end[a] = o_p2p + c_p2p;
    }
    int ch = t_more[a];
    for (int e = 0; e < t_nchild[a]; ++e) {
        if (first) next_f_begin[ch] = o_def;
        if (last) next_f_end[ch] = o_def + c_def;
        ch = t_next[ch];
    }
}

// A level's frontiers cut into pieces of at most `per` entries, items of
// fmm_traverse of their own: where a level has few cells and long
// frontiers (the top levels in a periodic box, whose root's frontier is
// the source root's 125 images), a thread a cell held the level's work on
// a few threads (the traversal took 9 ms more than in free space at 10^7).
// First the pieces of each of the level's cells (at least one, so that
// every cell writes its lists and its children's frontiers), then, from
// their exclusive scan, the items.
extern "C" __global__ void fmm_frontier_pieces(const int n, const int* __restrict__ cells,
                                               const long long* __restrict__ f_begin,
                                               const long long* __restrict__ f_end, const int per,
                                               unsigned long long* __restrict__ counts)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long len = f_end[cells[i]] - f_begin[cells[i]];
    counts[i] = len <= per ? 1 : (unsigned long long)((len + per - 1) / per);
}

extern "C" __global__ void fmm_frontier_items(const int n, const int* __restrict__ cells,
                                              const long long* __restrict__ f_begin,
                                              const long long* __restrict__ f_end, const int per,
                                              const unsigned long long* __restrict__ offsets,
                                              int* __restrict__ piece_of,
                                              long long* __restrict__ piece_lo,
                                              long long* __restrict__ piece_hi)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long b = f_begin[cells[i]], e = f_end[cells[i]];
    for (unsigned long long k = offsets[i]; k < offsets[i + 1]; ++k) {
        const long long lo = b + (long long)(k - offsets[i]) * per;
        piece_of[k] = i;
        piece_lo[k] = lo;
        piece_hi[k] = min(e, lo + per);
    }
}
