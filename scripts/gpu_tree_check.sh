#!/usr/bin/env bash
# One GPU run for the tree and the treecode: the device tree against the
# CPU tree, the GPU treecode against the CPU treecode, then timings and the
# N log N fit. Run on the GPU host from the repository root after
# scripts/stage_gpu.sh staged .gpu/ here.
set -u
source "$(dirname "$0")/gpu_unpack.sh"
export FMM_CACHE_DIR=/tmp/fmm-cache
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
echo "== device tree against the CPU tree"
timeout 200 .gpu/suite --ignored --test-threads=1 --nocapture gpu_tree:: 2>&1 | grep -E "^test |result|panicked|GPU build" | head -30
echo "== GPU against CPU"
timeout 300 .gpu/suite --ignored --test-threads=1 --nocapture gpu:: 2>&1 | grep -E "^test |walk|theta|GPU vs|panicked|result" | head -30
echo "== tree_bench (gravity, Plummer, theta 0.5)"
tb() {
  echo "-- $*"
  timeout 120 .gpu/tree_bench --backend cuda --theta 0.5 --repeat 5 "$@" 2>&1 \
    | grep -E "^time|  trees|  walk|uploads|downloads|interactions|relative|force error|cells|error"
}
tb --n 1000000
tb --n 10000000
tb --n 10000000 --ncrit 64
tb --n 10000000 --ncrit 16
tb --n 10000000 --precision f64 --samples 64
tb --n 1000000 --kernel biot-savart
tb --n 1000000 --kernel velocity-stretching
echo "== scaling"
timeout 200 bash scripts/tree_scaling.sh cuda .gpu/tree_bench
