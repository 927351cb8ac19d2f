// What the treecode's GPU walk reads of the trees besides the cells'
// pseudo-sources (far/monopole/monopole.cu, or a node far field's): each
// cell's children in eight slots (children8), the cells' geometry in the
// walk's precision (to_real_*) and the target groups' boxes (group_box_*).
//
// Plain CUDA C for NVRTC. The host prepends the #define of BLOCK from its
// own constant (methods/treecode/cuda/cells.rs).

// ---------------------------------------------------------------------------
// What the treecode walk reads of the trees.

// Each cell's children, eight slots a cell (the walk pushes a cell's
// children on its stack at once): child[8 c + m].
extern "C" __global__ void children8(int nc, const int* more, const int* next,
                                     const int* n_children, int* child) {
    const int c = blockIdx.x * BLOCK + threadIdx.x;
    if (c >= nc) return;
    int ch = more[c];
    for (int m = 0; m < n_children[c]; ++m) {
        child[8 * c + m] = ch;
        ch = next[ch];
    }
}

// The bounding box of each group's targets (tree order), a thread a group.
template <typename T>
__device__ void group_box(int ng, const int* gb, const int* ge, const T* x, const T* y,
                          const T* z, T* lx, T* ly, T* lz, T* hx, T* hy, T* hz) {
    const int g = blockIdx.x * BLOCK + threadIdx.x;
    if (g >= ng) return;
    const int b = gb[g], e = ge[g];
    T lo[3] = {x[b], y[b], z[b]}, hi[3] = {x[b], y[b], z[b]};
    for (int i = b + 1; i < e; ++i) {
        const T p[3] = {x[i], y[i], z[i]};
#pragma unroll
        for (int a = 0; a < 3; ++a) {
            lo[a] = p[a] < lo[a] ? p[a] : lo[a];
            hi[a] = p[a] > hi[a] ? p[a] : hi[a];
        }
    }
    lx[g] = lo[0]; ly[g] = lo[1]; lz[g] = lo[2];
    hx[g] = hi[0]; hy[g] = hi[1]; hz[g] = hi[2];
}

// Cell geometry in the walk's precision.
template <typename T>
__device__ void to_real(int n, const double* in, T* out) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) out[i] = (T)in[i];
}

// ---------------------------------------------------------------------------
// Entry points per precision.

#define ENTRIES(T, S)                                                                          \
    extern "C" __global__ void to_real_##S(int n, const double* in, T* out) {                  \
        to_real<T>(n, in, out);                                                                \
    }                                                                                          \
    extern "C" __global__ void group_box_##S(int ng, const int* gb, const int* ge, const T* x, \
                                             const T* y, const T* z, T* lx, T* ly, T* lz,      \
                                             T* hx, T* hy, T* hz) {                            \
        group_box<T>(ng, gb, ge, x, y, z, lx, ly, lz, hx, hy, hz);                             \
    }

ENTRIES(float, f32)
ENTRIES(double, f64)
