//! The trait every DSL kernel implements, and the source view the CPU
//! evaluators read.

use crate::real::Real;
use fmm_codegen::{FlopCount, KernelDef};

/// The most scalar slots a kernel may have in each group (parameters,
/// source fields, target fields, outputs). Checked by the `kernel!` macro.
pub const MAX_SLOTS: usize = fmm_codegen::lower::MAX_SLOTS;

/// A pairwise interaction kernel, as the `kernel!` macro generates it.
///
/// Everything about the kernel comes from [`Kernel::def`], the checked IR of
/// the declaration; the CPU evaluator [`Kernel::p2p_target`] is code the
/// macro generated from that same IR.
pub trait Kernel: Copy + Default + Send + Sync + 'static {
    /// The checked IR of the declaration (layout, math, far field).
    fn def() -> &'static KernelDef;

    /// The CUDA C source of one module of the kernel: the entry points of
    /// one GPU method ([`fmm_codegen::emit::Module`]), each with its own
    /// prologue, so that each method's module is compiled and cached on its
    /// own (a new method adds a module rather than changing every one).
    /// The arguments of the entry points are
    /// `fmm_codegen::emit::signature::Signature`s.
    fn cuda_source(module: fmm_codegen::emit::Module) -> &'static str;

    /// Adds the interaction of the sources `sources` (indices into `src`)
    /// to the outputs `out` of one target at `xi` with target fields `t`;
    /// `p` holds the parameters. All are flattened slots in declaration
    /// order. (A range rather than a sub-view: the tree codes call this for
    /// many short runs, and cutting every slot of a view costs more than
    /// the interactions of a short run.)
    ///
    /// On x86-64 with AVX2 and FMA this runs [`Kernel::p2p_target_wide`],
    /// elsewhere (or with `FMM_SIMD=off`) [`Kernel::p2p_target_portable`].
    #[inline]
    fn p2p_target<R: Real>(
        p: &[R],
        xi: [R; 3],
        t: &[R],
        src: &SourceSlices<'_, R>,
        sources: std::ops::Range<usize>,
        out: &mut [R],
    ) {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA.
            unsafe { Self::p2p_target_wide(p, xi, t, src, sources, out) };
            return;
        }
        Self::p2p_target_portable(p, xi, t, src, sources, out)
    }

    /// [`Kernel::p2p_target`] in plain Rust, vectorised by the compiler
    /// for whatever the build targets.
    fn p2p_target_portable<R: Real>(
        p: &[R],
        xi: [R; 3],
        t: &[R],
        src: &SourceSlices<'_, R>,
        sources: std::ops::Range<usize>,
        out: &mut [R],
    );

    /// The contribution of each source of the range on its own, added at
    /// `out[slot * n + j]` for the range's `j`-th of `n` sources (`out` at
    /// least `n_outputs * n` long; each output's run contiguous, so that
    /// the vector evaluator adds whole vectors): the matrix of the interaction rather than its sum,
    /// what the node far fields' M2L operators are built from.
    ///
    /// Vectorised as [`Kernel::p2p_target`] is: [`Kernel::p2p_each_wide`]
    /// where the CPU has AVX2 and FMA, else [`Kernel::p2p_each_portable`].
    #[inline]
    fn p2p_each<R: Real>(
        p: &[R],
        xi: [R; 3],
        t: &[R],
        src: &SourceSlices<'_, R>,
        sources: std::ops::Range<usize>,
        out: &mut [R],
    ) {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA.
            unsafe { Self::p2p_each_wide(p, xi, t, src, sources, out) };
            return;
        }
        Self::p2p_each_portable(p, xi, t, src, sources, out)
    }

    /// [`Kernel::p2p_each`] in plain Rust.
    fn p2p_each_portable<R: Real>(
        p: &[R],
        xi: [R; 3],
        t: &[R],
        src: &SourceSlices<'_, R>,
        sources: std::ops::Range<usize>,
        out: &mut [R],
    );

    /// [`Kernel::p2p_each`] in AVX2 or AVX-512 vectors.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA ([`crate::simd::avx2_fma`]).
    #[cfg(target_arch = "x86_64")]
    unsafe fn p2p_each_wide<R: Real>(
        p: &[R],
        xi: [R; 3],
        t: &[R],
        src: &SourceSlices<'_, R>,
        sources: std::ops::Range<usize>,
        out: &mut [R],
    );

    /// [`Kernel::p2p_target`] in AVX2 vectors ([`crate::simd`]).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA ([`crate::simd::avx2_fma`]).
    #[cfg(target_arch = "x86_64")]
    unsafe fn p2p_target_wide<R: Real>(
        p: &[R],
        xi: [R; 3],
        t: &[R],
        src: &SourceSlices<'_, R>,
        sources: std::ops::Range<usize>,
        out: &mut [R],
    );

    /// The type name of the declaration.
    fn name() -> &'static str {
        &Self::def().name
    }

    /// Flops of one interaction, plain and weighted (yokota2009 Table 2).
    fn flops() -> FlopCount {
        fmm_codegen::flops::count(Self::def())
    }
}

/// A run of sources: positions and field slots as parallel slices of one
/// length. A fixed array of slices, so a view of a sub-range costs no
/// allocation (the tree codes take many).
#[derive(Clone, Copy, Debug)]
pub struct SourceSlices<'a, R> {
    pub pos: [&'a [R]; 3],
    /// Field slots; only the first `n_fields` are meaningful.
    pub fields: [&'a [R]; MAX_SLOTS],
    pub n_fields: usize,
}

impl<'a, R> SourceSlices<'a, R> {
    /// Number of sources.
    pub fn len(&self) -> usize {
        self.pos[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sources `lo..hi`.
    pub fn range(&self, lo: usize, hi: usize) -> SourceSlices<'a, R> {
        let mut fields = self.fields;
        for f in fields.iter_mut().take(self.n_fields) {
            *f = &f[lo..hi];
        }
        SourceSlices {
            pos: self.pos.map(|p| &p[lo..hi]),
            fields,
            n_fields: self.n_fields,
        }
    }
}

/// Sources processed side by side by the generated CPU evaluators: enough
/// independent partial sums for 256-bit SIMD in f32.
pub const LANES: usize = 8;
/// Sources summed into one block partial before it joins the total (the
/// same trick as the per-tile partial sums of the CUDA kernel: f32 sums of
/// millions of terms stay accurate).
pub const BLOCK: usize = 256;
