//! Snapshots of the code generated for the built-in kernels.
//!
//! `tests/snapshots/` holds, for every built-in kernel, the CUDA C source
//! of each of its modules (`<kernel>_direct.cu`, `<kernel>_walk.cu`,
//! `<kernel>_p2p_list.cu`: one per GPU method) and the Rust CPU evaluator
//! that `kernel!` emits, as insta snapshots. A change to the code
//! generator changes them, and the change is reviewed
//! as a diff: run `cargo insta review` (or `INSTA_UPDATE=always cargo test
//! -p fmm-kernels-generated` and read `git diff`).
