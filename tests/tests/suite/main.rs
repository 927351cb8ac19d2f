//! The integration tests, one binary: each file a module, named as the
//! file (`cargo test -p fmm-tests --test suite far_field::` runs one).
//! One binary builds the generic methods for the test kernels once,
//! where one binary a file built them once a file (most of the build
//! time of `cargo test`). Tests that need a process of their own (an
//! environment variable, a process-wide cache, trybuild) are the other
//! files of `tests/tests/`. The GPU tests are marked ignored; on a GPU
//! host `scripts/gpu_check.sh` runs them (`--ignored gpu::` and the
//! others by module).

mod accuracy;
mod backend;
mod conformance;
mod custom_kernels;
mod far_field;
mod flops;
mod fmm;
mod generated_vs_ir;
mod gpu;
mod gpu_essential;
mod gpu_fmm;
mod gpu_periodic;
mod gpu_scale;
mod gpu_tree;
mod gpu_vortex;
mod invariants;
mod kernels_stokes;
mod nvrtc_compile;
mod periodic;
mod reference;
mod runtime_errors;
mod short_range;
mod treecode;
mod wall;
