#!/usr/bin/env bash
# The tolerance on the GPU (issue 27), run on the GPU host from the
# repository root after scripts/stage_gpu.sh staged .gpu/ here; logs under
# $OUT. Correctness first (the GPU FMM tests, the conformance matrix's GPU
# rows, Method::tolerance on the GPU), then timings: the direct sum's
# rate in f32 and f64 (the prediction's table), velocity + stretching at
# --tol 1e-4 against the explicit setting side by side, gravity at 1e-5,
# and Method::tolerance where the direct sum should win.
# Usage: scripts/gpu_tolerance_check.sh [tests|timings|vs|all] (vs: only
# velocity + stretching)
set -uo pipefail
source "$(dirname "$0")/gpu_unpack.sh"
what=${1:-all}
OUT=${OUT:-/tmp/gpu_tolerance}
mkdir -p "$OUT"
export FMM_CACHE_DIR=/tmp/fmm-cache
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
B=.gpu
run() { local name=$1; shift; echo "== $name"; timeout "${LIMIT:-240}" "$@" >"$OUT/$name.log" 2>&1; echo "rc $?" >>"$OUT/$name.log"; }
show() { grep -E "$2" "$OUT/$1.log" | head -${3:-20}; }

if [ "$what" = tests ] || [ "$what" = all ]; then
run gpu_fmm $B/suite --ignored --test-threads=1 --nocapture gpu_fmm::
show gpu_fmm "^test |panicked|result|N = |tolerance" 40
run conformance $B/suite --ignored --test-threads=1 --nocapture conformance::gpu_
show conformance "^test |panicked|result"
run gpu_direct_tree $B/suite --ignored --test-threads=1 gpu:: gpu_tree::
show gpu_direct_tree "panicked|result"
fi
[ "$what" = tests ] && exit 0

[ "$what" = vs ] || for prec in f32 f64; do
  run "direct_$prec" $B/direct_bench --backend cuda --kernel gravity --n 1048576 --precision $prec
  show "direct_$prec" "interactions|time|error" 6
done

# Every run of the tolerance's drive said (FMM_TRACE).
export FMM_TRACE=1
vs=($B/fmm_bench --backend cuda --precision f32 --kernel velocity-stretching --resident)
for n in 1000000 10000000; do
  run "vs_explicit_$n" "${vs[@]}" --n $n --p 9 --theta 0.55
  show "vs_explicit_$n" "time per|first|relative" 4
  run "vs_fmm_tol_$n" "${vs[@]}" --n $n --tol 1e-4
  show "vs_fmm_tol_$n" "time per|first|tolerance|relative|\[fmm\]" 16
  run "vs_tolerance_$n" "${vs[@]}" --n $n --method tolerance --tol 1e-4
  show "vs_tolerance_$n" "time per|first|tolerance|relative|\[fmm\]" 16
done

[ "$what" = vs ] && exit 0
run gravity_1e5 $B/fmm_bench --backend cuda --precision f32 --kernel gravity --params 0 --n 10000000 --tol 1e-5
show gravity_1e5 "time per|first|tolerance|relative" 5
for n in 3000 30000 300000; do
  run "gravity_tolerance_$n" $B/fmm_bench --backend cuda --precision f64 --kernel gravity --params 0 --n $n --method tolerance --tol 1e-6
  show "gravity_tolerance_$n" "time per|first|tolerance|relative" 5
  run "gravity_direct_$n" $B/fmm_bench --backend cuda --precision f64 --kernel gravity --params 0 --n $n --method direct
  show "gravity_direct_$n" "time per" 2
done
