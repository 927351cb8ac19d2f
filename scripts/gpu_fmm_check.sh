#!/usr/bin/env bash
# One GPU run for the FMM: the GPU FMM against the CPU FMM and the direct
# sum, then timings per stage, the scaling and the GPU accuracy table. Run
# on the GPU host from the repository root after scripts/stage_gpu.sh
# staged .gpu/ here.
set -u
source "$(dirname "$0")/gpu_unpack.sh"
export FMM_CACHE_DIR=/tmp/fmm-cache
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
echo "== GPU FMM against the CPU FMM and the direct sum"
timeout 300 .gpu/suite --ignored --test-threads=1 --nocapture gpu_fmm:: 2>&1 | grep -E "^test |GPU vs|GPU against|f32 gravity|velocity|tolerance|panicked|result|error" | head -60
echo "== fmm_bench (f32, uniform cube)"
fb() {
  echo "-- $*"
  timeout 150 .gpu/fmm_bench --backend cuda "$@" 2>&1 \
    | grep -E "^time|^tolerance|^  |work|relative|error"
}
fb --params 0 --n 1000000 --p 6 --theta 0.5 --repeat 3
# The target case: 10^7 gravity at 1e-4 (error on 1024 sampled targets).
fb --params 0 --n 10000000 --p 6 --theta 0.7 --samples 1024 --repeat 5
fb --params 0 --n 10000000 --p 7 --theta 0.7 --samples 256 --repeat 3
fb --params 0 --n 10000000 --p 5 --theta 0.6 --samples 256 --repeat 3
echo "double M2L (--m2l f64)"
fb --params 0 --n 10000000 --p 6 --theta 0.7 --samples 0 --repeat 3 --m2l f64
fb --params 0 --n 10000000 --tol 1e-4 --repeat 1
# The vortex target: velocity and stretching at 10^7, 1e-4 in 0.5 s.
fb --n 10000000 --p 9 --theta 0.55 --kernel velocity-stretching --samples 256 --repeat 5
fb --n 10000000 --p 8 --theta 0.5 --kernel velocity-stretching --samples 64 --repeat 3
# The node far fields (the kernel's own M2L between node sets): softened
# gravity by Chebyshev nodes, unsoftened by pseudo-particles, Yukawa (ki
# from its declaration) at a tolerance.
echo "node far fields"
fb --n 1000000 --far-field ki --p 4 --theta 0.7 --samples 256 --repeat 3
fb --n 1000000 --far-field ppm --p 6 --theta 0.6 --params 0 --samples 256 --repeat 3
fb --n 1000000 --far-field ki --p 4 --theta 0.7 --kernel velocity-stretching --samples 64 --repeat 3
fb --n 1000000 --far-field ki --tol 1e-6 --precision f64 --samples 256 --repeat 1
echo "== scaling (p 6, theta 0.7)"
FMM_SCALING_ARGS="--p 6 --theta 0.7" timeout 300 bash scripts/fmm_scaling.sh cuda .gpu/fmm_bench 100000 300000 1000000 3000000 10000000 30000000 100000000
echo "== accuracy table on the GPU"
timeout 300 bash scripts/fmm_accuracy.sh cuda .gpu/fmm_bench
