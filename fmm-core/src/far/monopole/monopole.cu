// The cells' monopoles (far/monopole/cuda.rs), the CPU's `pseudo_sources`
// (far/monopole/mod.rs): per-particle weights (weight_*), per-cell sums
// level by level from the deepest (moments_*), and the centres of strength
// and acceptance radii (finish_*).
//
// Arithmetic that must match the CPU bit for bit uses the explicitly rounded
// intrinsics (__dadd_rn, ...), so that --fmad=true cannot contract it into
// fused multiply-adds the CPU does not do.
//
// Plain CUDA C for NVRTC. The host prepends the #define of BLOCK from its
// own constant.

typedef unsigned int u32;

#define INF_D __longlong_as_double(0x7ff0000000000000LL)

// ---------------------------------------------------------------------------
// Pseudo-sources. Slots are packed: slot k of particle j at k * n + j (and
// of cell c at k * n_cells + c).

// Per particle: the norm of its strength slots, summed in the order of
// `strength` as the CPU does.
template <typename T>
__device__ void weight(int n, const T* slots, int n_strength, const int* strength,
                       double* wpart) {
    const long long j = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (j >= n) return;
    double s = 0.0;
    for (int q = 0; q < n_strength; ++q) {
        const double v = (double)slots[(long long)strength[q] * n + j];
        s = __dadd_rn(s, __dmul_rn(v, v));
    }
    wpart[j] = __dsqrt_rn(s);
}

// One level's cells: a leaf sums its particles, an inner cell its children
// (already done: they are one level deeper), each sum in the CPU's order.
template <typename T>
__device__ void moments(int m, int start, const int* by_level, int nc, const int* begin,
                        const int* end, const int* more, const int* next, const T* px,
                        const T* py, const T* pz, int n, const T* slots, int ns,
                        u32 strength_mask, const double* wpart, double* w, double* wx,
                        double* wy, double* wz, double* acc, double* plain) {
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= m) return;
    const int c = by_level[start + i];
    const int b = begin[c], e = end[c];
    if (more[c] == next[c]) {
        double sw = 0.0, sx = 0.0, sy = 0.0, sz = 0.0;
        for (int j = b; j < e; ++j) {
            const double wj = wpart[j];
            sw = __dadd_rn(sw, wj);
            sx = __dadd_rn(sx, __dmul_rn(wj, (double)px[j]));
            sy = __dadd_rn(sy, __dmul_rn(wj, (double)py[j]));
            sz = __dadd_rn(sz, __dmul_rn(wj, (double)pz[j]));
        }
        w[c] = sw;
        wx[c] = sx;
        wy[c] = sy;
        wz[c] = sz;
        for (int k = 0; k < ns; ++k) {
            const bool str = (strength_mask >> k) & 1u;
            const T* sk = slots + (long long)k * n;
            double a = 0.0, p = 0.0;
            for (int j = b; j < e; ++j) {
                const double v = (double)sk[j];
                a = __dadd_rn(a, str ? v : __dmul_rn(wpart[j], v));
                p = __dadd_rn(p, v);
            }
            acc[(long long)k * nc + c] = a;
            plain[(long long)k * nc + c] = p;
        }
    } else {
        double sw = 0.0, sx = 0.0, sy = 0.0, sz = 0.0;
        for (int ch = more[c]; ch < next[c]; ch = next[ch]) {
            sw = __dadd_rn(sw, w[ch]);
            sx = __dadd_rn(sx, wx[ch]);
            sy = __dadd_rn(sy, wy[ch]);
            sz = __dadd_rn(sz, wz[ch]);
        }
        w[c] = sw;
        wx[c] = sx;
        wy[c] = sy;
        wz[c] = sz;
        for (int k = 0; k < ns; ++k) {
            double a = 0.0, p = 0.0;
            for (int ch = more[c]; ch < next[c]; ch = next[ch]) {
                a = __dadd_rn(a, acc[(long long)k * nc + ch]);
                p = __dadd_rn(p, plain[(long long)k * nc + ch]);
            }
            acc[(long long)k * nc + c] = a;
            plain[(long long)k * nc + c] = p;
        }
    }
}

// The pseudo-source of every cell: summed strength at the centre of
// strength, other slots averaged by weight (plain mean without strength),
// and nakasato2009's acceptance radius squared, (2 half / theta + delta)^2.
template <typename T>
__device__ void finish(int nc, double theta, const double* cx, const double* cy,
                       const double* cz, const double* half, const int* begin, const int* end,
                       const double* w, const double* wx, const double* wy, const double* wz,
                       const double* acc, const double* plain, int ns, u32 strength_mask, T* ox,
                       T* oy, T* oz, double* comx, double* comy, double* comz, T* oslots,
                       double* accept2) {
    const int c = blockIdx.x * BLOCK + threadIdx.x;
    if (c >= nc) return;
    const double wc = w[c];
    const int len = end[c] - begin[c];
    const double cnt = (double)(len > 1 ? len : 1);
    const double ctr[3] = {cx[c], cy[c], cz[c]};
    double p[3];
    if (wc > 0.0) {
        p[0] = __ddiv_rn(wx[c], wc);
        p[1] = __ddiv_rn(wy[c], wc);
        p[2] = __ddiv_rn(wz[c], wc);
    } else {
        p[0] = ctr[0];
        p[1] = ctr[1];
        p[2] = ctr[2];
    }
    ox[c] = (T)p[0];
    oy[c] = (T)p[1];
    oz[c] = (T)p[2];
    comx[c] = p[0];
    comy[c] = p[1];
    comz[c] = p[2];
    for (int k = 0; k < ns; ++k) {
        const long long at = (long long)k * nc + c;
        double v;
        if ((strength_mask >> k) & 1u)
            v = acc[at];
        else if (wc > 0.0)
            v = __ddiv_rn(acc[at], wc);
        else
            v = __ddiv_rn(plain[at], cnt);
        oslots[at] = (T)v;
    }
    double d2 = 0.0;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const double d = __dsub_rn(p[a], ctr[a]);
        d2 = __dadd_rn(d2, __dmul_rn(d, d));
    }
    const double delta = __dsqrt_rn(d2);
    // The floor of pseudo.rs's `resolution`: 2^-40 of the coordinates'
    // size, for cells smaller than the positions' resolution.
    const double res =
        fmax(fmax(fabs(ctr[0]), fabs(ctr[1])), fmax(fabs(ctr[2]), half[c])) * 0x1p-40;
    const double reach =
        theta > 0.0 ? __dadd_rn(__dadd_rn(__ddiv_rn(__dmul_rn(2.0, half[c]), theta), delta), res)
                    : INF_D;
    accept2[c] = __dmul_rn(reach, reach);
}

// ---------------------------------------------------------------------------
// Entry points per precision.

#define ENTRIES(T, S)                                                                          \
    extern "C" __global__ void weight_##S(int n, const T* slots, int n_strength,               \
                                          const int* strength, double* wpart) {                \
        weight<T>(n, slots, n_strength, strength, wpart);                                      \
    }                                                                                          \
    extern "C" __global__ void moments_##S(                                                    \
        int m, int start, const int* by_level, int nc, const int* begin, const int* end,       \
        const int* more, const int* next, const T* px, const T* py, const T* pz, int n,        \
        const T* slots, int ns, u32 strength_mask, const double* wpart, double* w, double* wx, \
        double* wy, double* wz, double* acc, double* plain) {                                  \
        moments<T>(m, start, by_level, nc, begin, end, more, next, px, py, pz, n, slots, ns,   \
                   strength_mask, wpart, w, wx, wy, wz, acc, plain);                           \
    }                                                                                          \
    extern "C" __global__ void finish_##S(                                                     \
        int nc, double theta, const double* cx, const double* cy, const double* cz,            \
        const double* half, const int* begin, const int* end, const double* w,                 \
        const double* wx, const double* wy, const double* wz, const double* acc,               \
        const double* plain, int ns, u32 strength_mask, T* ox, T* oy, T* oz, double* comx,     \
        double* comy, double* comz, T* oslots, double* accept2) {                              \
        finish<T>(nc, theta, cx, cy, cz, half, begin, end, w, wx, wy, wz, acc, plain, ns,      \
                  strength_mask, ox, oy, oz, comx, comy, comz, oslots, accept2);               \
    }

ENTRIES(float, f32)
ENTRIES(double, f64)
