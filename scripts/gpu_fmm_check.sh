#!/usr/bin/env bash
# One GPU run for the FMM: the GPU FMM against the CPU FMM and the direct
# sum, then timings per stage. Run on the GPU host from the repository root
# after scripts/stage_gpu.sh staged .gpu/ here.
set -u
export FMM_CACHE_DIR=/tmp/fmm-cache
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
echo "== GPU FMM against the CPU FMM and the direct sum"
timeout 300 .gpu/gpu_fmm --ignored --test-threads=1 --nocapture 2>&1 | grep -E "^test |GPU vs|f32 gravity|panicked|result|error" | head -40
echo "== fmm_bench (f32, uniform cube)"
fb() {
  echo "-- $*"
  timeout 150 .gpu/fmm_bench --backend cuda "$@" 2>&1 \
    | grep -E "^time|^  |work|relative|error"
}
fb --params 0 --n 1000000 --p 6 --theta 0.5 --repeat 3
fb --params 0 --n 10000000 --p 6 --theta 0.5 --samples 64 --repeat 3
fb --params 0 --n 10000000 --p 5 --theta 0.6 --samples 64 --repeat 3
fb --params 0 --n 10000000 --p 4 --theta 0.5 --samples 64 --repeat 3
for sh in 16384 32768; do
  echo "FMM_GPU_M2L_SHARED=$sh"
  FMM_GPU_M2L_SHARED=$sh fb --params 0 --n 10000000 --p 6 --theta 0.5 --samples 0 --repeat 2
done
fb --n 1000000 --p 8 --theta 0.5 --kernel velocity-stretching --samples 64 --repeat 3
fb --n 10000000 --p 8 --theta 0.5 --kernel velocity-stretching --samples 32 --repeat 1
fb --n 10000000 --p 6 --theta 0.5 --kernel velocity-stretching --samples 32 --repeat 1
echo "== scaling (p 5, theta 0.6)"
timeout 400 bash scripts/fmm_scaling.sh cuda .gpu/fmm_bench 100000 300000 1000000 3000000 10000000 30000000 100000000
