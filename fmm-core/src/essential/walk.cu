// The local essential tree on the GPU (essential/gpu.rs): the walk of the
// sender's tree for every receiver at once, and the gather of what each
// receiver gets into one array per field.
//
// The walk is essential/mod.rs `select`, operation for operation: a cell
// the walk reaches goes as nodes where it satisfies the MAC
// (radius half < theta d, d the distance from its centre to the
// receiver's box, the nearest image's along periodic axes), holds more
// particles than nodes and its sphere stays within the domain's limits;
// as its particles where it satisfies the MAC or is a leaf; else it is
// opened and its children are reached. One launch a level, one thread a
// (cell, receiver), top down: a cell is reached only through its parent.
// The distance is summed with explicitly rounded intrinsics, so that
// --fmad=true cannot contract it into fused multiply-adds the CPU does not
// do: both walks then send the same cells.
//
// Plain CUDA C for NVRTC. The host prepends the states REACHED, AS_NODES,
// AS_PARTICLES and OPENED (a cell's in one receiver's walk; 0 where the
// walk did not reach it) from its own constants.

typedef unsigned char u8;

// How far v lies outside [lo, hi] (0 inside): the CPU's `gap`.
__device__ __forceinline__ double gap(double lo, double hi, double v)
{
    return fmax(fmax(lo - v, v - hi), 0.0);
}

// One level of the walk: `m` cells (`cells`, depth-first indices) for each
// of the `n_active` receivers `active` still walking (box q: region[6 q
// ..] lo then hi; live[q] 0 for the sender itself and an empty box).
// `first`: the root's level, which every live receiver reaches.
// `state[q n_cells + c]`: cell c in receiver q's walk. Periodic axes: bit a
// of `periodic`, the box's side `side`; `limits`: lo then hi of where a
// sphere of nodes may lie. Each verdict to send is appended to `picks`
// (2 q + 1 where as particles, then c; `found[0]` counts them, past `cap`
// only counted); `walking[q]` is set where q reaches a cell of the next
// level.
extern "C" __global__ void essential_walk(
    const int m, const int* __restrict__ cells, const int first, const int n_cells,
    const int n_active, const int* __restrict__ active, const u8* __restrict__ live,
    const double* __restrict__ region,
    const double* __restrict__ cx, const double* __restrict__ cy, const double* __restrict__ cz,
    const double* __restrict__ half, const int* __restrict__ begin, const int* __restrict__ end,
    const int* __restrict__ more, const int* __restrict__ next,
    const int* __restrict__ n_children, const long long k, const double radius,
    const double theta, const int periodic, const double side,
    const double* __restrict__ limits, u8* __restrict__ state, u8* __restrict__ walking,
    int* __restrict__ found, int* __restrict__ picks, const int cap)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)m * n_active) return;
    const int q = active[t / m], c = cells[t % m];
    u8* s = state + (long long)q * n_cells;
    if (first ? !live[q] : s[c] != REACHED) return;
    const double x[3] = {cx[c], cy[c], cz[c]};
    const double* lo = region + 6 * q;
    const double* hi = lo + 3;
    double d2 = 0.0;
    for (int a = 0; a < 3; ++a) {
        double g = gap(lo[a], hi[a], x[a]);
        if (periodic & (1 << a)) {
            g = fmin(fmin(g, gap(lo[a], hi[a], x[a] - side)), gap(lo[a], hi[a], x[a] + side));
        }
        d2 = __dadd_rn(d2, __dmul_rn(g, g));
    }
    const double r = __dmul_rn(radius, half[c]);
    const bool far = r < __dmul_rn(theta, sqrt(d2));
    bool holds = true;
    for (int a = 0; a < 3; ++a) {
        holds = holds && x[a] - r >= limits[a] && x[a] + r <= limits[3 + a];
    }
    u8 verdict;
    if (far && (long long)(end[c] - begin[c]) > k && holds) {
        verdict = AS_NODES;
    } else if (far || n_children[c] == 0) {
        verdict = AS_PARTICLES;
    } else {
        s[c] = OPENED;
        int ch = more[c];
        for (int e = 0; e < n_children[c]; ++e) {
            s[ch] = REACHED;
            ch = next[ch];
        }
        walking[q] = 1;
        return;
    }
    s[c] = verdict;
    const int at = atomicAdd(found, 1);
    if (at < cap) {
        picks[2 * at] = 2 * q + (verdict == AS_PARTICLES);
        picks[2 * at + 1] = c;
    }
}

// Runs of two arrays gathered into one: run r copies len[r] values from
// index from[r] on of the pair (`a` below `split`, `b` at from - split
// above it) to `out` from to[r] on. A block a run.
template <typename T>
__device__ void gather_runs(const long long* __restrict__ from, const long long* __restrict__ to,
                            const int* __restrict__ len, const long long split,
                            const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out)
{
    const int r = blockIdx.x;
    const long long f = from[r], o = to[r];
    for (int j = threadIdx.x; j < len[r]; j += blockDim.x) {
        const long long i = f + j;
        out[o + j] = i < split ? a[i] : b[i - split];
    }
}

#define PRECISION(T, S)                                                                            \
    extern "C" __global__ void essential_gather_runs_##S(                                          \
        const long long* __restrict__ from, const long long* __restrict__ to,                      \
        const int* __restrict__ len, const long long split, const T* __restrict__ a,               \
        const T* __restrict__ b, T* __restrict__ out)                                              \
    {                                                                                              \
        gather_runs<T>(from, to, len, split, a, b, out);                                           \
    }

PRECISION(float, f32)
PRECISION(double, f64)
