#!/usr/bin/env bash
# One GPU run for the front door: the GPU tests of every method (against
# the CPU and the f64 direct sum), then the headline timings of each method
# on one GPU (README "Measured"). Run on the GPU host from the repository
# root after scripts/stage_gpu.sh staged .gpu/ here; logs under $OUT.
# Usage: scripts/gpu_headline.sh [tests|timings|all]
set -u
source "$(dirname "$0")/gpu_unpack.sh"
OUT=${OUT:-/tmp/fmm-out}
mkdir -p "$OUT"
export FMM_CACHE_DIR=/tmp/fmm-cache
what=${1:-all}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
if [ "$what" != timings ]; then
  for t in gpu gpu_tree gpu_fmm gpu_scale gpu_vortex conformance; do
    echo "== $t"
    timeout 400 .gpu/suite --ignored --test-threads=1 --nocapture "$t::" >"$OUT/$t.log" 2>&1
    grep -E "^test |panicked|result" "$OUT/$t.log"
  done
fi
[ "$what" = tests ] && exit 0
echo "== timings"
run() { # name, then the command
  local name=$1; shift
  echo "-- $name: $*" | tee -a "$OUT/timings.log"
  timeout 240 "$@" >>"$OUT/timings.log" 2>&1 || echo "   FAILED ($?)" | tee -a "$OUT/timings.log"
  tail -n 40 "$OUT/timings.log" | grep -E "^time per|^kernel time|^interactions/s|^relative|^tolerance|^  M2L|^  P2P|^  walk|^  uploads|^  downloads|^  error|FMM cannot" | tail -9
}
run direct .gpu/direct_bench --backend cuda --kernel gravity --n 1048576 --repeat 5 --check
run treecode .gpu/tree_bench --backend cuda --n 10000000 --dist plummer --theta 0.5 --repeat 5 --samples 256
run fmm-gravity .gpu/fmm_bench --backend cuda --params 0 --n 10000000 --p 6 --theta 0.7 --samples 1024 --repeat 5
run fmm-vortex .gpu/fmm_bench --backend cuda --n 10000000 --kernel velocity-stretching --p 9 --theta 0.55 --samples 256 --repeat 5
run fmm-tolerance .gpu/fmm_bench --backend cuda --params 0 --n 10000000 --tol 1e-4 --samples 1024 --repeat 3
run fmm-tolerance-5 .gpu/fmm_bench --backend cuda --params 0 --n 10000000 --tol 1e-5 --samples 256 --repeat 3
run fmm-tolerance-6 .gpu/fmm_bench --backend cuda --params 0 --n 10000000 --tol 1e-6 --samples 256 --repeat 3
