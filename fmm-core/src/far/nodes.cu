// The node far fields' operators on the GPU (far/cuda.rs; the FMM that
// runs them: methods/fmm/cuda/nodes.rs): P2M, M2M, L2L and L2P of node
// strengths and node values, the same formulas as the CPU's (far/nodes.rs
// with the weights of far/chebyshev.rs and far/pseudo.rs), and the small
// kernels around the M2L, which is the kernel's own generated P2P-list
// entry between node sets (node positions, the node sources' slots, the
// target-field channels of the local values).
//
// One module for every order and both far fields: the basis comes as
// arguments, not as defines, so nothing is compiled per order:
//   kind    KIND_CHEBYSHEV or KIND_PPM;
//   p       the order (Chebyshev: p + 1 nodes a side; PPM: the degree of
//           the Legendre sum);
//   k       nodes a cell;
//   table   Chebyshev: T_j at root m, table[m * (p + 1) + j] (the CPU's
//           `t_roots`); PPM: the design's unit vectors, table[3 i + axis];
//   rs      PPM: the sphere's radius in the unit frame (unused otherwise).
// Nodes are numbered as the CPU numbers them (Chebyshev: x fastest, then
// y, then z), node i of cell c at c * k + i in every per-node array.
//
// Arithmetic that must match the CPU bit for bit uses the explicitly
// rounded intrinsics (__dadd_rn, ...), so that --fmad=true cannot
// contract it into fused multiply-adds the CPU does not do: the weights,
// P2M, M2M, L2L and L2P are then the CPU's to the last bit where they sum
// in the CPU's order (they do, but for the M2L's sums, which the kernel
// makes in its own order). Node strengths and local values are double
// whatever the particles' precision, as on the CPU.
//
// Plain CUDA C for NVRTC. The host prepends KIND_CHEBYSHEV, KIND_PPM,
// MAX_SIDE (most Chebyshev nodes a side) and MAX_SLOTS (most scalar slots
// of each kind a kernel has: strength components, target fields, outputs)
// from its own constants (far/cuda.rs).

typedef unsigned long long u64;

// acc + a b, rounded as the CPU rounds it (no fused multiply-add).
__device__ __forceinline__ double madd(double acc, double a, double b)
{
    return __dadd_rn(acc, __dmul_rn(a, b));
}

// The thread's index over a launch of one thread per item (64-bit: per
// (cell, node, channel) launches pass 2^31 items for large trees).
__device__ __forceinline__ long long item() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }

// A point in a cell's unit frame (far/nodes.rs `unit`).
__device__ __forceinline__ void unit_frame(double x, double y, double z, double cx, double cy,
                                           double cz, double half, double u[3])
{
    const double s = __ddiv_rn(1.0, half);
    u[0] = __dmul_rn(__dsub_rn(x, cx), s);
    u[1] = __dmul_rn(__dsub_rn(y, cy), s);
    u[2] = __dmul_rn(__dsub_rn(z, cz), s);
}

// The octant of child `ch` about its parent `c` (bit a: the upper half
// along axis a), as far/nodes.rs `octant`.
__device__ __forceinline__ int octant(int ch, int c, const double* __restrict__ cx,
                                      const double* __restrict__ cy,
                                      const double* __restrict__ cz)
{
    return (cx[ch] > cx[c] ? 1 : 0) | (cy[ch] > cy[c] ? 2 : 0) | (cz[ch] > cz[c] ? 4 : 0);
}

// ---------------------------------------------------------------------------
// Weights (far/chebyshev.rs, far/pseudo.rs).

// T_0(x) .. T_{n-1}(x) by the three-term recurrence (chebyshev.rs
// `chebyshev_t`).
__device__ void chebyshev_t(double x, int n, double* t)
{
    t[0] = 1.0;
    if (n > 1) t[1] = x;
    for (int j = 2; j < n; ++j) t[j] = __dsub_rn(__dmul_rn(__dmul_rn(2.0, x), t[j - 1]), t[j - 2]);
}

// S_n(x, root m) from T_j(x) (`t`) and T_j(root m) (`tm`):
// 1/n + 2/n sum_{j=1}^{n-1} T_j(x) T_j(root m) (chebyshev.rs `weights_1d`).
__device__ __forceinline__ double chebyshev_s(const double* t, const double* __restrict__ tm,
                                              int n)
{
    double s = 0.0;
    for (int j = 1; j < n; ++j) s = madd(s, t[j], tm[j]);
    const double inv = __ddiv_rn(1.0, (double)n);
    return __dadd_rn(inv, __dmul_rn(__dmul_rn(2.0, inv), s));
}

// S_n(x, root m) for every root m, into w.
__device__ void chebyshev_1d(double x, int n, const double* __restrict__ table, double* w)
{
    double t[MAX_SIDE];
    chebyshev_t(x, n, t);
    for (int m = 0; m < n; ++m) w[m] = chebyshev_s(t, table + m * n, n);
}

// The weight of Chebyshev node i (x fastest) at u: the product of its
// three 1D weights, x (y z) as the CPU multiplies them.
__device__ double chebyshev_node(int i, int n, const double* __restrict__ table, const double u[3])
{
    const int ix = i % n, iy = (i / n) % n, iz = i / (n * n);
    double t[MAX_SIDE];
    chebyshev_t(u[0], n, t);
    const double wx = chebyshev_s(t, table + ix * n, n);
    chebyshev_t(u[1], n, t);
    const double wy = chebyshev_s(t, table + iy * n, n);
    chebyshev_t(u[2], n, t);
    const double wz = chebyshev_s(t, table + iz * n, n);
    return __dmul_rn(wx, __dmul_rn(wy, wz));
}

// |u|^2 / rs^2, shared by every pseudo-particle's weight at u.
__device__ __forceinline__ double ppm_s2(const double u[3], double rs)
{
    const double r2 = __dadd_rn(__dadd_rn(__dmul_rn(u[0], u[0]), __dmul_rn(u[1], u[1])),
                                __dmul_rn(u[2], u[2]));
    return __ddiv_rn(r2, __dmul_rn(rs, rs));
}

// The weight of pseudo-particle i (unit vector d) at u: (1/k) sum_{n=0}^{p}
// (2n + 1) (|u| / rs)^n P_n(cos gamma), by the scaled Legendre recurrence
// of pseudo.rs `weights`.
__device__ double ppm_node(const double* __restrict__ d, int p, int k, double rs, double s2,
                           const double u[3])
{
    const double dot = __dadd_rn(__dadd_rn(__dmul_rn(u[0], d[0]), __dmul_rn(u[1], d[1])),
                                 __dmul_rn(u[2], d[2]));
    const double sc = __ddiv_rn(dot, rs);
    double q0 = 1.0, q1 = sc;
    double sum = __dadd_rn(1.0, __dmul_rn(3.0, sc));
    for (int n = 1; n < p; ++n) {
        const double nf = (double)n;
        const double a = __dmul_rn(__dmul_rn(__dadd_rn(__dmul_rn(2.0, nf), 1.0), sc), q1);
        const double b = __dmul_rn(__dmul_rn(nf, s2), q0);
        const double q2 = __ddiv_rn(__dsub_rn(a, b), __dadd_rn(nf, 1.0));
        sum = madd(sum, __dadd_rn(__dmul_rn(2.0, nf), 3.0), q2);
        q0 = q1;
        q1 = q2;
    }
    return __dmul_rn(sum, __ddiv_rn(1.0, (double)k));
}

// The weight of node i at u (unit frame), either basis.
__device__ double node_weight(int kind, int p, int k, const double* __restrict__ table, double rs,
                              int i, const double u[3])
{
    if (kind == KIND_PPM) return ppm_node(table + 3 * i, p, k, rs, ppm_s2(u, rs), u);
    return chebyshev_node(i, p + 1, table, u);
}

// ---------------------------------------------------------------------------
// The trees and the node sets.

// The MAC's radius of every cell: the sphere that holds its nodes, `r`
// half sides (far/nodes.rs `Basis::radius`; methods/fmm/cpu_nodes.rs
// `node_spheres`), in place of the farthest particle's distance.
extern "C" __global__ void far_nodes_radius(const int n_cells, const double r,
                                            const double* __restrict__ half,
                                            double* __restrict__ radius)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n_cells) radius[c] = __dmul_rn(r, half[c]);
}

// The positions of every cell's nodes, centre + half node (`nodes` in the
// unit frame, 3 a node), as far/nodes.rs `node_sources` and `m2l` place
// them: one thread per (cell, node).
template <typename T>
__device__ void positions(const int n_cells, const int k, const double* __restrict__ nodes,
                          const double* __restrict__ cx, const double* __restrict__ cy,
                          const double* __restrict__ cz, const double* __restrict__ half,
                          T* __restrict__ x, T* __restrict__ y, T* __restrict__ z)
{
    const long long t = item();
    if (t >= (long long)n_cells * k) return;
    const int c = (int)(t / k), i = (int)(t % k);
    const double h = half[c];
    x[t] = (T)__dadd_rn(cx[c], __dmul_rn(h, nodes[3 * i]));
    y[t] = (T)__dadd_rn(cy[c], __dmul_rn(h, nodes[3 * i + 1]));
    z[t] = (T)__dadd_rn(cz[c], __dmul_rn(h, nodes[3 * i + 2]));
}

// ---------------------------------------------------------------------------
// Upward pass. Node strengths q[(c k + i) nq + s], strength component s.

// P2M: one thread per (cell, node), for the leaves: the leaf's particles in
// turn (tree order, as the CPU), each adding weight * q_s for every
// strength component (`qs`: the addresses of the strength slots' arrays).
template <typename T>
__device__ void p2m(const int n_cells, const int kind, const int p, const int k,
                    const double* __restrict__ table, const double rs,
                    const int* __restrict__ n_children, const int* __restrict__ begin,
                    const int* __restrict__ end, const double* __restrict__ cx,
                    const double* __restrict__ cy, const double* __restrict__ cz,
                    const double* __restrict__ half, const T* __restrict__ x,
                    const T* __restrict__ y, const T* __restrict__ z, const int nq,
                    const u64* __restrict__ qs, double* __restrict__ q)
{
    const long long t = item();
    if (t >= (long long)n_cells * k) return;
    const int c = (int)(t / k), i = (int)(t % k);
    if (n_children[c] != 0) return;
    double acc[MAX_SLOTS];
    for (int s = 0; s < nq; ++s) acc[s] = 0.0;
    const double ox = cx[c], oy = cy[c], oz = cz[c], h = half[c];
    for (int j = begin[c]; j < end[c]; ++j) {
        double u[3];
        unit_frame((double)x[j], (double)y[j], (double)z[j], ox, oy, oz, h, u);
        const double w = node_weight(kind, p, k, table, rs, i, u);
        for (int s = 0; s < nq; ++s) {
            const double v = (double)((const T*)qs[s])[j];
            if (v != 0.0) acc[s] = madd(acc[s], w, v);
        }
    }
    for (int s = 0; s < nq; ++s) q[t * nq + s] = acc[s];
}

// P2M straight from the particles to the Chebyshev nodes of chosen cells,
// at any level (the local essential tree's cells: a few of a large tree,
// where an upward pass over every cell cost more than the rest of its
// build). One block a run of at most `run` particles of one cell (run t:
// cell u = run_cell[t] of the chosen ones, particles run_begin[t] ..
// run_end[t] in tree order); the run's 1D weights and strengths in shared
// memory, each run's sums added to q[(u k + i) nq + s] with atomics. The
// runs of a cell add in any order: equal to the upward pass's strengths to
// round-off, not to the last bit.
//
// A thread sums a line of SIDE nodes along x (one y and z index) over a
// share of the run's particles, in registers: a particle's y z weight and
// strength are read once for the line, where a thread a node read its
// three weights for every node (the shared memory's reads, not the
// arithmetic, bounded it). Where a block has threads for more than one
// set of lines, the sets take alternate particles and add their sums in
// shared memory (`partial`, (sets - 1) k doubles) before the atomics.
template <int SIDE>
__device__ void p2m_lines(const int u, const int m, const int nq, const double* w,
                          const double* qv, double* partial, double* __restrict__ q)
{
    const int lines = SIDE * SIDE, k = lines * SIDE;
    const int sets = blockDim.x >= lines ? blockDim.x / lines : 1;
    const int passes = sets > 1 ? 1 : (lines + blockDim.x - 1) / blockDim.x;
    for (int s = 0; s < nq; ++s) {
        for (int pass = 0; pass < passes; ++pass) {
            const int t = threadIdx.x + pass * blockDim.x;
            const bool active = t < lines * sets;
            const int line = t % lines, set = t / lines;
            const int iy = line % SIDE, iz = line / SIDE;
            double acc[SIDE];
#pragma unroll
            for (int ix = 0; ix < SIDE; ++ix) acc[ix] = 0.0;
            if (active) {
                for (int j = set; j < m; j += sets) {
                    const double* wj = w + j * 3 * SIDE;
                    const double yz = wj[SIDE + iy] * wj[2 * SIDE + iz] * qv[j * nq + s];
#pragma unroll
                    for (int ix = 0; ix < SIDE; ++ix) acc[ix] += wj[ix] * yz;
                }
            }
            if (sets > 1) {
                __syncthreads();  // the last component's partial sums read
                if (active && set > 0) {
#pragma unroll
                    for (int ix = 0; ix < SIDE; ++ix)
                        partial[((set - 1) * lines + line) * SIDE + ix] = acc[ix];
                }
                __syncthreads();
                if (active && set == 0) {
                    for (int o = 1; o < sets; ++o) {
#pragma unroll
                        for (int ix = 0; ix < SIDE; ++ix)
                            acc[ix] += partial[((o - 1) * lines + line) * SIDE + ix];
                    }
                }
            }
            if (active && set == 0) {
#pragma unroll
                for (int ix = 0; ix < SIDE; ++ix) {
                    const int i = ix + SIDE * (iy + SIDE * iz);
                    atomicAdd(q + ((long long)u * k + i) * nq + s, acc[ix]);
                }
            }
        }
    }
}

template <typename T>
__device__ void p2m_cells(const int run, const int* __restrict__ run_cell,
                          const int* __restrict__ run_begin,
                          const int* __restrict__ run_end, const double* __restrict__ cx,
                          const double* __restrict__ cy, const double* __restrict__ cz,
                          const double* __restrict__ half, const int p, const int k,
                          const double* __restrict__ table, const T* __restrict__ x,
                          const T* __restrict__ y, const T* __restrict__ z, const int nq,
                          const u64* __restrict__ qs, double* __restrict__ q)
{
    extern __shared__ double shared[];
    const int side = p + 1, t = blockIdx.x;
    const int u = run_cell[t], b = run_begin[t], m = run_end[t] - b;
    double* w = shared;                          // [j][axis][side]
    double* qv = shared + run * 3 * side;        // [j][s]
    double* partial = qv + run * nq;             // [set - 1][line][x]
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
        double f[3];
        unit_frame((double)x[b + j], (double)y[b + j], (double)z[b + j], cx[u], cy[u], cz[u],
                   half[u], f);
        for (int a = 0; a < 3; ++a) chebyshev_1d(f[a], side, table, w + (j * 3 + a) * side);
        for (int s = 0; s < nq; ++s) qv[j * nq + s] = (double)((const T*)qs[s])[b + j];
    }
    __syncthreads();
    switch (side) {
    case 3: p2m_lines<3>(u, m, nq, w, qv, partial, q); return;
    case 4: p2m_lines<4>(u, m, nq, w, qv, partial, q); return;
    case 5: p2m_lines<5>(u, m, nq, w, qv, partial, q); return;
    case 6: p2m_lines<6>(u, m, nq, w, qv, partial, q); return;
    case 7: p2m_lines<7>(u, m, nq, w, qv, partial, q); return;
    case 8: p2m_lines<8>(u, m, nq, w, qv, partial, q); return;
    case 9: p2m_lines<9>(u, m, nq, w, qv, partial, q); return;
    case 10: p2m_lines<10>(u, m, nq, w, qv, partial, q); return;
    case 11: p2m_lines<11>(u, m, nq, w, qv, partial, q); return;
    case 12: p2m_lines<12>(u, m, nq, w, qv, partial, q); return;
    case 13: p2m_lines<13>(u, m, nq, w, qv, partial, q); return;
    default: break;
    }
    // Any other side (orders 1 and past 12): a thread a node.
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        const int ix = i % side, iy = (i / side) % side, iz = i / (side * side);
        double acc[MAX_SLOTS];
        for (int s = 0; s < nq; ++s) acc[s] = 0.0;
        for (int j = 0; j < m; ++j) {
            const double* wj = w + j * 3 * side;
            const double wn = wj[ix] * (wj[side + iy] * wj[2 * side + iz]);
            for (int s = 0; s < nq; ++s) acc[s] += wn * qv[j * nq + s];
        }
        for (int s = 0; s < nq; ++s) atomicAdd(q + ((long long)u * k + i) * nq + s, acc[s]);
    }
}

// M2M: one thread per (cell of a level, node, strength component); the
// children's node strengths (a level deeper, done) through the child
// weights `m` (8 matrices, m[o k k + cn k + i]: parent node i's weight for
// child node cn of a child in octant o), summed child by child, child node
// by child node, as the CPU sums them. Leaves keep their P2M.
extern "C" __global__ void far_nodes_m2m(const int n, const int* __restrict__ cells,
                                         const int* __restrict__ more,
                                         const int* __restrict__ next,
                                         const int* __restrict__ n_children,
                                         const double* __restrict__ cx,
                                         const double* __restrict__ cy,
                                         const double* __restrict__ cz, const int k, const int nq,
                                         const double* __restrict__ m, double* __restrict__ q)
{
    const long long t = item();
    const long long per = (long long)k * nq;
    if (t >= n * per) return;
    const int c = cells[t / per];
    const int i = (int)(t % per) / nq, s = (int)(t % per) % nq;
    if (n_children[c] == 0) return;
    double acc = 0.0;
    int ch = more[c];
    for (int e = 0; e < n_children[c]; ++e) {
        const double* mo = m + (long long)octant(ch, c, cx, cy, cz) * k * k;
        const double* qch = q + (long long)ch * per;
        for (int cn = 0; cn < k; ++cn) {
            const double v = qch[cn * nq + s];
            if (v != 0.0) acc = madd(acc, mo[(long long)cn * k + i], v);
        }
        ch = next[ch];
    }
    q[((long long)c * k + i) * nq + s] = acc;
}

// The node sources' field slots (far/nodes.rs `node_sources`): slot s of
// node i of cell c is the node strength's component slot_q[s] where that
// is not -1, else the cell's mean of the slot (`means[s n_cells + c]`,
// already in T: the cells' monopoles, far/monopole/monopole.cu). `outs`: the addresses of the ns slot arrays. One thread per
// (cell, node).
template <typename T>
__device__ void sources(const int n_cells, const int k, const int nq, const int ns,
                        const int* __restrict__ slot_q, const double* __restrict__ q,
                        const T* __restrict__ means, const u64* __restrict__ outs)
{
    const long long t = item();
    if (t >= (long long)n_cells * k) return;
    const int c = (int)(t / k);
    for (int s = 0; s < ns; ++s) {
        const int at = slot_q[s];
        ((T*)outs[s])[t] = at >= 0 ? (T)q[t * nq + at] : means[(long long)s * n_cells + c];
    }
}

// ---------------------------------------------------------------------------
// Around the M2L (the kernel's P2P-list entry from the source cells' node
// sources to a target cell's nodes, once per target-field basis b: all
// target fields 0 for b = 0, field b - 1 one for b > 0).

// `out[0..n] = v`: the unit target field of a basis.
template <typename T>
__device__ void fill(const int n, const double v, T* __restrict__ out)
{
    const long long t = item();
    if (t < n) out[t] = (T)v;
}

// The M2L's outputs at basis b into the local values
// local[(c k + i) n_channels + b no + o]: for b = 0 the outputs, for b > 0
// the outputs less b = 0's (the coefficient of target field b - 1; the
// kernel is affine in the target's fields), in double as far/nodes.rs
// `m2l` takes them. `outs`: the addresses of the no output arrays (one
// value a node). One thread per (node, output slot).
template <typename T>
__device__ void channels(const int n, const int no, const int n_channels, const int b,
                         const u64* __restrict__ outs, double* __restrict__ local)
{
    const long long t = item();
    if (t >= (long long)n * no) return;
    const long long i = t / no;
    const int o = (int)(t % no);
    const double v = (double)((const T*)outs[o])[i];
    double* l = local + i * n_channels;
    l[b * no + o] = b == 0 ? v : __dsub_rn(v, l[o]);
}

// ---------------------------------------------------------------------------
// Downward pass.

// L2L: one thread per (cell of a level, node, channel): the parent's values
// (a level up, done) interpolated at the cell's node by the child weights
// and added, summed over the parent's nodes in the CPU's order.
extern "C" __global__ void far_nodes_l2l(const int n, const int* __restrict__ cells,
                                         const int* __restrict__ parent,
                                         const double* __restrict__ cx,
                                         const double* __restrict__ cy,
                                         const double* __restrict__ cz, const int k,
                                         const int n_channels, const double* __restrict__ m,
                                         double* __restrict__ local)
{
    const long long t = item();
    const long long per = (long long)k * n_channels;
    if (t >= n * per) return;
    const int c = cells[t / per];
    const int cn = (int)(t % per) / n_channels, j = (int)(t % per) % n_channels;
    const int pc = parent[c];
    const double* row = m + (long long)octant(c, pc, cx, cy, cz) * k * k + (long long)cn * k;
    const double* lp = local + (long long)pc * per;
    double acc = 0.0;
    for (int i = 0; i < k; ++i) {
        const double w = row[i];
        if (w != 0.0) acc = madd(acc, w, lp[(long long)i * n_channels + j]);
    }
    double* l = local + (long long)c * per + (long long)cn * n_channels + j;
    *l = __dadd_rn(*l, acc);
}

// One node's part of a target's outputs: its weight times its values,
// with the target's fields tv contracted with their channels.
__device__ __forceinline__ void l2p_node(double w, const double* __restrict__ l, const int no,
                                         const int nt, const double* tv, double* out)
{
    for (int o = 0; o < no; ++o) {
        double v = l[o];
        for (int s = 0; s < nt; ++s) v = madd(v, tv[s], l[(s + 1) * no + o]);
        out[o] = madd(out[o], w, v);
    }
}

// L2P: one thread per target (tree order, in leaf leaf_of[i]): the leaf's
// values interpolated at the target (far/nodes.rs `l2p`), written (not
// added) to the output arrays (`outs`, one address a slot); the target's
// own fields from `tslots` (nt addresses). Chebyshev's weights as the
// tensor product of three 1D weight rows, computed once.
template <typename T>
__device__ void l2p(const int n, const int* __restrict__ leaf_of, const double* __restrict__ cx,
                    const double* __restrict__ cy, const double* __restrict__ cz,
                    const double* __restrict__ half, const T* __restrict__ x,
                    const T* __restrict__ y, const T* __restrict__ z, const int kind, const int p,
                    const int k, const double* __restrict__ table, const double rs,
                    const int n_channels, const int no, const int nt,
                    const u64* __restrict__ tslots, const double* __restrict__ local,
                    const u64* __restrict__ outs)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int c = leaf_of[i];
    double u[3];
    unit_frame((double)x[i], (double)y[i], (double)z[i], cx[c], cy[c], cz[c], half[c], u);
    double out[MAX_SLOTS], tv[MAX_SLOTS];
    for (int o = 0; o < no; ++o) out[o] = 0.0;
    for (int s = 0; s < nt; ++s) tv[s] = (double)((const T*)tslots[s])[i];
    const double* lc = local + (long long)c * k * n_channels;
    if (kind == KIND_PPM) {
        const double s2 = ppm_s2(u, rs);
        for (int node = 0; node < k; ++node)
            l2p_node(ppm_node(table + 3 * node, p, k, rs, s2, u), lc + (long long)node * n_channels,
                     no, nt, tv, out);
    } else {
        const int side = p + 1;
        double w[3][MAX_SIDE];
        for (int a = 0; a < 3; ++a) chebyshev_1d(u[a], side, table, w[a]);
        int node = 0;
        for (int iz = 0; iz < side; ++iz) {
            for (int iy = 0; iy < side; ++iy) {
                const double wyz = __dmul_rn(w[1][iy], w[2][iz]);
                for (int ix = 0; ix < side; ++ix, ++node)
                    l2p_node(__dmul_rn(w[0][ix], wyz), lc + (long long)node * n_channels, no, nt,
                             tv, out);
            }
        }
    }
    for (int o = 0; o < no; ++o) ((T*)outs[o])[i] = (T)out[o];
}

// ---------------------------------------------------------------------------
// Entry points per precision (of the particles and node sets).

#define PRECISION(T, S)                                                                            \
    extern "C" __global__ void far_nodes_positions_##S(                                            \
        const int n_cells, const int k, const double* __restrict__ nodes,                          \
        const double* __restrict__ cx, const double* __restrict__ cy,                              \
        const double* __restrict__ cz, const double* __restrict__ half, T* __restrict__ x,         \
        T* __restrict__ y, T* __restrict__ z)                                                      \
    {                                                                                              \
        positions<T>(n_cells, k, nodes, cx, cy, cz, half, x, y, z);                                \
    }                                                                                              \
    extern "C" __global__ void far_nodes_p2m_##S(                                                  \
        const int n_cells, const int kind, const int p, const int k,                               \
        const double* __restrict__ table, const double rs, const int* __restrict__ n_children,     \
        const int* __restrict__ begin, const int* __restrict__ end,                                \
        const double* __restrict__ cx, const double* __restrict__ cy,                              \
        const double* __restrict__ cz, const double* __restrict__ half,                            \
        const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ z, const int nq,   \
        const u64* __restrict__ qs, double* __restrict__ q)                                        \
    {                                                                                              \
        p2m<T>(n_cells, kind, p, k, table, rs, n_children, begin, end, cx, cy, cz, half, x, y, z,  \
               nq, qs, q);                                                                         \
    }                                                                                              \
    extern "C" __global__ void far_nodes_p2m_cells_##S(                                            \
        const int run, const int* __restrict__ run_cell, const int* __restrict__ run_begin,        \
        const int* __restrict__ run_end, const double* __restrict__ cx,                            \
        const double* __restrict__ cy, const double* __restrict__ cz,                              \
        const double* __restrict__ half, const int p, const int k,                                 \
        const double* __restrict__ table, const T* __restrict__ x, const T* __restrict__ y,        \
        const T* __restrict__ z, const int nq, const u64* __restrict__ qs, double* __restrict__ q) \
    {                                                                                              \
        p2m_cells<T>(run, run_cell, run_begin, run_end, cx, cy, cz, half, p, k, table, x, y, z, nq, \
                     qs, q);                                                                       \
    }                                                                                              \
    extern "C" __global__ void far_nodes_sources_##S(                                              \
        const int n_cells, const int k, const int nq, const int ns,                                \
        const int* __restrict__ slot_q, const double* __restrict__ q,                              \
        const T* __restrict__ means, const u64* __restrict__ outs)                                 \
    {                                                                                              \
        sources<T>(n_cells, k, nq, ns, slot_q, q, means, outs);                                    \
    }                                                                                              \
    extern "C" __global__ void far_nodes_fill_##S(const int n, const double v,                    \
                                                  T* __restrict__ out)                             \
    {                                                                                              \
        fill<T>(n, v, out);                                                                        \
    }                                                                                              \
    extern "C" __global__ void far_nodes_channels_##S(                                             \
        const int n, const int no, const int n_channels, const int b,                              \
        const u64* __restrict__ outs, double* __restrict__ local)                                  \
    {                                                                                              \
        channels<T>(n, no, n_channels, b, outs, local);                                            \
    }                                                                                              \
    extern "C" __global__ void far_nodes_l2p_##S(                                                  \
        const int n, const int* __restrict__ leaf_of, const double* __restrict__ cx,               \
        const double* __restrict__ cy, const double* __restrict__ cz,                              \
        const double* __restrict__ half, const T* __restrict__ x, const T* __restrict__ y,         \
        const T* __restrict__ z, const int kind, const int p, const int k,                         \
        const double* __restrict__ table, const double rs, const int n_channels, const int no,     \
        const int nt, const u64* __restrict__ tslots, const double* __restrict__ local,            \
        const u64* __restrict__ outs)                                                              \
    {                                                                                              \
        l2p<T>(n, leaf_of, cx, cy, cz, half, x, y, z, kind, p, k, table, rs, n_channels, no, nt,   \
               tslots, local, outs);                                                               \
    }

PRECISION(float, f32)
PRECISION(double, f64)
