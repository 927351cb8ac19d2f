#!/usr/bin/env bash
# One GPU run for scale and settings: the resident and 2^31-entry tests,
# the FMM's tolerance against explicit settings (the GPU table), the time
# without host copies (--resident), and the largest N the FMM and the
# treecode run on one GPU (--lean: particles drawn straight into f32).
# Run on the GPU host from the repository root after scripts/stage_gpu.sh;
# logs under $OUT. Usage: scripts/gpu_scale_check.sh [tests|settings|scale|all]
set -u
source "$(dirname "$0")/gpu_unpack.sh"
OUT=${OUT:-/tmp/fmm-out}
mkdir -p "$OUT"
export FMM_CACHE_DIR=/tmp/fmm-cache
what=${1:-all}
nvidia-smi --query-gpu=name,clocks.sm,memory.total --format=csv,noheader
fb() { # log name, then fmm_bench arguments; fails when the run does
  local log=$1; shift
  echo "-- $*" | tee -a "$OUT/$log"
  local rc=0
  timeout 300 .gpu/fmm_bench --backend cuda "$@" >>"$OUT/$log" 2>&1 || rc=$?
  tail -n 30 "$OUT/$log" | grep -E "^time per|^tolerance|^upload|^download|^relative|^work|FMM cannot|error:" | tail -6
  [ $rc = 0 ] || echo "   FAILED ($rc)" | tee -a "$OUT/$log"
  return $rc
}
if [ "$what" = tests ] || [ "$what" = all ]; then
  for t in gpu_scale gpu_fmm; do
    echo "== $t"
    timeout 500 .gpu/suite --ignored --test-threads=1 --nocapture "$t::" >"$OUT/$t.log" 2>&1
    grep -E "^test |panicked|result|resident|N = 1e7|tolerance" "$OUT/$t.log" | head -30
  done
fi
if [ "$what" = settings ] || [ "$what" = all ]; then
  echo "== tolerance against explicit settings, 10^7 gravity, cube"
  for tol in 1e-5 1e-6; do fb settings.log --params 0 --n 10000000 --tol $tol --samples 256 --repeat 3; done
  for pt in "8 0.6" "9 0.6" "10 0.6" "11 0.6" "12 0.6" "8 0.5" "10 0.5" "12 0.7" "14 0.7"; do
    set -- $pt
    fb settings.log --params 0 --n 10000000 --p $1 --theta $2 --samples 256 --repeat 3
  done
  echo "== resident (no host copies), 10^7"
  fb settings.log --params 0 --n 10000000 --p 6 --theta 0.7 --samples 256 --repeat 5 --resident
  fb settings.log --method tree --dist plummer --n 10000000 --theta 0.5 --ncrit 32 --samples 256 --repeat 5 --resident
fi
if [ "$what" = scale ] || [ "$what" = all ]; then
  echo "== largest N, FMM gravity p 6 theta 0.7 (f32, cube)"
  for n in 100000000 200000000 300000000 500000000 700000000 1000000000; do
    fb scale.log --lean --params 0 --n $n --p 6 --theta 0.7 --samples 64 --repeat 1 || break
  done
  echo "== largest N, treecode theta 0.5 (f32, cube)"
  for n in 100000000 300000000 500000000 1000000000; do
    fb scale.log --lean --method tree --n $n --theta 0.5 --ncrit 32 --samples 64 --repeat 1 || break
  done
fi
